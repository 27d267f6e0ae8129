/*
 * order/quorum/quorum_order.cpp: ordering => 'quorum', IDs that rise
 * across the whole cluster with no clock and no serving node.
 *
 * Every hilo_nextval and hilo_take of such a sequence gets its IDs from a
 * window claimed through the quorum register: a majority "set if less
 * than" (core/quorum_register.hpp). A claim reads the highest bound from a
 * majority, and returns only once its own bound is accepted by a majority;
 * any later claim reads a majority that overlaps that one, so it claims
 * above. That is the whole ordering argument: if call a returned before
 * call b started, b's claim was sent after a's was accepted, and b's IDs
 * are larger. No window is kept open between calls (an open window would
 * hand out IDs below ones another node already returned).
 *
 * Batching: the callers of one sequence on this node queue at a gate.
 * The first that finds no claim running sends one claim for every caller
 * queued at that moment (their calls all started before it was sent, so
 * any order among them is linearizable) and
 * hands each its IDs in ticket order; callers that come while it runs wait
 * on the gate's condition variable and find their answer, or lead the next
 * claim. (Not an LWLock held across the claim: the claim runs in
 * subtransactions, whose abort releases every LWLock.) A claim that fails
 * fails every call of its batch with its error, whole (SQLSTATE, message,
 * detail, hint: the ring keeps a copy for their answers); one that finds
 * fewer IDs left than the batch asks is made again for the calls that
 * fit, in ticket order, and fails only the others. A leader that exits
 * (FATAL) answers its batch as failed on the way out. A claim is sized to
 * the batch, so nothing is left over; a caller that goes away before
 * its batch is claimed is left out of it, one that goes away after
 * leaves its IDs unused (a gap, never a repeat). A ticket's slot is
 * reused only when nobody will read it (order/ticket_ring.h).
 *
 * Two things keep a claim short. The gate remembers the end of its last
 * claim, which a majority accepted, and the next claim sets right above it
 * without reading the register first (HiloClaimSpec.guess): one round trip
 * and one durable commit per node instead of two while no other node
 * claims the sequence; a guess another node made stale is rejected, and
 * that claim reads. And a new leader waits a moment for the callers that
 * the last claim answered and that come right back (gather_callers), so
 * that a steady crowd is served by one claim, not by two half batches.
 *
 * Shared memory: HILO_QUORUM_GATES gates, each a ring of tickets
 * (order/ticket_ring.h, the same ring as lease_route.cpp's batches). A gate
 * belongs to one (database, catalog creation, sequence) while it has
 * tickets in flight; an idle gate is taken over by the next sequence that
 * needs one. Gates hold no IDs, so taking one over loses nothing.
 *
 * Why one file of 600 lines: a gate's life (queue a ticket, lead or wait,
 * claim, answer the batch, collect, give up on cancel or exit) is one
 * protocol over one shared structure; the ring's states are
 * order/ticket_ring.h's, and what this file adds to them (who leads, the
 * claim, the guess, the gathering) relies on the others' steps. The claim
 * server (quorum_server.cpp) only drives it.
 */
#include "quorum_shared.h"

#include "../../cluster/agent/agent.h"
#include "../ticket_ring.h"

extern "C" {
#include "access/xact.h"
#include "common/pg_prng.h"
#include "miscadmin.h"
#include "utils/resowner.h"
#include "storage/condition_variable.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/wait_event.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/elog.h"
#include "utils/guc.h"
}

#define HILO_QUORUM_GATES 64
#define HILO_QUORUM_RING 256
#define HILO_QUORUM_MESSAGE_BYTES 200
#define HILO_QUORUM_GATHER_MAX_US 5000

typedef struct QuorumRequest {
    uint64 n;
} QuorumRequest;

typedef struct QuorumAnswer {
    bool served;
    int64 first;
    int sqlerrcode;
    char message[HILO_QUORUM_MESSAGE_BYTES];
} QuorumAnswer;

typedef HiloTicketRing<QuorumRequest, QuorumAnswer, HILO_QUORUM_RING> QuorumRing;

