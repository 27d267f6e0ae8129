/*
 * order/lease/lease_worker.cpp: the lease worker, the one process of a node that
 * runs the lease protocol of ordering 'cluster' (core/lease.hpp) for every
 * such sequence, in hilo.agent_database.
 *
 * Per sequence it keeps one core lease node (lease_c_api.h): caller,
 * forwarder, proposer and, while this node holds the lease, the server of
 * IDs from memory. It feeds it the calls that backends queue in the slots
 * (order/lease/lease_slots.cpp: this node's callers, and the calls other nodes
 * forward here), the replies that come back over the connections
 * (order/lease/lease_net.cpp), and the time of CLOCK_MONOTONIC (which never
 * jumps and also runs while the process is stopped); it sends what the
 * node sends and answers the slots the node completes.
 *
 * The lease nodes are volatile, as the protocol allows: a restart of the
 * worker, a new configuration, or a new catalog starts new ones, each with
 * an era of its own (a new holder then waits out the old lease
 * first, and no reply to an old node's round is taken for a new one's).
 * Only the acceptors' cells (hilo.lease_cells) are durable. A lease serves
 * one catalog creation (DROP EXTENSION and CREATE EXTENSION make a new
 * one, and the cluster formed again on it has new, empty cells) and one
 * cluster: calls under another catalog start the sequence's lease over,
 * and a cluster formed again (a new cluster_id) starts every lease over.
 *
 * Why one file of about 700 lines: the worker's state is this process's
 * own (the table of leases, the slot each taken call came from, the
 * members as last read), and every step of the loop (taking calls,
 * pumping a lease node, refilling its pool, publishing routes, reading
 * the members again and starting every lease over) reads and changes all
 * of it; split, it would have to be exported to the other files. What
 * other processes share with it lives apart: lease_slots.cpp, lease_take.cpp
 * (the pool), lease_route.cpp (shared memory) and lease_net.cpp (its connections).
 */
#include "lease_shared.h"

#include "../../cluster/agent/agent.h"

extern "C" {
#include "access/xact.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
}

#include <time.h>

#define LEASE_TICK_MS 10
#define LEASE_RUN_MS 5000 /* the configuration is read again this often */
/* A sequence nobody called on this node for this long is forgotten (its
 * lease node freed, its lapsed chain kept for the next call to resume: a
 * dropped sequence's so, until the configuration changes). Its lease
 * lapsed long before: a holder renews only while its sequence is called
 * (core/lease.hpp, P5; idle_after is the lease time). */
#define LEASE_IDLE_US ((uint64)hilo_lease_forget_after_ms * 1000) /* 300 s */
#define LEASE_SWEEP_US (1000 * (uint64)1000) /* asleep leases are looked at this often */
/* A refill that found every pool in use is tried again this much later
 * (meanwhile calls go through the worker). */
#define LEASE_POOL_RETRY_US (1000 * (uint64)1000)

typedef struct SeqLease {
    char seq[HILO_MAX_NAME_BYTES + 1];
    int64 floor;
    int64 max_value;
    uint64 catalog; /* the catalog creation it serves */
    Oid owner;      /* the sequence's owner: hilo.cluster_sequences_per_role */
    int64 block_size;
    HiloLeaseNode *node;
    uint64 last_used; /* now_us() of the last call */
    bool serving;     /* as last logged */
    bool lapsed;      /* its lease lapsed for idleness (logged at DEBUG1) */
    /* It served a forwarded call IDs outside that call's node's
     * start_value and max_value: let go at the next poll (answer_call). */
    bool let_go;
    /* The pool (order/lease/lease_take.cpp): its refill call in flight (0:
     * none), and the highest ID a call was answered with straight from the
     * node (a refill below it is not pooled: its IDs would come after). */
    uint64 pool_ids; /* IDs per refill */
    uint64 refill_id;
    int64 highest_answered;
    uint64 pool_seen;     /* hilo_lease_pool_left() as last seen */
    uint64 pool_retry_at; /* no refill before (every pool was in use) */
    /* A call came, or backends took from the pool, since the last refill:
     * only then is a refill worth its IDs (a refill is a call, and keeps
     * the lease from lapsing). */
    bool wants_pool;
    uint64 route_uses; /* hilo_lease_route_uses() as last seen */
} SeqLease;

/* The slot of a call the worker took: which lease, whose call. */
typedef struct SlotCall {
    bool active;
    int lease;
    uint32 origin;            /* 0: this node's caller */
    uint64 id;                /* our call id, or the forwarder's */
    HiloLeaseRequest request; /* to start a caller's call again */
    /* A caller's call that failed on the holder it was forwarded to: the
     * holder's error, which the caller raises. */
    bool failed_at_holder;
    HiloRemoteError holder_error;
} SlotCall;

/*
 * The leases of the sequences called here lately, as many as are (each
 * owner's at most hilo.cluster_sequences_per_role): no fixed table that
 * one role could fill for the others. leases[0, nawake) are awake and
 * looked at on every pass; leases[nawake, nleases) are asleep (their lease
 * node has nothing to do until a call or a message comes: no lease runs,
 * nothing waits) and cost nothing but their memory until a call wakes
 * them, or they are forgotten after LEASE_IDLE_US (their chain kept,
 * lease_saved.cpp). lease_index finds a sequence's lease by name.
 */
