/*
 * cluster/node/node.h: this node as the cluster sees it, the ground floor
 * of the multi-node wing: its settings, its identity (nonce, incarnation),
 * the configuration it installed (config.cpp), and whether it started from
 * a backup (restore.cpp). node_keys.cpp answers hilo_node_id() and
 * hilo_node_of() from it. Every other room of the wing may call this one;
 * it calls none of them.
 */
#ifndef HILO_PG_CLUSTER_NODE_H
#define HILO_PG_CLUSTER_NODE_H

#include "../../alloc/alloc.h"

/* Nodes a configuration can hold, and a node name's longest length. */
#define HILO_MAX_NODES 64
#define HILO_NODE_NAME_BYTES 64

/* ---- The wing's settings (config.cpp) ---- */

extern char *hilo_agent_database;
extern int hilo_agent_interval_ms;
extern int hilo_claim_timeout_ms;

/* ordering 'cluster' (src/pg/order/lease). */
extern int hilo_lease_time_ms;
extern int hilo_clock_drift_ppm;
extern int hilo_forward_connections;
extern int hilo_cluster_sequences_per_role;
extern int hilo_lease_forget_after_ms; /* for tests */

/* Defines the multi-node GUCs (before the prefix is reserved). */
extern void hilo_define_cluster_gucs(void);

/* How long a configuration must have been installed before the next change. */
extern int hilo_settle_ms(void);

/* Wakes this database's agent worker, if one runs, as the agent set at
 * _PG_init (hilo_agent_init): so that membership, below the agent, can
 * wake it when this node installs a configuration. Nothing until set. */
extern void hilo_set_agent_wake(void (*wake)(void));
extern void hilo_wake_agent(void);

/* ---- The configuration (config.cpp) ---- */

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
 * Its callers' connections bound its lock waits (cluster/net/peers.cpp). */
extern void hilo_require_own_durable_transaction(const char *function_name);
/* Waits for a lock at most `ms` in this transaction (an answer nobody reads
 * after that long). */
extern void hilo_answer_lock_timeout(int ms);

/* ---- Starts from a backup or a recovery (restore.cpp) ---- */

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

#endif /* HILO_PG_CLUSTER_NODE_H */
