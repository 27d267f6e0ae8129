/*
 * sql/adopt.cpp: hilo_raise, and the parts of hilo_adopt and hilo_unadopt
 * (plpgsql in src/hilo.sql, running as the caller) that touch hilo's
 * catalog, which callers have no privileges on: hilo._held_up_to,
 * hilo._note_adopted and hilo._forget_adopted. What a raise does:
 * commands/sequence_raise.cpp and alloc/raise_rows.cpp (on a cluster:
 * also cluster/raise.cpp, which applies it on every node as the
 * transaction commits, and reads for hilo_adopt and hilo_unadopt what the
 * other nodes hold).
 */
#include "../commands/commands.h"
#include "../cluster/cluster.h"

extern "C" {
#include "access/htup_details.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
}

/* hilo_raise_locked() of the sequence `name`, checked to be the caller's
 * (42501), its pushes in flight finished first; on a node of a cluster,
 * applied on every node as the transaction commits (cluster/raise.cpp:
 * 22023 for a node_bits mark that empties a member's slice, 08006 if a
 * node does not answer). */
static void raise_sequence(const char *name, int64 above)
{
    HiloCatalogAccess access;
    HiloSequence seq;
    /* On a node of a cluster every other node applies the raise as this
     * transaction commits, each in a transaction of its own, and every
     * node raises its register and lease cells (this one over a connection
     * of its own: cluster/raise.cpp). Checked before, without the
     * sequence's lock. */
    Oid caller = GetUserId();
    hilo_catalog_begin(&access);
    bool in_cluster = hilo_window_source_active();
    if (in_cluster) {
        hilo_lookup_sequence(name, false, &seq);
        hilo_check_owner(&seq, caller, "raise");
    }
    hilo_catalog_end(&access);
    if (in_cluster) {
        /* Also when this node is there already: a raise that failed on
         * another node is run again. */
        hilo_check_raise(name, seq, above);
        hilo_cluster_raise(&seq, above);
    }
    (void)hilo_begin_owned_sequence(name, "raise", 0, &access, &seq);
    if (in_cluster) {
        /* hilo._install_windows() waits for this lock (it takes FOR KEY
         * SHARE), and then checks a window the agent claimed before the
         * register moved against the raised start_value. */
        static const char *lock_sql = "SELECT 1 FROM hilo.sequences WHERE seq_id = $1 FOR UPDATE";
        hilo_spi_exec1(lock_sql, INT4OID, Int32GetDatum(seq.seq_id), false, 1);
    }
    hilo_raise_locked(name, seq, above, &access);
}

/*
 * hilo_raise(seq, above): once this transaction commits, no session hands
 * out an ID at or below `above`; only upwards; the owner only. In the
 * caller's transaction: a rollback changes nothing.
 */
HILO_SQL_FUNCTION(hilo_raise)
{
    static const char *const arg_names[] = {"seq", "above"};
    hilo_entry(fcinfo, "hilo_raise()", arg_names, 2, HILO_WRITES);
    char name[HILO_MAX_NAME_BYTES + 1];
    hilo_check_name(PG_GETARG_TEXT_PP(0), name);
    raise_sequence(name, PG_GETARG_INT64(1));
    PG_RETURN_VOID();
}

/*
 * hilo._held_up_to(seq): the highest ID the sequence handed out or holds
 * on this node (its high-water mark, windows, free ranges, and the IDs of
 * a sequence created in this transaction), or start_value - 1: a native
 * sequence that takes over starts above it (hilo_unadopt). Usage right
 * needed (42501).
 */
HILO_SQL_FUNCTION(hilo_held_up_to)
{
    char name[HILO_MAX_NAME_BYTES + 1];
    hilo_entry_seq(fcinfo, "hilo._held_up_to()", HILO_READS, name);
    HiloSequence seq;
    /* Not for allocation: one created in this transaction records its IDs
     * in the catalog first. */
    hilo_lookup_usable_sequence(name, false, &seq);
    static const char *sql =
        "SELECT " HILO_HELD_UP_TO_SQL " FROM hilo.sequences s WHERE s.seq_id = $1";
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    hilo_spi_exec1(sql, INT4OID, Int32GetDatum(seq.seq_id), true, 1);
    int64 held = SPI_processed > 0 ? hilo_spi_int64(0, 1) : seq.start_value - 1;
    hilo_catalog_end(&access);
    PG_RETURN_INT64(Max(held, seq.high_water_mark));
}