static SeqLease *leases = NULL;
static int nleases = 0;
static int nawake = 0;
static int leases_allocated = 0;
typedef struct LeaseIndexEntry {
    char seq[HILO_MAX_NAME_BYTES + 1];
    int index;
} LeaseIndexEntry;
static HTAB *lease_index = NULL;
static SlotCall slot_calls[HILO_LEASE_SLOTS];
static uint32 members[HILO_MAX_NODES];
static int nmembers = 0;
static uint32 self_id = 0;
static int64 members_epoch = 0;
static int64 members_cluster_id = 0;
static int64 member_incarnations[HILO_MAX_NODES];
/* How backends reach each member directly (order/lease/lease_route.cpp). */
static char *member_conninfos[HILO_MAX_NODES];
static char member_names[HILO_MAX_NODES][HILO_NODE_NAME_BYTES];
static uint64 worker_era = 0; /* this worker's: the high bits of its call ids */
static uint64 node_era = 0;   /* the last lease node's */
static uint64 next_call_id = 0;

static uint64 now_us(void)
{
    return hilo_lease_clock_us();
}

/* The index of the lease of `seq`, or -1. */
static int find_lease(const char *seq)
{
    LeaseIndexEntry *e = (LeaseIndexEntry *)hash_search(lease_index, seq, HASH_FIND, NULL);
    return e != NULL ? e->index : -1;
}

static void index_lease(int i)
{
    bool found;
    LeaseIndexEntry *e =
        (LeaseIndexEntry *)hash_search(lease_index, leases[i].seq, HASH_ENTER, &found);
    e->index = i;
}

/* Leases a and b change places (the calls taken for them follow). */
static void swap_leases(int a, int b)
{
    if (a == b)
        return;
    SeqLease t = leases[a];
    leases[a] = leases[b];
    leases[b] = t;
    for (int s = 0; s < HILO_LEASE_SLOTS; s++)
        if (slot_calls[s].active && slot_calls[s].lease == a)
            slot_calls[s].lease = b;
        else if (slot_calls[s].active && slot_calls[s].lease == b)
            slot_calls[s].lease = a;
    index_lease(a);
    index_lease(b);
}

/* Lease `i` joins the awake ones (a call or a message came): its index now. */
static int wake_lease(int i)
{
    if (i < nawake)
        return i;
    swap_leases(i, nawake);
    return nawake++;
}

static void answer(int slot, bool ok, int64 first, const HiloRemoteError *error)
{
    HiloLeaseAnswer a;
    memset(&a, 0, sizeof(a));
    a.ok = ok;
    a.first = first;
    if (!ok && error != NULL)
        a.error = *error;
    slot_calls[slot].active = false;
    hilo_lease_answer(slot, &a);
}

/* Answers request `r` (in slot `slot`) as not served: a caller of this
 * node gets 08006 with `reason`; a forwarded call nothing (its forwarder
 * looks again). */
static void answer_unserved(int slot, const HiloLeaseRequest *r, const char *reason)
{
    HiloRemoteError e;
    if (r->origin != 0) {
        answer(slot, false, 0, NULL);
        return;
    }
    hilo_lease_unserved(&e, r->seq, reason);
    answer(slot, false, 0, &e);
}

/*
 * A call the lease node completed. A forwarded call's IDs count only
 * within its node's start_value and max_value (the sequence made again or
 * altered under the name there or here, the agent not yet having carried
 * it to the other): else they are a gap, the call is answered as not
 * served (its node looks again), and the lease, which hands out such IDs,
 * is let go. Likewise a forwarded call that found too few IDs left fails
 * (2200H) only under its node's settings; else it is not served.
 */
/* A call this node's chain served right after the pool's last ID, its
 * own or forwarded, takes the pool's first IDs, and the pool its IDs:
 * pooled IDs are lost neither to a call larger than the pool's rest nor to
 * one that resumed a lapsed lease. */
static int64 swap_with_pool(SeqLease *l, const HiloLeaseRequest *r, int64 first)
{
    int64 swapped;
    uint64 now = now_us();
    if (hilo_lease_pool_swap(l->seq, l->catalog, r->floor, r->max_value, first, r->count,
                             hilo_lease_node_serving_until(l->node, now), &swapped))
        return swapped;
    l->highest_answered = Max(l->highest_answered, first + (int64)(r->count - 1));
    return first;
}

static void answer_call(int lease, uint32 origin, uint64 id, bool ok, int64 first, bool exhausted,
                        bool served_here, const char *reason)
{
    for (int s = 0; s < HILO_LEASE_SLOTS; s++) {
        SlotCall *c = &slot_calls[s];
        if (c->active && c->lease == lease && c->origin == origin && c->id == id) {
            const HiloLeaseRequest *r = &c->request;
            SeqLease *l = &leases[lease];
            if (ok && origin != 0 &&
                (first <= r->floor || first > r->max_value ||
                 r->count - 1 > (uint64)(r->max_value - first))) {
                ok = false;
                leases[lease].let_go = true;
            }
            bool same_settings = l->floor == r->floor && l->max_value == r->max_value;
            if (ok && (origin != 0 || served_here))
                first = swap_with_pool(l, r, first);
            if (ok) {
                answer(s, true, first, NULL);
            } else if (exhausted && c->failed_at_holder) {
                answer(s, false, 0, &c->holder_error);
            } else if (exhausted && (origin == 0 || same_settings)) {
                HiloRemoteError e;
                hilo_lease_exhausted(&e, r->seq, r->count, reason);
                answer(s, false, 0, &e);
            } else {
                answer_unserved(s, r, reason);
            }
            return;
        }
    }
}

/* A call of this node's was served while this node does not serve: by the
 * holder it knows, which backends may now call directly. */
