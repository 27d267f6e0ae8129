/*
 * alloc/window_rows.h: the allocator's writes of hilo.windows rows, for
 * alloc/reserve.cpp (alloc/window_rows.cpp). Runs in the allocator's
 * transaction, with the sequence's row locked.
 */
#ifndef HILO_PG_ALLOC_WINDOW_ROWS_H
#define HILO_PG_ALLOC_WINDOW_ROWS_H

#include "../hilo.h"

extern "C" {
#include "storage/itemptr.h"
}

typedef struct HiloWindowRows HiloWindowRows;

/* Opens hilo.windows and its indexes for writing (RowExclusiveLock, held
 * to the end of the transaction); palloc'd in the current context. */
extern HiloWindowRows *hilo_window_rows_open(void);
/* Writes a window: IDs start to end - 1, next_hi_value `next`. Raises
 * 23514 as the table's window_bounds constraint would, and 23505 for a
 * window of that start already there. */
extern void hilo_window_rows_insert(HiloWindowRows *rows, int32 seq_id, int64 start, int64 end,
                                    int64 next);
/* Sets next_hi_value of the window of `seq_id` and `start` whose row
 * version is at `tid` (as read in this transaction). Raises if that row
 * version is not the window's or was updated since. */
extern void hilo_window_rows_set_next(HiloWindowRows *rows, ItemPointer tid, int32 seq_id,
                                      int64 start, int64 next);
/* One open window as read: IDs next to end - 1 left, its row version at tid. */
typedef struct HiloOpenWindow {
    int64 start;
    int64 end; /* exclusive */
    int64 next;
    ItemPointerData tid;
} HiloOpenWindow;
/* Sets next_hi_value of `windows` (n, as read in this transaction, lowest
 * first) to their ends: used up. With `fold`, a window that continues
 * used-up rows right below it joins them: the lowest is extended over it
 * and the others are deleted (a few at most per call), so that windows
 * used up one after another stay one row; windows of `windows` that follow
 * one another join it in the same write. The rows cover the same IDs
 * either way. */
extern void hilo_window_rows_use_up(HiloWindowRows *rows, int32 seq_id,
                                    const HiloOpenWindow *windows, uint32 n, bool fold);
/* Reads up to `limit` open windows of `seq_id` into `out`, lowest first,
 * through the index windows_open under a new snapshot (which sees this
 * transaction's writes, as the SELECT it replaces did). Returns how many. */
extern uint32 hilo_window_rows_read_open(HiloWindowRows *rows, int32 seq_id, uint32 limit,
                                         HiloOpenWindow *out);
/* Closes what hilo_window_rows_open opened and makes the rows written
 * visible to the transaction's next statements. NULL: nothing. */
extern void hilo_window_rows_close(HiloWindowRows *rows);

#endif /* HILO_PG_ALLOC_WINDOW_ROWS_H */
