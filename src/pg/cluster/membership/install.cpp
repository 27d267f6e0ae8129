/*
 * cluster/membership/install.cpp: installing the configuration Paxos chose
 * (cluster/membership/paxos.cpp), and any configuration on the nodes behind it. First
 * the pre-sync: the new configuration's nodes are raised to the highest
 * register values and lease cells a majority of the old one holds, so that
 * no claim of the new one goes below what the old one granted; then the
 * cluster's sequences go to joining nodes, and every node that answers
 * installs it (docs/multi-node.md, "Membership").
 */
#include "paxos.h"

#include "../carry/carry.h"

extern "C" {
#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
}

typedef struct RegisterValue {
    char key[HILO_MAX_NAME_BYTES + 1];
    int64 value;
} RegisterValue;

/* Keeps in `entry` (found: it held a row before) the higher of it and row
 * `row` of `r`. */
typedef void (*MergeRow)(void *entry, bool found, PGresult *r, int row);

/*
 * Which nodes of `cfg` count in the pre-sync: those whose dump holds every
 * register value they ever accepted. A node counts if
 *  - it answers as the incarnation `cfg` lists and is not fenced: a member
 *    whose extension was created again, or one restored without a restore
 *    id (its write count went back), lost values it accepted;
 *  - it has installed `cfg`'s epoch or a later one. Installing an epoch
 *    waits for the requests under earlier epochs in flight there (each
 *    holds its hilo.cluster row FOR SHARE from its epoch check to its
 *    commit) and refuses later ones, so a dump read after that holds every
 *    value the node accepted under an earlier configuration. A node behind
 *    could commit such a request after its dump, completing a claim the
 *    dump did not show; it gets `cfg` first.
 * The Paxos majority that chose the change was at `cfg`'s epoch, but the
 * nodes that answer the dumps need not be the same ones. Lease cells
 * count in the write count as register values do (order/lease/lease_acceptor.cpp).
 */
typedef struct PresyncTrust {
    bool *counted;
    char *left_out;       /* why the others that answered do not count */
    HiloWatermarkSet set; /* with the write counts they showed */
} PresyncTrust;

static void presync_counted(const HiloConfig *cfg, HiloPeer **peers, PresyncTrust *t)
{
    int n = cfg->nnodes;
    hilo_watermarks_gather(&t->set, cfg, peers);
    HiloJudgedNode *judged = (HiloJudgedNode *)palloc(sizeof(HiloJudgedNode) * Max(n, 1));
    char *distrusted = NULL;
    bool *trusted = hilo_trusted_nodes(cfg, peers, &t->set, judged, &distrusted);
    int64 *epochs = (int64 *)palloc0(sizeof(int64) * Max(n, 1));
    for (int i = 0; i < n; i++)
        epochs[i] = judged[i].epoch;
    if (hilo_commit_config_where_behind(cfg, peers, trusted, epochs))
        trusted = hilo_trusted_nodes(cfg, peers, &t->set, judged, &distrusted); /* once more */
    StringInfoData reasons;
    initStringInfo(&reasons);
    appendStringInfoString(&reasons, distrusted);
    t->counted = (bool *)palloc0(sizeof(bool) * Max(n, 1));
    for (int i = 0; i < n; i++) {
        if (trusted[i] && judged[i].epoch < cfg->epoch)
            appendStringInfo(&reasons,
                             "%snode \"%s\" has installed configuration epoch " INT64_FORMAT
                             ", not yet " INT64_FORMAT,
                             reasons.len > 0 ? "; " : "", cfg->nodes[i].name, judged[i].epoch,
                             cfg->epoch);
        else
            t->counted[i] = trusted[i];
    }
    t->left_out = reasons.data;
}

/*
 * After the dumps: each node whose dump counted (used[i]) must still answer
 * as itself, unfenced, at `cfg`'s epoch or later, with a write count not
 * below the one it showed before: a node whose extension was created
 * again, or that started from a cold copy, between the two looks gave a
 * dump that is not the one judged. NULL, or why not.
 */
