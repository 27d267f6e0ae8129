/*
 * sql/sql.h: what the SQL entry points share among themselves: when cached
 * catalog reads may be stale, and the sequences this backend's takes used.
 */
#ifndef HILO_PG_SQL_SQL_H
#define HILO_PG_SQL_SQL_H

#include "../alloc/alloc.h"

/* ---- sql/catalog_epochs.cpp: when cached catalog reads may be stale ---- */

/* Registers the invalidation callbacks (once) and notes the catalog's
 * relations; call before reading the epochs that guard a lookup. */
extern void hilo_epochs_watch_catalog(void);
/* The counters, moved only by catalog_epochs.cpp's callbacks; read through
 * the two functions below (inline: hilo_nextval's fast path reads one). */
extern uint64 hilo_catalog_epoch_counter;
extern uint64 hilo_usage_epoch_counter;
/* Grows when hilo.sequences may have changed (or the catalog went). */
static inline uint64 hilo_catalog_epoch(void)
{
    return hilo_catalog_epoch_counter;
}
/* Grows when a usage decision may have changed: grants, owners, roles. */
static inline uint64 hilo_usage_epoch(void)
{
    return hilo_usage_epoch_counter;
}

/* ---- sql/take_cache.cpp: the sequences this backend's takes used ---- */

typedef struct HiloTakeTarget {
    HiloSequence seq;
    int pool_index; /* -1 until a take attached a pool */
    uint64 generation;
} HiloTakeTarget;

/* The cached sequence `name` (`len` bytes, not NUL-terminated), if nothing
 * may have changed it or the current user's right to use it since it was
 * looked up; else NULL. */
extern HiloTakeTarget *hilo_take_cache_find(const char *name, int len);
/* Looks `name` up in the caller's snapshot into *seq, checks usage (42501)
 * and caches it; NULL for a sequence created in this transaction. */
extern HiloTakeTarget *hilo_take_cache_load(const char *name, HiloSequence *seq);

/* ---- sql/sequences.cpp: argument checks hilo_create and hilo_alter share ---- */

/* 22023 unless value >= 1. */
extern void hilo_check_positive(const char *what, int64 value);
/* 22023 unless 1 <= value <= HILO_MAX_OPEN_WINDOWS. */
extern void hilo_check_open_windows(int64 value);

#endif /* HILO_PG_SQL_SQL_H */
