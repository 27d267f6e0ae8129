/*
 * cluster/membership/membership.cpp: hilo_add_node() and hilo_remove_node().
 *
 * The quorum register stays safe across membership changes only if
 * (docs/multi-node.md, "Membership"):
 *
 *  1. configurations form one chain, each differing from the previous one by
 *     one node: the successor of epoch B is chosen by Paxos among the
 *     members of B (core/config_agreement.hpp), so two changes started at
 *     once, or one whose session died half way, cannot fork it;
 *  2. before the new configuration is installed anywhere, a majority of it
 *     (and the joining node) is raised to the register values a majority of
 *     B holds ("pre-sync"), so every claim completed so far lies below what
 *     any majority of the new configuration will answer; only members that
 *     answer as themselves, unfenced, at B's epoch or later count in that
 *     majority of B (cluster/membership/paxos.cpp, presync_counted);
 *  3. a change starts only when the previous one was installed at least
 *     twice hilo.claim_timeout ago on every node that answers: claims under
 *     the configuration before it have all finished by then (a node refuses
 *     register requests made under another epoch than its own, so no new
 *     claim under an old configuration can gather a majority). A margin:
 *     the pre-sync does not rest on it (rule 2 counts only nodes that
 *     installed B, and those had finished every request of an older epoch).
 * Paxos counts only votes of members that answer as themselves, unfenced
 * (a copy may have lost its promises).
 *
 * Every write happens on the nodes, each committed durably before it
 * answers, so these functions do not belong in a transaction block: a
 * rollback could not undo them.
 */
#include "paxos.h"

extern "C" {
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/snapmgr.h"
}

/* ---- What the nodes of a configuration say about the cluster ---- */

void hilo_look_at_cluster(const HiloConfig *cfg, HiloPeer **peers, HiloClusterView *view)
{
    static const char *sql =
        "SELECT epoch, config, installed_ms_ago, accepted_counter, accepted_config,"
        "       accepted_ms_ago FROM hilo._cluster_state()";
    HiloBroadcast b;
    hilo_broadcast_query(peers, cfg->nnodes, &b, sql, 0, NULL);
    memset(view, 0, sizeof(*view));
    view->newest_epoch = cfg->epoch;
    view->youngest_install_ms = INT64_MAX;
    view->answered = (bool *)palloc0(sizeof(bool) * Max(cfg->nnodes, 1));
    view->epochs = (int64 *)palloc0(sizeof(int64) * Max(cfg->nnodes, 1));
    view->node_errors = (char **)palloc0(sizeof(char *) * Max(cfg->nnodes, 1));
    for (int i = 0; i < cfg->nnodes; i++) {
        PGresult *r = b.results[i];
        view->node_errors[i] = b.errors[i];
        if (r == NULL || PQntuples(r) != 1)
            continue;
        view->reachable++;
        view->answered[i] = true;
        int64 epoch = hilo_result_int64(r, 0, 0);
        view->epochs[i] = epoch;
        if (epoch > view->newest_epoch && hilo_result_text(r, 0, 1) != NULL) {
            view->newest_epoch = epoch;
            view->newest_json = pstrdup(hilo_result_text(r, 0, 1));
        }
        if (epoch == cfg->epoch && hilo_result_text(r, 0, 2) != NULL)
            view->youngest_install_ms = Min(view->youngest_install_ms, hilo_result_int64(r, 0, 2));
        if (epoch == cfg->epoch && hilo_result_text(r, 0, 4) != NULL &&
            hilo_result_int64(r, 0, 5) > hilo_settle_ms())
            view->pending_stale = true;
    }
    view->errors = hilo_broadcast_errors(&b, cfg->nnodes);
    hilo_broadcast_free(&b, cfg->nnodes);
}

/* ---- Checks of the node being added ---- */

typedef struct JoinerIdentity {
    int64 incarnation;
    int64 epoch;
    int64 cluster_id;
    int32 node_id;
    int64 windows;
} JoinerIdentity;

