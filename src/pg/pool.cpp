/*
 * pool.cpp: per-node pools of reserved IDs and per-backend buffers, both in
 * shared memory.
 *
 * Every ID in a pool or a buffer was reserved and committed by the
 * allocator; from the catalog's point of view it is handed out. So losing
 * shared memory (a crash) only leaves gaps, and nothing here ever writes the
 * catalog: IDs given back by an exiting backend go to the pool, and the
 * allocator writes pools back to the free list on a clean shutdown.
 *
 * Locking: a pool's LWLock covers its ranges, its in-flight reservations
 * and the identity and end of every buffer filled from it. A buffer's
 * `next` is advanced by its owner alone without the lock (the nextval fast
 * path); readers see a value that can only have grown since, which errs on
 * the safe side for push checks.
 */
#include "hilo.h"

extern "C" {
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "utils/timestamp.h"
}

HiloPool *hilo_pool_at(int index)
{
    return &hilo_shared->pools[index];
}

HiloBackendSlot *hilo_my_slot(void)
{
    return &hilo_shared->slots[MyProc->pgprocno];
}

static uint64 new_generation(void)
{
    return pg_atomic_add_fetch_u64(&hilo_shared->last_generation, 1);
}

/* IDs of a sequence's block size, at least one. */
static uint64 low_water_ids(const HiloPool *pool)
{
    return (uint64)Max(hilo_pool_low_water, 1) * (uint64)Max(pool->block_size, 1);
}

int hilo_pool_lookup(Oid dboid, int32 seq_id)
{
    int found = -1;
    LWLockAcquire(hilo_shared->pools_lock, LW_SHARED);
    for (int i = 0; i < hilo_shared->num_pools; i++) {
        HiloPool *p = &hilo_shared->pools[i];
        if (p->in_use && p->dboid == dboid && p->seq_id == seq_id) {
            found = i;
            break;
        }
    }
    LWLockRelease(hilo_shared->pools_lock);
    return found;
}

int hilo_pool_attach(const HiloSequence *seq, uint64 *generation)
{
    int index = hilo_pool_lookup(MyDatabaseId, seq->seq_id);
    if (index >= 0) {
        *generation = pg_atomic_read_u64(&hilo_shared->pools[index].generation);
        return index;
    }

    LWLockAcquire(hilo_shared->pools_lock, LW_EXCLUSIVE);
    int free_index = -1;
    for (int i = 0; i < hilo_shared->num_pools; i++) {
        HiloPool *p = &hilo_shared->pools[i];
        if (p->in_use && p->dboid == MyDatabaseId && p->seq_id == seq->seq_id) {
            index = i; /* created meanwhile */
            break;
        }
        if (!p->in_use && free_index < 0)
            free_index = i;
    }
    if (index < 0 && free_index >= 0) {
        HiloPool *p = &hilo_shared->pools[free_index];
        LWLockAcquire(&p->lock, LW_EXCLUSIVE);
        p->in_use = true;
        p->dboid = MyDatabaseId;
        p->seq_id = seq->seq_id;
        p->monotonic = seq->monotonic;
        p->block_size = seq->block_size;
        p->nranges = 0;
        p->ids = 0;
        p->ninflight = 0;
        p->serving = false;
        p->target = 2 * low_water_ids(p);
        p->refill_wanted = false; /* until nextval or a small take finds it low */
        p->free_list_pending = false;
        p->exhausted = false;
        p->issued = 0;
        p->rate = 0;
        p->rate_issued = 0;
        p->rate_time = GetCurrentTimestamp();
        pg_atomic_write_u64(&p->generation, new_generation());
        LWLockRelease(&p->lock);
        index = free_index;
    }
    LWLockRelease(hilo_shared->pools_lock);

    if (index < 0)
        ereport(ERROR, (errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
                        errmsg("too many hilo sequences in use to give \"%s\" a pool", seq->name),
                        errdetail("hilo.max_sequences is %d.", hilo_shared->num_pools),
                        errhint("Raise hilo.max_sequences and restart the server.")));
    *generation = pg_atomic_read_u64(&hilo_shared->pools[index].generation);
    return index;
}

