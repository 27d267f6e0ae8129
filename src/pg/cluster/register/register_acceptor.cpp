/*
 * cluster/register/register_acceptor.cpp: the quorum register's acceptor on this node, and
 * the installation of windows claimed through it.
 *
 * Proposers on any node call hilo._register_handle() over libpq with a batch
 * of requests. It applies the core's acceptor rule (hilo_register_handle) to
 * one hilo.register row per request, writes the rows and the node's write
 * count, and its statement commits with synchronous_commit = on before the
 * proposer sees the answer (rule R1 of docs/quorum-register.md). It refuses
 * to run inside a transaction block, where the answer would leave before
 * the commit.
 *
 * All requests of a batch are answered in one transaction: one WAL flush for
 * every sequence the agent claims for at once.
 *
 * One of three replicated registers, each with its own acceptor and table:
 * this one (hilo.register: per name a value that only rises, set if at
 * most), the lease cells (order/lease/lease_acceptor.cpp) and the
 * configuration votes (membership/config_votes.cpp). What they share is
 * written once: the node's write count and fence (hilo_count_acceptor_writes),
 * the lock order of a name's registers (hilo_lock_name_registers), and the
 * pre-sync's dump and raise (membership/install.cpp, dump_highest and
 * raise_on_majority, with a merge rule per table). Why the rules stay apart
 * is written at the top of lease_acceptor.cpp and config_votes.cpp.
 */
#include "register.h"

extern "C" {
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/tuplestore.h"
}

/* Locks this node's stamp row (creating it) for the rest of the transaction. */
static HiloNodeStamp lock_stamp(void)
{
    static const char *sql = "SELECT nonce, write_count FROM hilo.local_node FOR UPDATE";
    (void)hilo_local_nonce(true);
    hilo_spi_exec(sql, 0, NULL, NULL, NULL, false, 1);
    HiloNodeStamp stamp;
    stamp.incarnation = (uint64)hilo_incarnation_for_nonce(hilo_spi_int64(0, 1));
    stamp.write_count = (uint64)hilo_spi_int64(0, 2);
    return stamp;
}

static void save_stamp(const HiloNodeStamp *stamp)
{
    static const char *sql = "UPDATE hilo.local_node SET write_count = $1";
    hilo_spi_exec1(sql, INT8OID, Int64GetDatum((int64)stamp->write_count), false, 0);
}

int64 hilo_count_acceptor_writes(int64 n)
{
    HiloNodeStamp stamp = lock_stamp();
    if (n > 0) {
        stamp.write_count += (uint64)n;
        save_stamp(&stamp);
    }
    return (int64)stamp.write_count;
}

int64 hilo_local_write_count(void)
{
    static const char *sql = "SELECT write_count FROM hilo.local_node";
    hilo_spi_exec(sql, 0, NULL, NULL, NULL, false, 1);
    return SPI_processed == 1 ? hilo_spi_int64(0, 1) : 0;
}

/* Locks and reads one key's cell; a key never written starts at 0. */
static HiloRegisterCell lock_cell(const char *key)
{
    static const char *sql =
        "SELECT value, proposer_id, claim_number, attempt FROM hilo.register"
        " WHERE key = $1 FOR UPDATE";
    hilo_lock_name_registers(key);
    hilo_spi_exec1(sql, TEXTOID, CStringGetTextDatum(key), false, 1);
    HiloRegisterCell cell;
    memset(&cell, 0, sizeof(cell));
    cell.value = HILO_MIN_ID - 1;
    if (SPI_processed == 1) {
        cell.value = hilo_spi_int64(0, 1);
        cell.last_accepted.proposer_id = (uint64)hilo_spi_int64(0, 2);
        cell.last_accepted.claim_number = (uint64)hilo_spi_int64(0, 3);
        cell.last_accepted.attempt = (uint32)hilo_spi_int32(0, 4);
    }
    cell.value = Max(cell.value, hilo_lease_bound_of(key));
    return cell;
}