typedef struct QuorumGate {
    /* Protects every field below but `cv`. */
    slock_t mutex;
    Oid dboid;
    uint64 creation;
    int32 seq_id;
    bool busy;     /* a claim runs: its leader took the tickets queued then */
    uint64 claims; /* claims sent through this gate */
    /* The end of this gate's last claim, which a majority accepted: the
     * register stands at least there, so the next claim sets above it
     * without reading first (one round trip; a stale guess is rejected and
     * that claim reads). false after the gate changed hands. */
    bool has_guess;
    int64 guess;
    /* Callers of the last claim plus those that queued while it ran (how
     * many may queue for the next claim), and how long it took. */
    uint64 population;
    int64 last_claim_us;
    TimestampTz claim_started;
    HiloSequence seq;     /* as its latest caller read it: what the claim server claims for */
    ConditionVariable cv; /* a batch was answered, or the gate is free */
    QuorumRing ring;
} QuorumGate;

typedef struct QuorumShared {
    slock_t mutex; /* assigning gates; the claim server's fields */
    /* The claim server (order/quorum/quorum_server.cpp) of database server_db:
     * its callers queue and wake it instead of leading claims. */
    Oid server_db;
    Latch *server_latch;
    QuorumGate gates[HILO_QUORUM_GATES];
} QuorumShared;

static QuorumShared *quorum_shared = NULL;

/* The gate whose claim this backend runs, and the tickets of its batch
 * (in ticket order) with their counts. */
static QuorumGate *leading = NULL;
static uint64 leading_from; /* the gate's first untaken ticket when it took them */
static int leading_n;
static uint64 leading_tickets[HILO_QUORUM_RING];
static uint64 leading_counts[HILO_QUORUM_RING];
/* The gate and ticket this backend waits on, from queueing to collecting. */
static QuorumGate *waiting = NULL;
static uint64 waiting_ticket;
static bool exit_callback_set = false;

static void quorum_init(void)
{
    SpinLockInit(&quorum_shared->mutex);
    for (int i = 0; i < HILO_QUORUM_GATES; i++) {
        QuorumGate *g = &quorum_shared->gates[i];
        SpinLockInit(&g->mutex);
        ConditionVariableInit(&g->cv);
    }
}

static const HiloShmemPart quorum_part = {"hilo_quorum",           sizeof(QuorumShared), NULL, 0,
                                          (void **)&quorum_shared, quorum_init};

void hilo_quorum_shmem_init(void)
{
    hilo_shmem_add_part(&quorum_part);
}

/*
 * How long a caller waits for its batch's answer (or for room to queue):
 * a claim ends within twice hilo.claim_timeout (its own, and
 * claim_what_fits'), its lock waits within half of it each, and a caller
 * may queue behind the claim of the batch before its own: four times
 * hilo.claim_timeout and a second. Then it gives up its ticket (a gap if
 * it is answered later, never a repeat).
 */
static int quorum_wait_ms(void)
{
    return 4 * hilo_claim_timeout_ms + 1000;
}

static bool gate_idle_locked(const QuorumGate *g)
{
    return g->ring.idle() && !g->busy;
}

static bool gate_is_for_locked(const QuorumGate *g, const HiloSequence *seq)
{
    return g->dboid == MyDatabaseId && g->creation == seq->creation && g->seq_id == seq->seq_id;
}

/*
 * The gate of `seq`, holding a ticket for `n` IDs; waits while the gate's
 * ring is full or every gate is in use. Returns the ticket.
 */
