/*
 * cluster/agent/agent.cpp: the agent that keeps every node of a hilo cluster supplied
 * (docs/multi-node.md, "The agent").
 *
 * One pass, from any member:
 *   1. carry the newest configuration to every node that lags (and to this
 *      one), and finish a membership change whose changer died;
 *   2. with a majority of nodes answering (else: do nothing, say why):
 *      merge what every node's proposers saw of register writes (fencing);
 *   3. carry sequences created on any node to every node, and drops; then
 *      the newest settings (by settings version) to every node whose copy
 *      is older, and what every node has into hilo.node_settings;
 *   4. for every sequence, claim through the register, in one round for all
 *      sequences, the windows every reachable, unfenced node lacks to have
 *      min_open_windows open, and install them there.
 *
 * The agent keeps no state: every pass starts from what the nodes say, so
 * it may run on every node at once (the register keeps windows disjoint;
 * a race only tops a node up twice). It runs as a background worker every
 * hilo.agent_interval in the database hilo.agent_database, and as
 * hilo_agent_run() for manual or pg_cron use (agent_worker.cpp). Its last
 * outcome is in hilo.agent_status and hilo.nodes (agent_status.cpp).
 * Step 3, carrying sequences, is in cluster/carry/carry.cpp (a membership change
 * runs it too).
 */
#include "agent_shared.h"

extern "C" {
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/tuplestore.h"
}

/* ---- One pass ---- */

/* The windows claimed for one node in this pass, to install there. */
typedef struct NodeWindows {
    const char **names;
    int64 *firsts;
    int64 *lasts;
    int count;
    int capacity;
} NodeWindows;

static void add_window(NodeWindows *nw, const char *name, HiloRange window)
{
    if (nw->count == nw->capacity) {
        nw->capacity = nw->capacity ? nw->capacity * 2 : 16;
        if (nw->names == NULL) {
            nw->names = (const char **)palloc(sizeof(char *) * nw->capacity);
            nw->firsts = (int64 *)palloc(sizeof(int64) * nw->capacity);
            nw->lasts = (int64 *)palloc(sizeof(int64) * nw->capacity);
        } else {
            nw->names = (const char **)repalloc(nw->names, sizeof(char *) * nw->capacity);
            nw->firsts = (int64 *)repalloc(nw->firsts, sizeof(int64) * nw->capacity);
            nw->lasts = (int64 *)repalloc(nw->lasts, sizeof(int64) * nw->capacity);
        }
    }
    nw->names[nw->count] = name;
    nw->firsts[nw->count] = window.first;
    nw->lasts[nw->count] = window.last;
    nw->count++;
}

/*
 * What each sequence lacks: one want per sequence with open windows missing
 * on some node, and in deficits[want * n + node] how many each node lacks.
 * Returns the number of wants.
 */
static int collect_wants(PassState *st, HiloClaimWant *wants, int32 *deficits)
{
    int n = st->cfg->nnodes;
    int nwants = 0;
    HASH_SEQ_STATUS seq;
    hash_seq_init(&seq, st->sequences);
    for (SequenceEntry *e; (e = (SequenceEntry *)hash_seq_search(&seq)) != NULL;) {
        /* A sequence with node_bits: every node claims in its own slice.
         * One ordered across the cluster keeps no window open (each call
         * claims above all before it: order/quorum/quorum_order.cpp). */
        if (e->dropped || e->original == NULL || e->original->node_bits > 0 ||
            strcmp(e->original->ordering, "quorum") == 0 ||
            strcmp(e->original->ordering, "cluster") == 0)
            continue;
        int64 total = 0;
        for (int i = 0; i < n; i++) {
            int32 deficit = 0;
            if (st->usable[i] && e->on_node[i] != NULL)
                deficit =
                    (int32)Max(0, e->on_node[i]->min_open_windows - e->on_node[i]->open_windows);
            else if (st->usable[i] && e->carried_to[i])
                deficit = e->newest->min_open_windows;
            deficits[nwants * n + i] = deficit;
            total += deficit;
        }
        if (total == 0)
            continue;
        HiloClaimWant *w = &wants[nwants++];
        w->key = e->name;
        w->floor = e->original->start_value - 1;
        /* The newest settings (carried to every node that answered above). */
        w->max_value = e->newest->max_value;
        w->window_size = (uint64)e->newest->window_size;
        w->window_count = (uint64)total;
    }
    return nwants;
}

