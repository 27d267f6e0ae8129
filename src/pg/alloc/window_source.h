/*
 * alloc/window_source.h: where windows above the high-water mark come from
 * (alloc/window_source.cpp), and the bounds of what this node may hand out
 * of a sequence. Included by alloc/alloc.h.
 */
#ifndef HILO_PG_ALLOC_WINDOW_SOURCE_H
#define HILO_PG_ALLOC_WINDOW_SOURCE_H

#include "../hilo.h"

/*
 * Where windows above the high-water mark come from. A node in no cluster
 * claims them itself, right above its own high-water mark. A member of a
 * hilo cluster must not: there windows come from the quorum register. The
 * allocator knows nothing of clusters: order/order.cpp installs a window
 * source at _PG_init (its functions in cluster/) and the allocator asks
 * it, so calls run from cluster/ and order/ into alloc/ and never back up.
 * (The calls of sequences ordered across the cluster do not come here:
 * sql/ hands them to order/.) Each function pointer is called in a
 * transaction, SPI connected.
 */
typedef struct HiloWindowSource {
    /* True if this node is in a cluster now (then it must not claim locally). */
    bool (*active)(void);
    /* Before a claim above the high-water mark: false means "claim locally".
     * Otherwise the source claimed (or not: *claimed), as
     * hilo_cluster_claims_window in cluster/agent/agent.h describes. */
    bool (*claims_window)(const char *seq_name, int64 start_value, int64 max_value, uint64 size,
                          bool for_take, bool *claimed, HiloRange *window);
    bool (*claims_whole_window)(const char *seq_name, int64 start_value, int64 max_value,
                                uint64 size, bool *claimed, HiloRange *window, uint64 *left);
    /* At an allocator's start, before it serves anything. */
    void (*at_allocator_start)(void);
    /* This node's id in its cluster, -1 in none (node_bits slices). */
    int32 (*local_node_id)(void);
    /* Whether this node may claim in its slice of a node_bits sequence
     * (hilo_cluster_slice_agreed in cluster/agent/agent.h). */
    bool (*slice_agreed)(int32 seq_id, const char *seq_name, int32 node_bits, bool raise);
} HiloWindowSource;

/* Installs the window source (from _PG_init; NULL: every node claims locally). */
extern void hilo_set_window_source(const HiloWindowSource *source);
/* The IDs this node claims for a sequence with node_bits (alloc/window_source.cpp):
 * false (or with `raise`, 55000) if this node's id does not fit. */
extern bool hilo_node_slice_of(const char *seq_name, int32 node_bits, bool raise, HiloRange *slice);
/* The IDs this node may hand out of a sequence: above *floor, up to *top (its
 * max_value, or the end of this node's slice when node_bits puts that
 * first; *floor 0 without node_bits). For a node id that does not fit:
 * false with nothing left (*top 0), or with `raise` 55000. */
extern bool hilo_sequence_bounds(const char *seq_name, int32 node_bits, int64 max_value, bool raise,
                                 int64 *floor, int64 *top);
/* hilo_sequence_bounds of `seq`, raising, from outside catalog access (it
 * reads this node's id in the catalog only for a sequence with node_bits). */
extern void hilo_sequence_bounds_of(const HiloSequence *seq, int64 *floor, int64 *top);
/* The source's slice_agreed; true without one. */
extern bool hilo_node_slice_agreed(int32 seq_id, const char *seq_name, int32 node_bits, bool raise);
/* The installed source's answer; false without a source. */
extern bool hilo_window_source_active(void);
/* The installed source's at_allocator_start, if any. */
extern void hilo_window_source_allocator_start(void);
/* A claim of `size` IDs through the installed source (`whole`: all of them or
 * none, *left then saying how many are left); false if there is no source
 * or it does not claim here (the allocator then claims locally). */
extern bool hilo_window_source_claims(const char *seq_name, int64 start_value, int64 max_value,
                                      uint64 size, bool used_up, bool whole, bool *claimed,
                                      HiloRange *window, uint64 *left);

#endif /* HILO_PG_ALLOC_WINDOW_SOURCE_H */