static char *presync_unchanged(const HiloConfig *cfg, HiloPeer **peers, PresyncTrust *t,
                               const bool *used)
{
    int n = cfg->nnodes;
    HiloJudgedNode *judged = (HiloJudgedNode *)palloc(sizeof(HiloJudgedNode) * Max(n, 1));
    char *distrusted = NULL;
    bool *trusted = hilo_trusted_nodes(cfg, peers, &t->set, judged, &distrusted);
    StringInfoData changed;
    initStringInfo(&changed);
    for (int i = 0; i < n; i++)
        if (used[i] && (!trusted[i] || judged[i].epoch < cfg->epoch))
            appendStringInfo(&changed, "%s\"%s\"", changed.len > 0 ? ", " : "", cfg->nodes[i].name);
    if (changed.len == 0)
        return NULL;
    return psprintf(
        "node %s changed while the pre-sync read its register (or no longer "
        "answers)%s",
        changed.data, hilo_join_reasons(distrusted, NULL));
}

/*
 * Runs the dump `sql` on the nodes of `cfg` and keeps, per name (its first
 * column), the highest row as `merge` sees it, in a hash of entries of
 * `entrysize` that begin with the name. Only the answers of nodes `t`
 * counts count (presync_counted), and used[i] is set for each. A node whose
 * catalog lacks the function (`missing_ok`: a hilo before it) has nothing
 * to give and counts as answered. NULL, with *why, if fewer than a
 * majority answered.
 */
static HTAB *dump_highest(const HiloConfig *cfg, HiloPeer **peers, const PresyncTrust *t,
                          bool *used, const char *sql, Size entrysize, MergeRow merge,
                          bool missing_ok, const char *what, char **why)
{
    const bool *counted = t->counted;
    const char *left_out = t->left_out;
    HiloBroadcast b;
    hilo_broadcast_query(peers, cfg->nnodes, &b, sql, 0, NULL);
    HTAB *highest = hilo_name_table(what, 64, entrysize, CurrentMemoryContext);
    int answered = 0;
    for (int i = 0; i < cfg->nnodes; i++) {
        PGresult *r = counted[i] ? b.results[i] : NULL;
        if (r != NULL || (counted[i] && missing_ok && strcmp(peers[i]->sqlstate, "42883") == 0)) {
            answered++;
            used[i] = true;
        }
        for (int row = 0; r != NULL && row < PQntuples(r); row++) {
            char name[HILO_MAX_NAME_BYTES + 1];
            strlcpy(name, hilo_result_text(r, row, 0) ? hilo_result_text(r, row, 0) : "",
                    sizeof(name));
            /* Two statements: C++ leaves open whether an argument list reads
             * `found` before or after hash_search() sets it. */
            bool found;
            void *entry = hash_search(highest, name, HASH_ENTER, &found);
            merge(entry, found, r, row);
        }
    }
    char *errors = hilo_broadcast_errors(&b, cfg->nnodes);
    hilo_broadcast_free(&b, cfg->nnodes);
    if (answered >= (int)hilo_majority_of(cfg->nnodes))
        return highest;
    *why = psprintf("only %d of %d nodes gave their %s, %d needed%s", answered, cfg->nnodes, what,
                    (int)hilo_majority_of(cfg->nnodes), hilo_join_reasons(left_out, errors));
    return NULL;
}

/* The entries of `h`, in a palloc'd array of *n. */
static void **hash_entries(HTAB *h, int *n)
{
    *n = (int)hash_get_num_entries(h);
    void **out = (void **)palloc(sizeof(void *) * Max(*n, 1));
    HASH_SEQ_STATUS seq;
    hash_seq_init(&seq, h);
    int k = 0;
    for (void *e; (e = hash_seq_search(&seq)) != NULL;)
        out[k++] = e;
    return out;
}