static void identify(HiloPeer *peer, JoinerIdentity *id)
{
    static const char *sql =
        "SELECT incarnation, epoch, cluster_id, node_id, windows FROM hilo._node_identity()";
    HiloBroadcast b;
    hilo_broadcast_query(&peer, 1, &b, sql, 0, NULL);
    if (b.results[0] == NULL || PQntuples(b.results[0]) != 1) {
        char *error = b.errors[0] ? b.errors[0] : pstrdup("no answer");
        hilo_broadcast_free(&b, 1);
        /* It answers, but hilo is missing, not preloaded, or too old there. */
        if (peer->not_hilo || strcmp(peer->sqlstate, "55000") == 0)
            ereport(ERROR,
                    (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                     errmsg("node \"%s\" does not run hilo", peer->name), errdetail("%s", error),
                     errhint("Install hilo there: shared_preload_libraries = 'hilo', a "
                             "restart, and CREATE EXTENSION hilo in the database the "
                             "conninfo names.")));
        ereport(ERROR,
                (errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
                 errmsg("could not reach hilo on node \"%s\"", peer->name), errdetail("%s", error),
                 errhint("Check the conninfo, that the server is up, that hilo is in its "
                         "shared_preload_libraries and CREATE EXTENSION hilo was run in "
                         "that database, and that the role is a superuser.")));
    }
    id->incarnation = hilo_result_int64(b.results[0], 0, 0);
    id->epoch = hilo_result_int64(b.results[0], 0, 1);
    id->cluster_id = hilo_result_int64(b.results[0], 0, 2);
    id->node_id = (int32)hilo_result_int64(b.results[0], 0, 3);
    id->windows = hilo_result_int64(b.results[0], 0, 4);
    hilo_broadcast_free(&b, 1);
}

static void check_node_name(const char *name)
{
    size_t len = strlen(name);
    if (len < 1 || len >= HILO_NODE_NAME_BYTES)
        ereport(ERROR,
                (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                 errmsg("hilo node name must be 1 to %d bytes long", HILO_NODE_NAME_BYTES - 1)));
}

static void check_joiner(const HiloConfig *cfg, const char *name, const JoinerIdentity *id)
{
    for (int i = 0; i < cfg->nnodes; i++)
        if (cfg->nodes[i].incarnation == id->incarnation)
            ereport(ERROR, (errcode(ERRCODE_DUPLICATE_OBJECT),
                            errmsg("node \"%s\" is already a member of the hilo cluster, as node "
                                   "\"%s\"",
                                   name, cfg->nodes[i].name)));
    if (id->epoch > 0 && id->cluster_id != cfg->cluster_id)
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("node \"%s\" belongs to another hilo cluster", name),
                        errhint("Remove it from that cluster first, or use a fresh database.")));
    if (id->epoch > 0 && id->node_id != 0)
        ereport(ERROR, (errcode(ERRCODE_DUPLICATE_OBJECT),
                        errmsg("node \"%s\" is already a member of this hilo cluster", name)));
    if (id->epoch == 0 && id->windows > 0)
        ereport(ERROR,
                (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                 errmsg("node \"%s\" has handed out IDs on its own (" INT64_FORMAT " windows)",
                        name, id->windows),
                 errdetail("Its windows were claimed without the cluster's register and could "
                           "overlap the cluster's."),
                 errhint("Add a node whose hilo has no sequences yet; the agent will create "
                         "the cluster's sequences there.")));
}

/* ---- The change ---- */

typedef enum ChangeKind { CHANGE_ADD, CHANGE_REMOVE } ChangeKind;

static char *build_proposal(const HiloConfig *cfg, ChangeKind kind, int32 node_id, const char *name,
                            const char *conninfo, int64 incarnation)
{
    static const char *add_sql =
        "SELECT jsonb_set(jsonb_set(jsonb_set(c, '{epoch}', to_jsonb($2::bigint)),"
        "         '{next_node_id}', to_jsonb($3::int + 1)),"
        "         '{nodes}', (c->'nodes') || jsonb_build_array(jsonb_build_object("
        "           'id', $3::int, 'name', $4::text, 'conninfo', $5::text,"
        "           'incarnation', $6::bigint)))::text"
        "  FROM (SELECT $1::jsonb) AS s(c)";
    static const char *remove_sql =
        "SELECT jsonb_set(jsonb_set(c, '{epoch}', to_jsonb($2::bigint)), '{nodes}',"
        "         (SELECT jsonb_agg(n ORDER BY (n->>'id')::int)"
        "            FROM jsonb_array_elements(c->'nodes') AS n"
        "           WHERE (n->>'id')::int <> $3::int))::text"
        "  FROM (SELECT $1::jsonb) AS s(c)";
    Oid types[6] = {TEXTOID, INT8OID, INT4OID, TEXTOID, TEXTOID, INT8OID};
    Datum values[6] = {CStringGetTextDatum(cfg->json),
                       Int64GetDatum(cfg->epoch + 1),
                       Int32GetDatum(node_id),
                       CStringGetTextDatum(name ? name : ""),
                       CStringGetTextDatum(conninfo ? conninfo : ""),
                       Int64GetDatum(incarnation)};
    if (kind == CHANGE_ADD)
        hilo_spi_exec(add_sql, 6, types, values, NULL, true, 1);
    else
        hilo_spi_exec(remove_sql, 3, types, values, NULL, true, 1);
    return SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
}

static void require_outside_transaction_block(const char *function_name)
{
    if (IsTransactionBlock())
        ereport(ERROR, (errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
                        errmsg("%s cannot run inside a transaction block", function_name),
                        errdetail("It changes every node at once; a rollback could not undo "
                                  "that.")));
}

