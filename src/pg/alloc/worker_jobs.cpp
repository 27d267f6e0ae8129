/*
 * alloc/worker_jobs.cpp: one job of a batch, in a subtransaction of its
 * own: a caller's take, a pool refill, or the takes of one sequence that
 * share one reservation.
 */
#include "worker.h"

extern "C" {
#include "access/xact.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
}

/* Takes that share one reservation at most (hilo_worker_run_takes_together). */
#define HILO_MAX_BATCH_SHARE 64

void hilo_worker_fail_job(BatchJob *job, int sqlerrcode, const char *message_format,
                          const char *detail, const char *hint)
{
    MemoryContext old = MemoryContextSwitchTo(hilo_worker.context);
    job->sqlerrcode = sqlerrcode;
    job->message = psprintf(message_format, job->seq_name);
    job->detail = pstrdup(detail);
    job->hint = pstrdup(hint);
    MemoryContextSwitchTo(old);
}

/* Turns the error being handled into the outcome of `job`, in hilo_worker.context. */
static void record_error(BatchJob *job)
{
    MemoryContext old = MemoryContextSwitchTo(hilo_worker.context);
    ErrorData *edata = CopyErrorData();
    FlushErrorState();
    if (edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE) {
        hilo_worker_fail_job(job, edata->sqlerrcode,
                             "hilo sequence \"%s\" is locked by a concurrent hilo_drop or "
                             "settings change",
                             "", "Retry once that transaction has ended.");
    } else {
        job->sqlerrcode = edata->sqlerrcode;
        job->message = pstrdup(edata->message ? edata->message : "unknown error");
        job->detail = pstrdup(edata->detail ? edata->detail : "");
        job->hint = pstrdup(edata->hint ? edata->hint : "");
    }
    FreeErrorData(edata);
    MemoryContextSwitchTo(old);
}

static void keep_ranges(BatchJob *job, const HiloRange *ranges, uint32 count)
{
    job->ranges =
        (HiloRange *)MemoryContextAlloc(hilo_worker.context, sizeof(HiloRange) * Max(count, 1));
    if (count > 0) /* `ranges` may be NULL then */
        memcpy(job->ranges, ranges, sizeof(HiloRange) * count);
    job->count = count;
}

/*
 * A take: pushed-back IDs first (rule 3), then open windows and fresh
 * claims. The pool, which nextval and small takes live on, is drawn on only
 * when the catalog has no more to give (the end of the sequence), so that
 * a large take does not leave them waiting for a refill.
 */
static void run_take(BatchJob *job)
{
    uint64 n = (uint64)job->n;
    /* A take that fails unless whole claims beyond its windows only what
     * lets it succeed: a claim through the quorum register outlives the
     * rollback of a failed take (rule 5). */
    uint64 pool_ids = 0, generation;
    int pool_index = hilo_pool_lookup(MyDatabaseId, job->creation, job->seq_id, &generation);
    if (pool_index >= 0)
        pool_ids = hilo_pool_ids_above(pool_index, generation, 0);
    /* Free ranges, then windows, then a claim: one reservation, one lock
     * of the sequence row. */
    HiloReserveOptions options = {true, true, 0, true, !job->partial, pool_ids};
    HiloReservation fresh;
    hilo_reserve(job->seq_id, job->seq_name, n, &options, &fresh);

    uint64 borrowed = 0;
    if (fresh.ids < n && pool_index >= 0 && hilo_pool_ids_above(pool_index, generation, 0) > 0) {
        /*
         * Only at the end of a sequence. Borrowed IDs are in neither the
         * pool nor anybody's hands, where a push check would see them: the
         * sequence's push lock, held from here to the end of this
         * subtransaction (to the batch's commit if the take succeeds),
         * makes a push wait meanwhile, as the release of an idle pool
         * does. The allocator never waits for a user's transaction: if a
         * pusher holds it, 55006.
         */
        if (!hilo_try_lock_sequence_for_push(job->seq_id))
            ereport(
                ERROR,
                (errcode(ERRCODE_OBJECT_IN_USE),
                 errmsg("hilo sequence \"%s\" is in use by a concurrent hilo_push", job->seq_name),
                 errdetail("This take needs the IDs its pool still holds (the end of the "
                           "sequence), and a push of the sequence has not ended yet."),
                 errhint("Retry once that transaction has ended.")));
        /* Room for all a pool can hold. */
        job->borrowed = (HiloRange *)MemoryContextAlloc(hilo_worker.context,
                                                        sizeof(HiloRange) * HILO_POOL_MAX_RANGES);
        borrowed = hilo_pool_borrow(MyDatabaseId, job->creation, job->seq_id, n - fresh.ids,
                                    job->borrowed, HILO_POOL_MAX_RANGES, &job->nborrowed,
                                    &job->borrow_pool, &job->borrow_generation);
    }
    uint64 got = borrowed + fresh.ids;
    if (got < n && (!job->partial || got == 0)) {
        /* Back into the pool while the push lock is still held: a take that
         * fails changes nothing. */
        if (job->nborrowed > 0)
            hilo_pool_put_back(job->borrow_pool, job->borrow_generation, job->borrowed,
                               job->nborrowed);
        job->nborrowed = 0;
        int64 floor, top;
        (void)hilo_sequence_bounds(job->seq_name, fresh.node_bits, fresh.max_value, false, &floor,
                                   &top);
        hilo_raise_short(job->seq_name, got + fresh.left_unclaimed, n, fresh.max_value, top);
    }
    job->borrowed_ids = borrowed;

    uint32 total = job->nborrowed + fresh.count;
    HiloRange *all = (HiloRange *)palloc(sizeof(HiloRange) * (total + 1));
    /* A part with no ranges may have no array at all (memcpy from NULL is
     * undefined even for zero bytes). */
    if (job->nborrowed > 0)
        memcpy(all, job->borrowed, sizeof(HiloRange) * job->nborrowed);
    if (fresh.count > 0)
        memcpy(all + job->nborrowed, fresh.ranges, sizeof(HiloRange) * fresh.count);
    keep_ranges(job, all, (uint32)hilo_ranges_normalize(all, total));
    job->ids = got;
}

