/*
 * catalog.cpp: running catalog queries for a caller, safely.
 *
 * Callers have no privileges on schema hilo, and may have set a hostile
 * search_path. So every catalog query runs as the owner of the catalog,
 * with search_path pinned to pg_catalog, through plans prepared once per
 * backend (the pattern of ri_triggers.c and of SECURITY DEFINER functions).
 */
#include "hilo.h"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
}

/* The relation hilo.sequences; its owner owns the whole catalog. */
/* Counts invalidations of the caches that map names to relations,
 * columns and schemas (names_changed). */
static uint64 names_epoch = 1;

static void names_changed(Datum arg, HiloSysCacheId cacheid, uint32 hashvalue)
{
    names_epoch++;
}

uint64 hilo_catalog_names_epoch(void)
{
    static bool registered = false;
    if (!registered) {
        CacheRegisterSyscacheCallback(RELNAMENSP, names_changed, (Datum)0);
        CacheRegisterSyscacheCallback(ATTNAME, names_changed, (Datum)0);
        CacheRegisterSyscacheCallback(NAMESPACENAME, names_changed, (Datum)0);
        registered = true;
    }
    return names_epoch;
}

Oid hilo_catalog_relid(void)
{
    Oid relid = hilo_catalog_relid_if_present();
    if (!OidIsValid(relid))
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("the hilo catalog is missing in database \"%s\"",
                               get_database_name(MyDatabaseId)),
                        errhint("Run CREATE EXTENSION hilo in this database.")));
    return relid;
}

Oid hilo_catalog_relid_if_present(void)
{
    /* Looked up again after any change of a relation's, column's or
     * schema's name: the allocator asks several times per reservation. */
    static uint64 epoch = 0;
    static Oid relid = InvalidOid;
    uint64 now = hilo_catalog_names_epoch();
    if (epoch == now)
        return relid;
    Oid nsp = get_namespace_oid("hilo", true);
    Oid found = OidIsValid(nsp) ? get_relname_relid("sequences", nsp) : InvalidOid;
    if (OidIsValid(found)) {
        relid = found;
        epoch = now;
    }
    return found;
}

bool hilo_catalog_lock_first(void)
{
    Oid relid = hilo_catalog_relid_if_present();
    if (!OidIsValid(relid))
        return false;
    LockRelationOid(relid, AccessShareLock);
    return true;
}

/* The creation of a catalog without hilo.incarnation (before 0.5.0): the
 * OID of hilo.sequences, new with each CREATE EXTENSION. */
uint64 hilo_catalog_creation_before_0_5(Oid relid)
{
    return ((uint64)1 << 62) | (uint64)relid;
}

void hilo_raise_catalog_recreated(void)
{
    ereport(ERROR, (errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
                    errmsg("the hilo catalog was created again after this transaction's snapshot"),
                    errdetail("DROP EXTENSION hilo and CREATE EXTENSION hilo ran meanwhile."),
                    errhint("Retry the transaction.")));
}

/* hilo.incarnation (InvalidOid before 0.5.0) and its column value, looked
 * up again only after a change of names (hilo_catalog_names_epoch): the
 * allocator reads it in every batch. */
static void incarnation_names(Oid catalog, Oid *incarnation, AttrNumber *column)
{
    static uint64 epoch = 0;
    static Oid seen_catalog = InvalidOid, seen_incarnation = InvalidOid;
    static AttrNumber seen_column = InvalidAttrNumber;
    if (epoch != hilo_catalog_names_epoch() || seen_catalog != catalog) {
        Oid relid = get_relname_relid("incarnation", get_rel_namespace(catalog));
        AttrNumber attnum = OidIsValid(relid) ? get_attnum(relid, "value") : InvalidAttrNumber;
        if (OidIsValid(relid) && attnum == InvalidAttrNumber)
            elog(ERROR, "hilo: hilo.incarnation has no column value");
        seen_catalog = catalog;
        seen_incarnation = relid;
        seen_column = attnum;
        epoch = hilo_catalog_names_epoch();
    }
    *incarnation = seen_incarnation;
    *column = seen_column;
}

bool hilo_catalog_creation(uint64 *creation)
{
    Oid relid = hilo_catalog_relid_if_present();
    if (!OidIsValid(relid))
        return false;
    Oid incarnation;
    AttrNumber column;
    incarnation_names(relid, &incarnation, &column);
    if (!OidIsValid(incarnation)) {
        *creation = hilo_catalog_creation_before_0_5(relid);
        return true;
    }
    /* hilo.sequences first, in the order lookups and DROP EXTENSION take
     * them (the other order can deadlock with a drop). The lock takes in
     * invalidations: the names again after it, as before it. */
    LockRelationOid(relid, AccessShareLock);
    incarnation_names(relid, &incarnation, &column);
    if (!OidIsValid(incarnation))
        elog(ERROR, "hilo: the catalog has no table hilo.incarnation");
    /* Its one row, as `SELECT value FROM hilo.incarnation` would read it
     * under the active snapshot, through the table access method: the
     * allocator reads it in every batch, and the statement's executor
     * start-up cost it more than the read. */
    Relation rel = table_open(incarnation, AccessShareLock);
    SysScanDesc scan = systable_beginscan(rel, InvalidOid, false, GetActiveSnapshot(), 0, NULL);
    int rows = 0;
    HeapTuple tuple;
    while (rows < 2 && HeapTupleIsValid(tuple = systable_getnext(scan))) {
        bool isnull;
        Datum value = heap_getattr(tuple, column, RelationGetDescr(rel), &isnull);
        if (isnull)
            elog(ERROR, "hilo: NULL in hilo.incarnation");
        *creation = (uint64)DatumGetInt64(value);
        rows++;
    }
    systable_endscan(scan);
    table_close(rel, NoLock);
    if (rows != 1)
        hilo_raise_catalog_recreated();
    return true;
}

