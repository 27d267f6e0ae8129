/*
 * commands/sequence_dependents.cpp: columns whose default calls a hilo function with
 * a sequence name, the way a column default depends on a PostgreSQL
 * sequence through nextval('s').
 *
 * PostgreSQL records that dependency in pg_depend (the regclass constant
 * names the sequence's OID). A hilo sequence is a row, not a relation, so
 * hilo finds the dependency by reading the expressions: a call of one of
 * hilo's own functions whose first argument is named "seq", with a constant
 * there, depends on the sequence of that name. A call with a non-constant
 * name (a column, a parameter, an expression) names no sequence before it
 * runs, and is left alone, as nextval(some_text::regclass) is.
 *
 * Two users: hilo_drop, which refuses (2BP01) while such a column default
 * exists, or drops those defaults with cascade; and the event trigger at
 * ddl_command_end, which refuses (42704) a default created for a sequence
 * that does not exist, as nextval('ordres') is refused when the regclass
 * constant is parsed.
 */
#include "commands.h"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/pg_attrdef.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/event_trigger.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "nodes/primnodes.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/memutils.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"
}

/* True if `funcid` is one of hilo's functions whose first argument is
 * called "seq" (hilo_nextval, hilo_take, ...). */
static bool takes_sequence_name(Oid funcid, Oid hilo_extension)
{
    if (getExtensionOfObject(ProcedureRelationId, funcid) != hilo_extension)
        return false;
    HeapTuple tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(funcid));
    if (!HeapTupleIsValid(tuple))
        return false;
    Oid *types;
    char **names;
    char *modes;
    int nargs = get_func_arg_info(tuple, &types, &names, &modes);
    bool found = nargs > 0 && names != NULL && names[0] != NULL && strcmp(names[0], "seq") == 0;
    ReleaseSysCache(tuple);
    return found;
}

typedef struct NameWalk {
    Oid hilo_extension;
    List *names; /* of char *: constant sequence names called */
} NameWalk;

/* The constant text of argument 0 of a call, or NULL. */
static const char *constant_first_argument(List *args)
{
    ListCell *lc;
    int position = 0;
    foreach (lc, args) {
        Node *arg = (Node *)lfirst(lc);
        int argno = position++;
        if (IsA(arg, NamedArgExpr)) {
            argno = ((NamedArgExpr *)arg)->argnumber;
            arg = (Node *)((NamedArgExpr *)arg)->arg;
        }
        if (argno != 0)
            continue;
        while (IsA(arg, RelabelType))
            arg = (Node *)((RelabelType *)arg)->arg;
        if (!IsA(arg, Const) || ((Const *)arg)->constisnull)
            return NULL;
        Const *c = (Const *)arg;
        if (c->consttype != TEXTOID && c->consttype != VARCHAROID && c->consttype != BPCHAROID)
            return NULL;
        return TextDatumGetCString(c->constvalue);
    }
    return NULL;
}

static bool collect_names(Node *node, void *context)
{
    NameWalk *walk = (NameWalk *)context;
    if (node == NULL)
        return false;
    if (IsA(node, FuncExpr)) {
        FuncExpr *call = (FuncExpr *)node;
        if (takes_sequence_name(call->funcid, walk->hilo_extension)) {
            const char *name = constant_first_argument(call->args);
            if (name != NULL)
                walk->names = lappend(walk->names, (void *)name);
        }
    }
    return hilo_expression_tree_walker(node, collect_names, context);
}

/* The constant sequence names that the default expression `adbin` calls
 * hilo's functions with. */
static List *names_called(Datum adbin, Oid hilo_extension)
{
    NameWalk walk = {hilo_extension, NIL};
    Node *expr = (Node *)stringToNode(TextDatumGetCString(adbin));
    (void)collect_names(expr, &walk);
    return walk.names;
}

static bool list_has_name(List *names, const char *name)
{
    ListCell *lc;
    foreach (lc, names)
        if (strcmp((const char *)lfirst(lc), name) == 0)
            return true;
    return false;
}

/* "default value for column id of table orders", as dependency.c says it. */
static char *describe_default(Oid relid, AttrNumber attnum)
{
    HeapTuple tuple = SearchSysCache2(ATTNUM, ObjectIdGetDatum(relid), Int16GetDatum(attnum));
    bool generated = false;
    if (HeapTupleIsValid(tuple)) {
        generated = ((Form_pg_attribute)GETSTRUCT(tuple))->attgenerated != '\0';
        ReleaseSysCache(tuple);
    }
    ObjectAddress column = {RelationRelationId, relid, (int32)attnum};
    return psprintf("%s of %s", generated ? "generation expression" : "default value",
                    getObjectDescription(&column, false));
}

