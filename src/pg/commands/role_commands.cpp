/*
 * commands/role_commands.cpp: DROP ROLE, REASSIGN OWNED and DROP OWNED see hilo
 * sequences, as they see PostgreSQL's own objects.
 *
 * A hilo sequence records its owner and its grantees by role OID. PostgreSQL
 * refuses to drop a role that owns objects or holds privileges (2BP01,
 * through pg_shdepend); hilo's rows are not in pg_shdepend (its catalog is
 * ordinary tables), so DROP ROLE would succeed and leave an owner OID that
 * names nobody, or, once the OID is reused, a stranger. So:
 *
 * - DROP ROLE is refused with 2BP01 when a dropped role owns a hilo sequence
 *   or holds a usage grant in the current database. The check runs after
 *   PostgreSQL dropped the role, in the same transaction (so PostgreSQL's
 *   own checks and permission errors come first); the error undoes it.
 *   DropRole holds the role's lock to the end of the transaction, and
 *   hilo_create and hilo_grant_usage lock the role they record (as
 *   PostgreSQL's shdepLockAndCheckObject does), so none slips in between.
 * - REASSIGN OWNED BY a TO b also gives b a's hilo sequences.
 * - DROP OWNED BY a also drops a's hilo sequences (refused while column
 *   defaults use them, unless CASCADE, like hilo_drop) and a's usage grants.
 *
 * As REASSIGN OWNED and DROP OWNED themselves, this reaches the current
 * database only: hilo sequences are rows of each database's own catalog.
 * Run them in every database that uses hilo before DROP ROLE.
 */
#include "commands.h"

extern "C" {
#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "storage/lmgr.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/syscache.h"
}

static ProcessUtility_hook_type prev_process_utility = NULL;

/* True if this database has hilo's catalog, grants included. */
static bool hilo_catalog_here(void)
{
    return OidIsValid(get_extension_oid("hilo", true)) && OidIsValid(hilo_usage_grants_relid());
}

/* The OIDs of the roles a statement names, skipping unknown ones. */
static List *role_oids(List *rolespecs)
{
    List *oids = NIL;
    ListCell *lc;
    foreach (lc, rolespecs) {
        RoleSpec *spec = (RoleSpec *)lfirst(lc);
        Oid oid = get_rolespec_oid(spec, true);
        if (OidIsValid(oid))
            oids = lappend_oid(oids, oid);
    }
    return oids;
}

static Datum oid_array(List *oids)
{
    Datum *elems = (Datum *)palloc(sizeof(Datum) * Max(list_length(oids), 1));
    int n = 0;
    ListCell *lc;
    foreach (lc, oids)
        elems[n++] = ObjectIdGetDatum(lfirst_oid(lc));
    return PointerGetDatum(construct_array(elems, n, OIDOID, sizeof(Oid), true, TYPALIGN_INT));
}

/* Lines "owner of hilo sequence x" / "privileges for hilo sequence y" for
 * what `role` holds in this database's catalog, or NULL. */
static char *what_role_holds(Oid role)
{
    static const char *sql =
        "SELECT 'owner of hilo sequence ' || pg_catalog.quote_ident(name) FROM hilo.sequences"
        " WHERE owner::oid = $1"
        " UNION ALL "
        "SELECT 'privileges for hilo sequence ' || pg_catalog.quote_ident(s.name)"
        "  FROM hilo.usage_grants g JOIN hilo.sequences s ON s.seq_id = g.seq_id"
        " WHERE g.grantee::oid = $1"
        " ORDER BY 1";
    /* Allocated before SPI_connect, so that it outlives SPI_finish. */
    StringInfoData lines;
    initStringInfo(&lines);
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    hilo_spi_exec1(sql, OIDOID, ObjectIdGetDatum(role), false, 0);
    for (uint64 i = 0; i < SPI_processed; i++) {
        if (i > 0)
            appendStringInfoChar(&lines, '\n');
        char *line = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
        appendStringInfoString(&lines, line);
    }
    uint64 rows = SPI_processed;
    hilo_catalog_end(&access);
    return rows > 0 ? lines.data : NULL;
}

/* After DROP ROLE dropped `oids` (named `names`): refuse if any of them
 * owns or may use a hilo sequence here. */
static void refuse_drop_of_holders(List *oids, List *names)
{
    ListCell *oc, *nc;
    forboth(oc, oids, nc, names)
    {
        char *holds = what_role_holds(lfirst_oid(oc));
        if (holds == NULL)
            continue;
        const char *role = (const char *)lfirst(nc);
        ereport(ERROR,
                (errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
                 errmsg("role \"%s\" cannot be dropped because some objects depend on it", role),
                 errdetail_internal("%s", holds),
                 errhint("Run REASSIGN OWNED BY %s TO another role, then DROP OWNED BY %s, in "
                         "every database that uses hilo.",
                         quote_identifier(role), quote_identifier(role))));
    }
}

