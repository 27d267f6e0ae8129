/*
 * cluster.h: declarations of the multi-node side of hilo (src/pg/cluster_*.cpp,
 * cluster/peers.cpp, register_*.cpp, cluster/membership.cpp, cluster/agent.cpp).
 *
 * Several nodes (PostgreSQL servers with hilo) share the ID space of every
 * sequence. New windows are claimed through the quorum register
 * (core/quorum_c_api.h) that every node stores; the cluster configuration is
 * agreed on with core/config_c_api.h; the agent keeps every node supplied.
 * docs/multi-node.md tells the whole story.
 */
#ifndef HILO_PG_CLUSTER_H
#define HILO_PG_CLUSTER_H

#include "../alloc/alloc.h"

extern "C" {
#include "libpq-fe.h"
#include "utils/timestamp.h"
}

#include "../../core/config_c_api.h"
#include "../../core/quorum_c_api.h"

/* Nodes a configuration can hold, and a node name's longest length. */
#define HILO_MAX_NODES 64
#define HILO_NODE_NAME_BYTES 64
#define HILO_PEER_ERROR_BYTES 512

/* ---- The cluster as a subsystem (cluster/cluster.cpp) ---- */

/* From _PG_init: the GUCs, the restore check, the agent, the window source. */
extern void hilo_cluster_init(void);

/* ---- ordering => 'quorum' (cluster/quorum_order.cpp) ---- */

/* From _PG_init: the gates' shared memory. */
extern void hilo_quorum_shmem_init(void);
/* cluster/quorum_server.cpp: the claim server of hilo.agent_database. */
extern void hilo_quorum_server_init(void);
/* quorum_order.cpp, for the claim server: registers its latch (NULL: it
 * leaves); the next gate from `from` on with calls waiting, marked busy
 * (its sequence in *seq), or -1; one claim for that gate's waiting calls
 * (an error answers them, then propagates). */
struct Latch;
extern void hilo_quorum_server_attach(struct Latch *latch);
extern int hilo_quorum_server_next_gate(int from, HiloSequence *seq);
extern void hilo_quorum_server_claim(int gate, const HiloSequence *seq);
/* `n` IDs as one range above every ID this cluster handed out before the
 * call began: one register claim per batch of this node's callers. */
extern void hilo_quorum_take(const HiloSequence *seq, uint64 n, HiloRange *out);

/* ---- ordering => 'cluster' (cluster/lease_*.cpp, lease.h) ---- */

/* From _PG_init: the slots' shared memory and the lease worker. */
extern void hilo_lease_init(void);
extern "C" PGDLLEXPORT void hilo_lease_worker_main(Datum main_arg);
/* `n` consecutive IDs above every ID this cluster handed out before the
 * call began, from the node that holds the sequence's lease. */
extern void hilo_lease_take(const HiloSequence *seq, uint64 n, HiloRange *out);

/* ---- GUCs (cluster/config.cpp) ---- */

extern char *hilo_agent_database;
extern int hilo_agent_interval_ms;
extern int hilo_claim_timeout_ms;

/* Defines the multi-node GUCs (before the prefix is reserved). */
extern void hilo_cluster_define_gucs(void);

/* How long a configuration must have been installed before the next change. */
extern int hilo_settle_ms(void);

/* ---- The configuration (cluster/config.cpp) ---- */

typedef struct HiloNode {
    int32 id;
    char name[HILO_NODE_NAME_BYTES];
    char *conninfo;
    int64 incarnation;
} HiloNode;

typedef struct HiloConfig {
    int64 epoch; /* 0: this node is in no cluster */
    int64 cluster_id;
    int32 next_node_id;
    int nnodes;
    HiloNode nodes[HILO_MAX_NODES];
    int self; /* index of this node in nodes; -1 if it is not a member */
    char *json;
} HiloConfig;

/* This node's incarnation: system identifier, timeline, database, nonce. */
extern int64 hilo_local_incarnation(void);
/* The nonce of hilo.local_node (created if asked; 0 if none) and what it makes. */
extern int64 hilo_local_nonce(bool create);
extern int64 hilo_incarnation_for_nonce(int64 nonce);
/* Parses a configuration (as jsonb text); `self_incarnation` finds self. Needs SPI. */
extern void hilo_parse_config(const char *json, int64 self_incarnation, HiloConfig *cfg);
/* The same, palloc'd, as this node reads it. */
extern HiloConfig *hilo_config_from_json(const char *json);
/* Reads the installed configuration (epoch 0 if none). Needs catalog access. */
extern void hilo_load_config(HiloConfig *cfg);
/* A random 64-bit value other than 0 (nonces, proposer and cluster ids). */
extern uint64 hilo_random_nonzero(void);
extern int hilo_config_index_of(const HiloConfig *cfg, int32 node_id);

