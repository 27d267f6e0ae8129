/*
 * order/lease/lease_net.cpp: the lease worker's connections to the nodes.
 *
 * Per node two persistent libpq connections (cluster/net/peers.cpp drives
 * them, non-blocking, in one loop with the worker's latch): one carries
 * READ and GRANT messages to the node's acceptor (hilo._lease_handle, one
 * durable transaction per batch; this node's own acceptor too), the other
 * FORWARDs to the node as holder (hilo._lease_forward, which answers when
 * the holder's worker has served them: a batch waits there up to
 * hilo.claim_timeout, so it must not hold up acceptor messages). Each
 * connection has a queue; whatever is queued when it is idle goes as one
 * batch. The protocol allows losing any message, so a connection that
 * fails, or whose query is unanswered for too long (a node paused, cut
 * off), is closed and its batch and queue are dropped; it is opened
 * again, in a while.
 *
 * A message goes out as of the configuration (epoch and cluster_id) it
 * was made under, or not at all. The acceptor refuses a proposer of
 * another configuration by those two numbers, and every lease node of a
 * configuration is freed when it changes (order/lease/lease_worker.cpp), but a
 * message still queued then (its link busy, or the run ended before it
 * went, and no run at all while the node is in no cluster) used to go out
 * later under the configuration of that moment: a renewal of the dropped
 * catalog's lease, recording the next block's bound, was accepted by the
 * cells of the cluster formed again on a new catalog, whose sequence then
 * started two blocks above its start_value (TAP 312).
 *
 * Fencing: every acceptor reply carries the node's write count (each cell
 * write raises it). A link remembers the highest count it saw, and what
 * this node's hilo.peer_watermarks says (the agent's passes share what
 * every node saw, and who is fenced); a count lower than that is a copy
 * restored without a trace, which may have lost grants: its replies are
 * dropped, as lost, for as long as the configuration lists that
 * incarnation (TAP 315). The register's claims judge their replies alike.
 */
#include "lease_shared.h"

extern "C" {
#include "miscadmin.h"
#include "utils/memutils.h"
}

#define NET_QUEUE 1024
#define NET_BATCH 256
#define NET_RETRY_MS 250

typedef struct NetItem {
    char seq[HILO_MAX_NAME_BYTES + 1];
    int64 floor, max_value; /* a FORWARD's settings */
    HiloLeaseMessage m;
    int64 epoch, cluster_id; /* the configuration it was made under */
} NetItem;

typedef struct NetLink {
    HiloPeer *peer;
    bool forward; /* FORWARDs; else acceptor messages */
    uint32 node;
    uint64 incarnation;    /* the configuration's for the node */
    uint64 highest_writes; /* the highest write count known for it */
    bool fenced;           /* its count went backwards: its replies do not count */
    NetItem *queue;        /* a ring */
    int head, len;
    NetItem flight[NET_BATCH]; /* the batch in flight */
    int nflight;
    uint64 flight_known; /* highest_writes when it was sent: what its reply is judged by */
    TimestampTz retry_at;
} NetLink;

static NetLink *links[2 * HILO_MAX_NODES];
static int nlinks = 0;
static uint32 self_id = 0;
static int64 config_epoch = 0;
static int64 config_cluster_id = 0;

static NetLink *new_link(const HiloNode *node, bool forward)
{
    NetLink *l = (NetLink *)MemoryContextAllocZero(TopMemoryContext, sizeof(NetLink));
    l->queue = (NetItem *)MemoryContextAllocZero(TopMemoryContext, sizeof(NetItem) * NET_QUEUE);
    l->peer = (HiloPeer *)MemoryContextAllocZero(TopMemoryContext, sizeof(HiloPeer));
    l->peer->node_id = node->id;
    strlcpy(l->peer->name, node->name, sizeof(l->peer->name));
    l->peer->conninfo = MemoryContextStrdup(TopMemoryContext, node->conninfo);
    l->peer->state = HILO_PEER_CLOSED;
    /* The worker's loop ends a run every few seconds (and at each reload)
     * to read the configuration; a batch in flight then is still answered
     * into the next run. Dropped, a renewal sent just before waited for
     * its resend, and with acceptors slow to answer the lease ran out. */
    l->peer->answers_across_runs = true;
    l->forward = forward;
    l->node = (uint32)node->id;
    l->incarnation = (uint64)node->incarnation;
    return l;
}

