/*
 * order/order.h: the sequences ordered across the cluster, 'quorum'
 * (quorum/) and 'cluster' (lease/), as one subsystem from _PG_init.
 */
#ifndef HILO_PG_ORDER_H
#define HILO_PG_ORDER_H

/* From _PG_init, after hilo_cluster_init(): the claim server, the lease
 * worker, and the allocator's window source on member nodes. */
extern void hilo_order_init(void);

#endif /* HILO_PG_ORDER_H */
