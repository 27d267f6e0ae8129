/*
 * commands/database_commands.cpp: which database, if any, a utility command needs
 * free of its allocator.
 *
 * DROP DATABASE, ALTER DATABASE ... RENAME / SET TABLESPACE and CREATE
 * DATABASE ... TEMPLATE refuse to run while another session is connected to
 * the database concerned, and an allocator stays connected for as long as
 * it lives. So hilo stops that allocator before the command runs. But it
 * must stop it only for a command that will really run: a role with no
 * right on a database must not be able to stop its allocator (and make its
 * takes fail) by issuing a command that PostgreSQL then refuses.
 *
 * So the checks below are PostgreSQL's own, in dbcommands.c's order, up to
 * the point where the command counts the other sessions: the transaction
 * block check (raised here exactly as PostgreSQL raises it), existence,
 * ownership, CREATEDB, the current database, templates, tablespace rights,
 * active replication slots and subscriptions. Any check that would fail
 * makes the answer "none", and PostgreSQL then raises its own error.
 */
#include "commands.h"

extern "C" {
#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_class.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_namespace.h"
#include "commands/extension.h"
#include "catalog/pg_database.h"
#include "catalog/pg_subscription.h"
#include "catalog/pg_tablespace_d.h"
#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "commands/tablespace.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "replication/slot.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
}

/* The database `name` with its template flag and tablespace, if it exists. */
static Oid find_database(const char *name, bool *is_template, Oid *tablespace)
{
    Oid dboid = get_database_oid(name, true);
    if (!OidIsValid(dboid))
        return InvalidOid;
    HeapTuple tuple = SearchSysCache1(DATABASEOID, ObjectIdGetDatum(dboid));
    if (!HeapTupleIsValid(tuple))
        return InvalidOid;
    Form_pg_database form = (Form_pg_database)GETSTRUCT(tuple);
    *is_template = form->datistemplate;
    *tablespace = form->dattablespace;
    ReleaseSysCache(tuple);
    return dboid;
}

/* The option `name` of a CREATE/ALTER DATABASE statement, or NULL. */
static DefElem *database_option(List *options, const char *name)
{
    ListCell *lc;
    foreach (lc, options) {
        DefElem *opt = (DefElem *)lfirst(lc);
        if (strcmp(opt->defname, name) == 0)
            return opt;
    }
    return NULL;
}

/* dropdb(): owner, not a template, not the current database, no active
 * logical slot, no subscription. */
static Oid drop_target(DropdbStmt *stmt, bool is_top_level)
{
    PreventInTransactionBlock(is_top_level, "DROP DATABASE");
    bool is_template;
    Oid tablespace;
    Oid dboid = find_database(stmt->dbname, &is_template, &tablespace);
    if (!OidIsValid(dboid) || !object_ownercheck(DatabaseRelationId, dboid, GetUserId()) ||
        is_template || dboid == MyDatabaseId)
        return InvalidOid;
    int nslots, nslots_active;
    (void)ReplicationSlotsCountDBSlots(dboid, &nslots, &nslots_active);
    if (nslots_active > 0 || CountDBSubscriptions(dboid) > 0)
        return InvalidOid;
    return dboid;
}

/* RenameDatabase(): owner with CREATEDB, the new name free, not the
 * current database. */
static Oid rename_target(RenameStmt *stmt)
{
    bool is_template;
    Oid tablespace;
    Oid dboid = find_database(stmt->subname, &is_template, &tablespace);
    if (!OidIsValid(dboid) || !object_ownercheck(DatabaseRelationId, dboid, GetUserId()) ||
        !have_createdb_privilege() || OidIsValid(get_database_oid(stmt->newname, true)) ||
        dboid == MyDatabaseId)
        return InvalidOid;
    return dboid;
}

/* movedb(), the only ALTER DATABASE that needs the database free: owner, not
 * the current database, CREATE on an existing tablespace other than
 * pg_global and other than the one the database is in (that is a no-op). */
static Oid set_tablespace_target(AlterDatabaseStmt *stmt, bool is_top_level)
{
    DefElem *opt = database_option(stmt->options, "tablespace");
    if (opt == NULL)
        return InvalidOid; /* CONNECTION LIMIT and the like run beside sessions */
    PreventInTransactionBlock(is_top_level, "ALTER DATABASE SET TABLESPACE");
    bool is_template;
    Oid current_tablespace;
    Oid dboid = find_database(stmt->dbname, &is_template, &current_tablespace);
    if (!OidIsValid(dboid) || !object_ownercheck(DatabaseRelationId, dboid, GetUserId()) ||
        dboid == MyDatabaseId)
        return InvalidOid;
    Oid tablespace = get_tablespace_oid(defGetString(opt), true);
    if (!OidIsValid(tablespace) ||
        object_aclcheck(TableSpaceRelationId, tablespace, GetUserId(), ACL_CREATE) != ACLCHECK_OK ||
        tablespace == GLOBALTABLESPACE_OID || tablespace == current_tablespace)
        return InvalidOid;
    return dboid;
}

/* createdb(): CREATEDB, membership in the new owner, the new name free,
 * CREATE on the tablespace given, and a template that is marked as one or
 * owned by the caller. No TEMPLATE option means template1. */