static void free_link(NetLink *l)
{
    hilo_peer_close(l->peer);
    pfree(l->peer->conninfo);
    pfree(l->peer);
    pfree(l->queue);
    pfree(l);
}

void hilo_lease_net_configure(const HiloConfig *cfg, uint32 self)
{
    NetLink *kept[2 * HILO_MAX_NODES];
    int nkept = 0;
    self_id = self;
    config_epoch = cfg->epoch;
    config_cluster_id = cfg->cluster_id;
    for (int i = 0; i < cfg->nnodes; i++) {
        const HiloNode *node = &cfg->nodes[i];
        for (int f = 0; f < 2; f++) {
            bool forward = f == 1;
            if (forward && (uint32)node->id == self)
                continue; /* a node never forwards to itself */
            NetLink *link = NULL;
            for (int k = 0; k < nlinks && link == NULL; k++)
                if (links[k] != NULL && links[k]->node == (uint32)node->id &&
                    links[k]->forward == forward &&
                    links[k]->incarnation == (uint64)node->incarnation &&
                    strcmp(links[k]->peer->conninfo, node->conninfo) == 0) {
                    link = links[k];
                    links[k] = NULL;
                }
            kept[nkept++] = link != NULL ? link : new_link(node, forward);
        }
    }
    for (int k = 0; k < nlinks; k++)
        if (links[k] != NULL)
            free_link(links[k]);
    memcpy(links, kept, sizeof(NetLink *) * nkept);
    nlinks = nkept;
}

void hilo_lease_net_send(const char *seq, int64 floor, int64 max_value,
                         const HiloLeaseMessage *message)
{
    bool forward = message->kind == HILO_LEASE_FORWARD;
    for (int k = 0; k < nlinks; k++) {
        NetLink *l = links[k];
        if (l->node != message->to || l->forward != forward)
            continue;
        if (l->len == NET_QUEUE)
            return; /* lost; its sender times out and tries again */
        NetItem *item = &l->queue[(l->head + l->len) % NET_QUEUE];
        strlcpy(item->seq, seq, sizeof(item->seq));
        item->floor = floor;
        item->max_value = max_value;
        item->m = *message;
        item->epoch = config_epoch;
        item->cluster_id = config_cluster_id;
        l->len++;
        return;
    }
}

void hilo_lease_net_learn(const HiloWatermarkSet *set)
{
    for (int k = 0; k < nlinks; k++) {
        NetLink *l = links[k];
        for (int i = 0; i < set->count; i++) {
            const HiloWatermark *w = &set->entries[i];
            if (w->node != l->node || w->incarnation != l->incarnation)
                continue;
            l->highest_writes = Max(l->highest_writes, w->highest_write_count);
            l->fenced = l->fenced || w->fenced;
        }
    }
}

/*
 * Judges an acceptor's write count with the core's rule (JudgeStamp)
 * against the highest count known when the batch was sent (one learned
 * while it was in flight may come from a write that committed after the
 * acceptor read its count); true if its replies count. The acceptor itself
 * refuses to answer as another incarnation than its configuration lists.
 */
static bool trusted_reply(NetLink *l, uint64 write_count)
{
    if (l->fenced)
        return false;
    HiloMember member = {l->node, l->incarnation};
    HiloNodeStamp stamp = {l->incarnation, write_count};
    if (hilo_judge_stamp(member, l->flight_known, stamp) == HILO_TRUSTED) {
        l->highest_writes = Max(l->highest_writes, write_count);
        return true;
    }
    l->fenced = true;
    ereport(LOG, (errmsg("hilo lease worker: node \"%s\" is fenced: its write count went back "
                         "from " UINT64_FORMAT " to " UINT64_FORMAT,
                         l->peer->name, l->flight_known, write_count),
                  errdetail("A node restored from a copy may have lost lease grants; its "
                            "replies no longer count. Remove it and add it again.")));
    return false;
}

