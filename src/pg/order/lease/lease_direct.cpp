/*
 * order/lease/lease_direct.cpp: a backend's own connection to the lease holder
 * of a 'cluster' sequence, and one statement over it that carries the
 * calls of one batch (lease_route.cpp queues and answers them).
 *
 * Each such connection is a backend on the holder: at most
 * hilo.forward_connections backends of this server keep one at a time
 * (a count in shared memory, the "share" below); the others hand their
 * calls to those (lease_route.cpp) or to the lease worker. It logs in as
 * the worker's connections do (the node's conninfo), whatever the caller's
 * role, and runs one of two fixed statements with bound parameters,
 * prepared once per connection: the holder neither parses nor plans a
 * call. One call goes as hilo._lease_forward_one() (a scalar, about what
 * SELECT 1 costs the holder); several as one hilo._lease_forward() with
 * arrays, one row per call, a failed one's with the error the holder
 * raised for it. A single call that the holder did not serve is asked
 * again the second way (lease_route.cpp), for its error if it has one:
 * the scalar has no room for it, and the way that is taken most stays as
 * cheap as it was.
 */
#include "lease_shared.h"

extern "C" {
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
}

/* This backend's connection to a holder, and its share of the count. */
static pg_atomic_uint32 *connections = NULL;
static HiloPeer *direct_peer = NULL;
static bool holds_connection = false;

static void connections_init(void)
{
    pg_atomic_init_u32(connections, 0);
}

static const HiloShmemPart connections_part = {
    "hilo_lease_direct",   sizeof(pg_atomic_uint32), NULL, 0,
    (void **)&connections, connections_init};

void hilo_lease_direct_shmem_init(void)
{
    hilo_shmem_add_part(&connections_part);
}

static void release_connection(int code, Datum arg)
{
    if (direct_peer != NULL)
        hilo_peer_close(direct_peer); /* the wait set goes with the process */
    if (holds_connection && connections != NULL)
        pg_atomic_fetch_sub_u32(connections, 1);
    holds_connection = false;
}

bool hilo_lease_direct_share(void)
{
    if (holds_connection)
        return true;
    if (connections == NULL || hilo_forward_connections <= 0)
        return false;
    if (pg_atomic_add_fetch_u32(connections, 1) > (uint32)hilo_forward_connections) {
        pg_atomic_fetch_sub_u32(connections, 1);
        return false;
    }
    holds_connection = true;
    static bool registered = false;
    if (!registered) {
        on_proc_exit(release_connection, 0);
        registered = true;
    }
    return true;
}

/*
 * The connection's own wait set, kept while it is set up and has the
 * statements prepared (made after the general loop of cluster/net/peers.cpp
 * left it so, dropped whenever the connection goes that way again): a call
 * then costs a send, a wait and a read, no set made and freed per wait.
 */
static WaitEventSet *fast_set = NULL;

static void drop_fast_set(void)
{
    if (fast_set != NULL)
        FreeWaitEventSet(fast_set);
    fast_set = NULL;
}

static void close_direct_peer(void)
{
    drop_fast_set();
    hilo_peer_close(direct_peer);
}

/* The peer for the route's holder, made again when the holder changes. */
static HiloPeer *peer_for_route(const HiloLeaseRouteCopy *route)
{
    if (direct_peer != NULL && ((uint32)direct_peer->node_id != route->holder ||
                                strcmp(direct_peer->conninfo, route->conninfo) != 0)) {
        close_direct_peer();
        pfree(direct_peer->conninfo);
        pfree(direct_peer);
        direct_peer = NULL;
    }
    if (direct_peer == NULL) {
        direct_peer = (HiloPeer *)MemoryContextAllocZero(TopMemoryContext, sizeof(HiloPeer));
        direct_peer->node_id = (int32)route->holder;
        direct_peer->conninfo = MemoryContextStrdup(TopMemoryContext, route->conninfo);
        direct_peer->state = HILO_PEER_CLOSED;
        /* What the holder's pg_stat_activity shows for it. */
        direct_peer->application_name = "hilo forward";
    }
    strlcpy(direct_peer->name, route->holder_name, sizeof(direct_peer->name));
    /* A call cut short (an error or a cancel while it waited) left its
     * query behind: start with a fresh connection. */
    if (direct_peer->state != HILO_PEER_IDLE && direct_peer->state != HILO_PEER_CLOSED)
        close_direct_peer();
    return direct_peer;
}

/* Prepared one after the other on a new connection. */
static const char *const prepare_sqls[] = {
    "PREPARE hilo_forward_one(integer, text, bigint, bigint, bigint, bigint) AS"
    " SELECT hilo._lease_forward_one($1, $2, $3, $4, $5, $6)",
    "PREPARE hilo_forward_many(integer, text[], bigint[], bigint[], bigint[], bigint[]) AS"
    " SELECT call_id, ok, first, sqlstate, message, detail, hint"
    " FROM hilo._lease_forward($1, $2, $3, $4, $5, $6)",
};
#define PREPARE_STEPS ((int)lengthof(prepare_sqls))
static const char one_statement[] = "hilo_forward_one";