/* Asks the allocator for a refill when the pool runs low. Lock held. Only
 * pools that serve nextval or small takes are kept filled. */
static void note_low_water(HiloPool *pool)
{
    if (pool->serving && pool->ids < low_water_ids(pool) && !pool->exhausted)
        pool->refill_wanted = true;
}

/* Removes `r`, part of a range of the pool, keeping the list merged.
 * Lock held. Returns false (changing nothing) if no slot is left for a split. */
static bool remove_from_pool(HiloPool *pool, HiloRange r)
{
    if (!hilo_list_remove(pool->ranges, &pool->nranges, HILO_POOL_RANGES, r))
        return false;
    pool->ids -= hilo_range_length(r);
    pool->issued += hilo_range_length(r);
    return true;
}

HiloPoolResult hilo_pool_fill_buffer(int pool_index, uint64 generation, int buffer_index,
                                     int64 above, bool *need_fresh)
{
    HiloPool *pool = hilo_pool_at(pool_index);
    HiloBuffer *buf = &hilo_my_slot()->buffers[buffer_index];
    HiloPoolResult result = HILO_POOL_EMPTY;

    *need_fresh = false;
    LWLockAcquire(&pool->lock, LW_EXCLUSIVE);
    if (pg_atomic_read_u64(&pool->generation) != generation) {
        LWLockRelease(&pool->lock);
        return HILO_POOL_STALE;
    }
    pool->serving = true;
    /* Within a backend, IDs strictly increase: only IDs above `above`. */
    for (uint32 i = 0; i < pool->nranges; i++) {
        HiloRange r = pool->ranges[i];
        if (r.last <= above)
            continue;
        int64 first = Max(r.first, above + 1);
        HiloRange block = hilo_take_prefix({first, r.last}, (uint64)pool->block_size);
        if (!remove_from_pool(pool, block)) {
            /* No room to split the range: take all of it above `above`. */
            block.last = r.last;
            if (!remove_from_pool(pool, block))
                break;
        }
        buf->dboid = pool->dboid;
        buf->seq_id = pool->seq_id;
        buf->pool_index = pool_index;
        buf->generation = generation;
        buf->end = block.last + 1;
        pg_atomic_write_u64(&buf->next, (uint64)block.first);
        buf->in_use = true;
        result = HILO_POOL_OK;
        break;
    }
    if (result == HILO_POOL_EMPTY)
        *need_fresh = pool->ids > 0; /* IDs there, but all below `above` */
    note_low_water(pool);
    LWLockRelease(&pool->lock);
    return result;
}

HiloPoolResult hilo_pool_next_monotonic(int pool_index, uint64 generation, int64 *id)
{
    HiloPool *pool = hilo_pool_at(pool_index);
    HiloPoolResult result = HILO_POOL_EMPTY;

    LWLockAcquire(&pool->lock, LW_EXCLUSIVE);
    pool->serving = true;
    if (pg_atomic_read_u64(&pool->generation) != generation) {
        result = HILO_POOL_STALE;
    } else if (pool->nranges > 0) {
        /* One counter for the whole node: always the lowest ID left. */
        *id = pool->ranges[0].first;
        (void)remove_from_pool(pool, {*id, *id}); /* never splits */
        result = HILO_POOL_OK;
    }
    if (result != HILO_POOL_STALE)
        note_low_water(pool);
    LWLockRelease(&pool->lock);
    return result;
}

HiloPoolResult hilo_pool_take(int pool_index, uint64 generation, uint64 n, HiloRange **ranges,
                              uint32 *nranges)
{
    HiloPool *pool = hilo_pool_at(pool_index);
    /* Allocated before the lock is taken: nothing may raise while it is held. */
    HiloRange *out = (HiloRange *)palloc(sizeof(HiloRange) * HILO_POOL_RANGES);
    HiloPoolResult result = HILO_POOL_EMPTY;

    LWLockAcquire(&pool->lock, LW_EXCLUSIVE);
    pool->serving = true;
    if (pg_atomic_read_u64(&pool->generation) != generation) {
        result = HILO_POOL_STALE;
    } else if (pool->ids >= n && !pool->free_list_pending) {
        uint32 count = 0;
        hilo_list_take_lowest(pool->ranges, &pool->nranges, n, out, HILO_POOL_RANGES, &count);
        pool->ids -= n;
        pool->issued += n;
        *nranges = count;
        result = HILO_POOL_OK;
    }
    if (result != HILO_POOL_STALE)
        note_low_water(pool);
    LWLockRelease(&pool->lock);

    if (result != HILO_POOL_OK)
        pfree(out);
    else
        *ranges = out;
    return result;
}