/* ---- The loop (cluster/net/peers.cpp's callbacks) ---- */

typedef struct NetRun {
    HiloLeaseDeliver deliver;
    bool (*poll)(void);
    TimestampTz until;
    int tick_ms;
    int request_timeout_ms;
    int forward_timeout_ms;
    TimestampTz started;
    /* An acceptor refused a request as of another configuration (epoch
     * or cluster mismatch, 55000): the run ends early, so that the worker
     * reads the configuration again now rather than at `until`. */
    bool config_refused;
} NetRun;

/* How long a run lasts at least before a refusal ends it: a node that
 * stays at another epoch costs a configuration read this often, no more. */
#define NET_REREAD_MIN_MS 200

static NetLink *link_of(HiloPeer *peer)
{
    for (int k = 0; k < nlinks; k++)
        if (links[k]->peer == peer)
            return links[k];
    return NULL;
}

static const char *acceptor_sql =
    "SELECT ballot, holder, bound, ok, write_count, lease_us, drift_ppm"
    " FROM hilo._lease_handle($9::bigint, $10::bigint, $1::integer,"
    " $2::text[], $3::integer[], $4::bigint[], $5::bigint[], $6::bigint[], $7::integer[],"
    " $8::bigint[], $11::bigint[], $12::integer[], $13::boolean[])";
static const char *forward_sql =
    "SELECT call_id, ok, first, sqlstate, message, detail, hint"
    " FROM hilo._lease_forward($1::integer, $2::text[], $3::bigint[],"
    " $4::bigint[], $5::bigint[], $6::bigint[])";

/* Sends what is queued as one batch; drops what was made under another
 * configuration than the current one (a message the protocol lets be
 * lost, whose sender was freed with that configuration). */
static void send_batch(NetLink *l)
{
    int kept = 0;
    for (int i = 0; i < l->len; i++) {
        const NetItem *item = &l->queue[(l->head + i) % NET_QUEUE];
        if (item->epoch == config_epoch && item->cluster_id == config_cluster_id)
            l->queue[(l->head + kept++) % NET_QUEUE] = *item;
    }
    l->len = kept;
    if (l->fenced && !l->forward)
        l->len = 0; /* lost: its replies would not count */
    if (l->len == 0)
        return;

    static MemoryContext batch_context = NULL;
    if (batch_context == NULL)
        batch_context =
            AllocSetContextCreate(TopMemoryContext, "hilo lease batch", ALLOCSET_SMALL_SIZES);
    MemoryContextReset(batch_context);
    MemoryContext old = MemoryContextSwitchTo(batch_context);
    int n = Min(l->len, NET_BATCH);
    /* One array per column, as install.cpp and register_claim.cpp build
     * theirs: the rows differ, the text form is net.h's hilo_*_array. */
    const char **seqs = (const char **)palloc(sizeof(char *) * n);
    int32 *kinds = (int32 *)palloc(sizeof(int32) * n);
    int32 *holders = (int32 *)palloc(sizeof(int32) * n);
    int64 *ids = (int64 *)palloc(sizeof(int64) * n);
    int64 *expected = (int64 *)palloc(sizeof(int64) * n);
    int64 *ballots = (int64 *)palloc(sizeof(int64) * n);
    int64 *bounds = (int64 *)palloc(sizeof(int64) * n);
    int64 *counts = (int64 *)palloc(sizeof(int64) * n);
    int64 *floors = (int64 *)palloc(sizeof(int64) * n);
    int64 *maxes = (int64 *)palloc(sizeof(int64) * n);
    int64 *durations = (int64 *)palloc(sizeof(int64) * n);
    int32 *drifts = (int32 *)palloc(sizeof(int32) * n);
    bool *settled = (bool *)palloc(sizeof(bool) * n);
    for (int i = 0; i < n; i++) {
        l->flight[i] = l->queue[(l->head + i) % NET_QUEUE];
        const HiloLeaseMessage *m = &l->flight[i].m;
        seqs[i] = l->flight[i].seq;
        kinds[i] = (int32)m->kind;
        ids[i] = (int64)m->request_id;
        expected[i] = (int64)m->expected;
        ballots[i] = (int64)m->ballot;
        holders[i] = (int32)m->holder;
        bounds[i] = m->bound;
        counts[i] = Max(m->value, 1);
        floors[i] = l->flight[i].floor;
        maxes[i] = l->flight[i].max_value;
        durations[i] = (int64)Min(m->duration, (uint64)PG_INT64_MAX);
        drifts[i] = (int32)m->drift_ppm;
        settled[i] = m->settled;
    }
    l->head = (l->head + n) % NET_QUEUE;
    l->len -= n;
    char from[16];
    snprintf(from, sizeof(from), "%u", self_id);
    bool sent;
    if (l->forward) {
        const char *values[6] = {from,
                                 hilo_text_array(seqs, n),
                                 hilo_int64_array(ids, n),
                                 hilo_int64_array(counts, n),
                                 hilo_int64_array(floors, n),
                                 hilo_int64_array(maxes, n)};
        sent = hilo_peer_send(l->peer, forward_sql, 6, NULL, values);
    } else {
        char epoch[24], cluster_id[24];
        snprintf(epoch, sizeof(epoch), INT64_FORMAT, config_epoch);
        snprintf(cluster_id, sizeof(cluster_id), INT64_FORMAT, config_cluster_id);
        const char *values[13] = {from,
                                  hilo_text_array(seqs, n),
                                  hilo_int32_array(kinds, n),
                                  hilo_int64_array(ids, n),
                                  hilo_int64_array(expected, n),
                                  hilo_int64_array(ballots, n),
                                  hilo_int32_array(holders, n),
                                  hilo_int64_array(bounds, n),
                                  epoch,
                                  cluster_id,
                                  hilo_int64_array(durations, n),
                                  hilo_int32_array(drifts, n),
                                  hilo_bool_array(settled, n)};
        sent = hilo_peer_send(l->peer, acceptor_sql, 13, NULL, values);
    }
    l->nflight = sent ? n : 0;
    l->flight_known = l->highest_writes;
    MemoryContextSwitchTo(old);
}

