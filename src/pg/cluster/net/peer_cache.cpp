/*
 * cluster/net/peer_cache.cpp: the process's peers, one per node, kept across
 * calls (cluster/net/peers.cpp drives them): found by node, made again when a
 * node's conninfo changes, closed when it leaves the configuration.
 */
#include "net.h"

extern "C" {
#include "utils/memutils.h"
}

static HiloPeer *peer_cache[HILO_MAX_NODES + 1];
static int peer_cache_len = 0;

/* Closes and frees the cached peer at `i`. */
static void forget_peer(int i)
{
    hilo_peer_close(peer_cache[i]);
    pfree(peer_cache[i]->conninfo);
    pfree(peer_cache[i]);
    memmove(peer_cache + i, peer_cache + i + 1, sizeof(HiloPeer *) * (peer_cache_len - i - 1));
    peer_cache_len--;
}

HiloPeer *hilo_peer_for(int32 node_id, const char *name, const char *conninfo)
{
    for (int i = 0; i < peer_cache_len; i++) {
        HiloPeer *p = peer_cache[i];
        if (p->node_id != node_id)
            continue;
        if (strcmp(p->conninfo, conninfo) != 0) {
            hilo_peer_close(p);
            pfree(p->conninfo);
            p->conninfo = MemoryContextStrdup(TopMemoryContext, conninfo);
        }
        strlcpy(p->name, name, sizeof(p->name));
        if (p->state == HILO_PEER_FAILED)
            p->state = HILO_PEER_CLOSED; /* a new run tries again */
        return p;
    }
    if (peer_cache_len >= (int)lengthof(peer_cache))
        forget_peer(0); /* the oldest; configurations are small, this is a safety net */
    HiloPeer *p = (HiloPeer *)MemoryContextAllocZero(TopMemoryContext, sizeof(HiloPeer));
    p->node_id = node_id;
    strlcpy(p->name, name, sizeof(p->name));
    p->conninfo = MemoryContextStrdup(TopMemoryContext, conninfo);
    p->state = HILO_PEER_CLOSED;
    peer_cache[peer_cache_len++] = p;
    return p;
}

HiloPeer **hilo_peers_for_config(const HiloConfig *cfg)
{
    /* Close peers of nodes that left the configuration. */
    for (int i = 0; i < peer_cache_len;) {
        bool member =
            peer_cache[i]->node_id <= 0 || hilo_config_index_of(cfg, peer_cache[i]->node_id) >= 0;
        if (member) {
            i++;
            continue;
        }
        forget_peer(i);
    }
    HiloPeer **peers = (HiloPeer **)palloc0(sizeof(HiloPeer *) * Max(cfg->nnodes, 1));
    for (int i = 0; i < cfg->nnodes; i++)
        peers[i] = hilo_peer_for(cfg->nodes[i].id, cfg->nodes[i].name, cfg->nodes[i].conninfo);
    return peers;
}

void hilo_peers_close_all(void)
{
    while (peer_cache_len > 0)
        forget_peer(peer_cache_len - 1);
}
