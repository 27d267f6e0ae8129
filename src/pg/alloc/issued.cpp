/*
 * alloc/issued.cpp: per sequence, the IDs this node handed out since the
 * server started and their recent rate, for hilo.status and the runway
 * warning. Every path counts here: pools and buffers (net of what comes
 * back), the allocator's takes of any size, and ordered calls. A table of
 * its own, so that a sequence without a pool (large takes only, ordered
 * calls) is counted too, and a pool released when idle loses nothing.
 *
 * One LWLock guards the table's entries, a spinlock in each entry its
 * counts: a count takes the LWLock shared (exclusively only to add an
 * entry), once per block, take or ordered call, never per ID; both are
 * leaves (nothing else is locked while they are held). The table holds
 * hilo.max_sequences entries: when it is full, the entry counted least
 * recently makes room. The rate is updated by the allocator's maintenance,
 * as pools' rates were; that of a sequence of ordered calls (which need no
 * allocator, and count only what they got) also by those calls and by
 * reading it. Other calls do not update it (a failed take that counted
 * borrowed IDs and gave them back changes nothing), nor does reading.
 */
#include "internal.h"

extern "C" {
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"
}

typedef struct IssuedEntry {
    HiloPoolKey key;
    slock_t mutex;      /* the fields below */
    uint64 issued;      /* net of returns, saturating */
    uint64 rate_issued; /* `issued` when the rate was last updated */
    TimestampTz rate_time;
    TimestampTz last_counted;
    double rate;        /* IDs per second, about the last minute */
    bool runway_warned; /* the runway warning was logged for this crossing */
    bool ordered;       /* counted by ordered calls: a read updates the rate */
} IssuedEntry;

typedef struct IssuedShared {
    LWLock *lock;
    int entries;
} IssuedShared;

static IssuedShared *issued_shared = NULL;
static HTAB *issued_hash = NULL;

static Size issued_hash_size(void)
{
    return hash_estimate_size(hilo_max_sequences, sizeof(IssuedEntry));
}

static void issued_init(void)
{
    issued_shared->lock = &GetNamedLWLockTranche("hilo issued")[0].lock;
    issued_shared->entries = 0;
}

static void issued_attach(void)
{
    HASHCTL info;
    memset(&info, 0, sizeof(info));
    info.keysize = sizeof(HiloPoolKey);
    info.entrysize = sizeof(IssuedEntry);
    issued_hash =
        hilo_shmem_init_hash("hilo issued", hilo_max_sequences, &info, HASH_ELEM | HASH_BLOBS);
}

static const HiloShmemPart issued_part = {
    "hilo issued",           sizeof(IssuedShared), NULL,          1,
    (void **)&issued_shared, issued_init,          issued_attach, issued_hash_size};

void hilo_issued_shmem_init(void)
{
    hilo_shmem_add_part(&issued_part);
}

/* A rate nothing updated for this long (2 minutes, or 10 times
 * hilo.naptime: the allocator exits when idle) is shown as an update would
 * make it. */
static int64 stale_rate_us(void)
{
    return Max((int64)120 * USECS_PER_SEC, (int64)hilo_naptime_ms * 10 * 1000);
}

/* A million: a thousand blocks of the default block_size. */
#define RATE_CAP_FLOOR 1000000.0

static uint64 add_saturating(uint64 a, uint64 b)
{
    return a > PG_UINT64_MAX - b ? PG_UINT64_MAX : a + b;
}

static HiloPoolKey make_key(Oid dboid, uint64 creation, int32 seq_id)
{
    HiloPoolKey key;
    memset(&key, 0, sizeof(key));
    key.dboid = dboid;
    key.seq_id = seq_id;
    key.creation = creation;
    return key;
}

/* The rate: exponentially weighted, about the last minute counts; updated
 * at most once a second. The entry's spinlock held. */
static void update_rate(IssuedEntry *e, TimestampTz now)
{
    double seconds = (double)(now - e->rate_time) / 1e6;
    if (seconds < 1.0)
        return;
    double recent = (double)(e->issued - Min(e->issued, e->rate_issued)) / seconds;
    double weight = Min(1.0, seconds / 60.0);
    e->rate = e->rate == 0 ? recent : e->rate + weight * (recent - e->rate);
    e->rate_issued = e->issued;
    e->rate_time = now;
}

/* Makes room for one entry by dropping the one counted least recently.
 * Lock held exclusively. */
static void evict_oldest(void)
{
    HASH_SEQ_STATUS scan;
    hash_seq_init(&scan, issued_hash);
    IssuedEntry *oldest = NULL;
    IssuedEntry *e;
    while ((e = (IssuedEntry *)hash_seq_search(&scan)) != NULL)
        if (oldest == NULL || e->last_counted < oldest->last_counted)
            oldest = e;
    if (oldest != NULL) {
        HiloPoolKey key = oldest->key;
        (void)hash_search(issued_hash, &key, HASH_REMOVE, NULL);
        issued_shared->entries--;
    }
}

/* The entry of a sequence, made if needed (NULL: no room). Lock held
 * exclusively. */
static IssuedEntry *entry_locked(const HiloPoolKey *key, TimestampTz now)
{
    bool found;
    IssuedEntry *e = (IssuedEntry *)hash_search(issued_hash, key, HASH_FIND, NULL);
    if (e != NULL)
        return e;
    if (issued_shared->entries >= hilo_max_sequences)
        evict_oldest();
    e = (IssuedEntry *)hash_search(issued_hash, key, HASH_ENTER_NULL, &found);
    if (e == NULL)
        return NULL;
    if (!found) {
        issued_shared->entries++;
        SpinLockInit(&e->mutex);
        e->issued = 0;
        e->rate_issued = 0;
        e->rate = 0;
        e->rate_time = now;
        e->last_counted = now;
        e->runway_warned = false;
        e->ordered = false;
    }
    return e;
}

