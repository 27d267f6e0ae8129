/*
 * sql/replicated.cpp: hilo._raise_replicated, by which a subscriber of a
 * logical replication that carries hilo's catalog raises its own sequence of
 * a publisher's sequence name above every ID the publisher's windows cover
 * (hilo._replicated_row in src/hilo.sql calls it; docs/logical-replication.md).
 */
#include "sql.h"
#include "../commands/commands.h"

extern "C" {
#include "catalog/pg_authid.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/inval.h"
}

/*
 * hilo._raise_replicated(seq, above): no ID of the sequence named `seq` at
 * or below `above` is handed out once the caller's transaction commits: the
 * catalog is raised, and its pool and buffers become stale at commit (their
 * IDs are skipped, as after hilo_alter). Only upwards; false if there is no
 * sequence of that name. Runs for the apply worker of a subscription, not
 * for the sequence's owner: no ownership check (not granted to PUBLIC), and
 * no preload needed (without it there are no pools to make stale).
 */
HILO_SQL_FUNCTION(hilo_raise_replicated)
{
    static const char *const arg_names[] = {"seq", "above"};
    const char *fn = "hilo._raise_replicated()";
    hilo_require_args(fcinfo, fn, arg_names, 2);
    hilo_require_writable(fn);

    char name[HILO_MAX_NAME_BYTES + 1];
    hilo_check_name(PG_GETARG_TEXT_PP(0), name);
    int64 above = Min(PG_GETARG_INT64(1), (int64)HILO_MAX_ID);

    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    HiloSequence seq;
    if (!hilo_lock_named_sequence(name, BOOTSTRAP_SUPERUSERID, "raise", HILO_LOCK_MISSING_OK,
                                  &seq)) {
        hilo_catalog_end(&access);
        PG_RETURN_BOOL(false);
    }
    /* The publisher's windows say nothing of this sequence's start: only
     * the high-water mark moves (hilo_raise moves the start too). */
    bool changed = hilo_raise_rows(seq, above, false);
    Oid catalog = hilo_catalog_relid_if_present();
    hilo_catalog_end(&access);
    if (changed) {
        if (hilo_preloaded) {
            hilo_invalidate_at_commit(seq.seq_id);
            hilo_allocator_wake_at_commit(true);
        }
        /* Sessions that cached the sequence look it up again. */
        CacheInvalidateRelcacheByRelid(catalog);
    }
    PG_RETURN_BOOL(true);
}
