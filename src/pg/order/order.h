/*
 * order/order.h: the sequences ordered across the cluster, 'quorum'
 * (quorum/) and 'cluster' (lease/), as one subsystem from _PG_init, and
 * their calls as sql/ makes them.
 */
#ifndef HILO_PG_ORDER_H
#define HILO_PG_ORDER_H

#include "../alloc/alloc.h"

/* From _PG_init, after hilo_cluster_init(): the claim server, the lease
 * worker, and the allocator's window source on member nodes. */
extern void hilo_order_init(void);

/* hilo_nextval and hilo_take of a sequence ordered across the cluster
 * ('quorum' or 'cluster'): `n` consecutive IDs as one range above every
 * ID any node handed out before this call began. */
extern void hilo_order_take(const HiloSequence *seq, uint64 n, HiloRange *out);

#endif /* HILO_PG_ORDER_H */