static void count_issued(Oid dboid, uint64 creation, int32 seq_id, uint64 ids, bool rate_too)
{
    if (issued_shared == NULL || ids == 0)
        return;
    HiloPoolKey key = make_key(dboid, creation, seq_id);
    TimestampTz now = GetCurrentTimestamp();
    LWLockAcquire(issued_shared->lock, LW_SHARED);
    IssuedEntry *e = (IssuedEntry *)hash_search(issued_hash, &key, HASH_FIND, NULL);
    if (e == NULL) {
        LWLockRelease(issued_shared->lock);
        LWLockAcquire(issued_shared->lock, LW_EXCLUSIVE);
        e = entry_locked(&key, now);
    }
    if (e != NULL) {
        SpinLockAcquire(&e->mutex);
        if (rate_too) {
            e->ordered = true;
            update_rate(e, now);
        }
        /* The rate counts at most a minute's worth at the current rate (at
         * least RATE_CAP_FLOOR IDs) of one count: a steady stream of large
         * takes still raises it (it can double with each), but one huge
         * take does not turn it, and "lasts", into nonsense for minutes. */
        double cap = Max(e->rate * 60.0, RATE_CAP_FLOOR);
        uint64 counted = (double)ids <= cap ? ids : (uint64)cap;
        e->issued = add_saturating(e->issued, ids);
        e->rate_issued = add_saturating(e->rate_issued, ids - counted);
        e->last_counted = now;
        SpinLockRelease(&e->mutex);
    }
    LWLockRelease(issued_shared->lock);
}

void hilo_issued_count(Oid dboid, uint64 creation, int32 seq_id, uint64 ids)
{
    count_issued(dboid, creation, seq_id, ids, false);
}

void hilo_issued_count_ordered(Oid dboid, uint64 creation, int32 seq_id, uint64 ids)
{
    count_issued(dboid, creation, seq_id, ids, true);
}

void hilo_issued_returned(Oid dboid, uint64 creation, int32 seq_id, uint64 ids)
{
    if (issued_shared == NULL || ids == 0)
        return;
    HiloPoolKey key = make_key(dboid, creation, seq_id);
    LWLockAcquire(issued_shared->lock, LW_SHARED);
    IssuedEntry *e = (IssuedEntry *)hash_search(issued_hash, &key, HASH_FIND, NULL);
    if (e != NULL) {
        SpinLockAcquire(&e->mutex);
        e->issued -= Min(e->issued, ids);
        e->rate_issued -= Min(e->rate_issued, ids);
        SpinLockRelease(&e->mutex);
    }
    LWLockRelease(issued_shared->lock);
}

int hilo_issued_read(Oid dboid, uint64 creation, HiloIssued *out, int max)
{
    int n = 0;
    if (issued_shared == NULL)
        return 0;
    TimestampTz now = GetCurrentTimestamp();
    LWLockAcquire(issued_shared->lock, LW_SHARED);
    HASH_SEQ_STATUS scan;
    hash_seq_init(&scan, issued_hash);
    IssuedEntry *e;
    while ((e = (IssuedEntry *)hash_seq_search(&scan)) != NULL) {
        if (e->key.dboid != dboid || e->key.creation != creation)
            continue;
        if (n >= max) {
            hash_seq_term(&scan);
            break;
        }
        SpinLockAcquire(&e->mutex);
        if (e->ordered)
            update_rate(e, now);
        IssuedEntry copy = *e;
        SpinLockRelease(&e->mutex);
        /* Reading changes nothing but an ordered sequence's rate (a view
         * read twice shows the same, as test/t/046_failed_calls.pl's
         * fingerprints need), unless nothing updated the rate for long. */
        if (now - copy.rate_time > stale_rate_us())
            update_rate(&copy, now);
        out[n].seq_id = copy.key.seq_id;
        out[n].issued = copy.issued;
        out[n].rate = copy.rate;
        out[n].runway_warned = copy.runway_warned;
        n++;
    }
    LWLockRelease(issued_shared->lock);
    return n;
}

void hilo_issued_update_rates(Oid dboid)
{
    if (issued_shared == NULL)
        return;
    TimestampTz now = GetCurrentTimestamp();
    LWLockAcquire(issued_shared->lock, LW_SHARED);
    HASH_SEQ_STATUS scan;
    hash_seq_init(&scan, issued_hash);
    IssuedEntry *e;
    while ((e = (IssuedEntry *)hash_seq_search(&scan)) != NULL) {
        if (e->key.dboid != dboid)
            continue;
        SpinLockAcquire(&e->mutex);
        update_rate(e, now);
        SpinLockRelease(&e->mutex);
    }
    LWLockRelease(issued_shared->lock);
}

bool hilo_issued_set_warned(Oid dboid, uint64 creation, int32 seq_id, bool warned)
{
    if (issued_shared == NULL)
        return false;
    HiloPoolKey key = make_key(dboid, creation, seq_id);
    bool changed = false;
    LWLockAcquire(issued_shared->lock, LW_SHARED);
    IssuedEntry *e = (IssuedEntry *)hash_search(issued_hash, &key, HASH_FIND, NULL);
    if (e != NULL) {
        SpinLockAcquire(&e->mutex);
        changed = e->runway_warned != warned;
        e->runway_warned = warned;
        SpinLockRelease(&e->mutex);
    }
    LWLockRelease(issued_shared->lock);
    return changed;
}
