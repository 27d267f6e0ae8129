/*
 * cluster/agent/window_claim.cpp: where the allocator meets the cluster.
 *
 * On a node in no cluster the allocator claims windows right above the
 * local high-water mark, as it always did. In a cluster that would overlap
 * the other nodes' windows, so there every window comes from the quorum
 * register: the agent keeps min_open_windows open on every node, and a take
 * that needs more than the open windows hold (a huge n, or windows that ran
 * dry between two agent runs) claims its own range through the register and
 * waits for a majority. Takes served from open windows never leave the node.
 */
#include "agent_shared.h"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
}

/*
 * After a claim found no majority, takes that need one fail at once for a
 * while instead of each waiting hilo.claim_timeout: the allocator serves
 * every take of its database, and those that fit in open windows must not
 * queue behind a claim that cannot succeed.
 */
static TimestampTz no_majority_until = 0;
static char no_majority_reason[1024];

static TimestampTz last_agent_wake = 0;

/*
 * The installed configuration, as of the latest commit (not our snapshot).
 * The allocator asks before every window it claims, so the one row of
 * hilo.cluster is read through the table access method, as `SELECT
 * config::text FROM hilo.cluster WHERE epoch > 0` under the latest
 * snapshot would, without the statement's executor start-up.
 */
static void load_latest_config(HiloConfig *cfg)
{
    /* Looked up again only after a change of names (hilo_catalog_names_epoch). */
    static uint64 names_epoch = 0;
    static Oid relid = InvalidOid;
    static AttrNumber epoch_column = InvalidAttrNumber, config_column = InvalidAttrNumber;
    if (names_epoch != hilo_catalog_names_epoch()) {
        relid = get_relname_relid("cluster", get_namespace_oid("hilo", false));
        if (!OidIsValid(relid))
            elog(ERROR, "hilo: the catalog has no table hilo.cluster");
        epoch_column = get_attnum(relid, "epoch");
        config_column = get_attnum(relid, "config");
        if (epoch_column == InvalidAttrNumber || config_column == InvalidAttrNumber)
            elog(ERROR, "hilo: hilo.cluster has no column epoch or config");
        names_epoch = hilo_catalog_names_epoch();
    }
    Relation rel = table_open(relid, AccessShareLock);
    Snapshot snapshot = RegisterSnapshot(GetLatestSnapshot());
    SysScanDesc scan = systable_beginscan(rel, InvalidOid, false, snapshot, 0, NULL);
    char *json = NULL;
    HeapTuple tuple;
    while (json == NULL && HeapTupleIsValid(tuple = systable_getnext(scan))) {
        bool epoch_null, config_null;
        Datum epoch = heap_getattr(tuple, epoch_column, RelationGetDescr(rel), &epoch_null);
        Datum config = heap_getattr(tuple, config_column, RelationGetDescr(rel), &config_null);
        if (!epoch_null && DatumGetInt64(epoch) > 0)
            json =
                config_null ? pstrdup("") : DatumGetCString(DirectFunctionCall1(jsonb_out, config));
    }
    systable_endscan(scan);
    UnregisterSnapshot(snapshot);
    table_close(rel, AccessShareLock);
    if (json == NULL) {
        memset(cfg, 0, sizeof(*cfg));
        cfg->self = -1;
        return;
    }
    hilo_parse_config(json, hilo_local_incarnation(), cfg);
}

/* `ordered`: the claim of an ordered sequence ('quorum'), which has no open
 * windows: every batch of its calls is a claim of its own. */
static void raise_no_majority(const char *seq_name, const char *reason, bool ordered)
    pg_attribute_noreturn();
