/*
 * compat.h: everything that differs between the PostgreSQL majors hilo
 * builds for (15, 17, 18 and 19; the registry has no 16, but the tests
 * below are written by the release that changed each API). The version
 * tests live here and nowhere else: the rest of src/pg/ is written against
 * the newest API, and this header gives the older majors the same names.
 * hilo.h includes it, right after postgres.h.
 */
#ifndef HILO_PG_COMPAT_H
#define HILO_PG_COMPAT_H

extern "C" {
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "replication/walsender_private.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/rangetypes.h"
#include "utils/resowner.h"
#if PG_VERSION_NUM >= 160000
/* VARDATA_ANY and friends left postgres.h for varatt.h in 16. */
#include "varatt.h"
#else
#include "catalog/pg_database_d.h"
#include "catalog/pg_tablespace_d.h"
#endif
}

/*
 * MyProcNumber: this process's index in the PGPROC array (PGPROC's
 * pgprocno until 16; 17 dropped that field for MyProcNumber and
 * GetNumberFromPGProc).
 */
#if PG_VERSION_NUM < 170000
#define MyProcNumber (MyProc->pgprocno)
#define GetNumberFromPGProc(proc) ((proc)->pgprocno)
#endif

/*
 * object_ownercheck and object_aclcheck (16) replaced the per-catalog
 * pg_database_ownercheck, pg_tablespace_aclcheck, ... (gone in 17). The
 * older majors get the two for the catalogs hilo asks about.
 */
#if PG_VERSION_NUM < 160000
static inline bool object_ownercheck(Oid classid, Oid objectid, Oid roleid)
{
    Assert(classid == DatabaseRelationId);
    (void)classid;
    return pg_database_ownercheck(objectid, roleid);
}

static inline AclResult object_aclcheck(Oid classid, Oid objectid, Oid roleid, AclMode mode)
{
    Assert(classid == TableSpaceRelationId);
    (void)classid;
    return pg_tablespace_aclcheck(objectid, roleid, mode);
}
#endif

/*
 * Wait event sets. Until 16 a set lives in the memory context it is made
 * in; from 17 it is made in TopMemoryContext and a resource owner (or
 * none) frees it at the end of the transaction. hilo_wait_set_for_call:
 * a set that the caller frees before it returns, on error too (15: in
 * CurrentMemoryContext; 17: owned by CurrentResourceOwner, so an error
 * that skips the caller's free still releases it).
 * hilo_lasting_wait_set: a set kept across transactions until the caller
 * frees it.
 */
static inline WaitEventSet *hilo_wait_set_for_call(int nevents)
{
#if PG_VERSION_NUM >= 170000
    return CreateWaitEventSet(CurrentResourceOwner, nevents);
#else
    return CreateWaitEventSet(CurrentMemoryContext, nevents);
#endif
}

static inline WaitEventSet *hilo_lasting_wait_set(int nevents)
{
#if PG_VERSION_NUM >= 170000
    return CreateWaitEventSet(NULL, nevents);
#else
    return CreateWaitEventSet(TopMemoryContext, nevents);
#endif
}

/*
 * hilo_expression_tree_walker(node, walker, context): walker is a
 * bool (*)(Node *, void *). 15 declares the walker argument as bool (*)(),
 * which C++ reaches only through a cast; 16 made expression_tree_walker a
 * macro that casts to tree_walker_callback itself, and a second cast there
 * trips -Werror=cast-function-type.
 */
#if PG_VERSION_NUM >= 160000
#define hilo_expression_tree_walker(node, walker, context) \
    expression_tree_walker((node), (walker), (context))
#else
#define hilo_expression_tree_walker(node, walker, context) \
    expression_tree_walker((node), (bool (*)())(void (*)())(walker), (context))
#endif

/* make_range: 16 added the soft-error context (NULL: errors are thrown). */
#if PG_VERSION_NUM >= 160000
#define hilo_make_range(typcache, lower, upper, empty) \
    make_range((typcache), (lower), (upper), (empty), NULL)
#else
#define hilo_make_range(typcache, lower, upper, empty) \
    make_range((typcache), (lower), (upper), (empty))
#endif

/*
 * pg_attribute_noreturn(), after a declaration: 18 replaced it with
 * pg_noreturn before the declaration. GCC and clang take the attribute in
 * either place, so the older spelling stays, for every major.
 */
#ifndef pg_attribute_noreturn
#define pg_attribute_noreturn() __attribute__((noreturn))
#endif

