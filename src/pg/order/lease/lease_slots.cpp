/*
 * order/lease/lease_slots.cpp: where backends hand calls of 'cluster' sequences
 * to the lease worker (order/lease/lease_worker.cpp), and get their answers.
 *
 * One lease worker per server runs in hilo.agent_database and registers
 * its latch here. A backend fills a request slot (PENDING), sets that
 * latch, and sleeps on the slot's condition variable; the worker takes the
 * slot (TAKEN), and once its core lease node has an answer writes it
 * (DONE) and wakes the backend, which reads it and frees the slot. A
 * backend that gives up (timeout, cancel, exit) leaves a TAKEN slot
 * ABANDONED: the worker's answer frees it. A worker that exits answers
 * every slot it took as failed, and so does the next one at its start (a
 * worker killed before it could): no backend waits for a worker that is
 * gone, and no answer is ever given for a call twice. A backend with
 * several calls (a forwarded batch) may hold many slots; when none is free
 * it frees one of its own by collecting that answer, or sleeps on `freed`,
 * which whoever frees a slot broadcasts while some backend waits.
 */
#include "lease_shared.h"

extern "C" {
#include "miscadmin.h"
#include "storage/condition_variable.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"
}

enum SlotState { SLOT_FREE = 0, SLOT_PENDING, SLOT_TAKEN, SLOT_DONE, SLOT_ABANDONED };

typedef struct LeaseSlot {
    int state;
    Oid dboid;
    HiloLeaseRequest request;
    HiloLeaseAnswer answer;
    ConditionVariable cv;
} LeaseSlot;

typedef struct LeaseShared {
    slock_t mutex; /* every field but the slots' cv */
    Oid worker_db;
    Latch *worker_latch; /* NULL while no worker runs */
    int next_scan;
    int slot_waiters;        /* backends waiting for a free slot */
    ConditionVariable freed; /* a slot became free (signalled only while some wait) */
    LeaseSlot slots[HILO_LEASE_SLOTS];
} LeaseShared;

static LeaseShared *lease_shared = NULL;

static void lease_init(void)
{
    SpinLockInit(&lease_shared->mutex);
    ConditionVariableInit(&lease_shared->freed);
    for (int i = 0; i < HILO_LEASE_SLOTS; i++)
        ConditionVariableInit(&lease_shared->slots[i].cv);
}

static const HiloShmemPart lease_part = {"hilo_lease",           sizeof(LeaseShared), NULL, 0,
                                         (void **)&lease_shared, lease_init};

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

