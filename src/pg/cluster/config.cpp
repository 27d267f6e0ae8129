/*
 * cluster/config.cpp: the cluster configuration on one node.
 *
 * hilo.cluster holds the configuration this node installed (its epoch, the
 * members with their conninfo and incarnation) and its vote in agreeing on
 * the next one. The SQL functions here are what other nodes call over libpq
 * while they change the configuration (cluster/membership.cpp) or carry it (the
 * agent); each commits durably before it answers.
 */
#include "cluster.h"

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

char *hilo_agent_database = NULL;
int hilo_agent_interval_ms = 10000;
int hilo_claim_timeout_ms = 10000;

void hilo_cluster_define_gucs(void)
{
    DefineCustomStringVariable("hilo.agent_database",
                               "Database in which the hilo agent worker runs; empty: no worker.",
                               "The agent keeps every node of the cluster supplied with open "
                               "windows. It can also be run with hilo_agent_run().",
                               &hilo_agent_database, "", PGC_POSTMASTER, 0, NULL, NULL, NULL);
    DefineCustomIntVariable("hilo.agent_interval", "How often the hilo agent worker runs.", NULL,
                            &hilo_agent_interval_ms, 10000, 100, 24 * 3600 * 1000, PGC_SIGHUP,
                            GUC_UNIT_MS, NULL, NULL, NULL);
    DefineCustomIntVariable(
        "hilo.claim_timeout", "How long a claim through the quorum register may take.",
        "Also bounds connecting to a node. A membership change waits twice "
        "this long after the previous one.",
        &hilo_claim_timeout_ms, 10000, 100, 600 * 1000, PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
}

/*
 * Claims under the previous configuration finish within hilo.claim_timeout
 * of its replacement; the margin covers clock rates and scheduling.
 */
int hilo_settle_ms(void)
{
    return 2 * hilo_claim_timeout_ms;
}

int hilo_majority(int nnodes)
{
    return nnodes / 2 + 1;
}

int hilo_config_index_of(const HiloConfig *cfg, int32 node_id)
{
    for (int i = 0; i < cfg->nnodes; i++)
        if (cfg->nodes[i].id == node_id)
            return i;
    return -1;
}

void hilo_require_own_durable_transaction(const char *function_name)
{
    if (IsTransactionBlock())
        ereport(ERROR, (errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
                        errmsg("%s cannot run inside a transaction block", function_name),
                        errdetail("Its change must be committed before it answers.")));
    /* Until the end of this transaction, whatever the session set. */
    (void)set_config_option("synchronous_commit", "on", PGC_USERSET, PGC_S_SESSION,
                            GUC_ACTION_LOCAL, true, 0, false);
}

/* ---- This node's identity ---- */

/* The nonce of hilo.local_node, creating the row if asked; 0 if there is none. */
int64 hilo_local_nonce(bool create)
{
    static const char *select_sql = "SELECT nonce FROM hilo.local_node";
    static const char *insert_sql =
        "INSERT INTO hilo.local_node (nonce) VALUES ($1) ON CONFLICT DO NOTHING";
    hilo_spi_exec(select_sql, 0, NULL, NULL, NULL, !create, 1);
    if (SPI_processed == 1)
        return hilo_spi_int64(0, 1);
    if (!create)
        return 0;
    int64 nonce = 0;
    while (nonce == 0)
        if (!pg_strong_random(&nonce, sizeof(nonce)))
            ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR),
                            errmsg("could not generate a random number")));
    Oid types[1] = {INT8OID};
    Datum values[1] = {Int64GetDatum(nonce)};
    hilo_spi_exec(insert_sql, 1, types, values, NULL, false, 0);
    hilo_spi_exec(select_sql, 0, NULL, NULL, NULL, false, 1);
    return hilo_spi_int64(0, 1);
}

/*
 * Mixes what a restore changes into one number: the system identifier
 * (initdb), the timeline (archive recovery, promotion), the database OID
 * (pg_dump and restore), a nonce drawn when the node first took part, and
 * the restore id drawn when the server last started from a backup or a
 * recovery (cluster/restore.cpp; left out while there is none, so that
 * incarnations from before it existed stay the same).
 */
int64 hilo_incarnation_for_nonce(int64 nonce)
{
    if (nonce == 0)
        return 0;
    uint64 parts[5] = {GetSystemIdentifier(), (uint64)GetWALInsertionTimeLine(),
                       (uint64)MyDatabaseId, (uint64)nonce, hilo_restore_id()};
    size_t len = parts[4] != 0 ? sizeof(parts) : 4 * sizeof(uint64);
    uint64 h = hash_bytes_extended((const unsigned char *)parts, len, 0x68696c6f);
    return h == 0 ? 1 : (int64)h;
}

int64 hilo_local_incarnation(void)
{
    if (RecoveryInProgress())
        return 0;
    return hilo_incarnation_for_nonce(hilo_local_nonce(false));
}

