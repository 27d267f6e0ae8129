/*
 * cluster/carry/carry.h: copying sequences and their settings between the
 * nodes of a cluster (carry.cpp): what every node reports, read into one
 * table by name; what a node lacks created there, what was dropped
 * elsewhere dropped; the newest settings carried to older copies. An agent
 * pass does it, and so does a configuration change's pre-sync for a node
 * that joins. Above cluster/register, cluster/net and cluster/node.
 */
#ifndef HILO_PG_CLUSTER_CARRY_H
#define HILO_PG_CLUSTER_CARRY_H

#include "../register/register.h"

extern "C" {
#include "lib/stringinfo.h"
#include "utils/hsearch.h"
}

#define HILO_STATUS_BYTES 1024
#define HILO_NODE_ERROR_BYTES 256

typedef struct AgentNodeStatus {
    int32 node_id;
    bool reachable;
    char name[HILO_NODE_NAME_BYTES];
    char error[HILO_NODE_ERROR_BYTES];
} AgentNodeStatus;

typedef struct PassResult {
    bool in_cluster;
    bool ok;
    bool has_majority;
    int nodes_total;
    int nodes_reachable;
    int64 windows_claimed;
    int64 sequences_carried;
    int64 settings_carried;
    StringInfoData message;
    int nnodes;
    AgentNodeStatus nodes[HILO_MAX_NODES];
} PassResult;

/* A sequence as one node reports it. Its settings mirror HiloSequence's on
 * purpose, but as text and times another node sent (owner by name, creation
 * exact), never a catalog row of this node: so a struct of its own. */
typedef struct NodeSequence {
    char name[HILO_MAX_NAME_BYTES + 1];
    int64 start_value;
    int64 max_value;
    int64 window_size;
    int32 min_open_windows;
    int32 block_size;
    char *owner;
    char *created_at; /* ISO text in UTC, exact */
    int64 created_us; /* to compare */
    int64 open_windows;
    int32 node_bits;        /* > 0: every node claims in its own slice, the agent claims nothing */
    char ordering[16];      /* 'quorum', 'cluster': no open windows, the agent claims nothing */
    int64 settings_version; /* hilo_alter's settings: newest by (version, changed_us) */
    char *settings_changed_at;
    int64 changed_us;
    bool slice_agreed; /* node_bits: a majority held them at this node's first claim */
} NodeSequence;

/* Per sequence name: the original (earliest) instance, and who has what. */
typedef struct SequenceEntry {
    char name[HILO_MAX_NAME_BYTES + 1];
    NodeSequence *original;
    /* What a node that lacks the name gets: a copy whose node_bits a
     * majority agreed on (cluster/agent/window_claim.cpp), else the original. */
    NodeSequence *source;
    NodeSequence *newest;                  /* the newest copy of the settings (cluster-wide) */
    NodeSequence *on_node[HILO_MAX_NODES]; /* NULL: the node lacks it */
    bool dropped;                          /* a tombstone covers the original */
    int64 tombstone_us;
    char *tombstone_text;
    bool carried_to[HILO_MAX_NODES];
    int64 version_on[HILO_MAX_NODES]; /* settings version each node has after this pass */
} SequenceEntry;

typedef struct PassState {
    HiloConfig *cfg;
    HiloPeer **peers;
    bool *usable; /* answered, and not fenced */
    HiloWatermarkSet watermarks;
    HTAB *sequences;
} PassState;

/* The sequences every node reports, by name . */
extern HTAB *hilo_agent_sequence_table(void);
/* Reads every usable node's sequences and tombstones into st->sequences. */
extern void hilo_agent_read_sequences(PassState *st);
/* Creates and drops sequences so that every node has the same ones. */
extern void hilo_agent_carry_sequences(PassState *st, PassResult *res);
/* Carries the newest settings of every sequence to the nodes whose copy
 * is older, and records what every node has in every node's
 * hilo.node_settings (for hilo.status). */
extern void hilo_agent_carry_settings(PassState *st, PassResult *res);
/* Appends "; " and a formatted note to the pass's message. */
extern void hilo_agent_note(PassResult *res, const char *fmt, ...) pg_attribute_printf(2, 3);
/* Runs `sql` on every node not skipped; notes each
 * failure as "<failure> on node "<name>": <error>". */
extern void hilo_agent_write_all(PassState *st, PassResult *res, const bool *skip, const char *sql,
                                 int nparams, const char *const *values, const char *failure);

/*
 * Creates on every node of `cfg` that answers the sequences it lacks (and
 * drops those dropped elsewhere), as an agent pass does. Used to initialise
 * a joining node before its configuration is installed.
 */
extern void hilo_carry_sequences(const HiloConfig *cfg, HiloPeer **peers, int64 *carried,
                                 char *message, size_t message_size);

/* hilo._carry_sequence() with its 12 arguments as text, in the order of
 * its signature: the agent's carry (carry.cpp) and a node's first claim in
 * its slice (window_claim.cpp) send a copy the same way. */
extern const char hilo_carry_sequence_sql[];

#endif /* HILO_PG_CLUSTER_CARRY_H */