typedef struct DirectCall {
    const char *statement;
    const char *values[6];
    int n; /* calls in the statement */
    const uint64 *ids;
    bool *ok;
    int64 *first;
    HiloRemoteError *errors;
    int prepared_steps;
    bool preparing, sent, ended;
} DirectCall;

/*
 * Reads the holder's answer into c->ok, c->first and c->errors: one value
 * (NULL: not served) for the scalar; else one row per call in their
 * order, each with its call id (a row count or an id that does not match
 * serves none of them), a failed call's with its error.
 */
static void read_answers(const PGresult *r, DirectCall *c)
{
    if (r == NULL || PQresultStatus(r) != PGRES_TUPLES_OK)
        return;
    if (c->statement == one_statement) {
        if (PQnfields(r) != 1)
            return;
        if (PQntuples(r) == 1 && !PQgetisnull(r, 0, 0)) {
            c->ok[0] = true;
            c->first[0] = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        }
        return;
    }
    if (PQntuples(r) != c->n || PQnfields(r) != 7)
        return;
    for (int i = 0; i < c->n; i++)
        if (PQgetisnull(r, i, 0) || (uint64)strtoll(PQgetvalue(r, i, 0), NULL, 10) != c->ids[i])
            return;
    for (int i = 0; i < c->n; i++) {
        c->ok[i] = !PQgetisnull(r, i, 1) && PQgetvalue(r, i, 1)[0] == 't' && !PQgetisnull(r, i, 2);
        if (c->ok[i])
            c->first[i] = strtoll(PQgetvalue(r, i, 2), NULL, 10);
        else if (!PQgetisnull(r, i, 3))
            hilo_remote_error_from_fields(&c->errors[i], PQgetvalue(r, i, 3), PQgetvalue(r, i, 4),
                                          PQgetvalue(r, i, 5), PQgetvalue(r, i, 6));
    }
}

static void direct_ready(HiloPeer *peer, void *arg)
{
    DirectCall *c = (DirectCall *)arg;
    if (c->sent || c->preparing)
        return;
    bool queued;
    if (!peer->prepared) {
        c->preparing = true;
        queued = hilo_peer_send(peer, prepare_sqls[c->prepared_steps], 0, NULL, NULL);
    } else {
        c->sent = true;
        queued = hilo_peer_send_prepared(peer, c->statement, 6, c->values);
    }
    if (!queued)
        c->ended = true;
}

static bool direct_done(HiloPeer *peer, PGresult *result, const char *error, void *arg)
{
    DirectCall *c = (DirectCall *)arg;
    if (c->preparing) {
        c->preparing = false;
        if (result == NULL)
            c->ended = true;
        else if (++c->prepared_steps == PREPARE_STEPS)
            peer->prepared = true; /* ready() sends the call next */
        return false;
    }
    if (!c->sent)
        return false; /* an earlier call's result */
    c->ended = true;
    read_answers(result, c);
    return false;
}

static void direct_unreachable(HiloPeer *peer, const char *error, void *arg)
{
    ((DirectCall *)arg)->ended = true;
}

static bool direct_finished(void *arg)
{
    return ((DirectCall *)arg)->ended;
}

static const HiloPeerCallbacks direct_callbacks = {direct_ready, direct_done, direct_unreachable,
                                                   direct_finished, NULL};

/*
 * The call over a ready connection with its wait set: true when the holder
 * answered (c->ok says which calls it served), false when the connection
 * failed or the answer did not come within `wait_ms`. While it waits the
 * peer is BUSY, so that a call cut short by an error leaves it to be
 * closed by the next.
 */
static bool fast_call(HiloPeer *peer, DirectCall *c, int wait_ms)
{
    PGconn *conn = peer->conn;
    peer->state = HILO_PEER_BUSY;
    if (!PQsendQueryPrepared(conn, c->statement, 6, c->values, NULL, NULL, 0) || PQflush(conn) != 0)
        return false;
    TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), wait_ms);
    bool latch_pending = false, answered = false;
    PGresult *last = NULL;
    for (;;) {
        if (!PQconsumeInput(conn))
            break;
        bool ended = false;
        while (!PQisBusy(conn)) {
            PGresult *r = PQgetResult(conn);
            if (r == NULL) {
                ended = true; /* ReadyForQuery: the holder's transaction ended */
                break;
            }
            if (last != NULL)
                PQclear(last);
            last = r;
        }
        if (ended) {
            peer->state = HILO_PEER_IDLE;
            answered = true;
            read_answers(last, c);
            break;
        }
        long secs;
        int usecs;
        TimestampTz now = GetCurrentTimestamp();
        if (now >= deadline)
            break;
        TimestampDifference(now, deadline, &secs, &usecs);
        WaitEvent event;
        int n = WaitEventSetWait(fast_set, secs * 1000 + (usecs + 999) / 1000, &event, 1,
                                 PG_WAIT_EXTENSION);
        if (n > 0 && (event.events & WL_LATCH_SET)) {
            ResetLatch(MyLatch);
            latch_pending = true;
            if (InterruptPending && last != NULL) {
                PQclear(last); /* an error may leave here: nothing kept */
                last = NULL;
            }
            CHECK_FOR_INTERRUPTS();
        }
    }
    if (last != NULL)
        PQclear(last);
    if (latch_pending)
        SetLatch(MyLatch); /* whoever set it may count on that wake-up */
    return answered;
}

