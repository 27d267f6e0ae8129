/*
 * cluster/membership/paxos.cpp: agreeing on the successor of a configuration (single-
 * decree Paxos among its members, core/config_agreement.hpp); installing
 * the one chosen is cluster/membership/install.cpp (docs/multi-node.md, "Membership").
 */
#include "paxos.h"

extern "C" {
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/snapmgr.h"
}

typedef enum PhaseEnd {
    PHASE_PASSED,         /* a majority voted yes: go on */
    PHASE_ENDS_ATTEMPT,   /* stale, or too few votes: `out` says which */
    PHASE_BALLOT_TOO_LOW, /* too few votes and a higher ballot seen: retry */
} PhaseEnd;

/* ": a; b" of the non-empty ones of two reasons, or "". */
char *hilo_join_reasons(const char *a, const char *b)
{
    bool has_a = a != NULL && a[0] != '\0', has_b = b != NULL && b[0] != '\0';
    if (!has_a && !has_b)
        return pstrdup("");
    return psprintf(": %s%s%s", has_a ? a : "", has_a && has_b ? "; " : "", has_b ? b : "");
}

/* Ends a phase of `n` nodes that `votes` voted for: frees the broadcast and
 * says whether the attempt goes on. */
static PhaseEnd end_phase(HiloBroadcast *b, int n, int votes, bool too_low, const char *voted,
                          const char *left_out, PaxosOutcome *out)
{
    char *errors = hilo_broadcast_errors(b, n);
    hilo_broadcast_free(b, n);
    int majority = (int)hilo_majority_of(n);
    if (out->stale)
        return PHASE_ENDS_ATTEMPT;
    if (votes >= majority)
        return PHASE_PASSED;
    if (too_low)
        return PHASE_BALLOT_TOO_LOW;
    out->why = psprintf("only %d of %d nodes %s, %d needed%s", votes, n, voted, majority,
                        hilo_join_reasons(left_out, errors));
    return PHASE_ENDS_ATTEMPT;
}

/*
 * Judges the nodes of `cfg` as the agent does (hilo_judge_nodes, with the
 * write counts every node's proposers saw, merged into `set`). Returns
 * which answered as the incarnation `cfg` lists and are not fenced; in
 * *left_out, why the others that answered are not. `judged` gets each
 * node's answer.
 */
bool *hilo_trusted_nodes(const HiloConfig *cfg, HiloPeer **peers, HiloWatermarkSet *set,
                         HiloJudgedNode *judged, char **left_out)
{
    int n = cfg->nnodes;
    hilo_judge_nodes(cfg, peers, set, judged);
    bool *trusted = (bool *)palloc0(sizeof(bool) * Max(n, 1));
    StringInfoData reasons;
    initStringInfo(&reasons);
    for (int i = 0; i < n; i++) {
        trusted[i] = judged[i].answered && judged[i].why == NULL;
        if (judged[i].answered && judged[i].why != NULL)
            appendStringInfo(&reasons, "%snode \"%s\" %s", reasons.len > 0 ? "; " : "",
                             cfg->nodes[i].name, judged[i].why);
    }
    *left_out = reasons.data;
    return trusted;
}

/*
 * Runs both phases with one ballot. Returns false when a higher ballot was
 * seen (retry with a higher one); fills `out` otherwise.
 */