uint64 hilo_catalog_creation_now(void)
{
    uint64 creation = 0;
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    (void)hilo_catalog_creation(&creation);
    hilo_catalog_end(&access);
    return creation;
}

static Oid catalog_owner(void)
{
    HeapTuple tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(hilo_catalog_relid()));
    if (!HeapTupleIsValid(tuple))
        elog(ERROR, "hilo: cache lookup failed for the catalog relation");
    Oid owner = ((Form_pg_class)GETSTRUCT(tuple))->relowner;
    ReleaseSysCache(tuple);
    return owner;
}

void hilo_catalog_begin(HiloCatalogAccess *access)
{
    Oid owner = catalog_owner();

    access->guc_nest_level = NewGUCNestLevel();
    (void)set_config_option("search_path", HILO_PINNED_SEARCH_PATH, PGC_USERSET, PGC_S_SESSION,
                            GUC_ACTION_SAVE, true, 0, false);
    /* Every catalog statement reads or writes a handful of rows: never
     * worth compiling. With enable_seqscan off (hilo_catalog_prefer_indexes)
     * one that has no index to use is costed above jit_above_cost, and JIT
     * compiled it on every call: 200 ms a push with jit = on, PostgreSQL's
     * default (the allocator turned it off for itself long ago). */
    (void)set_config_option("jit", "off", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0,
                            false);
    GetUserIdAndSecContext(&access->saved_user, &access->saved_sec_context);
    SetUserIdAndSecContext(owner, access->saved_sec_context | SECURITY_LOCAL_USERID_CHANGE |
                                      SECURITY_RESTRICTED_OPERATION);
    if (SPI_connect() != SPI_OK_CONNECT)
        elog(ERROR, "hilo: SPI_connect failed");
    (void)hilo_catalog_lock_first();
}

void hilo_catalog_prefer_indexes(void)
{
    (void)set_config_option("enable_seqscan", "off", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
                            true, 0, false);
}

void hilo_catalog_end(HiloCatalogAccess *access)
{
    SPI_finish();
    SetUserIdAndSecContext(access->saved_user, access->saved_sec_context);
    AtEOXact_GUC(true, access->guc_nest_level);
}

/*
 * Plans prepared once per backend, keyed by their SQL text (string literals
 * of this module, so the pointer identifies the statement).
 */
typedef struct HiloCachedPlan {
    const char *sql;
    SPIPlanPtr plan;
} HiloCachedPlan;

#define HILO_MAX_CACHED_PLANS 128
static HiloCachedPlan cached_plans[HILO_MAX_CACHED_PLANS];
static int num_cached_plans = 0;

static SPIPlanPtr prepared_plan(const char *sql, int nargs, const Oid *argtypes)
{
    for (int i = 0; i < num_cached_plans; i++)
        if (cached_plans[i].sql == sql)
            return cached_plans[i].plan;

    SPIPlanPtr plan = SPI_prepare(sql, nargs, const_cast<Oid *>(argtypes));
    if (plan == NULL)
        elog(ERROR, "hilo: SPI_prepare failed (%s) for: %s", SPI_result_code_string(SPI_result),
             sql);
    if (num_cached_plans >= HILO_MAX_CACHED_PLANS)
        return plan; /* not kept: freed with the SPI procedure context */
    if (SPI_keepplan(plan) != 0)
        elog(ERROR, "hilo: SPI_keepplan failed");
    cached_plans[num_cached_plans].sql = sql;
    cached_plans[num_cached_plans].plan = plan;
    num_cached_plans++;
    return plan;
}

/*
 * Every statement hilo runs through SPI is parsed, planned and run with
 * search_path pinned: a cached plan is planned again under the search_path
 * of the moment it runs, and an operator or function that a role put in a
 * schema on the path would then run as whoever ran hilo's statement (the
 * DDL event trigger ran a look-alike "=" as the superuser that created a
 * table). Catalog access and hilo's workers pin it already; any other
 * caller gets it pinned for the one statement. Returns the GUC nest level
 * to close with unpin_search_path, or -1.
 */
