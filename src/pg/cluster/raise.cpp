/*
 * cluster/raise.cpp: hilo_raise on a node of a hilo cluster, and what
 * hilo_adopt and hilo_unadopt read from every node.
 *
 * A raise to `above` must keep every node from handing out an ID at or
 * below it. New windows come from the quorum register, and each node
 * serves from its own open windows, free list, pool and buffers. So, as
 * the caller's transaction commits, the caller's node asks every node of
 * the configuration (itself too, over a connection of its own) to run
 * hilo._raise_node(), one durable transaction there that raises the
 * node's register cell of the sequence to `above` (a claim accepted after
 * it, by any majority, lies above: the register's R2), its lease cell's
 * bound, and, on every other node, the node's catalog as hilo_raise does
 * on a single server (windows, free ranges, start_value; pool and buffers
 * stale at commit). The caller's own node raises its catalog in the
 * caller's transaction, as on a single server. A window claimed below the
 * mark before the register was raised is either in that catalog already
 * (trimmed), or installed later by hilo._install_windows(), which reads
 * start_value with a lock the raise holds and so leaves it out; a take's
 * own claim holds the sequence's row until its transaction commits, and
 * the raise waits for it. Every node must answer: a node that does not
 * would go on serving its windows below the mark. Nodes are asked first
 * whether they answer at all (at the call, and again as it commits), so
 * that a node known to be down changes nothing anywhere.
 *
 * The orderings need nothing more. 'quorum': every claim goes through the
 * register; a gate's guess (the end of its last claim) lies below the
 * raised cells, which refuse it, and the claim reads. 'cluster': every
 * call carries its node's start_value - 1 as its floor, checked by the
 * pool and by the holder for forwarded calls; the holder's worker starts
 * the lease over under a new floor (its pool emptied), and any chain that
 * starts, renews or resumes reads cells at or above the mark. node_bits:
 * each node serves its slice from its own catalog, raised like any; the
 * mark must leave every member's slice some IDs (22023 otherwise).
 *
 * Applied only as the transaction commits: a rollback changes nothing on
 * any node. What another node applied stays applied if the commit then
 * fails, or a later node fails: it only makes IDs a gap, never hands one
 * out twice.
 */
#include "cluster.h"

#include "register/register.h"

extern "C" {
#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
}

/* The installed configuration, or NULL on a node in no cluster; 55000 on
 * a node it does not list. */
static HiloConfig *cluster_config(const char *what)
{
    HiloConfig *cfg = (HiloConfig *)palloc(sizeof(HiloConfig));
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    hilo_load_config(cfg);
    hilo_catalog_end(&access);
    if (cfg->epoch == 0)
        return NULL;
    if (cfg->self < 0)
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("this node is not a member of the hilo cluster; %s refuses", what),
                        errdetail("%s", hilo_not_member_detail())));
    return cfg;
}

/* The nodes of a broadcast that did not answer, with why: "" if all did. */
static char *unanswered(const HiloConfig *cfg, HiloBroadcast *b, const bool *skip, int *count)
{
    StringInfoData buf;
    initStringInfo(&buf);
    *count = 0;
    for (int i = 0; i < cfg->nnodes; i++) {
        if ((skip != NULL && skip[i]) || b->results[i] != NULL)
            continue;
        (*count)++;
        /* The peers' errors name their node. */
        if (b->errors[i] != NULL)
            appendStringInfo(&buf, "%s%s", buf.len > 0 ? "; " : "", b->errors[i]);
        else
            appendStringInfo(&buf, "%snode \"%s\": no answer", buf.len > 0 ? "; " : "",
                             cfg->nodes[i].name);
    }
    return buf.data;
}

/* With node_bits, 22023 if the mark leaves a member's slice no ID: the
 * raise keeps every node from handing out an ID at or below it, as a
 * start_value does, and a slice wholly below it would be used up. */
static void check_slices(const HiloConfig *cfg, const HiloSequence *seq, int64 above)
{
    for (int i = 0; i < cfg->nnodes; i++) {
        HiloRange slice;
        if (!hilo_node_slice(seq->node_bits, cfg->nodes[i].id, &slice))
            continue; /* a node id that does not fit: that node serves nothing anyway */
        if (above >= Min(slice.last, seq->max_value) && slice.first <= seq->max_value)
            ereport(ERROR,
                    (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                     errmsg("cannot raise hilo sequence \"%s\" above " INT64_FORMAT
                            ": node \"%s\" would have no IDs left",
                            seq->name, above, cfg->nodes[i].name),
                     errdetail("With node_bits %d, node \"%s\" hands out IDs from " INT64_FORMAT
                               " to " INT64_FORMAT " only.",
                               seq->node_bits, cfg->nodes[i].name, slice.first,
                               Min(slice.last, seq->max_value)),
                     errhint("With node_bits the mark must lie below the end of every member's "
                             "slice.")));
    }
}

