/*
 * cluster/register/register_claim.cpp: claiming windows through the quorum register over
 * libpq (what proposers remember about nodes is cluster/register/watermarks.cpp).
 *
 * One round drives many claims at once (the agent claims for every sequence
 * together): each claim is the core's HiloWindowClaim state machine; the
 * requests it queues for one node are sent together in one call of
 * hilo._register_handle() on that node, and while a node is busy new
 * requests for it wait and go in the next batch. Replies go back to their
 * claims; a failed call fails each of its requests. A claim finishes as
 * soon as a majority answered, so a slow or dead node never holds a round
 * up; its late answers are dropped.
 */
#include "register.h"

extern "C" {
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
}

/* Requests one call carries at most. */
#define HILO_BATCH_MAX 1000

/*
 * Attempts per claim, and the back-off before attempt k > 1: a random delay
 * up to min(BACKOFF_MAX, BACKOFF_BASE * 2^(k-2)) ms, so that proposers that
 * outvoted each other (agents and allocators of several nodes claiming for
 * one sequence at once) do not collide again at once.
 */
#define HILO_CLAIM_ATTEMPTS 12
#define HILO_BACKOFF_BASE_MS 2
#define HILO_BACKOFF_MAX_MS 200

/* ---- A round of claims ---- */

typedef struct Outgoing {
    int claim; /* index into the round's claims */
    HiloRegisterRequest request;
} Outgoing;

/* Requests for one node: waiting to be sent, and the batch in flight. */
typedef struct NodeQueue {
    Outgoing *waiting;
    int nwaiting;
    int capacity;
    Outgoing *in_flight;
    int nin_flight;
    bool unreachable; /* in this round: its requests fail at once */
} NodeQueue;

typedef struct Round {
    const HiloConfig *cfg;
    HiloPeer **peers;
    HiloClaimWant *wants;
    HiloWindowClaim **claims;
    int nclaims;
    NodeQueue *queues;       /* one per configuration node */
    char **node_errors;      /* per node: what went wrong with it in this round */
    uint32 *attempt_seen;    /* per claim: the attempt whose requests were last pulled */
    TimestampTz *not_before; /* per claim: its requests wait until then (back-off) */
    bool *held_at_deadline;  /* per claim: the deadline came during its back-off */
} Round;

static void queue_push(NodeQueue *q, int claim, const HiloRegisterRequest *r)
{
    if (q->nwaiting == q->capacity) {
        q->capacity = q->capacity ? q->capacity * 2 : 16;
        q->waiting = q->waiting ? (Outgoing *)repalloc(q->waiting, sizeof(Outgoing) * q->capacity)
                                : (Outgoing *)palloc(sizeof(Outgoing) * q->capacity);
    }
    q->waiting[q->nwaiting].claim = claim;
    q->waiting[q->nwaiting].request = *r;
    q->nwaiting++;
}

/*
 * Moves what claim `c` wants to send into the node queues; a request for an
 * unreachable node fails at once, which may queue the next step: loop.
 */
static void pull_outgoing(Round *round, int c)
{
    HiloRegisterRequest out[HILO_MAX_NODES];
    for (;;) {
        uint32 n = hilo_claim_take_outgoing(round->claims[c], out, lengthof(out));
        if (n == 0)
            return;
        if (out[0].tag.attempt > round->attempt_seen[c]) {
            /* A new attempt after being outvoted: back off a random while. */
            uint32 attempt = out[0].tag.attempt;
            round->attempt_seen[c] = attempt;
            if (attempt > 1) {
                uint32 cap = Min((uint32)HILO_BACKOFF_MAX_MS,
                                 (uint32)HILO_BACKOFF_BASE_MS << Min(attempt - 2, 16u));
                uint32 r = 0;
                (void)pg_strong_random(&r, sizeof(r));
                round->not_before[c] =
                    TimestampTzPlusMilliseconds(GetCurrentTimestamp(), (long)(r % (cap + 1)));
            }
        }
        for (uint32 i = 0; i < n; i++) {
            int node = hilo_config_index_of(round->cfg, (int32)out[i].to);
            if (node < 0 || round->queues[node].unreachable)
                hilo_claim_on_failure(round->claims[c], out[i].to, out[i].kind, out[i].tag);
            else
                queue_push(&round->queues[node], c, &out[i]);
        }
    }
}

