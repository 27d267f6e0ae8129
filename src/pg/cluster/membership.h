/*
 * cluster/membership.h: what cluster/membership.cpp (the change, its checks,
 * the SQL functions) and cluster/paxos.cpp (agreeing on the successor
 * configuration and installing it) share.
 */
#ifndef HILO_PG_CLUSTER_MEMBERSHIP_H
#define HILO_PG_CLUSTER_MEMBERSHIP_H

#include "cluster.h"

extern "C" {
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/builtins.h"
}

/* ---- Small helpers ---- */

static inline const char *value_at(PGresult *r, int row, int col)
{
    if (r == NULL || row >= PQntuples(r) || col >= PQnfields(r) || PQgetisnull(r, row, col))
        return NULL;
    return PQgetvalue(r, row, col);
}

static inline int64 int64_at(PGresult *r, int row, int col)
{
    const char *v = value_at(r, row, col);
    return v ? pg_strtoint64(v) : 0;
}

/* "node a: ...; node b: ..." of the errors of a broadcast. */
static inline char *broadcast_errors(HiloBroadcast *b, int npeers)
{
    StringInfoData buf;
    initStringInfo(&buf);
    for (int i = 0; i < npeers; i++)
        if (b->errors[i] != NULL)
            appendStringInfo(&buf, "%s%s", buf.len ? "; " : "", b->errors[i]);
    return buf.data;
}

static inline HiloConfig *parse(const char *json)
{
    HiloConfig *cfg = (HiloConfig *)palloc(sizeof(HiloConfig));
    hilo_parse_config(json, hilo_local_incarnation(), cfg);
    return cfg;
}

/* Sleeps, serving interrupts. */
static inline void sleep_ms(long ms)
{
    TimestampTz until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), ms);
    for (;;) {
        long secs;
        int usecs;
        TimestampDifference(GetCurrentTimestamp(), until, &secs, &usecs);
        long left = secs * 1000 + usecs / 1000;
        if (left <= 0)
            return;
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, left,
                        PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
        CHECK_FOR_INTERRUPTS();
    }
}

/* ---- Paxos for the successor of cfg->epoch ---- */

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
/* Pre-syncs the chosen configuration's nodes and installs it everywhere;
 * NULL, or why not. */
extern char *hilo_install_chosen(const HiloConfig *cfg, HiloPeer **peers, const char *value);

#endif /* HILO_PG_CLUSTER_MEMBERSHIP_H */