/* A pool refill, registered as in flight so pushes see it until published. */
static void run_pool_refill(BatchJob *job)
{
    HiloPoolJob *pj = &job->pool;
    HiloReserveOptions options;
    options.use_free_list = !pj->fresh_only;
    options.use_windows = !pj->free_list_only;
    options.max_ranges = pj->max_ranges;
    /* A single node claims beyond its windows at once; in a cluster that
     * waits for a majority, so a refill takes what the open windows hold
     * (the agent keeps them stocked) and claims only if they are empty. */
    options.claim_beyond_windows = !hilo_window_source_active();
    options.whole_claim = false;
    options.pool_ids = 0;

    HiloReservation res;
    hilo_reserve(pj->seq_id, job->seq_name[0] ? job->seq_name : "?", pj->amount, &options, &res);
    if (res.count > 0 &&
        !hilo_pool_add_inflight(pj->pool_index, pj->generation, res.ranges, res.count)) {
        /* Released, taken for another sequence or invalidated since the job
         * was made: roll the reservation back; the caller, told "done",
         * finds its pool stale and looks again. */
        job->stale = true;
        ereport(ERROR,
                (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                 errmsg("the pool of hilo sequence \"%s\" changed during its refill",
                        job->seq_name[0] ? job->seq_name : "?"),
                 errdetail("The sequence was dropped or changed meanwhile, or other refills of "
                           "it were still being published. Nothing was handed out."),
                 errhint("Retry the call.")));
    }
    keep_ranges(job, res.ranges, res.count);
    job->ids = res.ids;
    job->inflight = res.count > 0;
    job->free_list_drained = res.free_list_drained;
    /* Windows could not give what was asked: the sequence is at its end. */
    job->exhausted = options.use_windows && res.ids < pj->amount;
}

static void run_job_body(void *arg)
{
    BatchJob *job = (BatchJob *)arg;
    if (job->kind == JOB_TAKE)
        run_take(job);
    else
        run_pool_refill(job);
}

static void run_job_failed(void *arg)
{
    BatchJob *job = (BatchJob *)arg;
    hilo_free_scan_reset(); /* rows it consumed are back */
    record_error(job);
    if (job->stale)
        job->sqlerrcode = 0; /* not an error for the caller */
}

void hilo_worker_run_job(BatchJob *job)
{
    if (!hilo_worker.catalog_missing && job->creation != hilo_worker.current_creation &&
        job->kind == JOB_POOL) {
        /* A pool of a catalog that is gone (freed by now): the caller finds
         * it stale and looks its sequence up again. */
        job->pool.pool_index = -1;
        return;
    }
    if (hilo_worker.catalog_missing || job->creation != hilo_worker.current_creation) {
        /* Asked of a catalog that is gone: reserving in the current one
         * would hand out IDs that sequence's own pools may hold too. */
        if (hilo_worker.catalog_missing)
            hilo_worker_fail_job(job, ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                                 "the hilo catalog of sequence \"%s\" was dropped",
                                 "No IDs were handed out.", "Run CREATE EXTENSION hilo.");
        else
            hilo_worker_fail_job(job, ERRCODE_T_R_SERIALIZATION_FAILURE,
                                 "the hilo catalog of sequence \"%s\" was dropped and created "
                                 "again",
                                 "No IDs were handed out.", "Retry the call.");
        return;
    }

    if (!hilo_run_in_subtransaction(run_job_body, job, run_job_failed)) {
        job->count = 0;
        job->ids = 0;
        if (job->inflight) {
            hilo_pool_settle_inflight(job->pool.pool_index, job->pool.generation, NULL, 0, false,
                                      false, false);
            job->inflight = false;
        }
    }
}