static void publish_route(int i)
{
    SeqLease *l = &leases[i];
    uint32 holder = hilo_lease_node_known_holder(l->node);
    if (holder == 0 || holder == self_id || hilo_lease_node_serving(l->node, now_us()))
        return;
    for (int k = 0; k < nmembers; k++)
        if (members[k] == holder && member_conninfos[k] != NULL) {
            hilo_lease_route_set(l->seq, l->catalog, l->floor, l->max_value, self_id, holder,
                                 member_names[k], member_conninfos[k]);
            return;
        }
}

/* A completion of lease `i`'s node: its pool's refill, or a call. */
static void take_completion(int i, const HiloLeaseCompletion *done)
{
    SeqLease *l = &leases[i];
    if (l->refill_id != 0 && done->call_id == l->refill_id) {
        l->refill_id = 0;
        if (done->ok && done->served_here && done->value > l->highest_answered &&
            !hilo_lease_pool_fill(l->seq, l->catalog, done->value,
                                  done->value + (int64)l->pool_ids - 1,
                                  hilo_lease_node_serving_until(l->node, now_us())))
            l->pool_retry_at = now_us() + LEASE_POOL_RETRY_US;
        return;
    }
    answer_call(i, 0, done->call_id, done->ok, done->value, done->exhausted, done->served_here,
                done->error);
    if (done->ok)
        publish_route(i);
}

static void take_outgoing(int i, const HiloLeaseMessage *out)
{
    SeqLease *l = &leases[i];
    if (out->kind == HILO_LEASE_FORWARD_REPLY)
        answer_call(i, out->to, out->request_id, out->ok, out->value, out->exhausted, false,
                    "fewer IDs are left than the call asks for");
    else
        hilo_lease_net_send(l->seq, l->floor, l->max_value, out);
}

/*
 * Sends what lease `i`'s node sends, answers what it completed. The IDs
 * its chain served (refills, this node's calls, forwarded calls' replies)
 * are taken in the order served, lowest first, across both queues: each
 * one swaps with the pool or is pooled in turn (answer_call), which only
 * works in that order.
 */
static void pump(int i)
{
    SeqLease *l = &leases[i];
    HiloLeaseMessage out[32];
    HiloLeaseCompletion done[32];
    uint32 nout = 0, iout = 0, ndone = 0, idone = 0;
    for (;;) {
        if (iout == nout) {
            nout = hilo_lease_node_take_outgoing(l->node, out, lengthof(out));
            iout = 0;
        }
        if (idone == ndone) {
            ndone = hilo_lease_node_take_completions(l->node, done, lengthof(done));
            idone = 0;
        }
        if (iout == nout && idone == ndone)
            break;
        /* What serves no IDs of this chain goes at once. */
        if (iout < nout && !(out[iout].kind == HILO_LEASE_FORWARD_REPLY && out[iout].ok)) {
            take_outgoing(i, &out[iout++]);
            continue;
        }
        if (idone < ndone && !(done[idone].ok && done[idone].served_here)) {
            take_completion(i, &done[idone++]);
            continue;
        }
        if (idone == ndone || (iout < nout && out[iout].value < done[idone].value))
            take_outgoing(i, &out[iout++]);
        else
            take_completion(i, &done[idone++]);
    }
    char error[HILO_LEASE_ERROR_BYTES];
    if (hilo_lease_node_error(l->node, error, sizeof(error)) > 0)
        ereport(FATAL, (errmsg("hilo lease worker: sequence \"%s\": %s", l->seq, error)));
}

static void free_lease(int i)
{
    hilo_lease_pool_clear(leases[i].seq);
    hilo_lease_route_clear(leases[i].seq);
    for (int s = 0; s < HILO_LEASE_SLOTS; s++)
        if (slot_calls[s].active && slot_calls[s].lease == i)
            answer_unserved(s, &slot_calls[s].request, "the lease worker started over");
    hilo_lease_node_free(leases[i].node);
    leases[i].node = NULL;
}

static void free_all_leases(void)
{
    for (int i = 0; i < nleases; i++) {
        free_lease(i);
        (void)hash_search(lease_index, leases[i].seq, HASH_REMOVE, NULL);
    }
    nleases = 0;
    nawake = 0;
}

/* Requests taken while this worker knew of no cluster: it reads the
 * configuration again before it answers them (a node that just joined). */
static int held[HILO_LEASE_SLOTS];
static HiloLeaseRequest held_requests[HILO_LEASE_SLOTS];
static int nheld = 0;

/* This node's callers of lease `lease` (-1: of every lease) are taken off
 * it, to start again once the configuration is read (start_held_calls). */
static void hold_calls_of(int lease)
{
    for (int s = 0; s < HILO_LEASE_SLOTS; s++) {
        SlotCall *c = &slot_calls[s];
        if (c->active && c->origin == 0 && (lease < 0 || c->lease == lease) &&
            !hilo_lease_abandoned(s) && nheld < HILO_LEASE_SLOTS) {
            c->active = false;
            held[nheld] = s;
            held_requests[nheld++] = c->request;
        }
    }
}

/*
 * Every lease starts over (the configuration changed): this node's callers
 * keep their calls, which start again under the new leases once the
 * configuration is read (start_held_calls); calls forwarded here are
 * answered as failed, and their forwarders look again. A call started
 * again is safe: it has returned nothing, and whatever the old lease
 * handed out for it is a gap (a lease node starts above every ID an
 * earlier holder could have handed out). A call whose backend gave up is
 * answered, not started again: nobody would read its ID, and it may be
 * of a catalog dropped since, whose lease would then be made again in
 * the cluster formed on the new catalog and take its IDs (the new
 * catalog's sequence would start a block or more above start_value).
 */
static void restart_all_leases(void)
{
    hold_calls_of(-1);
    free_all_leases();
    hilo_lease_saved_clear(); /* under another configuration or other settings */
}

