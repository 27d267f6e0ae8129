/*
 * free_list_scan.cpp: where the allocator starts reading a sequence's free
 * list.
 *
 * The allocator consumes hilo.free_ranges lowest first and deletes what it
 * consumed, like a queue. Until vacuum removes them, the deleted rows stay
 * in the index; a scan "ORDER BY first_id LIMIT k" from the start walks
 * over all of them (and visits their heap tuples) on every refill, which
 * made serving a fragmented free list quadratic. So the allocator remembers,
 * per sequence, the ID above the last one it took from the free list: no
 * free row starts below it, unless a row was inserted since. Rows are
 * inserted by pushes (which count at commit in a shared epoch that resets
 * every bound), by the allocator's own returns (hilo_unreserve, which
 * resets them too), and by prepared pushes committed in another session
 * (no callback runs there: every maintenance round resets the bounds, so
 * such rows wait at most one hilo.naptime, as they did for their merge).
 * A bound is only where a scan starts: a stale one delays recycling of
 * lower IDs; it never hands an ID out twice.
 */
#include "internal.h"

#define HILO_SCAN_BOUNDS 64

typedef struct ScanBound {
    int32 seq_id;
    int64 from; /* no free row of seq_id starts below it */
    uint64 used;
} ScanBound;

static ScanBound bounds[HILO_SCAN_BOUNDS];
static int nbounds = 0;
static uint64 bounds_epoch = 0;
static uint64 use_clock = 0;

void hilo_free_scan_reset(void)
{
    nbounds = 0;
}

/* Forgets every bound if a push committed since they were made. */
static void check_epoch(void)
{
    uint64 epoch = pg_atomic_read_u64(&hilo_shared->free_list_epoch);
    if (epoch != bounds_epoch) {
        nbounds = 0;
        bounds_epoch = epoch;
    }
}

int64 hilo_free_scan_from(int32 seq_id)
{
    check_epoch();
    for (int i = 0; i < nbounds; i++)
        if (bounds[i].seq_id == seq_id) {
            bounds[i].used = ++use_clock;
            return bounds[i].from;
        }
    return PG_INT64_MIN;
}

void hilo_free_scan_consumed(int32 seq_id, int64 next_from)
{
    int victim = 0;
    for (int i = 0; i < nbounds; i++) {
        if (bounds[i].seq_id == seq_id) {
            bounds[i].from = Max(bounds[i].from, next_from);
            bounds[i].used = ++use_clock;
            return;
        }
        if (bounds[i].used < bounds[victim].used)
            victim = i;
    }
    if (nbounds < HILO_SCAN_BOUNDS)
        victim = nbounds++;
    bounds[victim].seq_id = seq_id;
    bounds[victim].from = next_from;
    bounds[victim].used = ++use_clock;
}

void hilo_free_list_note_insert(void)
{
    pg_atomic_fetch_add_u64(&hilo_shared->free_list_epoch, 1);
}