/*
 * One name, two registers: a sequence made again under a dropped one's
 * name with another ordering claims through the other register ('none'
 * and 'quorum' through hilo.register, 'cluster' through
 * hilo.lease_cells), and nodes the drop has not reached yet go on serving
 * the dropped one through its own register meanwhile. Every ID either
 * hands out must lie above every ID the other handed out, so each
 * acceptor answers with the higher of the name's two values, under one
 * lock per name (hilo_lock_name_registers: an acceptor of either register
 * sees what the other one wrote before it, or the other sees its write):
 *  - a claim through hilo.register sets its value only where the lease
 *    bound is at most what it read ("set if at most"), so it lies above
 *    every lease block recorded there before;
 *  - a lease grant's reply reports the register's value (and the bound the
 *    cell had before the grant): a holder learns of a claim that an
 *    acceptor of its renewal's majority recorded first, and serves above
 *    it (core/lease.hpp, P2).
 * Any claim's majority and any renewal's majority share an acceptor, where
 * one of the two came first.
 */
int64 hilo_register_value_of(const char *key)
{
    static const char *sql = "SELECT value FROM hilo.register WHERE key = $1";
    hilo_spi_exec1(sql, TEXTOID, CStringGetTextDatum(key), false, 1);
    return SPI_processed == 1 ? hilo_spi_int64(0, 1) : HILO_MIN_ID - 1;
}

static uint64 name_lock_key(const char *name)
{
    return hash_bytes_extended((const unsigned char *)name, strlen(name), 0x68696c6f);
}

static void lock_name_key(uint64 key)
{
    LOCKTAG tag;
    SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32)(key >> 32), (uint32)key,
                         HILO_LOCKTAG_NAME_REGISTERS);
    (void)LockAcquire(&tag, ExclusiveLock, false, false);
}

void hilo_lock_name_registers(const char *name)
{
    lock_name_key(name_lock_key(name));
}

static int compare_keys(const void *a, const void *b)
{
    uint64 x = *(const uint64 *)a;
    uint64 y = *(const uint64 *)b;
    return x < y ? -1 : (x > y ? 1 : 0);
}

/*
 * Sorted by the lock's key, not by the name: two names whose hashes agree
 * share one lock, and a batch that met it again out of that order could
 * close a cycle. A lock already held is taken again at no wait, so
 * lock_cell()'s own call later changes nothing.
 */
void hilo_lock_names_in_order(const char *const *names, int n)
{
    uint64 *keys = (uint64 *)palloc(sizeof(uint64) * Max(n, 1));
    for (int i = 0; i < n; i++)
        keys[i] = name_lock_key(names[i]);
    qsort(keys, (size_t)n, sizeof(uint64), compare_keys);
    for (int i = 0; i < n; i++)
        if (i == 0 || keys[i] != keys[i - 1])
            lock_name_key(keys[i]);
    pfree(keys);
}

int64 hilo_lease_bound_of(const char *seq)
{
    static const char *sql = "SELECT bound FROM hilo.lease_cells WHERE seq = $1";
    if (!hilo_catalog_has_table("lease_cells")) /* a catalog before 0.5.0 */
        return HILO_MIN_ID - 1;
    hilo_spi_exec1(sql, TEXTOID, CStringGetTextDatum(seq), false, 1);
    return SPI_processed == 1 ? hilo_spi_int64(0, 1) : HILO_MIN_ID - 1;
}

static void save_cell(const char *key, const HiloRegisterCell *cell)
{
    static const char *sql =
        "INSERT INTO hilo.register (key, value, proposer_id, claim_number, attempt)"
        " VALUES ($1, $2, $3, $4, $5)"
        " ON CONFLICT (key) DO UPDATE SET value = excluded.value,"
        "   proposer_id = excluded.proposer_id, claim_number = excluded.claim_number,"
        "   attempt = excluded.attempt";
    Oid types[5] = {TEXTOID, INT8OID, INT8OID, INT8OID, INT4OID};
    Datum values[5] = {CStringGetTextDatum(key), Int64GetDatum(cell->value),
                       Int64GetDatum((int64)cell->last_accepted.proposer_id),
                       Int64GetDatum((int64)cell->last_accepted.claim_number),
                       Int32GetDatum((int32)cell->last_accepted.attempt)};
    hilo_spi_exec(sql, 5, types, values, NULL, false, 0);
}

