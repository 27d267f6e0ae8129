/*
 * order/lease/lease_take.cpp: calls of 'cluster' sequences (a leased serving
 * node) as backends make them, and as the holder serves the calls that
 * other nodes forward to it.
 *
 * hilo_nextval and hilo_take of such a sequence reach hilo_lease_take()
 * through order/order.cpp's hilo_order_take. The caller sees
 * one range of consecutive IDs, above every ID any node handed out before
 * the call began; or, when no node holds the lease within
 * hilo.claim_timeout, an error (08006), never an ID out of order. A call
 * goes one of three ways, the first that serves it:
 *
 *   1. the pool (below): IDs this node's lease worker took while this
 *      node holds the lease, handed out with no other process woken. On
 *      any other node it is one look into shared memory that finds
 *      nothing.
 *   2. the route (lease_route.cpp, over lease_direct.cpp): the holder
 *      that last served one of this node's forwards, called by the
 *      backend itself over a connection of its own (one round trip, the
 *      calls queued meanwhile in one statement), into
 *      hilo._lease_forward_one() or hilo._lease_forward() on the holder,
 *      which serves it from its pool, or fails it with its error (too few
 *      IDs left), which comes back whole. This is the forwarded call of
 *      test/bench/ordering.sh; through the worker it woke four processes
 *      and ran at 0.08 to 0.32 of SELECT 1, this way about 0.3.
 *   3. the lease worker (lease_slots.cpp, lease_worker.cpp): its core
 *      lease node serves from memory when this node holds the lease, and
 *      otherwise forwards to the holder over the worker's own connection
 *      (lease_net.cpp), into hilo._lease_forward() there.
 *
 * Why the worker's way stays beside the route, though both forward:
 *   - It is the only way that runs the lease protocol. A route is learnt,
 *     never guessed: the worker publishes one only after the holder
 *     served one of its forwards, so the first call of a node, every call
 *     while no node holds the lease, and the call that takes the lease
 *     over (core/lease.hpp, P4: a node whose forwards fail acquires) go
 *     through it, and a route the holder refused or that did not answer
 *     in time is cleared and that call goes through it too.
 *   - A backend that holds no connection to the holder: at most
 *     hilo.forward_connections backends of a node keep one (each is a
 *     backend on the holder; 0 means none, test/t/320), and the others
 *     ride on their batches only while one is in flight.
 *   - Cancel and exit safety under a stuck holder: a caller that finds
 *     the route's ring of tickets full, or whose leader hangs, failed or
 *     exited, is served through the worker meanwhile (test/t/322: 150
 *     callers on one connection to a stopped holder backend).
 *
 * The pool is safe as the core's own serving is (lease_c_api.h,
 * hilo_lease_node_serving_until): it holds consecutive IDs the node
 * served to the worker while it held the lease; a backend takes from it,
 * in order, only while the monotonic clock (the worker's clock: one
 * machine) is below the lease's end, which the worker moves later only
 * after a renewal succeeded, and only while the pool's last ID lies right
 * below the node's next: nothing was served since, by this node or any
 * other (a new chain starts above every ID any node served). A call the
 * node serves right after the pool's last ID, this node's own or
 * forwarded, takes the pool's first IDs and leaves the pool its own
 * (hilo_lease_pool_swap), so that nothing handed out after it is below
 * it and nothing pooled is lost; any other answer of the node empties
 * the pool. A lease that lapses for idleness keeps its pool, unusable,
 * until it resumes; one that another node takes over, and the worker's
 * start and exit, empty it.
 */
#include "lease_shared.h"

extern "C" {
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"
}

#include <time.h>

/* ---- The pool: IDs the holder's worker took for backends ---- */

typedef struct LeasePool {
    slock_t mutex;
    Oid dboid; /* InvalidOid: unused */
    char seq[HILO_MAX_NAME_BYTES + 1];
    uint64 catalog;   /* the catalog creation its lease serves */
    int64 next, last; /* next > last: empty */
    uint64 until;     /* hand out only while the clock is below this */
} LeasePool;

static LeasePool *pools = NULL;
/* This backend's guess of a sequence's pool (checked under its lock). */
static int last_index = 0;

