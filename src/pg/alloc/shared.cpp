/*
 * alloc/shared.cpp: the allocator's part of hilo's shared-memory segment
 * (alloc/shared.h): one entry per database's allocator, one request slot
 * and one set of buffers per backend, the pools and their index by
 * sequence. shmem.cpp requests its space and two LWLocks with every other
 * part's.
 */
#include "internal.h"

extern "C" {
#include "miscadmin.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/hsearch.h"
}

HiloShared *hilo_shared = NULL;
HTAB *hilo_pool_hash = NULL;

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

/* The header and each region after it start on cache lines (backend
 * buffers and pools are aligned to them; shmem.cpp starts every part on
 * one). */
static Size shared_size(void)
{
    Size size = CACHELINEALIGN(sizeof(HiloShared));
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
    return size;
}

/* The pool index by sequence: one entry per pool slot. */
static Size pool_hash_size(void)
{
    return hash_estimate_size(hilo_max_sequences, sizeof(HiloPoolHashEntry));
}

/* Lays the regions out after the header (pointers into shared memory are
 * the same in every process) and initializes them; the part is zeroed. */
static void shared_init(void)
{
    LWLockPadded *locks = GetNamedLWLockTranche("hilo");
    hilo_shared->lock = &locks[0].lock;
    hilo_shared->pools_lock = &locks[1].lock;
    hilo_shared->max_databases = hilo_worker_table_size();
    hilo_shared->num_requests = request_slot_count();
    hilo_shared->num_pools = hilo_max_sequences;
    hilo_shared->buffers_per_backend = hilo_session_buffers;
    hilo_shared->pool_tranche_id = hilo_new_tranche_id("hilo pool");
    pg_atomic_init_u64(&hilo_shared->last_generation, 0);
    pg_atomic_init_u64(&hilo_shared->free_list_epoch, 0);
    pg_atomic_init_u64(&hilo_shared->pool_assignments, 0);
    pg_atomic_init_u64(&hilo_shared->generation_epoch, 1);
    pg_atomic_init_u64(&hilo_shared->pool_wants_marks, 0);

    Assert((uintptr_t)hilo_shared % PG_CACHE_LINE_SIZE == 0);
    char *base = (char *)hilo_shared + CACHELINEALIGN(sizeof(HiloShared));
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
        pg_atomic_init_u64(&hilo_shared->pools[i].attached, 0);
    }
    /* Every slot is free; the lowest is claimed first. */
    for (int i = 0; i < hilo_shared->num_pools; i++)
        hilo_shared->free_slots[i] = hilo_shared->num_pools - 1 - i;
    hilo_shared->nfree_slots = hilo_shared->num_pools;
}

static void shared_attach(void)
{
    hilo_register_tranche(hilo_shared->pool_tranche_id, "hilo pool");
    HASHCTL info;
    memset(&info, 0, sizeof(info));
    info.keysize = sizeof(HiloPoolKey);
    info.entrysize = sizeof(HiloPoolHashEntry);
    hilo_pool_hash =
        hilo_shmem_init_hash("hilo pools", hilo_max_sequences, &info, HASH_ELEM | HASH_BLOBS);
}

static const HiloShmemPart allocator_part = {
    "hilo", 0, shared_size, 2, (void **)&hilo_shared, shared_init, shared_attach, pool_hash_size};

void hilo_alloc_shmem_init(void)
{
    hilo_shmem_add_part(&allocator_part);
    /* After the allocator's part, whose pools the stores' init sets up. */
    hilo_pool_stores_shmem_init();
    hilo_issued_shmem_init();
}

HiloRequest *hilo_my_request(void)
{
    int procno = MyProcNumber;
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