static pg_noinline QuorumGate *queue_at_gate(const HiloSequence *seq, uint64 n, uint64 *ticket)
{
    TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), quorum_wait_ms());
    for (;;) {
        QuorumGate *gate = NULL;
        SpinLockAcquire(&quorum_shared->mutex);
        int free_gate = -1;
        for (int i = 0; i < HILO_QUORUM_GATES && gate == NULL; i++) {
            QuorumGate *g = &quorum_shared->gates[i];
            SpinLockAcquire(&g->mutex);
            if (gate_is_for_locked(g, seq))
                gate = g;
            else if (free_gate < 0 && (g->dboid == InvalidOid || gate_idle_locked(g)))
                free_gate = i;
            SpinLockRelease(&g->mutex);
        }
        if (gate == NULL && free_gate >= 0) {
            gate = &quorum_shared->gates[free_gate];
            SpinLockAcquire(&gate->mutex);
            if (gate->dboid == InvalidOid || gate_idle_locked(gate)) {
                gate->dboid = MyDatabaseId;
                gate->creation = seq->creation;
                gate->seq_id = seq->seq_id;
                gate->has_guess = false;
                gate->population = 0;
                gate->last_claim_us = 0;
            }
            SpinLockRelease(&gate->mutex);
        }
        SpinLockRelease(&quorum_shared->mutex);

        if (gate != NULL) {
            bool queued = false;
            QuorumRequest request = {n};
            SpinLockAcquire(&gate->mutex);
            /* Still this sequence's gate, and room in its ring? */
            if (gate_is_for_locked(gate, seq) && gate->ring.queue(request, MyLatch, ticket)) {
                gate->seq = *seq;
                queued = true;
            }
            SpinLockRelease(&gate->mutex);
            if (queued) {
                Latch *server = NULL;
                SpinLockAcquire(&quorum_shared->mutex);
                if (quorum_shared->server_db == MyDatabaseId)
                    server = quorum_shared->server_latch;
                SpinLockRelease(&quorum_shared->mutex);
                if (server != NULL)
                    SetLatch(server);
                return gate;
            }
        }
        /* Every gate in use, or this one's ring full: callers are ahead,
         * each of whom gets its answer or gives up within its own bound. */
        if (GetCurrentTimestamp() >= deadline)
            ereport(ERROR,
                    (errcode(ERRCODE_LOCK_NOT_AVAILABLE),
                     errmsg("hilo sequence \"%s\": no room to queue for a register claim "
                            "within %d ms",
                            seq->name, quorum_wait_ms()),
                     errdetail("Every gate of this node, or this sequence's queue, is full."),
                     errhint("Retry the call.")));
        CHECK_FOR_INTERRUPTS();
        pg_usleep(200L);
    }
}

/* Reads the answer to `ticket` (a failed batch's error into *error) and
 * frees its slot; false while it waits. */
static bool collect_answer(QuorumGate *gate, uint64 ticket, QuorumAnswer *out,
                           HiloRemoteError *error)
{
    SpinLockAcquire(&gate->mutex);
    bool answered = gate->ring.collect(ticket, out, error);
    SpinLockRelease(&gate->mutex);
    return answered;
}

/* A caller that gives up (an error, a cancel) frees its slot: answered
 * now or later, nobody reads it. */
static void abandon_ticket(QuorumGate *gate, uint64 ticket)
{
    SpinLockAcquire(&gate->mutex);
    gate->ring.abandon(ticket);
    SpinLockRelease(&gate->mutex);
}

/* Answers this backend's batch (leading_tickets) with the outcome of one
 * claim, and frees the gate for the next claim: each its share of
 * `window` in ticket order, but those marked in `short_of` (NULL: none),
 * which fail as too large for the IDs left; with no window, every ticket
 * fails with `error`, the one the claim raised, whole (if the ring keeps
 * no copy of it for them, by its SQLSTATE and message). `from`: the first
 * ticket not yet taken when the batch was. */
static pg_noinline void answer_batch(QuorumGate *gate, uint64 from, const HiloRange *window,
                                     const bool *short_of, const HiloRemoteError *error)
{
    SpinLockAcquire(&gate->mutex);
    int64 next = window != NULL ? window->first : 0;
    int kept = window == NULL ? gate->ring.keep_error(*error) : -1;
    for (int i = 0; i < leading_n; i++) {
        QuorumAnswer a;
        a.first = 0;
        a.served = false;
        a.sqlerrcode = 0;
        a.message[0] = '\0';
        if (window != NULL && (short_of == NULL || !short_of[i])) {
            a.first = next;
            next += (int64)leading_counts[i];
            a.served = true;
        } else if (window != NULL) {
            a.sqlerrcode = ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED;
            snprintf(a.message, sizeof(a.message), "fewer than " UINT64_FORMAT " IDs are left",
                     leading_counts[i]);
        } else {
            a.sqlerrcode = error->sqlerrcode;
            strlcpy(a.message, error->message, sizeof(a.message));
        }
        /* Woken by the broadcast below. */
        (void)gate->ring.answer(leading_tickets[i], a, a.served ? -1 : kept);
    }
    if (window != NULL) {
        gate->guess = gate->has_guess ? Max(gate->guess, window->last) : window->last;
        gate->has_guess = true;
    }
    gate->population = gate->ring.next_ticket - from;
    gate->last_claim_us = GetCurrentTimestamp() - gate->claim_started;
    gate->busy = false;
    leading_n = 0;
    SpinLockRelease(&gate->mutex);
    ConditionVariableBroadcast(&gate->cv);
}