static void raise_no_majority(const char *seq_name, const char *reason, bool ordered)
{
    if (ordered)
        ereport(ERROR,
                (errcode(ERRCODE_CONNECTION_FAILURE),
                 errmsg("hilo sequence \"%s\" is ordered across the hilo cluster, and no "
                        "majority of the cluster's nodes granted its next IDs",
                        seq_name),
                 errdetail("%s", reason),
                 errhint("Every call of a sequence ordered across the cluster needs a majority "
                         "of the nodes: bring the other nodes back.")));
    ereport(ERROR,
            (errcode(ERRCODE_CONNECTION_FAILURE),
             errmsg("hilo sequence \"%s\" needs IDs beyond this node's open windows, and no "
                    "majority of the hilo cluster's nodes granted them",
                    seq_name),
             errdetail("%s", reason),
             errhint("Takes that fit in the open windows keep working. Bring the other nodes "
                     "back, or take fewer IDs at once.")));
}

static void raise_not_a_member(const char *seq_name, const HiloConfig *cfg, bool ordered)
    pg_attribute_noreturn();
static void raise_not_a_member(const char *seq_name, const HiloConfig *cfg, bool ordered)
{
    ereport(ERROR,
            (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
             ordered ? errmsg("hilo sequence \"%s\" is ordered across the hilo cluster, and this "
                              "node is not a member of the cluster",
                              seq_name)
                     : errmsg("hilo sequence \"%s\" has no open window left for this take, and "
                              "this node is not a member of the hilo cluster",
                              seq_name),
             errdetail("Configuration epoch " INT64_FORMAT " does not list this node: it was "
                       "removed, or it is a restored copy.",
                       cfg->epoch),
             errhint("Add the node again with hilo_add_node() on a member.")));
}

bool hilo_cluster_active(void)
{
    if (!hilo_catalog_has_table("cluster")) /* a catalog still at 0.1.0 */
        return false;
    HiloConfig *cfg = (HiloConfig *)palloc(sizeof(HiloConfig));
    load_latest_config(cfg);
    return cfg->epoch != 0;
}

static bool claims_window(const char *seq_name, int64 start_value, int64 max_value, uint64 size,
                          bool for_take, bool whole, bool ordered, const int64 *guess,
                          bool *claimed, HiloRange *window, uint64 *left);

bool hilo_cluster_claims_window(const char *seq_name, int64 start_value, int64 max_value,
                                uint64 size, bool for_take, bool *claimed, HiloRange *window)
{
    return claims_window(seq_name, start_value, max_value, size, for_take, false, false, NULL,
                         claimed, window, NULL);
}

bool hilo_cluster_claims_whole_window(const char *seq_name, int64 start_value, int64 max_value,
                                      uint64 size, bool *claimed, HiloRange *window, uint64 *left)
{
    return claims_window(seq_name, start_value, max_value, size, true, true, false, NULL, claimed,
                         window, left);
}

bool hilo_cluster_claims_ordered_window(const char *seq_name, int64 start_value, int64 max_value,
                                        uint64 size, const int64 *guess, bool *claimed,
                                        HiloRange *window, uint64 *left)
{
    return claims_window(seq_name, start_value, max_value, size, true, true, true, guess, claimed,
                         window, left);
}