static void fail_waiting(Round *round, int node);

static int node_of_peer(Round *round, HiloPeer *peer)
{
    for (int i = 0; i < round->cfg->nnodes; i++)
        if (round->peers[i] == peer)
            return i;
    return -1;
}

static bool claim_done(Round *round, int c)
{
    if (round->claims[c] == NULL)
        return true; /* could not even be created; its want says why */
    return hilo_claim_result(round->claims[c]).status != HILO_CLAIM_IN_PROGRESS;
}

/* Sends the node's waiting requests (of claims still running) as one call. */
static void round_ready(HiloPeer *peer, void *arg)
{
    static const char *sql =
        "SELECT status, value, incarnation, write_count FROM hilo._register_handle("
        "$1::bigint, $2::text[], $3::int[], $4::bigint[], $5::bigint[], $6::int[],"
        " $7::bigint[], $8::bigint[])";
    Round *round = (Round *)arg;
    int node = node_of_peer(round, peer);
    if (node < 0)
        return;
    NodeQueue *q = &round->queues[node];
    /*
     * Drop requests of claims that ended meanwhile (nobody waits for them);
     * those of claims backing off go to the end and stay.
     */
    TimestampTz now = GetCurrentTimestamp();
    int keep = 0, held = 0;
    Outgoing *later = (Outgoing *)palloc(sizeof(Outgoing) * Max(q->nwaiting, 1));
    for (int i = 0; i < q->nwaiting; i++) {
        int c = q->waiting[i].claim;
        if (claim_done(round, c))
            continue;
        if (round->not_before[c] > now)
            later[held++] = q->waiting[i];
        else
            q->waiting[keep++] = q->waiting[i];
    }
    int ready = keep;
    memcpy(q->waiting + keep, later, sizeof(Outgoing) * held);
    q->nwaiting = keep + held;
    pfree(later);
    if (ready == 0)
        return;

    int n = Min(ready, HILO_BATCH_MAX);
    /* One array per column, as install.cpp and lease_net.cpp build theirs:
     * the rows differ, the text form is net.h's hilo_*_array. */
    const char **keys = (const char **)palloc(sizeof(char *) * n);
    int32 *kinds = (int32 *)palloc(sizeof(int32) * n);
    int32 *attempts = (int32 *)palloc(sizeof(int32) * n);
    int64 *proposers = (int64 *)palloc(sizeof(int64) * n);
    int64 *claim_numbers = (int64 *)palloc(sizeof(int64) * n);
    int64 *expected = (int64 *)palloc(sizeof(int64) * n);
    int64 *new_values = (int64 *)palloc(sizeof(int64) * n);
    for (int i = 0; i < n; i++) {
        const Outgoing *o = &q->waiting[i];
        keys[i] = round->wants[o->claim].key;
        kinds[i] = (int32)o->request.kind;
        attempts[i] = (int32)o->request.tag.attempt;
        proposers[i] = (int64)o->request.tag.proposer_id;
        claim_numbers[i] = (int64)o->request.tag.claim_number;
        expected[i] = o->request.expected_max;
        new_values[i] = o->request.new_value;
    }
    char epoch[32];
    snprintf(epoch, sizeof(epoch), INT64_FORMAT, round->cfg->epoch);
    const char *values[8] = {epoch,
                             hilo_text_array(keys, n),
                             hilo_int32_array(kinds, n),
                             hilo_int64_array(proposers, n),
                             hilo_int64_array(claim_numbers, n),
                             hilo_int32_array(attempts, n),
                             hilo_int64_array(expected, n),
                             hilo_int64_array(new_values, n)};

    /* The batch moves to in_flight before the send, which may fail it. */
    q->in_flight = (Outgoing *)palloc(sizeof(Outgoing) * n);
    memcpy(q->in_flight, q->waiting, sizeof(Outgoing) * n);
    q->nin_flight = n;
    memmove(q->waiting, q->waiting + n, sizeof(Outgoing) * (q->nwaiting - n));
    q->nwaiting -= n;
    if (!hilo_peer_send(peer, sql, 8, NULL, values)) {
        /* The peer failed; fail the batch as if the call had. */
        round->node_errors[node] = pstrdup(peer->error);
        q->unreachable = true;
        for (int i = 0; i < q->nin_flight; i++) {
            const Outgoing *o = &q->in_flight[i];
            hilo_claim_on_failure(round->claims[o->claim], o->request.to, o->request.kind,
                                  o->request.tag);
        }
        int failed = q->nin_flight;
        q->nin_flight = 0;
        for (int i = 0; i < failed; i++)
            pull_outgoing(round, q->in_flight[i].claim);
        fail_waiting(round, node);
    }
}