/* Frees lease `i` and keeps the array dense: an awake lease's place goes
 * to the last awake one, an asleep lease's to the last lease. */
static void remove_lease(int i)
{
    if (leases[i].node != NULL)
        free_lease(i);
    if (i < nawake) {
        swap_leases(i, nawake - 1);
        i = --nawake;
    }
    swap_leases(i, nleases - 1);
    nleases--;
    (void)hash_search(lease_index, leases[nleases].seq, HASH_REMOVE, NULL);
}

/* How many leases this worker keeps for sequences of `owner`. */
static int leases_of(Oid owner)
{
    int n = 0;
    for (int i = 0; i < nleases; i++)
        n += leases[i].owner == owner;
    return n;
}

/* The error of a call whose owner has hilo.cluster_sequences_per_role
 * leases on this node already. */
static void role_limit_error(HiloRemoteError *e, const HiloLeaseRequest *r)
{
    char message[HILO_REMOTE_TEXT_BYTES], detail[HILO_REMOTE_TEXT_BYTES];
    snprintf(message, sizeof(message),
             "hilo sequence \"%s\" has ordering 'cluster', and its owner, role \"%s\", has %d "
             "such sequences in use on this node already",
             r->seq, NameStr(r->owner_name), hilo_cluster_sequences_per_role);
    snprintf(detail, sizeof(detail),
             "A node keeps a lease for each 'cluster' sequence called on it within the last "
             "300 s, at most hilo.cluster_sequences_per_role (%d) per owner.",
             hilo_cluster_sequences_per_role);
    hilo_remote_error_set(e, ERRCODE_CONFIGURATION_LIMIT_EXCEEDED, message, detail,
                          "Retry once some of the role's 'cluster' sequences have not been "
                          "called for 300 s, or raise hilo.cluster_sequences_per_role.");
}

/* The lease of a request's sequence, made if new; -1 (and *error) if none. */
static int lease_for(const HiloLeaseRequest *r, HiloRemoteError *error)
{
    int i = find_lease(r->seq);
    if (i >= 0) {
        i = wake_lease(i);
        if (leases[i].floor == r->floor && leases[i].max_value == r->max_value &&
            leases[i].catalog == r->catalog)
            return i;
    }
    /* This node's calls in flight under a lease of the same catalog whose
     * settings were altered (hilo_alter of max_value) start again under
     * the new one, as on a change of members (restart_all_leases); those
     * whose backend gave up are answered (free_lease) instead. */
    int again[HILO_LEASE_SLOTS];
    int nagain = 0;
    if (i >= 0) {
        /* The sequence was made again, or altered, or its catalog: start over. */
        if (leases[i].catalog == r->catalog)
            for (int s = 0; s < HILO_LEASE_SLOTS; s++)
                if (slot_calls[s].active && slot_calls[s].lease == i && slot_calls[s].origin == 0 &&
                    !hilo_lease_abandoned(s)) {
                    slot_calls[s].active = false;
                    again[nagain++] = s;
                }
        free_lease(i);
    } else if (leases_of(r->owner) >= hilo_cluster_sequences_per_role) {
        /* Only this owner's sequences are refused: no role fills the
         * table for the others. */
        role_limit_error(error, r);
        return -1;
    } else {
        if (nleases == leases_allocated) {
            int n = Max(64, 2 * leases_allocated);
            leases = leases == NULL
                         ? (SeqLease *)MemoryContextAlloc(TopMemoryContext, sizeof(SeqLease) * n)
                         : (SeqLease *)repalloc(leases, sizeof(SeqLease) * n);
            leases_allocated = n;
        }
        /* A new lease is awake: the first asleep one moves to the end. */
        i = nleases++;
        if (nawake < i) {
            leases[i] = leases[nawake];
            for (int s = 0; s < HILO_LEASE_SLOTS; s++)
                if (slot_calls[s].active && slot_calls[s].lease == nawake)
                    slot_calls[s].lease = i;
            index_lease(i);
        }
        i = nawake++;
    }
    uint64 d = (uint64)hilo_lease_time_ms * 1000;
    HiloLeaseParams p;
    memset(&p, 0, sizeof(p));
    p.members = members;
    p.member_count = (uint32)nmembers;
    p.lease_duration = d;
    p.drift_margin = hilo_lease_required_drift_margin(d, (uint32)hilo_clock_drift_ppm);
    p.drift_ppm = (uint32)hilo_clock_drift_ppm; /* carried in grants (core/lease.hpp, A5) */
    p.block_size = (uint64)r->block_size;
    p.request_timeout = Max(d / 4, 100000);
    p.call_timeout = (uint64)hilo_claim_timeout_ms * 1000;
    p.suspect_after = HILO_LEASE_SUSPECT_DEFAULT;
    p.floor = r->floor;
    p.max_value = r->max_value;
    p.idle_after = d; /* an idle sequence's lease lapses (P5) */
    SeqLease *l = &leases[i];
    strlcpy(l->seq, r->seq, sizeof(l->seq));
    index_lease(i);
    l->floor = r->floor;
    l->max_value = r->max_value;
    l->catalog = r->catalog;
    l->owner = r->owner;
    l->block_size = r->block_size;
    /* Round ids carry the era (32 bits): each node its own. */
    node_era = (node_era + 1) & 0xffffffffu;
    if (node_era == 0)
        node_era = 1;
    char reason[HILO_LEASE_ERROR_BYTES];
    l->node = hilo_lease_node_create(self_id, node_era, &p, reason, sizeof(reason));
    l->last_used = now_us();
    l->serving = false;
    l->lapsed = false;
    l->pool_seen = 0;
    l->pool_retry_at = 0;
    l->wants_pool = false;
    l->pool_ids = (uint64)Max(r->block_size / 2, 1);
    l->refill_id = 0;
    l->highest_answered = 0;
    l->route_uses = 0;
    l->let_go = false;
    if (l->node == NULL) {
        for (int k = 0; k < nagain; k++)
            answer_unserved(again[k], &slot_calls[again[k]].request, reason);
        hilo_lease_unserved(error, r->seq, reason);
        remove_lease(i);
        return -1;
    }
    /* The chain of a lease forgotten for want of calls, if it ran under
     * these settings: the next call resumes it (lease_saved.cpp). */
    HiloSavedLease kept;
    if (hilo_lease_saved_take(r->seq, &kept) && kept.catalog == r->catalog &&
        kept.floor == r->floor && kept.max_value == r->max_value &&
        hilo_lease_node_restore_chain(l->node, &kept.chain))
        ereport(DEBUG1, (errmsg("hilo lease worker: sequence \"%s\" resumes its lease chain, "
                                "next ID %lld",
                                r->seq, (long long)kept.chain.next_id)));
    for (int k = 0; k < nagain; k++) {
        SlotCall *c = &slot_calls[again[k]];
        c->active = true;
        c->lease = i;
        c->id = (worker_era << 32) | (++next_call_id & 0xffffffffu);
        hilo_lease_node_call_n(l->node, c->id, c->request.count, now_us());
    }
    return i;
}