static void pool_init(void)
{
    for (int i = 0; i < HILO_LEASE_POOLS; i++) {
        SpinLockInit(&pools[i].mutex);
        pools[i].dboid = InvalidOid;
    }
}

static const HiloShmemPart pool_part = {
    "hilo_lease_pools", sizeof(LeasePool) * HILO_LEASE_POOLS, NULL, 0, (void **)&pools, pool_init};

void hilo_lease_pool_shmem_init(void)
{
    hilo_shmem_add_part(&pool_part);
}

uint64 hilo_lease_clock_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64)ts.tv_sec * 1000000 + (uint64)ts.tv_nsec / 1000;
}

static bool is_pool_locked(const LeasePool *p, const char *seq)
{
    return p->dboid == MyDatabaseId && strcmp(p->seq, seq) == 0;
}

bool hilo_lease_pool_take(const char *seq, uint64 catalog, int64 floor, int64 max_value, uint64 n,
                          int64 *first)
{
    if (pools == NULL)
        return false;
    for (int k = 0; k < HILO_LEASE_POOLS; k++) {
        int i = (last_index + k) % HILO_LEASE_POOLS;
        LeasePool *p = &pools[i];
        if (p->dboid != MyDatabaseId)
            continue; /* a racy look (a pool being made is missed: the slow way) */
        bool taken = false, mine;
        SpinLockAcquire(&p->mutex);
        mine = is_pool_locked(p, seq);
        /* A pool of an older catalog (DROP EXTENSION, CREATE EXTENSION)
         * serves none of the new one's calls: the worker starts over. Nor
         * does it serve IDs outside the caller's start_value and max_value
         * (a sequence made again or altered under the name, here or on the
         * forwarding node, while the lease of the old one went on): the
         * call goes to the worker, which starts the lease over. */
        if (mine && p->catalog == catalog && p->next <= p->last && p->next > floor &&
            p->next <= max_value && n <= (uint64)(p->last - p->next) + 1 &&
            n - 1 <= (uint64)(max_value - p->next) && hilo_lease_clock_us() < p->until) {
            *first = p->next;
            p->next += (int64)n;
            taken = true;
        }
        SpinLockRelease(&p->mutex);
        if (mine) {
            last_index = i;
            return taken;
        }
    }
    return false;
}

/* ---- The worker's side (one worker per server writes the pools) ---- */

/* The pool of `seq` in the worker's database, made if `create`; NULL if none. */
static LeasePool *pool_of(const char *seq, bool create)
{
    LeasePool *free_pool = NULL;
    for (int i = 0; i < HILO_LEASE_POOLS; i++) {
        LeasePool *p = &pools[i];
        /* Only this worker writes dboid and seq: read without the lock. */
        if (is_pool_locked(p, seq))
            return p;
        if (free_pool == NULL && p->dboid == InvalidOid)
            free_pool = p;
    }
    if (!create || free_pool == NULL)
        return NULL;
    SpinLockAcquire(&free_pool->mutex);
    free_pool->dboid = MyDatabaseId;
    strlcpy(free_pool->seq, seq, sizeof(free_pool->seq));
    free_pool->catalog = 0;
    free_pool->next = 1;
    free_pool->last = 0;
    free_pool->until = 0;
    SpinLockRelease(&free_pool->mutex);
    return free_pool;
}

bool hilo_lease_pool_fill(const char *seq, uint64 catalog, int64 first, int64 last, uint64 until)
{
    LeasePool *p = pool_of(seq, true);
    if (p == NULL)
        return false; /* every pool in use: the IDs are lost, calls go the slow way */
    SpinLockAcquire(&p->mutex);
    if (p->next <= p->last && first == p->last + 1 && p->catalog == catalog) {
        p->last = last; /* the node served nothing in between */
    } else {
        p->next = first;
        p->last = last;
    }
    p->catalog = catalog;
    p->until = until;
    SpinLockRelease(&p->mutex);
    return true;
}

/* Empties a pool under its lock (its IDs are lost) and frees it. */
static void pool_empty_locked(LeasePool *p)
{
    p->next = 1;
    p->last = 0;
    p->until = 0;
    p->dboid = InvalidOid;
}

