/*
 * order/lease/lease_shared.h: what the files of ordering 'cluster' share (a leased
 * serving node; the protocol is core/lease.hpp).
 *
 *   lease_slots.cpp     shared memory: the lease worker of the agent's
 *                       database, the request slots that backends fill,
 *                       and since when each holder is seen (hilo.status)
 *   lease_take.cpp      the callers: hilo_nextval/hilo_take of a 'cluster'
 *                       sequence, and hilo._lease_forward (calls that other
 *                       nodes forward to this one); the pool in shared
 *                       memory: IDs the holder's worker took at once, which
 *                       backends hand out without a round trip
 *   lease_acceptor.cpp  hilo._lease_handle: the acceptor rule on this node
 *   lease_route.cpp     shared memory: the holder the worker last forwarded
 *                       to, per sequence, and the batches in which backends
 *                       send their calls to it themselves (a ticket ring,
 *                       order/ticket_ring.h)
 *   lease_direct.cpp    a backend's own connection to the holder: one
 *                       statement per batch
 *   lease_net.cpp       the worker's libpq connections: a queue of acceptor
 *                       messages and one of forwards per node
 *   lease_worker.cpp    the background worker: one core lease node per
 *                       sequence, driven by slots, replies and a clock
 *   lease_saved.cpp     the chains of leases the worker forgot, which the
 *                       next call resumes
 *
 * Calls run lease_take -> lease_slots, lease_route <- lease_worker
 * -> lease_net; lease_route -> lease_direct. Which way a call goes, and why
 * the worker's forwarding stays beside the backends' own: lease_take.cpp.
 */
#ifndef HILO_PG_ORDER_LEASE_SHARED_H
#define HILO_PG_ORDER_LEASE_SHARED_H

#include "../../cluster/register/register.h"
#include "lease.h"

extern "C" {
#include "port/atomics.h"
}

#include "../../../core/lease_c_api.h"
#include "../../remote_error.h"

#define HILO_LEASE_SLOTS 256
#define HILO_LEASE_ERROR_BYTES 96

/* A call as a backend hands it to the worker. */
typedef struct HiloLeaseRequest {
    char seq[HILO_MAX_NAME_BYTES + 1];
    /* The sequence's settings, as the caller's node has them (a forwarded
     * call carries its forwarder's): a call is served only IDs above
     * floor and up to max_value. */
    int64 floor; /* start_value - 1 */
    int64 max_value;
    int64 block_size; /* IDs recorded per renewal: the sequence's window_size */
    uint64 count;
    /* The creation of this node's catalog the call was made under
     * (hilo_catalog_creation): a lease, and its pool, serve one. */
    uint64 catalog;
    Oid owner;             /* the sequence's owner (a caller on this node) */
    NameData owner_name;   /* ... its name, for the error past its limit */
    uint32 origin;         /* 0: a caller on this node; else the forwarding node */
    uint64 remote_call_id; /* the forwarder's call id (origin != 0) */
} HiloLeaseRequest;

/* A call's answer: its first ID, or the error its caller raises (the
 * worker's or, for a forwarded call, the holder's). A forwarded call the
 * holder did not serve (it does not hold the lease, or not in time) has
 * neither: its forwarder looks again. */
typedef struct HiloLeaseAnswer {
    bool ok;
    int64 first;
    HiloRemoteError error; /* !ok: sqlerrcode 0 when not served */
} HiloLeaseAnswer;

/* ---- lease_slots.cpp ---- */

extern void hilo_lease_shmem_init(void);

/* The error of a call of `seq` that no node served: 08006, `reason` the
 * detail. */
extern void hilo_lease_unserved(HiloRemoteError *e, const char *seq, const char *reason);
/* The error of a call of `seq` for `count` IDs when fewer are left up to
 * its max_value: 2200H, as for every other sequence. */
extern void hilo_lease_exhausted(HiloRemoteError *e, const char *seq, uint64 count,
                                 const char *reason);

/* Backend: hands `n` requests to this database's lease worker and waits for
 * every answer until `timeout_ms` (then the unanswered ones fail). */
extern void hilo_lease_submit(const HiloLeaseRequest *requests, HiloLeaseAnswer *answers, int n,
                              int timeout_ms);