/* Fails every request waiting for `node`, and any that the failures queue. */
static void fail_waiting(Round *round, int node)
{
    NodeQueue *q = &round->queues[node];
    q->unreachable = true;
    while (q->nwaiting > 0) {
        Outgoing o = q->waiting[--q->nwaiting];
        hilo_claim_on_failure(round->claims[o.claim], o.request.to, o.request.kind, o.request.tag);
        pull_outgoing(round, o.claim);
    }
}

static bool parse_reply(PGresult *result, int row, const Outgoing *o, HiloRegisterReply *reply)
{
    if (row >= PQntuples(result) || PQnfields(result) != 4)
        return false;
    for (int f = 0; f < 4; f++)
        if (PQgetisnull(result, row, f))
            return false;
    reply->from = o->request.to;
    reply->kind = o->request.kind;
    reply->tag = o->request.tag;
    reply->status = (HiloReplyStatus)pg_strtoint32(PQgetvalue(result, row, 0));
    reply->value = pg_strtoint64(PQgetvalue(result, row, 1));
    reply->stamp.incarnation = (uint64)pg_strtoint64(PQgetvalue(result, row, 2));
    reply->stamp.write_count = (uint64)pg_strtoint64(PQgetvalue(result, row, 3));
    return true;
}

static bool round_done(HiloPeer *peer, PGresult *result, const char *error, void *arg)
{
    Round *round = (Round *)arg;
    int node = node_of_peer(round, peer);
    if (node < 0)
        return false;
    NodeQueue *q = &round->queues[node];
    Outgoing *batch = q->in_flight;
    int n = q->nin_flight;
    q->in_flight = NULL;
    q->nin_flight = 0;
    if (error != NULL)
        round->node_errors[node] = pstrdup(error);
    else if (PQntuples(result) != n || PQnfields(result) != 4)
        round->node_errors[node] =
            psprintf("node \"%s\": %d answers to %d requests", peer->name, PQntuples(result), n);
    for (int i = 0; i < n; i++) {
        HiloRegisterReply reply;
        if (result != NULL && parse_reply(result, i, &batch[i], &reply))
            hilo_claim_on_reply(round->claims[batch[i].claim], &reply);
        else
            hilo_claim_on_failure(round->claims[batch[i].claim], batch[i].request.to,
                                  batch[i].request.kind, batch[i].request.tag);
    }
    if (peer->state == HILO_PEER_FAILED)
        fail_waiting(round, node);
    for (int i = 0; i < n; i++)
        pull_outgoing(round, batch[i].claim);
    if (batch != NULL)
        pfree(batch);
    return false;
}