/* Cuts each claimed batch into windows, node by node, this agent's own node
 * first (it is the one whose takes it sees). */
static void cut_windows(PassState *st, PassResult *res, const HiloClaimWant *wants, int nwants,
                        const int32 *deficits, NodeWindows *per_node)
{
    int n = st->cfg->nnodes;
    int failed = 0, retried = 0;
    const char *first_failure = NULL;
    for (int c = 0; c < nwants; c++) {
        if (wants[c].attempts > 1)
            retried++;
        if (wants[c].status != HILO_CLAIM_CLAIMED) {
            if (wants[c].status != HILO_CLAIM_EXHAUSTED) {
                failed++;
                if (first_failure == NULL)
                    first_failure = psprintf("\"%s\": %s", wants[c].key, wants[c].reason);
            }
            continue;
        }
        HiloRange rest = wants[c].window;
        bool more = true;
        for (int k = 0; k < n && more; k++) {
            int i = (st->cfg->self + k) % n;
            for (int w = 0; w < deficits[c * n + i] && more; w++) {
                HiloRange window = hilo_take_prefix(rest, wants[c].window_size);
                add_window(&per_node[i], wants[c].key, window);
                more = window.last < rest.last;
                rest.first = window.last + 1;
            }
        }
    }
    if (failed > 0)
        hilo_agent_note(res, "%d of %d claims failed (first: %s)", failed, nwants, first_failure);
    if (retried > 0)
        hilo_agent_note(res, "%d of %d claims were outvoted by other proposers and retried",
                        retried, nwants);
}

/* Installs on each node the windows cut for it, in one statement a node. */
static void install_windows(PassState *st, PassResult *res, NodeWindows *per_node)
{
    static const char *install_sql =
        "SELECT hilo._install_windows($1::text[], $2::bigint[], $3::bigint[])";
    int n = st->cfg->nnodes;
    const char ***values = (const char ***)palloc0(sizeof(char **) * n);
    bool *skip = (bool *)palloc0(sizeof(bool) * n);
    bool any = false;
    for (int i = 0; i < n; i++) {
        NodeWindows *nw = &per_node[i];
        /* A node fenced during these very claims gets nothing: its share is a gap. */
        if (nw->count > 0 && hilo_watermarks_fenced(&st->watermarks, &st->cfg->nodes[i])) {
            hilo_agent_note(
                res, "%d windows claimed for node \"%s\" are dropped (a gap): it was just fenced",
                nw->count, st->cfg->nodes[i].name);
            nw->count = 0;
        }
        skip[i] = nw->count == 0;
        any |= !skip[i];
        if (skip[i])
            continue;
        values[i] = (const char **)palloc(sizeof(char *) * 3);
        values[i][0] = hilo_text_array(nw->names, nw->count);
        values[i][1] = hilo_int64_array(nw->firsts, nw->count);
        values[i][2] = hilo_int64_array(nw->lasts, nw->count);
    }
    if (!any)
        return;
    HiloBroadcast b;
    memset(&b, 0, sizeof(b));
    b.sql = install_sql;
    b.nparams = 3;
    b.values_per_peer = (const char *const *const *)values;
    b.skip = skip;
    hilo_broadcast(st->peers, n, &b, hilo_claim_timeout_ms);
    for (int i = 0; i < n; i++) {
        if (skip[i])
            continue;
        if (b.results[i] != NULL)
            res->windows_claimed += pg_strtoint64(PQgetvalue(b.results[i], 0, 0));
        else
            hilo_agent_note(res, "%d windows claimed for node \"%s\" are lost (a gap): %s",
                            per_node[i].count, st->cfg->nodes[i].name, b.errors[i]);
    }
    hilo_broadcast_free(&b, n);
}

/* Step 4: windows for every node that lacks them, claimed in one round. */
static void supply_windows(PassState *st, PassResult *res)
{
    int n = st->cfg->nnodes;
    long nseq = hash_get_num_entries(st->sequences);
    HiloClaimWant *wants = (HiloClaimWant *)palloc0(sizeof(HiloClaimWant) * Max(nseq, 1));
    int32 *deficits = (int32 *)palloc0(sizeof(int32) * Max(nseq, 1) * n);
    int nwants = collect_wants(st, wants, deficits);
    if (nwants == 0)
        return;
    hilo_claim_round(st->cfg, st->peers, &st->watermarks, wants, nwants, hilo_claim_timeout_ms);
    NodeWindows *per_node = (NodeWindows *)palloc0(sizeof(NodeWindows) * n);
    cut_windows(st, res, wants, nwants, deficits, per_node);
    install_windows(st, res, per_node);
}

