/*
 * cluster/net/peers.cpp: asynchronous libpq connections to the other nodes.
 *
 * A backend must never block inside libpq: it would not serve interrupts
 * (cancel, termination, postmaster death), and a node that hangs would hang
 * it. So every connection is non-blocking, and one loop waits on all their
 * sockets and the process latch at once (the pattern of
 * libpq/libpq-be-fe-helpers.h, generalised to many connections in parallel,
 * as the quorum register needs). Each connection also counts against fd.c's
 * limit on external file descriptors.
 *
 * A result is delivered only once PQgetResult() has returned NULL, that is
 * after the node's ReadyForQuery: with the extended protocol a statement's
 * CommandComplete comes before its implicit transaction commits, so an
 * acceptor's answer is trusted only after its commit.
 *
 * Why one file of about 540 lines: a connection's states (connecting, its
 * setup query, idle, busy, failed) and the one loop that drives them all
 * change each other's fields; apart, the loop would reach into the state
 * machine from outside. hilo_sleep_ms, a wait that serves interrupts as the
 * loop does, is the loop with no connection.
 */
#include "net.h"

extern "C" {
#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/fd.h"
#include "storage/latch.h"
#include "utils/memutils.h"
}

/* Every run gets a number; a result of an older run is discarded. */
static uint64 current_run_id = 0;

/*
 * Checks that the node runs hilo with multi-node support, pins search_path,
 * makes timestamps travel as exact ISO text in UTC, and bounds how long a
 * statement of this connection waits for a lock ($1 ms).
 *
 * That bound is half hilo.claim_timeout: at most as long as its callers
 * wait for an answer (a connection set up before a reload changed it is
 * closed when a run finds it idle, and set up again with the new one). A
 * statement this node sends waits for a locked catalog there (LOCK TABLE,
 * VACUUM FULL, ALTER EXTENSION hilo UPDATE) at most that long, then fails
 * with 55P03, which its caller reads. Without it the caller gave up, closed the connection
 * and connected again at its next attempt, while the statement went on
 * waiting, and did its write once the lock was released: each agent pass
 * left two more backends waiting on a locked node, and a bootstrap given
 * up made the node a cluster after all (TAP 202), until max_connections was
 * full. Functions that must answer sooner set a shorter one for their
 * transaction (the lease acceptor, hilo_answer_lock_timeout).
 *
 * jit is off: the statements and the SQL functions run there read a
 * handful of rows, never worth compiling (hilo_catalog_begin turns it off
 * for hilo's C functions; the SQL ones run outside it). Transactions are
 * read committed whatever the node's default: an acceptor locks the rows
 * it changes, and under repeatable read or serializable a row another
 * acceptor call changed since the statement began failed it (40001).
 */
static const char *setup_sql =
    "SELECT (SELECT e.extversion FROM pg_catalog.pg_extension e"
    "         WHERE e.extname OPERATOR(pg_catalog.=) 'hilo'),"
    " pg_catalog.to_regproc('hilo._register_handle') IS NOT NULL,"
    " pg_catalog.pg_is_in_recovery(), pg_catalog.current_database(),"
    " pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', false),"
    " pg_catalog.set_config('TimeZone', 'UTC', false),"
    " pg_catalog.set_config('DateStyle', 'ISO', false),"
    " pg_catalog.set_config('lock_timeout', $1, false),"
    " pg_catalog.set_config('jit', 'off', false),"
    " pg_catalog.set_config('default_transaction_isolation', 'read committed', false)";

static void set_error(HiloPeer *peer, const char *fmt, ...) pg_attribute_printf(2, 3);
static void set_error(HiloPeer *peer, const char *fmt, ...)
{
    peer->not_hilo = false;
    peer->sqlstate[0] = '\0';
    va_list args;
    va_start(args, fmt);
    vsnprintf(peer->error, sizeof(peer->error), fmt, args);
    va_end(args);
    /* libpq messages span lines with tabs; one line reads better in a reason. */
    char *out = peer->error;
    bool space = false;
    for (const char *c = peer->error; *c; c++) {
        if (*c == '\n' || *c == '\t' || *c == ' ') {
            space = true;
            continue;
        }
        if (space && out != peer->error)
            *out++ = ' ';
        space = false;
        *out++ = *c;
    }
    *out = '\0';
}

/* The lock_timeout of a connection set up now. */
static int peer_lock_timeout_ms(void)
{
    return Max(hilo_claim_timeout_ms / 2, 1);
}

