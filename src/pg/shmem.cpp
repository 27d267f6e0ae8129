/*
 * shmem.cpp: hilo's one shared-memory segment and its one pair of hooks:
 * the allocator's shared state (one entry per database worker, one request
 * slot per backend, buffers, pools), then the parts other subsystems add
 * (hilo_shmem_add_part: the agent's table); and the two latch helpers
 * every waiting process uses: waking another, sleeping on its own.
 *
 * On PostgreSQL 15, space and LWLock tranches are requested only in
 * shmem_request_hook and structures are created in shmem_startup_hook under
 * AddinShmemInitLock (the pattern of contrib/pg_stat_statements).
 */
#include "hilo.h"

extern "C" {
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"
}

HiloShared *hilo_shared = NULL;
HTAB *hilo_pool_hash = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* The parts other subsystems add, laid out after the allocator's. */
#define HILO_MAX_SHMEM_PARTS 8
static const HiloShmemPart *parts[HILO_MAX_SHMEM_PARTS];
static int nparts = 0;

static Size part_size(const HiloShmemPart *part)
{
    return part->size > 0 ? part->size : part->size_of();
}

void hilo_shmem_add_part(const HiloShmemPart *part)
{
    if (nparts >= HILO_MAX_SHMEM_PARTS)
        elog(ERROR, "hilo: too many shared-memory parts");
    parts[nparts++] = part;
}

int hilo_worker_table_size(void)
{
    return hilo_max_databases > 0 ? hilo_max_databases : Max(max_worker_processes, 1);
}

/* Request slots are indexed by pgprocno, which for backends and background
 * workers is below MaxBackends. */
static int request_slot_count(void)
{
    return MaxBackends;
}

/* The regions after the header start on cache lines (backend buffers and
 * pools are aligned to them); the slack lets the first one be aligned
 * wherever ShmemInitStruct puts the header. */
static Size shared_size(void)
{
    Size size = MAXALIGN(sizeof(HiloShared)) + PG_CACHE_LINE_SIZE;
    size =
        add_size(size, CACHELINEALIGN(mul_size(sizeof(HiloWorkerEntry), hilo_worker_table_size())));
    size = add_size(size, CACHELINEALIGN(mul_size(sizeof(HiloRequest), request_slot_count())));
    size = add_size(size, CACHELINEALIGN(mul_size(sizeof(HiloBackendSlot), request_slot_count())));
    size =
        add_size(size, CACHELINEALIGN(mul_size(mul_size(sizeof(HiloBuffer), hilo_session_buffers),
                                               request_slot_count())));
    size = add_size(size, CACHELINEALIGN(mul_size(sizeof(HiloPool), hilo_max_sequences)));
    size = add_size(size, CACHELINEALIGN(mul_size(sizeof(int), hilo_max_sequences)));
    size = add_size(size, CACHELINEALIGN(mul_size(sizeof(uint8), hilo_max_sequences)));
    for (int i = 0; i < nparts; i++)
        size = add_size(size, CACHELINEALIGN(part_size(parts[i])));
    return size;
}

/* The pool index by sequence: one entry per pool slot. */
static Size pool_hash_size(void)
{
    return hash_estimate_size(hilo_max_sequences, sizeof(HiloPoolHashEntry));
}

static void hilo_shmem_request(void)
{
    if (prev_shmem_request_hook)
        prev_shmem_request_hook();
    RequestAddinShmemSpace(add_size(shared_size(), pool_hash_size()));
    RequestNamedLWLockTranche("hilo", 2);
    for (int i = 0; i < nparts; i++)
        if (parts[i]->lwlocks > 0)
            RequestNamedLWLockTranche(parts[i]->name, parts[i]->lwlocks);
}

