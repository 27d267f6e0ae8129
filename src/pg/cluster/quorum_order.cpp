/*
 * cluster/quorum_order.cpp: ordering => 'quorum' (seed 002), IDs that rise
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
 * Batching, as the seed's ID server does: the callers of one sequence on
 * this node queue at a gate. The first that finds no claim running sends
 * one claim for every caller queued at that moment (their calls all
 * started before it was sent, so any order among them is linearizable) and
 * hands each its IDs in ticket order; callers that come while it runs wait
 * on the gate's LWLock (LWLockAcquireOrWait, as XLogFlush's group flush
 * does) and find their answer, or queue for the next claim. A claim that
 * fails fails every call of its batch with its error. A claim is sized to
 * the batch, so nothing is left over; a caller that goes away while
 * queued leaves its IDs unused (a gap, never a repeat).
 *
 * Shared memory: HILO_QUORUM_GATES gates, each a ring of tickets. A gate
 * belongs to one (database, catalog incarnation, sequence) while it has
 * tickets in flight; an idle gate is taken over by the next sequence that
 * needs one. Gates hold no IDs, so taking one over loses nothing.
 */
#include "cluster.h"

extern "C" {
#include "miscadmin.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/elog.h"
}

#define HILO_QUORUM_GATES 64
#define HILO_QUORUM_RING 256
#define HILO_QUORUM_MESSAGE_BYTES 200

enum TicketStatus { TICKET_WAITING = 0, TICKET_SERVED = 1, TICKET_FAILED = 2 };

typedef struct QuorumTicket {
    uint64 n;
    int64 first;
    int status;
    int sqlerrcode;
    char message[HILO_QUORUM_MESSAGE_BYTES];
} QuorumTicket;

typedef struct QuorumGate {
    /* Protects every field below but `lock`. */
    slock_t mutex;
    Oid dboid;
    uint64 incarnation;
    int32 seq_id;
    uint64 next_ticket; /* tickets handed out */
    uint64 served_upto; /* tickets below this one are answered */
    uint64 claims;      /* claims sent through this gate */
    LWLock *lock;       /* held by the caller whose claim runs */
    QuorumTicket ring[HILO_QUORUM_RING];
} QuorumGate;

typedef struct QuorumShared {
    slock_t mutex; /* assigning gates */
    QuorumGate gates[HILO_QUORUM_GATES];
} QuorumShared;

static QuorumShared *quorum_shared = NULL;

static Size quorum_size(void)
{
    return sizeof(QuorumShared);
}

static void quorum_attach(void *base, bool create)
{
    quorum_shared = (QuorumShared *)base;
    if (!create)
        return;
    SpinLockInit(&quorum_shared->mutex);
    LWLockPadded *locks = GetNamedLWLockTranche("hilo_quorum");
    for (int i = 0; i < HILO_QUORUM_GATES; i++) {
        QuorumGate *g = &quorum_shared->gates[i];
        SpinLockInit(&g->mutex);
        g->lock = &locks[i].lock;
    }
}

static const HiloShmemPart quorum_part = {"hilo_quorum", quorum_size, HILO_QUORUM_GATES,
                                          quorum_attach};

void hilo_quorum_shmem_init(void)
{
    hilo_shmem_add_part(&quorum_part);
}

static bool gate_idle_locked(const QuorumGate *g)
{
    return g->served_upto == g->next_ticket;
}

/*
 * The gate of `seq`, holding a ticket for `n` IDs; waits while the gate's
 * ring is full. Returns the ticket.
 */
static QuorumGate *queue_at_gate(const HiloSequence *seq, uint64 n, uint64 *ticket)
{
    for (;;) {
        QuorumGate *gate = NULL;
        SpinLockAcquire(&quorum_shared->mutex);
        int free_gate = -1;
        for (int i = 0; i < HILO_QUORUM_GATES && gate == NULL; i++) {
            QuorumGate *g = &quorum_shared->gates[i];
            SpinLockAcquire(&g->mutex);
            if (g->dboid == MyDatabaseId && g->incarnation == seq->incarnation &&
                g->seq_id == seq->seq_id)
                gate = g;
            else if (free_gate < 0 && (g->dboid == InvalidOid || gate_idle_locked(g)))
                free_gate = i;
            SpinLockRelease(&g->mutex);
        }
        if (gate == NULL && free_gate >= 0) {
            gate = &quorum_shared->gates[free_gate];
            SpinLockAcquire(&gate->mutex);
            gate->dboid = MyDatabaseId;
            gate->incarnation = seq->incarnation;
            gate->seq_id = seq->seq_id;
            SpinLockRelease(&gate->mutex);
        }
        SpinLockRelease(&quorum_shared->mutex);

        if (gate != NULL) {
            bool queued = false;
            SpinLockAcquire(&gate->mutex);
            /* Taken over by another sequence between the two locks? */
            if (gate->dboid == MyDatabaseId && gate->incarnation == seq->incarnation &&
                gate->seq_id == seq->seq_id &&
                gate->next_ticket - gate->served_upto < HILO_QUORUM_RING) {
                *ticket = gate->next_ticket++;
                QuorumTicket *t = &gate->ring[*ticket % HILO_QUORUM_RING];
                t->n = n;
                t->first = 0;
                t->status = TICKET_WAITING;
                t->sqlerrcode = 0;
                t->message[0] = '\0';
                queued = true;
            }
            SpinLockRelease(&gate->mutex);
            if (queued)
                return gate;
        }
        /* Every gate busy, or this one's ring full: callers are ahead. */
        CHECK_FOR_INTERRUPTS();
        pg_usleep(200L);
    }
}