static void round_unreachable(HiloPeer *peer, const char *error, void *arg)
{
    Round *round = (Round *)arg;
    int node = node_of_peer(round, peer);
    if (node < 0)
        return;
    round->node_errors[node] = pstrdup(error);
    fail_waiting(round, node);
}

/*
 * When a waiting request may next go to a node whose peer is idle: its
 * back-off's end, or a time already past when one may go at once (its
 * back-off ended after round_ready() held it, or a failure queued it after
 * that peer's round_ready() in this turn of the loop); 0 if none waits for
 * an idle peer. Requests for a busy or connecting peer go when it is ready.
 * Before, this counted only back-offs still running, so a request whose
 * back-off ended between round_ready() and here was counted nowhere: with
 * no peer busy the loop ended, and the claim failed at once with "failed or
 * timed out" from every node (TAP 200 in CI).
 */
static TimestampTz round_held_until(void *arg)
{
    Round *round = (Round *)arg;
    TimestampTz earliest = DT_NOEND;
    for (int node = 0; node < round->cfg->nnodes; node++) {
        NodeQueue *q = &round->queues[node];
        HiloPeer *peer = round->peers[node];
        if (peer == NULL || peer->state != HILO_PEER_IDLE)
            continue;
        for (int i = 0; i < q->nwaiting; i++)
            if (!claim_done(round, q->waiting[i].claim))
                earliest = Min(earliest, round->not_before[q->waiting[i].claim]);
    }
    /* 0 means "nothing": a request never held back (0) may go at once. */
    return earliest == DT_NOEND ? 0 : Max(earliest, 1);
}

static bool round_finished(void *arg)
{
    Round *round = (Round *)arg;
    for (int c = 0; c < round->nclaims; c++)
        if (!claim_done(round, c))
            return false;
    return true;
}

/* Why a claim ended, with what each node said when it failed. */
static char *describe(Round *round, int c)
{
    StringInfoData buf;
    initStringInfo(&buf);
    char reason[1024];
    hilo_claim_reason(round->claims[c], reason, sizeof(reason));
    appendStringInfoString(&buf, reason);
    HiloClaimStatus status = hilo_claim_result(round->claims[c]).status;
    if (status == HILO_CLAIM_UNAVAILABLE && round->held_at_deadline[c])
        appendStringInfoString(&buf, "; hilo.claim_timeout ran out while it waited to try again");
    if (status == HILO_CLAIM_UNAVAILABLE || status == HILO_CLAIM_INTERNAL_ERROR) {
        for (int i = 0; i < round->cfg->nnodes; i++)
            if (round->node_errors[i] != NULL)
                appendStringInfo(&buf, "; %s", round->node_errors[i]);
    }
    return buf.data;
}