static void start_call(int slot, const HiloLeaseRequest *r)
{
    if (nmembers == 0) {
        answer_unserved(slot, r, "this node is in no hilo cluster");
        return;
    }
    HiloRemoteError error;
    int i;
    if (r->origin != 0) {
        /* Forwarded: served only under a lease this worker has, or one
         * whose chain it kept (lease_saved.cpp) under the forwarder's
         * settings. */
        i = find_lease(r->seq);
        const HiloSavedLease *kept = i < 0 ? hilo_lease_saved_find(r->seq) : NULL;
        if (kept != NULL && kept->catalog == r->catalog && kept->floor == r->floor &&
            kept->max_value == r->max_value) {
            HiloLeaseRequest own = *r;
            own.block_size = kept->block_size;
            own.owner = kept->owner;
            i = lease_for(&own, &error);
        }
        if (i >= 0 && leases[i].catalog != r->catalog) {
            remove_lease(i); /* of an older catalog: it serves nobody now */
            i = -1;
        }
        if (i >= 0)
            i = wake_lease(i); /* a lapsed lease resumes for it (P5) */
        if (i < 0) {
            answer_unserved(slot, r, "this node does not hold the lease");
            return;
        }
    } else if ((i = lease_for(r, &error)) < 0) {
        answer(slot, false, 0, &error);
        return;
    }
    uint64 now = now_us();
    SeqLease *l = &leases[i];
    l->last_used = now;
    l->wants_pool = true;
    if (hilo_lease_node_serving(l->node, now)) {
        int64 first;
        hilo_lease_pool_keep(l->seq, hilo_lease_node_next_id(l->node, now),
                             hilo_lease_node_serving_until(l->node, now));
        if (hilo_lease_pool_take(l->seq, l->catalog, r->floor, r->max_value, r->count, &first)) {
            answer(slot, true, first, NULL);
            return;
        }
    }
    /* Else the node serves it, and it swaps with the pool when answered
     * (answer_call). */
    SlotCall *c = &slot_calls[slot];
    c->active = true;
    c->lease = i;
    c->origin = r->origin;
    c->request = *r;
    c->failed_at_holder = false;
    if (r->origin == 0) {
        c->id = (worker_era << 32) | (++next_call_id & 0xffffffffu);
        hilo_lease_node_call_n(leases[i].node, c->id, r->count, now);
    } else {
        c->id = r->remote_call_id;
        HiloLeaseMessage m;
        memset(&m, 0, sizeof(m));
        m.from = r->origin;
        m.to = self_id;
        m.kind = HILO_LEASE_FORWARD;
        m.request_id = r->remote_call_id;
        m.value = (int64)r->count;
        hilo_lease_node_on_message(leases[i].node, &m, now);
    }
    pump(i);
}

/* Takes the waiting requests; true if some wait for the configuration. */
static bool take_requests(void)
{
    HiloLeaseRequest r;
    int slot;
    while ((slot = hilo_lease_next_request(&r)) >= 0) {
        if (nmembers == 0) {
            held[nheld] = slot;
            held_requests[nheld++] = r;
        } else {
            start_call(slot, &r);
        }
    }
    return nheld > 0;
}

static void start_held_calls(void)
{
    for (int k = 0; k < nheld; k++)
        if (hilo_lease_abandoned(held[k]))
            answer_unserved(held[k], &held_requests[k], "the caller gave up"); /* frees the slot */
        else
            start_call(held[k], &held_requests[k]);
    nheld = 0;
}

static void deliver(const char *seq, const HiloLeaseMessage *message, const HiloRemoteError *error)
{
    int i = find_lease(seq);
    if (i < 0)
        return;
    i = wake_lease(i);
    if (error != NULL)
        for (int s = 0; s < HILO_LEASE_SLOTS; s++) {
            SlotCall *c = &slot_calls[s];
            if (c->active && c->lease == i && c->origin == 0 && c->id == message->request_id) {
                c->failed_at_holder = true;
                c->holder_error = *error;
            }
        }
    hilo_lease_node_on_message(leases[i].node, message, now_us());
    pump(i);
}