static Oid template_target(CreatedbStmt *stmt, bool is_top_level)
{
    PreventInTransactionBlock(is_top_level, "CREATE DATABASE");
    if (!have_createdb_privilege() || OidIsValid(get_database_oid(stmt->dbname, true)))
        return InvalidOid;
    DefElem *owner = database_option(stmt->options, "owner");
    if (owner != NULL && owner->arg != NULL) {
        Oid owner_oid = get_role_oid(defGetString(owner), true);
        if (!OidIsValid(owner_oid) || !is_member_of_role(GetUserId(), owner_oid))
            return InvalidOid;
    }
    DefElem *tablespace_opt = database_option(stmt->options, "tablespace");
    if (tablespace_opt != NULL && tablespace_opt->arg != NULL) {
        Oid tablespace = get_tablespace_oid(defGetString(tablespace_opt), true);
        if (!OidIsValid(tablespace) || object_aclcheck(TableSpaceRelationId, tablespace,
                                                       GetUserId(), ACL_CREATE) != ACLCHECK_OK)
            return InvalidOid;
    }
    DefElem *template_opt = database_option(stmt->options, "template");
    const char *template_name = template_opt != NULL && template_opt->arg != NULL
                                    ? defGetString(template_opt)
                                    : "template1";
    bool is_template;
    Oid tablespace;
    Oid dboid = find_database(template_name, &is_template, &tablespace);
    if (!OidIsValid(dboid) ||
        (!is_template && !object_ownercheck(DatabaseRelationId, dboid, GetUserId())))
        return InvalidOid;
    return dboid;
}

Oid hilo_database_needing_no_allocator(Node *parsetree, bool is_top_level)
{
    switch (nodeTag(parsetree)) {
        case T_DropdbStmt:
            return drop_target((DropdbStmt *)parsetree, is_top_level);
        case T_RenameStmt:
            if (((RenameStmt *)parsetree)->renameType == OBJECT_DATABASE)
                return rename_target((RenameStmt *)parsetree);
            return InvalidOid;
        case T_AlterDatabaseStmt:
            return set_tablespace_target((AlterDatabaseStmt *)parsetree, is_top_level);
        case T_CreatedbStmt:
            return template_target((CreatedbStmt *)parsetree, is_top_level);
        default:
            return InvalidOid;
    }
}

/*
 * DROP DATABASE, ALTER DATABASE ... RENAME / SET TABLESPACE and CREATE
 * DATABASE ... TEMPLATE refuse to run while anyone is connected to the
 * database, and an allocator is connected for as long as it lives. So before
 * such a command, the allocator of the database concerned is asked to exit,
 * but only once PostgreSQL's own checks are known to pass
 * (commands/database_commands.cpp).
 */
static ProcessUtility_hook_type prev_process_utility = NULL;

static void hilo_process_utility(PlannedStmt *pstmt, const char *query_string, bool read_only_tree,
                                 ProcessUtilityContext context, ParamListInfo params,
                                 QueryEnvironment *query_env, DestReceiver *dest,
                                 QueryCompletion *qc)
{
    HILO_FORGET_UNWOUND_FRAMES();
    bool is_top_level = context == PROCESS_UTILITY_TOPLEVEL;
    Oid dboid = hilo_database_needing_no_allocator(pstmt->utilityStmt, is_top_level);
    if (OidIsValid(dboid))
        hilo_allocator_stop_for_database(dboid);

    hilo_run_process_utility(prev_process_utility, pstmt, query_string, read_only_tree, context,
                             params, query_env, dest, qc);

    /* The database is gone (DROP DATABASE commits before it returns): its
     * pools' slots are free for other databases. */
    if (IsA(pstmt->utilityStmt, DropdbStmt) && OidIsValid(dboid) && hilo_shared != NULL)
        hilo_pool_invalidate(dboid, -1);
}

/*
 * The catalog itself is being dropped (DROP EXTENSION hilo, DROP SCHEMA
 * hilo CASCADE, DROP OWNED BY its owner, DROP TABLE hilo.sequences): at
 * commit, or prepare, every pool of this database becomes stale, as for a
 * hilo_drop of every sequence. A new catalog has a new creation, so its
 * pools never meet these; this is for sessions that still have buffers
 * (docs/design.md, "Catalog creations").
 */
static object_access_hook_type prev_object_access = NULL;

static bool is_hilo_catalog_object(Oid classId, Oid objectId, int subId)
{
    if (classId == ExtensionRelationId) {
        char *name = get_extension_name(objectId);
        return name != NULL && strcmp(name, "hilo") == 0;
    }
    if (classId == RelationRelationId && subId == 0) {
        Oid nsp = get_rel_namespace(objectId);
        if (!OidIsValid(nsp))
            return false;
        char *nspname = get_namespace_name(nsp);
        char *relname = get_rel_name(objectId);
        return nspname != NULL && relname != NULL && strcmp(nspname, "hilo") == 0 &&
               (strcmp(relname, "sequences") == 0 || strcmp(relname, "incarnation") == 0);
    }
    return false;
}

static void hilo_object_access(ObjectAccessType access, Oid classId, Oid objectId, int subId,
                               void *arg)
{
    HILO_FORGET_UNWOUND_FRAMES();
    if (prev_object_access)
        prev_object_access(access, classId, objectId, subId, arg);
    if (access != OAT_DROP || hilo_shared == NULL || !IsTransactionState())
        return;
    if (is_hilo_catalog_object(classId, objectId, subId))
        hilo_invalidate_all_at_commit();
}

void hilo_database_install_hooks(void)
{
    prev_process_utility = ProcessUtility_hook;
    ProcessUtility_hook = hilo_process_utility;
    prev_object_access = object_access_hook;
    object_access_hook = hilo_object_access;
}

/* The hooks of commands/, in the order they chain: the database hook runs
 * innermost (right before PostgreSQL's own ProcessUtility). */
void hilo_commands_init(void)
{
    hilo_database_install_hooks();
    hilo_role_install_hooks();
}