void hilo_lease_pool_keep(const char *seq, int64 next, uint64 until)
{
    LeasePool *p = pool_of(seq, false);
    if (p == NULL)
        return;
    SpinLockAcquire(&p->mutex);
    if (p->last + 1 == next) {
        if (until > p->until)
            p->until = until;
    } else {
        pool_empty_locked(p);
    }
    SpinLockRelease(&p->mutex);
}

bool hilo_lease_pool_swap(const char *seq, uint64 catalog, int64 floor, int64 max_value,
                          int64 first, uint64 n, uint64 until, int64 *out)
{
    LeasePool *p = pool_of(seq, false);
    bool swapped = false;
    if (p == NULL)
        return false;
    SpinLockAcquire(&p->mutex);
    if (p->next <= p->last) {
        if (p->catalog == catalog && p->last + 1 == first && p->next > floor &&
            n - 1 <= (uint64)(max_value - p->next)) {
            *out = p->next;
            p->next += (int64)n;
            p->last = first + (int64)(n - 1);
            if (until > p->until)
                p->until = until;
            swapped = true;
        } else {
            pool_empty_locked(p);
        }
    }
    SpinLockRelease(&p->mutex);
    return swapped;
}

int64 hilo_lease_pool_release(const char *seq, int64 next)
{
    LeasePool *p = pool_of(seq, false);
    int64 lowest = next;
    if (p == NULL)
        return next;
    SpinLockAcquire(&p->mutex);
    if (p->next <= p->last && p->last + 1 == next)
        lowest = p->next;
    pool_empty_locked(p);
    SpinLockRelease(&p->mutex);
    return lowest;
}

uint64 hilo_lease_pool_left(const char *seq)
{
    LeasePool *p = pool_of(seq, false);
    uint64 left = 0;
    if (p == NULL)
        return 0;
    SpinLockAcquire(&p->mutex);
    if (p->next <= p->last)
        left = (uint64)(p->last - p->next) + 1;
    SpinLockRelease(&p->mutex);
    return left;
}

void hilo_lease_pool_clear(const char *seq)
{
    LeasePool *p = pool_of(seq, false);
    if (p == NULL)
        return;
    SpinLockAcquire(&p->mutex);
    pool_empty_locked(p);
    SpinLockRelease(&p->mutex);
}

void hilo_lease_pool_clear_all(void)
{
    if (pools == NULL)
        return;
    for (int i = 0; i < HILO_LEASE_POOLS; i++) {
        SpinLockAcquire(&pools[i].mutex);
        pools[i].next = 1;
        pools[i].last = 0;
        pools[i].until = 0;
        pools[i].dboid = InvalidOid;
        SpinLockRelease(&pools[i].mutex);
    }
}

/* ---- The calls ---- */

/* How long a backend waits for its worker: the worker's own call timeout
 * is hilo.claim_timeout, and it answers then. */
static int submit_timeout_ms(void)
{
    return hilo_claim_timeout_ms + 2000;
}

/* The lease worker runs in hilo.agent_database: none without it. */
static void require_lease_worker(const char *seq_name)
{
    if (hilo_agent_database == NULL || hilo_agent_database[0] == '\0')
        ereport(ERROR,
                (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                 errmsg("hilo sequence \"%s\" has ordering 'cluster', and no lease worker runs "
                        "on this server",
                        seq_name),
                 errhint("Set hilo.agent_database to the cluster's database on every node and "
                         "restart the servers.")));
}

static void fill_request(HiloLeaseRequest *r, const HiloSequence *seq, uint64 n)
{
    require_lease_worker(seq->name);
    memset(r, 0, sizeof(*r));
    strlcpy(r->seq, seq->name, sizeof(r->seq));
    r->floor = seq->start_value - 1;
    r->max_value = seq->max_value;
    r->block_size = Max(seq->window_size, 1);
    r->count = n;
    r->catalog = seq->creation;
    r->owner = seq->owner;
    const char *owner = GetUserNameFromId(seq->owner, true);
    namestrcpy(&r->owner_name, owner != NULL ? owner : "?");
}

