/*
 * cluster/net/net.h: asynchronous libpq connections to the other nodes
 * (peers.cpp, peer_cache.cpp), and one query to many of them at once
 * (broadcast.cpp). Above cluster/node only.
 */
#ifndef HILO_PG_CLUSTER_NET_H
#define HILO_PG_CLUSTER_NET_H

#include "../node/node.h"

extern "C" {
#include "libpq-fe.h"
#include "utils/timestamp.h"
}

#define HILO_PEER_ERROR_BYTES 512

/* ---- Peers: asynchronous libpq connections to other nodes (peers.cpp) ---- */

typedef enum HiloPeerState {
    HILO_PEER_CLOSED = 0,
    HILO_PEER_CONNECTING,
    HILO_PEER_SETUP, /* connected; checking that the node runs hilo */
    HILO_PEER_IDLE,
    HILO_PEER_BUSY,
    HILO_PEER_FAILED, /* gave up in this run; reconnects in the next */
} HiloPeerState;

typedef struct HiloPeer {
    int32 node_id;
    char name[HILO_NODE_NAME_BYTES];
    char *conninfo;               /* in the peer's memory context */
    const char *application_name; /* NULL: the worker type, or "hilo" */
    bool prepared; /* the caller prepared its statement on this connection (reset on close) */
    PGconn *conn;
    HiloPeerState state;
    PostgresPollingStatusType poll_status;
    bool want_write;        /* output still to be flushed */
    uint64 run_id;          /* the run whose query is in flight */
    TimestampTz started_at; /* of the connection attempt or the query in flight */
    PGresult *result;       /* last result of the query in flight */
    char error[HILO_PEER_ERROR_BYTES];
    bool not_hilo;        /* the last error: the node answers, but does not run hilo (fully) */
    bool failure_pending; /* failed, and the run's caller has not been told yet */
    char sqlstate[6];     /* the last error's SQLSTATE, if the node raised it */
    /* The answer to a query goes to whichever run is under way when it
     * comes (the lease worker's links, whose state outlives a run); when
     * false, an earlier run's answer is dropped. */
    bool answers_across_runs;
    int lock_timeout_ms; /* the connection's lock_timeout (set up with it) */
} HiloPeer;

typedef struct HiloPeerCallbacks {
    /* The peer is connected and idle: send its next query with hilo_peer_send(), or not. */
    void (*ready)(HiloPeer *peer, void *arg);
    /*
     * A query ended: exactly one of `result` (rows or command OK) and `error`
     * is set. Return true to keep `result` (then PQclear() it yourself).
     */
    bool (*done)(HiloPeer *peer, PGresult *result, const char *error, void *arg);
    /* The peer could not be reached (or was lost while idle); nothing was in flight. */
    void (*unreachable)(HiloPeer *peer, const char *error, void *arg);
    /* Whether the caller has what it needs; checked after every event. */
    bool (*finished)(void *arg);
    /*
     * Optional: when the caller next has something to send to a peer that is
     * idle now (it holds back retries), a time not after now if at once (it
     * was queued after that peer's ready(), or its hold ended since); 0 if
     * nothing waits for an idle peer. The loop calls ready() again then, and
     * ends when this is 0 and no peer is connecting or busy.
     */
    TimestampTz (*held_until)(void *arg);
} HiloPeerCallbacks;

/*
 * Drives the peers until `finished` says so or `deadline` passes, serving
 * interrupts all along. Queries still in flight at the deadline fail with a
 * timeout; those in flight when `finished` turns true are left to finish and
 * their results are discarded by a later run.
 */
extern void hilo_peers_run(HiloPeer **peers, int npeers, const HiloPeerCallbacks *callbacks,
                           void *arg, TimestampTz deadline);
/* Sends a query with text parameters; false (and the peer failed) if it could not. */
extern bool hilo_peer_send(HiloPeer *peer, const char *sql, int nparams, const Oid *types,
                           const char *const *values);
/* Runs the statement `name` the caller prepared on this connection. */
extern bool hilo_peer_send_prepared(HiloPeer *peer, const char *name, int nparams,
                                    const char *const *values);
extern void hilo_peer_close(HiloPeer *peer);

/* The process's peer for a node, (re)created when its conninfo changes
 * (peer_cache.cpp). */
extern HiloPeer *hilo_peer_for(int32 node_id, const char *name, const char *conninfo);
/* Peers for every node of a configuration, in its order; closes peers of other nodes. */
extern HiloPeer **hilo_peers_for_config(const HiloConfig *cfg);
/* Closes every peer of this process (backends do this at the end of each call). */
extern void hilo_peers_close_all(void);

/* ---- Broadcast: one query to many peers (broadcast.cpp) ---- */

/* One query to many peers, waiting for all of them (or the deadline). */
typedef struct HiloBroadcast {
    const char *sql;
    int nparams;
    const Oid *types;
    /* Per peer: its parameter values (NULL: the same `values` for all), or skip it. */
    const char *const *values;
    const char *const *const *values_per_peer;
    const bool *skip;
    /* Out, per peer: the result (caller PQclear()s it) or the error. */
    PGresult **results;
    char **errors;
} HiloBroadcast;

extern void hilo_broadcast(HiloPeer **peers, int npeers, HiloBroadcast *b, int timeout_ms);
/* The common case: `sql` with `nparams` text `values` (the same for every
 * peer, or none) to every peer, waiting up to hilo.claim_timeout. */
extern void hilo_broadcast_query(HiloPeer **peers, int npeers, HiloBroadcast *b, const char *sql,
                                 int nparams, const char *const *values);
/* The same, to the peers whose `skip` entry is false (NULL: every peer). */
extern void hilo_broadcast_query_skip(HiloPeer **peers, int npeers, HiloBroadcast *b,
                                      const char *sql, int nparams, const char *const *values,
                                      const bool *skip);
extern void hilo_broadcast_free(HiloBroadcast *b, int npeers);
/* Its peers' errors in one line ("a; b"), palloc'd; "" if none failed. */
extern char *hilo_broadcast_errors(HiloBroadcast *b, int npeers);
/* A value of a result, NULL if it is SQL NULL or not there (no result, no
 * such row or column); as int64, 0 then. */
extern const char *hilo_result_text(PGresult *r, int row, int col);
extern int64 hilo_result_int64(PGresult *r, int row, int col);

/* Text forms of array parameters ('{"a","b"}'), palloc'd. */
extern char *hilo_text_array(const char *const *items, int n);
extern char *hilo_int64_array(const int64 *items, int n);
extern char *hilo_int32_array(const int32 *items, int n);
extern char *hilo_bool_array(const bool *items, int n);

#endif /* HILO_PG_CLUSTER_NET_H */