/*
 * Puts ranges into a pool of the right generation; lock held. `returned`:
 * they had left the pool (a buffer's leftovers), so they no longer count as
 * issued. A range that does not fit is left as a gap.
 */
static void put_in_pool_locked(HiloPool *pool, const HiloRange *ranges, uint32 nranges,
                               bool returned)
{
    for (uint32 i = 0; i < nranges; i++) {
        HiloRange conflict;
        HiloInsertStatus st =
            hilo_list_insert(pool->ranges, &pool->nranges, HILO_POOL_RANGES, ranges[i], &conflict);
        if (st == HILO_INSERTED) {
            pool->ids += hilo_range_length(ranges[i]);
            if (returned)
                pool->issued -= Min(pool->issued, hilo_range_length(ranges[i]));
        } else {
            /* Full (or, were it ever to happen, an overlap): never hand the
             * IDs out from here. A gap is safe; a repeat is not. */
            elog(DEBUG1,
                 "hilo: pool of sequence %d full; " INT64_FORMAT "..." INT64_FORMAT
                 " left as a gap",
                 pool->seq_id, ranges[i].first, ranges[i].last);
        }
    }
}

void hilo_pool_put_back(int pool_index, uint64 generation, const HiloRange *ranges, uint32 nranges)
{
    HiloPool *pool = hilo_pool_at(pool_index);
    LWLockAcquire(&pool->lock, LW_EXCLUSIVE);
    if (pg_atomic_read_u64(&pool->generation) == generation)
        put_in_pool_locked(pool, ranges, nranges, true);
    LWLockRelease(&pool->lock);
}

void hilo_buffer_release(int buffer_index)
{
    HiloBuffer *buf = &hilo_my_slot()->buffers[buffer_index];
    if (!buf->in_use)
        return;
    HiloPool *pool = hilo_pool_at(buf->pool_index);
    LWLockAcquire(&pool->lock, LW_EXCLUSIVE);
    int64 next = (int64)pg_atomic_read_u64(&buf->next);
    if (pg_atomic_read_u64(&pool->generation) == buf->generation && next < buf->end) {
        HiloRange left = {next, buf->end - 1};
        put_in_pool_locked(pool, &left, 1, true);
    }
    buf->in_use = false;
    LWLockRelease(&pool->lock);
}

void hilo_buffers_release_all(void)
{
    if (hilo_shared == NULL || MyProc == NULL)
        return;
    for (int i = 0; i < HILO_BUFFERS_PER_BACKEND; i++)
        hilo_buffer_release(i);
}

bool hilo_pool_find_unissued(Oid dboid, int32 seq_id, HiloRange r, HiloRange *hit)
{
    int index = hilo_pool_lookup(dboid, seq_id);
    if (index < 0)
        return false;
    HiloPool *pool = hilo_pool_at(index);
    bool found = false;

    LWLockAcquire(&pool->lock, LW_SHARED);
    uint64 generation = pg_atomic_read_u64(&pool->generation);
    if (pool->in_use && pool->dboid == dboid && pool->seq_id == seq_id) {
        found = hilo_list_find_overlap(pool->ranges, pool->nranges, r, hit);
        for (uint32 i = 0; !found && i < pool->ninflight; i++) {
            if (pool->inflight[i].first <= r.last && r.first <= pool->inflight[i].last) {
                hit->first = Max(r.first, pool->inflight[i].first);
                hit->last = Min(r.last, pool->inflight[i].last);
                found = true;
            }
        }
        for (int s = 0; !found && s < hilo_shared->num_requests; s++) {
            for (int b = 0; !found && b < HILO_BUFFERS_PER_BACKEND; b++) {
                HiloBuffer *buf = &hilo_shared->slots[s].buffers[b];
                if (!buf->in_use || buf->pool_index != index || buf->generation != generation)
                    continue;
                int64 next = (int64)pg_atomic_read_u64(&buf->next);
                if (next < buf->end && next <= r.last && r.first < buf->end) {
                    hit->first = Max(r.first, next);
                    hit->last = Min(r.last, buf->end - 1);
                    found = true;
                }
            }
        }
    }
    LWLockRelease(&pool->lock);
    return found;
}

