/*
 * alloc/lookup_all.cpp: every sequence of the catalog in one query, for a
 * session that uses many (hilo_nextval's cache, sql/nextval.cpp).
 *
 * A session that meets its 10,000 sequences one by one would look each up
 * in the catalog (one SPI statement, some 40 µs each); this reads them all
 * at once (a few ms), and the session then looks up only names it does not
 * find here. What a row says is what hilo_lookup_sequence would say of it
 * in the same snapshot, except for rows this transaction wrote (created or
 * changed here), which are left out: those go through the full lookup and
 * its checks.
 */
#include "../hilo.h"

extern "C" {
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
}

int hilo_lookup_all_sequences(int limit, HiloSequence **out)
{
    *out = NULL;
    /* 0.5.0 catalogs only (the creation comes with the rows); earlier
     * ones are looked up one by one, as before. */
    if (!hilo_catalog_has_table("incarnation"))
        return -1;
    /* The columns as hilo_lookup_sequence reads them (alloc/lookup.cpp):
     * to_jsonb(s.*) only while they may be missing, for it costs most of
     * the query (some 15 µs a row). */
    static const char *sql =
        "SELECT name, seq_id, start_value, max_value, window_size, min_open_windows, block_size,"
        "       owner::oid::bigint, high_water_mark, xmin, monotonic,"
        "       (SELECT value FROM hilo.incarnation), (SELECT count(*) FROM hilo.incarnation),"
        "       ordering, node_bits"
        "  FROM hilo.sequences s LIMIT $1";
    static const char *sql_partial =
        "SELECT name, seq_id, start_value, max_value, window_size, min_open_windows, block_size,"
        "       owner::oid::bigint, high_water_mark, xmin, monotonic,"
        "       (SELECT value FROM hilo.incarnation), (SELECT count(*) FROM hilo.incarnation),"
        "       (pg_catalog.to_jsonb(s.*) OPERATOR(pg_catalog.->>) 'ordering'),"
        "       (pg_catalog.to_jsonb(s.*) OPERATOR(pg_catalog.->>) 'node_bits')"
        "  FROM hilo.sequences s LIMIT $1";
    hilo_spi_exec1(hilo_catalog_has_ordering_columns() ? sql : sql_partial, INT8OID,
                   Int64GetDatum((int64)limit + 1), true, 0);
    if (SPI_processed > (uint64)limit)
        return -1;
    if (SPI_processed == 0)
        return 0;
    if (hilo_spi_int64(0, 13) != 1)
        return -1; /* the catalog is being re-created: the full lookup says so */
    uint64 creation = (uint64)hilo_spi_int64(0, 12);

    /* In the caller's context (SPI's own goes at hilo_catalog_end). */
    HiloSequence *seqs = (HiloSequence *)SPI_palloc(sizeof(HiloSequence) * SPI_processed);
    int n = 0;
    for (uint64 row = 0; row < SPI_processed; row++) {
        bool isnull;
        TransactionId xmin = DatumGetTransactionId(
            SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, 10, &isnull));
        if (TransactionIdIsCurrentTransactionId(xmin))
            continue;
        char *name = TextDatumGetCString(
            SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, 1, &isnull));
        if (strlen(name) > HILO_MAX_NAME_BYTES)
            continue;
        HiloSequence *seq = &seqs[n++];
        memset(seq, 0, sizeof(*seq));
        strlcpy(seq->name, name, sizeof(seq->name));
        seq->seq_id = hilo_spi_int32(row, 2);
        seq->start_value = hilo_spi_int64(row, 3);
        seq->max_value = hilo_spi_int64(row, 4);
        seq->window_size = hilo_spi_int64(row, 5);
        seq->min_open_windows = hilo_spi_int32(row, 6);
        seq->block_size = hilo_spi_int32(row, 7);
        seq->owner = (Oid)hilo_spi_int64(row, 8);
        seq->high_water_mark = hilo_spi_int64(row, 9);
        bool monotonic = DatumGetBool(
            SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, 11, &isnull));
        seq->creation = creation;
        seq->ordering = hilo_parse_ordering(
            SPI_getvalue(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, 14), monotonic);
        seq->node_bits =
            hilo_parse_node_bits(SPI_getvalue(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, 15));
    }
    *out = seqs;
    return n;
}