/* Applies one request; returns the reply. The stamp row must be locked. */
static HiloRegisterReply apply_request(uint32 self, const char *key, HiloNodeStamp *stamp,
                                       const HiloRegisterRequest *request)
{
    HiloRegisterCell cell = lock_cell(key);
    HiloRegisterReply reply;
    if (hilo_register_handle(self, &cell, stamp, request, &reply))
        save_cell(key, &cell);
    return reply;
}

int64 hilo_register_apply_raises(const char *const *keys, const int64 *values, int n)
{
    hilo_lock_names_in_order(keys, n);
    HiloNodeStamp stamp = lock_stamp();
    uint64 before = stamp.write_count;
    for (int i = 0; i < n; i++) {
        HiloRegisterRequest request;
        memset(&request, 0, sizeof(request));
        request.kind = HILO_REQUEST_RAISE_TO;
        request.new_value = values[i];
        (void)apply_request(0, keys[i], &stamp, &request);
    }
    if (stamp.write_count != before)
        save_stamp(&stamp);
    return (int64)(stamp.write_count - before);
}

/* ---- Array arguments ---- */

typedef struct ArrayArg {
    Datum *items;
    int count;
} ArrayArg;

static ArrayArg array_arg(FunctionCallInfo fcinfo, int argno, const char *name)
{
    ArrayArg out;
    out.items = hilo_array_arg(fcinfo, argno, name, &out.count);
    return out;
}

static void require_same_length(const ArrayArg *arrays, int narrays)
{
    for (int i = 1; i < narrays; i++)
        if (arrays[i].count != arrays[0].count)
            ereport(ERROR, (errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
                            errmsg("the request arrays must all have the same length")));
}

/* ---- hilo._register_handle() ---- */

/*
 * Refuses a request made under another configuration than the one this node
 * installed: after a membership change, claims under the old configuration
 * can no longer gather a majority (docs/multi-node.md, "Membership").
 */
static uint32 check_membership(int64 request_epoch, int64 incarnation)
{
    HiloConfig *cfg = (HiloConfig *)palloc(sizeof(HiloConfig));
    static const char *sql = "SELECT epoch, config::text FROM hilo.cluster FOR SHARE";
    hilo_spi_exec(sql, 0, NULL, NULL, NULL, false, 1);
    if (SPI_processed == 0 || hilo_spi_isnull(0, 2))
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("this node is not in a hilo cluster"),
                        errhint("Add it with hilo_add_node() on a member.")));
    char *json = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
    hilo_parse_config(json, incarnation, cfg);
    if (cfg->epoch != request_epoch)
        ereport(ERROR,
                (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                 errmsg("hilo configuration epoch mismatch: the request is for epoch " INT64_FORMAT
                        ", this node has installed epoch " INT64_FORMAT,
                        request_epoch, cfg->epoch),
                 errhint(cfg->epoch > request_epoch
                             ? "The requesting node has not caught up yet; its agent will."
                             : "This node has not caught up yet; the agent will carry the newer "
                               "configuration here.")));
    return hilo_member_self_id(cfg);
}

