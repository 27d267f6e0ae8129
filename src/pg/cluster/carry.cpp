/*
 * cluster/carry.cpp: step 3 of the agent's pass, also run by a membership
 * change for the joining node: every sequence created on some node is
 * created on every node that lacks it (with its created_at), and a
 * sequence dropped on one node is dropped on the others.
 */
#include "agent.h"

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

static const char *cell(PGresult *r, int row, int col)
{
    return PQgetisnull(r, row, col) ? NULL : PQgetvalue(r, row, col);
}

HTAB *hilo_agent_sequence_table(void)
{
    HASHCTL ctl;
    memset(&ctl, 0, sizeof(ctl));
    ctl.keysize = HILO_MAX_NAME_BYTES + 1;
    ctl.entrysize = sizeof(SequenceEntry);
    ctl.hcxt = CurrentMemoryContext;
    return hash_create("hilo agent sequences", 64, &ctl, HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
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

/* Step 3a: reads every node's sequences and drops. */
void hilo_agent_read_sequences(PassState *st)
{
    static const char *seq_sql =
        "SELECT name, start_value, max_value, window_size, min_open_windows, block_size, owner,"
        "       created_at::text, (extract(epoch FROM created_at) * 1000000)::bigint,"
        "       open_windows, node_bits, ordering FROM hilo._sequence_report()";
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
            SequenceEntry *e = sequence_entry(st, s->name);
            e->on_node[i] = s;
            if (e->original == NULL || s->created_us < e->original->created_us)
                e->original = s;
        }
    }
    hilo_broadcast_free(&b, n);

    memset(&b, 0, sizeof(b));
    b.sql = tomb_sql;
    hilo_broadcast(st->peers, n, &b, hilo_claim_timeout_ms);
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

/* Step 3b: drops what was dropped elsewhere, creates what is missing. */
void hilo_agent_carry_sequences(PassState *st, PassResult *res)
{
    static const char *drop_sql = "SELECT hilo._drop_carried($1, $2::timestamptz)";
    static const char *carry_sql =
        "SELECT hilo._carry_sequence($1, $2::bigint, $3::bigint, $4::bigint, $5::int, $6::int,"
        "                            $7, $8::timestamptz, $9::int, $10)";
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
        memset(&b, 0, sizeof(b));
        if (e->dropped) {
            const char *values[2] = {e->name, e->tombstone_text};
            b.sql = drop_sql;
            b.nparams = 2;
            b.values = values;
            b.skip = skip;
            hilo_broadcast(st->peers, n, &b, hilo_claim_timeout_ms);
        } else {
            const NodeSequence *o = e->original;
            char start[32], max[32], wsize[32], min_open[16], block[16], bits[16];
            snprintf(start, sizeof(start), INT64_FORMAT, o->start_value);
            snprintf(max, sizeof(max), INT64_FORMAT, o->max_value);
            snprintf(wsize, sizeof(wsize), INT64_FORMAT, o->window_size);
            snprintf(min_open, sizeof(min_open), "%d", o->min_open_windows);
            snprintf(block, sizeof(block), "%d", o->block_size);
            snprintf(bits, sizeof(bits), "%d", o->node_bits);
            const char *values[10] = {o->name, start,    max,           wsize, min_open,
                                      block,   o->owner, o->created_at, bits,  o->ordering};
            b.sql = carry_sql;
            b.nparams = 10;
            b.values = values;
            b.skip = skip;
            hilo_broadcast(st->peers, n, &b, hilo_claim_timeout_ms);
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
            const char *refused = cell(b.results[i], 0, 0);
            if (refused != NULL) {
                hilo_agent_note(res, "sequence \"%s\" not created on node \"%s\": %s", e->name,
                                st->cfg->nodes[i].name, refused);
                continue;
            }
            e->carried_to[i] = true;
            res->sequences_carried++;
        }
        hilo_broadcast_free(&b, n);
    }
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