/* Makes this node, which is in no cluster, a cluster of one. */
static int32 bootstrap(const char *name, const char *conninfo)
{
    HiloPeer *peer = hilo_peer_for(-1, name, conninfo);
    JoinerIdentity id;
    identify(peer, &id);
    /* identify() made sure the nonce exists; read it as committed by now. */
    static const char *sql = "SELECT nonce FROM hilo.local_node";
    hilo_spi_exec_snapshot(sql, 0, NULL, NULL, NULL, GetLatestSnapshot(), true, 1);
    int64 mine = SPI_processed == 1 ? hilo_incarnation_for_nonce(hilo_spi_int64(0, 1)) : 0;
    if (id.incarnation != mine)
        ereport(ERROR,
                (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                 errmsg("the first node added to a hilo cluster must be the node you run "
                        "hilo_add_node() on"),
                 errdetail("This node is in no cluster yet, and conninfo \"%s\" reaches another "
                           "node (or another database).",
                           conninfo),
                 errhint("Run hilo_add_node('<this node>', '<conninfo that reaches this node>') "
                         "first, then add the others from here.")));
    static const char *bootstrap_sql = "SELECT hilo._bootstrap($1, $2)";
    const char *values[2] = {name, conninfo};
    HiloBroadcast b;
    hilo_broadcast_query(&peer, 1, &b, bootstrap_sql, 2, values);
    if (b.results[0] == NULL) {
        char *error = b.errors[0];
        hilo_broadcast_free(&b, 1);
        ereport(ERROR,
                (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                 errmsg("could not start a hilo cluster on this node"), errdetail("%s", error)));
    }
    hilo_broadcast_free(&b, 1);
    return 1;
}

/* Waits until the current configuration has settled (rule 3 above). */
static void wait_to_settle(const HiloClusterView *view)
{
    int64 settle = hilo_settle_ms();
    if (view->youngest_install_ms == INT64_MAX || view->youngest_install_ms >= settle)
        return;
    long wait = (long)(settle - view->youngest_install_ms);
    ereport(NOTICE, (errmsg("waiting %ld ms for claims under the previous hilo configuration to "
                            "finish",
                            wait),
                     errdetail("A membership change may start %d ms after the previous one.",
                               (int)settle)));
    hilo_sleep_ms(wait);
}