/* Domains whose default calls hilo with the constant `name`. */
static void find_dependent_domains(const char *name, Oid hilo_extension, List **domains,
                                   List **descriptions)
{
    Relation types = table_open(TypeRelationId, AccessShareLock);
    SysScanDesc scan = systable_beginscan(types, InvalidOid, false, NULL, 0, NULL);
    HeapTuple tuple;
    while (HeapTupleIsValid(tuple = systable_getnext(scan))) {
        Form_pg_type form = (Form_pg_type)GETSTRUCT(tuple);
        if (form->typtype != TYPTYPE_DOMAIN)
            continue;
        bool isnull;
        Datum bin =
            heap_getattr(tuple, Anum_pg_type_typdefaultbin, RelationGetDescr(types), &isnull);
        if (isnull || !list_has_name(names_called(bin, hilo_extension), name))
            continue;
        ObjectAddress domain = {TypeRelationId, form->oid, 0};
        *domains = lappend_oid(*domains, form->oid);
        *descriptions = lappend(
            *descriptions, psprintf("default value of %s", getObjectDescription(&domain, false)));
    }
    systable_endscan(scan);
    table_close(types, AccessShareLock);
}

void hilo_find_dependent_defaults(const char *name, List **relids, List **attnums, List **domains,
                                  List **descriptions)
{
    *relids = *attnums = *domains = *descriptions = NIL;
    Oid hilo_extension = get_extension_oid("hilo", true);
    if (!OidIsValid(hilo_extension))
        return;
    Relation attrdef = table_open(AttrDefaultRelationId, AccessShareLock);
    SysScanDesc scan = systable_beginscan(attrdef, InvalidOid, false, NULL, 0, NULL);
    HeapTuple tuple;
    while (HeapTupleIsValid(tuple = systable_getnext(scan))) {
        Form_pg_attrdef form = (Form_pg_attrdef)GETSTRUCT(tuple);
        bool isnull;
        Datum adbin =
            heap_getattr(tuple, Anum_pg_attrdef_adbin, RelationGetDescr(attrdef), &isnull);
        if (isnull || !list_has_name(names_called(adbin, hilo_extension), name))
            continue;
        *relids = lappend_oid(*relids, form->adrelid);
        *attnums = lappend_int(*attnums, form->adnum);
        *descriptions = lappend(*descriptions, describe_default(form->adrelid, form->adnum));
    }
    systable_endscan(scan);
    table_close(attrdef, AccessShareLock);
    find_dependent_domains(name, hilo_extension, domains, descriptions);
}

/* True if a hilo sequence `name` exists; locks its row FOR KEY SHARE so that
 * a hilo_drop running now waits for this transaction and then sees the
 * default that depends on it. */
static bool sequence_exists_locked(const char *name)
{
    static const char *sql = "SELECT 1 FROM hilo.sequences WHERE name = $1 FOR KEY SHARE";
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    hilo_spi_exec1(sql, TEXTOID, CStringGetTextDatum(name), false, 1);
    bool exists = SPI_processed > 0;
    hilo_catalog_end(&access);
    return exists;
}

/* The objids `sql` reads from pg_event_trigger_ddl_commands(), in a list
 * allocated in the caller's memory context (SPI_finish frees SPI's). */
static List *objects_of_command(const char *sql)
{
    MemoryContext caller_context = CurrentMemoryContext;
    if (SPI_connect() != SPI_OK_CONNECT)
        elog(ERROR, "hilo: SPI_connect failed");
    /* Not as the catalog's owner: the command's own (the function must run
     * in the event trigger of its session), but through hilo_spi_exec, with
     * search_path pinned. */
    if (hilo_spi_exec(sql, 0, NULL, NULL, NULL, true, 0) != SPI_OK_SELECT)
        elog(ERROR, "hilo: reading pg_event_trigger_ddl_commands() failed");
    List *objids = NIL;
    for (uint64 i = 0; i < SPI_processed; i++) {
        bool isnull;
        Datum d = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);
        if (isnull)
            continue;
        MemoryContext spi_context = MemoryContextSwitchTo(caller_context);
        objids = lappend_oid(objids, DatumGetObjectId(d));
        MemoryContextSwitchTo(spi_context);
    }
    SPI_finish();
    return objids;
}