HILO_SQL_FUNCTION(hilo_register_handle_sql)
{
    static const char *const arg_names[] = {"epoch",  "keys",     "kinds",    "proposers",
                                            "claims", "attempts", "expected", "new_values"};
    const char *fn = "hilo._register_handle()";
    hilo_entry(fcinfo, fn, arg_names, 8, HILO_WRITES);
    hilo_require_own_durable_transaction(fn);

    int64 epoch = PG_GETARG_INT64(0);
    ArrayArg a[7];
    for (int i = 0; i < 7; i++)
        a[i] = array_arg(fcinfo, i + 1, arg_names[i + 1]);
    require_same_length(a, 7);
    InitMaterializedSRF(fcinfo, 0);

    const char **keys = (const char **)palloc(sizeof(char *) * Max(a[0].count, 1));
    for (int i = 0; i < a[0].count; i++)
        keys[i] = TextDatumGetCString(a[0].items[i]);

    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    /* The batch's names first, then the stamp row: the lease acceptor
     * takes its names first as well, and the stamp row last. */
    hilo_lock_names_in_order(keys, a[0].count);
    HiloNodeStamp stamp = lock_stamp();
    uint64 before = stamp.write_count;
    uint32 self = check_membership(epoch, (int64)stamp.incarnation);
    for (int i = 0; i < a[0].count; i++) {
        const char *key = keys[i];
        HiloRegisterRequest request;
        memset(&request, 0, sizeof(request));
        request.to = self;
        request.kind = (HiloRegisterRequestKind)DatumGetInt32(a[1].items[i]);
        request.tag.proposer_id = (uint64)DatumGetInt64(a[2].items[i]);
        request.tag.claim_number = (uint64)DatumGetInt64(a[3].items[i]);
        request.tag.attempt = (uint32)DatumGetInt32(a[4].items[i]);
        request.expected_max = DatumGetInt64(a[5].items[i]);
        request.new_value = DatumGetInt64(a[6].items[i]);
        HiloRegisterReply reply = apply_request(self, key, &stamp, &request);

        Datum values[4] = {Int32GetDatum((int32)reply.status), Int64GetDatum(reply.value),
                           Int64GetDatum((int64)reply.stamp.incarnation),
                           Int64GetDatum((int64)reply.stamp.write_count)};
        bool nulls[4] = {false, false, false, false};
        hilo_put_row(fcinfo, values, nulls);
    }
    if (stamp.write_count != before)
        save_stamp(&stamp);
    hilo_catalog_end(&access);
    return (Datum)0;
}

/* ---- hilo._register_raise(): initialising a node before a membership change ---- */

HILO_SQL_FUNCTION(hilo_register_raise)
{
    static const char *const arg_names[] = {"keys", "new_values"};
    const char *fn = "hilo._register_raise()";
    hilo_entry(fcinfo, fn, arg_names, 2, HILO_WRITES);
    hilo_require_own_durable_transaction(fn);
    ArrayArg a[2] = {array_arg(fcinfo, 0, "keys"), array_arg(fcinfo, 1, "new_values")};
    require_same_length(a, 2);

    const char **keys = (const char **)palloc(sizeof(char *) * Max(a[0].count, 1));
    int64 *values = (int64 *)palloc(sizeof(int64) * Max(a[0].count, 1));
    for (int i = 0; i < a[0].count; i++) {
        keys[i] = TextDatumGetCString(a[0].items[i]);
        values[i] = DatumGetInt64(a[1].items[i]);
    }
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    int64 changed = hilo_register_apply_raises(keys, values, a[0].count);
    hilo_catalog_end(&access);
    PG_RETURN_INT64(changed);
}

/* ---- hilo._install_windows() ---- */

/*
 * Adds windows that the agent claimed for this node. A window that overlaps
 * one this node already has would mean two owners of the same IDs: that is
 * a bug somewhere, so it fails the whole call loudly instead of being
 * skipped. Windows outside the local sequence's [start_value, max_value]
 * (settings that differ between nodes) or of a sequence this node lacks are
 * left out, and not counted.
 */