static bool claims_window(const char *seq_name, int64 start_value, int64 max_value, uint64 size,
                          bool for_take, bool whole, bool ordered, const int64 *guess,
                          bool *claimed, HiloRange *window, uint64 *left)
{
    if (!hilo_catalog_has_table("cluster")) /* a catalog still at 0.1.0 */
        return false;
    HiloConfig *cfg = (HiloConfig *)palloc(sizeof(HiloConfig));

    load_latest_config(cfg);
    if (cfg->epoch == 0)
        return false;
    *claimed = false;

    TimestampTz now = GetCurrentTimestamp();
    if (!for_take) {
        /* Open windows are running low here: the agent's job, soon rather than later. */
        if (now - last_agent_wake > 1000 * 1000) {
            last_agent_wake = now;
            hilo_agent_wake();
        }
        return true;
    }
    if (cfg->self < 0)
        raise_not_a_member(seq_name, cfg, ordered);
    if (now < no_majority_until)
        raise_no_majority(seq_name, no_majority_reason, ordered);

    HiloClaimWant want;
    for (int attempt = 0;; attempt++) {
        HiloPeer **peers = hilo_peers_for_config(cfg);
        HiloWatermarkSet *watermarks = (HiloWatermarkSet *)palloc0(sizeof(HiloWatermarkSet));
        hilo_watermarks_load(watermarks, cfg);
        memset(&want, 0, sizeof(want));
        want.key = seq_name;
        want.floor = start_value - 1;
        want.max_value = max_value;
        want.window_size = size;
        want.window_count = 1;
        want.whole = whole;
        /* Only the first round: a retry after a membership change reads. */
        want.has_guess = guess != NULL && attempt == 0;
        want.guess = guess != NULL ? Max(*guess, start_value - 1) : 0;
        /*
         * What this claim learned about write counts is not saved here: the
         * take's transaction must not wait on other writers of
         * hilo.peer_watermarks. The agent's next pass sees the same counts.
         */
        hilo_claim_round(cfg, peers, watermarks, &want, 1, hilo_claim_timeout_ms);
        if (want.status != HILO_CLAIM_UNAVAILABLE || attempt > 0)
            break;
        /*
         * Nodes refuse claims made under an older configuration than theirs:
         * right after a membership change this node may lag. Catch up (on
         * every node that lags, this one included) and try once more.
         */
        HiloClusterView view;
        hilo_look_at_cluster(cfg, peers, &view);
        if (view.newest_json == NULL)
            break;
        (void)hilo_commit_config_on(peers, cfg->nnodes, view.newest_json);
        hilo_parse_config(view.newest_json, hilo_local_incarnation(), cfg);
        if (cfg->self < 0)
            raise_not_a_member(seq_name, cfg, ordered);
    }
    /* Open windows ran low: the agent refills them. An ordered sequence has
     * none, so its claims (one per batch of calls, many a second) wake the
     * agent only when something went wrong. */
    if (!ordered || want.status != HILO_CLAIM_CLAIMED)
        hilo_agent_wake();

    switch (want.status) {
        case HILO_CLAIM_CLAIMED:
            *window = want.window;
            *claimed = true;
            no_majority_until = 0;
            return true;
        case HILO_CLAIM_EXHAUSTED:
            if (left != NULL)
                *left = hilo_ids_above(Max(want.highest_seen, start_value - 1), max_value);
            return true;
        case HILO_CLAIM_LOST:
            ereport(ERROR, (errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
                            errmsg(ordered ? "hilo sequence \"%s\" is ordered across the hilo "
                                             "cluster, and other claims kept winning the register"
                                           : "hilo sequence \"%s\" needs IDs beyond this node's "
                                             "open windows, and other claims kept winning the "
                                             "register",
                                   seq_name),
                            errdetail("%s", want.reason),
                            errhint(ordered ? "Retry the call." : "Retry the take.")));
            pg_unreachable();
        default:
            strlcpy(no_majority_reason, want.reason, sizeof(no_majority_reason));
            no_majority_until =
                TimestampTzPlusMilliseconds(GetCurrentTimestamp(), hilo_claim_timeout_ms);
            raise_no_majority(seq_name, want.reason, ordered);
    }
}

/* This node's id in its cluster (-1 in none), for node_bits slices: a node
 * its configuration no longer lists must not claim in any slice. */
int32 hilo_cluster_local_node_id(void)
{
    if (!hilo_catalog_has_table("cluster")) /* a catalog still at 0.1.0 */
        return -1;
    HiloConfig *cfg = (HiloConfig *)palloc(sizeof(HiloConfig));
    load_latest_config(cfg);
    if (cfg->epoch == 0)
        return -1;
    if (cfg->self < 0)
        ereport(ERROR,
                (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                 errmsg("this node is not a member of the hilo cluster, so it has no node slice"),
                 errdetail("Configuration epoch " INT64_FORMAT " does not list this node: it was "
                           "removed, or it is a restored copy.",
                           cfg->epoch),
                 errhint("Add the node again with hilo_add_node() on a member.")));
    return cfg->nodes[cfg->self].id;
}