void hilo_lease_shmem_init(void)
{
    hilo_shmem_add_part(&lease_part);
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

/* ---- Errors of calls ---- */

void hilo_lease_unserved(HiloRemoteError *e, const char *seq, const char *reason)
{
    char message[HILO_REMOTE_TEXT_BYTES], detail[HILO_REMOTE_TEXT_BYTES];
    snprintf(message, sizeof(message),
             "hilo sequence \"%s\" has ordering 'cluster', and no node served the call within "
             "hilo.claim_timeout (%d ms)",
             seq, hilo_claim_timeout_ms);
    snprintf(detail, sizeof(detail), "%s.", reason);
    detail[0] = (char)pg_toupper((unsigned char)detail[0]);
    hilo_remote_error_set(e, ERRCODE_CONNECTION_FAILURE, message, detail,
                          "A new lease holder serves after the old lease expired (hilo.lease_time "
                          "plus the clock drift margin), if a majority of the nodes is reachable. "
                          "Retry the call.");
}

void hilo_lease_exhausted(HiloRemoteError *e, const char *seq, uint64 count, const char *reason)
{
    char message[HILO_REMOTE_TEXT_BYTES], detail[HILO_REMOTE_TEXT_BYTES];
    snprintf(message, sizeof(message),
             "hilo sequence \"%s\" has fewer than " UINT64_FORMAT " IDs left", seq, count);
    snprintf(detail, sizeof(detail), "%s.", reason);
    detail[0] = (char)pg_toupper((unsigned char)detail[0]);
    hilo_remote_error_set(e, ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED, message, detail, NULL);
}

/* ---- The worker's side ---- */

/* Fails every slot a worker took and did not answer (mutex held); the
 * caller wakes them. */
/* Frees slot `s` (the lock held); true if a backend waits for one. */
static bool free_slot_locked(LeaseSlot *s)
{
    s->state = SLOT_FREE;
    return lease_shared->slot_waiters > 0;
}

/*
 * Wakes every backend waiting for a slot: each looks again, one takes it.
 * Not ConditionVariableSignal: a backend that woke stays on the condition
 * variable's list until it cancels its sleep (PostgreSQL puts it back, so
 * that it misses nothing while it looks), and it goes on queuing the rest
 * of its batch meanwhile; a signal would then pick it, a backend not
 * sleeping, and the one that sleeps would wait for the next free slot or
 * its 1 s turn (PostgreSQL 15's ConditionVariableCancelSleep does not pass
 * a signal on). Backends wait here only while all the slots are in use.
 */
static void wake_slot_waiter(bool needed)
{
    if (needed)
        ConditionVariableBroadcast(&lease_shared->freed);
}

/* Answers every TAKEN slot as failed, frees the ABANDONED ones; true if a
 * backend waits for a slot and one was freed. */
static bool fail_taken_locked(bool *wake)
{
    bool freed = false;
    for (int i = 0; i < HILO_LEASE_SLOTS; i++) {
        LeaseSlot *s = &lease_shared->slots[i];
        wake[i] = false;
        if (s->state == SLOT_ABANDONED) {
            freed = free_slot_locked(s) || freed;
        } else if (s->state == SLOT_TAKEN) {
            s->answer.ok = false;
            hilo_lease_unserved(&s->answer.error, s->request.seq,
                                "the lease worker exited before it answered");
            s->state = SLOT_DONE;
            wake[i] = true;
        }
    }
    return freed;
}

static void reset_worker(Latch *latch)
{
    bool wake[HILO_LEASE_SLOTS];
    SpinLockAcquire(&lease_shared->mutex);
    bool freed = fail_taken_locked(wake);
    lease_shared->worker_db = latch != NULL ? MyDatabaseId : InvalidOid;
    lease_shared->worker_latch = latch;
    SpinLockRelease(&lease_shared->mutex);
    for (int i = 0; i < HILO_LEASE_SLOTS; i++)
        if (wake[i])
            ConditionVariableBroadcast(&lease_shared->slots[i].cv);
    if (freed)
        ConditionVariableBroadcast(&lease_shared->freed);
}

void hilo_lease_worker_attach(void)
{
    reset_worker(MyLatch);
}

void hilo_lease_worker_detach(void)
{
    if (lease_shared != NULL)
        reset_worker(NULL);
}

int hilo_lease_next_request(HiloLeaseRequest *request)
{
    int found = -1;
    SpinLockAcquire(&lease_shared->mutex);
    for (int k = 0; k < HILO_LEASE_SLOTS && found < 0; k++) {
        int i = (lease_shared->next_scan + k) % HILO_LEASE_SLOTS;
        LeaseSlot *s = &lease_shared->slots[i];
        if (s->state == SLOT_PENDING && s->dboid == lease_shared->worker_db) {
            s->state = SLOT_TAKEN;
            *request = s->request;
            found = i;
        }
    }
    /* Round robin: a busy database does not starve the slots behind it. */
    if (found >= 0)
        lease_shared->next_scan = (found + 1) % HILO_LEASE_SLOTS;
    SpinLockRelease(&lease_shared->mutex);
    return found;
}

void hilo_lease_answer(int slot, const HiloLeaseAnswer *answer)
{
    LeaseSlot *s = &lease_shared->slots[slot];
    bool wake = false, freed = false;
    SpinLockAcquire(&lease_shared->mutex);
    if (s->state == SLOT_TAKEN) {
        s->answer = *answer;
        s->state = SLOT_DONE;
        wake = true;
    } else if (s->state == SLOT_ABANDONED) {
        freed = free_slot_locked(s);
    }
    SpinLockRelease(&lease_shared->mutex);
    if (wake)
        ConditionVariableBroadcast(&s->cv);
    wake_slot_waiter(freed);
}

bool hilo_lease_abandoned(int slot)
{
    LeaseSlot *s = &lease_shared->slots[slot];
    SpinLockAcquire(&lease_shared->mutex);
    bool abandoned = s->state == SLOT_ABANDONED;
    SpinLockRelease(&lease_shared->mutex);
    return abandoned;
}

/* ---- The backend's side ---- */

/*
 * A free slot holding `request`, PENDING, or -1 when all are in use; then
 * this backend is counted among those waiting for one (`*counted`), in the
 * same hold of the lock, so that no slot freed after this look goes
 * unsignalled.
 */
static int queue_request(const HiloLeaseRequest *request, bool *counted)
{
    int found = -1;
    bool wrong_db = false;
    Latch *latch = NULL;
    SpinLockAcquire(&lease_shared->mutex);
    Oid worker_db = lease_shared->worker_db;
    if (worker_db != InvalidOid && worker_db != MyDatabaseId) {
        wrong_db = true;
    } else {
        for (int i = 0; i < HILO_LEASE_SLOTS && found < 0; i++) {
            LeaseSlot *s = &lease_shared->slots[i];
            if (s->state != SLOT_FREE)
                continue;
            s->state = SLOT_PENDING;
            s->dboid = MyDatabaseId;
            s->request = *request;
            found = i;
        }
        latch = lease_shared->worker_latch;
        if (found < 0 && !*counted) {
            lease_shared->slot_waiters++;
            *counted = true;
        }
    }
    SpinLockRelease(&lease_shared->mutex);
    if (wrong_db)
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("hilo sequence \"%s\" has ordering 'cluster', which is served "
                               "only in the database hilo.agent_database names",
                               request->seq)));
    if (found >= 0 && latch != NULL)
        SetLatch(latch);
    return found;
}