/* Sends a raise (`sql` with its parameters) to the nodes of `next`. Returns
 * NULL once a majority took it, else why not. */
static char *raise_on_majority(const HiloConfig *next, HiloPeer **next_peers, const char *sql,
                               int nparams, const char **values, const char *what)
{
    HiloBroadcast b;
    memset(&b, 0, sizeof(b));
    b.sql = sql;
    b.nparams = nparams;
    b.values = values;
    hilo_broadcast(next_peers, next->nnodes, &b, hilo_claim_timeout_ms);
    int raised = 0;
    for (int i = 0; i < next->nnodes; i++)
        if (b.results[i] != NULL)
            raised++;
    char *errors = hilo_broadcast_errors(&b, next->nnodes);
    hilo_broadcast_free(&b, next->nnodes);
    if (raised < (int)hilo_majority_of(next->nnodes))
        return psprintf("only %d of %d nodes of the new configuration took the %s, %d needed: %s",
                        raised, next->nnodes, what, (int)hilo_majority_of(next->nnodes), errors);
    return NULL;
}

static void merge_register_value(void *entry, bool found, PGresult *r, int row)
{
    RegisterValue *e = (RegisterValue *)entry;
    int64 value = hilo_result_int64(r, row, 1);
    e->value = found ? Max(e->value, value) : value;
}

/* Raises the nodes of `next` to the register values `highest` holds; at
 * least a majority of `next` must take them. NULL, or why not. */
static char *raise_register(const HiloConfig *next, HiloPeer **next_peers, HTAB *highest)
{
    int n;
    RegisterValue **e = (RegisterValue **)hash_entries(highest, &n);
    const char **keys = (const char **)palloc(sizeof(char *) * Max(n, 1));
    int64 *values = (int64 *)palloc(sizeof(int64) * Max(n, 1));
    for (int k = 0; k < n; k++) {
        keys[k] = e[k]->key;
        values[k] = e[k]->value;
    }
    static const char *raise_sql = "SELECT hilo._register_raise($1::text[], $2::bigint[])";
    const char *raise_values[2] = {hilo_text_array(keys, n), hilo_int64_array(values, n)};
    return raise_on_majority(next, next_peers, raise_sql, 2, raise_values, "register values");
}

/* A lease cell of ordering 'cluster' as the pre-sync carries it. */
typedef struct LeaseValue {
    char seq[HILO_MAX_NAME_BYTES + 1];
    int64 ballot;
    int32 holder;
    int64 bound;
    int64 round;
    int64 lease_us; /* the largest lease time and drift bound (core/lease.hpp, A5) */
    int32 drift_ppm;
} LeaseValue;

/* The cell of the highest ballot (its holder and round), the highest bound. */
static void merge_lease_cell(void *entry, bool found, PGresult *r, int row)
{
    LeaseValue *e = (LeaseValue *)entry;
    int64 ballot = hilo_result_int64(r, row, 1);
    int64 bound = hilo_result_int64(r, row, 3);
    if (!found || (uint64)ballot > (uint64)e->ballot) {
        e->ballot = ballot;
        e->holder = (int32)hilo_result_int64(r, row, 2);
        e->round = hilo_result_int64(r, row, 4);
    }
    e->bound = found ? Max(e->bound, bound) : bound;
    int64 lease_us = hilo_result_int64(r, row, 5);
    int32 drift = (int32)hilo_result_int64(r, row, 6);
    e->lease_us = found ? Max(e->lease_us, lease_us) : lease_us;
    e->drift_ppm = found ? Max(e->drift_ppm, drift) : drift;
}

/*
 * The lease cells likewise (core/lease.hpp). Grants under two consecutive
 * configurations meet at an acceptor, but a sequence nobody called while a
 * configuration was installed had no grant under it: without the carry,
 * the bound of the one before could be on no node of a majority two
 * changes later, and a new holder would start below IDs handed out.
 */