static void net_ready(HiloPeer *peer, void *arg)
{
    NetLink *l = link_of(peer);
    if (l == NULL)
        return;
    /* Idle: its batch in flight, if any, was answered (net_done) or lost
     * with the connection. */
    l->nflight = 0;
    if (l->len > 0)
        send_batch(l);
}

static bool net_done(HiloPeer *peer, PGresult *result, const char *error, void *arg)
{
    NetRun *run = (NetRun *)arg;
    NetLink *l = link_of(peer);
    if (l == NULL)
        return false;
    int n = l->nflight;
    l->nflight = 0;
    if (result == NULL || PQresultStatus(result) != PGRES_TUPLES_OK || PQntuples(result) != n) {
        if (error != NULL)
            ereport(DEBUG1, (errmsg("hilo lease worker: %s", error)));
        const char *state = result != NULL ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : NULL;
        if (!l->forward && state != NULL && strcmp(state, "55000") == 0)
            run->config_refused = true;
        return false; /* the batch is lost */
    }
    if (!l->forward && n > 0 &&
        !trusted_reply(l, (uint64)strtoull(PQgetvalue(result, 0, 4), NULL, 10)))
        return false; /* as if lost */
    for (int i = 0; i < n; i++) {
        const NetItem *item = &l->flight[i];
        HiloLeaseMessage reply;
        memset(&reply, 0, sizeof(reply));
        reply.from = l->node;
        reply.to = self_id;
        if (l->forward) {
            reply.kind = HILO_LEASE_FORWARD_REPLY;
            reply.request_id = (uint64)strtoull(PQgetvalue(result, i, 0), NULL, 10);
            reply.ok = PQgetvalue(result, i, 1)[0] == 't';
            reply.value = reply.ok ? strtoll(PQgetvalue(result, i, 2), NULL, 10) : 0;
            if (!reply.ok && !PQgetisnull(result, i, 3)) {
                /* It failed on the holder: its error, final. */
                HiloRemoteError holder_error;
                hilo_remote_error_from_fields(&holder_error, PQgetvalue(result, i, 3),
                                              PQgetvalue(result, i, 4), PQgetvalue(result, i, 5),
                                              PQgetvalue(result, i, 6));
                reply.exhausted = true;
                run->deliver(item->seq, &reply, &holder_error);
                continue;
            }
        } else {
            reply.kind =
                item->m.kind == HILO_LEASE_READ ? HILO_LEASE_READ_REPLY : HILO_LEASE_GRANT_REPLY;
            reply.request_id = item->m.request_id;
            reply.ballot = (uint64)strtoull(PQgetvalue(result, i, 0), NULL, 10);
            reply.holder = (uint32)strtoul(PQgetvalue(result, i, 1), NULL, 10);
            reply.bound = strtoll(PQgetvalue(result, i, 2), NULL, 10);
            reply.ok = PQgetvalue(result, i, 3)[0] == 't';
            reply.duration = (uint64)strtoull(PQgetvalue(result, i, 5), NULL, 10);
            reply.drift_ppm = (uint32)strtoul(PQgetvalue(result, i, 6), NULL, 10);
        }
        run->deliver(item->seq, &reply, NULL);
    }
    return false;
}

