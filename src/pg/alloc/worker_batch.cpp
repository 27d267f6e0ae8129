/*
 * alloc/worker_batch.cpp: one batch of the allocator. It collects every job
 * waiting at one wake-up from the request slots and the pools, runs them in
 * one transaction, each in its own subtransaction (worker_jobs.cpp), so
 * that one failure (exhaustion, a dropped sequence) fails only its own job.
 * The WAL of its commit is flushed before any pool is refilled, and before
 * any caller's IDs leave the caller's backend (which flushes it itself when
 * the allocator did not wait: callers_flush), so a crash after a caller saw
 * IDs can never hand them out again. One commit serves the whole batch.
 */
#include "worker.h"

extern "C" {
#include "access/xact.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "postmaster/interrupt.h"
#include "replication/syncrep.h"
#include "replication/walsender.h"
#include "replication/walsender_private.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/guc.h"
#include "utils/memutils.h"
}

static void forget_retained(int slot)
{
    if (hilo_worker.retained[slot].ranges != NULL)
        pfree(hilo_worker.retained[slot].ranges);
    memset(&hilo_worker.retained[slot], 0, sizeof(RetainedResult));
}

/* Copies the next chunk of a retained result into its slot. Lock held. */
static void publish_chunk_locked(HiloRequest *req, RetainedResult *r)
{
    uint32 n = Min((uint32)HILO_REPLY_RANGES, r->count - r->published);
    memcpy(req->ranges, r->ranges + r->published, sizeof(HiloRange) * n);
    req->nranges = n;
    req->total_ranges = r->count;
    r->published += n;
    req->last_chunk = r->published == r->count;
    req->flush_lsn = r->flush_lsn;
    req->sqlerrcode = 0;
    req->state = HILO_REQ_READY;
}

static void copy_message(char *dst, const char *src)
{
    strlcpy(dst, src ? src : "", HILO_MESSAGE_BYTES);
}

/* Fills a slot's reply with an error or an empty success. Lock held. */
static void reply_locked(HiloRequest *req, int sqlerrcode, const char *message, const char *detail,
                         const char *hint)
{
    req->sqlerrcode = sqlerrcode;
    copy_message(req->message, message);
    copy_message(req->detail, detail);
    copy_message(req->hint, hint);
    req->nranges = 0;
    req->total_ranges = 0;
    req->last_chunk = true;
    req->flush_lsn = 0;
    req->state = HILO_REQ_READY;
}

static BatchJob *new_job(JobKind kind, int slot)
{
    BatchJob *job = &hilo_worker.batch[hilo_worker.batch_len++];
    memset(job, 0, sizeof(*job));
    job->kind = kind;
    job->slot = slot;
    job->leader = -1;
    return job;
}

/* A job already in the batch for this pool, or -1. */
static int job_for_pool(int pool_index)
{
    for (int i = 0; i < hilo_worker.batch_len; i++)
        if (hilo_worker.batch[i].kind == JOB_POOL && hilo_worker.batch[i].leader < 0 &&
            hilo_worker.batch[i].pool.pool_index == pool_index)
            return i;
    return -1;
}

/*
 * Callers' refill requests: one job per pool, the others follow it. A
 * follower that needs fresh IDs (its session's last ID lies above every
 * ID the pool holds) makes its leader's refill fresh, and as large as
 * it asked: a refill from the free list lies below that session, which
 * would find its buffer empty after every such refill it followed and
 * take itself for exhausted (seen in test/t/057 with two sessions on a
 * fragmented free list). The free list is left for later refills.
 */
