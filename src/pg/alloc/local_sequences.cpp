/*
 * alloc/local_sequences.cpp: IDs of a sequence created in the caller's own,
 * still uncommitted transaction (one-transaction migrations).
 *
 *   BEGIN; SELECT hilo_create('m');
 *   CREATE TABLE t (id bigint PRIMARY KEY DEFAULT hilo_nextval('m'), v text);
 *   INSERT INTO t (v) VALUES ('seed row'); COMMIT;
 *
 * The allocator cannot see such a sequence, and nobody else can either: it
 * exists only if this transaction commits. So its IDs are reserved here, in
 * this backend, from a counter kept in backend memory (IDs start_value,
 * start_value + 1, ...), and recorded in the catalog inside the same
 * transaction: one used-up window [first, next) and the high-water mark.
 * The sequence and its reservations commit or vanish together.
 *
 * - The counter lives in backend memory, not in the catalog, so that a
 *   ROLLBACK TO SAVEPOINT that keeps the sequence but undoes a catalog
 *   write cannot make an ID handed out before it come out again. The
 *   catalog record is written (again, if a savepoint rollback undid it)
 *   before every other look at the sequence in this transaction (push,
 *   alter, drop) and at PRE_COMMIT / PRE_PREPARE.
 * - Nothing of it enters shared memory: no pool, no buffer. A rollback
 *   (whole, or of the savepoint that created the sequence) leaves nothing
 *   behind but this backend's list, which it cleans.
 * - The commit is forced synchronous (ForceSyncCommit, as CREATE DATABASE
 *   does), and synchronous_commit is raised to at least 'on' for it, so a
 *   crash (or a failover to a synchronous standby) can never lose a commit
 *   whose IDs the client has seen, whatever the session's setting.
 * - PREPARE TRANSACTION is allowed: the record is written at PRE_PREPARE,
 *   the prepare record is always flushed, and COMMIT PREPARED is always
 *   flushed too. Sequence and IDs commit or roll back together with it.
 * - In a hilo cluster, windows come from the quorum register, which a local
 *   counter would bypass: there it stays refused (55000).
 */
#include "internal.h"

extern "C" {
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
}

typedef struct LocalSequence {
    int32 seq_id;
    Oid catalog;            /* hilo.sequences of the catalog it is in (DROP and
                             * CREATE EXTENSION in one transaction make another) */
    SubTransactionId subid; /* the (sub)transaction whose fate it shares */
    bool used;              /* some ID was handed out */
    int64 first;            /* the first ID handed out */
    int64 next;             /* the first ID not handed out yet */
    int64 recorded_next;    /* what the catalog records; -1: unknown */
} LocalSequence;

/* The sequences this transaction created, in TopMemoryContext. */
static LocalSequence *locals = NULL;
static int nlocals = 0;
static int locals_capacity = 0;
static bool callbacks_registered = false;

static LocalSequence *find_local(int32 seq_id)
{
    Oid catalog = nlocals > 0 ? hilo_catalog_relid_if_present() : InvalidOid;
    for (int i = 0; i < nlocals; i++)
        if (locals[i].seq_id == seq_id && locals[i].catalog == catalog)
            return &locals[i];
    return NULL;
}

/* Writes the catalog record of `l`: one used-up window and the high-water
 * mark. SPI connected, as the catalog owner. Skipped if the sequence was
 * dropped meanwhile. */
static void record_local(LocalSequence *l)
{
    static const char *window_sql =
        "INSERT INTO hilo.windows (seq_id, window_start_value, window_end_value, next_hi_value)"
        " SELECT $1, $2, $3, $3 WHERE EXISTS (SELECT 1 FROM hilo.sequences WHERE seq_id = $1)"
        " ON CONFLICT (seq_id, window_start_value) DO UPDATE"
        " SET window_end_value = greatest(hilo.windows.window_end_value, "
        "excluded.window_end_value),"
        "     next_hi_value = greatest(hilo.windows.next_hi_value, excluded.next_hi_value)";
    static const char *mark_sql =
        "UPDATE hilo.sequences SET high_water_mark = greatest(high_water_mark, $2)"
        " WHERE seq_id = $1";
    if (!l->used || l->recorded_next == l->next)
        return;
    Oid types3[3] = {INT4OID, INT8OID, INT8OID};
    Datum window[3] = {Int32GetDatum(l->seq_id), Int64GetDatum(l->first), Int64GetDatum(l->next)};
    hilo_spi_exec(window_sql, 3, types3, window, NULL, false, 0);
    Datum mark[2] = {Int32GetDatum(l->seq_id), Int64GetDatum(l->next - 1)};
    hilo_spi_exec(mark_sql, 2, types3, mark, NULL, false, 0);
    l->recorded_next = l->next;
}

