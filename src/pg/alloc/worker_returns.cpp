/*
 * alloc/worker_returns.cpp: IDs going back to the free list from the
 * allocator: results whose callers gave up, what the pools hold at a clean
 * shutdown, and the pools that have been idle for a while.
 */
#include "worker.h"

extern "C" {
#include "access/xact.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
}

/* Pools one release or write-back transaction gives back at most (each
 * holds a lock). */
#define HILO_RELEASE_PER_TRANSACTION 1000

/* How long a clean shutdown waits for backends to give back their buffers. */
#define HILO_SHUTDOWN_WAIT_MS 5000

void hilo_worker_queue_return(uint64 creation, int32 seq_id, const HiloRange *ranges, uint32 count)
{
    if (count == 0)
        return;
    MemoryContext old = MemoryContextSwitchTo(hilo_worker.context);
    PendingReturn *pr = (PendingReturn *)palloc(sizeof(PendingReturn));
    pr->creation = creation;
    pr->seq_id = seq_id;
    pr->count = count;
    pr->done = false;
    pr->ranges = (HiloRange *)palloc(sizeof(HiloRange) * count);
    memcpy(pr->ranges, ranges, sizeof(HiloRange) * count);
    hilo_worker.pending_returns = lappend(hilo_worker.pending_returns, pr);
    MemoryContextSwitchTo(old);
}

/*
 * After the transaction that ran hilo_worker_return_abandoned: if it committed,
 * the entries it put back leave the list; if not, they stay for the next
 * try. The list is rebuilt in hilo_worker.context.
 */
void hilo_worker_settle_returns(bool committed)
{
    MemoryContext old = MemoryContextSwitchTo(hilo_worker.context);
    List *keep = NIL;
    ListCell *lc;
    foreach (lc, hilo_worker.pending_returns) {
        PendingReturn *pr = (PendingReturn *)lfirst(lc);
        if (committed && pr->done) {
            pfree(pr->ranges);
            pfree(pr);
            continue;
        }
        pr->done = false;
        keep = lappend(keep, pr);
    }
    list_free(hilo_worker.pending_returns);
    hilo_worker.pending_returns = keep;
    MemoryContextSwitchTo(old);
}

/* One abandoned return, in a subtransaction of its own. */
static void return_one(void *arg)
{
    PendingReturn *pr = (PendingReturn *)arg;
    /* A pusher of the same sequence holds this lock until it commits;
     * rather than wait on a user's transaction, try again later. */
    if (hilo_try_lock_sequence_for_push(pr->seq_id)) {
        hilo_unreserve(pr->seq_id, pr->ranges, pr->count);
        pr->done = true;
    }
}

static void report_error(void *arg)
{
    (void)arg;
    EmitErrorReport();
}

/*
 * Gives back IDs whose callers abandoned them. Inside a transaction; the
 * list is only read here (hilo_worker_settle_returns changes it after the
 * transaction has ended). Each return runs in a subtransaction of its own,
 * so that one that fails does not undo the batch; it is logged and given
 * up (its IDs are skipped, never handed out twice).
 */
void hilo_worker_return_abandoned(void)
{
    ListCell *lc;
    foreach (lc, hilo_worker.pending_returns) {
        PendingReturn *pr = (PendingReturn *)lfirst(lc);
        if (hilo_worker.catalog_missing || pr->creation != hilo_worker.current_creation) {
            /* Reserved in a catalog that is gone: a gap. */
            pr->done = true;
            continue;
        }
        if (!hilo_run_in_subtransaction(return_one, pr, report_error)) {
            elog(LOG,
                 "hilo: could not put back %u abandoned ranges of sequence %d; they are skipped",
                 pr->count, pr->seq_id);
            pr->done = true;
        }
        if (pr->done)
            hilo_worker_merge_again(false);
    }
}

/* The pool slots one write-back transaction looks at (each pool of this
 * database among them holds a lock). */
typedef struct WriteBack {
    int from;
    int to;
} WriteBack;

static void write_back_body(void *arg)
{
    WriteBack *wb = (WriteBack *)arg;
    if (!hilo_worker_read_creation())
        return;
    if (wb->from == 0)
        hilo_worker_return_abandoned(); /* what cannot go back now is skipped */
    HiloRange *ranges = (HiloRange *)palloc(sizeof(HiloRange) * HILO_POOL_MAX_RANGES);
    for (int i = wb->from; i < wb->to; i++) {
        int32 seq_id;
        uint64 generation, creation = 0;
        if (!hilo_pool_holds_recyclable(i, MyDatabaseId, &seq_id, &generation))
            continue;
        /* As in release_body: held to commit, taken before the IDs leave
         * the pool, so that a concurrent push sees them in the pool or on
         * the free list, never in neither. A pusher holding it keeps them
         * in the pool (a gap if the server is stopping). */
        if (!hilo_try_lock_sequence_for_push(seq_id))
            continue;
        uint32 nranges = hilo_pool_empty(i, generation, ranges, &creation);
        /* Pools of a catalog dropped since hold a gap, nothing to give back. */
        if (nranges > 0 && creation == hilo_worker.current_creation)
            hilo_unreserve(seq_id, ranges, nranges);
    }
    pfree(ranges);
}