/*
 * LWLock tranches of an extension: until 18 a tranche ID comes unnamed
 * from LWLockNewTrancheId() and every process names it with
 * LWLockRegisterTranche; 19 names it once, in shared memory, when it is
 * made. hilo_new_tranche_id(name) makes one (once, at shared memory
 * set-up); hilo_register_tranche(id, name) names it in this process.
 */
#if PG_VERSION_NUM >= 190000
#define hilo_new_tranche_id(name) LWLockNewTrancheId(name)
#define hilo_register_tranche(id, name) ((void)(id), (void)(name))
#else
#define hilo_new_tranche_id(name) ((void)(name), LWLockNewTrancheId())
#define hilo_register_tranche(id, name) LWLockRegisterTranche((id), (name))
#endif

/* ShmemInitHash: 19 dropped the initial size (it was the maximum here). */
#if PG_VERSION_NUM >= 190000
#define hilo_shmem_init_hash(name, nelems, info, flags) \
    ShmemInitHash((name), (nelems), (info), (flags))
#else
#define hilo_shmem_init_hash(name, nelems, info, flags) \
    ShmemInitHash((name), (nelems), (nelems), (info), (flags))
#endif

/* The cache ID a syscache callback gets: an int until 18, an enum in 19. */
#if PG_VERSION_NUM >= 190000
typedef SysCacheIdentifier HiloSysCacheId;
#else
typedef int HiloSysCacheId;
#endif

/*
 * hilo_sync_standbys_waited(named): whether a commit waits for synchronous
 * standbys, as the WAL senders see it (the caller holds SyncRepLock;
 * named: synchronous_standby_names is set). 15.13 and 17 keep it in
 * sync_standbys_status, whose SYNC_STANDBY_INIT says whether the
 * checkpointer has set it yet; the 15 releases before had
 * sync_standbys_defined.
 */
#ifdef SYNC_STANDBY_DEFINED
#define hilo_sync_standbys_waited(named)                                 \
    ((WalSndCtl->sync_standbys_status & SYNC_STANDBY_INIT)               \
         ? (WalSndCtl->sync_standbys_status & SYNC_STANDBY_DEFINED) != 0 \
         : (named))
#else
#define hilo_sync_standbys_waited(named) ((named) && WalSndCtl->sync_standbys_defined)
#endif

/*
 * A row written through the table access method, with its index entries
 * (alloc/window_rows.cpp; the caller includes access/heapam.h and
 * executor/executor.h). hilo_simple_heap_update: simple_heap_update, and
 * whether the new version needs index entries (*indexes) and only in
 * summarizing indexes (*summarizing): 16 reports it in TU_UpdateIndexes,
 * 15 leaves a HOT version marked heap-only. hilo_insert_index_tuples:
 * ExecInsertIndexTuples of a slot with no arbiter indexes and no
 * speculative insertion; 16 added onlySummarizing, 19 put the flags in a
 * bitmask and the slot after the state.
 */
#if PG_VERSION_NUM >= 160000
#define hilo_simple_heap_update(rel, otid, tup, indexes, summarizing) \
    do {                                                              \
        TU_UpdateIndexes hilo_tu_;                                    \
        simple_heap_update((rel), (otid), (tup), &hilo_tu_);          \
        *(indexes) = hilo_tu_ != TU_None;                             \
        *(summarizing) = hilo_tu_ == TU_Summarizing;                  \
    } while (0)
#else
#define hilo_simple_heap_update(rel, otid, tup, indexes, summarizing) \
    do {                                                              \
        simple_heap_update((rel), (otid), (tup));                     \
        *(indexes) = !HeapTupleIsHeapOnly(tup);                       \
        *(summarizing) = false;                                       \
    } while (0)
#endif
#if PG_VERSION_NUM >= 190000
#define hilo_insert_index_tuples(rri, slot, estate, summarizing)                                   \
    ExecInsertIndexTuples((rri), (estate), (summarizing) ? EIIT_ONLY_SUMMARIZING : 0, (slot), NIL, \
                          NULL)
#elif PG_VERSION_NUM >= 160000
#define hilo_insert_index_tuples(rri, slot, estate, summarizing) \
    ExecInsertIndexTuples((rri), (slot), (estate), false, false, NULL, NIL, (summarizing))
#else
#define hilo_insert_index_tuples(rri, slot, estate, summarizing) \
    ((void)(summarizing), ExecInsertIndexTuples((rri), (slot), (estate), false, false, NULL, NIL))
#endif

#endif /* HILO_PG_COMPAT_H */