/*
 * Before this node first claims in its slice of a node_bits sequence, a
 * majority of the cluster's nodes must hold the name with the same
 * node_bits. Copies created apart (two nodes, one name, before either saw
 * the other's) may differ, and slices of different widths overlap: node 1's
 * slice of 2 bits is node 2's of 3, from its first ID on. The node carries
 * its copy to every node that lacks the name (as the agent would), reads
 * every node's node_bits, and claims only if a majority has its own: a node
 * holds one copy of a name, so two widths never both have a majority. Once
 * agreed (hilo.slice_agreed, until the sequence is dropped) it claims in
 * its slice with no network again, also when cut off.
 */
/* The last round of hilo_cluster_slice_agreed that failed while a node did
 * not answer: takes of that sequence fail at once for a while (the
 * allocator serves every take of the database; the next round would wait
 * for that node too). Its own back-off: register claims may still find a
 * majority. */
static int32 slice_no_majority_seq = 0;
static uint64 slice_no_majority_creation = 0; /* of the catalog (seq_ids restart) */
static TimestampTz slice_no_majority_until = 0;
static char slice_no_majority_reason[1024];

static void raise_slice_no_majority(const char *seq_name, const char *reason)
    pg_attribute_noreturn();
static void raise_slice_no_majority(const char *seq_name, const char *reason)
{
    ereport(ERROR,
            (errcode(ERRCODE_CONNECTION_FAILURE),
             errmsg("hilo sequence \"%s\" needs its first window in this node's slice, and no "
                    "majority of the hilo cluster's nodes answered",
                    seq_name),
             errdetail("%s", reason),
             errhint("A node claims in its slice alone, also cut off, once a majority agreed on "
                     "the sequence's node_bits: bring the other nodes back.")));
}

/* A timestamptz as text that reads back exactly on any node, whatever the
 * session's DateStyle and TimeZone. */
#define UTC_TEXT(expr) \
    "pg_catalog.to_char((" expr ") AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') || '+00'"

