/*
 * cluster/carry/carry.cpp: step 3 of the agent's pass, also run by a membership
 * change for the joining node: every sequence created on some node is
 * created on every node that lacks it (with its created_at, its ordering
 * and the newest settings), and a sequence dropped on one node is dropped
 * on the others. Then the newest settings (hilo_alter's, by settings
 * version) go to every node whose copy is older (docs/multi-node.md,
 * "Settings are cluster-wide").
 */
#include "carry.h"

extern "C" {
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/tuplestore.h"
}

HTAB *hilo_agent_sequence_table(void)
{
    return hilo_name_table("hilo agent sequences", 64, sizeof(SequenceEntry), CurrentMemoryContext);
}

static SequenceEntry *sequence_entry(PassState *st, const char *name)
{
    char key[HILO_MAX_NAME_BYTES + 1];
    strlcpy(key, name, sizeof(key));
    bool found;
    SequenceEntry *e = (SequenceEntry *)hash_search(st->sequences, key, HASH_ENTER, &found);
    if (!found) {
        memset(((char *)e) + sizeof(e->name), 0, sizeof(*e) - sizeof(e->name));
    }
    return e;
}

/* A sequence's settings as the text parameters of a carry. */
typedef struct SettingsText {
    char version[32], max[32], wsize[32], min_open[16], block[16];
} SettingsText;

static void settings_text(const NodeSequence *v, SettingsText *t)
{
    snprintf(t->version, sizeof(t->version), INT64_FORMAT, v->settings_version);
    snprintf(t->max, sizeof(t->max), INT64_FORMAT, v->max_value);
    snprintf(t->wsize, sizeof(t->wsize), INT64_FORMAT, v->window_size);
    snprintf(t->min_open, sizeof(t->min_open), "%d", v->min_open_windows);
    snprintf(t->block, sizeof(t->block), "%d", v->block_size);
}

/* The newer of two copies of a sequence's settings: the higher version,
 * then the later change (two alters on two nodes before either reached the
 * other: the later one wins everywhere). hilo._carry_settings applies a copy
 * by the same order. */
static bool newer_settings(const NodeSequence *a, const NodeSequence *b)
{
    if (a->settings_version != b->settings_version)
        return a->settings_version > b->settings_version;
    return a->changed_us > b->changed_us;
}

/* Step 3a: reads every node's sequences and drops. */
void hilo_agent_read_sequences(PassState *st)
{
    static const char *seq_sql =
        "SELECT name, start_value, max_value, window_size, min_open_windows, block_size, owner,"
        "       created_at::text, (extract(epoch FROM created_at) * 1000000)::bigint,"
        "       open_windows, node_bits, ordering, settings_version, settings_changed_at::text,"
        "       (extract(epoch FROM settings_changed_at) * 1000000)::bigint, slice_agreed"
        "  FROM hilo._sequence_report()";
    static const char *tomb_sql =
        "SELECT name, created_at::text, (extract(epoch FROM created_at) * 1000000)::bigint"
        "  FROM hilo._tombstones()";
    int n = st->cfg->nnodes;
    HiloBroadcast b;
    hilo_broadcast_query(st->peers, n, &b, seq_sql, 0, NULL);
    for (int i = 0; i < n; i++) {
        PGresult *r = b.results[i];
        if (r == NULL) {
            st->usable[i] = false;
            continue;
        }
        for (int row = 0; row < PQntuples(r); row++) {
            NodeSequence *s = (NodeSequence *)palloc0(sizeof(NodeSequence));
            strlcpy(s->name, PQgetvalue(r, row, 0), sizeof(s->name));
            s->start_value = pg_strtoint64(PQgetvalue(r, row, 1));
            s->max_value = pg_strtoint64(PQgetvalue(r, row, 2));
            s->window_size = pg_strtoint64(PQgetvalue(r, row, 3));
            s->min_open_windows = pg_strtoint32(PQgetvalue(r, row, 4));
            s->block_size = pg_strtoint32(PQgetvalue(r, row, 5));
            s->owner = pstrdup(PQgetvalue(r, row, 6));
            s->created_at = pstrdup(PQgetvalue(r, row, 7));
            s->created_us = pg_strtoint64(PQgetvalue(r, row, 8));
            s->open_windows = pg_strtoint64(PQgetvalue(r, row, 9));
            s->node_bits = pg_strtoint32(PQgetvalue(r, row, 10));
            strlcpy(s->ordering, PQgetvalue(r, row, 11), sizeof(s->ordering));
            s->settings_version = pg_strtoint64(PQgetvalue(r, row, 12));
            s->settings_changed_at = pstrdup(PQgetvalue(r, row, 13));
            s->changed_us = pg_strtoint64(PQgetvalue(r, row, 14));
            s->slice_agreed = strcmp(PQgetvalue(r, row, 15), "t") == 0;
            SequenceEntry *e = sequence_entry(st, s->name);
            e->on_node[i] = s;
            e->version_on[i] = s->settings_version;
            if (e->original == NULL || s->created_us < e->original->created_us)
                e->original = s;
            /* Copies created apart with other node_bits: the agreed one, so
             * that a node that joins never adds a vote to the other. */
            bool source_agreed = e->source != NULL && e->source->slice_agreed;
            if (e->source == NULL || (s->slice_agreed && !source_agreed) ||
                (s->slice_agreed == source_agreed && s->created_us < e->source->created_us))
                e->source = s;
            if (e->newest == NULL || newer_settings(s, e->newest))
                e->newest = s;
        }
    }
    hilo_broadcast_free(&b, n);

    hilo_broadcast_query(st->peers, n, &b, tomb_sql, 0, NULL);
    for (int i = 0; i < n; i++) {
        PGresult *r = b.results[i];
        for (int row = 0; r != NULL && row < PQntuples(r); row++) {
            SequenceEntry *e = sequence_entry(st, PQgetvalue(r, row, 0));
            int64 us = pg_strtoint64(PQgetvalue(r, row, 2));
            if (e->tombstone_text == NULL || us > e->tombstone_us) {
                e->tombstone_us = us;
                e->tombstone_text = pstrdup(PQgetvalue(r, row, 1));
            }
        }
    }
    hilo_broadcast_free(&b, n);
}

