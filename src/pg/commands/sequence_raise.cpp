/*
 * commands/sequence_raise.cpp: raising a hilo sequence past IDs that were
 * stored without it (explicit IDs, a bulk load, a column moved to hilo),
 * for hilo_raise and hilo_adopt (sql/adopt.cpp), and for any other code
 * that must keep a sequence above IDs it learned of.
 *
 * After the raise commits, no ID at or below the mark is handed out by
 * anyone: the catalog's start_value moves above it (a push of an ID below
 * it is refused from then on), windows give up what they still hold below
 * it, free ranges below it are dropped, and the sequence's pool and every
 * backend buffer of it become stale at commit (their IDs a gap), as a drop
 * or hilo_alter makes them. Like every catalog change, a rollback undoes it
 * all; the stale pool only ever makes a gap, so an invalidation of a
 * transaction that then aborts costs IDs, never uniqueness. The catalog rows
 * are alloc/raise_rows.cpp's; on a node of a cluster, sql/adopt.cpp has
 * every node apply it as the transaction commits (cluster/raise.cpp).
 */
#include "commands.h"

extern "C" {
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/inval.h"
}

/* Refuses a mark the sequence cannot be raised to: 22023. */
void hilo_check_raise(const char *name, const HiloSequence &seq, int64 above)
{
    if (above >= seq.max_value)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("cannot raise hilo sequence \"%s\" above " INT64_FORMAT
                               ": its max_value is " INT64_FORMAT,
                               name, above, seq.max_value),
                        errhint("Raise max_value first with hilo_alter().")));
    if (above < seq.start_value - 1)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("cannot lower hilo sequence \"%s\" to " INT64_FORMAT, name, above),
                        errdetail("It hands out no ID below " INT64_FORMAT
                                  " already; going back could hand out an ID twice.",
                                  seq.start_value),
                        errhint("hilo_raise() only moves a sequence upwards.")));
}

void hilo_raise_locked(const char *name, const HiloSequence &seq, int64 above,
                       HiloCatalogAccess *access)
{
    hilo_check_raise(name, seq, above);
    if (above == seq.start_value - 1) {
        hilo_catalog_end(access);
        return; /* already there: nothing below it is handed out */
    }
    hilo_raise_apply_locked(seq, above, access);
}