/* 08006 unless every node of `cfg` answers a first round; nothing is
 * changed anywhere then. */
static void require_every_node(const HiloConfig *cfg, HiloPeer **peers, const char *name)
{
    HiloBroadcast b;
    int missing;
    hilo_broadcast_query(peers, cfg->nnodes, &b, "SELECT 1", 0, NULL);
    char *why = unanswered(cfg, &b, NULL, &missing);
    hilo_broadcast_free(&b, cfg->nnodes);
    if (missing > 0)
        ereport(ERROR,
                (errcode(ERRCODE_CONNECTION_FAILURE),
                 errmsg("cannot raise hilo sequence \"%s\": %d of the cluster's %d nodes did "
                        "not answer",
                        name, missing, cfg->nnodes),
                 errdetail("Nothing was changed. %s", why),
                 errhint("Every node serves from windows of its own, so every node must apply "
                         "a raise: bring the node back, or remove it with hilo_remove_node().")));
}

/* Every node runs hilo._raise_node(name, above): the others with their
 * catalog, this one (whose catalog the caller's transaction raised) its
 * register cell only. */
static void apply_everywhere(const char *name, int64 above)
{
    HiloConfig *cfg = cluster_config("hilo_raise()");
    if (cfg == NULL)
        return;
    int n = cfg->nnodes;
    HiloPeer **peers = hilo_peers_for_config(cfg);
    require_every_node(cfg, peers, name);
    char above_text[32];
    snprintf(above_text, sizeof(above_text), INT64_FORMAT, above);
    const char *others[3] = {name, above_text, "true"};
    const char *self[3] = {name, above_text, "false"};
    const char *const **per_peer = (const char *const **)palloc(sizeof(char **) * n);
    for (int i = 0; i < n; i++)
        per_peer[i] = i == cfg->self ? self : others;
    HiloBroadcast b;
    memset(&b, 0, sizeof(b));
    b.sql = "SELECT hilo._raise_node($1, $2::bigint, $3::boolean)";
    b.nparams = 3;
    b.values_per_peer = per_peer;
    hilo_broadcast(peers, n, &b, hilo_claim_timeout_ms);
    int missing;
    char *why = unanswered(cfg, &b, NULL, &missing);
    hilo_broadcast_free(&b, n);
    if (missing > 0)
        ereport(ERROR,
                (errcode(ERRCODE_CONNECTION_FAILURE),
                 errmsg("could not raise hilo sequence \"%s\" on %d of the cluster's %d nodes",
                        name, missing, n),
                 errdetail("The transaction is rolled back. The nodes that answered hand out no "
                           "ID at or below " INT64_FORMAT " any more (a gap, never an ID twice). "
                           "%s",
                           above, why),
                 errhint("Run hilo_raise() again once every node answers.")));
}

/*
 * The raises of the transaction, applied on the other nodes only as it
 * commits (PRE_COMMIT, PRE_PREPARE): a rollback, of the transaction or of
 * the subtransaction that raised, leaves every node as it was. Applying
 * them may fail (a node gone since the call): the error then aborts the
 * transaction, and what the nodes that answered applied stays (a gap). So
 * does what they applied when the commit fails after PRE_COMMIT (a
 * serializable transaction's conflict, found last), and a prepared
 * transaction rolled back later. Kept in TopTransactionContext.
 */
typedef struct PendingRaise {
    char name[HILO_MAX_NAME_BYTES + 1];
    int64 above;
    int level; /* the subtransaction that raised it */
    struct PendingRaise *next;
} PendingRaise;

static PendingRaise *pending = NULL;

static void raise_xact_callback(XactEvent event, void *arg)
{
    switch (event) {
        case XACT_EVENT_PRE_COMMIT:
        case XACT_EVENT_PRE_PREPARE:
            if (pending == NULL)
                break;
            /* The portals are closed: catalog reads need a snapshot of
             * their own (an error here aborts, which pops it). */
            PushActiveSnapshot(GetTransactionSnapshot());
            /* Taken off first: an error here aborts, and the abort forgets. */
            while (pending != NULL) {
                PendingRaise *r = pending;
                pending = r->next;
                apply_everywhere(r->name, r->above);
            }
            PopActiveSnapshot();
            break;
        default:
            if (hilo_xact_is_over(event))
                pending = NULL; /* its memory went with the transaction */
            break;
    }
}

static void raise_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
                                   SubTransactionId parentSubid, void *arg)
{
    int level = GetCurrentTransactionNestLevel();
    if (event == SUBXACT_EVENT_ABORT_SUB) {
        PendingRaise **link = &pending;
        while (*link != NULL)
            if ((*link)->level >= level)
                *link = (*link)->next;
            else
                link = &(*link)->next;
    } else if (event == SUBXACT_EVENT_COMMIT_SUB) {
        for (PendingRaise *r = pending; r != NULL; r = r->next)
            if (r->level >= level)
                r->level = level - 1;
    }
}