/* Sets synchronous_commit = on for the rest of the transaction, and refuses
 * to run inside a transaction block (a reply must follow a durable commit).
 * Its callers' connections bound its lock waits (cluster/peers.cpp). */
extern void hilo_require_own_durable_transaction(const char *function_name);
/* Waits for a lock at most `ms` in this transaction (an answer nobody reads
 * after that long). */
extern void hilo_answer_lock_timeout(int ms);

/* ---- Peers: asynchronous libpq connections to other nodes (cluster/peers.cpp) ---- */

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
 * (cluster/peer_cache.cpp). */
extern HiloPeer *hilo_peer_for(int32 node_id, const char *name, const char *conninfo);
/* Peers for every node of a configuration, in its order; closes peers of other nodes. */
extern HiloPeer **hilo_peers_for_config(const HiloConfig *cfg);
/* Closes every peer of this process (backends do this at the end of each call). */
extern void hilo_peers_close_all(void);

/* ---- Broadcast: one query to many peers (cluster/broadcast.cpp) ---- */

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

/* ---- Register claims over libpq (cluster/register_claim.cpp) ---- */

/* What proposers remember about every node's register writes (fencing). */
typedef struct HiloWatermarkSet {
    int count;
    HiloWatermark entries[HILO_MAX_NODES];
} HiloWatermarkSet;

/* Merges what a proposer learned about a node, if `cfg` lists that incarnation. */
extern void hilo_watermarks_merge(HiloWatermarkSet *set, const HiloWatermark *w,
                                  const HiloConfig *cfg);
extern bool hilo_watermarks_fenced(const HiloWatermarkSet *set, const HiloNode *node);
/* Reads this node's hilo.peer_watermarks (the agent keeps it). Needs catalog access. */
extern void hilo_watermarks_load(HiloWatermarkSet *set, const HiloConfig *cfg);
/* That, merged with what the proposers of every node that answers learned. */
extern void hilo_watermarks_gather(HiloWatermarkSet *set, const HiloConfig *cfg, HiloPeer **peers);

#define HILO_FENCED_WHY                                                                         \
    "fenced: its register went backwards (restored from an old backup?); remove it and add it " \
    "again"

/* What a node of a configuration says of itself, judged (hilo_judge_nodes). */
typedef struct HiloJudgedNode {
    bool answered;
    int64 epoch;     /* the configuration it has installed */
    bool distrusted; /* another incarnation than the configuration lists */
    bool fenced;     /* its write count went backwards, now or before */
    char *why;       /* set when distrusted or fenced: it counts in no quorum */
} HiloJudgedNode;
/* Asks each node of `cfg` for its stamp and epoch and judges the stamp
 * against `set` (which learns from it). Fills judged[cfg->nnodes]. */
extern void hilo_judge_nodes(const HiloConfig *cfg, HiloPeer **peers, HiloWatermarkSet *set,
                             HiloJudgedNode *judged);

/* One claim to make in a round. */
typedef struct HiloClaimWant {
    const char *key;
    int64 floor;
    int64 max_value;
    uint64 window_size;
    uint64 window_count;
    bool whole;     /* all of it or nothing */
    bool has_guess; /* the first attempt sets above `guess` without a read */
    int64 guess;
    /* out */
    HiloClaimStatus status;
    HiloRange window;
    int64 highest_seen; /* the register value the claim read */
    uint32 attempts;    /* > 1: outvoted by other proposers before it ended */
    char *reason;       /* palloc'd */
} HiloClaimWant;

/*
 * Claims windows for every want at once through the quorum register of
 * `cfg`: requests to one node travel together, one durable transaction per
 * node per phase. Updates `watermarks` with what it learned. Per-node errors
 * are kept in the peers.
 */
extern void hilo_claim_round(const HiloConfig *cfg, HiloPeer **peers, HiloWatermarkSet *watermarks,
                             HiloClaimWant *wants, int nwants, int timeout_ms);

/* ---- The register on this node (cluster/register_acceptor.cpp) ---- */