static char *raise_leases(const HiloConfig *next, HiloPeer **next_peers, HTAB *highest)
{
    int n;
    LeaseValue **e = (LeaseValue **)hash_entries(highest, &n);
    if (n == 0)
        return NULL; /* no sequence of ordering 'cluster' was ever served */
    /* One array per column, as register_claim.cpp and lease_net.cpp build
     * theirs: the rows differ, the text form is net.h's hilo_*_array. */
    const char **seqs = (const char **)palloc(sizeof(char *) * n);
    int64 *ballots = (int64 *)palloc(sizeof(int64) * n);
    int32 *holders = (int32 *)palloc(sizeof(int32) * n);
    int64 *bounds = (int64 *)palloc(sizeof(int64) * n);
    int64 *rounds = (int64 *)palloc(sizeof(int64) * n);
    int64 *lease_us = (int64 *)palloc(sizeof(int64) * n);
    int32 *drifts = (int32 *)palloc(sizeof(int32) * n);
    for (int k = 0; k < n; k++) {
        seqs[k] = e[k]->seq;
        ballots[k] = e[k]->ballot;
        holders[k] = e[k]->holder;
        bounds[k] = e[k]->bound;
        rounds[k] = e[k]->round;
        lease_us[k] = e[k]->lease_us;
        drifts[k] = e[k]->drift_ppm;
    }
    static const char *raise_sql =
        "SELECT hilo._lease_raise($1::text[], $2::bigint[],"
        " $3::integer[], $4::bigint[], $5::bigint[], $6::bigint[], $7::integer[])";
    const char *raise_values[7] = {hilo_text_array(seqs, n),     hilo_int64_array(ballots, n),
                                   hilo_int32_array(holders, n), hilo_int64_array(bounds, n),
                                   hilo_int64_array(rounds, n),  hilo_int64_array(lease_us, n),
                                   hilo_int32_array(drifts, n)};
    return raise_on_majority(next, next_peers, raise_sql, 7, raise_values, "lease cells");
}

/* The pre-sync of `next`, which Paxos chose as the successor of `cfg`:
 * NULL, or why not. */
static char *presync(const HiloConfig *cfg, HiloPeer **peers, const HiloConfig *next,
                     HiloPeer **next_peers)
{
    PresyncTrust trust;
    presync_counted(cfg, peers, &trust);
    bool *used = (bool *)palloc0(sizeof(bool) * Max(cfg->nnodes, 1));
    char *why = NULL;
    HTAB *registers =
        dump_highest(cfg, peers, &trust, used, "SELECT key, value FROM hilo._register_dump()",
                     sizeof(RegisterValue), merge_register_value, false, "register values", &why);
    /* A node of a catalog before 0.5.0 has no lease cells. */
    HTAB *leases =
        registers == NULL
            ? NULL
            : dump_highest(cfg, peers, &trust, used,
                           "SELECT seq, ballot, holder, bound, grant_round,"
                           " lease_us, drift_ppm FROM hilo._lease_dump()",
                           sizeof(LeaseValue), merge_lease_cell, true, "lease cells", &why);
    if (leases != NULL)
        why = presync_unchanged(cfg, peers, &trust, used);
    if (why == NULL)
        why = raise_register(next, next_peers, registers);
    if (why == NULL)
        why = raise_leases(next, next_peers, leases);
    return why;
}

/* Peers for the nodes of `next`, reusing those of `cfg`. */
static HiloPeer **peers_for(const HiloConfig *next)
{
    HiloPeer **peers = (HiloPeer **)palloc0(sizeof(HiloPeer *) * Max(next->nnodes, 1));
    for (int i = 0; i < next->nnodes; i++)
        peers[i] = hilo_peer_for(next->nodes[i].id, next->nodes[i].name, next->nodes[i].conninfo);
    return peers;
}

