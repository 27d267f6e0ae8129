/*
 * alloc/shared.h: the allocator's shared state, in hilo's one shared-memory
 * segment (laid out by alloc/shared.cpp): one entry per database's
 * allocator, one request slot and one set of buffers per backend, and the
 * pools. Included by alloc/alloc.h.
 */
#ifndef HILO_PG_ALLOC_SHARED_H
#define HILO_PG_ALLOC_SHARED_H

#include "../hilo.h"

typedef enum HiloWorkerState {
    HILO_WORKER_NONE = 0,
    HILO_WORKER_STARTING,
    HILO_WORKER_RUNNING,
    HILO_WORKER_EXITING, /* idle: giving its pools back, then gone; a caller waits */
} HiloWorkerState;

/* IDs of one sequence some pushes (or returns) freed: where the merge pass
 * looks (alloc/merge_spans.cpp). */
#define HILO_MERGE_SPANS 64
typedef struct HiloMergeSpan {
    int32 seq_id;
    int64 lo;
    int64 hi;
} HiloMergeSpan;

/* One allocator worker per database. */
typedef struct HiloWorkerEntry {
    Oid dboid;
    HiloWorkerState state;
    pid_t pid;
    int procno;               /* the worker's pgprocno, to set its latch */
    uint64 serial;            /* the worker's: new every time the entry is (re)claimed */
    bool stop_requested;      /* set when a database-level command needs it gone */
    bool free_ranges_changed; /* a push committed since the last merge */
    /* Where: spans of pushes committed since (alloc/merge_spans.cpp), or all. */
    bool merge_all;
    uint32 nmerge_spans;
    HiloMergeSpan merge_spans[HILO_MERGE_SPANS];
    /* Another database needs this allocator's worker slot: exit if idle
     * (no request in progress, no session holding IDs of its pools). */
    bool exit_requested;
    bool exit_refused;       /* the answer to exit_requested: busy */
    bool release_requested;  /* a caller needs pool slots: release marked pools */
    TimestampTz last_active; /* when it last served a request */
} HiloWorkerEntry;

typedef enum HiloRequestState {
    HILO_REQ_IDLE = 0,
    HILO_REQ_SUBMITTED, /* written by the caller, not yet seen by the worker */
    HILO_REQ_RUNNING,   /* the worker is reserving */
    HILO_REQ_READY,     /* a reply (or one chunk of it) is in the slot */
    HILO_REQ_ABANDONED, /* the caller gave up; the worker frees what it reserved */
} HiloRequestState;

typedef enum HiloRequestKind {
    HILO_REQUEST_TAKE = 1,
    HILO_REQUEST_NEXT_CHUNK,
    HILO_REQUEST_REFILL, /* fill a pool, reply once published; n = IDs wanted at least */
} HiloRequestKind;

/*
 * A backend's mailbox to its database's allocator, indexed by pgprocno.
 * State changes happen under HiloShared->lock.
 */
typedef struct HiloRequest {
    HiloRequestState state;
    HiloRequestKind kind;
    uint64 request_id; /* grows per slot; ties worker-side leftovers to a request */
    Oid dboid;
    /* The allocator (its serial) that owns what the slot is waiting
     * for. Once it has gone, nobody will ever move the slot on. */
    uint64 worker_serial;
    int32 seq_id;
    uint64 creation; /* of the catalog the caller looked the sequence up in */
    char seq_name[HILO_MAX_NAME_BYTES + 1]; /* for error messages */
    int64 n;
    bool partial;
    int pool_index;  /* REFILL: the pool to fill */
    bool fresh_only; /* REFILL: IDs above everything reserved so far (no free list) */

    /* The reply. */
    int sqlerrcode; /* 0 on success */
    char message[HILO_MESSAGE_BYTES];
    char detail[HILO_MESSAGE_BYTES];
    char hint[HILO_MESSAGE_BYTES];
    uint64 total_ranges; /* ranges in the whole result */
    uint32 nranges;      /* ranges in this chunk */
    bool last_chunk;
    /* The WAL position of the commit that reserved the ranges, if the
     * allocator did not wait for its flush: the caller flushes the WAL up
     * to it before any of them leaves its backend. 0: flushed already. */
    uint64 flush_lsn;
    HiloRange ranges[HILO_REPLY_RANGES];
} HiloRequest;

/*
 * A per-node pool of IDs of one sequence: reserved and committed by the
 * allocator, not yet handed to anyone. Backends refill their buffers from
 * it and small takes are served from it; the allocator tops it up.
 * Everything but `generation` is read and written under `lock`.
 */
