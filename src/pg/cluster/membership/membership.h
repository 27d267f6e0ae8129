/*
 * cluster/membership/membership.h: what the nodes of a configuration say
 * about the cluster (membership.cpp), installing a configuration on the
 * nodes that are behind (install.cpp), and finishing a change its changer
 * left. Agreeing on the next configuration (paxos.cpp, config_votes.cpp,
 * core/config_c_api.h) stays inside the room (paxos.h). Above
 * cluster/carry, cluster/register, cluster/net and cluster/node.
 */
#ifndef HILO_PG_CLUSTER_MEMBERSHIP_H
#define HILO_PG_CLUSTER_MEMBERSHIP_H

#include "../net/net.h"

#include "../../../core/config_c_api.h"

/* What the nodes of a configuration say about the cluster. */
typedef struct HiloClusterView {
    int reachable;
    bool *answered;     /* per node */
    int64 *epochs;      /* per node that answered */
    char **node_errors; /* per node that did not */
    char *newest_json;  /* a newer configuration than ours that some node installed, or NULL */
    int64 newest_epoch;
    int64 youngest_install_ms; /* since our epoch was installed, the least any node reports */
    bool pending_stale;        /* a node accepted a proposal long ago that nobody committed */
    char *errors;              /* all node errors in one line */
} HiloClusterView;

extern void hilo_look_at_cluster(const HiloConfig *cfg, HiloPeer **peers, HiloClusterView *view);
/* install.cpp: installs a configuration on the peers that are
 * behind; returns how many have it. */
extern int hilo_commit_config_on(HiloPeer **peers, int npeers, const char *json);
/* The same; appends to `missing` (unless NULL) each peer that does not have
 * it after, with why ("node "p2": why"; "; " between). */
extern int hilo_commit_config_reporting(HiloPeer **peers, int npeers, const char *json,
                                        StringInfo missing);
/* Installs `cfg` on its nodes that answered with an older epoch; whether any. */
extern bool hilo_commit_config_where_behind(const HiloConfig *cfg, HiloPeer **peers,
                                            const bool *answered, const int64 *epochs);

/*
 * Finishes a configuration change that some node accepted but nobody
 * committed (its changer died); the agent calls it. Returns true if it
 * committed one.
 */
extern bool hilo_finish_pending_change(const HiloConfig *cfg, HiloPeer **peers, char *message,
                                       size_t message_size);

#endif /* HILO_PG_CLUSTER_MEMBERSHIP_H */