static int32 change(ChangeKind kind, const char *name, const char *conninfo)
{
    HiloConfig *cfg = (HiloConfig *)palloc(sizeof(HiloConfig));
    hilo_load_config(cfg);
    if (cfg->epoch == 0) {
        if (kind == CHANGE_REMOVE)
            ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                            errmsg("this node is not in a hilo cluster")));
        return bootstrap(name, conninfo);
    }
    for (int round = 0; round < 3; round++) {
        if (cfg->self < 0)
            ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                            errmsg("this node is not a member of its hilo cluster "
                                   "(configuration epoch " INT64_FORMAT ")",
                                   cfg->epoch),
                            errhint("Run the change on a member.")));
        HiloPeer **peers = hilo_peers_for_config(cfg);
        HiloClusterView view;
        hilo_look_at_cluster(cfg, peers, &view);
        if (view.newest_json != NULL) {
            /* We are behind: catch up first, then look again. */
            (void)hilo_commit_config_on(peers, cfg->nnodes, view.newest_json);
            cfg = hilo_config_from_json(view.newest_json);
            continue;
        }
        if (view.reachable < (int)hilo_majority_of(cfg->nnodes))
            ereport(ERROR, (errcode(ERRCODE_CONNECTION_FAILURE),
                            errmsg("cannot change the hilo cluster: %d of %d nodes answered, %d "
                                   "needed",
                                   view.reachable, cfg->nnodes, (int)hilo_majority_of(cfg->nnodes)),
                            errdetail("%s", view.errors)));

        int32 node_id = 0;
        int64 incarnation = 0;
        int existing = -1;
        for (int i = 0; i < cfg->nnodes; i++)
            if (strcmp(cfg->nodes[i].name, name) == 0)
                existing = i;
        if (kind == CHANGE_ADD) {
            /* The very same node: done already (perhaps by a changer that finished ours). */
            if (existing >= 0 && strcmp(cfg->nodes[existing].conninfo, conninfo) == 0) {
                ereport(NOTICE, (errmsg("hilo node \"%s\" is a member", name)));
                return cfg->nodes[existing].id;
            }
            if (existing >= 0)
                ereport(ERROR, (errcode(ERRCODE_DUPLICATE_OBJECT),
                                errmsg("hilo node \"%s\" already exists", name)));
            if (cfg->nnodes >= HILO_MAX_NODES)
                ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
                                errmsg("a hilo cluster has at most %d nodes", HILO_MAX_NODES)));
            node_id = cfg->next_node_id;
            HiloPeer *joiner = hilo_peer_for(node_id, name, conninfo);
            JoinerIdentity id;
            identify(joiner, &id);
            check_joiner(cfg, name, &id);
            incarnation = id.incarnation;
        } else {
            if (existing < 0 && round > 0)
                return 0; /* removed meanwhile, perhaps by a changer that finished ours */
            if (existing < 0)
                ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                                errmsg("hilo node \"%s\" does not exist", name)));
            if (cfg->nnodes == 1)
                ereport(ERROR,
                        (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                         errmsg("cannot remove \"%s\", the last node of the hilo cluster", name)));
            node_id = cfg->nodes[existing].id;
        }
        wait_to_settle(&view);

        char *proposal = build_proposal(cfg, kind, node_id, name, conninfo, incarnation);
        PaxosOutcome outcome;
        hilo_run_paxos(cfg, peers, proposal, &outcome);
        if (outcome.stale) {
            HiloConfig *fresh = (HiloConfig *)palloc(sizeof(HiloConfig));
            hilo_look_at_cluster(cfg, peers, &view);
            if (view.newest_json == NULL)
                ereport(ERROR, (errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
                                errmsg("the hilo cluster configuration changed meanwhile"),
                                errhint("Retry.")));
            (void)hilo_commit_config_on(peers, cfg->nnodes, view.newest_json);
            hilo_parse_config(view.newest_json, hilo_local_incarnation(), fresh);
            cfg = fresh;
            continue;
        }
        if (!outcome.chosen)
            ereport(ERROR, (errcode(ERRCODE_CONNECTION_FAILURE),
                            errmsg("could not agree on the next hilo configuration"),
                            errdetail("%s", outcome.why)));
        char *why = hilo_install_chosen(cfg, peers, outcome.value);
        if (why != NULL)
            ereport(
                ERROR,
                (errcode(ERRCODE_CONNECTION_FAILURE),
                 errmsg("the next hilo configuration is chosen but could not be installed yet"),
                 errdetail("%s", why), errhint("The agent finishes it once enough nodes answer.")));
        if (!outcome.ours)
            ereport(ERROR, (errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
                            errmsg("another hilo membership change was pending; it has been "
                                   "finished first"),
                            errhint("Look at hilo.nodes and retry.")));
        return node_id;
    }
    ereport(ERROR, (errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
                    errmsg("the hilo cluster configuration kept changing"), errhint("Retry.")));
}

bool hilo_finish_pending_change(const HiloConfig *cfg, HiloPeer **peers, char *message,
                                size_t message_size)
{
    HiloClusterView view;
    hilo_look_at_cluster(cfg, peers, &view);
    if (!view.pending_stale || view.newest_json != NULL)
        return false;
    PaxosOutcome outcome;
    hilo_run_paxos(cfg, peers, NULL, &outcome);
    if (!outcome.chosen) {
        snprintf(message, message_size, "a pending membership change could not be finished: %s",
                 outcome.why ? outcome.why : "stale");
        return false;
    }
    char *why = hilo_install_chosen(cfg, peers, outcome.value);
    if (why != NULL) {
        snprintf(message, message_size, "a pending membership change could not be installed: %s",
                 why);
        return false;
    }
    HiloConfig *next = hilo_config_from_json(outcome.value);
    snprintf(message, message_size, "finished a pending membership change: epoch " INT64_FORMAT,
             next->epoch);
    return true;
}

/* ---- SQL functions ---- */

static int32 run_change(FunctionCallInfo fcinfo, ChangeKind kind, const char *function_name)
{
    static const char *const arg_names[] = {"name", "conninfo"};
    int nargs = kind == CHANGE_ADD ? 2 : 1;
    hilo_entry(fcinfo, function_name, arg_names, nargs, HILO_WRITES);
    require_outside_transaction_block(function_name);
    char *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
    char *conninfo = kind == CHANGE_ADD ? text_to_cstring(PG_GETARG_TEXT_PP(1)) : NULL;
    check_node_name(name);

    volatile int32 node_id = 0;
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    PG_TRY();
    {
        node_id = change(kind, name, conninfo);
    }
    PG_FINALLY();
    {
        /* A backend keeps no connections to other nodes between calls. */
        hilo_peers_close_all();
    }
    PG_END_TRY();
    hilo_catalog_end(&access);
    return node_id;
}

HILO_SQL_FUNCTION(hilo_add_node)
{
    PG_RETURN_INT32(run_change(fcinfo, CHANGE_ADD, "hilo_add_node()"));
}

HILO_SQL_FUNCTION(hilo_remove_node)
{
    (void)run_change(fcinfo, CHANGE_REMOVE, "hilo_remove_node()");
    PG_RETURN_VOID();
}