/* Keeps lease `i`'s pool usable while the node serves, and full. */
static void refill_pool(int i, bool serving, uint64 now)
{
    SeqLease *l = &leases[i];
    if (!serving) {
        /* A lapsed lease's pool waits, unusable (its time is up), for the
         * chain to resume; another node's lease ends it. */
        if (!hilo_lease_node_resumable(l->node))
            hilo_lease_pool_clear(l->seq);
        return;
    }
    hilo_lease_pool_keep(l->seq, hilo_lease_node_next_id(l->node, now),
                         hilo_lease_node_serving_until(l->node, now));
    uint64 left = hilo_lease_pool_left(l->seq);
    if (left < l->pool_seen) {
        /* Backends took IDs from the pool: the sequence is in use, and its
         * lease must not lapse (P5), though no call reached the node. */
        hilo_lease_node_touch(l->node, now);
        l->last_used = now;
        l->wants_pool = true;
    }
    l->pool_seen = left;
    if (l->refill_id != 0 || !l->wants_pool || left >= l->pool_ids / 2 || now < l->pool_retry_at)
        return;
    l->wants_pool = false;
    /* The pool's IDs are being handed out: the sequence is in use here,
     * though no call reaches the worker. */
    l->last_used = now;
    l->refill_id = (worker_era << 32) | (++next_call_id & 0xffffffffu);
    hilo_lease_node_call_n(l->node, l->refill_id, l->pool_ids, now);
    pump(i);
}

/* The holder stopped serving: why (core/lease.hpp's ChainEnd), in ms. */
static void log_lease_end(const SeqLease *l)
{
    HiloLeaseChainEnd e;
    if (!hilo_lease_node_chain_end(l->node, &e)) {
        ereport(LOG, (errmsg("hilo lease worker: this node is no longer serving sequence \"%s\"",
                             l->seq)));
        return;
    }
    StringInfoData why;
    initStringInfo(&why);
    if (e.refused > 0) {
        appendStringInfo(&why, "A renewal was refused: node %u took the lease.", e.refusing_holder);
    } else {
        appendStringInfo(
            &why, "Its lease ran out " UINT64_FORMAT " ms after its last granted renewal was sent",
            (e.ended_at - e.last_grant_sent) / 1000);
        if (e.renewal_sent == 0)
            appendStringInfoString(&why, ", with no renewal in flight.");
        else if (e.resends == 0)
            appendStringInfo(&why,
                             "; the renewal in flight since " UINT64_FORMAT
                             " ms before that, sent once, had %u of %d answers.",
                             (e.ended_at - e.renewal_sent) / 1000, e.answers, nmembers);
        else
            appendStringInfo(&why,
                             "; the renewal in flight since " UINT64_FORMAT
                             " ms before that, sent %u times, had %u of %d answers.",
                             (e.ended_at - e.renewal_sent) / 1000, e.resends + 1, e.answers,
                             nmembers);
    }
    appendStringInfo(&why,
                     " The slowest granted round of the lease took " UINT64_FORMAT
                     " ms; this worker went up to " UINT64_FORMAT " ms between two passes.",
                     e.slowest_grant / 1000, e.longest_stall / 1000);
    ereport(LOG,
            (errmsg("hilo lease worker: this node is no longer serving sequence \"%s\"", l->seq),
             errdetail_internal("%s", why.data)));
    pfree(why.data);
}

/* Whether lease `i` was not used on this node for LEASE_IDLE_US. Calls
 * that backends forwarded directly count as use too. */
static bool unused(int i, uint64 now)
{
    if (now - leases[i].last_used <= LEASE_IDLE_US)
        return false;
    uint64 uses = hilo_lease_route_uses(leases[i].seq);
    if (uses != leases[i].route_uses) {
        leases[i].route_uses = uses;
        leases[i].last_used = now;
        return false;
    }
    return true;
}

/* Frees lease `i`, nobody's use for LEASE_IDLE_US, keeping its chain if
 * it lapsed: from the lowest ID its node served that nobody got (the
 * pool's, if the pool runs up to the node's next ID). */
static void forget_lease(int i)
{
    SeqLease *l = &leases[i];
    HiloSavedLease kept;
    if (l->node != NULL && hilo_lease_node_save_chain(l->node, &kept.chain)) {
        strlcpy(kept.seq, l->seq, sizeof(kept.seq));
        kept.catalog = l->catalog;
        kept.floor = l->floor;
        kept.max_value = l->max_value;
        kept.block_size = l->block_size;
        kept.owner = l->owner;
        kept.chain.next_id = hilo_lease_pool_release(l->seq, kept.chain.next_id);
        if (hilo_lease_saved_put(&kept))
            ereport(DEBUG1,
                    (errmsg("hilo lease worker: forgot the lease of sequence \"%s\", unused for %d "
                            "ms; its chain goes on from ID %lld",
                            l->seq, hilo_lease_forget_after_ms, (long long)kept.chain.next_id)));
    }
    remove_lease(i);
}

/* Forgets the asleep leases nobody used for LEASE_IDLE_US, once a second:
 * what an idle sequence costs is its memory, for that long. */
static void sweep_asleep(uint64 now)
{
    static uint64 next_sweep = 0;
    if (now < next_sweep)
        return;
    next_sweep = now + LEASE_SWEEP_US;
    for (int i = nawake; i < nleases; i++)
        if (unused(i, now))
            forget_lease(i--);
}

/* The log tells when this node starts and stops serving a sequence; a
 * lease that lapses for idleness (P5) and resumes only at DEBUG1, as an
 * idle sequence's lease does all the time. */
