/*
 * cluster/lease_route.cpp: a backend's own path to the lease holder of a
 * 'cluster' sequence (seed 001's two hops: caller -> holder).
 *
 * The way through the lease worker (lease_slots.cpp) costs a forwarded call
 * four process wake-ups: this backend, its worker, the holder's backend,
 * and back. So the worker publishes here, per sequence, the holder that
 * last served one of its forwarded calls (a route: cleared when its lease
 * starts over, when this node serves itself, and at the worker's start and
 * exit), and a backend that finds one calls hilo._lease_forward_one() on
 * that holder over a connection of its own, kept across calls (the call
 * prepared once per connection): one round trip, served there from the
 * holder's pool in shared memory.
 *
 * Safe as the worker's forwarding is: a route is only a hint. The holder
 * serves a forwarded call only while it holds the lease (else it answers
 * "not served"), so whatever it hands out lies above every ID handed out
 * before the call began. A route is used only under the catalog
 * incarnation and the settings its lease began under. A call the holder
 * does not serve in time, or refuses, or that cannot reach it, clears the
 * route and goes the worker's way (its IDs, if the holder served them
 * after all, are a gap). A direct call's id has its top bit set, which
 * the worker's call ids never have, so the holder never takes one's
 * answer for the other's.
 *
 * Each such connection is a backend on the holder: at most
 * hilo.forward_connections backends of this server keep one at a time
 * (a count in shared memory); the others use the worker. It logs in as the
 * worker's connections do (the node's conninfo), whatever the caller's
 * role, and runs one fixed statement with bound parameters: the caller
 * gets no more than its own hilo_nextval() would through the worker.
 */
#include "lease.h"

extern "C" {
#include "miscadmin.h"
#include "port/atomics.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
}

#define HILO_LEASE_ROUTES 64
#define HILO_ROUTE_CONNINFO_BYTES 1024

typedef struct LeaseRoute {
    slock_t mutex;
    Oid dboid; /* InvalidOid: unused */
    char seq[HILO_MAX_NAME_BYTES + 1];
    uint64 catalog;
    int64 floor, max_value;
    uint32 self, holder;
    char holder_name[HILO_NODE_NAME_BYTES];
    char conninfo[HILO_ROUTE_CONNINFO_BYTES];
    uint64 uses; /* direct calls served (the worker counts them as use) */
} LeaseRoute;

typedef struct LeaseRoutes {
    pg_atomic_uint32 connections; /* backends that keep a connection to a holder */
    LeaseRoute routes[HILO_LEASE_ROUTES];
} LeaseRoutes;

static LeaseRoutes *shared = NULL;

static Size routes_size(void)
{
    return sizeof(LeaseRoutes);
}

static void routes_attach(void *base, bool create)
{
    shared = (LeaseRoutes *)base;
    if (!create)
        return;
    pg_atomic_init_u32(&shared->connections, 0);
    for (int i = 0; i < HILO_LEASE_ROUTES; i++) {
        SpinLockInit(&shared->routes[i].mutex);
        shared->routes[i].dboid = InvalidOid;
    }
}

static const HiloShmemPart routes_part = {"hilo_lease_routes", routes_size, 0, routes_attach};

void hilo_lease_route_shmem_init(void)
{
    hilo_shmem_add_part(&routes_part);
}

/* ---- The worker's side (one worker per server writes the routes) ---- */

static LeaseRoute *route_of(const char *seq, bool create)
{
    LeaseRoute *free_route = NULL;
    for (int i = 0; i < HILO_LEASE_ROUTES; i++) {
        LeaseRoute *r = &shared->routes[i];
        /* Only the worker writes dboid and seq: it reads them without the lock. */
        if (r->dboid == MyDatabaseId && strcmp(r->seq, seq) == 0)
            return r;
        if (free_route == NULL && r->dboid == InvalidOid)
            free_route = r;
    }
    return create ? free_route : NULL;
}

void hilo_lease_route_set(const char *seq, uint64 catalog, int64 floor, int64 max_value,
                          uint32 self, uint32 holder, const char *holder_name, const char *conninfo)
{
    if (shared == NULL || strlen(conninfo) >= HILO_ROUTE_CONNINFO_BYTES)
        return; /* no route: the worker's way */
    LeaseRoute *r = route_of(seq, true);
    if (r == NULL)
        return;
    SpinLockAcquire(&r->mutex);
    if (r->dboid != MyDatabaseId || r->holder != holder || r->catalog != catalog ||
        r->floor != floor || r->max_value != max_value || strcmp(r->conninfo, conninfo) != 0) {
        r->dboid = MyDatabaseId;
        strlcpy(r->seq, seq, sizeof(r->seq));
        r->catalog = catalog;
        r->floor = floor;
        r->max_value = max_value;
        r->self = self;
        r->holder = holder;
        strlcpy(r->holder_name, holder_name, sizeof(r->holder_name));
        strlcpy(r->conninfo, conninfo, sizeof(r->conninfo));
    }
    SpinLockRelease(&r->mutex);
}

