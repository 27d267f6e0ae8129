/*
 * sql/settings.cpp: hilo_alter, and hilo._carry_settings, by which the agent
 * carries a sequence's settings to the other nodes of a cluster. Settings
 * are cluster-wide: each hilo_alter raises hilo.sequences.settings_version,
 * and a node applies a carried copy only if it is newer than its own
 * (docs/multi-node.md, "Settings are cluster-wide").
 */
#include "../alloc/alloc.h"
#include "sql.h"

extern "C" {
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/inval.h"
}

/* Refuses settings no sequence may have (22023); `lowest_max` is the
 * highest ID already claimed for windows (or start_value). */
static void check_settings(const char *name, int64 lowest_max, int64 max_value, int64 window_size,
                           int64 min_open_windows, int64 block_size)
{
    if (max_value > HILO_MAX_ID || max_value < lowest_max)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("invalid max_value " INT64_FORMAT " for hilo sequence \"%s\"",
                               max_value, name),
                        errdetail("IDs up to " INT64_FORMAT " are already claimed for windows; "
                                  "max_value must be at least that and at most " INT64_FORMAT ".",
                                  lowest_max, HILO_MAX_ID)));
    hilo_check_positive("window_size", window_size);
    hilo_check_open_windows(min_open_windows);
    hilo_check_positive("block_size", block_size);
}

/*
 * Writes a sequence's settings and makes its buffers and pool stale at
 * commit. A hilo_alter raises settings_version (cluster-wide settings,
 * docs/multi-node.md); a carried copy (`version` > 0) sets the version and
 * time it came with, and only if they are newer than this node's: returns
 * false if they are not. Locks the row the allocator locks NOWAIT: it backs
 * off until we commit.
 */
static bool write_settings(const HiloSequence *seq, int64 max_value, int64 window_size,
                           int32 min_open_windows, int32 block_size, int64 version,
                           Datum changed_at)
{
    static const char *sql_0_4 =
        "UPDATE hilo.sequences SET max_value = $2, window_size = $3, min_open_windows = $4,"
        " block_size = $5 WHERE seq_id = $1";
    static const char *sql_alter =
        "UPDATE hilo.sequences SET max_value = $2, window_size = $3, min_open_windows = $4,"
        " block_size = $5, settings_version = settings_version + 1,"
        " settings_changed_at = pg_catalog.now() WHERE seq_id = $1";
    static const char *sql_carried =
        "UPDATE hilo.sequences SET max_value = $2, window_size = $3, min_open_windows = $4,"
        " block_size = $5, settings_version = $6, settings_changed_at = $7"
        " WHERE seq_id = $1 AND (settings_version, settings_changed_at) < ($6, $7)";
    Oid types[7] = {INT4OID, INT8OID, INT8OID, INT4OID, INT4OID, INT8OID, TIMESTAMPTZOID};
    Datum values[7] = {Int32GetDatum(seq->seq_id),
                       Int64GetDatum(max_value),
                       Int64GetDatum(window_size),
                       Int32GetDatum(min_open_windows),
                       Int32GetDatum(block_size),
                       Int64GetDatum(version),
                       changed_at};
    if (version > 0)
        hilo_spi_exec(sql_carried, 7, types, values, NULL, false, 0);
    else
        hilo_spi_exec(hilo_catalog_has_column("settings_version") ? sql_alter : sql_0_4, 5, types,
                      values, NULL, false, 0);
    if (SPI_processed == 0)
        return false;
    hilo_invalidate_at_commit(seq->seq_id);
    return true;
}

/*
 * hilo_alter: changes settings; a NULL argument leaves a setting as it is.
 * Like a drop, it makes the sequence's buffers and pool stale at commit:
 * their IDs are skipped (a gap), and the next ones follow the new settings.
 * On a node of a hilo cluster the agent carries the new settings to every
 * other node; a lower max_value is refused there (0A000), since a node the
 * change has not reached yet could still claim IDs up to the old one.
 */
HILO_SQL_FUNCTION(hilo_alter)
{
    char name[HILO_MAX_NAME_BYTES + 1];
    hilo_entry_seq(fcinfo, "hilo_alter()", HILO_WRITES, name);

    HiloCatalogAccess access;
    HiloSequence seq;
    (void)hilo_begin_owned_sequence(name, "alter", 0, &access, &seq);

    int64 max_value = PG_ARGISNULL(1) ? seq.max_value : PG_GETARG_INT64(1);
    int64 window_size = PG_ARGISNULL(2) ? seq.window_size : PG_GETARG_INT64(2);
    int32 min_open_windows = PG_ARGISNULL(3) ? seq.min_open_windows : PG_GETARG_INT32(3);
    int32 block_size = PG_ARGISNULL(4) ? seq.block_size : PG_GETARG_INT32(4);

    check_settings(name, Max(seq.high_water_mark, seq.start_value), max_value, window_size,
                   min_open_windows, block_size);
    if (max_value < seq.max_value && hilo_window_source_active())
        ereport(ERROR,
                (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                 errmsg("cannot lower max_value of hilo sequence \"%s\" on a node of a hilo "
                        "cluster",
                        name),
                 errdetail("The agent carries settings to the other nodes at its next pass; "
                           "until then a node could still claim IDs up to the old max_value "
                           "" INT64_FORMAT ".",
                           seq.max_value),
                 errhint("Raising max_value and the other settings is carried to every node.")));

    (void)write_settings(&seq, max_value, window_size, min_open_windows, block_size, 0, (Datum)0);
    Oid catalog = hilo_catalog_relid_if_present();
    hilo_catalog_end(&access);
    CacheInvalidateRelcacheByRelid(catalog);
    hilo_allocator_wake_at_commit(false);
    PG_RETURN_VOID();
}