static void lead_pool_requests(void)
{
    for (int i = 0; i < hilo_worker.batch_len; i++) {
        BatchJob *job = &hilo_worker.batch[i];
        if (job->kind != JOB_POOL)
            continue;
        int leader = job_for_pool(job->pool.pool_index);
        if (leader >= 0 && leader < i) {
            BatchJob *lead = &hilo_worker.batch[leader];
            lead->pool.fresh_only |= job->pool.fresh_only;
            lead->n = Max(lead->n, job->n);
            job->leader = leader;
        }
    }
    /* Then each leader, with what its followers asked, finds its pool. */
    for (int i = 0; i < hilo_worker.batch_len; i++) {
        BatchJob *job = &hilo_worker.batch[i];
        if (job->kind != JOB_POOL || job->leader >= 0)
            continue;
        int32 wanted_seq = job->seq_id;
        if (!hilo_pool_job_for_request(job->pool.pool_index, (uint64)job->n, job->pool.fresh_only,
                                       &job->pool) ||
            job->pool.seq_id != wanted_seq || job->pool.creation != job->creation)
            job->pool.pool_index = -1; /* stale (or released and reused): the caller looks again */
    }
}

/*
 * Looks at every slot of this database once: takes new requests into the
 * batch, serves next-chunk requests, notes abandoned results and drops
 * results whose callers are done. Then adds the pools that want a refill.
 */
static void collect_jobs(void)
{
    int nwake = 0, nabandoned = 0;

    hilo_worker.batch_len = 0;
    LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
    for (int slot = 0; slot < hilo_shared->num_requests; slot++) {
        HiloRequest *req = &hilo_shared->requests[slot];
        RetainedResult *r = &hilo_worker.retained[slot];

        if (req->dboid != MyDatabaseId) {
            /* The slot went idle and a backend of another database (its
             * PGPROC reused) wrote a request into it: the caller this
             * result was for is done. Kept, it would hold this allocator
             * up for ever (never idle, refusing to be evicted). */
            if (r->ranges != NULL)
                forget_retained(slot);
            continue;
        }
        if (r->ranges != NULL && (req->request_id != r->request_id || req->state == HILO_REQ_IDLE))
            forget_retained(slot); /* the caller has everything */

        switch (req->state) {
            case HILO_REQ_SUBMITTED:
                if (req->kind == HILO_REQUEST_NEXT_CHUNK) {
                    if (r->ranges != NULL && r->request_id == req->request_id) {
                        r->consumed = r->published;
                        publish_chunk_locked(req, r);
                    } else {
                        /* The allocator that had the rest has gone (this
                         * is a new one): like a caller that sees it go. */
                        char message[HILO_MESSAGE_BYTES];
                        snprintf(message, sizeof(message),
                                 "the hilo allocator exited before sending all of a reservation "
                                 "for sequence \"%s\"",
                                 req->seq_name);
                        reply_locked(req, ERRCODE_OPERATOR_INTERVENTION, message,
                                     "No IDs were handed out; whatever it had reserved is "
                                     "skipped, never handed out twice.",
                                     "Retry the call.");
                    }
                    hilo_worker.slots_to_wake[nwake++] = slot;
                } else {
                    BatchJob *job =
                        new_job(req->kind == HILO_REQUEST_TAKE ? JOB_TAKE : JOB_POOL, slot);
                    job->request_id = req->request_id;
                    job->seq_id = req->seq_id;
                    job->creation = req->creation;
                    strlcpy(job->seq_name, req->seq_name, sizeof(job->seq_name));
                    job->n = req->n;
                    job->partial = req->partial;
                    /* For JOB_POOL, filled in below, outside the lock. */
                    job->pool.pool_index = req->pool_index;
                    job->pool.fresh_only = req->fresh_only;
                    req->state = HILO_REQ_RUNNING;
                }
                break;
            case HILO_REQ_ABANDONED:
                if (r->ranges != NULL && r->request_id == req->request_id) {
                    /* A pending next-chunk means the last chunk was copied. */
                    if (req->kind == HILO_REQUEST_NEXT_CHUNK)
                        r->consumed = r->published;
                    hilo_worker.slots_abandoned[nabandoned++] = slot;
                }
                req->state = HILO_REQ_IDLE;
                break;
            default:
                break;
        }
    }
    LWLockRelease(hilo_shared->lock);

    for (int i = 0; i < nabandoned; i++) {
        RetainedResult *r = &hilo_worker.retained[hilo_worker.slots_abandoned[i]];
        hilo_worker_queue_return(r->creation, r->seq_id, r->ranges + r->consumed,
                                 r->count - r->consumed);
        forget_retained(hilo_worker.slots_abandoned[i]);
    }
    for (int i = 0; i < nwake; i++)
        hilo_wake_process(hilo_worker.slots_to_wake[i]);

    lead_pool_requests();
    /* The allocator's own refills, for pools below their low-water mark. */
    int njobs = hilo_pool_collect_jobs(MyDatabaseId, hilo_worker.pool_jobs, hilo_shared->num_pools);
    for (int i = 0; i < njobs && hilo_worker.batch_len < hilo_worker.batch_capacity; i++) {
        if (job_for_pool(hilo_worker.pool_jobs[i].pool_index) >= 0)
            continue;
        BatchJob *job = new_job(JOB_POOL, -1);
        job->pool = hilo_worker.pool_jobs[i];
        job->seq_id = hilo_worker.pool_jobs[i].seq_id;
        job->creation = hilo_worker.pool_jobs[i].creation;
    }
}

