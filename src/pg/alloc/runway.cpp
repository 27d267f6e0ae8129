/*
 * alloc/runway.cpp: the allocator's runway check. A sequence whose IDs
 * left fall below hilo.runway_warning_fraction of its range, or last less
 * than hilo.runway_warning_time at its current rate, gets a WARNING in the
 * server log: once when it crosses (and once per server start), naming
 * what is left and the forecast as hilo.status shows them; a LOG line when
 * it is back above (with a quarter to spare). Only sequences this node
 * handed IDs out of since the server started are looked at
 * (alloc/issued.cpp, which keeps whether each was warned about).
 */
#include "worker.h"

extern "C" {
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
}

/* Whether what is left is below either threshold, times `margin`. */
static bool below_threshold(double left, double range, double rate, double margin)
{
    if (hilo_runway_warning_fraction > 0 && range > 0 &&
        left < margin * hilo_runway_warning_fraction * range)
        return true;
    return hilo_runway_warning_time_s > 0 && rate > 0 &&
           left / rate < margin * (double)hilo_runway_warning_time_s;
}

/* A sequence warned about is back above only with a quarter to spare: a
 * rate that wavers around the threshold does not log every pass. */
#define RUNWAY_CLEAR_MARGIN 1.25

void hilo_runway_check(void)
{
    if (hilo_runway_warning_fraction <= 0 && hilo_runway_warning_time_s <= 0)
        return;
    if (!hilo_worker_read_creation())
        return;
    uint64 creation = hilo_worker.current_creation;
    HiloIssued *rows = (HiloIssued *)palloc(sizeof(HiloIssued) * hilo_max_sequences);
    hilo_pool_report_issued(MyDatabaseId);
    int n = hilo_issued_read(MyDatabaseId, creation, rows, hilo_max_sequences);
    if (n == 0)
        return;
    Datum *ids = (Datum *)palloc(sizeof(Datum) * n);
    for (int i = 0; i < n; i++)
        ids[i] = Int32GetDatum(rows[i].seq_id);
    ArrayType *array = construct_array(ids, n, INT4OID, sizeof(int32), true, TYPALIGN_INT);

    static const char *sql =
        "SELECT s.seq_id, st.sequence, st.ids_left::float8, st.ids_left::text,"
        "       st.ids_per_second::float8, coalesce('lasting ' || pg_catalog.justify_interval("
        "       pg_catalog.date_trunc('second', st.lasts))::text || ' at ' || st.ids_per_second"
        "       || ' IDs per second', 'no IDs handed out lately'),"
        "       s.max_value::numeric - s.start_value + 1"
        "  FROM hilo.status st JOIN hilo.sequences s ON s.name = st.sequence"
        " WHERE s.seq_id = ANY ($1)";
    Oid types[1] = {INT4ARRAYOID};
    Datum values[1] = {PointerGetDatum(array)};
    hilo_spi_exec(sql, 1, types, values, NULL, true, 0);
    for (uint64 r = 0; r < SPI_processed; r++) {
        bool isnull;
        int32 seq_id = hilo_spi_int32(r, 1);
        double left = DatumGetFloat8(hilo_spi_value(r, 3, &isnull));
        double rate = DatumGetFloat8(hilo_spi_value(r, 5, &isnull));
        double range =
            DatumGetFloat8(DirectFunctionCall1(numeric_float8, hilo_spi_value(r, 7, &isnull)));
        bool warned = false;
        for (int i = 0; i < n; i++)
            if (rows[i].seq_id == seq_id)
                warned = rows[i].runway_warned;
        bool below = below_threshold(left, range, rate, warned ? RUNWAY_CLEAR_MARGIN : 1.0);
        if (!hilo_issued_set_warned(MyDatabaseId, creation, seq_id, below))
            continue;
        char *name = SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 2);
        char *left_text = SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 4);
        char *lasts = SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 6);
        if (below)
            ereport(WARNING,
                    (errmsg("hilo sequence \"%s\" is running out: %s IDs left (%.2f%% of its "
                            "range), %s",
                            name, left_text, range > 0 ? 100.0 * left / range : 0.0, lasts),
                     errdetail("Below hilo.runway_warning_fraction (%g) of its range or "
                               "hilo.runway_warning_time (%d s) at the current rate.",
                               hilo_runway_warning_fraction, hilo_runway_warning_time_s),
                     errhint("Raise its max_value with hilo_alter, or push unused IDs back "
                             "with hilo_push.")));
        else
            ereport(LOG, (errmsg("hilo sequence \"%s\" has IDs enough again: %s IDs left, "
                                 "%s",
                                 name, left_text, lasts)));
    }
}