/* Runs the round; the claims are C++ heap objects, freed by the caller. */
static void run_round(Round *round, HiloWatermarkSet *watermarks, int timeout_ms)
{
    const HiloConfig *cfg = round->cfg;
    HiloMember members[HILO_MAX_NODES];
    for (int i = 0; i < cfg->nnodes; i++) {
        members[i].node = (uint32)cfg->nodes[i].id;
        members[i].incarnation = (uint64)cfg->nodes[i].incarnation;
    }
    uint64 proposer_id = hilo_random_nonzero();
    for (int c = 0; c < round->nclaims; c++) {
        HiloClaimWant *w = &round->wants[c];
        HiloClaimSpec spec;
        memset(&spec, 0, sizeof(spec));
        spec.members = members;
        spec.member_count = (uint32)cfg->nnodes;
        spec.key = w->key;
        spec.key_length = strlen(w->key);
        spec.window_size = w->window_size;
        spec.window_count = w->window_count;
        spec.max_value = w->max_value;
        spec.floor = w->floor;
        spec.max_attempts = HILO_CLAIM_ATTEMPTS;
        spec.proposer_id = proposer_id;
        spec.claim_number = (uint64)c + 1;
        spec.whole = w->whole;
        spec.has_guess = w->has_guess;
        spec.guess = w->guess;
        char error[256] = "";
        round->claims[c] = hilo_claim_create(&spec, watermarks->entries, (uint32)watermarks->count,
                                             error, sizeof(error));
        if (round->claims[c] == NULL) {
            w->status = HILO_CLAIM_INTERNAL_ERROR;
            w->reason = psprintf("invalid claim for \"%s\": %s", w->key, error);
        }
    }
    for (int c = 0; c < round->nclaims; c++)
        if (round->claims[c] != NULL)
            pull_outgoing(round, c);

    HiloPeerCallbacks cb = {round_ready, round_done, round_unreachable, round_finished,
                            round_held_until};
    hilo_peers_run(round->peers, cfg->nnodes, &cb, round,
                   TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms));

    /* Past the deadline: whatever is still out failed. */
    TimestampTz now = GetCurrentTimestamp();
    for (int node = 0; node < cfg->nnodes; node++) {
        NodeQueue *q = &round->queues[node];
        for (int i = 0; i < q->nwaiting; i++) {
            int c = q->waiting[i].claim;
            if (round->not_before[c] > now && !claim_done(round, c))
                round->held_at_deadline[c] = true;
        }
        for (int i = 0; i < q->nin_flight; i++) {
            const Outgoing *o = &q->in_flight[i];
            hilo_claim_on_failure(round->claims[o->claim], o->request.to, o->request.kind,
                                  o->request.tag);
        }
        q->nin_flight = 0;
        fail_waiting(round, node);
    }

    for (int c = 0; c < round->nclaims; c++) {
        HiloClaimWant *w = &round->wants[c];
        if (round->claims[c] == NULL)
            continue;
        HiloClaimResult r = hilo_claim_result(round->claims[c]);
        w->status = r.status == HILO_CLAIM_IN_PROGRESS ? HILO_CLAIM_UNAVAILABLE : r.status;
        w->window = r.window;
        w->highest_seen = r.highest_seen;
        w->attempts = r.attempts;
        w->reason = describe(round, c);
        HiloWatermark learned[HILO_MAX_NODES];
        uint32 n = hilo_claim_watermarks(round->claims[c], learned, lengthof(learned));
        for (uint32 i = 0; i < Min(n, (uint32)HILO_MAX_NODES); i++)
            hilo_watermarks_merge(watermarks, &learned[i], cfg);
    }
}

void hilo_claim_round(const HiloConfig *cfg, HiloPeer **peers, HiloWatermarkSet *watermarks,
                      HiloClaimWant *wants, int nwants, int timeout_ms)
{
    Round round;
    round.cfg = cfg;
    round.peers = peers;
    round.wants = wants;
    round.nclaims = nwants;
    round.claims = (HiloWindowClaim **)palloc0(sizeof(HiloWindowClaim *) * Max(nwants, 1));
    round.queues = (NodeQueue *)palloc0(sizeof(NodeQueue) * Max(cfg->nnodes, 1));
    round.node_errors = (char **)palloc0(sizeof(char *) * Max(cfg->nnodes, 1));
    round.attempt_seen = (uint32 *)palloc0(sizeof(uint32) * Max(nwants, 1));
    round.not_before = (TimestampTz *)palloc0(sizeof(TimestampTz) * Max(nwants, 1));
    round.held_at_deadline = (bool *)palloc0(sizeof(bool) * Max(nwants, 1));
    for (int c = 0; c < nwants; c++) {
        wants[c].status = HILO_CLAIM_IN_PROGRESS;
        wants[c].reason = NULL;
    }
    /* The claims live on the C++ heap: free them however the round ends. */
    PG_TRY();
    {
        run_round(&round, watermarks, timeout_ms);
    }
    PG_FINALLY();
    {
        for (int c = 0; c < nwants; c++)
            if (round.claims[c] != NULL)
                hilo_claim_free(round.claims[c]);
    }
    PG_END_TRY();
}
