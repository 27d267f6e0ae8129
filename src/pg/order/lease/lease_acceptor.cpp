/*
 * order/lease/lease_acceptor.cpp: the lease register's acceptor on this node
 * (ordering 'cluster'; the rule is core/lease.hpp's HandleLeaseRequest).
 *
 * The lease worker of any node calls hilo._lease_handle() over libpq with a
 * batch of READ and GRANT messages. Each locks its sequence's row of
 * hilo.lease_cells, goes through the core's rule, and writes the row if
 * the rule changed it; the statement commits with synchronous_commit = on
 * before the caller sees a reply (A2 of lease.hpp), with the node's write
 * count raised by the cells it wrote: every reply carries that count, and
 * a proposer that saw a higher one from the node before drops the batch (a
 * copy restored without a trace may have lost grants; the register's
 * writes count the same way). It refuses to run in a
 * transaction block, on a node its configuration does not list (a restored
 * copy, whose cells may have gone back), and for a proposer of another
 * configuration epoch.
 *
 * Why the cells are not keys of hilo.register (register_acceptor.cpp), as
 * core/lease.hpp's "set if at most" might suggest. The register compares
 * and sets one value, the IDs themselves: SetIfAtMost(m, n) when v <= m,
 * and v is all there is. A cell compares a ballot and sets four other
 * things with it: the holder, a bound that only rises whatever the ballot
 * did, the round id that makes a grant sent again an answer rather than a
 * refusal (lease.hpp, P2), and the largest lease time and drift bound
 * since the last settled grant (A5). Its safety rests on clocks (A1, A4),
 * the register's on nothing but majorities (docs/quorum-register.md,
 * R1-R5); one acceptor for both would be two rules behind a switch on the
 * key, and the register's proof would have to read past the lease's. A
 * renewal every half lease time per called sequence is also another write
 * rate than a window claim. So two tables, one rule each; what they share
 * (the stamp, the name lock, a grant reporting the register's value of the
 * same name, the pre-sync's dump and raise) is written once. The
 * configuration votes stay apart for another reason
 * (cluster/membership/config_votes.cpp).
 */
#include "lease_shared.h"

extern "C" {
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/tuplestore.h"
}

/* Locks and reads one sequence's cell; a sequence never granted starts at 0. */
static HiloLeaseCell lock_cell(const char *seq)
{
    static const char *insert =
        "INSERT INTO hilo.lease_cells (seq, ballot, holder, bound) VALUES ($1, 0, 0, $2)"
        " ON CONFLICT (seq) DO NOTHING";
    static const char *select =
        "SELECT ballot, holder, bound, grant_round, lease_us, drift_ppm FROM hilo.lease_cells"
        " WHERE seq = $1 FOR UPDATE";
    Datum name = CStringGetTextDatum(seq);
    hilo_lock_name_registers(seq);
    hilo_spi_exec2(insert, TEXTOID, name, INT8OID, Int64GetDatum(HILO_MIN_ID - 1), false, 0);
    hilo_spi_exec1(select, TEXTOID, name, false, 1);
    HiloLeaseCell cell;
    cell.ballot = (uint64)hilo_spi_int64(0, 1);
    cell.holder = (uint32)hilo_spi_int32(0, 2);
    cell.bound = hilo_spi_int64(0, 3);
    cell.round = (uint64)hilo_spi_int64(0, 4);
    cell.duration = (uint64)hilo_spi_int64(0, 5);
    cell.drift_ppm = (uint32)hilo_spi_int32(0, 6);
    return cell;
}

static void save_cell(const char *seq, const HiloLeaseCell *cell)
{
    static const char *sql =
        "UPDATE hilo.lease_cells SET ballot = $2, holder = $3, bound = $4, grant_round = $5,"
        " lease_us = $6, drift_ppm = $7 WHERE seq = $1";
    Oid types[7] = {TEXTOID, INT8OID, INT4OID, INT8OID, INT8OID, INT8OID, INT4OID};
    Datum values[7] = {CStringGetTextDatum(seq),
                       Int64GetDatum((int64)cell->ballot),
                       Int32GetDatum((int32)cell->holder),
                       Int64GetDatum(cell->bound),
                       Int64GetDatum((int64)cell->round),
                       Int64GetDatum((int64)cell->duration),
                       Int32GetDatum((int32)cell->drift_ppm)};
    hilo_spi_exec(sql, 7, types, values, NULL, false, 0);
}

/*
 * This node's id, if it is a member of configuration `epoch` as installed
 * here; otherwise 55000. Majorities of two configurations that differ by
 * one node overlap (membership changes one node at a time), but those of
 * configurations further apart need not: a round counts only acceptors of
 * the proposer's own configuration.
 */