/* The three ways of a call, in the order of the top of this file. */
void hilo_lease_take(const HiloSequence *seq, uint64 n, HiloRange *out)
{
    require_lease_worker(seq->name);
    int64 first;
    HiloRemoteError error;
    error.sqlerrcode = 0;
    /* 1. This node holds the lease: IDs its worker took for its callers.
     * 2. Another node holds it: it served this backend's own call, or
     *    failed it with its error. */
    if (hilo_lease_pool_take(seq->name, seq->creation, seq->start_value - 1, seq->max_value, n,
                             &first) ||
        hilo_lease_direct_take(seq, n, &first, &error)) {
        out->first = first;
        out->last = first + (int64)(n - 1);
        return;
    }
    if (error.sqlerrcode != 0)
        hilo_rethrow_remote(&error);
    /* 3. The lease worker. */
    HiloLeaseRequest request;
    fill_request(&request, seq, n);
    HiloLeaseAnswer answer;
    hilo_lease_submit(&request, &answer, 1, submit_timeout_ms());
    if (answer.ok) {
        out->first = answer.first;
        out->last = answer.first + (int64)(n - 1);
        return;
    }
    /* The worker's error, or the holder's (a call it forwarded). */
    if (answer.error.sqlerrcode == 0)
        hilo_lease_unserved(&answer.error, seq->name, "no node served it");
    hilo_rethrow_remote(&answer.error);
}

/*
 * This database's catalog creation, read again only when hilo.sequences
 * has another OID than at the last read (every CREATE EXTENSION makes a
 * new one; the relation lookup sees a committed drop and create from the
 * start of the transaction): a forwarded batch costs no catalog query.
 */
static uint64 forward_catalog(void)
{
    static Oid known_relid = InvalidOid;
    static uint64 known = 0;
    Oid relid = hilo_catalog_relid_if_present();
    if (!OidIsValid(relid))
        return 0;
    if (relid != known_relid) {
        known = hilo_catalog_creation_now();
        known_relid = relid;
    }
    return known;
}

/*
 * Serves `n` calls that another node forwarded here (requests[i].seq,
 * floor, max_value, count, origin and remote_call_id filled): from the
 * pool where it has them, the others through the worker.
 */
static void serve_forwarded(HiloLeaseRequest *requests, HiloLeaseAnswer *answers, int n)
{
    /* No lookup of the sequences: only a node whose worker holds their
     * lease serves, and only under a lease of the forwarder's settings
     * (else the worker lets the lease go, and the forwarder looks again);
     * a lease serves only the catalog creation it began under. */
    uint64 catalog = forward_catalog();
    for (int i = 0; i < n; i++) {
        if (requests[i].count < 1)
            ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                            errmsg("a forwarded call takes at least one ID")));
        requests[i].catalog = catalog;
    }
    if (n > 0)
        require_lease_worker(requests[0].seq);
    int nsubmit = 0;
    int *submitted = (int *)palloc(sizeof(int) * Max(n, 1));
    for (int i = 0; i < n; i++) {
        if (hilo_lease_pool_take(requests[i].seq, catalog, requests[i].floor, requests[i].max_value,
                                 requests[i].count, &answers[i].first))
            answers[i].ok = true;
        else
            submitted[nsubmit++] = i;
    }
    if (nsubmit == 0)
        return;
    HiloLeaseRequest *rs = (HiloLeaseRequest *)palloc(sizeof(HiloLeaseRequest) * nsubmit);
    HiloLeaseAnswer *as = (HiloLeaseAnswer *)palloc0(sizeof(HiloLeaseAnswer) * nsubmit);
    for (int k = 0; k < nsubmit; k++)
        rs[k] = requests[submitted[k]];
    hilo_lease_submit(rs, as, nsubmit, submit_timeout_ms());
    for (int k = 0; k < nsubmit; k++)
        answers[submitted[k]] = as[k];
}

/* One forwarded call's request. */
static void forwarded_request(HiloLeaseRequest *r, uint32 from, text *seq, int64 call_id,
                              int64 count, int64 floor, int64 max_value)
{
    memset(r, 0, sizeof(*r));
    text_to_cstring_buffer(seq, r->seq, sizeof(r->seq));
    r->floor = floor;
    r->max_value = max_value;
    r->count = count < 1 ? 0 : (uint64)count;
    r->origin = from;
    r->remote_call_id = (uint64)call_id;
}