/*
 * A leader that exits (FATAL: pg_terminate_backend, a lost client) answers
 * its batch as failed; a caller that exits gives its ticket up, as one
 * that errors does. (FATAL unwinds no PG_TRY: a ticket nobody collects
 * would keep the gate from ever being idle, and when the ring came round
 * to its slot every caller of the sequence on this server would wait
 * forever.)
 */
static void quorum_at_exit(int code, Datum arg)
{
    if (leading != NULL) {
        HiloRemoteError e;
        hilo_remote_error_set(&e, ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                              "the session sending the register claim for this node's batch of "
                              "calls exited",
                              NULL, "Retry the call.");
        answer_batch(leading, leading_from, NULL, NULL, &e);
        leading = NULL;
    }
    if (waiting != NULL) {
        abandon_ticket(waiting, waiting_ticket);
        waiting = NULL;
    }
}

/*
 * One attempt at a window of exactly `n` IDs above every window the
 * register has accepted, accepted by a majority before this returns, in a
 * subtransaction of its own: false if other claims kept winning the
 * register (40001: *lost), or if fewer IDs are left (*lost false); other
 * errors propagate.
 */
typedef struct ClaimAttempt {
    const HiloSequence *seq;
    uint64 n;
    const int64 *guess;
    HiloRange *window;
    bool claimed;
    uint64 left;      /* when not claimed: how many IDs are left */
    ErrorData *error; /* of a failed attempt, in the caller's context */
} ClaimAttempt;

static void claim_attempt_body(void *arg)
{
    ClaimAttempt *a = (ClaimAttempt *)arg;
    /* Callers of this sequence wait for this claim holding their lock on
     * hilo.sequences, and a DROP EXTENSION, VACUUM FULL or LOCK TABLE
     * queued behind them makes this claim's catalog locks wait for those
     * callers: a cycle through the gate that the deadlock detector cannot
     * see. A lock not granted within half hilo.claim_timeout (a peer
     * connection's bound, cluster/net/peers.cpp) fails the claim, and its
     * batch, instead. Until the end of this attempt only. */
    int guc_nest_level = NewGUCNestLevel();
    char lock_timeout[16];
    snprintf(lock_timeout, sizeof(lock_timeout), "%d", Max(hilo_claim_timeout_ms / 2, 1));
    (void)set_config_option("lock_timeout", lock_timeout, PGC_USERSET, PGC_S_SESSION,
                            GUC_ACTION_SAVE, true, 0, false);
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    bool got = false;
    uint64 left = 0;
    bool in_cluster =
        hilo_cluster_claims_ordered_window(a->seq->name, a->seq->start_value, a->seq->max_value,
                                           a->n, a->guess, &got, a->window, &left);
    hilo_catalog_end(&access);
    AtEOXact_GUC(true, guc_nest_level);
    if (!in_cluster)
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("hilo sequence \"%s\" has ordering 'quorum', and this node is in no "
                               "hilo cluster",
                               a->seq->name),
                        errhint("Add the node to a cluster with hilo_add_node(), or create the "
                                "sequence with ordering => 'node'.")));
    a->claimed = got;
    a->left = left;
}

static void claim_attempt_failed(void *arg)
{
    ((ClaimAttempt *)arg)->error = CopyErrorData();
}

