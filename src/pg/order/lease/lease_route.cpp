/*
 * order/lease/lease_route.cpp: a backend's own path to the lease holder of a
 * 'cluster' sequence (two hops: caller -> holder), and the
 * batches in which a node's backends share that path.
 *
 * The way through the lease worker (lease_slots.cpp) costs a forwarded call
 * four process wake-ups: this backend, its worker, the holder's backend,
 * and back. So the worker publishes here, per sequence, the holder that
 * last served one of its forwarded calls (a route: cleared when its lease
 * starts over, when this node serves itself, and at the worker's start and
 * exit), and backends that find one send their calls to that holder over
 * connections of their own (lease_direct.cpp): one round trip, served
 * there from the holder's pool in shared memory.
 *
 * Batches. A call on the holder costs it about what a SELECT 1 does, and
 * with many callers on a small machine that doubled cost is the limit. So
 * a route keeps a ring of tickets: a caller queues one, and a caller that
 * holds a connection (a "leader", at most hilo.forward_connections
 * backends) sends every ticket queued at that moment in one statement
 * (its own among them) and answers them, waking each caller by its latch.
 * A caller without a connection queues only while a batch is in flight;
 * when that batch ends, the last leader out sends what queued meanwhile
 * (a few times at most, then what is still queued goes the worker's way).
 * So every ticket queued has a leader that will send it or fail it, and
 * a ticket's call began before the statement that carries it was sent.
 *
 * Safe as the worker's forwarding is: a route is only a hint. The holder
 * serves a forwarded call only while it holds the lease (else it answers
 * "not served"), so whatever it hands out lies above every ID handed out
 * before the call began; the calls of one statement are served in ticket
 * order. A call that fails there (too few IDs left) comes back with the
 * holder's error, whole, to its caller, whose call fails with it at once
 * (a batch's errors reach its followers through the ring's shared copies;
 * should none be free, such a call goes the worker's way, which brings the
 * same error). A route is used only under the catalog creation and the
 * settings its lease began under; every change of a route starts a new
 * generation, and a batch carries only tickets of its leader's
 * generation (the others fail). A call the holder does not serve in time,
 * or refuses, or that cannot reach it, clears the route and goes the
 * worker's way (its IDs, if the holder served them after all, are a gap);
 * so does a caller whose ticket finds the ring full, or whose batch does
 * not come back in time, or whose leader failed or exited. A direct call's
 * id has its top bit set, which the worker's call ids never have, so the
 * holder never takes one's answer for the other's.
 *
 * Why one file of about 580 lines: the routes and their tickets are one
 * structure under one lock, and the steps of a batch (queue, claim, send,
 * answer, collect, give up on error or exit) each rely on what the others
 * guarantee; the ring's states are order/ticket_ring.h's (the same ring as
 * quorum_order.cpp's gates), the connection they use is lease_direct.cpp.
 */
#include "lease_shared.h"
#include "../ticket_ring.h"

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
#define HILO_ROUTE_RING 128
/* Batches the last leader out sends for others before it returns. */
#define HILO_ROUTE_RELEADS 8

typedef struct RouteRequest {
    uint64 generation; /* of the route it was queued under */
    uint64 n;
} RouteRequest;

typedef struct RouteAnswer {
    bool ok;
    int64 first;
} RouteAnswer;

typedef HiloTicketRing<RouteRequest, RouteAnswer, HILO_ROUTE_RING> RouteRing;

typedef struct LeaseRoute {
    slock_t mutex;
    Oid dboid; /* InvalidOid: unused */
    char seq[HILO_MAX_NAME_BYTES + 1];
    uint64 catalog;
    int64 floor, max_value;
    uint32 self, holder;
    char holder_name[HILO_NODE_NAME_BYTES];
    char conninfo[HILO_ROUTE_CONNINFO_BYTES];
    uint64 uses;       /* direct calls served (the worker counts them as use) */
    uint64 generation; /* moves on at every change of the fields above */
    int in_flight;     /* batches sent and not yet answered */
    RouteRing ring;
} LeaseRoute;

typedef struct LeaseRoutes {
    LeaseRoute routes[HILO_LEASE_ROUTES];
} LeaseRoutes;

static LeaseRoutes *shared = NULL;

static void routes_init(void)
{
    for (int i = 0; i < HILO_LEASE_ROUTES; i++) {
        SpinLockInit(&shared->routes[i].mutex);
        shared->routes[i].dboid = InvalidOid;
    }
}

static const HiloShmemPart routes_part = {"hilo_lease_routes", sizeof(LeaseRoutes), NULL, 0,
                                          (void **)&shared,    routes_init};

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
        r->generation++;
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
    r->generation++;
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