void hilo_peer_close(HiloPeer *peer)
{
    if (peer->result != NULL) {
        PQclear(peer->result);
        peer->result = NULL;
    }
    if (peer->conn != NULL) {
        PQfinish(peer->conn);
        peer->conn = NULL;
        ReleaseExternalFD();
    }
    peer->state = HILO_PEER_CLOSED;
    peer->want_write = false;
    peer->prepared = false;
}

static void fail_peer(HiloPeer *peer)
{
    hilo_peer_close(peer);
    peer->state = HILO_PEER_FAILED;
    peer->failure_pending = true;
}

/* What the node connected to shows as the connection's application_name:
 * the peer's own, else the type of the hilo worker that connects ("hilo
 * agent", "hilo allocator", ...), else "hilo" (a backend). */
static const char *application_name_of(const HiloPeer *peer)
{
    if (peer->application_name != NULL)
        return peer->application_name;
    if (MyBgworkerEntry != NULL && strncmp(MyBgworkerEntry->bgw_type, "hilo", 4) == 0)
        return MyBgworkerEntry->bgw_type;
    return "hilo";
}

/* Starts connecting; on failure the peer is FAILED with the reason. */
static void start_connecting(HiloPeer *peer)
{
    if (!AcquireExternalFD()) {
        set_error(peer, "node \"%s\": too many open files on this server to connect", peer->name);
        fail_peer(peer);
        return;
    }
    const char *keywords[] = {"dbname", "fallback_application_name", NULL};
    const char *values[] = {peer->conninfo, application_name_of(peer), NULL};
    peer->conn = PQconnectStartParams(keywords, values, 1);
    peer->started_at = GetCurrentTimestamp();
    if (peer->conn == NULL) {
        ReleaseExternalFD();
        set_error(peer, "node \"%s\": could not connect: out of memory", peer->name);
        fail_peer(peer);
        return;
    }
    if (PQstatus(peer->conn) == CONNECTION_BAD) {
        set_error(peer, "node \"%s\": could not connect: %s", peer->name,
                  PQerrorMessage(peer->conn));
        fail_peer(peer);
        return;
    }
    peer->state = HILO_PEER_CONNECTING;
    peer->poll_status = PGRES_POLLING_WRITING;
}

/* Queues a query (or, with `prepared`, runs the statement named `sql`);
 * the peer must be IDLE (or SETUP for the setup query). */
static bool send_query(HiloPeer *peer, const char *sql, int nparams, const Oid *types,
                       const char *const *values, bool prepared = false)
{
    int sent = prepared ? PQsendQueryPrepared(peer->conn, sql, nparams, values, NULL, NULL, 0)
                        : PQsendQueryParams(peer->conn, sql, nparams, types, values, NULL, NULL, 0);
    if (!sent) {
        set_error(peer, "node \"%s\": could not send a query: %s", peer->name,
                  PQerrorMessage(peer->conn));
        fail_peer(peer);
        return false;
    }
    int flushed = PQflush(peer->conn);
    if (flushed < 0) {
        set_error(peer, "node \"%s\": connection lost: %s", peer->name, PQerrorMessage(peer->conn));
        fail_peer(peer);
        return false;
    }
    peer->want_write = flushed == 1;
    peer->run_id = current_run_id;
    peer->started_at = GetCurrentTimestamp();
    return true;
}

bool hilo_peer_send(HiloPeer *peer, const char *sql, int nparams, const Oid *types,
                    const char *const *values)
{
    Assert(peer->state == HILO_PEER_IDLE);
    if (!send_query(peer, sql, nparams, types, values))
        return false;
    peer->state = HILO_PEER_BUSY;
    return true;
}

bool hilo_peer_send_prepared(HiloPeer *peer, const char *name, int nparams,
                             const char *const *values)
{
    Assert(peer->state == HILO_PEER_IDLE && peer->prepared);
    if (!send_query(peer, name, nparams, NULL, values, true))
        return false;
    peer->state = HILO_PEER_BUSY;
    return true;
}

