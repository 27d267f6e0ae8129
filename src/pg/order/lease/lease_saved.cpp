/*
 * order/lease/lease_saved.cpp: the chains of leases the lease worker freed.
 *
 * A lease nobody called for hilo.lease_forget_after (300 s) is freed with
 * its core node, to save the worker's memory. Its chain had lapsed for
 * idleness (core/lease.hpp, P5), and the next call would resume it; a new
 * lease instead starts above the block the old one recorded, and the rest
 * of that block and the IDs the worker had taken ahead would be a gap. So
 * the worker keeps the chain (its ballot, next ID and block end, a few
 * words per sequence) and the settings it ran under, here, and a new lease
 * of the same catalog and settings resumes it: the resumption expects the
 * chain's ballot, and fails if any other grant came since, as a lapse's
 * does on a node that was never freed.
 *
 * At most HILO_LEASE_SAVED_MAX chains are kept (about 8 MB): names made,
 * called once and dropped would otherwise grow the worker without bound.
 * Past that, a freed lease's chain is not kept, and its next lease starts
 * above its block, as every lease did before.
 */
#include "lease_shared.h"

extern "C" {
#include "utils/hsearch.h"
#include "utils/memutils.h"
}

#include "../../hilo.h"

#define HILO_LEASE_SAVED_MAX 65536

static HTAB *saved = NULL;

static HTAB *saved_table(void)
{
    if (saved == NULL)
        saved = hilo_name_table("hilo lease worker kept chains", 256, sizeof(HiloSavedLease),
                                TopMemoryContext);
    return saved;
}

bool hilo_lease_saved_put(const HiloSavedLease *s)
{
    bool found;
    if (saved != NULL && hash_get_num_entries(saved) >= HILO_LEASE_SAVED_MAX &&
        hash_search(saved, s->seq, HASH_FIND, NULL) == NULL)
        return false;
    HiloSavedLease *e = (HiloSavedLease *)hash_search(saved_table(), s->seq, HASH_ENTER, &found);
    *e = *s;
    return true;
}

bool hilo_lease_saved_take(const char *seq, HiloSavedLease *out)
{
    if (saved == NULL)
        return false;
    HiloSavedLease *e = (HiloSavedLease *)hash_search(saved, seq, HASH_FIND, NULL);
    if (e == NULL)
        return false;
    *out = *e;
    (void)hash_search(saved, seq, HASH_REMOVE, NULL);
    return true;
}

const HiloSavedLease *hilo_lease_saved_find(const char *seq)
{
    if (saved == NULL)
        return NULL;
    return (const HiloSavedLease *)hash_search(saved, seq, HASH_FIND, NULL);
}

void hilo_lease_saved_clear(void)
{
    if (saved != NULL) {
        hash_destroy(saved);
        saved = NULL;
    }
}