/* Worker: registers itself (its latch) for its database, or unregisters. */
extern void hilo_lease_worker_attach(void);
extern void hilo_lease_worker_detach(void);
/* Worker: the next waiting request (its slot index), or -1. */
extern int hilo_lease_next_request(HiloLeaseRequest *request);
/* Worker: answers slot `slot`. */
extern void hilo_lease_answer(int slot, const HiloLeaseAnswer *answer);
/* Worker: whether the backend of slot `slot` gave up waiting (timeout,
 * cancel, exit): its call is not worth starting again, and answering it
 * only frees the slot. */
extern bool hilo_lease_abandoned(int slot);

/* ---- lease_take.cpp: the pool, IDs the holder's worker took for backends ---- */

/* Pools per server: one per 'cluster' sequence this node serves at once. */
#define HILO_LEASE_POOLS 64

extern void hilo_lease_pool_shmem_init(void);
/* CLOCK_MONOTONIC in microseconds: the lease nodes' clock, the same in
 * every process of the machine. */
extern uint64 hilo_lease_clock_us(void);
/* Backend (and worker): `n` consecutive IDs from the pool of `seq` under
 * catalog creation `catalog`, if it has them, they lie above `floor`
 * (the caller's start_value - 1) and up to its `max_value`, and its lease
 * has not ended; false otherwise. */
extern bool hilo_lease_pool_take(const char *seq, uint64 catalog, int64 floor, int64 max_value,
                                 uint64 n, int64 *first);
/* Worker: puts [first, last] in the pool of `seq` under `catalog` (after
 * what it has if that ends at first - 1, else instead), usable until
 * `until`; false if no pool is free. */
extern bool hilo_lease_pool_fill(const char *seq, uint64 catalog, int64 first, int64 last,
                                 uint64 until);
/* Worker, while the node serves: the pool goes on, usable until `until`,
 * if its IDs run up to `next`, the node's next ID (nothing was served
 * since it was filled, by this node or any other); else it is emptied. */
extern void hilo_lease_pool_keep(const char *seq, int64 next, uint64 until);
/* Worker: a call of `n` IDs the node served from `first`, next in order
 * after the pool's last, gets the pool's first `n` IDs instead (if they
 * lie above `floor` and up to `max_value`) and the pool the node's, so
 * that no pooled ID is lost: true and *out then. Otherwise the pool's IDs,
 * all below `first`, are dropped (never handed out after the call). */
extern bool hilo_lease_pool_swap(const char *seq, uint64 catalog, int64 floor, int64 max_value,
                                 int64 first, uint64 n, uint64 until, int64 *out);
/* Worker, for a lease it frees but whose chain it keeps: empties the pool
 * and returns the lowest ID the node served that nobody got, `next` (the
 * node's next ID) or the pool's first if the pool runs up to `next`. */
extern int64 hilo_lease_pool_release(const char *seq, int64 next);
extern uint64 hilo_lease_pool_left(const char *seq);
/* Worker: empties a pool (its IDs are lost), or all of them. */
extern void hilo_lease_pool_clear(const char *seq);
extern void hilo_lease_pool_clear_all(void);

/* ---- lease_saved.cpp: the chains of leases the worker freed ---- */

/* A lease the worker freed (unused for hilo.lease_forget_after) whose chain
 * the next call resumes (core/lease.hpp, P5): the settings it ran under and
 * its chain. */
typedef struct HiloSavedLease {
    char seq[HILO_MAX_NAME_BYTES + 1];
    uint64 catalog;
    int64 floor;
    int64 max_value;
    int64 block_size;
    Oid owner;
    HiloLeaseSavedChain chain;
} HiloSavedLease;

/* Worker: keeps `saved` (replacing one of its name); false if as many
 * chains as it keeps are kept already. */
extern bool hilo_lease_saved_put(const HiloSavedLease *saved);
/* Worker: takes the chain kept for `seq` out of the table into *out. */
extern bool hilo_lease_saved_take(const char *seq, HiloSavedLease *out);
/* Worker: the chain kept for `seq`, or NULL. */
extern const HiloSavedLease *hilo_lease_saved_find(const char *seq);
/* Worker: forgets every kept chain (the leases start over). */
extern void hilo_lease_saved_clear(void);

/* ---- lease_route.cpp: a backend's direct way to the holder ---- */