/* Advances a connection attempt after its socket became ready. */
static void advance_connecting(HiloPeer *peer)
{
    peer->poll_status = PQconnectPoll(peer->conn);
    if (peer->poll_status == PGRES_POLLING_FAILED) {
        set_error(peer, "node \"%s\": could not connect: %s", peer->name,
                  PQerrorMessage(peer->conn));
        fail_peer(peer);
        return;
    }
    if (peer->poll_status != PGRES_POLLING_OK)
        return;
    if (PQsetnonblocking(peer->conn, 1) != 0) {
        set_error(peer, "node \"%s\": could not make the connection non-blocking", peer->name);
        fail_peer(peer);
        return;
    }
    peer->lock_timeout_ms = peer_lock_timeout_ms();
    char lock_timeout[16];
    snprintf(lock_timeout, sizeof(lock_timeout), "%d", peer->lock_timeout_ms);
    const char *values[1] = {lock_timeout};
    if (send_query(peer, setup_sql, 1, NULL, values))
        peer->state = HILO_PEER_SETUP;
}

/* Judges the setup query's answer: does the node run hilo, as a primary? */
static void finish_setup(HiloPeer *peer, PGresult *result)
{
    if (PQntuples(result) != 1 || PQnfields(result) != 10) {
        set_error(peer, "node \"%s\": unexpected answer while checking for hilo", peer->name);
        fail_peer(peer);
        return;
    }
    const char *db = PQgetvalue(result, 0, 3);
    if (PQgetisnull(result, 0, 0)) {
        set_error(peer,
                  "node \"%s\" does not run hilo: the extension is not installed in database "
                  "\"%s\" there (CREATE EXTENSION hilo)",
                  peer->name, db);
        peer->not_hilo = true;
        fail_peer(peer);
    } else if (strcmp(PQgetvalue(result, 0, 1), "t") != 0) {
        set_error(peer, "node \"%s\" runs hilo %s, which has no multi-node support", peer->name,
                  PQgetvalue(result, 0, 0));
        peer->not_hilo = true;
        fail_peer(peer);
    } else if (strcmp(PQgetvalue(result, 0, 2), "t") == 0) {
        set_error(peer, "node \"%s\" is a standby (in recovery); only primaries can be nodes",
                  peer->name);
        fail_peer(peer);
    } else {
        peer->state = HILO_PEER_IDLE;
    }
}

/* The text of a failed result, naming the node. */
static void error_from_result(HiloPeer *peer, PGresult *result)
{
    const char *message = PQresultErrorField(result, PG_DIAG_MESSAGE_PRIMARY);
    const char *sqlstate = PQresultErrorField(result, PG_DIAG_SQLSTATE);
    if (message == NULL)
        message = PQresultErrorMessage(result);
    if (sqlstate != NULL && (strcmp(sqlstate, "42883") == 0 || strcmp(sqlstate, "3F000") == 0 ||
                             strcmp(sqlstate, "42P01") == 0)) {
        set_error(peer, "node \"%s\" does not run a hilo with multi-node support: %s", peer->name,
                  message);
        peer->not_hilo = true;
    } else {
        set_error(peer, "node \"%s\": %s", peer->name, message);
    }
    if (sqlstate != NULL)
        strlcpy(peer->sqlstate, sqlstate, sizeof(peer->sqlstate));
}

/*
 * Reads what arrived for a SETUP or BUSY peer. Returns true when its query
 * ended; then *result holds the result (or NULL, with peer->error set).
 */
static bool collect_input(HiloPeer *peer, PGresult **result)
{
    *result = NULL;
    if (peer->want_write) {
        int flushed = PQflush(peer->conn);
        if (flushed < 0) {
            set_error(peer, "node \"%s\": connection lost: %s", peer->name,
                      PQerrorMessage(peer->conn));
            fail_peer(peer);
            return true;
        }
        peer->want_write = flushed == 1;
    }
    if (!PQconsumeInput(peer->conn)) {
        set_error(peer, "node \"%s\": connection lost: %s", peer->name, PQerrorMessage(peer->conn));
        fail_peer(peer);
        return true;
    }
    while (!PQisBusy(peer->conn)) {
        PGresult *r = PQgetResult(peer->conn);
        if (r == NULL) {
            /* ReadyForQuery: the statement's transaction has ended. */
            PGresult *last = peer->result;
            peer->result = NULL;
            if (last == NULL) {
                set_error(peer, "node \"%s\": no result", peer->name);
            } else if (PQresultStatus(last) != PGRES_TUPLES_OK &&
                       PQresultStatus(last) != PGRES_COMMAND_OK) {
                error_from_result(peer, last);
                PQclear(last);
                last = NULL;
            }
            *result = last;
            return true;
        }
        /* Keep the first error, else the last result (one statement: one result). */
        if (peer->result != NULL && PQresultStatus(peer->result) == PGRES_FATAL_ERROR) {
            PQclear(r);
        } else {
            if (peer->result != NULL)
                PQclear(peer->result);
            peer->result = r;
        }
        if (PQstatus(peer->conn) == CONNECTION_BAD) {
            set_error(peer, "node \"%s\": connection lost: %s", peer->name,
                      PQerrorMessage(peer->conn));
            fail_peer(peer);
            return true;
        }
    }
    return false;
}

