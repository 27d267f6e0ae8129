/*
 * order/quorum/quorum.h: ordering => 'quorum', a register claim per batch
 * of a node's callers (quorum_order.cpp), made by the claim server of
 * hilo.agent_database (quorum_server.cpp). What the two share is
 * quorum_shared.h.
 */
#ifndef HILO_PG_ORDER_QUORUM_H
#define HILO_PG_ORDER_QUORUM_H

#include "../../alloc/alloc.h"

/* From _PG_init: the gates' shared memory. */
extern void hilo_quorum_shmem_init(void);
/* quorum_server.cpp: the claim server of hilo.agent_database. */
extern void hilo_quorum_server_init(void);
/* `n` IDs as one range above every ID this cluster handed out before the
 * call began: one register claim per batch of this node's callers. */
extern void hilo_quorum_take(const HiloSequence *seq, uint64 n, HiloRange *out);

#endif /* HILO_PG_ORDER_QUORUM_H */
