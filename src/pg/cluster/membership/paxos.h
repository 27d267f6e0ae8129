/*
 * cluster/membership/paxos.h: agreeing on the successor of a configuration and
 * installing it (cluster/membership/paxos.cpp, cluster/membership/install.cpp), as membership.cpp
 * runs it.
 */
#ifndef HILO_PG_CLUSTER_PAXOS_H
#define HILO_PG_CLUSTER_PAXOS_H

#include "membership.h"
#include "../register/register.h"

typedef struct PaxosOutcome {
    bool chosen;
    char *value; /* the configuration chosen */
    bool ours;   /* it is the one we proposed */
    bool stale;  /* some member is past cfg->epoch: reload and retry */
    char *why;   /* if not chosen */
} PaxosOutcome;

/* Single-decree Paxos among the members of cfg for the configuration after
 * cfg->epoch, proposing `proposal` (NULL: only learn what was chosen). */
extern void hilo_run_paxos(const HiloConfig *cfg, HiloPeer **peers, const char *proposal,
                           PaxosOutcome *out);
/* cluster/membership/install.cpp: pre-syncs the chosen configuration's nodes and
 * installs it everywhere; NULL, or why not. */
extern char *hilo_install_chosen(const HiloConfig *cfg, HiloPeer **peers, const char *value);

/* ---- cluster/membership/paxos.cpp, for cluster/membership/install.cpp too ---- */

/* ": a; b" of the non-empty ones of two reasons, or "". */
extern char *hilo_join_reasons(const char *a, const char *b);
/* Which nodes of `cfg` answered as the incarnation it lists and are not
 * fenced (cluster/membership/paxos.cpp). */
extern bool *hilo_trusted_nodes(const HiloConfig *cfg, HiloPeer **peers, HiloWatermarkSet *set,
                                HiloJudgedNode *judged, char **left_out);

#endif /* HILO_PG_CLUSTER_PAXOS_H */
