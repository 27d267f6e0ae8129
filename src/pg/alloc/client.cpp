/*
 * alloc/client.cpp: the caller's side of a reservation.
 *
 * A take must be durable before its IDs reach the caller, and must survive
 * the caller's rollback, so the caller never reserves anything itself: it
 * writes a request into its slot in shared memory, wakes its database's
 * allocator worker (starting one if needed), and sleeps on its latch until
 * the worker has committed the reservation and written the reply; if the
 * worker did not wait for that commit's flush, the caller flushes it.
 *
 * If the caller gives up while waiting (cancel, timeout, termination), it
 * marks the request abandoned; the worker then puts whatever it reserved
 * for it back on the free list, since none of it reached anybody.
 */
#include "internal.h"
#include "../remote_error.h"

extern "C" {
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_class.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_namespace.h"
#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/utility.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
}

static bool exit_callback_registered = false;
static void backend_exit_callback(int code, Datum arg);

/* Registers the exit callback that gives back requests and buffers. */
void hilo_register_backend_exit(void)
{
    if (!exit_callback_registered) {
        before_shmem_exit(backend_exit_callback, 0);
        exit_callback_registered = true;
    }
}
/* True if the allocator of `dboid` with this serial still runs (or
 * starts). Caller holds hilo_shared->lock. */
static bool worker_alive_locked(Oid dboid, uint64 serial)
{
    for (int i = 0; i < hilo_shared->max_databases; i++) {
        HiloWorkerEntry *e = &hilo_shared->workers[i];
        if (e->state != HILO_WORKER_NONE && e->dboid == dboid && e->serial == serial)
            return true;
    }
    return false;
}

/* Gives up this backend's outstanding request, if any. Never raises. */
static void abandon_my_request(void)
{
    if (hilo_shared == NULL || MyProc == NULL)
        return;
    HiloRequest *req = &hilo_shared->requests[MyProcNumber];
    bool wake = false;

    LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
    switch (req->state) {
        case HILO_REQ_SUBMITTED:
            /* A pending next-chunk request means the worker holds the rest. */
            if (req->kind == HILO_REQUEST_NEXT_CHUNK) {
                req->state = HILO_REQ_ABANDONED;
                wake = true;
            } else {
                req->state = HILO_REQ_IDLE;
            }
            break;
        case HILO_REQ_RUNNING:
        case HILO_REQ_READY:
            req->state = HILO_REQ_ABANDONED;
            wake = true;
            break;
        default:
            break;
    }
    /* An allocator that has gone will never clear the slot: what it had
     * reserved for it went with it (skipped, never handed out twice). */
    if (req->state == HILO_REQ_ABANDONED && !worker_alive_locked(req->dboid, req->worker_serial)) {
        req->state = HILO_REQ_IDLE;
        wake = false;
    }
    LWLockRelease(hilo_shared->lock);
    if (wake)
        hilo_allocator_wake();
}

static void backend_exit_callback(int code, Datum arg)
{
    HILO_FORGET_UNWOUND_FRAMES();
    LWLockReleaseAll(); /* a FATAL error may have struck while we held it */
    abandon_my_request();
    hilo_buffers_release_all(); /* unused IDs go back to their pools */
}

/* Waits until the slot holds a reply. Restarts a worker that vanished
 * before it saw the request; fails if it vanished while working on it. */
static void wait_for_reply(HiloRequest *req, int *worker_index, uint64 *serial)
{
    for (;;) {
        LWLockAcquire(hilo_shared->lock, LW_SHARED);
        HiloRequestState state = req->state;
        HiloWorkerEntry *e = &hilo_shared->workers[*worker_index];
        bool worker_gone = e->state == HILO_WORKER_NONE || e->serial != *serial;
        LWLockRelease(hilo_shared->lock);

        if (state == HILO_REQ_READY)
            return;
        if (worker_gone) {
            if (state == HILO_REQ_SUBMITTED && req->kind != HILO_REQUEST_NEXT_CHUNK) {
                *worker_index = hilo_allocator_ensure_worker(serial);
                LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
                req->worker_serial = *serial;
                LWLockRelease(hilo_shared->lock);
                hilo_allocator_wake_entry(*worker_index);
                continue;
            }
            LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
            req->state = HILO_REQ_IDLE;
            LWLockRelease(hilo_shared->lock);
            ereport(ERROR, (errcode(ERRCODE_OPERATOR_INTERVENTION),
                            errmsg("the hilo allocator exited before confirming a reservation "
                                   "for sequence \"%s\"",
                                   req->seq_name),
                            errdetail("No IDs were handed out; whatever it had reserved is "
                                      "skipped, never handed out twice."),
                            errhint("Retry the call.")));
        }
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 100,
                        PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
        CHECK_FOR_INTERRUPTS();
    }
}