/* REASSIGN OWNED: the roles' hilo sequences go to `new_owner`. */
static void reassign_sequences(List *oids, Oid new_owner)
{
    static const char *sql =
        "UPDATE hilo.sequences SET owner = $2::oid::regrole"
        " WHERE owner::oid = ANY ($1)";
    hilo_lock_role(new_owner); /* a concurrent DROP ROLE of it waits or has won */
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    hilo_spi_exec2(sql, OIDARRAYOID, oid_array(oids), OIDOID, ObjectIdGetDatum(new_owner), false,
                   0);
    hilo_catalog_end(&access);
    /* Sessions' cached use decisions depend on owners too, and so do the
     * rows they cached (the owner is a column of hilo.sequences). */
    CacheInvalidateRelcacheByRelid(hilo_usage_grants_relid());
    CacheInvalidateRelcacheByRelid(hilo_catalog_relid_if_present());
}

/* DROP OWNED: the roles' usage grants go, then their sequences, each as
 * hilo_drop(name, cascade) would drop it (one made again by another
 * transaction while this waited for it is not: 40001). */
static void drop_owned_sequences(List *oids, bool cascade)
{
    static const char *revoke_sql = "DELETE FROM hilo.usage_grants WHERE grantee::oid = ANY ($1)";
    static const char *owned_sql =
        "SELECT name FROM hilo.sequences WHERE owner::oid = ANY ($1) ORDER BY name";
    Datum roles = oid_array(oids);
    MemoryContext caller_context = CurrentMemoryContext;
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    hilo_spi_exec1(revoke_sql, OIDARRAYOID, roles, false, 0);
    hilo_spi_exec1(owned_sql, OIDARRAYOID, roles, false, 0);
    List *names = NIL;
    for (uint64 i = 0; i < SPI_processed; i++) {
        char *name = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
        /* Kept out of SPI's memory, which SPI_finish frees. */
        MemoryContext spi_context = MemoryContextSwitchTo(caller_context);
        names = lappend(names, pstrdup(name));
        MemoryContextSwitchTo(spi_context);
    }
    hilo_catalog_end(&access);
    CacheInvalidateRelcacheByRelid(hilo_usage_grants_relid());
    ListCell *lc;
    foreach (lc, names)
        hilo_drop_owned_sequence((const char *)lfirst(lc), cascade);
}

static void hilo_role_process_utility(PlannedStmt *pstmt, const char *query_string,
                                      bool read_only_tree, ProcessUtilityContext context,
                                      ParamListInfo params, QueryEnvironment *query_env,
                                      DestReceiver *dest, QueryCompletion *qc)
{
    HILO_FORGET_UNWOUND_FRAMES();
    Node *stmt = pstmt->utilityStmt;
    List *dropped = NIL, *dropped_names = NIL;
    if (IsA(stmt, DropRoleStmt)) {
        ListCell *lc;
        foreach (lc, ((DropRoleStmt *)stmt)->roles) {
            RoleSpec *spec = (RoleSpec *)lfirst(lc);
            Oid oid = spec->roletype == ROLESPEC_CSTRING ? get_role_oid(spec->rolename, true)
                                                         : InvalidOid;
            if (OidIsValid(oid)) {
                dropped = lappend_oid(dropped, oid);
                dropped_names = lappend(dropped_names, pstrdup(spec->rolename));
            }
        }
    }

    hilo_run_process_utility(prev_process_utility, pstmt, query_string, read_only_tree, context,
                             params, query_env, dest, qc);

    /* PostgreSQL's own checks passed and its work is done, in this
     * transaction: an error below undoes it all. Other statements (COMMIT
     * in an aborted transaction among them) must not touch the catalog. */
    bool role_command = (IsA(stmt, DropRoleStmt) && dropped != NIL) ||
                        IsA(stmt, ReassignOwnedStmt) || IsA(stmt, DropOwnedStmt);
    if (!role_command || !hilo_catalog_here())
        return;
    if (IsA(stmt, DropRoleStmt)) {
        refuse_drop_of_holders(dropped, dropped_names);
    } else if (IsA(stmt, ReassignOwnedStmt)) {
        ReassignOwnedStmt *reassign = (ReassignOwnedStmt *)stmt;
        reassign_sequences(role_oids(reassign->roles), get_rolespec_oid(reassign->newrole, false));
    } else if (IsA(stmt, DropOwnedStmt)) {
        DropOwnedStmt *drop = (DropOwnedStmt *)stmt;
        drop_owned_sequences(role_oids(drop->roles), drop->behavior == DROP_CASCADE);
    }
}

void hilo_role_install_hooks(void)
{
    prev_process_utility = ProcessUtility_hook;
    ProcessUtility_hook = hilo_role_process_utility;
}

void hilo_lock_role(Oid role)
{
    if (!OidIsValid(role))
        return; /* PUBLIC */
    LockSharedObject(AuthIdRelationId, role, 0, AccessShareLock);
    if (!SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(role)))
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                        errmsg("role %u was concurrently dropped", role)));
}