uint64 hilo_lease_route_uses(const char *seq)
{
    LeaseRoute *r = shared != NULL ? route_of(seq, false) : NULL;
    if (r == NULL)
        return 0;
    SpinLockAcquire(&r->mutex);
    uint64 uses = r->uses;
    SpinLockRelease(&r->mutex);
    return uses;
}

static void clear_route(LeaseRoute *r)
{
    SpinLockAcquire(&r->mutex);
    r->dboid = InvalidOid;
    r->seq[0] = '\0';
    r->holder = 0;
    SpinLockRelease(&r->mutex);
}

void hilo_lease_route_clear(const char *seq)
{
    LeaseRoute *r = shared != NULL ? route_of(seq, false) : NULL;
    if (r != NULL)
        clear_route(r);
}

void hilo_lease_route_clear_all(void)
{
    if (shared == NULL)
        return;
    for (int i = 0; i < HILO_LEASE_ROUTES; i++)
        clear_route(&shared->routes[i]);
}

/* ---- The backends' side ---- */

typedef struct RouteCopy {
    uint32 self, holder;
    char holder_name[HILO_NODE_NAME_BYTES];
    char conninfo[HILO_ROUTE_CONNINFO_BYTES];
} RouteCopy;

/* The route for `seq` under its settings and catalog, copied; false if none. */
static bool find_route(const HiloSequence *seq, RouteCopy *out, LeaseRoute **where)
{
    for (int i = 0; i < HILO_LEASE_ROUTES; i++) {
        LeaseRoute *r = &shared->routes[i];
        if (r->dboid != MyDatabaseId) /* a racy look; checked again under the lock */
            continue;
        bool found = false;
        SpinLockAcquire(&r->mutex);
        if (r->dboid == MyDatabaseId && strcmp(r->seq, seq->name) == 0) {
            found = r->holder != 0 && r->catalog == seq->incarnation &&
                    r->floor == seq->start_value - 1 && r->max_value == seq->max_value;
            if (found) {
                out->self = r->self;
                out->holder = r->holder;
                memcpy(out->holder_name, r->holder_name, sizeof(out->holder_name));
                memcpy(out->conninfo, r->conninfo, sizeof(out->conninfo));
            }
        }
        SpinLockRelease(&r->mutex);
        if (found) {
            *where = r;
            return true;
        }
    }
    return false;
}

/* After a failed direct call: the route is no more (if it still names that
 * holder); the worker publishes one again once a forward succeeds. */
static void forget_route(LeaseRoute *r, const char *seq, uint32 holder)
{
    SpinLockAcquire(&r->mutex);
    if (r->dboid == MyDatabaseId && strcmp(r->seq, seq) == 0 && r->holder == holder)
        r->holder = 0;
    SpinLockRelease(&r->mutex);
}

static void count_use(LeaseRoute *r, const char *seq)
{
    SpinLockAcquire(&r->mutex);
    if (r->dboid == MyDatabaseId && strcmp(r->seq, seq) == 0)
        r->uses++;
    SpinLockRelease(&r->mutex);
}

/* This backend's connection to a holder, and its share of the count. */
static HiloPeer *direct_peer = NULL;
static bool holds_connection = false;
static uint64 direct_calls = 0;

static void release_connection(int code, Datum arg)
{
    if (direct_peer != NULL)
        hilo_peer_close(direct_peer); /* the wait set goes with the process */
    if (holds_connection && shared != NULL)
        pg_atomic_fetch_sub_u32(&shared->connections, 1);
    holds_connection = false;
}

