/*
 * alloc/commit.cpp: what a backend's transaction tells the allocator and
 * the pools when it commits or prepares: pushes (so pools recycle them),
 * drops and settings changes (so pools go stale), a catalog that is
 * dropped (every pool of the database), and a wake-up for the allocator.
 */
#include "internal.h"

extern "C" {
#include "access/xact.h"
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

static bool xact_callback_registered = false;
static bool wake_allocator_at_commit = false;
static bool free_ranges_changed_at_commit = false;

/* Sequences whose pools must learn, at commit, of a push or of a drop or
 * settings change (which makes their buffers and pool stale). */
#define HILO_MAX_NOTED 64
static int32 pushed_at_commit[HILO_MAX_NOTED];
static uint64 pushed_creation_at_commit[HILO_MAX_NOTED];
static int npushed_at_commit = 0;
static int32 invalidated_at_commit[HILO_MAX_NOTED];
static int ninvalidated_at_commit = 0;
static bool invalidate_all_at_commit = false; /* more than fit in the list */

/* Tells this database's allocator to merge free ranges at its next round. */
static void mark_free_ranges_changed(void)
{
    LWLockAcquire(hilo_shared->lock, LW_EXCLUSIVE);
    HiloWorkerEntry *e = hilo_find_worker_locked(MyDatabaseId);
    if (e != NULL) {
        e->free_ranges_changed = true;
        hilo_merge_publish_spans_locked(e);
    }
    LWLockRelease(hilo_shared->lock);
    hilo_merge_forget_spans();
}

/* Makes the noted pools stale. Only ever makes a gap, so it is as safe
 * for a transaction that then fails to commit as for one that commits. */
static void invalidate_noted_pools(void)
{
    for (int i = 0; i < ninvalidated_at_commit; i++)
        hilo_pool_invalidate(MyDatabaseId, invalidated_at_commit[i]);
    if (invalidate_all_at_commit)
        hilo_pool_invalidate(MyDatabaseId, -1);
}

static void forget_noted(void)
{
    wake_allocator_at_commit = free_ranges_changed_at_commit = false;
    hilo_merge_forget_spans();
    npushed_at_commit = ninvalidated_at_commit = 0;
    invalidate_all_at_commit = false;
}

/*
 * Drops and settings changes make pools stale before the transaction can
 * be seen to commit (PRE_COMMIT, PRE_PREPARE), so that no session serves a
 * buffer of the old sequence once the drop is visible, and again at COMMIT
 * for a pool attached in between. A prepared transaction commits in
 * whichever session runs COMMIT PREPARED, where no callback of this one
 * runs: its invalidation is the one made at PRE_PREPARE (while it stays
 * prepared, its row lock keeps the allocator from refilling the sequence),
 * and the relcache invalidation of hilo.sequences that hilo_drop and
 * hilo_alter register, which PostgreSQL carries through PREPARE and sends
 * at COMMIT PREPARED: it makes every session look its cached sequences up
 * again. Pushes need nothing at commit for correctness; a prepared push is
 * seen by the next refill, which takes the free list first.
 */
static void xact_callback(XactEvent event, void *arg)
{
    HILO_FORGET_UNWOUND_FRAMES();
    switch (event) {
        case XACT_EVENT_PRE_COMMIT:
        case XACT_EVENT_PARALLEL_PRE_COMMIT:
        case XACT_EVENT_PRE_PREPARE:
            invalidate_noted_pools();
            break;
        case XACT_EVENT_COMMIT:
        case XACT_EVENT_PARALLEL_COMMIT:
            invalidate_noted_pools();
            for (int i = 0; i < npushed_at_commit; i++)
                hilo_pool_note_push(MyDatabaseId, pushed_creation_at_commit[i],
                                    pushed_at_commit[i]);
            if (free_ranges_changed_at_commit)
                mark_free_ranges_changed();
            if (wake_allocator_at_commit)
                hilo_allocator_wake();
            forget_noted();
            break;
        case XACT_EVENT_PREPARE:
            /* Committed (or not) elsewhere; this session is done with it. */
            forget_noted();
            break;
        case XACT_EVENT_ABORT:
        case XACT_EVENT_PARALLEL_ABORT:
            forget_noted();
            break;
        default:
            break;
    }
}

static void register_xact_callback(void)
{
    if (!xact_callback_registered) {
        RegisterXactCallback(xact_callback, NULL);
        xact_callback_registered = true;
    }
}

void hilo_note_push_at_commit(uint64 creation, int32 seq_id)
{
    register_xact_callback();
    for (int i = 0; i < npushed_at_commit; i++)
        if (pushed_at_commit[i] == seq_id && pushed_creation_at_commit[i] == creation)
            return;
    /* Past the list's end the pool just learns of it at its next refill. */
    if (npushed_at_commit < HILO_MAX_NOTED) {
        pushed_creation_at_commit[npushed_at_commit] = creation;
        pushed_at_commit[npushed_at_commit++] = seq_id;
    }
}

void hilo_invalidate_at_commit(int32 seq_id)
{
    register_xact_callback();
    for (int i = 0; i < ninvalidated_at_commit; i++)
        if (invalidated_at_commit[i] == seq_id)
            return;
    if (ninvalidated_at_commit < HILO_MAX_NOTED)
        invalidated_at_commit[ninvalidated_at_commit++] = seq_id;
    else
        invalidate_all_at_commit = true;
}

void hilo_allocator_wake_at_commit(bool free_ranges_changed)
{
    register_xact_callback();
    wake_allocator_at_commit = true;

    free_ranges_changed_at_commit |= free_ranges_changed;
}

/* The catalog itself is being dropped: every pool of this database
 * becomes stale at commit or prepare (commands/database_commands.cpp). */
void hilo_invalidate_all_at_commit(void)
{
    register_xact_callback();
    invalidate_all_at_commit = true;
}