static int pin_search_path(void)
{
    if (namespace_search_path != NULL &&
        strcmp(namespace_search_path, HILO_PINNED_SEARCH_PATH) == 0)
        return -1;
    int nest_level = NewGUCNestLevel();
    (void)set_config_option("search_path", HILO_PINNED_SEARCH_PATH, PGC_USERSET, PGC_S_SESSION,
                            GUC_ACTION_SAVE, true, 0, false);
    return nest_level;
}

static void unpin_search_path(int nest_level)
{
    if (nest_level >= 0)
        AtEOXact_GUC(true, nest_level);
}

int hilo_spi_exec(const char *sql, int nargs, const Oid *argtypes, Datum *values, const char *nulls,
                  bool read_only, long max_rows)
{
    int nest_level = pin_search_path();
    SPIPlanPtr plan = prepared_plan(sql, nargs, argtypes);
    int rc = SPI_execute_plan(plan, values, nulls, read_only, max_rows);
    if (rc < 0)
        elog(ERROR, "hilo: SPI_execute_plan failed (%s) for: %s", SPI_result_code_string(rc), sql);
    unpin_search_path(nest_level);
    return rc;
}

int hilo_spi_exec1(const char *sql, Oid argtype, Datum value, bool read_only, long max_rows)
{
    return hilo_spi_exec(sql, 1, &argtype, &value, NULL, read_only, max_rows);
}

int hilo_spi_exec2(const char *sql, Oid type1, Datum value1, Oid type2, Datum value2,
                   bool read_only, long max_rows)
{
    Oid types[2] = {type1, type2};
    Datum values[2] = {value1, value2};
    return hilo_spi_exec(sql, 2, types, values, NULL, read_only, max_rows);
}

int hilo_spi_exec_snapshot(const char *sql, int nargs, const Oid *argtypes, Datum *values,
                           const char *nulls, Snapshot snapshot, bool read_only, long max_rows)
{
    int nest_level = pin_search_path();
    SPIPlanPtr plan = prepared_plan(sql, nargs, argtypes);
    int rc = SPI_execute_snapshot(plan, values, nulls, snapshot, InvalidSnapshot, read_only, false,
                                  max_rows);
    if (rc < 0)
        elog(ERROR, "hilo: SPI_execute_snapshot failed (%s) for: %s", SPI_result_code_string(rc),
             sql);
    unpin_search_path(nest_level);
    return rc;
}

Datum hilo_spi_value(uint64 row, int column, bool *isnull)
{
    return SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, column, isnull);
}

static Datum spi_value_not_null(uint64 row, int column)
{
    bool isnull;
    Datum d = hilo_spi_value(row, column, &isnull);
    if (isnull)
        elog(ERROR, "hilo: unexpected NULL in catalog column %d", column);
    return d;
}

int64 hilo_spi_int64(uint64 row, int column)
{
    return DatumGetInt64(spi_value_not_null(row, column));
}

int32 hilo_spi_int32(uint64 row, int column)
{
    return DatumGetInt32(spi_value_not_null(row, column));
}

bool hilo_spi_isnull(uint64 row, int column)
{
    bool isnull;
    (void)hilo_spi_value(row, column, &isnull);
    return isnull;
}

void hilo_check_name_length(int len)
{
    if (len < 1 || len > HILO_MAX_NAME_BYTES)
        ereport(ERROR,
                (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                 errmsg("hilo sequence name must be 1 to %d bytes long", HILO_MAX_NAME_BYTES),
                 errdetail("The name given is %d bytes long.", len)));
}

HTAB *hilo_name_table(const char *label, long size, Size entrysize, MemoryContext context)
{
    HASHCTL ctl;
    memset(&ctl, 0, sizeof(ctl));
    ctl.keysize = HILO_MAX_NAME_BYTES + 1;
    ctl.entrysize = entrysize;
    ctl.hcxt = context;
    return hash_create(label, size, &ctl, HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
}

void hilo_check_name(text *name_text, char *name_out)
{
    int len = VARSIZE_ANY_EXHDR(name_text);
    hilo_check_name_length(len);
    memcpy(name_out, VARDATA_ANY(name_text), len);

    name_out[len] = '\0';
}

/* True once the catalog has the columns of version 0.2.0; the library also
 * serves a database still at 0.1.0 until ALTER EXTENSION hilo UPDATE. */
bool hilo_catalog_has_table(const char *name)
{
    Oid nsp = get_namespace_oid("hilo", true);
    return OidIsValid(nsp) && OidIsValid(get_relname_relid(name, nsp));
}

bool hilo_catalog_has_column(const char *name)
{
    return get_attnum(hilo_catalog_relid(), name) != InvalidAttrNumber;
}

bool hilo_catalog_has_ordering_columns(void)
{
    Oid relid = hilo_catalog_relid();
    return get_attnum(relid, "ordering") != InvalidAttrNumber &&
           get_attnum(relid, "node_bits") != InvalidAttrNumber;
}

bool hilo_catalog_has_monotonic(void)
{
    return get_attnum(hilo_catalog_relid(), "monotonic") != InvalidAttrNumber;
}
