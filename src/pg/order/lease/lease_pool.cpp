/*
 * order/lease/lease_pool.cpp: IDs that the lease holder's worker took from its
 * core lease node in one call, for backends to hand out from shared memory
 * without a round trip to the worker (ordering 'cluster').
 *
 * Safe as the core's own serving is (lease_c_api.h,
 * hilo_lease_node_serving_until): a pool holds consecutive IDs the node
 * served to the worker while it held the lease; a backend takes from it,
 * in order, only while the monotonic clock (the worker's clock: one
 * machine) is below the lease's end, which the worker moves later only
 * after a renewal succeeded. The worker makes every other call of the
 * sequence wait for the pool or empties the pool before the node serves
 * such a call, so that nothing handed out after a pool ID is below it; it
 * empties the pool when the node stops serving, and at its start and exit.
 */
#include "lease_shared.h"

extern "C" {
#include "miscadmin.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
}

#include <time.h>

#define HILO_LEASE_POOLS 64

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

/*
 * Since when this node has seen each 'cluster' sequence's lease cell name
 * its holder (hilo.status's serving_since): the time hilo.status first
 * read the holder there, since the server started. A row whose holder is
 * another one starts again, so a lease that keeps moving shows a short age
 * on every node. Anyone may read hilo.status: when the table is full, the
 * row read longest ago makes room, and names nobody reads go first.
 */
#define HILO_LEASE_SEEN (2 * HILO_LEASE_POOLS)

typedef struct LeaseSeen {
    Oid dboid; /* InvalidOid: unused */
    char seq[HILO_MAX_NAME_BYTES + 1];
    int32 holder;
    TimestampTz since, read;
} LeaseSeen;

typedef struct LeaseSeenTable {
    slock_t mutex;
    LeaseSeen rows[HILO_LEASE_SEEN];
} LeaseSeenTable;

static LeaseSeenTable *seen = NULL;

static void seen_init(void)
{
    SpinLockInit(&seen->mutex);
    for (int i = 0; i < HILO_LEASE_SEEN; i++)
        seen->rows[i].dboid = InvalidOid;
}

static const HiloShmemPart seen_part = {
    "hilo_lease_seen", sizeof(LeaseSeenTable), NULL, 0, (void **)&seen, seen_init};

void hilo_lease_pool_shmem_init(void)
{
    hilo_shmem_add_part(&pool_part);
    hilo_shmem_add_part(&seen_part);
}

/* hilo._lease_holder_since(seq, holder): NULL without the shared memory. */
HILO_SQL_FUNCTION(hilo_lease_holder_since)
{
    char *seq = text_to_cstring(PG_GETARG_TEXT_PP(0));
    int32 holder = PG_GETARG_INT32(1);
    if (seen == NULL || strlen(seq) > HILO_MAX_NAME_BYTES)
        PG_RETURN_NULL();
    TimestampTz now = GetCurrentTimestamp();
    TimestampTz since;
    SpinLockAcquire(&seen->mutex);
    LeaseSeen *row = NULL, *spare = NULL;
    for (int i = 0; i < HILO_LEASE_SEEN && row == NULL; i++) {
        LeaseSeen *r = &seen->rows[i];
        if (r->dboid == MyDatabaseId && strcmp(r->seq, seq) == 0)
            row = r;
        else if (spare == NULL ||
                 (spare->dboid != InvalidOid && (r->dboid == InvalidOid || r->read < spare->read)))
            spare = r;
    }
    if (row == NULL) {
        row = spare;
        row->dboid = MyDatabaseId;
        strlcpy(row->seq, seq, sizeof(row->seq));
        row->holder = holder;
        row->since = now;
    } else if (row->holder != holder) {
        row->holder = holder;
        row->since = now;
    }
    row->read = now;
    since = row->since;
    SpinLockRelease(&seen->mutex);
    PG_RETURN_TIMESTAMPTZ(since);
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

void hilo_lease_pool_extend(const char *seq, uint64 until)
{
    LeasePool *p = pool_of(seq, false);
    if (p == NULL)
        return;
    SpinLockAcquire(&p->mutex);
    if (until > p->until)
        p->until = until;
    SpinLockRelease(&p->mutex);
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
    p->next = 1;
    p->last = 0;
    p->until = 0;
    p->dboid = InvalidOid;
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