static bool paxos_attempt(const HiloConfig *cfg, HiloPeer **peers, const bool *voters,
                          const char *left_out, const char *proposal, HiloBallot ballot,
                          uint64 *highest_counter, PaxosOutcome *out)
{
    int n = cfg->nnodes;
    char slot[32], counter[32], proposer[32];
    snprintf(slot, sizeof(slot), INT64_FORMAT, cfg->epoch);
    snprintf(counter, sizeof(counter), INT64_FORMAT, (int64)ballot.counter);
    snprintf(proposer, sizeof(proposer), INT64_FORMAT, (int64)ballot.proposer);

    /* Phase 1: promises, and what the promisers accepted before. */
    static const char *prepare_sql =
        "SELECT vote, epoch, config, promised_counter, accepted_counter, accepted_proposer,"
        "       accepted_config FROM hilo._config_prepare($1, $2, $3)";
    const char *prepare_values[3] = {slot, counter, proposer};
    HiloBroadcast b;
    hilo_broadcast_query(peers, n, &b, prepare_sql, 3, prepare_values);
    int granted = 0;
    bool too_low = false;
    HiloBallot best = {0, 0};
    char *value = NULL;
    for (int i = 0; i < n; i++) {
        PGresult *r = voters[i] ? b.results[i] : NULL;
        if (r == NULL || PQntuples(r) != 1)
            continue;
        HiloConfigVote vote = (HiloConfigVote)hilo_result_int64(r, 0, 0);
        *highest_counter = Max(*highest_counter, (uint64)hilo_result_int64(r, 0, 3));
        if (vote == HILO_CONFIG_NODE_IS_AHEAD) {
            out->stale = true;
        } else if (vote == HILO_CONFIG_BALLOT_TOO_LOW) {
            too_low = true;
        } else if (vote == HILO_CONFIG_GRANTED) {
            granted++;
            HiloBallot accepted = {(uint64)hilo_result_int64(r, 0, 4),
                                   (uint64)hilo_result_int64(r, 0, 5)};
            if (hilo_result_text(r, 0, 6) != NULL && hilo_ballot_compare(best, accepted) < 0) {
                best = accepted;
                value = pstrdup(hilo_result_text(r, 0, 6));
            }
        }
    }
    PhaseEnd prepared = end_phase(&b, n, granted, too_low, "promised", left_out, out);
    if (prepared != PHASE_PASSED)
        return prepared == PHASE_ENDS_ATTEMPT;
    /* A proposal some majority may have chosen must be finished first. It
     * may be our own, accepted by some node in an earlier attempt that a
     * racing changer's ballot cut short: then it is still ours. */
    out->ours = value == NULL || (proposal != NULL && strcmp(value, proposal) == 0);
    if (value == NULL)
        value = pstrdup(proposal ? proposal : "");
    if (value[0] == '\0') {
        out->why = pstrdup("no change to finish");
        return true;
    }

    /* Phase 2. */
    static const char *accept_sql =
        "SELECT vote, epoch, promised_counter FROM hilo._config_accept($1, $2, $3, $4)";
    const char *accept_values[4] = {slot, counter, proposer, value};
    memset(&b, 0, sizeof(b));
    b.sql = accept_sql;
    b.nparams = 4;
    b.values = accept_values;
    hilo_broadcast(peers, n, &b, hilo_claim_timeout_ms);
    int accepted = 0;
    too_low = false;
    for (int i = 0; i < n; i++) {
        PGresult *r = voters[i] ? b.results[i] : NULL;
        if (r == NULL || PQntuples(r) != 1)
            continue;
        HiloConfigVote vote = (HiloConfigVote)hilo_result_int64(r, 0, 0);
        *highest_counter = Max(*highest_counter, (uint64)hilo_result_int64(r, 0, 2));
        if (vote == HILO_CONFIG_GRANTED)
            accepted++;
        else if (vote == HILO_CONFIG_NODE_IS_AHEAD)
            out->stale = true;
        else if (vote == HILO_CONFIG_BALLOT_TOO_LOW)
            too_low = true;
    }
    PhaseEnd accepted_end = end_phase(&b, n, accepted, too_low, "accepted", left_out, out);
    if (accepted_end != PHASE_PASSED)
        return accepted_end == PHASE_ENDS_ATTEMPT;
    out->chosen = true;
    out->value = value;
    return true;
}

/*
 * Only votes of nodes that answer as the incarnation `cfg` lists and are
 * not fenced count: a node restored from a copy (its write count gone
 * back) may have lost promises and accepts too, and two values could then
 * be chosen for one slot.
 */
void hilo_run_paxos(const HiloConfig *cfg, HiloPeer **peers, const char *proposal,
                    PaxosOutcome *out)
{
    memset(out, 0, sizeof(*out));
    HiloWatermarkSet set;
    hilo_watermarks_gather(&set, cfg, peers);
    HiloJudgedNode *judged = (HiloJudgedNode *)palloc(sizeof(HiloJudgedNode) * Max(cfg->nnodes, 1));
    char *left_out = NULL;
    bool *voters = hilo_trusted_nodes(cfg, peers, &set, judged, &left_out);
    uint64 proposer = hilo_random_nonzero();
    uint64 highest = 0;
    for (int attempt = 0; attempt < 5; attempt++) {
        HiloBallot seen = {highest, 0};
        HiloBallot ballot = hilo_ballot_next(&seen, 1, proposer);
        if (paxos_attempt(cfg, peers, voters, left_out, proposal, ballot, &highest, out))
            return;
        hilo_sleep_ms(50 + (long)(hilo_random_nonzero() % 200)); /* let a racing changer finish */
    }
    out->why = pstrdup("other changes kept outbidding this one");
}