/*
 * Clean shutdown: backends exiting give their buffers back to the pools;
 * once they have (or after a few seconds), the pools go back to the free
 * list, so the next start continues from the lowest unused ID.
 */
void hilo_worker_write_back_pools(void)
{
    hilo_pool_wait_for_buffers(MyDatabaseId, HILO_SHUTDOWN_WAIT_MS);
    for (int from = 0; from < hilo_shared->num_pools; from += HILO_RELEASE_PER_TRANSACTION) {
        WriteBack wb = {from, Min(from + HILO_RELEASE_PER_TRANSACTION, hilo_shared->num_pools)};
        bool any = from == 0 && hilo_worker.pending_returns != NIL;
        for (int i = wb.from; i < wb.to && !any; i++) {
            int32 seq_id;
            uint64 generation;
            any = hilo_pool_holds_recyclable(i, MyDatabaseId, &seq_id, &generation);
        }
        if (any &&
            !hilo_worker_run_in_transaction(write_back_body, &wb, "hilo: writing pools back"))
            elog(LOG, "hilo: could not write pooled IDs back to the free list; they are skipped");
    }
}

/* ---- giving idle pools back, and exiting when idle ---- */

static void release_body(void *arg)
{
    ReleasePass *rp = (ReleasePass *)arg;
    HiloRange *ranges = (HiloRange *)palloc(sizeof(HiloRange) * HILO_POOL_MAX_RANGES);
    if (!hilo_worker_read_creation())
        return; /* the catalog is gone: the allocator frees every pool and exits */
    for (int i = 0; i < rp->ncandidates; i++) {
        /* Held to commit: a concurrent push of the same sequence checks the
         * pool and the free list under this lock, so it sees these IDs in
         * the one or the other (committed), never in neither. */
        if (!hilo_try_lock_sequence_for_push(rp->seq_ids[i])) {
            rp->skipped++;
            continue;
        }
        uint32 nranges;
        int32 seq_id;
        bool monotonic;
        if (!hilo_pool_release_begin(rp->indexes[i], rp->generations[i], rp->idle_before, rp->all,
                                     ranges, &nranges, &seq_id, &monotonic))
            continue; /* used again meanwhile */
        rp->released[rp->nreleased++] = rp->indexes[i];
        /* A monotonic sequence never hands out IDs below those handed out:
         * its leftovers stay a gap, as on a clean shutdown. */
        /* Nor do pools of a catalog dropped since (their IDs are a gap). */
        if (!monotonic && nranges > 0 &&
            hilo_pool_at(rp->indexes[i])->creation == hilo_worker.current_creation) {
            hilo_unreserve(seq_id, ranges, nranges);
            rp->wrote = true;
        }
    }
}

/*
 * Gives the IDs of idle pools back to the free list, in a transaction of
 * its own, and frees their slots once it has committed (if it fails, the
 * IDs are skipped: a gap, never a repeat). Returns false if some pool could
 * not be released now.
 */
bool hilo_worker_release_idle_pools(TimestampTz idle_before, bool all)
{
    ReleasePass *rp = &hilo_worker.release_pass;
    /* Each pool takes a lock held to commit: a bounded number per transaction. */
    int per_transaction = Min(hilo_shared->num_pools, HILO_RELEASE_PER_TRANSACTION);
    bool all_done = true;
    for (;;) {
        rp->idle_before = idle_before;
        rp->all = all;
        rp->nreleased = 0;
        rp->skipped = 0;
        rp->wrote = false;
        rp->ncandidates =
            hilo_pool_release_candidates(MyDatabaseId, idle_before, all, rp->indexes,
                                         rp->generations, rp->seq_ids, per_transaction);
        if (rp->ncandidates == 0)
            return all_done;
        bool ok = hilo_worker_run_in_transaction(release_body, rp, "hilo: giving idle pools back");
        for (int i = 0; i < rp->nreleased; i++)
            hilo_pool_release_finish(rp->released[i]);
        int released = rp->nreleased;
        rp->nreleased = 0; /* finished: the exit callback has nothing left to free */
        if (!ok && released > 0)
            ereport(LOG, (errmsg("hilo: could not give the IDs of %d idle pools back to the free "
                                 "list; they are skipped",
                                 released)));
        if (rp->wrote && ok)
            hilo_worker_merge_again(false);
        if (released > 0)
            elog(DEBUG1, "hilo: released %d idle pools", released);
        all_done &= ok && rp->skipped == 0;
        /* More than one transaction's worth, and this one got somewhere: go on. */
        if (rp->ncandidates < per_transaction || released == 0 || !ok)
            return all_done;
    }
}