/* 42501 unless the current user owns (is a member of the owner of) the
 * table `relid`. */
static void check_table_owner(Oid relid, const char *function_name)
{
    HeapTuple tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
    if (!HeapTupleIsValid(tuple))
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE),
                        errmsg("relation with OID %u does not exist", relid)));
    Form_pg_class form = (Form_pg_class)GETSTRUCT(tuple);
    Oid owner = form->relowner;
    char *table = pstrdup(NameStr(form->relname));
    ReleaseSysCache(tuple);
    if (!has_privs_of_role(GetUserId(), owner))
        ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                        errmsg("must be owner of table %s to call %s", table, function_name)));
}

/* Forgets what hilo.adopted_columns holds for the column (and the rows of
 * tables dropped since: their OIDs may be taken again); returns its
 * identity ('a', 'd', '' or NULL: none). Catalog access held. */
static Datum forget_adopted(Oid relid, Datum col, bool *isnull)
{
    static const char *drop_gone =
        "DELETE FROM hilo.adopted_columns a"
        " WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class c WHERE c.oid = a.table_name)";
    hilo_spi_exec(drop_gone, 0, NULL, NULL, NULL, false, 0);
    static const char *sql =
        "DELETE FROM hilo.adopted_columns"
        " WHERE table_name = $1 AND column_name = $2 RETURNING identity";
    Oid types[2] = {REGCLASSOID, NAMEOID};
    Datum values[2] = {ObjectIdGetDatum(relid), col};
    hilo_spi_exec(sql, 2, types, values, NULL, false, 0);
    *isnull = true;
    if (SPI_processed == 0)
        return (Datum)0;
    Datum identity = hilo_spi_value(0, 1, isnull);
    return identity;
}

/*
 * hilo._note_adopted(tbl, col, seq, identity): hilo_adopt moved the column
 * to `seq`; `identity` is what its attidentity was ('a', 'd' or ''), for
 * hilo_unadopt. The caller must own the table (42501). Transactional.
 */
HILO_SQL_FUNCTION(hilo_note_adopted)
{
    static const char *const arg_names[] = {"tbl", "col", "seq", "identity"};
    hilo_entry(fcinfo, "hilo._note_adopted()", arg_names, 4, HILO_WRITES);
    check_table_owner(PG_GETARG_OID(0), "hilo_adopt()");
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    bool isnull;
    (void)forget_adopted(PG_GETARG_OID(0), PG_GETARG_DATUM(1), &isnull);
    static const char *sql =
        "INSERT INTO hilo.adopted_columns"
        " (table_name, column_name, sequence, identity)"
        " VALUES ($1, $2, $3, $4)";
    Oid types[4] = {REGCLASSOID, NAMEOID, TEXTOID, CHAROID};
    Datum values[4] = {PG_GETARG_DATUM(0), PG_GETARG_DATUM(1), PG_GETARG_DATUM(2),
                       PG_GETARG_DATUM(3)};
    hilo_spi_exec(sql, 4, types, values, NULL, false, 0);
    hilo_catalog_end(&access);
    PG_RETURN_VOID();
}

/*
 * hilo._forget_adopted(tbl, col): hilo_unadopt gives the column back;
 * returns the identity it had when adopted ('a', 'd', '' or NULL: not
 * adopted by hilo_adopt, or its column renamed since). The caller must own the table
 * (42501). Transactional.
 */
HILO_SQL_FUNCTION(hilo_forget_adopted)
{
    static const char *const arg_names[] = {"tbl", "col"};
    hilo_entry(fcinfo, "hilo._forget_adopted()", arg_names, 2, HILO_WRITES);
    check_table_owner(PG_GETARG_OID(0), "hilo_unadopt()");
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    bool isnull;
    Datum identity = forget_adopted(PG_GETARG_OID(0), PG_GETARG_DATUM(1), &isnull);
    hilo_catalog_end(&access);
    if (isnull)
        PG_RETURN_NULL();
    PG_RETURN_DATUM(identity);
}