/* Shares the merged watermarks with every node that answers, this one included. */
static void share_watermarks(PassState *st)
{
    static const char *sql =
        "SELECT hilo._save_watermarks($1::int[], $2::bigint[], $3::bigint[], $4::boolean[])";
    HiloWatermarkSet *set = &st->watermarks;
    if (set->count == 0)
        return;
    int32 ids[HILO_MAX_NODES];
    int64 incarnations[HILO_MAX_NODES], counts[HILO_MAX_NODES];
    bool fenced[HILO_MAX_NODES];
    for (int i = 0; i < set->count; i++) {
        ids[i] = (int32)set->entries[i].node;
        incarnations[i] = (int64)set->entries[i].incarnation;
        counts[i] = (int64)set->entries[i].highest_write_count;
        fenced[i] = set->entries[i].fenced;
    }
    const char *values[4] = {
        hilo_int32_array(ids, set->count), hilo_int64_array(incarnations, set->count),
        hilo_int64_array(counts, set->count), hilo_bool_array(fenced, set->count)};
    HiloBroadcast b;
    hilo_broadcast_query(st->peers, st->cfg->nnodes, &b, sql, 4, values);
    hilo_broadcast_free(&b, st->cfg->nnodes);
}

static void record_nodes(PassResult *res, const HiloConfig *cfg, const HiloClusterView *view)
{
    res->nnodes = cfg->nnodes;
    res->nodes_total = cfg->nnodes;
    res->nodes_reachable = view->reachable;
    for (int i = 0; i < cfg->nnodes; i++) {
        res->nodes[i].node_id = cfg->nodes[i].id;
        res->nodes[i].reachable = view->answered[i];
        strlcpy(res->nodes[i].name, cfg->nodes[i].name, sizeof(res->nodes[i].name));
        strlcpy(res->nodes[i].error, view->node_errors[i] ? view->node_errors[i] : "",
                sizeof(res->nodes[i].error));
    }
}

/* One pass of the agent; needs SPI. */
/* Nodes that answered with an older configuration get this one. */
static void update_lagging(PassState *st, const HiloClusterView *view)
{
    hilo_commit_config_where_behind(st->cfg, st->peers, view->answered, view->epochs);
}

/* Step 2: which nodes this pass works with (st->usable): those that
 * answered, less those whose stamps it distrusts or that are fenced (what
 * every node's proposers learned about register writes, and each node's
 * stamp now), each said in `res`. Claims judge replies too, but only those
 * that arrive before a majority did; this check does not depend on timing. */
static void judge_nodes(PassState *st, PassResult *res, const HiloClusterView *view)
{
    int n = st->cfg->nnodes;
    st->usable = (bool *)palloc0(sizeof(bool) * n);
    hilo_watermarks_gather(&st->watermarks, st->cfg, st->peers);
    HiloJudgedNode *judged = (HiloJudgedNode *)palloc(sizeof(HiloJudgedNode) * Max(n, 1));
    hilo_judge_nodes(st->cfg, st->peers, &st->watermarks, judged);
    for (int i = 0; i < n; i++) {
        st->usable[i] = view->answered[i];
        if (judged[i].distrusted) {
            st->usable[i] = false;
            strlcpy(res->nodes[i].error, judged[i].why, sizeof(res->nodes[i].error));
            hilo_agent_note(res, "node \"%s\" %s", st->cfg->nodes[i].name, judged[i].why);
        } else if (hilo_watermarks_fenced(&st->watermarks, &st->cfg->nodes[i])) {
            st->usable[i] = false;
            res->nodes[i].reachable = view->answered[i];
            strlcpy(res->nodes[i].error, HILO_FENCED_WHY, sizeof(res->nodes[i].error));
            hilo_agent_note(
                res,
                "node \"%s\" is fenced: its register went backwards; it gets no windows "
                "and does not count in quorums",
                st->cfg->nodes[i].name);
        }
    }
}

