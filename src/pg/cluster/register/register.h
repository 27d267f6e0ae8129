/*
 * cluster/register/register.h: the quorum register that every node
 * stores (core/quorum_c_api.h): the acceptor on this node
 * (register_acceptor.cpp), claims over libpq (register_claim.cpp), and
 * fencing by write counts (watermarks.cpp). Above cluster/net and
 * cluster/node.
 */
#ifndef HILO_PG_CLUSTER_REGISTER_H
#define HILO_PG_CLUSTER_REGISTER_H

#include "../net/net.h"

#include "../../../core/quorum_c_api.h"

/* ---- Register claims over libpq (register_claim.cpp, watermarks.cpp) ---- */

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

/* ---- The register on this node (register_acceptor.cpp) ---- */

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

#endif /* HILO_PG_CLUSTER_REGISTER_H */
