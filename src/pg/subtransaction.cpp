/*
 * subtransaction.cpp: running a piece of work in an internal subtransaction
 * of its own, so that an error in it rolls back only its changes and the
 * caller goes on (the allocator's jobs and returns, an agent pass, a claim
 * of an ordered sequence that another claim outvoted).
 */
#include "hilo.h"

extern "C" {
#include "access/xact.h"
#include "utils/resowner.h"
}

bool hilo_run_in_subtransaction(void (*body)(void *), void *arg, void (*on_error)(void *))
{
    MemoryContext outer_context = CurrentMemoryContext;
    ResourceOwner outer_owner = CurrentResourceOwner;
    volatile bool ok = true;

    BeginInternalSubTransaction(NULL);
    MemoryContextSwitchTo(outer_context);
    PG_TRY();
    {
        body(arg);
        ReleaseCurrentSubTransaction();
        MemoryContextSwitchTo(outer_context);
        CurrentResourceOwner = outer_owner;
    }
    PG_CATCH();
    {
        HILO_FORGET_UNWOUND_FRAMES();
        MemoryContextSwitchTo(outer_context);
        if (on_error != NULL)
            on_error(arg);
        FlushErrorState();
        RollbackAndReleaseCurrentSubTransaction();
        MemoryContextSwitchTo(outer_context);
        CurrentResourceOwner = outer_owner;
        ok = false;
    }
    PG_END_TRY();
    return ok;
}