HILO_SQL_FUNCTION(hilo_install_windows)
{
    static const char *const arg_names[] = {"names", "firsts", "lasts"};
    const char *fn = "hilo._install_windows()";
    hilo_entry(fcinfo, fn, arg_names, 3, HILO_WRITES);
    ArrayArg a[3] = {array_arg(fcinfo, 0, "names"), array_arg(fcinfo, 1, "firsts"),
                     array_arg(fcinfo, 2, "lasts")};
    require_same_length(a, 3);

    /* FOR KEY SHARE: a raise (hilo._raise_node()) locks the row FOR UPDATE
     * before it moves start_value up and trims the windows it sees, so a
     * window is either seen there or checked here against the new start. */
    static const char *seq_sql =
        "SELECT seq_id, start_value, max_value FROM hilo.sequences WHERE name = $1"
        " FOR KEY SHARE";
    static const char *overlap_sql =
        "SELECT window_start_value, window_end_value FROM hilo.windows"
        " WHERE seq_id = $1 AND window_start_value <= $3 AND window_end_value > $2 LIMIT 1";
    static const char *insert_sql =
        "INSERT INTO hilo.windows (seq_id, window_start_value, window_end_value, next_hi_value)"
        " VALUES ($1, $2, $3, $2)";
    Oid types[3] = {INT4OID, INT8OID, INT8OID};

    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    int32 installed = 0;
    for (int i = 0; i < a[0].count; i++) {
        char *name = TextDatumGetCString(a[0].items[i]);
        int64 first = DatumGetInt64(a[1].items[i]);
        int64 last = DatumGetInt64(a[2].items[i]);
        hilo_spi_exec1(seq_sql, TEXTOID, CStringGetTextDatum(name), false, 1);
        if (SPI_processed == 0)
            continue;
        int32 seq_id = hilo_spi_int32(0, 1);
        if (first > last || first < hilo_spi_int64(0, 2) || last > hilo_spi_int64(0, 3))
            continue;
        Datum args[3] = {Int32GetDatum(seq_id), Int64GetDatum(first), Int64GetDatum(last)};
        hilo_spi_exec(overlap_sql, 3, types, args, NULL, false, 1);
        /* The very same window: a repeated call after a lost answer. */
        if (SPI_processed > 0 && hilo_spi_int64(0, 1) == first &&
            hilo_spi_int64(0, 2) == last + 1) {
            installed++;
            continue;
        }
        if (SPI_processed > 0)
            ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR),
                            errmsg("window [" INT64_FORMAT "," INT64_FORMAT
                                   "] of hilo sequence \"%s\" overlaps window [" INT64_FORMAT
                                   "," INT64_FORMAT ") on this node",
                                   first, last, name, hilo_spi_int64(0, 1), hilo_spi_int64(0, 2)),
                            errdetail("Two nodes would own the same IDs; nothing was installed."),
                            errhint("This is a bug in hilo; please report it.")));
        Datum insert_args[3] = {Int32GetDatum(seq_id), Int64GetDatum(first),
                                Int64GetDatum(last + 1)};
        hilo_spi_exec(insert_sql, 3, types, insert_args, NULL, false, 0);
        installed++;
    }
    hilo_catalog_end(&access);
    PG_RETURN_INT32(installed);
}

HILO_SQL_FUNCTION(hilo_register_dump)
{
    hilo_entry(fcinfo, "hilo._register_dump()", NULL, 0, HILO_READS);
    InitMaterializedSRF(fcinfo, 0);
    HiloCatalogAccess access;
    hilo_catalog_begin(&access);
    hilo_require_listed_member("hilo._register_dump()");
    static const char *sql = "SELECT key, value FROM hilo.register";
    hilo_spi_exec(sql, 0, NULL, NULL, NULL, true, 0);
    for (uint64 i = 0; i < SPI_processed; i++) {
        char *key = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
        Datum values[2] = {CStringGetTextDatum(key), Int64GetDatum(hilo_spi_int64(i, 2))};
        bool nulls[2] = {false, false};
        hilo_put_row(fcinfo, values, nulls);
    }
    hilo_catalog_end(&access);
    return (Datum)0;
}