void hilo_pool_invalidate(Oid dboid, int32 seq_id)
{
    LWLockAcquire(hilo_shared->pools_lock, LW_EXCLUSIVE);
    for (int i = 0; i < hilo_shared->num_pools; i++) {
        HiloPool *pool = &hilo_shared->pools[i];
        if (!pool->in_use || pool->dboid != dboid || (seq_id >= 0 && pool->seq_id != seq_id))
            continue;
        LWLockAcquire(&pool->lock, LW_EXCLUSIVE);
        /* Its IDs become a gap: never served again, in any backend. */
        pg_atomic_write_u64(&pool->generation, new_generation());
        pool->in_use = false;
        pool->nranges = 0;
        pool->ids = 0;
        pool->ninflight = 0;
        LWLockRelease(&pool->lock);
    }
    LWLockRelease(hilo_shared->pools_lock);
}

void hilo_pool_note_push(Oid dboid, int32 seq_id)
{
    int index = hilo_pool_lookup(dboid, seq_id);
    if (index < 0)
        return;
    HiloPool *pool = hilo_pool_at(index);
    LWLockAcquire(&pool->lock, LW_EXCLUSIVE);
    /* A pool that serves nextval must hand pushed IDs out first: the
     * allocator moves them in. Other pools leave them on the free list. */
    if (pool->in_use && pool->dboid == dboid && pool->seq_id == seq_id && pool->serving) {
        pool->free_list_pending = true;
        pool->exhausted = false;
    }
    LWLockRelease(&pool->lock);
}

void hilo_pool_count_issued(Oid dboid, int32 seq_id, uint64 ids)
{
    int index = hilo_pool_lookup(dboid, seq_id);
    if (index < 0)
        return;
    HiloPool *pool = hilo_pool_at(index);
    LWLockAcquire(&pool->lock, LW_EXCLUSIVE);
    if (pool->in_use && pool->dboid == dboid && pool->seq_id == seq_id)
        pool->issued += ids;
    LWLockRelease(&pool->lock);
}

void hilo_pool_counts(int pool_index, uint64 *pool_ids, uint64 *buffered_ids, uint64 *issued,
                      double *rate)
{
    HiloPool *pool = hilo_pool_at(pool_index);
    LWLockAcquire(&pool->lock, LW_SHARED);
    uint64 generation = pg_atomic_read_u64(&pool->generation);
    *pool_ids = pool->ids;
    *issued = pool->issued;
    *rate = pool->rate;
    *buffered_ids = 0;
    for (int s = 0; s < hilo_shared->num_requests; s++) {
        for (int b = 0; b < HILO_BUFFERS_PER_BACKEND; b++) {
            HiloBuffer *buf = &hilo_shared->slots[s].buffers[b];
            if (!buf->in_use || buf->pool_index != pool_index || buf->generation != generation)
                continue;
            int64 next = (int64)pg_atomic_read_u64(&buf->next);
            if (next < buf->end)
                *buffered_ids += (uint64)(buf->end - next);
        }
    }
    LWLockRelease(&pool->lock);
}

/* ---- the allocator's side ---- */