/* ---- Configurations ---- */

void hilo_parse_config(const char *json, int64 self_incarnation, HiloConfig *cfg)
{
    static const char *sql =
        "SELECT (c->>'epoch')::bigint, (c->>'cluster_id')::bigint, (c->>'next_node_id')::int,"
        "       (n->>'id')::int, n->>'name', n->>'conninfo', (n->>'incarnation')::bigint"
        "  FROM (SELECT $1::jsonb) AS s(c), jsonb_array_elements(c->'nodes') AS n"
        " ORDER BY 4";
    memset(cfg, 0, sizeof(*cfg));
    cfg->self = -1;
    if (json == NULL)
        return;
    Oid types[1] = {TEXTOID};
    Datum values[1] = {CStringGetTextDatum(json)};
    hilo_spi_exec(sql, 1, types, values, NULL, true, 0);
    if (SPI_processed == 0 || SPI_processed > HILO_MAX_NODES)
        ereport(ERROR,
                (errcode(ERRCODE_DATA_CORRUPTED),
                 errmsg("hilo cluster configuration has " UINT64_FORMAT " nodes", SPI_processed),
                 errdetail("Configuration: %s", json)));
    cfg->epoch = hilo_spi_int64(0, 1);
    cfg->cluster_id = hilo_spi_int64(0, 2);
    cfg->next_node_id = hilo_spi_int32(0, 3);
    cfg->nnodes = (int)SPI_processed;
    for (int i = 0; i < cfg->nnodes; i++) {
        HiloNode *node = &cfg->nodes[i];
        node->id = hilo_spi_int32(i, 4);
        char *name = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 5);
        strlcpy(node->name, name ? name : "?", sizeof(node->name));
        node->conninfo = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 6);
        if (node->conninfo == NULL)
            node->conninfo = pstrdup("");
        node->incarnation = hilo_spi_int64(i, 7);
        if (self_incarnation != 0 && node->incarnation == self_incarnation)
            cfg->self = i;
    }
    /* conninfo and json are in the current memory context: between
     * hilo_catalog_begin and _end that is SPI's, which SPI_finish frees. */
    cfg->json = pstrdup(json);
}

void hilo_load_config(HiloConfig *cfg)
{
    static const char *sql = "SELECT epoch, config::text FROM hilo.cluster";
    hilo_spi_exec(sql, 0, NULL, NULL, NULL, true, 1);
    if (SPI_processed == 0 || hilo_spi_isnull(0, 2)) {
        memset(cfg, 0, sizeof(*cfg));
        cfg->self = -1;
        return;
    }
    char *json = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
    hilo_parse_config(json, hilo_local_incarnation(), cfg);
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
    ReturnSetInfo *rsinfo = (ReturnSetInfo *)fcinfo->resultinfo;
    tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
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

static void put_row(FunctionCallInfo fcinfo, Datum *values, bool *nulls)
{
    ReturnSetInfo *rsinfo = (ReturnSetInfo *)fcinfo->resultinfo;
    tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
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
    /* A restored copy's promises may have gone back: it must not vote. */
    hilo_require_listed_member("hilo._config_prepare()");
    ClusterRow row;
    lock_cluster_row(&row);
    HiloConfigVote vote;
    if (hilo_config_on_prepare(&row.state, slot, ballot, &vote)) {
        static const char *sql =
            "UPDATE hilo.cluster SET promised_counter = $1, promised_proposer = $2";
        Oid types[2] = {INT8OID, INT8OID};
        Datum values[2] = {Int64GetDatum((int64)row.state.promised.counter),
                           Int64GetDatum((int64)row.state.promised.proposer)};
        hilo_spi_exec(sql, 2, types, values, NULL, false, 0);
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
    put_row(fcinfo, values, nulls);
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
    hilo_require_listed_member("hilo._config_accept()");
    ClusterRow row;
    lock_cluster_row(&row);
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
    put_row(fcinfo, values, nulls);
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
        Oid types[2] = {INT8OID, TEXTOID};
        Datum values[2] = {Int64GetDatum(epoch), CStringGetTextDatum(config)};
        hilo_spi_exec(sql, 2, types, values, NULL, false, 0);
        row.state.epoch = epoch;
    }
    hilo_catalog_end(&access);
    hilo_agent_wake();
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
    /* Stamp row first, then the cluster row: the order every acceptor call takes. */
    (void)hilo_register_apply_raises(keys, floors, (int)n);
    ClusterRow row;
    lock_cluster_row(&row);
    if (row.state.epoch != 0)
        ereport(
            ERROR,
            (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
             errmsg("this node is already in a hilo cluster (configuration epoch " INT64_FORMAT ")",
                    row.state.epoch)));

    int64 cluster_id = 0;
    while (cluster_id == 0)
        if (!pg_strong_random(&cluster_id, sizeof(cluster_id)))
            ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR),
                            errmsg("could not generate a random number")));
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