static void serve_batch_body(void *arg)
{
    (void)hilo_worker_read_creation();
    hilo_worker.batch_in_cluster = !hilo_worker.catalog_missing && hilo_window_source_active();
    hilo_worker_return_abandoned();
    for (int i = 0; i < hilo_worker.batch_len; i++) {
        BatchJob *job = &hilo_worker.batch[i];
        if (job->leader >= 0 || (job->kind == JOB_POOL && job->pool.pool_index < 0))
            continue;
        if (hilo_worker_may_share(job))
            hilo_worker_run_takes_together(i);
        if (!job->served_together)
            hilo_worker_run_job(job);
    }
}

/*
 * Whether the synchronous standbys confirmed the commit that ended at
 * `commit_end`, or none were asked to. The commit returns even when its wait
 * for them was cut short: by a query cancel (pg_cancel_backend on the
 * allocator), or by the death of the postmaster. PostgreSQL then only warns
 * that the transaction "might not have been replicated". IDs from such a
 * commit must not be handed out: a standby promoted next would not know
 * they were reserved and would hand them out again. The allocator commits
 * with synchronous_commit = on, so the position that counts is the standbys'
 * flush. This mirrors the test SyncRepWaitForLSN makes before it waits.
 */
static bool confirmed_by_sync_standbys(XLogRecPtr commit_end)
{
    if (!SyncRepRequested())
        return true;
    bool named = SyncRepStandbyNames != NULL && SyncRepStandbyNames[0] != '\0';
    LWLockAcquire(SyncRepLock, LW_SHARED);
    XLogRecPtr confirmed = WalSndCtl->lsn[SYNC_REP_WAIT_FLUSH];
    bool waits = hilo_sync_standbys_waited(named);
    LWLockRelease(SyncRepLock);
    return !waits || commit_end <= confirmed;
}

/*
 * Settles every job after its transaction: pool IDs in flight go into their
 * pool (or are forgotten), failures are recorded, borrowed pool IDs of a
 * failed take go back. Everything that allocates or takes pool locks
 * happens here, before publish takes the shared lock.
 */