/* A take that may share one reservation with others of its sequence: it
 * must be served whole, from the current catalog, on a node that claims
 * its own windows (a claim through the quorum register outlives a rollback,
 * so there each take keeps its own). */
bool hilo_worker_may_share(const BatchJob *job)
{
    return job->kind == JOB_TAKE && !job->partial && !job->share_tried &&
           !hilo_worker.catalog_missing && job->creation == hilo_worker.current_creation &&
           !hilo_worker.batch_in_cluster;
}

/* One reservation of `total` IDs, cut into the members' shares in batch
 * order; raises if the catalog cannot give all of it. */
static void reserve_and_share(const int *members, int nmembers, uint64 total)
{
    BatchJob *lead = &hilo_worker.batch[members[0]];
    HiloReserveOptions options = {true, true, 0, true, true, 0};
    HiloReservation res;
    hilo_reserve(lead->seq_id, lead->seq_name, total, &options, &res);
    if (res.ids != total)
        elog(ERROR, "hilo: short of IDs for takes together"); /* each alone, below */
    /* Cut the sorted ranges into the takes' shares, in batch order. */
    uint32 r = 0;
    HiloRange rest = res.ranges[0];
    HiloRange *share = (HiloRange *)palloc(sizeof(HiloRange) * (res.count + 1));
    for (int m = 0; m < nmembers; m++) {
        BatchJob *job = &hilo_worker.batch[members[m]];
        uint64 want = (uint64)job->n;
        uint32 count = 0;
        while (want > 0) {
            HiloRange got = hilo_take_prefix(rest, want);
            share[count++] = got;
            want -= hilo_range_length(got);
            if (got.last == rest.last) {
                if (++r < res.count)
                    rest = res.ranges[r];
            } else {
                rest.first = got.last + 1;
            }
        }
        keep_ranges(job, share, count);
        job->ids = (uint64)job->n;
    }
}

static void try_shared_reservation(const int *members, int nmembers, uint64 total);

/*
 * Takes of one sequence in the same batch, each to be served whole: one
 * reservation for all of them, split in batch order (the first gets the
 * lowest IDs), so that k callers cost one lock of the sequence row and one
 * pass over its free list and windows instead of k. Only if it gives every
 * one all its IDs; otherwise its subtransaction rolls back, nothing of it
 * remains, and each take runs alone as before (its own error, IDs borrowed
 * from the pool at the end of the sequence).
 */
void hilo_worker_run_takes_together(int first)
{
    BatchJob *lead = &hilo_worker.batch[first];
    int members[HILO_MAX_BATCH_SHARE];
    int nmembers = 0;
    uint64 total = 0;
    for (int i = first; i < hilo_worker.batch_len && nmembers < HILO_MAX_BATCH_SHARE; i++) {
        BatchJob *job = &hilo_worker.batch[i];
        if (hilo_worker_may_share(job) && job->seq_id == lead->seq_id &&
            job->creation == lead->creation && (uint64)job->n <= PG_INT64_MAX - total) {
            members[nmembers++] = i;
            total += (uint64)job->n;
        }
    }
    if (nmembers < 2)
        return;
    for (int m = 0; m < nmembers; m++)
        hilo_worker.batch[members[m]].share_tried = true;
    try_shared_reservation(members, nmembers, total);
}

/* reserve_and_share in a subtransaction; on any error nothing of it
 * remains and the members are left to run alone. */
typedef struct SharedReservation {
    const int *members;
    int nmembers;
    uint64 total;
} SharedReservation;

static void shared_reservation_body(void *arg)
{
    SharedReservation *s = (SharedReservation *)arg;
    reserve_and_share(s->members, s->nmembers, s->total);
}

/* The free-list rows it consumed are back: the members, run alone, read
 * each free list from its start again (as run_job_failed does). */
static void shared_reservation_failed(void *arg)
{
    (void)arg;
    hilo_free_scan_reset();
}

static void try_shared_reservation(const int *members, int nmembers, uint64 total)
{
    SharedReservation s = {members, nmembers, total};
    if (hilo_run_in_subtransaction(shared_reservation_body, &s, shared_reservation_failed)) {
        for (int m = 0; m < nmembers; m++)
            hilo_worker.batch[members[m]].served_together = true;
        return;
    }
    for (int m = 0; m < nmembers; m++) {
        BatchJob *job = &hilo_worker.batch[members[m]];
        if (job->ranges) {
            pfree(job->ranges);
            job->ranges = NULL;
        }
        job->count = 0;
        job->ids = 0;
    }
}