/* The next sequence of a walk of the pass's table that was not dropped and
 * that some node reported (the settings steps' walk). */
static SequenceEntry *next_live(HASH_SEQ_STATUS *seq)
{
    SequenceEntry *e;
    while ((e = (SequenceEntry *)hash_seq_search(seq)) != NULL)
        if (!e->dropped && e->newest != NULL)
            return e;
    return NULL;
}

void hilo_agent_note(PassResult *res, const char *fmt, ...)
{
    if (res->message.len > 0)
        appendStringInfoString(&res->message, "; ");
    for (;;) {
        va_list args;
        va_start(args, fmt);
        int needed = appendStringInfoVA(&res->message, fmt, args);
        va_end(args);
        if (needed == 0)
            break;
        enlargeStringInfo(&res->message, needed);
    }
}

const char hilo_carry_sequence_sql[] =
    "SELECT hilo._carry_sequence($1, $2::bigint, $3::bigint, $4::bigint, $5::int, $6::int,"
    "                            $7, $8::timestamptz, $9::int, $10, $11::bigint,"
    "                            $12::timestamptz)";

/* Step 3b: drops what was dropped elsewhere, creates what is missing. */
void hilo_agent_carry_sequences(PassState *st, PassResult *res)
{
    static const char *drop_sql = "SELECT hilo._drop_carried($1, $2::timestamptz)";
    int n = st->cfg->nnodes;
    HASH_SEQ_STATUS seq;
    hash_seq_init(&seq, st->sequences);
    for (SequenceEntry *e; (e = (SequenceEntry *)hash_seq_search(&seq)) != NULL;) {
        e->dropped = e->tombstone_text != NULL &&
                     (e->original == NULL || e->original->created_us <= e->tombstone_us);
        bool *skip = (bool *)palloc(sizeof(bool) * n);
        bool any = false;
        for (int i = 0; i < n; i++) {
            bool has = e->on_node[i] != NULL;
            bool drop_here =
                has && e->tombstone_text != NULL && e->on_node[i]->created_us <= e->tombstone_us;
            skip[i] = !st->usable[i] || (e->dropped ? !drop_here : has);
            any |= !skip[i];
        }
        if (!any)
            continue;
        HiloBroadcast b;
        if (e->dropped) {
            const char *values[2] = {e->name, e->tombstone_text};
            hilo_broadcast_query_skip(st->peers, n, &b, drop_sql, 2, values, skip);
        } else {
            /* What the original (or the copy whose node_bits a majority
             * agreed on) was created with; the newest settings. */
            const NodeSequence *o = e->source;
            const NodeSequence *v = e->newest;
            char start[32], bits[16];
            snprintf(start, sizeof(start), INT64_FORMAT, o->start_value);
            snprintf(bits, sizeof(bits), "%d", o->node_bits);
            SettingsText t;
            settings_text(v, &t);
            const char *values[12] = {o->name,    start,       t.max,     t.wsize,
                                      t.min_open, t.block,     o->owner,  o->created_at,
                                      bits,       o->ordering, t.version, v->settings_changed_at};
            hilo_broadcast_query_skip(st->peers, n, &b, hilo_carry_sequence_sql, 12, values, skip);
        }
        for (int i = 0; i < n; i++) {
            if (skip[i])
                continue;
            if (b.results[i] == NULL) {
                hilo_agent_note(res, "could not %s sequence \"%s\" on %s",
                                e->dropped ? "drop" : "create", e->name, b.errors[i]);
                continue;
            }
            if (e->dropped) {
                e->on_node[i] = NULL;
                continue;
            }
            const char *refused = hilo_result_text(b.results[i], 0, 0);
            if (refused != NULL) {
                hilo_agent_note(res, "sequence \"%s\" not created on node \"%s\": %s", e->name,
                                st->cfg->nodes[i].name, refused);
                continue;
            }
            e->carried_to[i] = true;
            e->version_on[i] = e->newest->settings_version;
            res->sequences_carried++;
        }
        hilo_broadcast_free(&b, n);
    }
}

