/*
 * shmem.cpp: hilo's one shared-memory segment and its one pair of hooks,
 * laid out as the parts the subsystems add from _PG_init
 * (hilo_shmem_add_part: the allocator's state, alloc/shared.cpp; the
 * agent's table; ...); and the two latch helpers every waiting process
 * uses: waking another, sleeping on its own.
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
#include "utils/timestamp.h"
}

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* The parts, laid out in the order they were added. */
#define HILO_MAX_SHMEM_PARTS 16
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

/* Each part starts on a cache line; the slack lets the first one be
 * aligned wherever ShmemInitStruct puts the segment. */
static Size segment_size(void)
{
    Size size = PG_CACHE_LINE_SIZE;
    for (int i = 0; i < nparts; i++)
        size = add_size(size, CACHELINEALIGN(part_size(parts[i])));
    return size;
}

static void hilo_shmem_request(void)
{
    if (prev_shmem_request_hook)
        prev_shmem_request_hook();
    Size size = segment_size();
    for (int i = 0; i < nparts; i++) {
        if (parts[i]->extra_size != NULL)
            size = add_size(size, parts[i]->extra_size());
        if (parts[i]->lwlocks > 0)
            RequestNamedLWLockTranche(parts[i]->name, parts[i]->lwlocks);
    }
    RequestAddinShmemSpace(size);
}

static void hilo_shmem_startup(void)
{
    bool found;

    if (prev_shmem_startup_hook)
        prev_shmem_startup_hook();

    LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
    char *segment = (char *)ShmemInitStruct("hilo", segment_size(), &found);
    if (!found)
        memset(segment, 0, segment_size());
    char *base = (char *)CACHELINEALIGN(segment);
    for (int i = 0; i < nparts; i++) {
        *parts[i]->address = base;
        if (!found && parts[i]->init != NULL)
            parts[i]->init();
        base += CACHELINEALIGN(part_size(parts[i]));
    }
    for (int i = 0; i < nparts; i++)
        if (parts[i]->attach != NULL)
            parts[i]->attach();
    LWLockRelease(AddinShmemInitLock);
}

void hilo_shmem_install_hooks(void)
{
    prev_shmem_request_hook = shmem_request_hook;
    shmem_request_hook = hilo_shmem_request;
    prev_shmem_startup_hook = shmem_startup_hook;
    shmem_startup_hook = hilo_shmem_startup;
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