static uint32 member_of_epoch(int64 epoch, int64 cluster_id)
{
    static const char *sql = "SELECT config::text FROM hilo.cluster FOR SHARE";
    hilo_spi_exec(sql, 0, NULL, NULL, NULL, false, 1);
    HiloConfig *cfg = (HiloConfig *)palloc0(sizeof(HiloConfig));
    if (SPI_processed == 1 && !hilo_spi_isnull(0, 1)) {
        /* Read before hilo_local_incarnation(), whose query replaces SPI_tuptable. */
        char *json = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
        hilo_parse_config(json, hilo_local_incarnation(), cfg);
    }
    if (cfg->epoch != epoch)
        ereport(ERROR,
                (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                 errmsg("hilo configuration epoch mismatch: the lease request is for "
                        "epoch " INT64_FORMAT ", this node has installed epoch " INT64_FORMAT,
                        epoch, cfg->epoch)));
    /* A cluster formed again (after CREATE EXTENSION) starts at the same
     * epochs: a proposer still running the old one is refused. */
    if (cfg->cluster_id != cluster_id)
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("hilo cluster mismatch: the lease request is for another cluster "
                               "than the one this node is in"),
                        errdetail("The cluster was formed again since the proposer read its "
                                  "configuration.")));
    return hilo_member_self_id(cfg);
}

/* The items of a text[] argument as C strings, palloc'd. */
static const char **names_of(const Datum *items, int count)
{
    const char **names = (const char **)palloc(sizeof(char *) * Max(count, 1));
    for (int i = 0; i < count; i++)
        names[i] = TextDatumGetCString(items[i]);
    return names;
}

HILO_SQL_FUNCTION(hilo_lease_handle_sql)
{
    static const char *const arg_names[] = {
        "epoch",   "cluster_id", "from_node", "seqs",      "kinds",      "request_ids", "expected",
        "ballots", "holders",    "bounds",    "lease_uss", "drift_ppms", "settled"};
    const char *fn = "hilo._lease_handle()";
    hilo_entry(fcinfo, fn, arg_names, 13, HILO_WRITES);
    hilo_require_own_durable_transaction(fn);
    /* A proposer reads an answer until twice its request timeout (a quarter
     * of hilo.lease_time, order/lease/lease_worker.cpp), then reconnects. */
    hilo_answer_lock_timeout(2 * Max(hilo_lease_time_ms / 4, 100));

    int64 epoch = PG_GETARG_INT64(0);
    int64 cluster_id = PG_GETARG_INT64(1);
    uint32 from = (uint32)PG_GETARG_INT32(2);
    int count[10];
    Datum *a[10];
    for (int i = 0; i < 10; i++) {
        a[i] = hilo_array_arg(fcinfo, i + 3, arg_names[i + 3], &count[i]);
        if (count[i] != count[0])
            ereport(ERROR, (errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
                            errmsg("the request arrays must all have the same length")));
    }
    InitMaterializedSRF(fcinfo, 0);

    const char **seqs = names_of(a[0], count[0]);

    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    /* Every name of the batch in one order, before any row (as the
     * register's acceptor does): no cycle with another batch here. */
    hilo_lock_names_in_order(seqs, count[0]);
    uint32 self = member_of_epoch(epoch, cluster_id);
    HiloLeaseMessage *replies =
        (HiloLeaseMessage *)palloc0(sizeof(HiloLeaseMessage) * Max(count[0], 1));
    int64 written = 0;
    for (int i = 0; i < count[0]; i++) {
        const char *seq = seqs[i];
        HiloLeaseMessage request;
        memset(&request, 0, sizeof(request));
        request.from = from;
        request.to = self;
        request.kind = (HiloLeaseMessageKind)DatumGetInt32(a[1][i]);
        request.request_id = (uint64)DatumGetInt64(a[2][i]);
        request.expected = (uint64)DatumGetInt64(a[3][i]);
        request.ballot = (uint64)DatumGetInt64(a[4][i]);
        request.holder = (uint32)DatumGetInt32(a[5][i]);
        request.bound = DatumGetInt64(a[6][i]);
        /* Its proposer's lease time and drift bound (core/lease.hpp, A5). */
        request.duration = (uint64)Max(DatumGetInt64(a[7][i]), 0);
        request.drift_ppm = (uint32)Max(DatumGetInt32(a[8][i]), 0);
        request.settled = DatumGetBool(a[9][i]);
        if (request.kind != HILO_LEASE_READ && request.kind != HILO_LEASE_GRANT)
            ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                            errmsg("%s handles only READ (0) and GRANT (2), not %d", fn,
                                   (int)request.kind)));
        HiloLeaseCell cell = lock_cell(seq);
        if (hilo_lease_handle(self, &cell, &request, &replies[i])) {
            save_cell(seq, &cell);
            written++;
        }
        /* And the name's value in hilo.register (register_acceptor.cpp,
         * "One name, two registers"), under the lock lock_cell took. */
        replies[i].bound = Max(replies[i].bound, hilo_register_value_of(seq));
    }
    /* Read (or raised) after every cell: the count covers each write here. */
    int64 write_count =
        written > 0 ? hilo_count_acceptor_writes(written) : hilo_local_write_count();
    for (int i = 0; i < count[0]; i++) {
        const HiloLeaseMessage *reply = &replies[i];
        Datum values[7] = {Int64GetDatum((int64)reply->ballot),
                           Int32GetDatum((int32)reply->holder),
                           Int64GetDatum(reply->bound),
                           BoolGetDatum(reply->ok),
                           Int64GetDatum(write_count),
                           Int64GetDatum((int64)Min(reply->duration, (uint64)PG_INT64_MAX)),
                           Int32GetDatum((int32)Min(reply->drift_ppm, (uint32)PG_INT32_MAX))};
        bool nulls[7] = {false, false, false, false, false, false, false};
        hilo_put_row(fcinfo, values, nulls);
    }
    hilo_catalog_end(&access);
    return (Datum)0;
}

