/*
 * alloc/window_source.cpp: the hook through which the allocator asks where
 * new IDs come from. order/order.cpp installs a source at _PG_init; on a node in
 * no cluster (or a build without one) the allocator claims right above the
 * local high-water mark, and a sequence with node_bits in this node's
 * slice. alloc/ never calls cluster/ or order/ otherwise.
 */
#include "internal.h"

extern "C" {
#include "miscadmin.h"
}

/* Installed by cluster/ at _PG_init; NULL on a build without one. */
static const HiloWindowSource *window_source = NULL;

void hilo_set_window_source(const HiloWindowSource *source)
{
    window_source = source;
}

/* The IDs this node may claim for a sequence with `node_bits`: its slice
 * (node 0's on a server in no cluster). For a node id that does not fit:
 * false, or with `raise` an error (55000). */
bool hilo_node_slice_of(const char *seq_name, int32 node_bits, bool raise, HiloRange *slice)
{
    int32 node = 0;
    if (window_source != NULL && window_source->local_node_id != NULL)
        node = Max(window_source->local_node_id(), 0);
    if (hilo_node_slice(node_bits, node, slice))
        return true;
    if (!raise)
        return false;
    ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                    errmsg("hilo sequence \"%s\" has node_bits %d, too few for this node's id %d",
                           seq_name, node_bits, node),
                    errdetail("With node_bits %d, node ids run from 0 to %d.", node_bits,
                              (1 << node_bits) - 1),
                    errhint("Create a sequence with more node_bits for this cluster.")));
    pg_unreachable();
}

bool hilo_sequence_bounds(const char *seq_name, int32 node_bits, int64 max_value, bool raise,
                          int64 *floor, int64 *top)
{
    *floor = 0;
    *top = max_value;
    if (node_bits <= 0)
        return true;
    HiloRange slice;
    if (!hilo_node_slice_of(seq_name, node_bits, raise, &slice)) {
        *top = 0;
        return false;
    }
    *floor = slice.first - 1;
    *top = Min(max_value, slice.last);
    return true;
}

void hilo_sequence_bounds_of(const HiloSequence *seq, int64 *floor, int64 *top)
{
    *floor = 0;
    *top = seq->max_value;
    if (seq->node_bits <= 0)
        return;
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    (void)hilo_sequence_bounds(seq->name, seq->node_bits, seq->max_value, true, floor, top);
    hilo_catalog_end(&access);
}

bool hilo_node_slice_agreed(int32 seq_id, const char *seq_name, int32 node_bits, bool raise)
{
    if (window_source == NULL || window_source->slice_agreed == NULL)
        return true;
    return window_source->slice_agreed(seq_id, seq_name, node_bits, raise);
}

bool hilo_window_source_active(void)
{
    return window_source != NULL && window_source->active();
}

void hilo_window_source_allocator_start(void)
{
    if (window_source != NULL && window_source->at_allocator_start != NULL)
        window_source->at_allocator_start();
}

bool hilo_window_source_claims(const char *seq_name, int64 start_value, int64 max_value,
                               uint64 size, bool used_up, bool whole, bool *claimed,
                               HiloRange *window, uint64 *left)
{
    if (window_source == NULL)
        return false;
    if (whole)
        return window_source->claims_whole_window(seq_name, start_value, max_value, size, claimed,
                                                  window, left);
    return window_source->claims_window(seq_name, start_value, max_value, size, used_up, claimed,
                                        window);
}