/* RaiseTo for each key, through the acceptor rule; returns how many changed. */
extern int64 hilo_register_apply_raises(const char *const *keys, const int64 *values, int n);
/*
 * The node's write count (hilo.local_node), which proposers compare with the
 * highest they saw to fence a node restored from a copy: every acceptor
 * write counts, the register's and the lease cells'. The first adds `n`
 * writes made in this transaction and holds the stamp row locked until it
 * ends (the register's acceptor locks it before its cells, the lease
 * acceptor after its own, other rows); the second reads it.
 */
extern int64 hilo_count_acceptor_writes(int64 n);
extern int64 hilo_local_write_count(void);
/* A name's value in hilo.register and its bound in hilo.lease_cells on
 * this node (HILO_MIN_ID - 1 if none): each acceptor answers with the
 * higher of the two, so that a sequence made again under the name with
 * another ordering starts above the dropped one's IDs. */
extern int64 hilo_register_value_of(const char *key);
extern int64 hilo_lease_bound_of(const char *seq);
/* Locks a name on this node for both registers' acceptors until the
 * transaction ends; each takes it before its cell's row. An advisory lock
 * (pg_locks shows objsubid HILO_LOCKTAG_NAME_REGISTERS), keyed by a hash of
 * the name. */
#define HILO_LOCKTAG_NAME_REGISTERS 0x6869
extern void hilo_lock_name_registers(const char *name);
/* Locks all `n` names of a batch in one order (their locks' keys, sorted),
 * before any other lock of the acceptor: two batches that share names wait
 * for each other in that order only, never in a cycle. */
extern void hilo_lock_names_in_order(const char *const *names, int n);

/* ---- Allocator integration (cluster/window_claim.cpp; cluster.cpp installs
 * these as the allocator's window source, hilo.h) ---- */

/* True if this node is a member of a hilo cluster. */
extern bool hilo_cluster_active(void);
/* This node's id in its cluster, -1 in none; refuses on a node its
 * configuration does not list. Needs SPI. */
extern int32 hilo_cluster_local_node_id(void);

/* hilo._carry_sequence() with its 12 arguments as text, in the order of
 * its signature: the agent's carry (carry.cpp) and a node's first claim in
 * its slice (window_claim.cpp) send a copy the same way. */
extern const char hilo_carry_sequence_sql[];

/* Whether this node may claim in its slice of node_bits sequence `seq_id`:
 * true on a node in no cluster, or once a majority of the nodes held the
 * name with the same node_bits. Else, for a top-up, false; with `raise`
 * (a take) it carries its copy, reads every node's node_bits, and agrees or
 * raises an error (55000: other node_bits on some nodes; 08006: too few
 * answered). Needs SPI. */
extern bool hilo_cluster_slice_agreed(int32 seq_id, const char *seq_name, int32 node_bits,
                                      bool raise);

/*
 * Called by the allocator before it claims a window above the local
 * high-water mark. Returns false on a node in no cluster (claim locally, as
 * always). Otherwise windows come from the quorum register only: for a take
 * (`for_take`) it claims `size` IDs through the register, waiting for a
 * majority, and sets *claimed and *window (exhaustion leaves *claimed false;
 * no majority raises an error); for a top-up it claims nothing, wakes the
 * agent, and leaves *claimed false.
 */
extern bool hilo_cluster_claims_window(const char *seq_name, int64 start_value, int64 max_value,
                                       uint64 size, bool for_take, bool *claimed,
                                       HiloRange *window);
/* The same for a take that needs all `size` IDs or none: when fewer are
 * left, nothing is claimed and *left (if not NULL) says how many are. */
extern bool hilo_cluster_claims_whole_window(const char *seq_name, int64 start_value,
                                             int64 max_value, uint64 size, bool *claimed,
                                             HiloRange *window, uint64 *left);
/* The same for a sequence ordered across the cluster ('quorum'): its errors
 * say so (it has no open windows). `guess` (if not NULL): where the register
 * stands at least, the end of this node's last claim of the sequence; the
 * claim then sets above it without reading first (HiloClaimSpec). */
extern bool hilo_cluster_claims_ordered_window(const char *seq_name, int64 start_value,
                                               int64 max_value, uint64 size, const int64 *guess,
                                               bool *claimed, HiloRange *window, uint64 *left);

/* ---- hilo_raise on a node of a cluster (cluster/raise.cpp) ---- */