/* What every node that answered has of every sequence's settings after
 * this pass (0: it lacks the sequence), written into hilo.node_settings on
 * every node that answered: hilo.status there reports the nodes behind, and
 * a node this pass could not reach keeps the version it last had. */
static void record_settings(PassState *st, PassResult *res)
{
    static const char *write_sql =
        "SELECT hilo._note_settings($1::text[], $2::int[], $3::bigint[])";
    int n = st->cfg->nnodes;
    long nseq = hash_get_num_entries(st->sequences);
    const char **names = (const char **)palloc(sizeof(char *) * Max(nseq * n, 1));
    int32 *ids = (int32 *)palloc(sizeof(int32) * Max(nseq * n, 1));
    int64 *versions = (int64 *)palloc(sizeof(int64) * Max(nseq * n, 1));
    int count = 0;
    HASH_SEQ_STATUS seq;
    hash_seq_init(&seq, st->sequences);
    for (SequenceEntry *e; (e = next_live(&seq)) != NULL;) {
        for (int i = 0; i < n; i++) {
            if (!st->usable[i])
                continue;
            names[count] = e->name;
            ids[count] = st->cfg->nodes[i].id;
            versions[count] = e->version_on[i];
            count++;
        }
    }
    if (count == 0)
        return;
    bool *skip = (bool *)palloc(sizeof(bool) * n);
    for (int i = 0; i < n; i++)
        skip[i] = !st->usable[i];
    const char *values[3] = {hilo_text_array(names, count), hilo_int32_array(ids, count),
                             hilo_int64_array(versions, count)};
    hilo_agent_write_all(st, res, skip, write_sql, 3, values, "settings versions not recorded");
}

void hilo_agent_write_all(PassState *st, PassResult *res, const bool *skip, const char *sql,
                          int nparams, const char *const *values, const char *failure)
{
    int n = st->cfg->nnodes;
    HiloBroadcast b;
    hilo_broadcast_query_skip(st->peers, n, &b, sql, nparams, values, skip);
    for (int i = 0; i < n; i++)
        if (!skip[i] && b.results[i] == NULL)
            hilo_agent_note(res, "%s on node \"%s\": %s", failure, st->cfg->nodes[i].name,
                            b.errors[i]);
    hilo_broadcast_free(&b, n);
}

/* The newest settings of `e` to the nodes not skipped, whose copies all
 * have `created_at`: a node applies them only to that copy (not to a
 * sequence made again under the name since this pass read it). */