static void log_serving(SeqLease *l, bool serving)
{
    HiloLeaseChainEnd e;
    if (serving && !l->serving) {
        hilo_lease_route_clear(l->seq); /* this node serves its own calls */
        ereport(l->lapsed ? DEBUG1 : LOG,
                (errmsg("hilo lease worker: this node is now serving sequence \"%s\"", l->seq)));
        l->lapsed = false;
    } else if (!serving && l->serving) {
        if (hilo_lease_node_chain_end(l->node, &e) && e.idle) {
            l->lapsed = true;
            ereport(DEBUG1, (errmsg("hilo lease worker: the lease of sequence \"%s\" lapsed: "
                                    "nobody called it for a lease time",
                                    l->seq)));
        } else {
            log_lease_end(l);
        }
    } else if (!serving && l->lapsed && !hilo_lease_node_resumable(l->node)) {
        l->lapsed = false; /* another node took the lease meanwhile */
    }
    l->serving = serving;
}

static bool poll_worker(void)
{
    if (take_requests())
        return true;
    sweep_asleep(now_us());
    for (int i = 0; i < nawake; i++) {
        uint64 now = now_us();
        /* (A serving lease lapses first: its chain is then kept.) */
        if (unused(i, now) && !hilo_lease_node_serving(leases[i].node, now)) {
            forget_lease(i--); /* its callers, if any, are answered */
            continue;
        }
        if (leases[i].let_go) {
            /* It ends, and a new holder waits it out; this node's callers
             * start again under a lease of their own settings once the
             * configuration is read, as when every lease starts over. */
            hold_calls_of(i);
            remove_lease(i--);
            continue;
        }
        hilo_lease_node_tick(leases[i].node, now);
        pump(i);
        bool serving = hilo_lease_node_serving(leases[i].node, now);
        refill_pool(i, serving, now);
        log_serving(&leases[i], serving);
        if (!serving && leases[i].refill_id == 0 && hilo_lease_node_asleep(leases[i].node)) {
            /* Asleep until a call or a message comes; the last awake lease
             * takes its place, and is looked at next. */
            swap_leases(i, nawake - 1);
            nawake--;
            i--;
        }
    }
    return ShutdownRequestPending || ConfigReloadPending;
}

/*
 * Reads the configuration into *cfg (epoch 0: no cluster, or no hilo here)
 * and this node's watermarks (fencing) into *marks
 * in the transaction begun, and leaves SPI connected and a snapshot pushed.
 * No lease is renewed while this runs, so it waits for a lock only a
 * moment: false (and the transaction to abort) when the catalog is locked
 * (ALTER EXTENSION, VACUUM FULL, LOCK TABLE of hilo.sequences or
 * hilo.cluster); the leases then go on under the members read last, and
 * the next run reads again. It used to wait for the lock, and a lock held
 * longer than the lease time cost the lease.
 */
static bool read_config(HiloConfig *cfg, HiloWatermarkSet *marks)
{
    MemoryContext context = CurrentMemoryContext;
    volatile bool read = true;
    PG_TRY();
    {
        hilo_answer_lock_timeout(Max(10, Min(100, hilo_lease_time_ms / 10)));
        PushActiveSnapshot(GetTransactionSnapshot());
        if (SPI_connect() != SPI_OK_CONNECT)
            elog(ERROR, "hilo lease worker: SPI_connect failed");
        /* Nothing to do in a database without hilo (yet). */
        bool isnull;
        if (!hilo_catalog_lock_first() ||
            SPI_execute("SELECT pg_catalog.to_regclass('hilo.lease_cells') IS NOT NULL", true, 1) !=
                SPI_OK_SELECT ||
            !DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)))
            cfg->epoch = 0;
        else {
            hilo_load_config(cfg);
            hilo_watermarks_load(marks, cfg);
        }
    }
    PG_CATCH();
    {
        HILO_FORGET_UNWOUND_FRAMES();
        MemoryContextSwitchTo(context);
        ErrorData *error = CopyErrorData();
        if (error->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE)
            PG_RE_THROW();
        FlushErrorState();
        ereport(DEBUG1,
                (errmsg("hilo lease worker: the configuration was not read: %s", error->message)));
        FreeErrorData(error);
        read = false;
    }
    PG_END_TRY();
    return read;
}

/*
 * Reads the configuration; a change of members starts every lease over.
 * Ends in the caller's memory context (the end of a transaction leaves
 * TopMemoryContext current).
 */