static void hilo_shmem_startup(void)
{
    bool found;

    if (prev_shmem_startup_hook)
        prev_shmem_startup_hook();

    LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
    char *base = (char *)ShmemInitStruct("hilo", shared_size(), &found);
    hilo_shared = (HiloShared *)base;
    if (!found) {
        memset(base, 0, shared_size());
        LWLockPadded *locks = GetNamedLWLockTranche("hilo");
        hilo_shared->lock = &locks[0].lock;
        hilo_shared->pools_lock = &locks[1].lock;
        hilo_shared->max_databases = hilo_worker_table_size();
        hilo_shared->num_requests = request_slot_count();
        hilo_shared->num_pools = hilo_max_sequences;
        hilo_shared->buffers_per_backend = hilo_session_buffers;
        hilo_shared->pool_tranche_id = LWLockNewTrancheId();
        pg_atomic_init_u64(&hilo_shared->last_generation, 0);
        pg_atomic_init_u64(&hilo_shared->free_list_epoch, 0);
        pg_atomic_init_u64(&hilo_shared->pool_assignments, 0);
    }
    /* Pointers into shared memory are the same in every process (fork). */
    base = (char *)CACHELINEALIGN(base + MAXALIGN(sizeof(HiloShared)));
    hilo_shared->workers = (HiloWorkerEntry *)base;
    base += CACHELINEALIGN(mul_size(sizeof(HiloWorkerEntry), hilo_worker_table_size()));
    hilo_shared->requests = (HiloRequest *)base;
    base += CACHELINEALIGN(mul_size(sizeof(HiloRequest), request_slot_count()));
    hilo_shared->slots = (HiloBackendSlot *)base;
    base += CACHELINEALIGN(mul_size(sizeof(HiloBackendSlot), request_slot_count()));
    HiloBuffer *buffers = (HiloBuffer *)base;
    base += CACHELINEALIGN(
        mul_size(mul_size(sizeof(HiloBuffer), hilo_session_buffers), request_slot_count()));
    hilo_shared->pools = (HiloPool *)base;
    base += CACHELINEALIGN(mul_size(sizeof(HiloPool), hilo_max_sequences));
    hilo_shared->free_slots = (int *)base;
    base += CACHELINEALIGN(mul_size(sizeof(int), hilo_max_sequences));
    hilo_shared->pool_wants = (volatile uint8 *)base;
    base += CACHELINEALIGN(mul_size(sizeof(uint8), hilo_max_sequences));
    for (int i = 0; i < nparts; i++) {
        *parts[i]->address = base;
        if (!found && parts[i]->init != NULL)
            parts[i]->init();
        base += CACHELINEALIGN(part_size(parts[i]));
    }
    if (!found) {
        for (int i = 0; i < hilo_shared->num_requests; i++) {
            HiloBackendSlot *slot = &hilo_shared->slots[i];
            slot->nused = 0;
            slot->buffers = buffers + (Size)i * hilo_session_buffers;
            for (int b = 0; b < hilo_session_buffers; b++) {
                slot->buffers[b].pool_index = -1;
                pg_atomic_init_u64(&slot->buffers[b].next, 0);
            }
        }
        for (int i = 0; i < hilo_shared->num_pools; i++) {
            LWLockInitialize(&hilo_shared->pools[i].lock, hilo_shared->pool_tranche_id);
            pg_atomic_init_u64(&hilo_shared->pools[i].generation, 0);
        }
        /* Every slot is free; the lowest is claimed first. */
        for (int i = 0; i < hilo_shared->num_pools; i++)
            hilo_shared->free_slots[i] = hilo_shared->num_pools - 1 - i;
        hilo_shared->nfree_slots = hilo_shared->num_pools;
    }
    LWLockRegisterTranche(hilo_shared->pool_tranche_id, "hilo pool");

    HASHCTL info;
    memset(&info, 0, sizeof(info));
    info.keysize = sizeof(HiloPoolKey);
    info.entrysize = sizeof(HiloPoolHashEntry);
    hilo_pool_hash = ShmemInitHash("hilo pools", hilo_max_sequences, hilo_max_sequences, &info,
                                   HASH_ELEM | HASH_BLOBS);
    LWLockRelease(AddinShmemInitLock);
}

void hilo_shmem_install_hooks(void)
{
    prev_shmem_request_hook = shmem_request_hook;
    shmem_request_hook = hilo_shmem_request;
    prev_shmem_startup_hook = shmem_startup_hook;
    shmem_startup_hook = hilo_shmem_startup;
}

/* This backend's request slot. */
HiloRequest *hilo_my_request(void)
{
    int procno = MyProc->pgprocno;
    if (procno < 0 || procno >= hilo_shared->num_requests)
        elog(ERROR, "hilo: process number %d has no request slot", procno);
    return &hilo_shared->requests[procno];
}

/* The running worker entry of `dboid`, or NULL. Caller holds the lock. */
HiloWorkerEntry *hilo_find_worker_locked(Oid dboid)
{
    for (int i = 0; i < hilo_shared->max_databases; i++) {
        HiloWorkerEntry *e = &hilo_shared->workers[i];
        if (e->state != HILO_WORKER_NONE && e->dboid == dboid)
            return e;
    }
    return NULL;
}

void hilo_wake_process(int procno)
{
    if (procno >= 0)
        SetLatch(&GetPGProcByNumber(procno)->procLatch);
}

void hilo_sleep_ms(long ms)
{
    TimestampTz until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), ms);
    for (;;) {
        long secs;
        int usecs;
        TimestampDifference(GetCurrentTimestamp(), until, &secs, &usecs);
        long left = secs * 1000 + usecs / 1000;
        if (left <= 0)
            return;
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, left,
                        PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
        CHECK_FOR_INTERRUPTS();
    }
}