static void settle_jobs(bool committed, bool unconfirmed)
{
    for (int i = 0; i < hilo_worker.batch_len; i++) {
        BatchJob *job = &hilo_worker.batch[i];
        if (job->leader >= 0)
            continue;
        bool reserved = committed && job->sqlerrcode == 0;
        /*
         * In flight until now: into the pool if committed, else forgotten.
         * Every pool job settles, even one that found nothing: that is what
         * records "exhausted" or "free list drained", without which the
         * same job would be made again at once, forever.
         */
        if (job->kind == JOB_POOL && job->pool.pool_index >= 0 && (job->inflight || reserved)) {
            hilo_pool_settle_inflight(job->pool.pool_index, job->pool.generation, job->ranges,
                                      job->count, reserved, job->exhausted, job->free_list_drained);
            job->inflight = false;
        }
        if (!committed && job->sqlerrcode == 0) {
            /* Rolled back, or committed here only: nothing can be handed out. */
            if (unconfirmed)
                hilo_worker_fail_job(job, ERRCODE_OPERATOR_INTERVENTION,
                                     "the synchronous standby did not confirm the "
                                     "reservation for hilo sequence \"%s\"",
                                     "Its wait for the standby was cut short. No IDs were "
                                     "handed out; the reserved ones are skipped.",
                                     "Retry the call.");
            else /* rolled back as a whole: a retry starts afresh */
                hilo_worker_fail_job(job, ERRCODE_TRANSACTION_ROLLBACK,
                                     "the hilo allocator could not commit the reservation "
                                     "for sequence \"%s\"",
                                     "Its transaction was rolled back; no IDs were handed out.",
                                     "Retry the call. The server log has the cause.");
            job->count = 0;
        }
        /* Pool IDs a take borrowed whose batch did not commit (or was not
         * confirmed) stay a gap: the push lock that kept pushes off them
         * went with the transaction, so a push may have taken them since.
         * (A take that failed in its own subtransaction put them back.) */
        if (job->kind == JOB_TAKE && reserved)
            hilo_pool_count_issued(MyDatabaseId, job->creation, job->seq_id,
                                   job->ids - job->borrowed_ids);
        if (job->kind == JOB_POOL && reserved && job->ids == 0 && job->exhausted && job->slot >= 0)
            hilo_worker_fail_job(job, ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED,
                                 "hilo sequence \"%s\" is exhausted",
                                 "No ID is left to hand out above those already handed out.",
                                 "IDs pushed back with hilo_push can be taken again.");
    }
}

/* After the batch's transaction: settle pools, then answer callers, whose
 * IDs are durable once the WAL is flushed up to `flush_lsn` (0: it is). */
static void publish(bool committed, bool unconfirmed, XLogRecPtr flush_lsn)
{
    int nwake = 0;

    settle_jobs(committed, unconfirmed);

    TimestampTz now = GetCurrentTimestamp();
    LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
    for (int i = 0; i < hilo_worker.batch_len; i++) {
        BatchJob *job = &hilo_worker.batch[i];
        if (job->slot < 0)
            continue;
        hilo_shared->workers[hilo_worker.entry_index].last_active = now;
        hilo_worker.last_request_at = now;
        BatchJob *outcome = job->leader >= 0 ? &hilo_worker.batch[job->leader] : job;
        HiloRequest *req = &hilo_shared->requests[job->slot];
        bool caller_waits = req->state == HILO_REQ_RUNNING && req->request_id == job->request_id;

        if (!caller_waits) {
            /* Abandoned while we worked: nobody has seen these IDs. */
            if (req->request_id == job->request_id && req->state == HILO_REQ_ABANDONED)
                req->state = HILO_REQ_IDLE;
            job->abandoned = true;
            continue;
        }
        if (outcome->sqlerrcode != 0) {
            reply_locked(req, outcome->sqlerrcode, outcome->message, outcome->detail,
                         outcome->hint);
        } else if (job->kind == JOB_POOL) {
            reply_locked(req, 0, "", "", ""); /* the pool has been refilled */
        } else {
            RetainedResult *r = &hilo_worker.retained[job->slot];
            forget_retained(job->slot);

            r->request_id = job->request_id;
            r->creation = job->creation;
            r->seq_id = job->seq_id;
            r->ranges = job->ranges; /* ownership moves to the retained result */
            r->count = job->count;
            r->flush_lsn = flush_lsn;
            job->ranges = NULL;
            publish_chunk_locked(req, r);
        }
        hilo_worker.slots_to_wake[nwake++] = job->slot;
    }
    LWLockRelease(hilo_shared->lock);

    for (int i = 0; i < nwake; i++)
        hilo_wake_process(hilo_worker.slots_to_wake[i]);
}