static void load_members(void)
{
    MemoryContext caller = CurrentMemoryContext;
    HiloConfig *cfg = (HiloConfig *)palloc(sizeof(HiloConfig));
    HiloWatermarkSet *marks = (HiloWatermarkSet *)palloc0(sizeof(HiloWatermarkSet));
    SetCurrentStatementStartTimestamp();
    StartTransactionCommand();
    if (!read_config(cfg, marks)) {
        AbortCurrentTransaction();
        MemoryContextSwitchTo(caller);
        return;
    }
    uint32 ids[HILO_MAX_NODES];
    int64 incarnations[HILO_MAX_NODES];
    int n = 0;
    uint32 self = 0;
    if (cfg->epoch > 0 && cfg->self >= 0) {
        for (int i = 0; i < cfg->nnodes; i++) {
            incarnations[n] = cfg->nodes[i].incarnation;
            ids[n++] = (uint32)cfg->nodes[i].id;
        }
        self = (uint32)cfg->nodes[cfg->self].id;
    }
    int64 epoch = n > 0 ? cfg->epoch : 0;
    int64 cluster_id = n > 0 ? cfg->cluster_id : 0;
    /* A cluster formed again (after CREATE EXTENSION, say) may have the
     * same epoch and node ids as the one before: its cluster_id and the
     * nodes' incarnations tell them apart. */
    if (epoch != members_epoch || cluster_id != members_cluster_id || n != nmembers ||
        self != self_id || memcmp(ids, members, sizeof(uint32) * n) != 0 ||
        memcmp(incarnations, member_incarnations, sizeof(int64) * n) != 0) {
        members_epoch = epoch;
        members_cluster_id = cluster_id;
        restart_all_leases();
        memcpy(members, ids, sizeof(uint32) * n);
        memcpy(member_incarnations, incarnations, sizeof(int64) * n);
        for (int k = 0; k < HILO_MAX_NODES; k++) {
            if (member_conninfos[k] != NULL)
                pfree(member_conninfos[k]);
            member_conninfos[k] = NULL;
            member_names[k][0] = '\0';
        }
        for (int k = 0; k < n; k++) {
            member_conninfos[k] = MemoryContextStrdup(TopMemoryContext, cfg->nodes[k].conninfo);
            strlcpy(member_names[k], cfg->nodes[k].name, sizeof(member_names[k]));
        }
        nmembers = n;
        self_id = self;
        if (n > 0)
            hilo_lease_net_configure(cfg, self);
    }
    if (n > 0)
        hilo_lease_net_learn(marks);
    SPI_finish();
    PopActiveSnapshot();
    CommitTransactionCommand();
    MemoryContextSwitchTo(caller);
}

/*
 * A reload (pg_reload_conf(), any ALTER SYSTEM ... and reload) starts the
 * leases over only when a setting their safety rests on changed: the lease
 * time or the clock drift bound. Starting over costs the cluster its
 * 'cluster' sequences until this node's old leases expired (two lease
 * times and the margin), and each sequence the rest of its block of IDs,
 * so a reload for another setting keeps them. A new claim timeout (how
 * long a call waits) holds for the calls made after it, in the leases as
 * they are.
 */
static void reload_settings(void)
{
    int lease_time = hilo_lease_time_ms, drift = hilo_clock_drift_ppm,
        claim_timeout = hilo_claim_timeout_ms;
    ProcessConfigFile(PGC_SIGHUP);
    if (lease_time != hilo_lease_time_ms || drift != hilo_clock_drift_ppm) {
        ereport(LOG, (errmsg("hilo lease worker: every lease starts over"),
                      errdetail("hilo.lease_time is %d ms, hilo.clock_drift_bound %d ppm.",
                                hilo_lease_time_ms, hilo_clock_drift_ppm)));
        restart_all_leases();
    } else if (claim_timeout != hilo_claim_timeout_ms) {
        for (int i = 0; i < nleases; i++)
            hilo_lease_node_set_call_timeout(leases[i].node, (uint64)hilo_claim_timeout_ms * 1000);
        ereport(LOG, (errmsg("hilo lease worker: calls now wait at most %d ms "
                             "(hilo.claim_timeout); the leases go on",
                             hilo_claim_timeout_ms)));
    }
}

static void worker_exit(int code, Datum arg)
{
    hilo_lease_pool_clear_all();
    hilo_lease_route_clear_all();
    hilo_lease_worker_detach();
}

static void lease_worker_main(Datum main_arg)
{
    hilo_cluster_worker_connect("hilo lease worker", SignalHandlerForShutdownRequest);
    /* 31 bits: the top bit of a call id marks a backend's direct call
     * (order/lease/lease_route.cpp), never one of the worker's. */
    worker_era = (hilo_random_nonzero() & 0x7fffffffu) | 1;
    node_era = worker_era;
    before_shmem_exit(worker_exit, 0);
    hilo_lease_pool_clear_all(); /* a killed worker's pools */
    hilo_lease_route_clear_all();
    hilo_lease_worker_attach();
    lease_index =
        hilo_name_table("hilo lease worker leases", 256, sizeof(LeaseIndexEntry), TopMemoryContext);

    MemoryContext loop_context =
        AllocSetContextCreate(TopMemoryContext, "hilo lease worker", ALLOCSET_DEFAULT_SIZES);
    while (!ShutdownRequestPending) {
        if (ConfigReloadPending) {
            ConfigReloadPending = false;
            reload_settings();
        }
        MemoryContextSwitchTo(loop_context);
        load_members();
        start_held_calls();
        TimestampTz until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), LEASE_RUN_MS);
        if (nmembers == 0) {
            /* In no cluster: fail the calls that come, look again later. */
            while (!poll_worker() && GetCurrentTimestamp() < until) {
                (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 100,
                                PG_WAIT_EXTENSION);
                ResetLatch(MyLatch);
                CHECK_FOR_INTERRUPTS();
            }
        } else {
            pgstat_report_activity(STATE_RUNNING, "hilo lease worker");
            hilo_lease_net_run(deliver, poll_worker, until, LEASE_TICK_MS,
                               2 * Max(hilo_lease_time_ms / 4, 100), hilo_claim_timeout_ms + 1000);
        }
        MemoryContextSwitchTo(TopMemoryContext);
        MemoryContextReset(loop_context);
        (void)hilo_worker_report_stats(false);
    }
    free_all_leases();
}

/* A C++ exception reaching the entry point becomes a FATAL error. */
HILO_WORKER_MAIN(hilo_lease_worker_main, lease_worker_main, "hilo lease worker")

void hilo_lease_init(void)
{
    hilo_lease_shmem_init();
    hilo_lease_pool_shmem_init();
    hilo_lease_route_shmem_init();
    hilo_lease_direct_shmem_init();
    hilo_register_cluster_worker("hilo_lease_worker_main", "hilo lease worker", 1);
}
