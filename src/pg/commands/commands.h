/*
 * commands/commands.h: hooks on PostgreSQL's own commands (DROP DATABASE and
 * its kin, DROP ROLE and its kin, DDL that names a hilo sequence in a
 * default), and what sql/ asks of them.
 */
#ifndef HILO_PG_COMMANDS_COMMANDS_H
#define HILO_PG_COMMANDS_COMMANDS_H

#include "../alloc/alloc.h"

extern "C" {
#include "tcop/utility.h"
}

/* Runs the ProcessUtility hook installed before ours, or PostgreSQL's own. */
static inline void hilo_run_process_utility(ProcessUtility_hook_type prev, PlannedStmt *pstmt,
                                            const char *query_string, bool read_only_tree,
                                            ProcessUtilityContext context, ParamListInfo params,
                                            QueryEnvironment *query_env, DestReceiver *dest,
                                            QueryCompletion *qc)
{
    if (prev)
        prev(pstmt, query_string, read_only_tree, context, params, query_env, dest, qc);
    else
        standard_ProcessUtility(pstmt, query_string, read_only_tree, context, params, query_env,
                                dest, qc);
}

/* Column defaults (and generation expressions) and domain defaults that
 * call a hilo function with the constant sequence name `name`
 * (commands/sequence_dependents.cpp): columns as (relid, attnum), domains by OID,
 * and a description of each, columns first. */
extern void hilo_find_dependent_defaults(const char *name, struct List **relids,
                                         struct List **attnums, struct List **domains,
                                         struct List **descriptions);

/* ---- commands/sequence_drop.cpp: dropping a sequence ---- */

/* Where a sequence created under `name` without start_value starts;
 * refuses (55000) `node_bits` other than a dropped one's, both > 0. */
extern int64 hilo_start_above_dropped(const char *name, int32 node_bits);
/* Lifts the created_at of the new sequence `seq_id` just above every
 * dropped copy of `name` this node knows of. */
extern void hilo_created_after_dropped(const char *name, int32 seq_id);
/* Drops `seq`, which hilo_begin_owned_sequence() found and locked in
 * `access`, with its dependent defaults if `cascade` (2BP01 if there are
 * some and not `cascade`); ends `access`. */
extern void hilo_drop_locked(const char *name, const HiloSequence &seq, bool cascade,
                             HiloCatalogAccess *access);
/* DROP OWNED's drop of the sequence `name` it found owned by the roles:
 * as hilo_drop(name, cascade), but one dropped meanwhile is skipped, and
 * one made again meanwhile (another sequence, perhaps another owner's) is
 * 40001, not dropped. */
extern void hilo_drop_owned_sequence(const char *name, bool cascade);
/* ---- commands/sequence_raise.cpp: raising a sequence above IDs in use ---- */

/* Raises `seq`, which hilo_begin_owned_sequence() found and locked in
 * `access`, so that once the transaction commits no ID at or below `above`
 * is handed out (pools, buffers, windows and free ranges included: what
 * they held below it is a gap); ends `access`. 22023 for a mark below the
 * sequence's start (lowering) or at or above its max_value. A rollback
 * undoes it. */
extern void hilo_raise_locked(const char *name, const HiloSequence &seq, int64 above,
                              HiloCatalogAccess *access);
/* 22023 for a mark below the sequence's start (lowering) or at or above
 * its max_value. */
extern void hilo_check_raise(const char *name, const HiloSequence &seq, int64 above);

/* From _PG_init: the hooks on PostgreSQL's commands (commands/). */
extern void hilo_commands_init(void);
/* Installs the utility hook that stops a database's allocator before
 * database-level commands, and the object access hook that sees the
 * catalog dropped (commands/database_commands.cpp). */
extern void hilo_database_install_hooks(void);
/* Installs the utility hook by which DROP ROLE, REASSIGN OWNED and DROP
 * OWNED see hilo sequences (commands/role_commands.cpp). */
extern void hilo_role_install_hooks(void);
/* Locks a role that a catalog row is about to name, and checks that it
 * still exists (as PostgreSQL's shdepLockAndCheckObject). */
extern void hilo_lock_role(Oid role);
/* The database a utility command needs free of its allocator, if the
 * command passes PostgreSQL's own checks; InvalidOid otherwise. */
extern Oid hilo_database_needing_no_allocator(struct Node *parsetree, bool is_top_level);

#endif /* HILO_PG_COMMANDS_COMMANDS_H */