/*
 * Makes a chosen configuration real: pre-sync, then install it on every node
 * of the old and the new configuration that answers (the agent carries it
 * to the others). Returns NULL, or why not.
 */
char *hilo_install_chosen(const HiloConfig *cfg, HiloPeer **peers, const char *value)
{
    HiloConfig *next = hilo_config_from_json(value);
    HiloPeer **next_peers = peers_for(next);
    char *why = presync(cfg, peers, next, next_peers);
    if (why != NULL)
        return why;
    /* A joining node gets the cluster's sequences before it is a member. */
    int64 carried;
    char message[1024];
    hilo_carry_sequences(next, next_peers, &carried, message, sizeof(message));
    if (message[0] != '\0')
        ereport(NOTICE, (errmsg("hilo: %s", message)));
    /* Removed nodes learn it too: they stop answering claims. */
    (void)hilo_commit_config_on(peers, cfg->nnodes, value);
    /*
     * Chosen is decided: a member that did not install it now (down, busy)
     * gets it from the agent or the next change. Said, not hidden: the
     * change succeeded, but those nodes answer under the old configuration
     * until then.
     */
    StringInfoData missing;
    initStringInfo(&missing);
    int have = hilo_commit_config_reporting(next_peers, next->nnodes, value, &missing);
    if (have < next->nnodes)
        ereport(WARNING,
                (errmsg("the new hilo configuration (epoch " INT64_FORMAT
                        ") is installed on %d of its %d nodes",
                        next->epoch, have, next->nnodes),
                 errdetail("Not installed on %s.", missing.data),
                 errhint("The agent installs it on each of them when it answers; hilo.nodes "
                         "shows the epoch every node has.")));
    return NULL;
}

/* Installs `json` on every given peer that is behind; returns how many have it. */
int hilo_commit_config_on(HiloPeer **peers, int npeers, const char *json)
{
    return hilo_commit_config_reporting(peers, npeers, json, NULL);
}

int hilo_commit_config_reporting(HiloPeer **peers, int npeers, const char *json, StringInfo missing)
{
    static const char *sql = "SELECT hilo._config_commit($1)";
    const char *values[1] = {json};
    HiloBroadcast b;
    hilo_broadcast_query(peers, npeers, &b, sql, 1, values);
    int64 epoch = 0;
    HiloConfig *cfg = hilo_config_from_json(json);
    epoch = cfg->epoch;
    int have = 0;
    for (int i = 0; i < npeers; i++) {
        if (b.results[i] != NULL && hilo_result_int64(b.results[i], 0, 0) >= epoch) {
            have++;
            continue;
        }
        if (missing == NULL)
            continue;
        if (missing->len > 0)
            appendStringInfoString(missing, "; ");
        if (b.errors[i] != NULL) /* node "x": why */
            appendStringInfoString(missing, b.errors[i]);
        else if (b.results[i] != NULL)
            appendStringInfo(missing, "node \"%s\": at epoch " INT64_FORMAT, peers[i]->name,
                             hilo_result_int64(b.results[i], 0, 0));
        else
            appendStringInfo(missing, "node \"%s\": no answer", peers[i]->name);
    }
    hilo_broadcast_free(&b, npeers);
    return have;
}

/* Installs `cfg` on those of its nodes that answered with an older epoch;
 * returns whether there were any. */
bool hilo_commit_config_where_behind(const HiloConfig *cfg, HiloPeer **peers, const bool *answered,
                                     const int64 *epochs)
{
    int n = cfg->nnodes;
    HiloPeer **lagging = (HiloPeer **)palloc0(sizeof(HiloPeer *) * Max(n, 1));
    bool any = false;
    for (int i = 0; i < n; i++) {
        bool behind = answered[i] && epochs[i] < cfg->epoch;
        lagging[i] = behind ? peers[i] : NULL;
        any |= behind;
    }
    if (any)
        (void)hilo_commit_config_on(lagging, n, cfg->json);
    return any;
}