/*
 * hilo._carry_settings(name, settings_version, settings_changed_at,
 * max_value, window_size, min_open_windows, block_size, created_at): the
 * agent carries a newer copy of a sequence's settings from another node
 * (cluster/carry/carry.cpp). Applied only if (settings_version,
 * settings_changed_at) is newer than this node's copy, so copies carried out
 * of order never go back, and only to the copy the agent read here (its
 * created_at; NULL: whichever this node has): a sequence made again under
 * the name since then is another one, and keeps its own settings. Returns
 * NULL once this node has these settings or newer ones, else why not.
 */
HILO_SQL_FUNCTION(hilo_carry_settings)
{
    static const char *const arg_names[] = {"name",      "settings_version", "settings_changed_at",
                                            "max_value", "window_size",      "min_open_windows",
                                            "block_size"};
    /* created_at, the eighth, may be NULL */
    hilo_entry(fcinfo, "hilo._carry_settings()", arg_names, 7, HILO_WRITES);
    char name[HILO_MAX_NAME_BYTES + 1];
    hilo_check_name(PG_GETARG_TEXT_PP(0), name);
    int64 version = PG_GETARG_INT64(1);
    Datum changed_at = PG_GETARG_DATUM(2);
    int64 max_value = PG_GETARG_INT64(3);
    int64 window_size = PG_GETARG_INT64(4);
    int32 min_open_windows = PG_GETARG_INT32(5);
    int32 block_size = PG_GETARG_INT32(6);
    if (version < 1)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("settings_version must be at least 1")));

    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    static const char *exists = "SELECT 1 FROM hilo.sequences WHERE name = $1";
    hilo_spi_exec1(exists, TEXTOID, CStringGetTextDatum(name), true, 1);
    if (SPI_processed == 0) {
        hilo_catalog_end(&access);
        PG_RETURN_TEXT_P(cstring_to_text("no such sequence here"));
    }
    HiloSequence seq;
    hilo_lookup_sequence(name, false, &seq);
    hilo_lock_sequence_for_push(seq.seq_id);
    /* A node never takes a max_value below IDs it holds: it may have handed
     * them out under the old one (docs/multi-node.md). In a cluster its
     * windows come from the register and may lie above high_water_mark.
     * Read after the lock, so a drop of the copy the agent read has
     * committed or waits for us. */
    static const char *held_sql =
        "SELECT greatest(s.high_water_mark, s.start_value,"
        "         (SELECT max(w.window_end_value) - 1 FROM hilo.windows w"
        "           WHERE w.seq_id = s.seq_id),"
        "         (SELECT max(f.last_id) FROM hilo.free_ranges f WHERE f.seq_id = s.seq_id)),"
        "       ($2::timestamptz IS NULL OR s.created_at = $2)::int"
        "  FROM hilo.sequences s WHERE s.seq_id = $1";
    Oid held_types[2] = {INT4OID, TIMESTAMPTZOID};
    bool any_copy = PG_NARGS() < 8 || PG_ARGISNULL(7);
    Datum held_values[2] = {Int32GetDatum(seq.seq_id), any_copy ? (Datum)0 : PG_GETARG_DATUM(7)};
    const char held_nulls[2] = {' ', any_copy ? 'n' : ' '};
    hilo_spi_exec(held_sql, 2, held_types, held_values, held_nulls, false, 1);
    if (SPI_processed == 0 || hilo_spi_int32(0, 2) == 0) {
        hilo_catalog_end(&access);
        PG_RETURN_TEXT_P(cstring_to_text("made again here since the agent read it"));
    }
    int64 held = hilo_spi_int64(0, 1);
    if (max_value < held) {
        hilo_catalog_end(&access);
        PG_RETURN_TEXT_P(cstring_to_text(psprintf(
            "max_value " INT64_FORMAT " is below IDs this node holds (up to " INT64_FORMAT ")",
            max_value, held)));
    }
    check_settings(name, Max(seq.high_water_mark, seq.start_value), max_value, window_size,
                   min_open_windows, block_size);
    bool applied = write_settings(&seq, max_value, window_size, min_open_windows, block_size,
                                  version, changed_at);
    Oid catalog = hilo_catalog_relid_if_present();
    hilo_catalog_end(&access);
    if (applied) {
        CacheInvalidateRelcacheByRelid(catalog);
        hilo_allocator_wake_at_commit(false);
    }
    PG_RETURN_NULL();
}