extern void hilo_lease_route_shmem_init(void);
/* Worker: `holder` (reached at `conninfo`) served a call of `seq` that
 * this node (`self`) forwarded, under this catalog and these settings. */
extern void hilo_lease_route_set(const char *seq, uint64 catalog, int64 floor, int64 max_value,
                                 uint32 self, uint32 holder, const char *holder_name,
                                 const char *conninfo);
/* Worker: how many calls of `seq` the backends forwarded directly so far. */
extern uint64 hilo_lease_route_uses(const char *seq);
extern void hilo_lease_route_clear(const char *seq);
extern void hilo_lease_route_clear_all(void);
/* Backend: `n` IDs of `seq` from its holder over this backend's own
 * connection, if the worker named a holder and it served; false otherwise:
 * with the holder's error in *error when the call failed there (final),
 * else with error->sqlerrcode 0 (then the call goes through the worker). */
extern bool hilo_lease_direct_take(const HiloSequence *seq, uint64 n, int64 *first,
                                   HiloRemoteError *error);

/* ---- lease_direct.cpp: a backend's own connection to a holder ---- */

#define HILO_ROUTE_CONNINFO_BYTES 1024

/* A route as a backend copied it. */
typedef struct HiloLeaseRouteCopy {
    uint32 self, holder;
    uint64 generation;
    int64 floor, max_value; /* the settings its calls are made under */
    char holder_name[HILO_NODE_NAME_BYTES];
    char conninfo[HILO_ROUTE_CONNINFO_BYTES];
} HiloLeaseRouteCopy;

/* The count of backends that keep a connection, in shared memory. */
extern void hilo_lease_direct_shmem_init(void);
/* This backend's share of hilo.forward_connections: true if it keeps a
 * connection, or may from now on; false if all are taken. */
extern bool hilo_lease_direct_share(void);
/* How long a direct call waits for the holder's answer. */
extern int hilo_lease_direct_wait_ms(void);
/* `n` calls of `seq` (ids[i] for counts[i] IDs) to the route's holder in
 * one statement (the caller holds a share): true when the holder answered,
 * with ok[i] and first[i] per call, and for a call that failed there its
 * error in errors[i] (sqlerrcode 0: not served); false when it could not
 * be reached or did not answer in time. One call goes as the scalar, which
 * brings no error back, unless `rows`. */
extern bool hilo_lease_direct_call(const HiloLeaseRouteCopy *route, const char *seq, int n,
                                   const uint64 *ids, const uint64 *counts, bool rows, bool *ok,
                                   int64 *first, HiloRemoteError *errors);

/* ---- lease_net.cpp (the worker's connections) ---- */

/* What a reply from the network is handed to; `error`: the holder's error
 * for a FORWARD_REPLY of a call that failed there (NULL otherwise). */
typedef void (*HiloLeaseDeliver)(const char *seq, const HiloLeaseMessage *message,
                                 const HiloRemoteError *error);

/* Sets up the connections for a configuration (closing those of nodes that
 * left); `self` is this node's id. */
extern void hilo_lease_net_configure(const HiloConfig *cfg, uint32 self);
/* What this node's hilo.peer_watermarks says of the nodes' write counts
 * (the highest seen, fenced): an acceptor whose replies carry a lower count,
 * or that is fenced, counts in no majority (its replies are dropped). */
extern void hilo_lease_net_learn(const HiloWatermarkSet *set);
/* Queues a READ, GRANT or FORWARD for its node (a full queue loses it); a
 * FORWARD carries the settings of the forwarder's lease. */
extern void hilo_lease_net_send(const char *seq, int64 floor, int64 max_value,
                                const HiloLeaseMessage *message);
/*
 * Drives the connections until `until` or until `poll` returns true
 * (checked after every event and at least every `tick_ms`); replies go to
 * `deliver`. `request_timeout_ms`: a query unanswered that long is given
 * up (its connection closed). Ends early (after 200 ms at least) when an
 * acceptor refused a request as of another configuration, so that the
 * worker reads its configuration again at once.
 */
extern void hilo_lease_net_run(HiloLeaseDeliver deliver, bool (*poll)(void), TimestampTz until,
                               int tick_ms, int request_timeout_ms, int forward_timeout_ms);

#endif /* HILO_PG_ORDER_LEASE_SHARED_H */
