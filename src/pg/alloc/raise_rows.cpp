/*
 * alloc/raise_rows.cpp: what a raise of a sequence changes in this node's
 * catalog and shared memory, for hilo_raise (commands/sequence_raise.cpp),
 * its application on every node of a cluster (cluster/raise.cpp) and a
 * subscriber's raise above a publisher's windows (sql/replicated.cpp).
 */
#include "internal.h"

extern "C" {
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/inval.h"
}

bool hilo_raise_rows(const HiloSequence &seq, int64 above, bool move_start)
{
    /* The sequence row first: the allocator locks it NOWAIT before it
     * reserves anything, so from here until commit it reserves nothing of
     * this sequence, and a reservation it committed before is below us in
     * the windows read next (and in a pool made stale at commit). Moving
     * start_value also refuses pushes below the mark from then on. */
    static const char *raise_start =
        "UPDATE hilo.sequences SET start_value = $2 + 1,"
        "       high_water_mark = greatest(high_water_mark, $2)"
        " WHERE seq_id = $1";
    static const char *raise_mark =
        "UPDATE hilo.sequences SET high_water_mark = least(max_value, $2)"
        " WHERE seq_id = $1 AND high_water_mark < least(max_value, $2)";
    /* Windows give up what they still hold at or below the mark: used-up
     * windows record every ID reserved, so these become a gap. */
    static const char *raise_windows =
        "UPDATE hilo.windows SET next_hi_value = least(window_end_value, $2 + 1)"
        " WHERE seq_id = $1 AND next_hi_value <= $2 AND next_hi_value < window_end_value";
    static const char *drop_free =
        "DELETE FROM hilo.free_ranges WHERE seq_id = $1 AND last_id <= $2";
    static const char *trim_free =
        "UPDATE hilo.free_ranges SET first_id = $2 + 1"
        " WHERE seq_id = $1 AND first_id <= $2 AND last_id > $2";
    const char *const steps[] = {move_start ? raise_start : raise_mark, raise_windows, drop_free,
                                 trim_free};
    bool changed = false;
    for (const char *sql : steps) {
        hilo_spi_exec2(sql, INT4OID, Int32GetDatum(seq.seq_id), INT8OID, Int64GetDatum(above),
                       false, 0);
        changed |= SPI_processed > 0;
    }
    return changed;
}

void hilo_raise_apply_locked(const HiloSequence &seq, int64 above, HiloCatalogAccess *access)
{
    (void)hilo_raise_rows(seq, above, true);
    Oid catalog = hilo_catalog_relid_if_present();
    hilo_catalog_end(access);
    /* Pool and buffers hold IDs reserved before: a gap from commit on
     * (before it can be seen to commit: alloc/commit.cpp). */
    hilo_invalidate_at_commit(seq.seq_id);
    /* Every session looks its cached sequences up again. */
    CacheInvalidateRelcacheByRelid(catalog);
    hilo_allocator_wake_at_commit(false);
}