/* The answer to `ticket`, once the gate has one; false while it waits. */
static bool read_answer(QuorumGate *gate, uint64 ticket, QuorumTicket *out)
{
    bool answered = false;
    SpinLockAcquire(&gate->mutex);
    if (ticket < gate->served_upto) {
        *out = gate->ring[ticket % HILO_QUORUM_RING];
        answered = true;
    }
    SpinLockRelease(&gate->mutex);
    return answered;
}

/* Answers tickets [from, to) with the outcome of one claim. */
static pg_noinline void answer_batch(QuorumGate *gate, uint64 from, uint64 to,
                                     const HiloRange *window, int sqlerrcode, const char *message)
{
    SpinLockAcquire(&gate->mutex);
    int64 next = window != NULL ? window->first : 0;
    for (uint64 t = from; t < to; t++) {
        QuorumTicket *q = &gate->ring[t % HILO_QUORUM_RING];
        if (window != NULL) {
            q->first = next;
            next += (int64)q->n;
            q->status = TICKET_SERVED;
        } else {
            q->status = TICKET_FAILED;
            q->sqlerrcode = sqlerrcode;
            strlcpy(q->message, message, sizeof(q->message));
        }
    }
    gate->served_upto = to;
    SpinLockRelease(&gate->mutex);
}

/*
 * A window of exactly `n` IDs above every window the register has accepted,
 * accepted by a majority before this returns; false if fewer are left.
 */
static bool quorum_claim(const HiloSequence *seq, uint64 n, HiloRange *window)
{
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    bool claimed = false;
    uint64 left = 0;
    bool in_cluster = hilo_cluster_claims_whole_window(seq->name, seq->start_value, seq->max_value,
                                                       n, &claimed, window, &left);
    hilo_catalog_end(&access);
    if (!in_cluster)
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("hilo sequence \"%s\" has ordering 'quorum', and this node is in no "
                               "hilo cluster",
                               seq->name),
                        errhint("Add the node to a cluster with hilo_add_node(), or create the "
                                "sequence with ordering => 'node'.")));
    return claimed;
}

/* Claims `total` IDs for tickets [from, to); a failure answers them all
 * before it propagates. */
static pg_noinline void claim_guarded(QuorumGate *gate, const HiloSequence *seq, uint64 from,
                                      uint64 to, uint64 total)
{
    MemoryContext context = CurrentMemoryContext;
    PG_TRY();
    {
        HiloRange window;
        if (!quorum_claim(seq, total, &window))
            ereport(ERROR, (errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
                            errmsg("hilo sequence \"%s\" has fewer than " UINT64_FORMAT
                                   " IDs left for this node's batch of calls",
                                   seq->name, total)));
        answer_batch(gate, from, to, &window, 0, NULL);
    }
    PG_CATCH();
    {
        HILO_FORGET_UNWOUND_FRAMES();
        MemoryContext error_context = MemoryContextSwitchTo(context);
        ErrorData *edata = CopyErrorData();
        MemoryContextSwitchTo(error_context);
        answer_batch(gate, from, to, NULL, edata->sqlerrcode, edata->message);
        PG_RE_THROW();
    }
    PG_END_TRY();
}

/*
 * One claim for the tickets queued now, as the caller holding the gate's
 * lock: every call among them started before the claim is sent.
 */
static void claim_for_batch(QuorumGate *gate, const HiloSequence *seq)
{
    uint64 from, to, total = 0;
    SpinLockAcquire(&gate->mutex);
    from = gate->served_upto;
    to = gate->next_ticket;
    /* A batch asks for at most 2^63 - 1 IDs; later tickets wait for the next. */
    for (uint64 t = from; t < to; t++) {
        uint64 n = gate->ring[t % HILO_QUORUM_RING].n;
        if (t > from && total + n > (uint64)PG_INT64_MAX) {
            to = t;
            break;
        }
        total += n;
    }
    gate->claims++;
    SpinLockRelease(&gate->mutex);
    if (from < to)
        claim_guarded(gate, seq, from, to, total);
}

void hilo_quorum_take(const HiloSequence *seq, uint64 n, HiloRange *out)
{
    Assert(quorum_shared != NULL);
    uint64 ticket;
    QuorumGate *gate = queue_at_gate(seq, n, &ticket);
    QuorumTicket answer;
    while (!read_answer(gate, ticket, &answer)) {
        /* Free: no claim runs, and this caller's ticket waits for one. */
        if (LWLockAcquireOrWait(gate->lock, LW_EXCLUSIVE)) {
            if (!read_answer(gate, ticket, &answer))
                claim_for_batch(gate, seq);
            LWLockRelease(gate->lock);
        }
        CHECK_FOR_INTERRUPTS();
    }
    if (answer.status == TICKET_FAILED)
        ereport(ERROR, (errcode(answer.sqlerrcode),
                        errmsg("hilo sequence \"%s\": the register claim for this node's batch "
                               "of calls failed: %s",
                               seq->name, answer.message),
                        errhint("Retry the call.")));
    out->first = answer.first;
    out->last = answer.first + (int64)(n - 1);
}
