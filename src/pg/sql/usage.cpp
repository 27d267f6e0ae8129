/*
 * sql/usage.cpp: hilo_grant_usage and hilo_revoke_usage.
 */
#include "../commands/commands.h"

extern "C" {
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/inval.h"
}

/*
 * hilo_grant_usage and hilo_revoke_usage: who besides the owner may take
 * from, push to and call hilo_nextval on a sequence. Transactional, like
 * GRANT: the change shows at commit, in every session (sessions that cached
 * the decision for hilo_nextval learn of it through a relcache invalidation
 * of hilo.usage_grants, sent at commit).
 */
static Datum change_usage(FunctionCallInfo fcinfo, bool grant)
{
    static const char *const arg_names[] = {"seq", "role"};
    const char *fn = grant ? "hilo_grant_usage()" : "hilo_revoke_usage()";
    hilo_entry(fcinfo, fn, arg_names, 2, HILO_WRITES);

    char name[HILO_MAX_NAME_BYTES + 1];
    hilo_check_name(PG_GETARG_TEXT_PP(0), name);
    char *role = text_to_cstring(PG_GETARG_TEXT_PP(1));
    int role_len = (int)strlen(role);
    if (role_len >= NAMEDATALEN) /* could be megabytes: do not echo it whole */
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                        errmsg("role \"%.*s...\" does not exist",
                               pg_mbcliplen(role, role_len, NAMEDATALEN - 1), role),
                        errdetail("Role names have at most %d bytes; this one has %d.",
                                  NAMEDATALEN - 1, role_len)));
    /* PUBLIC is stored as role 0; no role can be called "public". */
    Oid grantee = strcmp(role, "public") == 0 ? InvalidOid : get_role_oid(role, false);
    if (grant)
        hilo_lock_role(grantee);

    Oid caller = GetUserId();
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    Oid relid = hilo_usage_grants_relid();
    if (!OidIsValid(relid))
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("%s needs version 0.3.0 of the hilo extension", fn),
                        errhint("Run ALTER EXTENSION hilo UPDATE.")));
    HiloSequence seq;
    hilo_lookup_sequence(name, false, &seq);
    hilo_check_owner(&seq, caller, grant ? "grant use of" : "revoke use of");

    static const char *grant_sql =
        "INSERT INTO hilo.usage_grants (seq_id, grantee)"
        " VALUES ($1, $2::oid::regrole) ON CONFLICT DO NOTHING";
    static const char *revoke_sql =
        "DELETE FROM hilo.usage_grants WHERE seq_id = $1 AND grantee = $2::oid::regrole";
    hilo_spi_exec2(grant ? grant_sql : revoke_sql, INT4OID, Int32GetDatum(seq.seq_id), OIDOID,
                   ObjectIdGetDatum(grantee), false, 0);
    hilo_catalog_end(&access);
    CacheInvalidateRelcacheByRelid(relid);
    PG_RETURN_VOID();
}

HILO_SQL_FUNCTION(hilo_grant_usage)
{
    return change_usage(fcinfo, true);
}

HILO_SQL_FUNCTION(hilo_revoke_usage)
{
    return change_usage(fcinfo, false);
}