/* The route for `seq` under its settings and catalog, copied; false if none. */
static bool find_route(const HiloSequence *seq, HiloLeaseRouteCopy *out, LeaseRoute **where)
{
    for (int i = 0; i < HILO_LEASE_ROUTES; i++) {
        LeaseRoute *r = &shared->routes[i];
        if (r->dboid != MyDatabaseId) /* a racy look; checked again under the lock */
            continue;
        bool found = false;
        SpinLockAcquire(&r->mutex);
        if (r->dboid == MyDatabaseId && strcmp(r->seq, seq->name) == 0) {
            found = r->holder != 0 && r->catalog == seq->creation &&
                    r->floor == seq->start_value - 1 && r->max_value == seq->max_value;
            if (found) {
                out->self = r->self;
                out->holder = r->holder;
                out->generation = r->generation;
                out->floor = r->floor;
                out->max_value = r->max_value;
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
    if (r->dboid == MyDatabaseId && strcmp(r->seq, seq) == 0 && r->holder == holder) {
        r->holder = 0;
        r->generation++;
    }
    SpinLockRelease(&r->mutex);
}

/* The batch this backend sends (a backend leads one at a time). */
typedef struct Batch {
    LeaseRoute *route; /* NULL: none in flight */
    uint64 generation;
    uint64 own; /* this backend's own ticket (answered in the first batch) */
    int n;
    uint64 tickets[HILO_ROUTE_RING];
    uint64 ids[HILO_ROUTE_RING];
    uint64 counts[HILO_ROUTE_RING];
    bool ok[HILO_ROUTE_RING];
    int64 first[HILO_ROUTE_RING];
    /* The holder's error of each call that failed there (sqlerrcode 0:
     * none); HILO_ROUTE_RING of them, made when this backend first may
     * lead. */
    HiloRemoteError *errors;
} Batch;

static Batch batch;
static uint64 direct_calls = 0;

/* A new id for a direct call of this backend. */
static uint64 new_call_id(void)
{
    return ((uint64)1 << 63) | ((uint64)(MyProcPid & 0x7fffffff) << 32) |
           (++direct_calls & 0xffffffffu);
}

/* The ticket this backend waits for as a follower (route NULL: none). */
static LeaseRoute *waiting_route = NULL;
static uint64 waiting_ticket;

/* Latches to set once the route's lock is released. */
typedef struct Wakes {
    int n;
    Latch *latches[2 * HILO_ROUTE_RING];
} Wakes;

static void wake_all(const Wakes *w)
{
    for (int i = 0; i < w->n; i++)
        SetLatch(w->latches[i]);
}

static void add_wake(Wakes *w, Latch *latch)
{
    if (latch != NULL)
        w->latches[w->n++] = latch;
}

/* Puts every ticket queued on `r` into `b` (those of another generation
 * fail); the route's lock is held. */
static void claim_batch_locked(LeaseRoute *r, Batch *b, Wakes *w)
{
    b->n = 0;
    (void)r->ring.claim(
        [&](uint64 ticket, const RouteRequest &q, RouteAnswer *failed) {
            if (q.generation != b->generation) {
                failed->ok = false;
                return HILO_TICKET_FAIL;
            }
            b->tickets[b->n] = ticket;
            b->counts[b->n] = q.n;
            b->ids[b->n] = new_call_id();
            b->n++;
            return HILO_TICKET_TAKE;
        },
        [&](Latch *latch) { add_wake(w, latch); });
    if (b->n > 0)
        r->in_flight++;
}

/* Answers the tickets of `b` (frees `own`'s slot: its caller is this
 * backend), a failed call's with its error, and ends the batch; the
 * route's lock is held. */
static void answer_batch_locked(LeaseRoute *r, Batch *b, uint64 own, Wakes *w)
{
    int kept = -1;
    const HiloRemoteError *last_kept = NULL;
    for (int i = 0; i < b->n; i++) {
        if (b->tickets[i] == own)
            r->ring.abandon(own); /* answered here, not through the ring */
        RouteAnswer a = {b->ok[i], b->first[i]};
        int error = -1;
        if (!b->ok[i] && b->errors[i].sqlerrcode != 0) {
            /* One copy for a run of calls failed alike (a batch of takes
             * too large for what is left). */
            if (last_kept == NULL || !hilo_remote_error_equal(last_kept, &b->errors[i])) {
                kept = r->ring.keep_error(b->errors[i]);
                last_kept = kept >= 0 ? &b->errors[i] : NULL;
            }
            error = kept;
        }
        add_wake(w, r->ring.answer(b->tickets[i], a, error));
    }
    r->in_flight--;
    b->n = 0;
}

/* The last batch out could not send what queued meanwhile: it fails (those
 * callers go the worker's way). */
static void fail_queued_locked(LeaseRoute *r, Wakes *w)
{
    (void)r->ring.claim(
        [](uint64, const RouteRequest &, RouteAnswer *failed) {
            failed->ok = false;
            return HILO_TICKET_FAIL;
        },
        [&](Latch *latch) { add_wake(w, latch); });
}

/* A leader that leaves with an error or exits: its batch fails. */
static void fail_batch(void)
{
    LeaseRoute *r = batch.route;
    if (r == NULL)
        return;
    Wakes w;
    w.n = 0;
    for (int i = 0; i < batch.n; i++) {
        batch.ok[i] = false;
        batch.errors[i].sqlerrcode = 0;
    }
    SpinLockAcquire(&r->mutex);
    answer_batch_locked(r, &batch, batch.own, &w);
    if (r->in_flight == 0)
        fail_queued_locked(r, &w);
    SpinLockRelease(&r->mutex);
    batch.route = NULL;
    wake_all(&w);
}

/* A follower that gives up (an error, a timeout, an exit) leaves its
 * ticket: unsent, it is freed; sent, its answer frees it. */
static void abandon_ticket(LeaseRoute *r, uint64 ticket)
{
    SpinLockAcquire(&r->mutex);
    r->ring.abandon(ticket);
    SpinLockRelease(&r->mutex);
}

/* A FATAL exit runs no PG_CATCH: whatever this backend had queued or sent
 * is let go here, so that no slot of the ring stays taken. */
static void direct_at_exit(int code, Datum arg)
{
    fail_batch();
    if (waiting_route != NULL)
        abandon_ticket(waiting_route, waiting_ticket);
    waiting_route = NULL;
}

/*
 * Queues a ticket for `n` IDs on the route, under the generation `route`
 * was copied at. A caller that may lead (it holds a connection) claims
 * every queued ticket at once, its own among them, into `batch`
 * (*lead); one that may not queues only while a batch is in flight.
 * False: no ticket (the route changed, the ring is full, or nobody would
 * send it).
 */
static bool queue_ticket(LeaseRoute *r, const HiloSequence *seq, const HiloLeaseRouteCopy *route,
                         uint64 n, bool may_lead, uint64 *ticket, bool *lead)
{
    Wakes w;
    w.n = 0;
    bool queued = false;
    *lead = false;
    RouteRequest request = {route->generation, n};
    SpinLockAcquire(&r->mutex);
    if (r->dboid == MyDatabaseId && strcmp(r->seq, seq->name) == 0 &&
        r->generation == route->generation && (may_lead || r->in_flight > 0) &&
        r->ring.queue(request, MyLatch, ticket)) {
        queued = true;
        if (may_lead) {
            batch.route = r;
            batch.generation = route->generation;
            batch.own = *ticket;
            claim_batch_locked(r, &batch, &w);
            *lead = true;
        }
    }
    SpinLockRelease(&r->mutex);
    wake_all(&w);
    return queued;
}

/*
 * The batch's statement, answered into `batch`: true when the holder
 * answered. A single call the scalar did not serve is asked again as
 * rows, under a new id, for the holder's error if it failed there (a
 * second round trip only then, or when the holder no longer serves).
 */
static bool send_batch(const HiloLeaseRouteCopy *route, const char *seq)
{
    bool answered = hilo_lease_direct_call(route, seq, batch.n, batch.ids, batch.counts, false,
                                           batch.ok, batch.first, batch.errors);
    if (answered && batch.n == 1 && !batch.ok[0]) {
        batch.ids[0] = new_call_id();
        answered = hilo_lease_direct_call(route, seq, 1, batch.ids, batch.counts, true, batch.ok,
                                          batch.first, batch.errors);
    }
    for (int i = 0; i < batch.n && !answered; i++) {
        batch.ok[i] = false;
        batch.errors[i].sqlerrcode = 0;
    }
    return answered;
}

/*
 * Sends the batch claimed in queue_ticket() and answers it; then, while it
 * was the last batch in flight and others queued meanwhile, theirs (a few
 * times at most). True with *first when the holder served `own`; false
 * with its error in *own_error when it failed there.
 */
static bool lead_batches(LeaseRoute *r, const HiloLeaseRouteCopy *route, const char *seq,
                         uint64 own, int64 *first, HiloRemoteError *own_error)
{
    bool own_ok = false;
    for (int round = 0;; round++) {
        bool answered = send_batch(route, seq);
        uint64 served = 0, failed = 0;
        for (int i = 0; i < batch.n; i++) {
            served += batch.ok[i] ? 1 : 0;
            failed += !batch.ok[i] && batch.errors[i].sqlerrcode != 0 ? 1 : 0;
            if (batch.tickets[i] == own) {
                own_ok = batch.ok[i];
                *first = batch.first[i];
                if (!own_ok && batch.errors[i].sqlerrcode != 0)
                    *own_error = batch.errors[i];
            }
        }
        /* A call failed there was answered: the holder still serves. */
        bool refused = !answered || served + failed < (uint64)batch.n;
        Wakes w;
        w.n = 0;
        bool again = false;
        SpinLockAcquire(&r->mutex);
        if (r->dboid == MyDatabaseId && strcmp(r->seq, seq) == 0)
            r->uses += served; /* the worker counts them as use */
        answer_batch_locked(r, &batch, own, &w);
        if (r->in_flight == 0 && r->ring.unclaimed() > 0) {
            if (!refused && round < HILO_ROUTE_RELEADS && r->generation == batch.generation) {
                claim_batch_locked(r, &batch, &w);
                again = batch.n > 0;
            } else
                fail_queued_locked(r, &w);
        }
        if (!again)
            batch.route = NULL;
        SpinLockRelease(&r->mutex);
        wake_all(&w);
        if (refused)
            forget_route(r, seq, route->holder);
        if (!again)
            return own_ok;
    }
}

/* Waits for a leader to answer `ticket`; false if it was not served (its
 * holder's error in *error when it failed there) or no answer came in
 * time (then the ticket is abandoned). */
static bool await_ticket(LeaseRoute *r, uint64 ticket, int64 *first, HiloRemoteError *error)
{
    TimestampTz deadline =
        TimestampTzPlusMilliseconds(GetCurrentTimestamp(), 2 * hilo_lease_direct_wait_ms());
    for (;;) {
        RouteAnswer answer;
        SpinLockAcquire(&r->mutex);
        bool answered = r->ring.collect(ticket, &answer, error);
        SpinLockRelease(&r->mutex);
        if (answered) {
            *first = answer.first;
            return answer.ok;
        }
        long secs;
        int usecs;
        TimestampTz now = GetCurrentTimestamp();
        if (now >= deadline) {
            abandon_ticket(r, ticket);
            return false;
        }
        TimestampDifference(now, deadline, &secs, &usecs);
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
                        secs * 1000 + (usecs + 999) / 1000, PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
        CHECK_FOR_INTERRUPTS();
    }
}

/* The ticket's way, leading or waiting; an error on the way gives it up. */
static pg_noinline bool take_by_ticket(LeaseRoute *r, const HiloLeaseRouteCopy *route,
                                       const char *seq, uint64 ticket, bool lead, int64 *first,
                                       HiloRemoteError *error)
{
    volatile bool ok = false;
    if (!lead) {
        waiting_route = r;
        waiting_ticket = ticket;
    }
    PG_TRY();
    {
        ok = lead ? lead_batches(r, route, seq, ticket, first, error)
                  : await_ticket(r, ticket, first, error);
    }
    PG_CATCH();
    {
        HILO_FORGET_UNWOUND_FRAMES();
        waiting_route = NULL;
        if (lead)
            fail_batch();
        else
            abandon_ticket(r, ticket);
        PG_RE_THROW();
    }
    PG_END_TRY();
    waiting_route = NULL;
    return ok;
}

bool hilo_lease_direct_take(const HiloSequence *seq, uint64 n, int64 *first, HiloRemoteError *error)
{
    HiloLeaseRouteCopy route;
    LeaseRoute *r;
    if (shared == NULL || hilo_forward_connections <= 0 || !find_route(seq, &route, &r))
        return false;
    static bool exit_callback_set = false;
    if (!exit_callback_set) {
        before_shmem_exit(direct_at_exit, (Datum)0);
        exit_callback_set = true;
    }
    bool may_lead = hilo_lease_direct_share();
    if (may_lead && batch.errors == NULL)
        batch.errors = (HiloRemoteError *)MemoryContextAllocZero(
            TopMemoryContext, sizeof(HiloRemoteError) * HILO_ROUTE_RING);
    uint64 ticket;
    bool lead;
    if (!queue_ticket(r, seq, &route, n, may_lead, &ticket, &lead))
        return false;
    return take_by_ticket(r, &route, seq->name, ticket, lead, first, error);
}
