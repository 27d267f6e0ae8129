/*
 * order/quorum/quorum_shared.h: what quorum_order.cpp offers the claim
 * server (quorum_server.cpp), and nothing outside ordering 'quorum' calls.
 */
#ifndef HILO_PG_ORDER_QUORUM_SHARED_H
#define HILO_PG_ORDER_QUORUM_SHARED_H

#include "quorum.h"

/* quorum_order.cpp, for the claim server: registers its latch (NULL: it
 * leaves); the next gate from `from` on with calls waiting, marked busy
 * (its sequence in *seq), or -1; one claim for that gate's waiting calls
 * (an error answers them, then propagates). */
struct Latch;
extern void hilo_quorum_server_attach(struct Latch *latch);
extern int hilo_quorum_server_next_gate(int from, HiloSequence *seq);
extern void hilo_quorum_server_claim(int gate, const HiloSequence *seq);

#endif /* HILO_PG_ORDER_QUORUM_SHARED_H */