/* Delivers a finished query to the caller (or drops an older run's, unless
 * the peer takes answers across runs). */
static void deliver(HiloPeer *peer, PGresult *result, const HiloPeerCallbacks *cb, void *arg)
{
    bool mine = peer->run_id == current_run_id || peer->answers_across_runs;
    bool lost = peer->state == HILO_PEER_FAILED;
    if (!lost)
        peer->state = HILO_PEER_IDLE;
    else if (mine)
        peer->failure_pending = false; /* done() tells the caller */
    if (!mine) {
        if (result != NULL)
            PQclear(result);
        return;
    }
    volatile bool kept = false;
    PG_TRY();
    {
        kept = cb->done(peer, result, result == NULL ? peer->error : NULL, arg);
    }
    PG_FINALLY();
    {
        if (result != NULL && !kept)
            PQclear(result);
    }
    PG_END_TRY();
}

/* Moves every peer as far as it can go without waiting. */
static void advance_all(HiloPeer **peers, int npeers, const HiloPeerCallbacks *cb, void *arg,
                        bool *ready_peers)
{
    for (int i = 0; i < npeers; i++) {
        HiloPeer *peer = peers[i];
        if (peer == NULL)
            continue;
        if (peer->state == HILO_PEER_CLOSED)
            start_connecting(peer);
        if (peer->state == HILO_PEER_SETUP || peer->state == HILO_PEER_BUSY) {
            bool was_setup = peer->state == HILO_PEER_SETUP;
            PGresult *result;
            if (collect_input(peer, &result)) {
                if (was_setup) {
                    if (result != NULL) {
                        finish_setup(peer, result);
                        PQclear(result);
                    } else {
                        fail_peer(peer);
                    }
                } else {
                    deliver(peer, result, cb, arg);
                }
            }
        }
        /* However it failed (here, or while connecting in wait_for_peers()), say so once. */
        if (peer->state == HILO_PEER_FAILED && peer->failure_pending) {
            peer->failure_pending = false;
            cb->unreachable(peer, peer->error, arg);
        }
        ready_peers[i] = peer->state == HILO_PEER_IDLE;
    }
}

/* Fails whatever is still pending at the deadline. */
static void time_out(HiloPeer **peers, int npeers, const HiloPeerCallbacks *cb, void *arg)
{
    for (int i = 0; i < npeers; i++) {
        HiloPeer *peer = peers[i];
        if (peer == NULL)
            continue;
        long secs;
        int usecs;
        TimestampDifference(peer->started_at, GetCurrentTimestamp(), &secs, &usecs);
        int ms = (int)(secs * 1000 + usecs / 1000);
        if (peer->state == HILO_PEER_CONNECTING || peer->state == HILO_PEER_SETUP) {
            set_error(peer, "node \"%s\": no connection after %d ms", peer->name, ms);
            fail_peer(peer);
            peer->failure_pending = false;
            cb->unreachable(peer, peer->error, arg);
        } else if (peer->state == HILO_PEER_BUSY &&
                   (peer->run_id == current_run_id || peer->answers_across_runs)) {
            set_error(peer, "node \"%s\": no answer after %d ms", peer->name, ms);
            fail_peer(peer);
            peer->failure_pending = false;
            (void)cb->done(peer, NULL, peer->error, arg);
        } else if (peer->state == HILO_PEER_BUSY) {
            /* Still answering an earlier run's request: this run never got to ask. */
            set_error(peer, "node \"%s\": still busy with an earlier request after %d ms",
                      peer->name, ms);
            cb->unreachable(peer, peer->error, arg);
        }
    }
}