/* Takes this backend's share of hilo.forward_connections; false if all are taken. */
static bool take_connection_share(void)
{
    if (holds_connection)
        return true;
    if (pg_atomic_add_fetch_u32(&shared->connections, 1) > (uint32)hilo_forward_connections) {
        pg_atomic_fetch_sub_u32(&shared->connections, 1);
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
 * The connection's own wait set, kept while it is set up and has the call
 * prepared (made after the general loop of cluster/peers.cpp left it so,
 * dropped whenever the connection goes that way again): a call then costs
 * a send, a wait and a read, no set made and freed per wait.
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
static HiloPeer *peer_for_route(const RouteCopy *route)
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

typedef struct DirectCall {
    const char *values[4];
    bool preparing, sent, ended, ok;
    int64 first;
} DirectCall;

/* Prepared once per connection: the holder neither parses nor plans a call. */
static const char *prepare_sql =
    "PREPARE hilo_forward_one(integer, text, bigint, bigint) AS"
    " SELECT hilo._lease_forward_one($1, $2, $3, $4)";

static void direct_ready(HiloPeer *peer, void *arg)
{
    DirectCall *c = (DirectCall *)arg;
    if (c->sent || c->preparing)
        return;
    bool queued;
    if (!peer->prepared) {
        c->preparing = true;
        queued = hilo_peer_send(peer, prepare_sql, 0, NULL, NULL);
    } else {
        c->sent = true;
        queued = hilo_peer_send_prepared(peer, "hilo_forward_one", 4, c->values);
    }
    if (!queued)
        c->ended = true;
}

static bool direct_done(HiloPeer *peer, PGresult *result, const char *error, void *arg)
{
    DirectCall *c = (DirectCall *)arg;
    if (c->preparing) {
        c->preparing = false;
        if (result != NULL)
            peer->prepared = true; /* ready() sends the call next */
        else
            c->ended = true;
        return false;
    }
    if (!c->sent)
        return false; /* an earlier call's result */
    c->ended = true;
    if (result != NULL && PQresultStatus(result) == PGRES_TUPLES_OK && PQntuples(result) == 1 &&
        !PQgetisnull(result, 0, 0)) {
        c->ok = true;
        c->first = strtoll(PQgetvalue(result, 0, 0), NULL, 10);
    }
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
 * answered (c->ok says whether it served), false when the connection
 * failed or the answer did not come within `wait_ms`. While it waits the
 * peer is BUSY, so that a call cut short by an error leaves it to be
 * closed by the next.
 */
static bool fast_call(HiloPeer *peer, DirectCall *c, int wait_ms)
{
    PGconn *conn = peer->conn;
    peer->state = HILO_PEER_BUSY;
    if (!PQsendQueryPrepared(conn, "hilo_forward_one", 4, c->values, NULL, NULL, 0) ||
        PQflush(conn) != 0)
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
            if (last != NULL && PQresultStatus(last) == PGRES_TUPLES_OK && PQntuples(last) == 1 &&
                !PQgetisnull(last, 0, 0)) {
                c->ok = true;
                c->first = strtoll(PQgetvalue(last, 0, 0), NULL, 10);
            }
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

bool hilo_lease_direct_take(const HiloSequence *seq, uint64 n, int64 *first)
{
    RouteCopy route;
    LeaseRoute *where;
    if (shared == NULL || hilo_forward_connections <= 0 || !find_route(seq, &route, &where) ||
        !take_connection_share())
        return false;
    HiloPeer *peer = peer_for_route(&route);

    DirectCall c;
    memset(&c, 0, sizeof(c));
    uint64 call_id = ((uint64)1 << 63) | ((uint64)(MyProcPid & 0x7fffffff) << 32) |
                     (++direct_calls & 0xffffffffu);
    char from[16], id[24], count[24];
    snprintf(from, sizeof(from), "%u", route.self);
    snprintf(id, sizeof(id), INT64_FORMAT, (int64)call_id);
    snprintf(count, sizeof(count), UINT64_FORMAT, n);
    c.values[0] = from;
    c.values[1] = seq->name;
    c.values[2] = id;
    c.values[3] = count;
    /* As long as the worker's forwarder waits for an answer before it
     * looks for the holder again (core/lease.cpp: twice a request's time). */
    int wait_ms = 2 * Max(hilo_lease_time_ms / 4, 100);
    if (fast_set != NULL && peer->state == HILO_PEER_IDLE && peer->prepared) {
        if (!fast_call(peer, &c, wait_ms))
            close_direct_peer();
    } else {
        drop_fast_set();
        hilo_peers_run(&peer, 1, &direct_callbacks, &c,
                       TimestampTzPlusMilliseconds(GetCurrentTimestamp(), wait_ms));
        if (peer->state != HILO_PEER_IDLE) {
            close_direct_peer();
        } else if (peer->prepared) {
            fast_set = CreateWaitEventSet(TopMemoryContext, 3);
            AddWaitEventToSet(fast_set, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
            AddWaitEventToSet(fast_set, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
            AddWaitEventToSet(fast_set, WL_SOCKET_READABLE, PQsocket(peer->conn), NULL, NULL);
        }
    }
    if (!c.ok) {
        forget_route(where, seq->name, route.holder);
        return false;
    }
    count_use(where, seq->name);
    *first = c.first;
    return true;
}