static bool claim_attempt(const HiloSequence *seq, uint64 n, const int64 *guess, HiloRange *window,
                          bool *lost, uint64 *left)
{
    ClaimAttempt a = {seq, n, guess, window, false, 0, NULL};
    *lost = false;
    /* Always out of the subtransaction before an error goes on: one left
     * open would leave the session in an aborted transaction block. */
    if (hilo_run_in_subtransaction(claim_attempt_body, &a, claim_attempt_failed)) {
        *left = a.left;
        return a.claimed;
    }
    if (a.error->sqlerrcode != ERRCODE_T_R_SERIALIZATION_FAILURE)
        ReThrowError(a.error);
    FreeErrorData(a.error);
    *lost = true;
    return false;
}

/*
 * A window of exactly `n` IDs above every window the register has accepted;
 * false if fewer are left (*left of them). Claims of other nodes' batches
 * may win the register again and again (each claim retries with back-off
 * itself): this goes on trying until hilo.claim_timeout has passed, then
 * the last loss is the error.
 */
static bool quorum_claim(const HiloSequence *seq, uint64 n, const int64 *guess, HiloRange *window,
                         uint64 *left)
{
    TimestampTz deadline =
        TimestampTzPlusMilliseconds(GetCurrentTimestamp(), hilo_claim_timeout_ms);
    for (int attempt = 1;; attempt++) {
        bool lost;
        /* A lost attempt read the register: later ones read it again. */
        bool claimed = claim_attempt(seq, n, attempt == 1 ? guess : NULL, window, &lost, left);
        if (!lost)
            return claimed;
        if (GetCurrentTimestamp() >= deadline)
            ereport(ERROR, (errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
                            errmsg("hilo sequence \"%s\": claims of other nodes kept winning the "
                                   "register for %d ms (%d rounds)",
                                   seq->name, hilo_claim_timeout_ms, attempt),
                            errhint("Retry the call.")));
        CHECK_FOR_INTERRUPTS();
        pg_usleep(1000L * (1 + (long)pg_prng_uint64_range(&pg_global_prng_state, 0, 20)));
    }
}

/*
 * A batch asked for more IDs than are left (`left`): its calls that fit in
 * them, in ticket order, are claimed again, so that one call too large for
 * what is left (a big take near max_value) does not fail the small ones
 * queued with it. (A second claim, with its own hilo.claim_timeout: near
 * max_value under contention, such calls may wait up to twice that.) True with *window and
 * *short_of (the tickets left out) when some are claimed; false when none fits, or when fewer are
 * left by now (other nodes claimed meanwhile).
 */
static bool claim_what_fits(const HiloSequence *seq, uint64 left, HiloRange *window,
                            bool **short_of)
{
    if (leading_n < 2 || left == 0)
        return false;
    bool *out = (bool *)palloc0(sizeof(bool) * leading_n);
    uint64 fit = 0;
    for (int i = 0; i < leading_n; i++) {
        uint64 n = leading_counts[i];
        if (n <= left - fit)
            fit += n;
        else
            out[i] = true;
    }
    uint64 still_left = 0;
    if (fit == 0 || !quorum_claim(seq, fit, NULL, window, &still_left)) {
        pfree(out);
        return false;
    }
    *short_of = out;
    return true;
}

/* Claims `total` IDs for the batch taken; a failure answers it before it
 * propagates. */
static pg_noinline void claim_guarded(QuorumGate *gate, const HiloSequence *seq, uint64 total,
                                      const int64 *guess)
{
    MemoryContext context = CurrentMemoryContext;
    leading = gate;
    PG_TRY();
    {
        HiloRange window;
        uint64 left = 0;
        bool *short_of = NULL;
        if (!quorum_claim(seq, total, guess, &window, &left) &&
            !claim_what_fits(seq, left, &window, &short_of))
            ereport(ERROR, (errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
                            errmsg("hilo sequence \"%s\" has fewer than " UINT64_FORMAT
                                   " IDs left for this node's batch of calls",
                                   seq->name, total)));
        leading = NULL;
        answer_batch(gate, leading_from, &window, short_of, NULL);
    }
    PG_CATCH();
    {
        HILO_FORGET_UNWOUND_FRAMES();
        leading = NULL;
        MemoryContext error_context = MemoryContextSwitchTo(context);
        ErrorData *edata = CopyErrorData();
        MemoryContextSwitchTo(error_context);
        HiloRemoteError e;
        hilo_remote_error_from_edata(&e, edata);
        answer_batch(gate, leading_from, NULL, NULL, &e);
        PG_RE_THROW();
    }
    PG_END_TRY();
}