/* The pass's one-line summary, before what it noted on the way. */
static void summarize(PassResult *res, const HiloClusterView *view, int nnodes)
{
    StringInfoData summary;
    initStringInfo(&summary);
    appendStringInfo(&summary,
                     "%d of %d nodes answered; installed " INT64_FORMAT
                     " windows; created " INT64_FORMAT " sequences",
                     view->reachable, nnodes, res->windows_claimed, res->sequences_carried);
    if (res->settings_carried > 0)
        appendStringInfo(&summary, "; carried settings to " INT64_FORMAT " sequence copies",
                         res->settings_carried);
    if (res->message.len > 0)
        appendStringInfo(&summary, "; %s", res->message.data);
    resetStringInfo(&res->message);
    appendStringInfoString(&res->message, summary.data);
}

void hilo_agent_pass(PassResult *res)
{
    PassState st;
    memset(&st, 0, sizeof(st));
    st.cfg = (HiloConfig *)palloc(sizeof(HiloConfig));
    hilo_load_config(st.cfg);
    if (st.cfg->epoch == 0) {
        res->ok = true;
        res->has_majority = true; /* nothing to want one for */
        hilo_agent_note(res, "this node is not in a hilo cluster: nothing to do");
        return;
    }
    HiloClusterView view;
    for (int round = 0;; round++) {
        if (st.cfg->self < 0) {
            res->ok = true;
            res->has_majority = true;
            hilo_agent_note(
                res,
                "this node is not a member of hilo configuration epoch " INT64_FORMAT
                ": nothing to do%s",
                st.cfg->epoch,
                hilo_restore_id() != 0
                    ? " (it started from a backup or a recovery and is fenced until it is "
                      "removed and added again)"
                    : "");
            return;
        }
        st.peers = hilo_peers_for_config(st.cfg);
        hilo_look_at_cluster(st.cfg, st.peers, &view);
        if (view.newest_json == NULL || round >= 2)
            break;
        /* A newer configuration exists: install it here (and wherever it lags), start over. */
        (void)hilo_commit_config_on(st.peers, st.cfg->nnodes, view.newest_json);
        hilo_agent_note(res, "installed configuration epoch " INT64_FORMAT, view.newest_epoch);
        hilo_parse_config(view.newest_json, hilo_local_incarnation(), st.cfg);
    }
    record_nodes(res, st.cfg, &view);

    update_lagging(&st, &view);

    int majority = (int)hilo_majority_of(st.cfg->nnodes);
    if (view.reachable < majority) {
        res->has_majority = false;
        hilo_agent_note(res,
                        "no majority: %d of %d nodes answered, %d needed; claiming nothing (%s)",
                        view.reachable, st.cfg->nnodes, majority, view.errors);
        return;
    }
    res->has_majority = true;

    if (view.pending_stale) {
        char message[1024];
        bool finished = hilo_finish_pending_change(st.cfg, st.peers, message, sizeof(message));
        hilo_agent_note(res, "%s", message);
        if (finished) {
            res->ok = true;
            return; /* the next pass works under the new configuration */
        }
    }

    judge_nodes(&st, res, &view);
    st.sequences = hilo_agent_sequence_table();
    hilo_agent_read_sequences(&st);
    hilo_agent_carry_sequences(&st, res);
    hilo_agent_carry_settings(&st, res);
    supply_windows(&st, res);
    hilo_agent_map_windows(&st, res);
    share_watermarks(&st);

    /* A node fenced during the claims shows up in the watermarks now. */
    for (int i = 0; i < st.cfg->nnodes; i++)
        if (st.usable[i] && hilo_watermarks_fenced(&st.watermarks, &st.cfg->nodes[i])) {
            strlcpy(res->nodes[i].error,
                    "fenced: its register went backwards; remove it and add "
                    "it again",
                    sizeof(res->nodes[i].error));
            hilo_agent_note(res, "node \"%s\" was fenced: its register went backwards",
                            st.cfg->nodes[i].name);
        }
    res->ok = true;
    summarize(res, &view, st.cfg->nnodes);
}

static void pass_body(void *arg)
{
    hilo_agent_pass((PassResult *)arg);
}

static void pass_failed(void *arg)
{
    PassResult *res = (PassResult *)arg;
    ErrorData *edata = CopyErrorData();
    res->ok = false;
    hilo_agent_note(res, "error: %s", edata->message);
    FreeErrorData(edata);
}

/* Runs a pass; turns an error into the pass's outcome. Needs SPI. */
void hilo_agent_pass_guarded(PassResult *res)
{
    (void)hilo_run_in_subtransaction(pass_body, res, pass_failed);
}
