/*
 * cluster/membership/config_votes.cpp: what other nodes call over libpq while they
 * change the configuration (cluster/membership/membership.cpp) or carry it (the
 * agent): this node's identity, its Paxos votes on the next configuration,
 * installing a chosen one, and the bootstrap of a one-node cluster. Each
 * commits durably before it answers.
 *
 * The votes are not keys of the quorum register (hilo.register) or of the
 * lease cells: both count their majorities over the configuration these
 * votes choose, so the configuration cannot be one of their values. It is
 * chosen by Paxos among the members of the configuration before it (one
 * node more or less), kept in hilo.cluster, and carried by the agent, not
 * by the pre-sync (which runs because a new one was chosen).
 */
#include "membership.h"

#include "../register/register.h"

extern "C" {
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/tuplestore.h"
}

/* ---- hilo._node_identity() ---- */

HILO_SQL_FUNCTION(hilo_node_identity)
{
    hilo_entry(fcinfo, "hilo._node_identity()", NULL, 0, HILO_WRITES);
    InitMaterializedSRF(fcinfo, 0);

    /* Allocated before SPI_connect: it is read after SPI_finish (ASan found it
     * read from SPI's freed memory). */
    HiloConfig *cfg = (HiloConfig *)palloc(sizeof(HiloConfig));
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    int64 incarnation = hilo_incarnation_for_nonce(hilo_local_nonce(true));
    hilo_load_config(cfg);
    static const char *windows_sql =
        "SELECT (SELECT count(*) FROM hilo.windows), (SELECT write_count FROM hilo.local_node)";
    /* Not read-only: it must see the stamp row this call may just have created. */
    hilo_spi_exec(windows_sql, 0, NULL, NULL, NULL, false, 1);
    int64 windows = hilo_spi_int64(0, 1);
    int64 write_count = hilo_spi_int64(0, 2);
    hilo_catalog_end(&access);

    Datum values[6] = {Int64GetDatum(incarnation),
                       Int64GetDatum(cfg->epoch),
                       Int64GetDatum(cfg->cluster_id),
                       Int32GetDatum(cfg->self >= 0 ? cfg->nodes[cfg->self].id : 0),
                       Int64GetDatum(windows),
                       Int64GetDatum(write_count)};
    bool nulls[6] = {false, false, false, false, false, false};
    hilo_put_row(fcinfo, values, nulls);
    return (Datum)0;
}

/* ---- Agreement on the next configuration: the acceptor side ---- */

typedef struct ClusterRow {
    HiloConfigAcceptorState state;
    char *config;          /* installed, or NULL */
    char *accepted_config; /* or NULL */
} ClusterRow;

/* A copy of an SPI result string in the caller's memory context, where it
 * outlives SPI_finish (hilo_catalog_end); NULL stays NULL. */
static char *copy_out_of_spi(const char *s)
{
    if (s == NULL)
        return NULL;
    size_t len = strlen(s) + 1;
    char *copy = (char *)SPI_palloc(len);
    memcpy(copy, s, len);
    return copy;
}

/* Locks this node's cluster row (creating it) and reads it. */
static void lock_cluster_row(ClusterRow *row)
{
    static const char *insert_sql =
        "INSERT INTO hilo.cluster DEFAULT VALUES ON CONFLICT DO NOTHING";
    static const char *select_sql =
        "SELECT epoch, config::text, promised_counter, promised_proposer, accepted_counter,"
        "       accepted_proposer, accepted_config::text"
        "  FROM hilo.cluster FOR UPDATE";
    hilo_spi_exec(insert_sql, 0, NULL, NULL, NULL, false, 0);
    hilo_spi_exec(select_sql, 0, NULL, NULL, NULL, false, 1);
    row->state.epoch = hilo_spi_int64(0, 1);
    /* hilo._config_prepare returns both strings after hilo_catalog_end. */
    row->config = copy_out_of_spi(SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2));
    row->state.promised = {(uint64)hilo_spi_int64(0, 3), (uint64)hilo_spi_int64(0, 4)};
    row->state.accepted = {(uint64)hilo_spi_int64(0, 5), (uint64)hilo_spi_int64(0, 6)};
    row->accepted_config =
        copy_out_of_spi(SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 7));
}

static HiloBallot ballot_arg(FunctionCallInfo fcinfo, int counter_arg)
{
    return HiloBallot{(uint64)PG_GETARG_INT64(counter_arg),
                      (uint64)PG_GETARG_INT64(counter_arg + 1)};
}

/* Locks the cluster row for a vote of `fn`. A restored copy's promises may
 * have gone back: it must not vote (hilo_require_listed_member). */