/* A text[] or bigint[] literal of `n` elements. */
static char *seq_array(const char *seq, int n)
{
    StringInfoData s;
    initStringInfo(&s);
    appendStringInfoChar(&s, '{');
    for (int i = 0; i < n; i++) {
        appendStringInfoString(&s, i > 0 ? ",\"" : "\"");
        for (const char *p = seq; *p; p++) {
            if (*p == '"' || *p == '\\')
                appendStringInfoChar(&s, '\\');
            appendStringInfoChar(&s, *p);
        }
        appendStringInfoChar(&s, '"');
    }
    appendStringInfoChar(&s, '}');
    return s.data;
}

static char *int_array(const uint64 *values, int n)
{
    StringInfoData s;
    initStringInfo(&s);
    appendStringInfoChar(&s, '{');
    for (int i = 0; i < n; i++)
        appendStringInfo(&s, i > 0 ? "," INT64_FORMAT : INT64_FORMAT, (int64)values[i]);
    appendStringInfoChar(&s, '}');
    return s.data;
}

bool hilo_lease_direct_call(const HiloLeaseRouteCopy *route, const char *seq, int n,
                            const uint64 *ids, const uint64 *counts, bool rows, bool *ok,
                            int64 *first, HiloRemoteError *errors)
{
    Assert(holds_connection && n >= 1);
    HiloPeer *peer = peer_for_route(route);
    DirectCall c;
    memset(&c, 0, sizeof(c));
    c.n = n;
    c.ids = ids;
    c.ok = ok;
    c.first = first;
    c.errors = errors;
    for (int i = 0; i < n; i++) {
        ok[i] = false;
        errors[i].sqlerrcode = 0;
    }
    char from[16], id[24], count[24], floor[24], max_value[24];
    snprintf(from, sizeof(from), "%u", route->self);
    c.values[0] = from;
    snprintf(floor, sizeof(floor), INT64_FORMAT, route->floor);
    snprintf(max_value, sizeof(max_value), INT64_FORMAT, route->max_value);
    if (n == 1 && !rows) {
        snprintf(id, sizeof(id), INT64_FORMAT, (int64)ids[0]);
        snprintf(count, sizeof(count), UINT64_FORMAT, counts[0]);
        c.statement = one_statement;
        c.values[1] = seq;
        c.values[2] = id;
        c.values[3] = count;
        c.values[4] = floor;
        c.values[5] = max_value;
    } else {
        c.statement = "hilo_forward_many";
        c.values[1] = seq_array(seq, n);
        c.values[2] = int_array(ids, n);
        c.values[3] = int_array(counts, n);
        uint64 *floors = (uint64 *)palloc(sizeof(uint64) * n);
        uint64 *maxes = (uint64 *)palloc(sizeof(uint64) * n);
        for (int i = 0; i < n; i++) {
            floors[i] = (uint64)route->floor;
            maxes[i] = (uint64)route->max_value;
        }
        c.values[4] = int_array(floors, n);
        c.values[5] = int_array(maxes, n);
        pfree(floors);
        pfree(maxes);
    }
    /* As long as the worker's forwarder waits for an answer before it
     * looks for the holder again (core/lease.cpp: twice a request's time). */
    int wait_ms = hilo_lease_direct_wait_ms();
    bool answered;
    if (fast_set != NULL && peer->state == HILO_PEER_IDLE && peer->prepared) {
        answered = fast_call(peer, &c, wait_ms);
        if (!answered)
            close_direct_peer();
    } else {
        drop_fast_set();
        hilo_peers_run(&peer, 1, &direct_callbacks, &c,
                       TimestampTzPlusMilliseconds(GetCurrentTimestamp(), wait_ms));
        answered = c.sent && c.ended && peer->state == HILO_PEER_IDLE;
        if (peer->state != HILO_PEER_IDLE) {
            close_direct_peer();
        } else if (peer->prepared) {
            fast_set = hilo_lasting_wait_set(3);
            AddWaitEventToSet(fast_set, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
            AddWaitEventToSet(fast_set, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
            AddWaitEventToSet(fast_set, WL_SOCKET_READABLE, PQsocket(peer->conn), NULL, NULL);
        }
    }
    if (c.statement != one_statement)
        for (int k = 1; k < 6; k++)
            pfree((void *)c.values[k]);
    return answered;
}

int hilo_lease_direct_wait_ms(void)
{
    return 2 * Max(hilo_lease_time_ms / 4, 100);
}