/*
 * A slot left abandoned (by this backend, or by the process that had this
 * process slot before, in any database) is cleared by the allocator that
 * owns it; wait for that. If that allocator has gone, nobody ever will:
 * what it held for the slot went with it, so the slot is simply idle.
 */
static void wait_until_slot_idle(HiloRequest *req)
{
    for (;;) {
        int procno = -1;
        LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
        if (req->state != HILO_REQ_IDLE && !worker_alive_locked(req->dboid, req->worker_serial))
            req->state = HILO_REQ_IDLE;
        HiloRequestState state = req->state;
        if (state != HILO_REQ_IDLE) {
            for (int i = 0; i < hilo_shared->max_databases; i++) {
                HiloWorkerEntry *e = &hilo_shared->workers[i];
                if (e->state == HILO_WORKER_RUNNING && e->dboid == req->dboid &&
                    e->serial == req->worker_serial)
                    procno = e->procno;
            }
        }
        LWLockRelease(hilo_shared->lock);
        if (state == HILO_REQ_IDLE)
            return;
        hilo_wake_process(procno);
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 10,
                        PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
        CHECK_FOR_INTERRUPTS();
    }
}

/* What the worker said, copied out of shared memory before raising it. */
typedef struct HiloReplyError {
    int sqlerrcode;
    char *message;
    char *detail;
    char *hint;
} HiloReplyError;

static void raise_reply_error(const HiloReplyError *err) pg_attribute_noreturn();
static void raise_reply_error(const HiloReplyError *err)
{
    hilo_raise_remote(err->sqlerrcode, err->message, err->detail, err->hint);
}

typedef struct HiloReply {
    HiloRange *ranges;
    uint32 count;
    XLogRecPtr flush_lsn; /* flushed before the ranges leave this backend */
    HiloReplyError err;
} HiloReply;

/*
 * Collects the reply to the submitted request, chunk by chunk. Kept out of
 * line so that none of its locals live in the frame that sets the longjmp
 * target in hilo_allocator_take.
 */
static pg_noinline void receive_reply(HiloRequest *req, int worker_index, uint64 serial,
                                      HiloReply *reply)
{
    uint32 capacity = HILO_REPLY_RANGES;
    reply->ranges = (HiloRange *)palloc(sizeof(HiloRange) * capacity);
    reply->count = 0;
    reply->flush_lsn = InvalidXLogRecPtr;
    reply->err.sqlerrcode = 0;

    for (;;) {
        wait_for_reply(req, &worker_index, &serial);
        /* The worker does not touch a READY slot; no lock needed to read it. */
        if (req->sqlerrcode != 0) {
            reply->err.sqlerrcode = req->sqlerrcode;
            reply->err.message = pstrdup(req->message);
            reply->err.detail = pstrdup(req->detail);
            reply->err.hint = pstrdup(req->hint);
            LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
            req->state = HILO_REQ_IDLE;
            LWLockRelease(hilo_shared->lock);
            return;
        }
        if (reply->count + req->nranges > capacity) {
            /* The whole result at once: no doubling copies of a large one. */
            capacity = Max(Max(capacity * 2, reply->count + req->nranges),
                           (uint32)Min(req->total_ranges, (uint64)PG_UINT32_MAX));
            reply->ranges = (HiloRange *)repalloc_huge(reply->ranges, sizeof(HiloRange) * capacity);
        }
        memcpy(reply->ranges + reply->count, req->ranges, sizeof(HiloRange) * req->nranges);
        reply->count += req->nranges;
        reply->flush_lsn = Max(reply->flush_lsn, (XLogRecPtr)req->flush_lsn);

        LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
        bool done = req->last_chunk;
        if (done) {
            req->state = HILO_REQ_IDLE;
        } else {
            req->kind = HILO_REQUEST_NEXT_CHUNK;
            req->state = HILO_REQ_SUBMITTED;
        }
        LWLockRelease(hilo_shared->lock);
        if (done)
            return;
        hilo_allocator_wake_entry(worker_index);
    }
}

