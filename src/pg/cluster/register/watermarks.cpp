/*
 * cluster/register/watermarks.cpp: what proposers remember about nodes (fencing):
 * per node incarnation, the highest write count seen and whether it is
 * fenced, from hilo.peer_watermarks and from replies. The agent, the window
 * claims, membership changes and hilo.nodes read them; hilo_judge_nodes()
 * judges what each node says of itself by them.
 */
#include "register.h"

extern "C" {
#include "executor/spi.h"
#include "utils/snapmgr.h"
}

/*
 * Keeps only what concerns the incarnations `cfg` lists: a count seen from
 * another incarnation of a node says nothing about the current one.
 */
void hilo_watermarks_merge(HiloWatermarkSet *set, const HiloWatermark *w, const HiloConfig *cfg)
{
    int member = hilo_config_index_of(cfg, (int32)w->node);
    if (member < 0 || (uint64)cfg->nodes[member].incarnation != w->incarnation)
        return;
    for (int i = 0; i < set->count; i++) {
        HiloWatermark *e = &set->entries[i];
        if (e->node != w->node)
            continue;
        if (e->incarnation != w->incarnation) {
            *e = *w;
            return;
        }
        e->highest_write_count = Max(e->highest_write_count, w->highest_write_count);
        e->fenced = e->fenced || w->fenced;
        return;
    }
    if (set->count < HILO_MAX_NODES)
        set->entries[set->count++] = *w;
}

bool hilo_watermarks_fenced(const HiloWatermarkSet *set, const HiloNode *node)
{
    for (int i = 0; i < set->count; i++)
        if (set->entries[i].node == (uint32)node->id &&
            set->entries[i].incarnation == (uint64)node->incarnation)
            return set->entries[i].fenced;
    return false;
}

/*
 * Read as of now, not as of the transaction's snapshot: a claim a caller's
 * backend leads (an ordered sequence, no claim server) runs in the
 * caller's transaction, whose REPEATABLE READ or SERIALIZABLE snapshot may
 * predate a fence the agent recorded since (TAP 302).
 */
void hilo_watermarks_load(HiloWatermarkSet *set, const HiloConfig *cfg)
{
    static const char *sql =
        "SELECT node_id, incarnation, highest_write_count, fenced FROM hilo.peer_watermarks";
    set->count = 0;
    hilo_spi_exec_snapshot(sql, 0, NULL, NULL, NULL, GetLatestSnapshot(), true, 0);
    for (uint64 i = 0; i < SPI_processed && i < HILO_MAX_NODES; i++) {
        bool isnull;
        HiloWatermark w;
        w.node = (uint32)hilo_spi_int32(i, 1);
        w.incarnation = (uint64)hilo_spi_int64(i, 2);
        w.highest_write_count = (uint64)hilo_spi_int64(i, 3);
        w.fenced =
            DatumGetBool(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 4, &isnull));
        hilo_watermarks_merge(set, &w, cfg);
    }
}

/* Merges into `set` (this node's hilo.peer_watermarks first) what the
 * proposers of every node of `cfg` that answers learned. */
void hilo_watermarks_gather(HiloWatermarkSet *set, const HiloConfig *cfg, HiloPeer **peers)
{
    static const char *sql =
        "SELECT node_id, incarnation, highest_write_count, fenced"
        "  FROM hilo._watermarks()";
    HiloBroadcast b;
    hilo_watermarks_load(set, cfg);
    hilo_broadcast_query(peers, cfg->nnodes, &b, sql, 0, NULL);
    for (int i = 0; i < cfg->nnodes; i++) {
        PGresult *r = b.results[i];
        for (int row = 0; r != NULL && row < PQntuples(r); row++) {
            HiloWatermark w;
            w.node = (uint32)hilo_result_int64(r, row, 0);
            w.incarnation = (uint64)hilo_result_int64(r, row, 1);
            w.highest_write_count = (uint64)hilo_result_int64(r, row, 2);
            w.fenced = strcmp(PQgetvalue(r, row, 3), "t") == 0;
            hilo_watermarks_merge(set, &w, cfg);
        }
    }
    hilo_broadcast_free(&b, cfg->nnodes);
}

/*
 * Asks every node of `cfg` for its stamp and installed epoch and judges the
 * stamp with the core's rule (JudgeStamp) against `set`, which learns from
 * it: a count that went backwards fences the node. Fills judged[i] for
 * every node; `why` is set, and the node must count in no quorum, when it
 * answers as another incarnation than `cfg` lists or is fenced.
 */
void hilo_judge_nodes(const HiloConfig *cfg, HiloPeer **peers, HiloWatermarkSet *set,
                      HiloJudgedNode *judged)
{
    static const char *sql = "SELECT incarnation, write_count, epoch FROM hilo._node_identity()";
    int n = cfg->nnodes;
    memset(judged, 0, sizeof(HiloJudgedNode) * n);
    HiloBroadcast b;
    hilo_broadcast_query(peers, n, &b, sql, 0, NULL);
    for (int i = 0; i < n; i++) {
        PGresult *r = b.results[i];
        if (r == NULL || PQntuples(r) != 1)
            continue;
        const HiloNode *node = &cfg->nodes[i];
        HiloMember member = {(uint32)node->id, (uint64)node->incarnation};
        HiloNodeStamp stamp = {(uint64)hilo_result_int64(r, 0, 0),
                               (uint64)hilo_result_int64(r, 0, 1)};
        judged[i].answered = true;
        judged[i].epoch = hilo_result_int64(r, 0, 2);
        uint64 known = 0;
        for (int k = 0; k < set->count; k++)
            if (set->entries[k].node == member.node &&
                set->entries[k].incarnation == member.incarnation)
                known = set->entries[k].highest_write_count;
        HiloWatermark w = {member.node, member.incarnation, stamp.write_count, false};
        switch (hilo_judge_stamp(member, known, stamp)) {
            case HILO_TRUSTED:
                hilo_watermarks_merge(set, &w, cfg);
                break;
            case HILO_WENT_BACKWARDS:
                w.highest_write_count = known;
                w.fenced = true;
                hilo_watermarks_merge(set, &w, cfg);
                break;
            case HILO_WRONG_INCARNATION:
                judged[i].distrusted = true;
                judged[i].why = psprintf("answers as incarnation " INT64_FORMAT
                                         ", the configuration lists " INT64_FORMAT
                                         ": restored or re-created? remove it and add it again",
                                         (int64)stamp.incarnation, node->incarnation);
                break;
        }
        if (judged[i].why == NULL && hilo_watermarks_fenced(set, node)) {
            judged[i].fenced = true;
            judged[i].why = pstrdup(HILO_FENCED_WHY);
        }
    }
    hilo_broadcast_free(&b, n);
}
