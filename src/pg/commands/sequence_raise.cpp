/*
 * commands/sequence_raise.cpp: raising a hilo sequence past IDs that were
 * stored without it (explicit IDs, a bulk load, a column moved to hilo),
 * for hilo_raise and hilo_adopt (sql/raise.cpp), and for any other code
 * that must keep a sequence above IDs it learned of.
 *
 * After the raise commits, no ID at or below the mark is handed out by
 * anyone: the catalog's start_value moves above it (a push of an ID below
 * it is refused from then on), windows give up what they still hold below
 * it, free ranges below it are dropped, and the sequence's pool and every
 * backend buffer of it become stale at commit (their IDs a gap), as a drop
 * or hilo_alter makes them. Like every catalog change, a rollback undoes it
 * all; the stale pool only ever makes a gap, so an invalidation of a
 * transaction that then aborts costs IDs, never uniqueness. On a node of a
 * cluster every node applies it before, for good (cluster/raise.cpp).
 */
#include "commands.h"
#include "../cluster/cluster.h"

extern "C" {
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/inval.h"
}

/* Refuses a mark the sequence cannot be raised to: 22023. */
static void check_raise(const char *name, const HiloSequence &seq, int64 above)
{
    if (above >= seq.max_value)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("cannot raise hilo sequence \"%s\" above " INT64_FORMAT
                               ": its max_value is " INT64_FORMAT,
                               name, above, seq.max_value),
                        errhint("Raise max_value first with hilo_alter().")));
    if (above < seq.start_value - 1)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("cannot lower hilo sequence \"%s\" to " INT64_FORMAT, name, above),
                        errdetail("It hands out no ID below " INT64_FORMAT
                                  " already; going back could hand out an ID twice.",
                                  seq.start_value),
                        errhint("hilo_raise() only moves a sequence upwards.")));
}

void hilo_raise_locked(const char *name, const HiloSequence &seq, int64 above,
                       HiloCatalogAccess *access)
{
    check_raise(name, seq, above);
    if (above == seq.start_value - 1) {
        hilo_catalog_end(access);
        return; /* already there: nothing below it is handed out */
    }
    hilo_raise_apply_locked(seq, above, access);
}

void hilo_raise_apply_locked(const HiloSequence &seq, int64 above, HiloCatalogAccess *access)
{
    /* The sequence row first: the allocator locks it NOWAIT before it
     * reserves anything, so from here until commit it reserves nothing of
     * this sequence, and a reservation it committed before is below us in
     * the windows read next (and in a pool made stale at commit). */
    static const char *raise_row =
        "UPDATE hilo.sequences SET start_value = $2 + 1,"
        "       high_water_mark = greatest(high_water_mark, $2)"
        " WHERE seq_id = $1";
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
    const char *const steps[] = {raise_row, raise_windows, drop_free, trim_free};
    for (const char *sql : steps)
        hilo_spi_exec2(sql, INT4OID, Int32GetDatum(seq.seq_id), INT8OID, Int64GetDatum(above),
                       false, 0);
    Oid catalog = hilo_catalog_relid_if_present();
    hilo_catalog_end(access);
    /* Pool and buffers hold IDs reserved before: a gap from commit on
     * (before it can be seen to commit: alloc/commit.cpp). */
    hilo_invalidate_at_commit(seq.seq_id);
    /* Every session looks its cached sequences up again. */
    CacheInvalidateRelcacheByRelid(catalog);
    hilo_allocator_wake_at_commit(false);
}

void hilo_raise_sequence(const char *name, int64 above)
{
    HiloCatalogAccess access;
    HiloSequence seq;
    /* On a node of a cluster every other node applies the raise first, each
     * in a transaction of its own, and every node raises its register cell
     * (this one over a connection of its own: cluster/raise.cpp). Checked
     * before, without the sequence's lock. */
    Oid caller = GetUserId();
    hilo_catalog_begin(&access);
    bool in_cluster = hilo_window_source_active();
    if (in_cluster) {
        hilo_lookup_sequence(name, false, &seq);
        hilo_check_owner(&seq, caller, "raise");
    }
    hilo_catalog_end(&access);
    if (in_cluster) {
        /* Also when this node is there already: a raise that failed on
         * another node is run again. */
        check_raise(name, seq, above);
        hilo_cluster_raise(&seq, above);
    }
    (void)hilo_begin_owned_sequence(name, "raise", 0, &access, &seq);
    if (in_cluster) {
        /* hilo._install_windows() waits for this lock (it takes FOR KEY
         * SHARE), and then checks a window the agent claimed before the
         * register moved against the raised start_value. */
        static const char *lock_sql = "SELECT 1 FROM hilo.sequences WHERE seq_id = $1 FOR UPDATE";
        hilo_spi_exec1(lock_sql, INT4OID, Int32GetDatum(seq.seq_id), false, 1);
    }
    hilo_raise_locked(name, seq, above, &access);
}