/* Replies submit_and_wait returns to its caller instead of raising them:
 * the sequence is exhausted (2200H); the sequence row or the catalog it was
 * looked up in is gone (42704, 40001). */
#define ANSWER_EXHAUSTED 1
#define ANSWER_GONE 2

/* Writes a request into this backend's slot, wakes the allocator and
 * collects the reply; abandons the request if interrupted. */
static void submit_and_wait(HiloRequestKind kind, const HiloSequence *seq, int64 n, bool partial,
                            int pool_index, bool fresh_only, HiloReply *reply, int answers)
{
    hilo_register_backend_exit();

    uint64 serial;
    int worker_index = hilo_allocator_ensure_worker(&serial);
    HiloRequest *req = hilo_my_request();
    wait_until_slot_idle(req);

    LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
    req->kind = kind;
    req->request_id++;
    req->dboid = MyDatabaseId;
    req->worker_serial = serial;
    req->seq_id = seq->seq_id;
    req->creation = seq->creation;
    strlcpy(req->seq_name, seq->name, sizeof(req->seq_name));
    req->n = n;
    req->partial = partial;
    req->pool_index = pool_index;
    req->fresh_only = fresh_only;
    req->sqlerrcode = 0;
    req->nranges = 0;
    req->state = HILO_REQ_SUBMITTED;
    LWLockRelease(hilo_shared->lock);
    hilo_allocator_wake_entry(worker_index);

    PG_TRY();
    {
        receive_reply(req, worker_index, serial, reply);
    }
    PG_CATCH();
    {
        HILO_FORGET_UNWOUND_FRAMES();
        abandon_my_request();
        PG_RE_THROW();
    }
    PG_END_TRY();

    if (reply->err.sqlerrcode == ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED &&
        (answers & ANSWER_EXHAUSTED))
        return;
    if ((reply->err.sqlerrcode == ERRCODE_UNDEFINED_OBJECT ||
         reply->err.sqlerrcode == ERRCODE_T_R_SERIALIZATION_FAILURE) &&
        (answers & ANSWER_GONE))
        return;
    if (reply->err.sqlerrcode != 0)
        raise_reply_error(&reply->err);
    /* The allocator committed without waiting for the disk: its IDs are
     * durable, and may leave this backend, once its commit is flushed. A
     * crash before that loses them with the commit, before anyone saw them;
     * callers that flush at once share the disk's writes, as commits do. */
    if (!XLogRecPtrIsInvalid(reply->flush_lsn))
        XLogFlush(reply->flush_lsn);
}

HiloRange *hilo_allocator_take(const HiloSequence *seq, int64 n, bool partial, uint32 *nranges)
{
    HiloReply reply;
    submit_and_wait(HILO_REQUEST_TAKE, seq, n, partial, -1, false, &reply, 0);
    *nranges = reply.count;
    return reply.ranges;
}

HiloRange *hilo_allocator_take_remembered(const HiloSequence *seq, int64 n, bool partial,
                                          uint32 *nranges)
{
    HiloReply reply;
    submit_and_wait(HILO_REQUEST_TAKE, seq, n, partial, -1, false, &reply, ANSWER_GONE);
    if (reply.err.sqlerrcode != 0)
        return NULL;
    *nranges = reply.count;
    return reply.ranges;
}

bool hilo_allocator_refill(const HiloSequence *seq, int pool_index, uint64 min_ids, bool fresh_only)
{
    HiloReply reply;
    submit_and_wait(HILO_REQUEST_REFILL, seq, (int64)Min(min_ids, (uint64)PG_INT64_MAX), false,
                    pool_index, fresh_only, &reply, ANSWER_EXHAUSTED);
    pfree(reply.ranges);
    return reply.err.sqlerrcode == 0;
}
