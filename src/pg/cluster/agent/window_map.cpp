/*
 * cluster/agent/window_map.cpp: the window map, so that hilo_node_of answers on
 * any node which node issued an ID, with no lookup service.
 *
 * Every node's hilo.windows records every window it ever held (used-up
 * windows stay). Each agent pass reads them from every usable node and
 * writes them, tagged with the node's id, into hilo.window_map on every
 * usable node (rows it already has are kept). Sequences with node_bits are
 * left out: their IDs carry the node id in their bits.
 *
 * Cost: each pass moves every window of every node (a window is a row of
 * three values, and holds window_size IDs; a node that used 10^12 IDs in
 * windows of 10^6 has 10^6 rows). See docs/multi-node.md.
 */
#include "agent_shared.h"

extern "C" {
#include "utils/builtins.h"
}

void hilo_agent_map_windows(PassState *st, PassResult *res)
{
    static const char *read_sql = "SELECT name, first_id, last_id FROM hilo._node_windows()";
    static const char *write_sql =
        "SELECT hilo._map_windows($1::text[], $2::bigint[], $3::bigint[], $4::int[])";
    int n = st->cfg->nnodes;
    bool *skip = (bool *)palloc(sizeof(bool) * Max(n, 1));
    for (int i = 0; i < n; i++)
        skip[i] = !st->usable[i];

    HiloBroadcast b;
    hilo_broadcast_query_skip(st->peers, n, &b, read_sql, 0, NULL, skip);
    int total = 0;
    for (int i = 0; i < n; i++)
        if (!skip[i] && b.results[i] != NULL)
            total += PQntuples(b.results[i]);
    if (total == 0) {
        hilo_broadcast_free(&b, n);
        return;
    }
    const char **names = (const char **)palloc(sizeof(char *) * total);
    int64 *firsts = (int64 *)palloc(sizeof(int64) * total);
    int64 *lasts = (int64 *)palloc(sizeof(int64) * total);
    int32 *nodes = (int32 *)palloc(sizeof(int32) * total);
    int k = 0;
    for (int i = 0; i < n; i++) {
        PGresult *r = skip[i] ? NULL : b.results[i];
        for (int row = 0; r != NULL && row < PQntuples(r); row++, k++) {
            names[k] = pstrdup(PQgetvalue(r, row, 0));
            firsts[k] = pg_strtoint64(PQgetvalue(r, row, 1));
            lasts[k] = pg_strtoint64(PQgetvalue(r, row, 2));
            nodes[k] = st->cfg->nodes[i].id;
        }
    }
    hilo_broadcast_free(&b, n);

    const char *values[4] = {hilo_text_array(names, total), hilo_int64_array(firsts, total),
                             hilo_int64_array(lasts, total), hilo_int32_array(nodes, total)};
    hilo_agent_write_all(st, res, skip, write_sql, 4, values, "window map not written");
}
