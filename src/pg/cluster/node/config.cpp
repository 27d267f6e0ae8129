/*
 * cluster/node/config.cpp: the cluster configuration on one node.
 *
 * hilo.cluster holds the configuration this node installed (its epoch, the
 * members with their conninfo and incarnation) and its vote in agreeing on
 * the next one. Here: the cluster's GUCs, this node's nonce and
 * incarnation, and reading a configuration; the SQL functions other nodes
 * call to agree on the next one are in cluster/membership/config_votes.cpp.
 */
#include "node.h"

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
int hilo_lease_time_ms = 2000;
int hilo_lease_forget_after_ms = 300 * 1000;
int hilo_clock_drift_ppm = 10000;
int hilo_forward_connections = 8;
int hilo_cluster_sequences_per_role = 10000;

void hilo_define_cluster_gucs(void)
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
    DefineCustomIntVariable(
        "hilo.lease_time", "How long a lease of an ordering 'cluster' sequence lasts.",
        "The holder serves for this long after it sent its last successful renewal; a new "
        "holder serves only this long, plus the clock drift margin, after it took the lease. "
        "Must be the same on every node.",
        &hilo_lease_time_ms, 2000, 100, 600 * 1000, PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
    DefineCustomIntVariable(
        "hilo.clock_drift_bound",
        "How far (parts per million) any node's clock rate may be from real time.",
        "Ordering 'cluster' is safe while every node's monotonic clock runs within this bound; "
        "a new lease holder waits longer for a larger bound. Must be the same on every node.",
        &hilo_clock_drift_ppm, 10000, 0, 500000, PGC_SIGHUP, 0, NULL, NULL, NULL);
    DefineCustomIntVariable(
        "hilo.forward_connections",
        "How many backends of this server may each keep a connection to the lease holder.",
        "A call of an ordering 'cluster' sequence on a node that does not hold its lease goes "
        "to the holder over the calling backend's own connection, kept across calls, while "
        "fewer than this many backends keep one; the others go through this node's lease "
        "worker (slower). Each such connection is a backend on the holder. 0: always the "
        "worker.",
        &hilo_forward_connections, 8, 0, 10000, PGC_SIGHUP, 0, NULL, NULL, NULL);
    DefineCustomIntVariable(
        "hilo.cluster_sequences_per_role",
        "How many ordering 'cluster' sequences owned by one role a node keeps leases for at once.",
        "A node keeps a lease (a little memory in its lease worker) for each 'cluster' sequence "
        "called on it within the last 300 s; past this many of one role's sequences, a call of "
        "another sequence of that role fails (53400), and the other roles' sequences are not "
        "affected.",
        &hilo_cluster_sequences_per_role, 10000, 1, INT_MAX, PGC_SIGHUP, 0, NULL, NULL, NULL);
    DefineCustomIntVariable(
        "hilo.lease_forget_after",
        "For tests: how long a node keeps the lease of a 'cluster' sequence nobody calls.",
        "After that its lease worker frees the lease and keeps only its chain (a few words), "
        "which the next call resumes; the tests shorten it to show that.",
        &hilo_lease_forget_after_ms, 300 * 1000, 1000, INT_MAX, PGC_SIGHUP,
        GUC_UNIT_MS | GUC_NOT_IN_SAMPLE, NULL, NULL, NULL);
}

/*
 * Claims under the previous configuration finish within hilo.claim_timeout
 * of its replacement; the margin covers clock rates and scheduling.
 */
int hilo_settle_ms(void)
{
    return 2 * hilo_claim_timeout_ms;
}

static void (*agent_wake)(void) = NULL;

void hilo_set_agent_wake(void (*wake)(void))
{
    agent_wake = wake;
}

void hilo_wake_agent(void)
{
    if (agent_wake != NULL)
        agent_wake();
}

uint64 hilo_random_nonzero(void)
{
    uint64 v = 0;
    while (v == 0)
        if (!pg_strong_random(&v, sizeof(v)))
            ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR),
                            errmsg("could not generate a random number")));
    return v;
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
    /* How long it waits for a lock: its caller's connection set that
     * (cluster/net/peers.cpp, half the caller's hilo.claim_timeout). */
}

/*
 * A lock this transaction waits for longer than `ms` fails it (55P03): for
 * work whose answer is read sooner than a peer connection's own lock
 * timeout (cluster/net/peers.cpp) allows, such as the lease acceptor's and the
 * lease worker's configuration read.
 */
void hilo_answer_lock_timeout(int ms)
{
    char value[16];
    snprintf(value, sizeof(value), "%d", Max(ms, 1));
    (void)set_config_option("lock_timeout", value, PGC_USERSET, PGC_S_SESSION, GUC_ACTION_LOCAL,
                            true, 0, false);
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
    int64 nonce = (int64)hilo_random_nonzero();
    hilo_spi_exec1(insert_sql, INT8OID, Int64GetDatum(nonce), false, 0);
    hilo_spi_exec(select_sql, 0, NULL, NULL, NULL, false, 1);
    return hilo_spi_int64(0, 1);
}

/*
 * Mixes what a restore changes into one number: the system identifier
 * (initdb), the timeline (archive recovery, promotion), the database OID
 * (pg_dump and restore), a nonce drawn when the node first took part, and
 * the restore id drawn when the server last started from a backup or a
 * recovery (cluster/node/restore.cpp; left out while there is none, so that
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
    hilo_spi_exec1(sql, TEXTOID, CStringGetTextDatum(json), true, 0);
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

/*
 * Refuses (55000) to act as an acceptor (register requests, register dumps,
 * configuration votes) on a node whose installed configuration does not list
 * it: a removed node, or a restored copy whose state may have gone back.
 * Needs SPI.
 */
void hilo_require_listed_member(const char *function_name)
{
    static const char *sql = "SELECT epoch, config::text FROM hilo.cluster";
    hilo_spi_exec(sql, 0, NULL, NULL, NULL, false, 1);
    if (SPI_processed == 0 || hilo_spi_isnull(0, 2))
        return; /* in no cluster: nothing to protect */
    char *json = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
    HiloConfig *cfg = (HiloConfig *)palloc(sizeof(HiloConfig));
    hilo_parse_config(json, hilo_local_incarnation(), cfg);
    if (cfg->epoch > 0 && cfg->self < 0)
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("this node is not a member of hilo configuration epoch " INT64_FORMAT
                               "; %s refuses",
                               cfg->epoch, function_name),
                        errdetail("%s", hilo_not_member_detail()),
                        errhint("On a member: SELECT hilo_remove_node('<this node>'); then SELECT "
                                "hilo_add_node('<name>', '<conninfo of this node>').")));
    pfree(cfg);
}

HiloConfig *hilo_config_from_json(const char *json)
{
    HiloConfig *cfg = (HiloConfig *)palloc(sizeof(HiloConfig));
    hilo_parse_config(json, hilo_local_incarnation(), cfg);
    return cfg;
}