static void net_unreachable(HiloPeer *peer, const char *error, void *arg)
{
    NetLink *l = link_of(peer);
    if (l == NULL)
        return;
    l->nflight = 0;
    l->len = 0; /* lost: senders time out and try again */
    l->retry_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), NET_RETRY_MS);
}

/* Closes connections that failed a while ago (to open them again) or whose
 * query or connection attempt has taken too long. */
static void check_links(const NetRun *run, TimestampTz now)
{
    for (int k = 0; k < nlinks; k++) {
        NetLink *l = links[k];
        HiloPeer *p = l->peer;
        if (p->state == HILO_PEER_FAILED && now >= l->retry_at) {
            p->state = HILO_PEER_CLOSED;
            continue;
        }
        int limit = l->forward && p->state == HILO_PEER_BUSY ? run->forward_timeout_ms
                                                             : run->request_timeout_ms;
        bool waiting = p->state == HILO_PEER_BUSY || p->state == HILO_PEER_CONNECTING ||
                       p->state == HILO_PEER_SETUP;
        if (waiting && TimestampDifferenceExceeds(p->started_at, now, limit)) {
            hilo_peer_close(p);
            l->nflight = 0;
            l->len = 0;
        }
    }
}

static bool net_finished(void *arg)
{
    NetRun *run = (NetRun *)arg;
    TimestampTz now = GetCurrentTimestamp();
    check_links(run, now);
    return run->poll() || now >= run->until ||
           (run->config_refused &&
            TimestampDifferenceExceeds(run->started, now, NET_REREAD_MIN_MS));
}

/* The next tick of the protocol's timers; now if what poll() queued (after
 * the peers' ready() of this turn) can go to an idle peer. */
static TimestampTz net_held_until(void *arg)
{
    NetRun *run = (NetRun *)arg;
    TimestampTz now = GetCurrentTimestamp();
    for (int k = 0; k < nlinks; k++)
        if (links[k]->len > 0 && links[k]->peer->state == HILO_PEER_IDLE)
            return now;
    return TimestampTzPlusMilliseconds(now, run->tick_ms);
}

void hilo_lease_net_run(HiloLeaseDeliver deliver, bool (*poll)(void), TimestampTz until,
                        int tick_ms, int request_timeout_ms, int forward_timeout_ms)
{
    static const HiloPeerCallbacks callbacks = {net_ready, net_done, net_unreachable, net_finished,
                                                net_held_until};
    NetRun run = {deliver,
                  poll,
                  until,
                  tick_ms,
                  request_timeout_ms,
                  forward_timeout_ms,
                  GetCurrentTimestamp(),
                  false};
    HiloPeer **peers = (HiloPeer **)palloc0(sizeof(HiloPeer *) * Max(nlinks, 1));
    for (int k = 0; k < nlinks; k++)
        peers[k] = links[k]->peer;
    /* The deadline is never reached: net_finished ends the run at `until`. */
    hilo_peers_run(peers, nlinks, &callbacks, &run, DT_NOEND);
    pfree(peers);
}