/*
 * hilo._lease_forward(from_node, seqs, call_ids, counts, floors,
 * max_values): calls that node `from_node`'s lease worker forwards to
 * this one, believing it holds the lease, each with the settings of the
 * sequence there (start_value - 1, max_value). One row per call, in
 * order: served (the first ID), failed (the error its caller raises:
 * SQLSTATE, message, detail, hint), or neither (this node does not hold
 * the lease under those settings, or did not serve in time: the forwarder
 * looks again).
 */
HILO_SQL_FUNCTION(hilo_lease_forward)
{
    static const char *const arg_names[] = {"from_node", "seqs",   "call_ids",
                                            "counts",    "floors", "max_values"};
    const char *fn = "hilo._lease_forward()";
    hilo_entry(fcinfo, fn, arg_names, 6, HILO_WRITES);
    uint32 from = (uint32)PG_GETARG_INT32(0);
    int n, n_ids, n_counts, n_floors, n_maxes;
    Datum *seqs = hilo_array_arg(fcinfo, 1, "seqs", &n);
    Datum *ids = hilo_array_arg(fcinfo, 2, "call_ids", &n_ids);
    Datum *counts = hilo_array_arg(fcinfo, 3, "counts", &n_counts);
    Datum *floors = hilo_array_arg(fcinfo, 4, "floors", &n_floors);
    Datum *maxes = hilo_array_arg(fcinfo, 5, "max_values", &n_maxes);
    if (n_ids != n || n_counts != n || n_floors != n || n_maxes != n)
        ereport(ERROR, (errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
                        errmsg("the request arrays must all have the same length")));
    InitMaterializedSRF(fcinfo, 0);

    HiloLeaseRequest *requests = (HiloLeaseRequest *)palloc0(sizeof(HiloLeaseRequest) * Max(n, 1));
    HiloLeaseAnswer *answers = (HiloLeaseAnswer *)palloc0(sizeof(HiloLeaseAnswer) * Max(n, 1));
    for (int i = 0; i < n; i++)
        forwarded_request(&requests[i], from, DatumGetTextPP(seqs[i]), DatumGetInt64(ids[i]),
                          DatumGetInt64(counts[i]), DatumGetInt64(floors[i]),
                          DatumGetInt64(maxes[i]));
    serve_forwarded(requests, answers, n);
    for (int i = 0; i < n; i++) {
        /* A call that failed here carries the error its caller raises. */
        const HiloRemoteError *e = &answers[i].error;
        bool failed = !answers[i].ok && e->sqlerrcode != 0;
        char sqlstate[6] = "";
        if (failed)
            hilo_remote_error_sqlstate(e, sqlstate);
        Datum values[7] = {ids[i],
                           BoolGetDatum(answers[i].ok),
                           Int64GetDatum(answers[i].first),
                           CStringGetTextDatum(sqlstate),
                           CStringGetTextDatum(e->message),
                           CStringGetTextDatum(e->detail),
                           CStringGetTextDatum(e->hint)};
        bool nulls[7] = {false, false, !answers[i].ok, !failed, !failed, !failed, !failed};
        hilo_put_row(fcinfo, values, nulls);
    }
    return (Datum)0;
}

/*
 * hilo._lease_forward_one(from_node, seq, call_id, count, floor,
 * max_value): one call that a backend of node `from_node` sends here
 * itself (order/lease/lease_route.cpp), believing this node holds the lease,
 * with the settings of the sequence there: the first of its IDs, or NULL
 * when not served (the caller then goes through its lease worker). A
 * scalar, so that a prepared call costs the holder about what SELECT 1
 * does.
 */
HILO_SQL_FUNCTION(hilo_lease_forward_one)
{
    static const char *const arg_names[] = {"from_node", "seq",   "call_id",
                                            "count",     "floor", "max_value"};
    hilo_entry(fcinfo, "hilo._lease_forward_one()", arg_names, 6, HILO_WRITES);
    HiloLeaseRequest request;
    HiloLeaseAnswer answer;
    memset(&answer, 0, sizeof(answer));
    forwarded_request(&request, (uint32)PG_GETARG_INT32(0), PG_GETARG_TEXT_PP(1),
                      PG_GETARG_INT64(2), PG_GETARG_INT64(3), PG_GETARG_INT64(4),
                      PG_GETARG_INT64(5));
    serve_forwarded(&request, &answer, 1);
    if (!answer.ok)
        PG_RETURN_NULL();
    PG_RETURN_INT64(answer.first);
}