static void fill_job(HiloPool *pool, int index, HiloPoolJob *job)
{
    job->pool_index = index;
    job->generation = pg_atomic_read_u64(&pool->generation);
    job->seq_id = pool->seq_id;
    job->monotonic = pool->monotonic;
    job->fresh_only = pool->monotonic;
    job->free_list_only = pool->free_list_pending && !pool->monotonic;
    job->amount = pool->target > pool->ids ? pool->target - pool->ids : 0;
    /* A refill brings at most as many ranges as fit in flight and in the pool. */
    uint32 used = pool->nranges + pool->ninflight;
    job->max_ranges = used < HILO_POOL_RANGES ? HILO_POOL_RANGES - used : 0;
    job->max_ranges = Min(job->max_ranges, (uint32)HILO_POOL_INFLIGHT - pool->ninflight);
    if (job->free_list_only)
        job->amount = UINT64_MAX / 4; /* all of it that fits */
}

int hilo_pool_collect_jobs(Oid dboid, HiloPoolJob *jobs, int max_jobs)
{
    int n = 0;
    for (int i = 0; i < hilo_shared->num_pools && n < max_jobs; i++) {
        HiloPool *pool = &hilo_shared->pools[i];
        LWLockAcquire(&pool->lock, LW_EXCLUSIVE);
        if (pool->in_use && pool->dboid == dboid && pool->ninflight == 0 &&
            (pool->refill_wanted || pool->free_list_pending)) {
            fill_job(pool, i, &jobs[n]);
            if (jobs[n].max_ranges > 0 && jobs[n].amount > 0)
                n++;
            pool->refill_wanted = false;
        }
        LWLockRelease(&pool->lock);
    }
    return n;
}

bool hilo_pool_job_for_request(int pool_index, uint64 min_ids, bool fresh_only, HiloPoolJob *job)
{
    HiloPool *pool = hilo_pool_at(pool_index);
    bool ok;
    LWLockAcquire(&pool->lock, LW_EXCLUSIVE);
    ok = pool->in_use && pool->dboid == MyDatabaseId;
    if (ok) {
        /* A caller had to wait: aim higher next time (up to 64 low waters). */
        pool->target =
            Min(Max(pool->target * 2, 2 * low_water_ids(pool)), 64 * low_water_ids(pool));
        fill_job(pool, pool_index, job);
        job->fresh_only |= fresh_only;
        if (job->fresh_only && job->free_list_only) {
            /* Not a drain of the free list after all: its "all that fits"
             * amount would claim 2^62 fresh IDs. Ask for what the pool lacks. */
            job->free_list_only = false;
            job->amount = pool->target > pool->ids ? pool->target - pool->ids : 0;
        }
        job->amount = Max(job->amount, Max(min_ids, (uint64)1));
        if (job->max_ranges == 0)
            job->max_ranges = 1;
    }
    LWLockRelease(&pool->lock);
    return ok;
}

uint64 hilo_pool_borrow(Oid dboid, int32 seq_id, uint64 n, HiloRange *out, uint32 out_capacity,
                        uint32 *nout, int *pool_index, uint64 *generation)
{
    *nout = 0;
    *pool_index = hilo_pool_lookup(dboid, seq_id);
    if (*pool_index < 0)
        return 0;
    HiloPool *pool = hilo_pool_at(*pool_index);
    uint64 taken = 0;
    LWLockAcquire(&pool->lock, LW_EXCLUSIVE);
    *generation = pg_atomic_read_u64(&pool->generation);
    if (pool->in_use && pool->dboid == dboid && pool->seq_id == seq_id) {
        taken = hilo_list_take_lowest(pool->ranges, &pool->nranges, n, out, out_capacity, nout);
        pool->ids -= taken;
        pool->issued += taken;
    }
    LWLockRelease(&pool->lock);
    return taken;
}

bool hilo_pool_add_inflight(int pool_index, uint64 generation, const HiloRange *ranges,
                            uint32 nranges)
{
    HiloPool *pool = hilo_pool_at(pool_index);
    bool ok;
    LWLockAcquire(&pool->lock, LW_EXCLUSIVE);
    ok = pg_atomic_read_u64(&pool->generation) == generation &&
         pool->ninflight + nranges <= HILO_POOL_INFLIGHT;
    if (ok) {
        memcpy(pool->inflight + pool->ninflight, ranges, sizeof(HiloRange) * nranges);
        pool->ninflight += nranges;
    }
    LWLockRelease(&pool->lock);
    return ok;
}

