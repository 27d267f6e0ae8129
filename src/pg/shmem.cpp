/*
 * shmem.cpp: hilo's one shared-memory segment and its one pair of hooks,
 * laid out as the parts the subsystems add from _PG_init
 * (hilo_shmem_add_part: the allocator's state, alloc/shared.cpp; the
 * agent's table; ...); and the latch helpers every waiting process
 * uses: waking another, polling its own for a moment, sleeping on it.
 *
 * On PostgreSQL 15, space and LWLock tranches are requested only in
 * shmem_request_hook and structures are created in shmem_startup_hook under
 * AddinShmemInitLock (the pattern of contrib/pg_stat_statements).
 */
#include "hilo.h"

#include <fcntl.h>
#include <unistd.h>

extern "C" {
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "port/atomics.h"
#include "portability/instr_time.h"
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

/*
 * How many tasks the kernel has running or ready to run at this moment (the
 * fourth field of /proc/loadavg: "running/total"), or -1 if it cannot say.
 * The file stays open: one descriptor per process that ever polls.
 */
static int runnable_tasks(void)
{
    static int fd = -2;
    if (fd == -2) {
        fd = -1;
        if (AcquireExternalFD()) {
            fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
            if (fd < 0)
                ReleaseExternalFD();
        }
    }
    if (fd < 0)
        return -1;
    char buf[128];
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    const char *p = buf;
    for (int field = 0; field < 3 && p != NULL; field++) {
        p = strchr(p, ' ');
        if (p != NULL)
            p++;
    }
    return p != NULL && *p >= '0' && *p <= '9' ? atoi(p) : -1;
}

/*
 * Polls this process's latch for at most `max_us` microseconds, on a CPU of
 * its own, instead of sleeping. A process that is not sleeping on its latch
 * is woken without a signal (SetLatch sends one only to a process that
 * sleeps), and sees the latch set within a pause instruction; a wake-up
 * of a sleeping process costs a signal and a reschedule, tens of
 * microseconds on a virtual machine. Nothing else is served meanwhile:
 * anything that must be (an interrupt, SIGTERM) sets the latch too.
 *
 * Polling pays only with a CPU to spare: it does not start when more tasks
 * are ready to run than the machine has CPUs (the poller among them), and
 * a poll that the latch did not end makes the next ones skipped, twice as
 * many each time up to 63 of 64, until one is ended again. Returns whether
 * the latch was set; the caller resets it as after WaitLatch.
 */
bool hilo_spin_for_latch(HiloSpin *spin, long max_us)
{
    static int cpus = -1;
    if (cpus < 0)
        cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (max_us <= 0 || cpus < 2) /* on one CPU the waker cannot run meanwhile */
        return false;
    if (spin->skip > 0) {
        spin->skip--;
        return false;
    }
    int runnable = runnable_tasks();
    if (runnable >= 0 && runnable <= cpus) {
        instr_time start, now;
        INSTR_TIME_SET_CURRENT(start);
        for (int i = 1;; i++) {
            pg_read_barrier();
            if (MyLatch->is_set) {
                spin->misses = 0;
                return true;
            }
            pg_spin_delay();
            if (i % 32 == 0) {
                INSTR_TIME_SET_CURRENT(now);
                INSTR_TIME_SUBTRACT(now, start);
                if ((long)INSTR_TIME_GET_MICROSEC(now) >= max_us)
                    break;
            }
        }
    }
    if (spin->misses < 6)
        spin->misses++;
    spin->skip = (1 << spin->misses) - 1;
    return false;
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