bool hilo_cluster_slice_agreed(int32 seq_id, const char *seq_name, int32 node_bits, bool raise)
{
    if (!hilo_catalog_has_table("slice_agreed")) /* a catalog before 0.5.0: no node_bits */
        return true;
    static const char *agreed_sql = "SELECT 1 FROM hilo.slice_agreed WHERE seq_id = $1";
    hilo_spi_exec1(agreed_sql, INT4OID, Int32GetDatum(seq_id), false, 1);
    if (SPI_processed > 0)
        return true;
    HiloConfig *cfg = (HiloConfig *)palloc(sizeof(HiloConfig));
    load_latest_config(cfg);
    if (cfg->epoch == 0 || cfg->self < 0) /* alone: node 0's slice; not a member: refused before */
        return true;
    if (!raise) /* a top-up: the take that comes first agrees */
        return false;
    /* As for a claim: after a round found no majority, fail at once for a
     * while (the allocator serves every take of the database). */
    if (seq_id == slice_no_majority_seq && GetCurrentTimestamp() < slice_no_majority_until &&
        hilo_catalog_creation_now() == slice_no_majority_creation)
        raise_slice_no_majority(seq_name, slice_no_majority_reason);

    /* This node's copy, as hilo._carry_sequence() takes it. */
    static const char *copy_sql =
        "SELECT name, start_value::text, max_value::text, window_size::text,"
        "       min_open_windows::text, block_size::text, owner::text,"
        "       " UTC_TEXT("created_at") ", node_bits::text, ordering,"
        "       settings_version::text, " UTC_TEXT("settings_changed_at")
        "  FROM hilo.sequences WHERE seq_id = $1";
    hilo_spi_exec1(copy_sql, INT4OID, Int32GetDatum(seq_id), false, 1);
    if (SPI_processed == 0)
        return false;
    const char *values[12];
    for (int c = 0; c < 12; c++)
        values[c] = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, c + 1);

    /* A copy created at or before a drop of the name this node made or got
     * is a dropped sequence's, gone once the drop reaches it: no vote. And
     * other node_bits with which a dropped sequence of the name handed out
     * IDs on a node: this node's new slice could hold them. */
    static const char *read_sql =
        "SELECT (SELECT node_bits FROM hilo.sequences WHERE name = $1"
        "           AND ($2::timestamptz IS NULL OR created_at > $2::timestamptz)),"
        "       (SELECT node_bits FROM hilo.dropped_names WHERE name = $1 AND node_bits > 0)";
    static const char *dropped_sql =
        "SELECT " UTC_TEXT("max(created_at)") "  FROM hilo.dropped_sequences WHERE name = $1";
    int n = cfg->nnodes;
    HiloPeer **peers = hilo_peers_for_config(cfg);
    bool *skip = (bool *)palloc0(sizeof(bool) * n);
    skip[cfg->self] = true;
    HiloBroadcast b;
    hilo_broadcast_query_skip(peers, n, &b, hilo_carry_sequence_sql, 12, values, skip);
    hilo_broadcast_free(&b, n);
    hilo_spi_exec1(dropped_sql, TEXTOID, CStringGetTextDatum(seq_name), false, 1);
    const char *read_values[2] = {values[0],
                                  SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1)};
    hilo_broadcast_query_skip(peers, n, &b, read_sql, 2, read_values, skip);
    int same = 1;     /* this node */
    int answered = 1; /* this node */
    StringInfoData other, dropped;
    initStringInfo(&other);
    initStringInfo(&dropped);
    for (int i = 0; i < n; i++) {
        if (skip[i])
            continue;
        answered += b.results[i] != NULL;
        const char *was = hilo_result_text(b.results[i], 0, 1);
        if (was != NULL && pg_strtoint32(was) != node_bits)
            appendStringInfo(&dropped, "%snode \"%s\": node_bits %s", dropped.len > 0 ? ", " : "",
                             cfg->nodes[i].name, was);
        const char *bits = hilo_result_text(b.results[i], 0, 0);
        if (bits != NULL && pg_strtoint32(bits) == node_bits)
            same++;
        else if (bits != NULL)
            appendStringInfo(&other, "%snode \"%s\" has node_bits %s", other.len > 0 ? ", " : "",
                             cfg->nodes[i].name, bits);
    }
    char *errors = hilo_broadcast_errors(&b, n);
    hilo_broadcast_free(&b, n);
    int majority = (int)hilo_majority_of(n);
    if (dropped.len > 0)
        ereport(ERROR,
                (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                 errmsg("hilo sequence \"%s\" has node_bits %d, but a dropped sequence of the name "
                        "handed out IDs with other node_bits",
                        seq_name, node_bits),
                 errdetail("On %s. Every node's slice moves with node_bits: this node's new slice "
                           "would hold IDs handed out there.",
                           dropped.data),
                 errhint("Drop the sequence and create it again with the node_bits it had, or "
                         "under another name.")));
    if (same >= majority) {
        static const char *agree_sql =
            "INSERT INTO hilo.slice_agreed (seq_id) VALUES ($1) ON CONFLICT DO NOTHING";
        hilo_spi_exec1(agree_sql, INT4OID, Int32GetDatum(seq_id), false, 0);
        return true;
    }
    if (other.len > 0)
        ereport(ERROR,
                (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                 errmsg("hilo sequence \"%s\" has node_bits %d on this node but not on a majority "
                        "of the hilo cluster's nodes",
                        seq_name, node_bits),
                 errdetail("It was created apart on several nodes with different node_bits (%s), "
                           "and slices of different widths overlap; %d of %d nodes have %d.",
                           other.data, same, n, node_bits),
                 errhint("Drop the sequence and create it again with one node_bits.")));
    char *reason = psprintf(
        "%d of %d nodes hold it with node_bits %d, %d needed: %s", same, n, node_bits, majority,
        errors[0] != '\0' ? errors : "the others lack it (or hold a copy dropped here)");
    if (answered < n) {
        slice_no_majority_seq = seq_id;
        slice_no_majority_creation = hilo_catalog_creation_now();
        slice_no_majority_until =
            TimestampTzPlusMilliseconds(GetCurrentTimestamp(), hilo_claim_timeout_ms);
        strlcpy(slice_no_majority_reason, reason, sizeof(slice_no_majority_reason));
    }
    raise_slice_no_majority(seq_name, reason);
}