static void lock_row_to_vote(const char *fn, ClusterRow *row)
{
    hilo_require_listed_member(fn);
    lock_cluster_row(row);
}

static Datum text_or_null(const char *s, bool *isnull)
{
    *isnull = s == NULL;
    return s == NULL ? (Datum)0 : CStringGetTextDatum(s);
}

static void require_config_args(FunctionCallInfo fcinfo, const char *name, int nargs)
{
    static const char *const arg_names[] = {"slot", "counter", "proposer", "config"};
    hilo_entry(fcinfo, name, arg_names, nargs, HILO_WRITES);
    hilo_require_own_durable_transaction(name);
}

HILO_SQL_FUNCTION(hilo_config_prepare)
{
    require_config_args(fcinfo, "hilo._config_prepare()", 3);
    int64 slot = PG_GETARG_INT64(0);
    HiloBallot ballot = ballot_arg(fcinfo, 1);
    InitMaterializedSRF(fcinfo, 0);

    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    ClusterRow row;
    lock_row_to_vote("hilo._config_prepare()", &row);
    HiloConfigVote vote;
    if (hilo_config_on_prepare(&row.state, slot, ballot, &vote)) {
        static const char *sql =
            "UPDATE hilo.cluster SET promised_counter = $1, promised_proposer = $2";
        hilo_spi_exec2(sql, INT8OID, Int64GetDatum((int64)row.state.promised.counter), INT8OID,
                       Int64GetDatum((int64)row.state.promised.proposer), false, 0);
    }
    hilo_catalog_end(&access);

    Datum values[7];
    bool nulls[7] = {false, false, false, false, false, false, false};
    values[0] = Int32GetDatum((int32)vote);
    values[1] = Int64GetDatum(row.state.epoch);
    values[2] = text_or_null(row.config, &nulls[2]);
    values[3] = Int64GetDatum((int64)row.state.promised.counter);
    values[4] = Int64GetDatum((int64)row.state.accepted.counter);
    values[5] = Int64GetDatum((int64)row.state.accepted.proposer);
    values[6] = text_or_null(row.accepted_config, &nulls[6]);
    hilo_put_row(fcinfo, values, nulls);
    return (Datum)0;
}

/* The epoch a configuration (jsonb text) names; raises 22023 if it is not one. */
static int64 config_epoch(const char *json)
{
    HiloConfig *cfg = (HiloConfig *)palloc(sizeof(HiloConfig));
    hilo_parse_config(json, 0, cfg);
    int64 epoch = cfg->epoch;
    pfree(cfg);
    if (epoch <= 0)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("invalid hilo cluster configuration: epoch " INT64_FORMAT, epoch)));
    return epoch;
}

HILO_SQL_FUNCTION(hilo_config_accept)
{
    require_config_args(fcinfo, "hilo._config_accept()", 4);
    int64 slot = PG_GETARG_INT64(0);
    HiloBallot ballot = ballot_arg(fcinfo, 1);
    char *proposal = text_to_cstring(PG_GETARG_TEXT_PP(3));
    InitMaterializedSRF(fcinfo, 0);

    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    if (config_epoch(proposal) != slot + 1)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("a proposal for the successor of epoch " INT64_FORMAT
                               " must have epoch " INT64_FORMAT,
                               slot, slot + 1)));
    ClusterRow row;
    lock_row_to_vote("hilo._config_accept()", &row);
    HiloConfigVote vote;
    if (hilo_config_on_accept(&row.state, slot, ballot, &vote)) {
        static const char *sql =
            "UPDATE hilo.cluster SET promised_counter = $1, promised_proposer = $2,"
            "       accepted_counter = $3, accepted_proposer = $4, accepted_config = $5::jsonb,"
            "       accepted_at = now()";
        Oid types[5] = {INT8OID, INT8OID, INT8OID, INT8OID, TEXTOID};
        Datum values[5] = {Int64GetDatum((int64)row.state.promised.counter),
                           Int64GetDatum((int64)row.state.promised.proposer),
                           Int64GetDatum((int64)row.state.accepted.counter),
                           Int64GetDatum((int64)row.state.accepted.proposer),
                           CStringGetTextDatum(proposal)};
        hilo_spi_exec(sql, 5, types, values, NULL, false, 0);
    }
    hilo_catalog_end(&access);

    Datum values[3] = {Int32GetDatum((int32)vote), Int64GetDatum(row.state.epoch),
                       Int64GetDatum((int64)row.state.promised.counter)};
    bool nulls[3] = {false, false, false};
    hilo_put_row(fcinfo, values, nulls);
    return (Datum)0;
}