static void release_batch(void)
{
    for (int i = 0; i < hilo_worker.batch_len; i++) {
        BatchJob *job = &hilo_worker.batch[i];
        if (job->kind == JOB_TAKE && job->abandoned && job->count > 0)
            hilo_worker_queue_return(job->creation, job->seq_id, job->ranges, job->count);
        if (job->ranges)
            pfree(job->ranges);
        if (job->borrowed)
            pfree(job->borrowed);
        if (job->message)
            pfree(job->message);
        if (job->detail)
            pfree(job->detail);
        if (job->hint)
            pfree(job->hint);
    }
    hilo_worker.batch_len = 0;
}

/*
 * Whether the batch's commit may return before its WAL is flushed, leaving
 * the flush to the callers of its takes (each flushes before its IDs leave
 * its backend; many flush together, as commits do): the allocator then
 * collects and reserves the next batch while the disk writes this one,
 * instead of waiting. Only with no synchronous standby named, whose
 * confirmation the commit itself waits for (confirmed_by_sync_standbys).
 */
static bool callers_flush(void)
{
    return SyncRepStandbyNames == NULL || SyncRepStandbyNames[0] == '\0';
}

/* IDs of a pool refill reach other sessions without a caller's flush: a
 * batch with one is flushed before it is published. */
static bool batch_refills_pools(void)
{
    for (int i = 0; i < hilo_worker.batch_len; i++)
        if (hilo_worker.batch[i].kind == JOB_POOL && hilo_worker.batch[i].ids > 0)
            return true;
    return false;
}

/*
 * Serves jobs until none are waiting. Returns early on a shutdown request,
 * and after a batch that answered no caller and added no ID anywhere, so
 * that a job that cannot progress is retried at the next wake-up instead of
 * in a busy loop.
 */
void hilo_worker_serve_requests(void)
{
    for (;;) {
        collect_jobs();
        if (hilo_worker.batch_len == 0 && hilo_worker.pending_returns == NIL)
            return;
        XLogRecPtr last_commit = XactLastCommitEnd;
        bool defer_flush = callers_flush();
        if (defer_flush)
            SetConfigOption("synchronous_commit", "off", PGC_SUSET, PGC_S_OVERRIDE);
        bool committed =
            hilo_worker_run_in_transaction(serve_batch_body, NULL, "hilo: reserving IDs");
        if (defer_flush)
            SetConfigOption("synchronous_commit", ALLOCATOR_SYNCHRONOUS_COMMIT, PGC_SUSET,
                            PGC_S_OVERRIDE);
        XLogRecPtr flush_lsn = InvalidXLogRecPtr;
        if (defer_flush && committed && XactLastCommitEnd != last_commit) {
            if (batch_refills_pools())
                XLogFlush(XactLastCommitEnd);
            else
                flush_lsn = XactLastCommitEnd;
        }
        /* Committed locally is enough for returns: a free range the standby
         * does not know of is skipped there, never handed out twice. */
        hilo_worker_settle_returns(committed);
        /* A commit that wrote no record (nothing reserved) needs no standby. */
        bool unconfirmed = committed && XactLastCommitEnd != last_commit &&
                           !confirmed_by_sync_standbys(XactLastCommitEnd);
        if (unconfirmed)
            ereport(LOG, (errmsg("hilo: the synchronous standby did not confirm a reservation; "
                                 "its IDs are skipped")));
        publish(committed && !unconfirmed, unconfirmed, flush_lsn);
        bool progress = false;
        for (int i = 0; i < hilo_worker.batch_len; i++)
            progress |= hilo_worker.batch[i].slot >= 0 || hilo_worker.batch[i].ids > 0;
        release_batch();
        if (!progress || ShutdownRequestPending)
            return;
    }
}