/* ---- carried across a membership change (cluster/membership/paxos.cpp's pre-sync) ---- */

HILO_SQL_FUNCTION(hilo_lease_dump)
{
    const char *fn = "hilo._lease_dump()";
    hilo_entry(fcinfo, fn, NULL, 0, HILO_READS);
    InitMaterializedSRF(fcinfo, 0);
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    /* A restored copy's cells may have gone back: they must not count. */
    hilo_require_listed_member(fn);
    static const char *sql =
        "SELECT seq, ballot, holder, bound, grant_round, lease_us, drift_ppm FROM hilo.lease_cells";
    hilo_spi_exec(sql, 0, NULL, NULL, NULL, true, 0);
    for (uint64 i = 0; i < SPI_processed; i++) {
        char *seq = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
        Datum values[7] = {CStringGetTextDatum(seq),
                           Int64GetDatum(hilo_spi_int64(i, 2)),
                           Int32GetDatum(hilo_spi_int32(i, 3)),
                           Int64GetDatum(hilo_spi_int64(i, 4)),
                           Int64GetDatum(hilo_spi_int64(i, 5)),
                           Int64GetDatum(hilo_spi_int64(i, 6)),
                           Int32GetDatum(hilo_spi_int32(i, 7))};
        bool nulls[7] = {false, false, false, false, false, false, false};
        hilo_put_row(fcinfo, values, nulls);
    }
    hilo_catalog_end(&access);
    return (Datum)0;
}

/*
 * Raises this node's cells to what a majority of the old configuration
 * had: as if it had accepted the grant of the highest ballot (its holder
 * and round with it), and the bound only rises. A reader of the new
 * configuration then sees the holder (and waits out its lease) and starts
 * above the bound, though no grant ran under the configurations between.
 */
HILO_SQL_FUNCTION(hilo_lease_raise)
{
    static const char *const arg_names[] = {"seqs",         "ballots",   "holders",   "bounds",
                                            "grant_rounds", "lease_uss", "drift_ppms"};
    const char *fn = "hilo._lease_raise()";
    hilo_entry(fcinfo, fn, arg_names, 7, HILO_WRITES);
    hilo_require_own_durable_transaction(fn);
    int count[7];
    Datum *a[7];
    for (int i = 0; i < 7; i++) {
        a[i] = hilo_array_arg(fcinfo, i, arg_names[i], &count[i]);
        /* Lease times and drift bounds: none (empty), or one per cell. */
        if (count[i] != count[0] && !(i >= 5 && count[i] == 0))
            ereport(ERROR, (errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
                            errmsg("the arrays must all have the same length")));
    }
    const char **seqs = names_of(a[0], count[0]);
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    hilo_lock_names_in_order(seqs, count[0]);
    int64 changed = 0;
    for (int i = 0; i < count[0]; i++) {
        const char *seq = seqs[i];
        uint64 ballot = (uint64)DatumGetInt64(a[1][i]);
        int64 bound = DatumGetInt64(a[3][i]);
        HiloLeaseCell cell = lock_cell(seq);
        /* The largest lease time and drift bound (core/lease.hpp, A5). */
        uint64 duration = count[5] > 0 ? (uint64)Max(DatumGetInt64(a[5][i]), 0) : 0;
        uint32 drift = count[6] > 0 ? (uint32)Max(DatumGetInt32(a[6][i]), 0) : 0;
        bool change = ballot > cell.ballot || bound > cell.bound || duration > cell.duration ||
                      drift > cell.drift_ppm;
        cell.duration = Max(cell.duration, duration);
        cell.drift_ppm = Max(cell.drift_ppm, drift);
        if (ballot > cell.ballot) {
            cell.ballot = ballot;
            cell.holder = (uint32)DatumGetInt32(a[2][i]);
            cell.round = (uint64)DatumGetInt64(a[4][i]);
        }
        cell.bound = Max(cell.bound, bound);
        if (change) {
            save_cell(seq, &cell);
            changed++;
        }
    }
    if (changed > 0)
        (void)hilo_count_acceptor_writes(changed);
    hilo_catalog_end(&access);
    PG_RETURN_INT64(changed);
}