void hilo_cluster_raise(const HiloSequence *seq, int64 above)
{
    HiloConfig *cfg = cluster_config("hilo_raise()");
    if (cfg == NULL)
        return;
    if (seq->node_bits > 0)
        check_slices(cfg, seq, above);
    /* A node known to be down fails the call now. */
    require_every_node(cfg, hilo_peers_for_config(cfg), seq->name);
    static bool registered = false;
    if (!registered) {
        RegisterXactCallback(raise_xact_callback, NULL);
        RegisterSubXactCallback(raise_subxact_callback, NULL);
        registered = true;
    }
    int level = GetCurrentTransactionNestLevel();
    for (PendingRaise *r = pending; r != NULL; r = r->next)
        if (strcmp(r->name, seq->name) == 0 && r->level == level) {
            r->above = Max(r->above, above);
            return;
        }
    PendingRaise *r = (PendingRaise *)MemoryContextAllocZero(TopTransactionContext, sizeof(*r));
    strlcpy(r->name, seq->name, sizeof(r->name));
    r->above = above;
    r->level = level;
    /* Applied in the order raised. */
    PendingRaise **link = &pending;
    while (*link != NULL)
        link = &(*link)->next;
    *link = r;
}

/*
 * hilo._raise_node(seq, above, catalog): one node's part of a raise on a
 * cluster, in a transaction of its own: its register cell of `seq` to at
 * least `above`, and (`catalog`) its catalog as hilo_raise raises it
 * (nothing if it lacks the sequence, or holds it above the mark already).
 */
HILO_SQL_FUNCTION(hilo_raise_node)
{
    static const char *const arg_names[] = {"seq", "above", "catalog"};
    const char *fn = "hilo._raise_node()";
    hilo_entry(fcinfo, fn, arg_names, 3, HILO_WRITES);
    hilo_require_own_durable_transaction(fn);
    /* A lock held longer (a push, a caller's own transaction) fails the
     * answer before the caller stops waiting for it. */
    hilo_answer_lock_timeout(Max(hilo_claim_timeout_ms / 2, 100));
    char name[HILO_MAX_NAME_BYTES + 1];
    hilo_check_name(PG_GETARG_TEXT_PP(0), name);
    int64 above = PG_GETARG_INT64(1);

    /* The sequence first: a take's claim holds it while it waits for this
     * node's register acceptor, whose row comes second. */
    HiloCatalogAccess access;
    HiloSequence seq;
    if (PG_GETARG_BOOL(2) &&
        hilo_begin_owned_sequence(name, "raise", HILO_LOCK_MISSING_OK, &access, &seq)) {
        /* A lock that hilo._install_windows() waits for (it takes FOR KEY
         * SHARE): a window it installs after this commits is checked
         * against the raised start_value. */
        static const char *lock_sql = "SELECT 1 FROM hilo.sequences WHERE seq_id = $1 FOR UPDATE";
        hilo_spi_exec1(lock_sql, INT4OID, Int32GetDatum(seq.seq_id), false, 1);
        if (above >= seq.start_value)
            hilo_raise_apply_locked(seq, above, &access);
        else
            hilo_catalog_end(&access);
    }
    hilo_catalog_begin(&access);
    hilo_require_listed_member(fn);
    const char *keys[1] = {name};
    (void)hilo_register_apply_raises(keys, &above, 1);
    /* Ordering 'cluster': the lease cell's bound too (its acceptor, which
     * locks the row, reports the register's value of the name as well:
     * order/lease/lease_acceptor.cpp), so that a chain that starts, renews or resumes
     * from now on serves above the mark. The bound only rises, as a
     * grant's max() does. */
    static const char *lease_sql =
        "UPDATE hilo.lease_cells SET bound = $2 WHERE seq = $1 AND bound < $2";
    hilo_spi_exec2(lease_sql, TEXTOID, CStringGetTextDatum(name), INT8OID, Int64GetDatum(above),
                   false, 0);
    hilo_catalog_end(&access);
    PG_RETURN_VOID();
}

/* Sends `sql` with `values` to every other node and returns the highest
 * bigint its first column answered (NULL: none); 08006 naming the nodes
 * that did not answer. */