typedef struct HiloPool {
    /* A value never used before, new each time the pool is (re)assigned or
     * invalidated; buffers and backend caches remember it. Read by every
     * hilo_nextval call, so it shares no cache line with the lock and the
     * counters that refills write. */
    pg_atomic_uint64 generation;
    /* Which sequence; changes only under pools_lock held exclusively too.
     * A pool slot is free (!in_use, !releasing), in use, or releasing: its
     * IDs are being written back to the free list by its allocator, and
     * the slot is reused only once that has committed. */
    bool in_use;
    bool releasing;
    Oid dboid;
    uint64 creation; /* of the catalog (a re-created catalog reuses seq_ids) */
    int32 seq_id;
    bool monotonic;
    int32 block_size;

    /* What a refill of a backend's buffer reads and writes follows the
     * lock, in the two lines of its PG_CACHE_LINE_SIZE, then the lowest
     * ranges: with 10,000 sequences in use, every refill finds its pool
     * cold, and each line more is a miss. */
    alignas(PG_CACHE_LINE_SIZE) LWLock lock;
    /* The pool's IDs, sorted and merged, are ranges[head .. head + nranges)
     * of `capacity` slots: the inline arrays below, or a borrowed store's
     * (`store` >= 0). Taking the lowest ranges only moves `head`. */
    HiloRange *ranges;
    uint32 head;
    uint32 nranges;
    uint64 ids;             /* IDs in ranges */
    int store;              /* index of the borrowed store, or -1 */
    bool serving;           /* nextval or small takes use it: keep it filled */
    bool refill_wanted;     /* below low water: the allocator should refill */
    bool free_list_pending; /* pushes committed: move the free list in first */
    bool exhausted;         /* the last refill found nothing left */
    TimestampTz last_used;  /* last served a buffer, a take or a refill */
    /* What buffers and small takes took from the pool (net of returns) and
     * the node's count of issued IDs (alloc/issued.cpp) has not been told
     * yet: told in batches, and before anything reads that count. */
    int64 issued_unreported;
    /* Backend buffers filled from this generation, in the low 32 bits; the
     * high 32 are the generation's low 32 (alloc/pool.cpp, attached_*), so
     * that a buffer given up without the lock never counts down another
     * generation's. */
    pg_atomic_uint64 attached;
    uint64 issued; /* for hilo.status: IDs handed out of the pool since start (net of returns) */
    uint32 capacity;
    bool fragmented; /* the last refill was limited by room, not by IDs */
    /* A caller needs a pool slot: the allocator gives this one's IDs back
     * to the free list and frees it (unless it is used again first). */
    bool release_requested;
    HiloRange *inflight; /* committed or committing, not yet in ranges */
    uint32 ninflight;
    uint32 inflight_capacity;
    uint64 target; /* IDs a refill aims for; grows when callers wait */
    HiloRange inline_ranges[HILO_POOL_RANGES];
    HiloRange inline_inflight[HILO_POOL_INFLIGHT];

    TimestampTz release_requested_at;
    /* For hilo.status. */
    double rate; /* IDs per second, recent */
    uint64 rate_issued;
    TimestampTz rate_time;
} HiloPool;

/* A large store of ranges a pool borrows (HILO_POOL_STORES of them). */
typedef struct HiloPoolStore {
    pg_atomic_uint32 owner; /* 1 + the index of the pool using it, or 0 */
    HiloRange ranges[HILO_STORE_RANGES];
    HiloRange inflight[HILO_STORE_RANGES];
} HiloPoolStore;

/*
 * One backend's buffer of IDs of one sequence: it hands out next, next + 1,
 * ..., end - 1. Only the owning backend advances `next`; identity and `end`
 * change only under the pool's lock, so a push check holding that lock sees
 * a consistent buffer (and a `next` that can only have grown).
 */
typedef struct HiloBuffer {
    /* 40 bytes, so that hilo.session_buffers of them per connection slot
     * stay small; only the owner writes its buffers (and the owner's lines
     * touch another backend's at most at the ends of its slot). */
    int64 end; /* exclusive */
    pg_atomic_uint64 next;
    uint64 generation; /* the pool's generation when filled */
    Oid dboid;
    int32 seq_id;
    int pool_index;
    bool in_use;
} HiloBuffer;