static void xact_callback(XactEvent event, void *arg)
{
    HILO_FORGET_UNWOUND_FRAMES();
    switch (event) {
        case XACT_EVENT_PRE_COMMIT:
        case XACT_EVENT_PRE_PREPARE: {
            /* Only sequences of the catalog there is now: one dropped in
             * this transaction (DROP EXTENSION) took its sequences along. */
            Oid catalog = nlocals > 0 ? hilo_catalog_relid_if_present() : InvalidOid;
            bool any = false;
            for (int i = 0; i < nlocals; i++)
                any |= locals[i].used && locals[i].recorded_next != locals[i].next &&
                       OidIsValid(catalog) && locals[i].catalog == catalog;
            if (any) {
                PushActiveSnapshot(GetTransactionSnapshot());
                HiloCatalogAccess access;
                hilo_catalog_begin(&access);
                for (int i = 0; i < nlocals; i++)
                    if (locals[i].catalog == catalog)
                        record_local(&locals[i]);
                hilo_catalog_end(&access);
                PopActiveSnapshot();
            }
            bool used = false;
            for (int i = 0; i < nlocals; i++)
                used |= locals[i].used;
            if (used) {
                ForceSyncCommit();
                /* A synchronous standby must have it too before COMMIT returns;
                 * reverted at the end of the transaction. */
                if (synchronous_commit < SYNCHRONOUS_COMMIT_REMOTE_FLUSH)
                    (void)set_config_option("synchronous_commit", "on", PGC_USERSET, PGC_S_SESSION,
                                            GUC_ACTION_LOCAL, true, 0, false);
            }
            break;
        }
        default:
            if (hilo_xact_is_over(event))
                nlocals = 0;
            break;
    }
}

static void subxact_callback(SubXactEvent event, SubTransactionId my_subid,
                             SubTransactionId parent_subid, void *arg)
{
    HILO_FORGET_UNWOUND_FRAMES();
    if (event == SUBXACT_EVENT_COMMIT_SUB) {
        for (int i = 0; i < nlocals; i++)
            if (locals[i].subid == my_subid)
                locals[i].subid = parent_subid;
    } else if (event == SUBXACT_EVENT_ABORT_SUB) {
        /* Created in it: gone with it. Others stay, with every ID they handed
         * out, but the catalog record may have been undone: write it again. */
        int kept = 0;
        for (int i = 0; i < nlocals; i++) {
            if (locals[i].subid == my_subid)
                continue;
            locals[i].recorded_next = -1;
            locals[kept++] = locals[i];
        }
        nlocals = kept;
    }
}

void hilo_local_note_created(int32 seq_id)
{
    if (!callbacks_registered) {
        RegisterXactCallback(xact_callback, NULL);
        RegisterSubXactCallback(subxact_callback, NULL);
        callbacks_registered = true;
    }
    if (find_local(seq_id) != NULL)
        return;
    if (nlocals == locals_capacity) {
        int capacity = Max(16, locals_capacity * 2);
        locals =
            (LocalSequence *)(locals == NULL ? MemoryContextAlloc(TopMemoryContext,
                                                                  sizeof(LocalSequence) * capacity)
                                             : repalloc(locals, sizeof(LocalSequence) * capacity));
        locals_capacity = capacity;
    }
    LocalSequence *l = &locals[nlocals++];
    memset(l, 0, sizeof(*l));
    l->seq_id = seq_id;
    l->catalog = hilo_catalog_relid_if_present();
    l->subid = GetCurrentSubTransactionId();
    l->recorded_next = -1;
}

bool hilo_local_created_here(int32 seq_id)
{
    return nlocals > 0 && find_local(seq_id) != NULL;
}

bool hilo_local_any(void)
{
    return nlocals > 0;
}

void hilo_local_record(HiloSequence *seq)
{
    LocalSequence *l = find_local(seq->seq_id);
    if (l == NULL)
        return;
    record_local(l);
    if (l->used)
        seq->high_water_mark = Max(seq->high_water_mark, l->next - 1);
}

HiloRange *hilo_local_take(const HiloSequence *seq, int64 n, bool partial, uint32 *nranges)
{
    LocalSequence *l = find_local(seq->seq_id);
    if (l == NULL)
        elog(ERROR, "hilo: sequence %d is not one of this transaction's", seq->seq_id);

    int64 floor, top;
    hilo_sequence_bounds_of(seq, &floor, &top);
    int64 next = Max(Max(seq->start_value, seq->high_water_mark + 1), floor + 1);
    if (l->used)
        next = Max(next, l->next);
    uint64 left = next > top ? 0 : (uint64)(top - next) + 1;
    uint64 want = (uint64)n;
    if (left < want) {
        if (!partial || left == 0)
            hilo_raise_short(seq->name, left, want, seq->max_value, top);
        want = left;
    }
    HiloRange *range = (HiloRange *)palloc(sizeof(HiloRange));
    range->first = next;
    range->last = next + (int64)(want - 1);
    if (!l->used) {
        l->used = true;
        l->first = next;
    }
    l->next = range->last + 1; /* at most max_value + 1 <= 2^63 - 1 */
    ForceSyncCommit();
    *nranges = 1;
    return range;
}