/* The relations the current DDL command created or altered. */
static List *relations_of_command(void)
{
    static const char *sql =
        "SELECT DISTINCT objid FROM pg_catalog.pg_event_trigger_ddl_commands()"
        " WHERE classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass"
        "   AND objsubid OPERATOR(pg_catalog.=) 0";
    return objects_of_command(sql);
}

/* Refuses an unknown constant name in `bin`, the default of `what`. */
static void check_names_exist(Datum bin, Oid hilo_extension, const char *what)
{
    ListCell *nc;
    List *names = names_called(bin, hilo_extension);
    foreach (nc, names) {
        const char *name = (const char *)lfirst(nc);
        hilo_check_name_length((int)strlen(name));
        if (sequence_exists_locked(name))
            continue;
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                        errmsg("hilo sequence \"%s\" does not exist", name),
                        errdetail("The %s calls a hilo function with that name.", what),
                        errhint("Create it with hilo_create('%s') first.", name)));
    }
}

/* CREATE DOMAIN and ALTER DOMAIN ... SET DEFAULT: the domains the command
 * wrote whose default calls hilo. */
static void check_new_domain_defaults(Oid hilo_extension)
{
    static const char *sql =
        "SELECT DISTINCT objid FROM pg_catalog.pg_event_trigger_ddl_commands()"
        " WHERE classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_type'::pg_catalog.regclass";
    List *types = objects_of_command(sql);
    ListCell *lc;
    foreach (lc, types) {
        HeapTuple tuple = SearchSysCacheCopy1(TYPEOID, ObjectIdGetDatum(lfirst_oid(lc)));
        if (!HeapTupleIsValid(tuple))
            continue;
        bool isnull;
        Datum bin = SysCacheGetAttr(TYPEOID, tuple, Anum_pg_type_typdefaultbin, &isnull);
        if (isnull || ((Form_pg_type)GETSTRUCT(tuple))->typtype != TYPTYPE_DOMAIN ||
            !TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetXmin(tuple->t_data)))
            continue;
        ObjectAddress domain = {TypeRelationId, lfirst_oid(lc), 0};
        check_names_exist(bin, hilo_extension,
                          psprintf("default value of %s", getObjectDescription(&domain, false)));
    }
}

/*
 * The event trigger at ddl_command_end of CREATE TABLE, ALTER TABLE and
 * their foreign-table forms: every column default this transaction wrote
 * (its pg_attrdef row is new) that calls a hilo function with a constant
 * name must name an existing hilo sequence. Older defaults are not checked
 * again. With check_function_bodies off (pg_dump's and pg_restore's
 * scripts set it, and restore hilo's catalog rows only after the tables),
 * nothing is checked, as PostgreSQL then skips checking function bodies.
 */
HILO_SQL_FUNCTION(hilo_check_defaults)
{
    if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
        ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                        errmsg("hilo_check_defaults() must be called as an event trigger")));
    if (!check_function_bodies)
        PG_RETURN_VOID();
    Oid hilo_extension = get_extension_oid("hilo", true);
    if (!OidIsValid(hilo_extension))
        PG_RETURN_VOID();

    List *relids = relations_of_command();
    check_new_domain_defaults(hilo_extension);
    ListCell *lc;
    foreach (lc, relids) {
        Oid relid = lfirst_oid(lc);
        Relation attrdef = table_open(AttrDefaultRelationId, AccessShareLock);
        ScanKeyData key;
        ScanKeyInit(&key, Anum_pg_attrdef_adrelid, BTEqualStrategyNumber, F_OIDEQ,
                    ObjectIdGetDatum(relid));
        SysScanDesc scan = systable_beginscan(attrdef, AttrDefaultIndexId, true, NULL, 1, &key);
        HeapTuple tuple;
        while (HeapTupleIsValid(tuple = systable_getnext(scan))) {
            if (!TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetXmin(tuple->t_data)))
                continue;
            Form_pg_attrdef form = (Form_pg_attrdef)GETSTRUCT(tuple);
            bool isnull;
            Datum adbin =
                heap_getattr(tuple, Anum_pg_attrdef_adbin, RelationGetDescr(attrdef), &isnull);
            if (isnull)
                continue;
            check_names_exist(adbin, hilo_extension, describe_default(form->adrelid, form->adnum));
        }
        systable_endscan(scan);
        table_close(attrdef, AccessShareLock);
    }
    PG_RETURN_VOID();
}