static bool highest_of_others(const HiloConfig *cfg, const char *what, const char *subject,
                              const char *sql, int nparams, const char *const *values,
                              int64 *highest)
{
    int n = cfg->nnodes;
    HiloPeer **peers = hilo_peers_for_config(cfg);
    bool *skip = (bool *)palloc0(sizeof(bool) * n);
    skip[cfg->self] = true;
    HiloBroadcast b;
    hilo_broadcast_query_skip(peers, n, &b, sql, nparams, values, skip);
    int missing;
    char *why = unanswered(cfg, &b, skip, &missing);
    /* Copied out first: the results are libpq's, freed before anything here
     * may raise an error. */
    char **texts = (char **)palloc0(sizeof(char *) * n);
    for (int i = 0; i < n; i++) {
        const char *v = skip[i] ? NULL : hilo_result_text(b.results[i], 0, 0);
        texts[i] = v ? pstrdup(v) : NULL;
    }
    hilo_broadcast_free(&b, n);
    bool found = false;
    for (int i = 0; i < n; i++) {
        if (texts[i] == NULL)
            continue;
        int64 x = pg_strtoint64(texts[i]);
        if (!found || x > *highest)
            *highest = x;
        found = true;
    }
    if (missing > 0)
        ereport(ERROR,
                (errcode(ERRCODE_CONNECTION_FAILURE),
                 errmsg("%s cannot read %s on every node of the hilo cluster", what, subject),
                 errdetail("Nothing was changed. %s", why),
                 errhint("Bring the node back, or remove it with hilo_remove_node().")));
    return found;
}

/*
 * hilo._cluster_column_high(tbl, col): the highest value the column holds,
 * or that the sequence feeding it handed out, on every other node of the
 * cluster (the table is per node): hilo._column_high() there. NULL on a
 * node in no cluster, or if no other node has rows. The caller must own
 * the table (42501).
 */
HILO_SQL_FUNCTION(hilo_cluster_column_high)
{
    static const char *const arg_names[] = {"tbl", "col"};
    hilo_entry(fcinfo, "hilo._cluster_column_high()", arg_names, 2, HILO_READS);
    Oid relid = PG_GETARG_OID(0);
    HeapTuple tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
    if (!HeapTupleIsValid(tuple))
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE),
                        errmsg("relation with OID %u does not exist", relid)));
    Oid owner = ((Form_pg_class)GETSTRUCT(tuple))->relowner;
    ReleaseSysCache(tuple);
    char *relname = get_rel_name(relid);
    if (!has_privs_of_role(GetUserId(), owner))
        ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                        errmsg("must be owner of table %s to call hilo_adopt()", relname)));
    HiloConfig *cfg = cluster_config("hilo_adopt()");
    if (cfg == NULL)
        PG_RETURN_NULL();
    const char *values[2] = {
        quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)), relname),
        NameStr(*PG_GETARG_NAME(1))};
    int64 highest = 0;
    if (!highest_of_others(cfg, "hilo_adopt()", psprintf("the maximum of table %s", values[0]),
                           "SELECT hilo._column_high($1, $2)", 2, values, &highest))
        PG_RETURN_NULL();
    PG_RETURN_INT64(highest);
}

/*
 * hilo._cluster_held_up_to(seq): the highest ID the sequence handed out or
 * holds on any other node (its catalog there, as hilo._held_up_to reads
 * it), and the highest its register cell and lease cell on any node record
 * (windows claimed, installed or not; blocks a lease holder may serve).
 * NULL on a node in no cluster. Usage right needed (42501).
 */
HILO_SQL_FUNCTION(hilo_cluster_held_up_to)
{
    char name[HILO_MAX_NAME_BYTES + 1];
    hilo_entry_seq(fcinfo, "hilo._cluster_held_up_to()", HILO_READS, name);
    HiloSequence seq;
    hilo_lookup_usable_sequence(name, false, &seq);
    HiloConfig *cfg = cluster_config("hilo_unadopt()");
    if (cfg == NULL)
        PG_RETURN_NULL();
    static const char *sql =
        "SELECT greatest((SELECT value FROM hilo.register WHERE key = $1),"
        "  (SELECT bound FROM hilo.lease_cells WHERE seq = $1),"
        "  (SELECT " HILO_HELD_UP_TO_SQL " FROM hilo.sequences s WHERE s.name = $1))";
    const char *values[1] = {name};
    int64 highest = 0;
    bool found =
        highest_of_others(cfg, "hilo_unadopt()", psprintf("what hilo sequence \"%s\" holds", name),
                          sql, 1, values, &highest);
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    int64 here = hilo_register_value_of(name);
    /* And this node's lease cell: the only one in a cluster of one node. */
    static const char *lease_sql = "SELECT bound FROM hilo.lease_cells WHERE seq = $1";
    hilo_spi_exec1(lease_sql, TEXTOID, CStringGetTextDatum(name), true, 1);
    if (SPI_processed > 0 && !hilo_spi_isnull(0, 1))
        here = Max(here, hilo_spi_int64(0, 1));
    hilo_catalog_end(&access);
    PG_RETURN_INT64(found ? Max(highest, here) : here);
}