/* Has every node of the cluster apply a raise of `seq` to `above` (its
 * register and lease cells and its catalog) as the caller's transaction
 * commits, each for good; nothing on a node in no cluster. 22023 for a
 * node_bits mark that leaves a member's slice empty; 08006, changing
 * nothing, if a node does not answer a first round (now, and again at
 * commit), and 08006 at commit naming the nodes that failed to apply it
 * (the others skip the IDs: a gap; the transaction aborts). */
extern void hilo_cluster_raise(const HiloSequence *seq, int64 above);

/* ---- Starts from a backup or a recovery (cluster/restore.cpp) ---- */

/*
 * Called from _PG_init: in the postmaster (or a single-user backend), if
 * backup_label, recovery.signal or standby.signal is in the data directory,
 * writes a new restore id to $PGDATA/hilo_restore_id; every process reads it.
 */
extern void hilo_restore_check_at_start(void);
/* The restore id this server runs under (0: it never started from a backup). */
extern uint64 hilo_restore_id(void);
/* Why a node is not listed in its own configuration, for error details. */
extern const char *hilo_not_member_detail(void);
/* This node's id in `cfg`; 55000 with that detail if `cfg` does not list it. */
extern uint32 hilo_member_self_id(const HiloConfig *cfg);
/* Refuses (55000) acceptor work on a node its installed configuration does not list. */
extern void hilo_require_listed_member(const char *function_name);
/* The allocator's first transaction: retires restored windows once per restore id. */
extern void hilo_restore_retire_windows(void);

/* ---- Membership (cluster/membership.cpp) ---- */

/* What the nodes of a configuration say about the cluster. */
typedef struct HiloClusterView {
    int reachable;
    bool *answered;     /* per node */
    int64 *epochs;      /* per node that answered */
    char **node_errors; /* per node that did not */
    char *newest_json;  /* a newer configuration than ours that some node installed, or NULL */
    int64 newest_epoch;
    int64 youngest_install_ms; /* since our epoch was installed, the least any node reports */
    bool pending_stale;        /* a node accepted a proposal long ago that nobody committed */
    char *errors;              /* all node errors in one line */
} HiloClusterView;

extern void hilo_look_at_cluster(const HiloConfig *cfg, HiloPeer **peers, HiloClusterView *view);
/* cluster/install.cpp: installs a configuration on the peers that are
 * behind; returns how many have it. */
extern int hilo_commit_config_on(HiloPeer **peers, int npeers, const char *json);
/* The same; appends to `missing` (unless NULL) each peer that does not have
 * it after, with why ("node "p2": why"; "; " between). */
extern int hilo_commit_config_reporting(HiloPeer **peers, int npeers, const char *json,
                                        StringInfo missing);
/* Installs `cfg` on its nodes that answered with an older epoch; whether any. */
extern bool hilo_commit_config_where_behind(const HiloConfig *cfg, HiloPeer **peers,
                                            const bool *answered, const int64 *epochs);

/*
 * Finishes a configuration change that some node accepted but nobody
 * committed (its changer died); the agent calls it. Returns true if it
 * committed one.
 */
extern bool hilo_finish_pending_change(const HiloConfig *cfg, HiloPeer **peers, char *message,
                                       size_t message_size);

/* ---- The agent (cluster/agent.cpp) ---- */

/* Installs the agent's shared memory and registers its background worker. */
extern void hilo_agent_init(void);
/* Registers a static worker for hilo.agent_database (agent, lease worker,
 * claim server). */
extern void hilo_register_cluster_worker(const char *function_name, const char *type,
                                         int restart_seconds);
/* The start of such a worker's main: signals, the connection to
 * hilo.agent_database, its own settings (cluster/agent_worker.cpp). */
extern void hilo_cluster_worker_connect(const char *appname, pqsigfunc on_sigterm);

extern "C" PGDLLEXPORT void hilo_agent_main(Datum main_arg);
/* Wakes this database's agent worker, if one runs. */
extern void hilo_agent_wake(void);

/*
 * Creates on every node of `cfg` that answers the sequences it lacks (and
 * drops those dropped elsewhere), as an agent pass does. Used to initialise
 * a joining node before its configuration is installed.
 */
extern void hilo_carry_sequences(const HiloConfig *cfg, HiloPeer **peers, int64 *carried,
                                 char *message, size_t message_size);

/* Per node, what the last agent run in this database saw (for hilo.nodes). */
extern bool hilo_agent_node_status(int32 node_id, bool *reachable, char *error, size_t error_size);

#endif /* HILO_PG_CLUSTER_H */