/*
 * Before a claim, its leader waits a little for callers that are about to
 * queue: as many as the last claim served plus those that queued while it
 * ran (callers in a loop come back right after their answer), for at most
 * a quarter of the last claim's time and HILO_QUORUM_GATHER_MAX_US. A
 * batch of callers that come at the same pace is then served by one claim
 * rather than by two alternating half batches, for a little latency. A
 * lone caller never waits. (No interrupt check: the gate is busy and
 * nobody leads it yet; the wait is short.)
 */
static void gather_callers(QuorumGate *gate)
{
    SpinLockAcquire(&gate->mutex);
    uint64 expect = gate->population;
    int64 wait_us = Min(gate->last_claim_us / 4, (int64)HILO_QUORUM_GATHER_MAX_US);
    SpinLockRelease(&gate->mutex);
    if (expect <= 1 || wait_us <= 0)
        return;
    TimestampTz deadline = GetCurrentTimestamp() + wait_us;
    for (;;) {
        SpinLockAcquire(&gate->mutex);
        uint64 queued = gate->ring.unclaimed();
        SpinLockRelease(&gate->mutex);
        if (queued >= expect || GetCurrentTimestamp() >= deadline)
            return;
        pg_usleep(100L);
    }
}

/*
 * One claim for the tickets queued now, by the caller that marked the gate
 * busy: every call among them started before the claim is sent.
 */
static void claim_for_batch(QuorumGate *gate, const HiloSequence *seq)
{
    gather_callers(gate);
    uint64 total = 0;
    int64 guess;
    bool has_guess;
    SpinLockAcquire(&gate->mutex);
    has_guess = gate->has_guess;
    guess = gate->guess;
    leading_from = gate->ring.claimed_upto;
    leading_n = 0;
    /* A batch asks for at most 2^63 - 1 IDs; later tickets wait for the next. */
    (void)gate->ring.claim(
        [&](uint64 ticket, const QuorumRequest &r, QuorumAnswer *) {
            if (leading_n > 0 && total + r.n > (uint64)PG_INT64_MAX)
                return HILO_TICKET_STOP;
            total += r.n;
            leading_tickets[leading_n] = ticket;
            leading_counts[leading_n++] = r.n;
            return HILO_TICKET_TAKE;
        },
        [](Latch *) {});
    if (leading_n == 0) {
        /* Every caller queued gave up: nothing to claim. */
        gate->busy = false;
        SpinLockRelease(&gate->mutex);
        ConditionVariableBroadcast(&gate->cv);
        return;
    }
    gate->claims++;
    gate->claim_started = GetCurrentTimestamp();
    SpinLockRelease(&gate->mutex);
    claim_guarded(gate, seq, total, has_guess ? &guess : NULL);
}

/* Whether this database's calls are claimed by the claim server. */
static bool served_by_server(void)
{
    SpinLockAcquire(&quorum_shared->mutex);
    bool served = quorum_shared->server_latch != NULL && quorum_shared->server_db == MyDatabaseId;
    SpinLockRelease(&quorum_shared->mutex);
    return served;
}

/* Waits for the answer to `ticket`: the claim server claims for it, or,
 * where none runs, this caller leads a claim when none runs. */