/* Waits until a socket or the latch is ready, or the timeout passes; true if the latch was set. */
static bool wait_for_peers(HiloPeer **peers, int npeers, long timeout_ms)
{
    volatile bool latch_set = false;
    WaitEventSet *set = hilo_wait_set_for_call(npeers + 2);
    PG_TRY();
    {
        AddWaitEventToSet(set, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
        AddWaitEventToSet(set, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
        for (int i = 0; i < npeers; i++) {
            HiloPeer *peer = peers[i];
            if (peer == NULL || peer->conn == NULL || PQsocket(peer->conn) < 0)
                continue;
            uint32 events = 0;
            if (peer->state == HILO_PEER_CONNECTING)
                events = peer->poll_status == PGRES_POLLING_READING ? WL_SOCKET_READABLE
                                                                    : WL_SOCKET_WRITEABLE;
            else if (peer->state == HILO_PEER_SETUP || peer->state == HILO_PEER_BUSY)
                events = WL_SOCKET_READABLE | (peer->want_write ? WL_SOCKET_WRITEABLE : 0);
            if (events != 0)
                AddWaitEventToSet(set, events, PQsocket(peer->conn), NULL, peer);
        }
        WaitEvent occurred[HILO_MAX_NODES + 2];
        int n = WaitEventSetWait(set, timeout_ms, occurred, lengthof(occurred), PG_WAIT_EXTENSION);
        for (int i = 0; i < n; i++) {
            HiloPeer *peer = (HiloPeer *)occurred[i].user_data;
            if (occurred[i].events & WL_LATCH_SET) {
                ResetLatch(MyLatch);
                latch_set = true;
            } else if (peer != NULL && peer->state == HILO_PEER_CONNECTING) {
                advance_connecting(peer);
            }
        }
    }
    PG_FINALLY();
    {
        FreeWaitEventSet(set);
    }
    PG_END_TRY();
    return latch_set;
}

void hilo_peers_run(HiloPeer **peers, int npeers, const HiloPeerCallbacks *cb, void *arg,
                    TimestampTz deadline)
{
    bool *ready = (bool *)palloc0(sizeof(bool) * Max(npeers, 1));
    bool latch_pending = false;
    current_run_id++;
    for (int i = 0; i < npeers; i++) {
        HiloPeer *peer = peers[i];
        if (peer == NULL)
            continue;
        /* Every run tries again to reach the peers that failed before. */
        if (peer->state == HILO_PEER_FAILED)
            peer->state = HILO_PEER_CLOSED;
        peer->failure_pending = false;
        /*
         * A connection kept from an earlier run may have lost its server
         * (a restart): it then reads end-of-file. Reconnect rather than
         * fail the first request sent on it.
         */
        if (peer->state == HILO_PEER_IDLE &&
            (!PQconsumeInput(peer->conn) || PQstatus(peer->conn) != CONNECTION_OK))
            hilo_peer_close(peer);
        /* Nor one set up before hilo.claim_timeout changed (a reload): its
         * statements would wait for a lock as long as the old one said. */
        if (peer->state == HILO_PEER_IDLE && peer->lock_timeout_ms != peer_lock_timeout_ms())
            hilo_peer_close(peer);
    }

    for (;;) {
        advance_all(peers, npeers, cb, arg, ready);
        for (int i = 0; i < npeers; i++)
            if (ready[i] && peers[i]->state == HILO_PEER_IDLE)
                cb->ready(peers[i], arg);
        if (cb->finished(arg))
            break;

        TimestampTz held = cb->held_until != NULL ? cb->held_until(arg) : 0;
        bool waiting = held != 0;
        for (int i = 0; i < npeers; i++) {
            HiloPeer *p = peers[i];
            if (p != NULL && (p->state == HILO_PEER_CONNECTING || p->state == HILO_PEER_SETUP ||
                              (p->state == HILO_PEER_BUSY)))
                waiting = true;
        }
        if (!waiting)
            break; /* nothing in flight and nothing to send: nothing more can happen */

        TimestampTz now = GetCurrentTimestamp();
        if (now >= deadline) {
            time_out(peers, npeers, cb, arg);
            break;
        }
        if (held != 0 && held <= now) {
            /* Something may go to an idle peer at once: ready() again. */
            CHECK_FOR_INTERRUPTS();
            continue;
        }
        TimestampTz wake = held != 0 && held < deadline ? held : deadline;
        long secs;
        int usecs;
        TimestampDifference(now, wake, &secs, &usecs);
        long timeout = secs * 1000 + (usecs + 999) / 1000;
        if (wait_for_peers(peers, npeers, Max(timeout, 1))) {
            /* Whoever set it may count on this wake-up after we return. */
            latch_pending = true;
            CHECK_FOR_INTERRUPTS();
        }
    }
    if (latch_pending)
        SetLatch(MyLatch);
    pfree(ready);
}