static void stop_waiting_for_slot(bool *counted)
{
    if (!*counted)
        return;
    SpinLockAcquire(&lease_shared->mutex);
    lease_shared->slot_waiters--;
    SpinLockRelease(&lease_shared->mutex);
    *counted = false;
}

/* Frees slot `i` if nobody will read its answer. */
static void abandon(int i)
{
    LeaseSlot *s = &lease_shared->slots[i];
    bool freed = false;
    SpinLockAcquire(&lease_shared->mutex);
    if (s->state == SLOT_PENDING || s->state == SLOT_DONE)
        freed = free_slot_locked(s);
    else if (s->state == SLOT_TAKEN)
        s->state = SLOT_ABANDONED;
    SpinLockRelease(&lease_shared->mutex);
    wake_slot_waiter(freed);
}

/* Waits for slot `i`'s answer until `deadline`; false on a timeout. */
static bool await_answer(int i, TimestampTz deadline, HiloLeaseAnswer *answer)
{
    LeaseSlot *s = &lease_shared->slots[i];
    bool done = false, freed = false;
    ConditionVariablePrepareToSleep(&s->cv);
    for (;;) {
        SpinLockAcquire(&lease_shared->mutex);
        if (s->state == SLOT_DONE) {
            *answer = s->answer;
            freed = free_slot_locked(s);
            done = true;
        }
        SpinLockRelease(&lease_shared->mutex);
        if (done)
            break;
        long left = (long)((deadline - GetCurrentTimestamp()) / 1000);
        if (left <= 0)
            break;
        (void)ConditionVariableTimedSleep(&s->cv, Min(left, 1000L), PG_WAIT_EXTENSION);
    }
    ConditionVariableCancelSleep();
    wake_slot_waiter(freed);
    return done;
}

/* Call `i`'s answer: from its slot, or failed if it never got one. */
static void collect(int i, int queued, const int *slots, TimestampTz deadline,
                    const HiloLeaseRequest *requests, HiloLeaseAnswer *answers)
{
    if (i < queued && await_answer(slots[i], deadline, &answers[i]))
        return;
    if (i < queued)
        abandon(slots[i]);
    answers[i].ok = false;
    hilo_lease_unserved(&answers[i].error, requests[i].seq,
                        "no answer from the lease worker in time");
}

/*
 * Each call gets a slot in turn. When all slots are in use, this backend
 * first collects the answer of its own oldest call still out, which frees
 * that slot (so a batch larger than the slots, or two batches that hold
 * them all between them, never wait for each other); with none of its own
 * out, it sleeps until another backend frees one, or the deadline.
 */
void hilo_lease_submit(const HiloLeaseRequest *requests, HiloLeaseAnswer *answers, int n,
                       int timeout_ms)
{
    Assert(lease_shared != NULL);
    TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);
    int *slots = (int *)palloc(sizeof(int) * Max(n, 1));
    volatile int queued = 0;
    volatile int collected = 0;
    volatile bool counted = false;
    PG_TRY();
    {
        bool sleeping = false;
        while (queued < n) {
            bool c = counted;
            int slot = queue_request(&requests[queued], &c);
            counted = c;
            if (slot >= 0) {
                slots[queued] = slot;
                queued = queued + 1;
                continue;
            }
            if (collected < queued) {
                collect(collected, queued, slots, deadline, requests, answers);
                collected = collected + 1;
                continue;
            }
            long left = (long)((deadline - GetCurrentTimestamp()) / 1000);
            if (left <= 0)
                break;
            /* The first call only prepares the sleep: look again, then sleep. */
            sleeping = true;
            (void)ConditionVariableTimedSleep(&lease_shared->freed, Min(left, 1000L),
                                              PG_WAIT_EXTENSION);
        }
        if (sleeping)
            ConditionVariableCancelSleep();
        bool c = counted;
        stop_waiting_for_slot(&c);
        counted = c;
        for (; collected < n; collected = collected + 1)
            collect(collected, queued, slots, deadline, requests, answers);
    }
    PG_CATCH();
    {
        HILO_FORGET_UNWOUND_FRAMES();
        bool c = counted;
        stop_waiting_for_slot(&c);
        for (int i = collected; i < queued; i++)
            abandon(slots[i]);
        PG_RE_THROW();
    }
    PG_END_TRY();
    pfree(slots);
}
