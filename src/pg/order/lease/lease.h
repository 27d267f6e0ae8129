/*
 * order/lease/lease.h: ordering => 'cluster', IDs from the node that holds
 * the sequence's lease (core/lease.hpp). What its files share is
 * lease_shared.h.
 */
#ifndef HILO_PG_ORDER_LEASE_H
#define HILO_PG_ORDER_LEASE_H

#include "../../alloc/alloc.h"

/* From _PG_init: the slots' shared memory and the lease worker. */
extern void hilo_lease_init(void);
extern "C" PGDLLEXPORT void hilo_lease_worker_main(Datum main_arg);
/* `n` consecutive IDs above every ID this cluster handed out before the
 * call began, from the node that holds the sequence's lease. */
extern void hilo_lease_take(const HiloSequence *seq, uint64 n, HiloRange *out);

#endif /* HILO_PG_ORDER_LEASE_H */