/*
 * Installs a chosen configuration if it is newer than this node's. Only a
 * configuration chosen by a majority of its predecessor is ever sent here,
 * and there is one per epoch, so a node may skip epochs it missed.
 */
HILO_SQL_FUNCTION(hilo_config_commit)
{
    require_config_args(fcinfo, "hilo._config_commit()", 0);
    static const char *const arg_names[] = {"config"};
    hilo_require_args(fcinfo, "hilo._config_commit()", arg_names, 1);
    char *config = text_to_cstring(PG_GETARG_TEXT_PP(0));

    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    int64 epoch = config_epoch(config);
    ClusterRow row;
    lock_cluster_row(&row);
    if (epoch > row.state.epoch) {
        static const char *sql =
            "UPDATE hilo.cluster SET epoch = $1, config = $2::jsonb, installed_at = now(),"
            "       promised_counter = 0, promised_proposer = 0, accepted_counter = 0,"
            "       accepted_proposer = 0, accepted_config = NULL, accepted_at = NULL";
        hilo_spi_exec2(sql, INT8OID, Int64GetDatum(epoch), TEXTOID, CStringGetTextDatum(config),
                       false, 0);
        row.state.epoch = epoch;
    }
    hilo_catalog_end(&access);
    hilo_wake_agent();
    PG_RETURN_INT64(row.state.epoch);
}

/*
 * Makes this node a cluster of one (epoch 1). Its register starts above
 * every window it claimed on its own, so the cluster's windows never meet
 * the IDs it handed out before. EXCLUSIVE on hilo.sequences waits for the
 * allocator's transactions in flight; later ones see the configuration
 * before they claim and go through the register.
 */
HILO_SQL_FUNCTION(hilo_bootstrap)
{
    static const char *const arg_names[] = {"name", "conninfo"};
    hilo_entry(fcinfo, "hilo._bootstrap()", arg_names, 2, HILO_WRITES);
    hilo_require_own_durable_transaction("hilo._bootstrap()");
    char *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
    char *conninfo = text_to_cstring(PG_GETARG_TEXT_PP(1));

    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    static const char *lock_sql = "LOCK TABLE hilo.sequences IN EXCLUSIVE MODE";
    hilo_spi_exec(lock_sql, 0, NULL, NULL, NULL, false, 0);
    int64 incarnation = hilo_incarnation_for_nonce(hilo_local_nonce(true));
    /* The register of every sequence starts above all it handed out. */
    static const char *floors_sql =
        "SELECT s.name, greatest(s.high_water_mark,"
        "         coalesce((SELECT max(w.window_end_value) - 1 FROM hilo.windows w"
        "                    WHERE w.seq_id = s.seq_id), 0))"
        "  FROM hilo.sequences s";
    hilo_spi_exec(floors_sql, 0, NULL, NULL, NULL, false, 0);
    uint64 n = SPI_processed;
    const char **keys = (const char **)palloc(sizeof(char *) * Max(n, 1));
    int64 *floors = (int64 *)palloc(sizeof(int64) * Max(n, 1));
    for (uint64 i = 0; i < n; i++) {
        keys[i] = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
        floors[i] = hilo_spi_int64(i, 2);
    }
    /* Stamp row first, then the cluster row: the order the register's
     * acceptor takes. The lease acceptor takes the cluster row (FOR SHARE)
     * first and the stamp row last, after its cells: on a node already a
     * member (refused below anyway) the two can deadlock, and one fails. */
    (void)hilo_register_apply_raises(keys, floors, (int)n);
    ClusterRow row;
    lock_cluster_row(&row);
    if (row.state.epoch != 0)
        ereport(
            ERROR,
            (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
             errmsg("this node is already in a hilo cluster (configuration epoch " INT64_FORMAT ")",
                    row.state.epoch)));

    int64 cluster_id = (int64)hilo_random_nonzero();
    static const char *config_sql =
        "UPDATE hilo.cluster SET epoch = 1, installed_at = now(),"
        "       config = jsonb_build_object('epoch', 1, 'cluster_id', $1::bigint,"
        "         'next_node_id', 2, 'nodes', jsonb_build_array(jsonb_build_object("
        "           'id', 1, 'name', $2::text, 'conninfo', $3::text, 'incarnation', $4::bigint)))";
    Oid config_types[4] = {INT8OID, TEXTOID, TEXTOID, INT8OID};
    Datum config_values[4] = {Int64GetDatum(cluster_id), CStringGetTextDatum(name),
                              CStringGetTextDatum(conninfo), Int64GetDatum(incarnation)};
    hilo_spi_exec(config_sql, 4, config_types, config_values, NULL, false, 0);
    hilo_catalog_end(&access);
    PG_RETURN_INT64(1);
}