void hilo_pool_settle_inflight(int pool_index, uint64 generation, const HiloRange *ranges,
                               uint32 nranges, bool committed, bool exhausted,
                               bool free_list_drained)
{
    HiloPool *pool = hilo_pool_at(pool_index);
    LWLockAcquire(&pool->lock, LW_EXCLUSIVE);
    if (pg_atomic_read_u64(&pool->generation) == generation) {
        pool->ninflight = 0;
        if (committed) {
            put_in_pool_locked(pool, ranges, nranges, false);
            pool->exhausted = exhausted;
            if (free_list_drained)
                pool->free_list_pending = false;
        }
        note_low_water(pool);
    }
    LWLockRelease(&pool->lock);
}

HiloSeqRange *hilo_pool_drain_database(Oid dboid, int wait_ms, uint32 *count)
{
    /* Give exiting backends a moment to hand their buffers back; but not
     * while a caller waits for this database's allocator: the backends
     * holding buffers may not be exiting at all (only the allocator was
     * terminated), and the caller is served by the next one. */
    for (int waited = 0; waited < wait_ms; waited += 10) {
        bool any = false;
        LWLockAcquire(hilo_shared->lock, LW_SHARED);
        for (int s = 0; s < hilo_shared->num_requests && !any; s++)
            any = hilo_shared->requests[s].dboid == dboid &&
                  hilo_shared->requests[s].state == HILO_REQ_SUBMITTED;
        LWLockRelease(hilo_shared->lock);
        if (any)
            break;
        for (int s = 0; s < hilo_shared->num_requests && !any; s++) {
            if (s == MyProc->pgprocno)
                continue;
            for (int b = 0; b < HILO_BUFFERS_PER_BACKEND && !any; b++) {
                HiloBuffer *buf = &hilo_shared->slots[s].buffers[b];
                any = buf->in_use && buf->dboid == dboid;
            }
        }
        if (!any)
            break;
        pg_usleep(10000L);
    }

    uint32 capacity = 16, n = 0;
    HiloSeqRange *out = (HiloSeqRange *)palloc(sizeof(HiloSeqRange) * capacity);
    for (int i = 0; i < hilo_shared->num_pools; i++) {
        HiloPool *pool = &hilo_shared->pools[i];
        HiloRange ranges[HILO_POOL_RANGES];
        uint32 nranges = 0;
        int32 seq_id = 0;

        LWLockAcquire(&pool->lock, LW_EXCLUSIVE);
        /* Monotonic sequences never recycle: their leftovers stay a gap. */
        if (pool->in_use && pool->dboid == dboid && !pool->monotonic) {
            nranges = pool->nranges;
            memcpy(ranges, pool->ranges, sizeof(HiloRange) * nranges);
            seq_id = pool->seq_id;
            pool->nranges = 0;
            pool->ids = 0;
        }
        LWLockRelease(&pool->lock);

        for (uint32 r = 0; r < nranges; r++) {
            if (n == capacity) {
                capacity *= 2;
                out = (HiloSeqRange *)repalloc(out, sizeof(HiloSeqRange) * capacity);
            }
            out[n].seq_id = seq_id;
            out[n].range = ranges[r];
            n++;
        }
    }
    *count = n;
    return out;
}

void hilo_pool_update_rates(Oid dboid)
{
    TimestampTz now = GetCurrentTimestamp();
    for (int i = 0; i < hilo_shared->num_pools; i++) {
        HiloPool *pool = &hilo_shared->pools[i];
        LWLockAcquire(&pool->lock, LW_EXCLUSIVE);
        if (pool->in_use && pool->dboid == dboid) {
            double seconds = (double)(now - pool->rate_time) / 1e6;
            if (seconds >= 1.0) {
                double recent =
                    (double)(pool->issued - Min(pool->issued, pool->rate_issued)) / seconds;
                /* Exponentially weighted: about the last minute counts. */
                double weight = Min(1.0, seconds / 60.0);
                pool->rate = pool->rate == 0 ? recent : pool->rate + weight * (recent - pool->rate);
                pool->rate_issued = pool->issued;
                pool->rate_time = now;
            }
        }
        LWLockRelease(&pool->lock);
    }
}