static void await_answer(QuorumGate *gate, const HiloSequence *seq, uint64 ticket,
                         QuorumAnswer *answer, HiloRemoteError *error)
{
    TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), quorum_wait_ms());
    for (;;) {
        if (collect_answer(gate, ticket, answer, error))
            return;
        bool lead = false;
        bool server = served_by_server();
        SpinLockAcquire(&gate->mutex);
        if (!server && !gate->busy && gate->ring.pending(ticket)) {
            gate->busy = true;
            lead = true;
        }
        SpinLockRelease(&gate->mutex);
        if (lead) {
            claim_for_batch(gate, seq);
            continue;
        }
        ConditionVariablePrepareToSleep(&gate->cv);
        for (;;) {
            SpinLockAcquire(&gate->mutex);
            bool wait = (gate->busy || server) && gate->ring.pending(ticket);
            SpinLockRelease(&gate->mutex);
            if (!wait)
                break;
            if (GetCurrentTimestamp() >= deadline) {
                ConditionVariableCancelSleep();
                ereport(ERROR,
                        (errcode(ERRCODE_LOCK_NOT_AVAILABLE),
                         errmsg("hilo sequence \"%s\": no answer from the register claim for "
                                "this node's batch of calls within %d ms",
                                seq->name, quorum_wait_ms()),
                         errdetail("The claim waits for a lock, or for other nodes."),
                         errhint("Retry the call.")));
            }
            /* Now and then: is the server still there? (A server that
             * exits answers the batch it claims for, not those queued.) */
            if (ConditionVariableTimedSleep(&gate->cv, 100, PG_WAIT_EXTENSION))
                server = served_by_server();
        }
        ConditionVariableCancelSleep();
    }
}

/* await_answer; a caller that leaves with an error gives its ticket up. */
static pg_noinline void await_guarded(QuorumGate *gate, const HiloSequence *seq, uint64 ticket,
                                      QuorumAnswer *answer, HiloRemoteError *error)
{
    PG_TRY();
    {
        await_answer(gate, seq, ticket, answer, error);
    }
    PG_CATCH();
    {
        HILO_FORGET_UNWOUND_FRAMES();
        waiting = NULL;
        abandon_ticket(gate, ticket);
        PG_RE_THROW();
    }
    PG_END_TRY();
    waiting = NULL;
}

void hilo_quorum_take(const HiloSequence *seq, uint64 n, HiloRange *out)
{
    Assert(quorum_shared != NULL);
    if (!exit_callback_set) {
        before_shmem_exit(quorum_at_exit, (Datum)0);
        exit_callback_set = true;
    }
    uint64 ticket;
    QuorumGate *gate = queue_at_gate(seq, n, &ticket);
    waiting = gate; /* no interrupt is served in between */
    waiting_ticket = ticket;
    QuorumAnswer answer;
    HiloRemoteError error;
    await_guarded(gate, seq, ticket, &answer, &error);
    /* The claim's error, as its leader got it. */
    if (!answer.served && error.sqlerrcode != 0)
        hilo_rethrow_remote(&error);
    if (!answer.served)
        ereport(ERROR, (errcode(answer.sqlerrcode),
                        errmsg("hilo sequence \"%s\": the register claim for this node's batch "
                               "of calls failed: %s",
                               seq->name, answer.message),
                        errhint("Retry the call.")));
    out->first = answer.first;
    out->last = answer.first + (int64)(n - 1);
}

/* ---- The claim server's side (order/quorum/quorum_server.cpp) ---- */

void hilo_quorum_server_attach(Latch *latch)
{
    if (latch != NULL && !exit_callback_set) {
        before_shmem_exit(quorum_at_exit, (Datum)0);
        exit_callback_set = true;
    }
    SpinLockAcquire(&quorum_shared->mutex);
    quorum_shared->server_db = latch != NULL ? MyDatabaseId : InvalidOid;
    quorum_shared->server_latch = latch;
    SpinLockRelease(&quorum_shared->mutex);
}

int hilo_quorum_server_next_gate(int from, HiloSequence *seq)
{
    for (int i = from; i < HILO_QUORUM_GATES; i++) {
        QuorumGate *g = &quorum_shared->gates[i];
        bool mine = false;
        SpinLockAcquire(&g->mutex);
        if (g->dboid == MyDatabaseId && !g->busy && g->ring.unclaimed() > 0) {
            g->busy = true;
            *seq = g->seq;
            mine = true;
        }
        SpinLockRelease(&g->mutex);
        if (mine)
            return i;
    }
    return -1;
}

void hilo_quorum_server_claim(int gate, const HiloSequence *seq)
{
    claim_for_batch(&quorum_shared->gates[gate], seq);
}