static void carry_settings_to(PassState *st, PassResult *res, SequenceEntry *e, const bool *skip,
                              const char *created_at)
{
    static const char *settings_sql =
        "SELECT hilo._carry_settings($1, $2::bigint, $3::timestamptz, $4::bigint, $5::bigint,"
        "                            $6::int, $7::int, $8::timestamptz)";
    int n = st->cfg->nnodes;
    const NodeSequence *v = e->newest;
    SettingsText t;
    settings_text(v, &t);
    const char *values[8] = {e->name, t.version, v->settings_changed_at, t.max, t.wsize, t.min_open,
                             t.block, created_at};
    HiloBroadcast b;
    hilo_broadcast_query_skip(st->peers, n, &b, settings_sql, 8, values, skip);
    for (int i = 0; i < n; i++) {
        if (skip[i])
            continue;
        if (b.results[i] == NULL) {
            hilo_agent_note(res, "could not carry settings of sequence \"%s\" to %s", e->name,
                            b.errors[i]);
            continue;
        }
        const char *refused = hilo_result_text(b.results[i], 0, 0);
        if (refused != NULL) {
            hilo_agent_note(res, "settings of sequence \"%s\" not carried to node \"%s\": %s",
                            e->name, st->cfg->nodes[i].name, refused);
            continue;
        }
        e->version_on[i] = v->settings_version;
        /* The claims below see the node's new settings. */
        e->on_node[i]->max_value = v->max_value;
        e->on_node[i]->window_size = v->window_size;
        e->on_node[i]->min_open_windows = v->min_open_windows;
        e->on_node[i]->block_size = v->block_size;
        e->on_node[i]->settings_version = v->settings_version;
        res->settings_carried++;
    }
    hilo_broadcast_free(&b, n);
}

/* Step 3c: the newest settings to every node whose copy is older, one
 * broadcast per created_at of those copies (one, unless copies were
 * created apart). */
void hilo_agent_carry_settings(PassState *st, PassResult *res)
{
    int n = st->cfg->nnodes;
    bool *todo = (bool *)palloc(sizeof(bool) * n);
    bool *skip = (bool *)palloc(sizeof(bool) * n);
    HASH_SEQ_STATUS seq;
    hash_seq_init(&seq, st->sequences);
    for (SequenceEntry *e; (e = next_live(&seq)) != NULL;) {
        for (int i = 0; i < n; i++) {
            const NodeSequence *mine = e->on_node[i];
            todo[i] = st->usable[i] && mine != NULL && newer_settings(e->newest, mine);
            /* Copies created apart (two nodes, one name, before either saw
             * the other's) may differ in what is fixed at creation. */
            if (mine != NULL && st->usable[i] && strcmp(mine->ordering, e->original->ordering) != 0)
                hilo_agent_note(res,
                                "sequence \"%s\" has ordering '%s' on node \"%s\" but '%s' "
                                "where it was created first",
                                e->name, mine->ordering, st->cfg->nodes[i].name,
                                e->original->ordering);
            /* Its slices would overlap: the node claims in none of them
             * unless a majority has its node_bits (cluster/agent/window_claim.cpp). */
            if (mine != NULL && st->usable[i] && mine->node_bits != e->source->node_bits)
                hilo_agent_note(res,
                                "sequence \"%s\" has node_bits %d on node \"%s\" but %d in "
                                "the copy the agent carries (agreed on, or created first)",
                                e->name, mine->node_bits, st->cfg->nodes[i].name,
                                e->source->node_bits);
        }
        for (int first = 0; first < n; first++) {
            if (!todo[first])
                continue;
            const char *created_at = e->on_node[first]->created_at;
            for (int i = 0; i < n; i++) {
                skip[i] = !todo[i] || strcmp(e->on_node[i]->created_at, created_at) != 0;
                todo[i] = todo[i] && skip[i];
            }
            carry_settings_to(st, res, e, skip, created_at);
        }
    }
    record_settings(st, res);
}

void hilo_carry_sequences(const HiloConfig *cfg, HiloPeer **peers, int64 *carried, char *message,
                          size_t message_size)
{
    PassState st;
    memset(&st, 0, sizeof(st));
    st.cfg = const_cast<HiloConfig *>(cfg);
    st.peers = peers;
    st.usable = (bool *)palloc(sizeof(bool) * Max(cfg->nnodes, 1));
    for (int i = 0; i < cfg->nnodes; i++)
        st.usable[i] = true; /* hilo_agent_read_sequences() rules out those that do not answer */
    st.sequences = hilo_agent_sequence_table();
    PassResult res;
    memset(&res, 0, sizeof(res));
    initStringInfo(&res.message);
    hilo_agent_read_sequences(&st);
    hilo_agent_carry_sequences(&st, &res);
    *carried = res.sequences_carried;
    strlcpy(message, res.message.data, message_size);
}
