/*
 * cluster/net/broadcast.cpp: one query to many peers at once, over the event
 * loop of cluster/net/peers.cpp, and the text form of array parameters.
 */
#include "net.h"

extern "C" {
#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/fd.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
}

/* ---- Broadcast: one query to many peers ---- */

typedef struct BroadcastRun {
    HiloBroadcast *b;
    HiloPeer **peers;
    int npeers;
    bool *sent;
    bool *finished;
} BroadcastRun;

static int peer_index(BroadcastRun *run, HiloPeer *peer)
{
    for (int i = 0; i < run->npeers; i++)
        if (run->peers[i] == peer)
            return i;
    return -1;
}

static void broadcast_ready(HiloPeer *peer, void *arg)
{
    BroadcastRun *run = (BroadcastRun *)arg;
    int i = peer_index(run, peer);
    if (i < 0 || run->sent[i] || run->finished[i])
        return;
    HiloBroadcast *b = run->b;
    const char *const *values = b->values_per_peer ? b->values_per_peer[i] : b->values;
    run->sent[i] = true;
    if (!hilo_peer_send(peer, b->sql, b->nparams, b->types, values)) {
        b->errors[i] = pstrdup(peer->error);
        run->finished[i] = true;
    }
}

static bool broadcast_done(HiloPeer *peer, PGresult *result, const char *error, void *arg)
{
    BroadcastRun *run = (BroadcastRun *)arg;
    int i = peer_index(run, peer);
    if (i < 0 || run->finished[i])
        return false;
    run->finished[i] = true;
    if (result == NULL) {
        run->b->errors[i] = pstrdup(error);
        return false;
    }
    run->b->results[i] = result; /* the broadcast's caller clears it */
    return true;
}

static void broadcast_unreachable(HiloPeer *peer, const char *error, void *arg)
{
    BroadcastRun *run = (BroadcastRun *)arg;
    int i = peer_index(run, peer);
    if (i < 0 || run->finished[i])
        return;
    run->finished[i] = true;
    run->b->errors[i] = pstrdup(error);
}

static bool broadcast_finished(void *arg)
{
    BroadcastRun *run = (BroadcastRun *)arg;
    for (int i = 0; i < run->npeers; i++)
        if (!run->finished[i])
            return false;
    return true;
}

void hilo_broadcast(HiloPeer **peers, int npeers, HiloBroadcast *b, int timeout_ms)
{
    BroadcastRun run;
    run.b = b;
    run.peers = peers;
    run.npeers = npeers;
    run.sent = (bool *)palloc0(sizeof(bool) * Max(npeers, 1));
    run.finished = (bool *)palloc0(sizeof(bool) * Max(npeers, 1));
    b->results = (PGresult **)palloc0(sizeof(PGresult *) * Max(npeers, 1));
    b->errors = (char **)palloc0(sizeof(char *) * Max(npeers, 1));
    for (int i = 0; i < npeers; i++) {
        if (peers[i] == NULL || (b->skip != NULL && b->skip[i]))
            run.finished[i] = true;
    }
    HiloPeerCallbacks cb = {broadcast_ready, broadcast_done, broadcast_unreachable,
                            broadcast_finished, NULL};
    hilo_peers_run(peers, npeers, &cb, &run,
                   TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms));
    for (int i = 0; i < npeers; i++)
        if (!run.finished[i] && b->results[i] == NULL && b->errors[i] == NULL)
            b->errors[i] = psprintf("node \"%s\": no answer in time", peers[i]->name);
    pfree(run.sent);
    pfree(run.finished);
}

void hilo_broadcast_query(HiloPeer **peers, int npeers, HiloBroadcast *b, const char *sql,
                          int nparams, const char *const *values)
{
    hilo_broadcast_query_skip(peers, npeers, b, sql, nparams, values, NULL);
}

void hilo_broadcast_query_skip(HiloPeer **peers, int npeers, HiloBroadcast *b, const char *sql,
                               int nparams, const char *const *values, const bool *skip)
{
    memset(b, 0, sizeof(*b));
    b->sql = sql;
    b->nparams = nparams;
    b->values = values;
    b->skip = skip;
    hilo_broadcast(peers, npeers, b, hilo_claim_timeout_ms);
}

void hilo_broadcast_free(HiloBroadcast *b, int npeers)
{
    for (int i = 0; i < npeers; i++)
        if (b->results[i] != NULL) {
            PQclear(b->results[i]);
            b->results[i] = NULL;
        }
}

/* ---- Array parameters in text form ---- */

/* '{a,b,c}' of n items, item i written by append_item(buf, i). */
template <typename AppendItem>
static char *text_array_of(int n, AppendItem append_item)
{
    StringInfoData buf;
    initStringInfo(&buf);
    appendStringInfoChar(&buf, '{');
    for (int i = 0; i < n; i++) {
        if (i > 0)
            appendStringInfoChar(&buf, ',');
        append_item(&buf, i);
    }
    appendStringInfoChar(&buf, '}');
    return buf.data;
}

char *hilo_text_array(const char *const *items, int n)
{
    return text_array_of(n, [items](StringInfo buf, int i) {
        appendStringInfoChar(buf, '"');
        for (const char *c = items[i]; *c; c++) {
            if (*c == '"' || *c == '\\')
                appendStringInfoChar(buf, '\\');
            appendStringInfoChar(buf, *c);
        }
        appendStringInfoChar(buf, '"');
    });
}

char *hilo_int64_array(const int64 *items, int n)
{
    return text_array_of(
        n, [items](StringInfo buf, int i) { appendStringInfo(buf, INT64_FORMAT, items[i]); });
}

char *hilo_int32_array(const int32 *items, int n)
{
    return text_array_of(n,
                         [items](StringInfo buf, int i) { appendStringInfo(buf, "%d", items[i]); });
}

char *hilo_bool_array(const bool *items, int n)
{
    return text_array_of(
        n, [items](StringInfo buf, int i) { appendStringInfoChar(buf, items[i] ? 't' : 'f'); });
}

char *hilo_broadcast_errors(HiloBroadcast *b, int npeers)
{
    StringInfoData buf;
    initStringInfo(&buf);
    for (int i = 0; i < npeers; i++)
        if (b->errors[i] != NULL)
            appendStringInfo(&buf, "%s%s", buf.len ? "; " : "", b->errors[i]);
    return buf.data;
}

const char *hilo_result_text(PGresult *r, int row, int col)
{
    if (r == NULL || row >= PQntuples(r) || col >= PQnfields(r) || PQgetisnull(r, row, col))
        return NULL;
    return PQgetvalue(r, row, col);
}

int64 hilo_result_int64(PGresult *r, int row, int col)
{
    const char *v = hilo_result_text(r, row, col);
    return v ? pg_strtoint64(v) : 0;
}
