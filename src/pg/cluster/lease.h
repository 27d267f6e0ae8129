/*
 * cluster/lease.h: what the files of ordering 'cluster' share (a leased
 * serving node, seed 001; the protocol is core/lease.hpp).
 *
 *   lease_slots.cpp     shared memory: the lease worker of the agent's
 *                       database and the request slots that backends fill
 *   lease_take.cpp      the callers: hilo_nextval/hilo_take of a 'cluster'
 *                       sequence, and hilo._lease_forward (calls that other
 *                       nodes forward to this one)
 *   lease_acceptor.cpp  hilo._lease_handle: the acceptor rule on this node
 *   lease_net.cpp       the worker's libpq connections: a queue of acceptor
 *                       messages and one of forwards per node
 *   lease_worker.cpp    the background worker: one core lease node per
 *                       sequence, driven by slots, replies and a clock
 *
 * Calls run lease_take -> lease_slots <- lease_worker -> lease_net.
 */
#ifndef HILO_PG_CLUSTER_LEASE_H
#define HILO_PG_CLUSTER_LEASE_H

#include "cluster.h"

#include "../../core/lease_c_api.h"

#define HILO_LEASE_SLOTS 256
#define HILO_LEASE_ERROR_BYTES 96

/* A call as a backend hands it to the worker. */
typedef struct HiloLeaseRequest {
    char seq[HILO_MAX_NAME_BYTES + 1];
    /* The sequence's settings (a forwarded call has none: only a node
     * whose worker serves the sequence, and so knows them, serves it). */
    int64 floor; /* start_value - 1 */
    int64 max_value;
    int64 block_size; /* IDs recorded per renewal: the sequence's window_size */
    uint64 count;
    uint32 origin;         /* 0: a caller on this node; else the forwarding node */
    uint64 remote_call_id; /* the forwarder's call id (origin != 0) */
} HiloLeaseRequest;

typedef struct HiloLeaseAnswer {
    bool ok;
    int64 first;
    char error[HILO_LEASE_ERROR_BYTES];
} HiloLeaseAnswer;

/* ---- lease_slots.cpp ---- */

extern void hilo_lease_shmem_init(void);

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

/* ---- lease_acceptor.cpp ---- */

/* The items of array argument `argno` (no NULLs: 22004 names `name`). */
extern Datum *hilo_lease_array(FunctionCallInfo fcinfo, int argno, const char *name, int *count);

/* ---- lease_net.cpp (the worker's connections) ---- */

/* What a reply from the network is handed to. */
typedef void (*HiloLeaseDeliver)(const char *seq, const HiloLeaseMessage *message);

/* Sets up the connections for a configuration (closing those of nodes that
 * left); `self` is this node's id. */
extern void hilo_lease_net_configure(const HiloConfig *cfg, uint32 self);
/* Queues a READ, GRANT or FORWARD for its node (a full queue loses it). */
extern void hilo_lease_net_send(const char *seq, const HiloLeaseMessage *message);
/*
 * Drives the connections until `until` or until `poll` returns true
 * (checked after every event and at least every `tick_ms`); replies go to
 * `deliver`. `request_timeout_ms`: a query unanswered that long is given
 * up (its connection closed).
 */
extern void hilo_lease_net_run(HiloLeaseDeliver deliver, bool (*poll)(void), TimestampTz until,
                               int tick_ms, int request_timeout_ms, int forward_timeout_ms);

/* ---- GUCs (cluster/config.cpp) ---- */

extern int hilo_lease_time_ms;
extern int hilo_clock_drift_ppm;

#endif /* HILO_PG_CLUSTER_LEASE_H */
