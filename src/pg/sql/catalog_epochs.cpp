/*
 * sql/catalog_epochs.cpp: when a backend's cached catalog reads may have gone
 * stale.
 *
 * A cache of catalog rows (a sequence's definition, a usage decision) is
 * valid while the epochs it was read under have not moved. They move on
 * the invalidations PostgreSQL delivers at the start of the next
 * transaction or command: a commit that changed hilo.sequences (hilo_alter,
 * hilo_drop, DROP EXTENSION, also at COMMIT PREPARED) or hilo.usage_grants,
 * a role or role membership change, or a cache reset (relid 0), which
 * moves both.
 */
#include "sql.h"

extern "C" {
#include "utils/inval.h"
#include "utils/syscache.h"
}

uint64 hilo_catalog_epoch_counter = 1;
uint64 hilo_usage_epoch_counter = 1;
static Oid sequences_relid = InvalidOid;
static Oid usage_grants_relid = InvalidOid;
static bool callbacks_registered = false;

static void relcache_callback(Datum arg, Oid relid)
{
    if (relid == InvalidOid || relid == usage_grants_relid)
        hilo_usage_epoch_counter++;
    if (relid == InvalidOid || relid == sequences_relid) {
        hilo_catalog_epoch_counter++;
        hilo_usage_epoch_counter++;
    }
}

static void role_callback(Datum arg, HiloSysCacheId cacheid, uint32 hashvalue)
{
    hilo_usage_epoch_counter++;
}

void hilo_epochs_watch_catalog(void)
{
    if (!callbacks_registered) {
        CacheRegisterRelcacheCallback(relcache_callback, (Datum)0);
        CacheRegisterSyscacheCallback(AUTHOID, role_callback, (Datum)0);
        CacheRegisterSyscacheCallback(AUTHMEMROLEMEM, role_callback, (Datum)0);
        callbacks_registered = true;
    }
    sequences_relid = hilo_catalog_relid_if_present();
    usage_grants_relid = hilo_usage_grants_relid();
}
