/*
 * sql/cached_sequence.h: one entry of hilo_nextval's backend-local cache
 * (sql/nextval_cache.cpp keeps them, sql/name_index.cpp finds them by
 * name, sql/nextval.cpp calls with them) and the reads of its buffer.
 */
#ifndef HILO_PG_SQL_CACHED_SEQUENCE_H
#define HILO_PG_SQL_CACHED_SEQUENCE_H

#include "sql.h"

extern "C" {
#include "miscadmin.h"
#include "utils/timestamp.h"
}

/*
 * What this backend knows of a sequence it used, laid out for the calls
 * that go round many sequences, where each call finds its entry cold: the
 * first line holds every field a call reads that finds IDs in its buffer,
 * the second what a refill and an eviction read and a short name, and the
 * entry starts on a boundary of PG_CACHE_LINE_SIZE, so both lines come in
 * together (nextval_cache.cpp allocates them). The catalog row is last.
 * A call by another name than the last one's reads the copy of the first
 * line's fields its slot of the name index holds (name_index.h).
 */
typedef struct CachedSequence {
    /* The call's line; generation: of the pool, when looked up. */
    alignas(PG_CACHE_LINE_SIZE) uint64 generation;
    uint64 stamp;     /* published under this stamp, or 0 */
    HiloBuffer *buf;  /* this backend's buffer `buffer`, or NULL */
    int64 last_value; /* the last ID this backend's nextval returned, or 0 */
    /* The usage check passed for this user while the usage epoch had this value. */
    uint64 usage_epoch;
    uint64 catalog_epoch; /* the catalog epoch when looked up */
    Oid usage_user;
    int32 pool_index;
    uint16 name_len;
    bool valid;
    bool monotonic;  /* seq.ordering == HILO_ORDERING_NODE, for the fast path */
    bool ordered;    /* ordered across the cluster: no pool, no buffer */
    bool referenced; /* used since the clock hand last passed */
    bool evicted;    /* see block_used */

    /* The refill's line. */
    alignas(64) uint64 block; /* IDs the next refill asks for */
    TimestampTz filled_at;    /* when the buffer was last refilled */
    /* Its buffer was taken back for another sequence since the last refill
     * (`evicted`), when `block_used` IDs of its last block had been used. */
    uint64 block_used;
    int32 buffer;                       /* index of its buffer, or -1 */
    int32 block_size;                   /* seq.block_size */
    uint32 slot;                        /* its slot in the name index */
    char name[HILO_MAX_NAME_BYTES + 1]; /* NUL-terminated */

    HiloSequence seq;
} CachedSequence;

static inline bool usage_checked(const CachedSequence *c)
{
    return c->usage_epoch == hilo_usage_epoch() && c->usage_user == GetUserId();
}

/* Whether two names of `len` bytes are the same: short ones in a loop kept
 * inline (memcmp of a length not known here is a call, and a session that
 * goes round many sequences compares two names of a length per call). */
static inline bool names_equal(const char *a, const char *b, int len)
{
    if (len > 16)
        return memcmp(a, b, len) == 0;
    for (int i = 0; i < len; i++)
        if (a[i] != b[i])
            return false;
    return true;
}

/* The next ID of `buf`, if it holds IDs of pool generation `generation`. */
static inline bool buffer_next(HiloBuffer *buf, uint64 generation, int64 *id)
{
    if (buf == NULL || !buf->in_use || buf->generation != generation)
        return false;
    int64 next = (int64)pg_atomic_read_u64(&buf->next);
    if (next >= buf->end)
        return false;
    pg_atomic_write_u64(&buf->next, (uint64)next + 1);
    *id = next;
    return true;
}

/* The next ID of the entry's buffer, if the buffer holds IDs of the pool
 * generation the entry knows; the caller has checked that generation is
 * still the pool's. */
static inline bool take_from_buffer(CachedSequence *c, int64 *id)
{
    if (!buffer_next(c->buf, c->generation, id))
        return false;
    c->last_value = *id;
    c->referenced = true;
    return true;
}

#endif /* HILO_PG_SQL_CACHED_SEQUENCE_H */