typedef struct HiloBackendSlot {
    pid_t pid;
    /* Buffers [0, nused) may have been used by this slot's backends; the
     * rest never were. Only grows (set by the owner before it fills buffer
     * nused - 1 under the pool's lock), so scans of every buffer read only
     * these. */
    int nused;
    HiloBuffer *buffers; /* buffers_per_backend of them */
} HiloBackendSlot;

typedef struct HiloShared {
    LWLock *lock;       /* protects worker entries and request states */
    LWLock *pools_lock; /* protects which sequence each pool belongs to */
    int max_databases;
    int num_requests;
    int num_pools;
    int buffers_per_backend; /* hilo.session_buffers */
    int pool_tranche_id;
    uint64 last_worker_serial;         /* source of HiloWorkerEntry.serial */
    pg_atomic_uint64 last_generation;  /* source of HiloPool.generation */
    pg_atomic_uint64 free_list_epoch;  /* grows when a push commits (alloc/free_list_scan.cpp) */
    pg_atomic_uint64 pool_assignments; /* grows when a slot is given to a sequence */
    HiloWorkerEntry *workers;          /* max_databases entries */
    HiloRequest *requests;             /* num_requests entries */
    HiloBackendSlot *slots;            /* num_requests entries, by pgprocno */
    HiloPool *pools;                   /* num_pools entries */
    /* Slots that became free, most recent last (under pools_lock held
     * exclusively): a hint that spares a claim the scan of every pool, which
     * in a new backend touches all of their shared memory (tens of ms with
     * the default hilo.max_sequences). A popped slot is used only if it is
     * still free; the full scan remains for when the stack is empty. */
    int *free_slots; /* num_pools entries */
    int nfree_slots;
    /* Per slot: set (under the pool's lock) when the pool asks its
     * allocator for a refill or a move of pushed IDs, cleared by the
     * allocator's scan; a byte array, so that the scan before every batch
     * reads 12 KB rather than a cache line of each 2.9 KB pool. */
    volatile uint8 *pool_wants; /* num_pools entries */
    /* Grows each time a flag of pool_wants is set (hilo_pool_mark_wants):
     * while it stands, and the last scan left no flag set, there is
     * nothing to scan for. */
    pg_atomic_uint64 pool_wants_marks;
    /* Grows after any pool's generation moved (alloc/pool.cpp,
     * hilo_pool_renew_generation), so that a backend which found its
     * pools current may trust them while it stands (sql/nextval_cache.h).
     * Read by every hilo_nextval call and rarely written: on a line of its
     * own, the last of the header. */
    alignas(PG_CACHE_LINE_SIZE) pg_atomic_uint64 generation_epoch;
} HiloShared;

extern HiloShared *hilo_shared;
/* (dboid, creation, seq_id) -> pool index, under pools_lock. */
extern struct HTAB *hilo_pool_hash;
typedef struct HiloPoolKey {
    Oid dboid;
    int32 seq_id;
    uint64 creation;
} HiloPoolKey;
typedef struct HiloPoolHashEntry {
    HiloPoolKey key;
    int index;
} HiloPoolHashEntry;

/* Buffers of slot s that scans of every buffer read. */
static inline int hilo_slot_nused(int s)
{
    int n = *(volatile int *)&hilo_shared->slots[s].nused;
    return Min(n, hilo_shared->buffers_per_backend);
}

/* The entry of `dboid` in the allocator table, or NULL; hilo_shared->lock held. */
extern HiloWorkerEntry *hilo_find_worker_locked(Oid dboid);

/* Asks the allocator to look at pool `index` (its refill or pushed IDs);
 * the pool's lock held. */
static inline void hilo_pool_mark_wants(int index)
{
    if (!hilo_shared->pool_wants[index]) {
        hilo_shared->pool_wants[index] = 1;
        /* After the flag (a full barrier): a scan that reads the new count
         * sees the flag. */
        pg_atomic_fetch_add_u64(&hilo_shared->pool_wants_marks, 1);
    }
}

/* This backend's request slot. */
extern HiloRequest *hilo_my_request(void);

/* Entries of the allocator table: one per allocator that can run at once.
 * Each allocator takes a background worker slot, so max_worker_processes
 * bounds them; hilo.max_databases, if set, bounds them further. */
extern int hilo_worker_table_size(void);

/* From _PG_init: adds the allocator's parts to the segment (its state,
 * then the pools' large stores). */
extern void hilo_alloc_shmem_init(void);

#endif /* HILO_PG_ALLOC_SHARED_H */
