package org.hilo;

import java.sql.Connection;
import java.sql.SQLException;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Supplier;

/**
 * IDs of one hilo sequence, taken in batches and handed out in the process.
 *
 * <pre>{@code
 * try (IdSet ids = IdSet.open(() -> DriverManager.getConnection(url), "orders", 10_000)) {
 *     long id = ids.next();   // no round trip
 * }                           // pushes back what was not handed out
 * }</pre>
 *
 * <p>{@link #open} takes the first batch (an unknown sequence throws there). Whenever fewer
 * than {@code lowWater} IDs (default: {@code batchSize}) are left, a background thread takes
 * the next batch of {@code batchSize} while {@link #next()} goes on handing out the current
 * one; {@code next()} waits only if the set ran dry first. A failed refill makes {@code
 * next()} throw the driver's {@link SQLException} once the set is dry; the call after that
 * tries again.
 *
 * <p>An IdSet opened with a {@link ConnectionFactory} opens a new connection when it finds its
 * own lost (server restart, failover: SQLSTATE class 08, 57P01 to 57P03, or closed): a take is
 * retried at once on the new connection; so is {@link #close()}'s push, but only if it certainly
 * did not commit (a push that may have committed is never repeated: those IDs are a gap). An
 * IdSet on a given connection leaves that to the connection's owner.
 *
 * <p>Thread safe. {@link #close()} pushes back every ID not handed out, and so does a
 * shutdown hook if the JVM exits (normally, or on SIGTERM/SIGINT) without it. If the process
 * dies instead, its IDs are never handed out again: a gap, no duplicate.
 *
 * <p>The IdSet uses its connection alone: it commits after each take and push unless the
 * connection is in auto-commit mode (a connection of its own is taken out of auto-commit for
 * {@link #close()}'s push, so that a push cut off before its COMMIT certainly did not count).
 */
public final class IdSet implements AutoCloseable {
    /** Opens connections for an IdSet that owns its connection. */
    @FunctionalInterface
    public interface ConnectionFactory {
        Connection connect() throws SQLException;
    }

    /** Thrown by {@link #next()} after {@link #close()}. */
    public static final class ClosedException extends IllegalStateException {
        private static final long serialVersionUID = 1L;

        ClosedException(String seq) {
            super("IdSet for \"" + seq + "\" is closed");
        }
    }

    private final ConnectionFactory factory; // null: a given connection
    private final boolean ownsConn;
    // null once a lost connection of our own was closed (the next use opens a new one). Used by
    // the constructor, then the refiller, then close() after joining it.
    private Connection conn;
    private final String seq;
    private final int batchSize;
    private final int lowWater;

    private final ReentrantLock lock = new ReentrantLock();
    private final Condition changed = lock.newCondition();
    private long nextId = 1; // current range: nextId .. lastId
    private long lastId = 0;
    private final ArrayDeque<IdRange> ranges = new ArrayDeque<>(); // later ranges, in order
    private long remaining;
    private boolean refilling;
    private SQLException error;
    private boolean closed;
    private long refills;
    private final Thread refiller;
    private final Thread shutdownHook;

    /** An IdSet on a connection of its own, closed by {@link #close()}; lowWater = batchSize. */
    public static IdSet open(ConnectionFactory factory, String seq, int batchSize)
            throws SQLException {
        return open(factory, seq, batchSize, batchSize);
    }

    public static IdSet open(ConnectionFactory factory, String seq, int batchSize, int lowWater)
            throws SQLException {
        return new IdSet(null, factory, seq, batchSize, lowWater);
    }

    /** An IdSet on a connection it uses alone and leaves open; lowWater = batchSize. */
    public static IdSet open(Connection conn, String seq, int batchSize) throws SQLException {
        return new IdSet(conn, null, seq, batchSize, batchSize);
    }

    public static IdSet open(Connection conn, String seq, int batchSize, int lowWater)
            throws SQLException {
        return new IdSet(conn, null, seq, batchSize, lowWater);
    }

    private IdSet(Connection conn, ConnectionFactory factory, String seq, int batchSize, int lowWater)
            throws SQLException {
        if (batchSize < 1) {
            throw new IllegalArgumentException("batchSize must be at least 1");
        }
        if (lowWater < 0) {
            throw new IllegalArgumentException("lowWater must not be negative");
        }
        this.factory = factory;
        this.ownsConn = factory != null;
        this.seq = seq;
        this.batchSize = batchSize;
        this.lowWater = lowWater;
        this.conn = ownsConn ? factory.connect() : conn;
        try {
            add(takeBatch());
        } catch (SQLException | RuntimeException e) {
            if (ownsConn && this.conn != null) {
                closeQuietly(this.conn);
            }
            throw e;
        }
        refiller = new Thread(this::run, "hilo-idset-" + seq);
        refiller.setDaemon(true);
        refiller.start();
        shutdownHook = new Thread(this::closeQuietly, "hilo-idset-exit-" + seq);
        Runtime.getRuntime().addShutdownHook(shutdownHook);
    }

    public String sequence() {
        return seq;
    }

    public int batchSize() {
        return batchSize;
    }

    public int lowWater() {
        return lowWater;
    }

    /**
     * The next ID.
     *
     * @throws SQLException the refill's error, if the set ran dry and its refill failed
     * @throws ClosedException after {@link #close()}
     */
    public long next() throws SQLException {
        lock.lock();
        try {
            for (; ; ) {
                if (closed) {
                    throw new ClosedException(seq);
                }
                long v = nextId;
                if (v <= lastId) {
                    nextId = v + 1;
                    if (--remaining < lowWater && !refilling && error == null) {
                        refilling = true;
                        changed.signalAll();
                    }
                    return v;
                }
                IdRange r = ranges.pollFirst();
                if (r != null) {
                    nextId = r.first();
                    lastId = r.last();
                    continue;
                }
                if (error != null) {
                    SQLException e = error;
                    error = null;
                    throw e;
                }
                if (!refilling) {
                    refilling = true;
                    changed.signalAll();
                }
                changed.awaitUninterruptibly();
            }
        } finally {
            lock.unlock();
        }
    }

    /** IDs held and not yet handed out. */
    public long remaining() {
        return locked(() -> remaining);
    }

    /** Batches taken in the background so far. */
    public long refills() {
        return locked(() -> refills);
    }

    /** The IDs held and not yet handed out. */
    public List<IdRange> ranges() {
        return locked(this::held);
    }

    /**
     * Stops refilling and pushes back every ID not handed out. Idempotent.
     *
     * @throws SQLException if the push failed (those IDs are then a gap)
     */
    @Override
    public void close() throws SQLException {
        lock.lock();
        try {
            if (closed) {
                return;
            }
            closed = true;
            changed.signalAll();
        } finally {
            lock.unlock();
        }
        try {
            Runtime.getRuntime().removeShutdownHook(shutdownHook);
        } catch (IllegalStateException shuttingDown) {
            // called from the hook itself
        }
        boolean interrupted = false;
        for (; ; ) {
            try {
                refiller.join(); // a refill under way lands in ranges first
                break;
            } catch (InterruptedException e) {
                interrupted = true;
            }
        }
        List<IdRange> held;
        lock.lock();
        try {
            held = held();
            ranges.clear();
            nextId = 1;
            lastId = 0;
            remaining = 0;
        } finally {
            lock.unlock();
        }
        try {
            if (!held.isEmpty()) {
                pushBack(held);
            }
        } finally {
            if (ownsConn && conn != null) {
                conn.close();
            }
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    private void closeQuietly() {
        try {
            close();
        } catch (SQLException | RuntimeException e) {
            // the JVM is going away: the IDs are a gap, never a duplicate
        }
    }

    /** get(), under the lock. */
    private <T> T locked(Supplier<T> get) {
        lock.lock();
        try {
            return get.get();
        } finally {
            lock.unlock();
        }
    }

    private List<IdRange> held() {
        List<IdRange> out = new ArrayList<>(ranges.size() + 1);
        if (nextId <= lastId) {
            out.add(new IdRange(nextId, lastId));
        }
        out.addAll(ranges);
        return out;
    }

    private void add(List<IdRange> batch) {
        for (IdRange r : batch) {
            ranges.addLast(r);
            remaining += r.count();
        }
    }

    /**
     * A batch. On a connection of our own found lost, retried once on a new one (a take that may
     * have gone through is only a gap).
     */
    private List<IdRange> takeBatch() throws SQLException {
        for (boolean retry = false; ; retry = true) {
            Connection c = connection();
            try {
                List<IdRange> batch = Hilo.take(c, seq, batchSize);
                commit(c);
                return batch;
            } catch (SQLException e) {
                rollback(c);
                if (!lost(c, e) || retry) {
                    throw e;
                }
            } catch (RuntimeException e) {
                rollback(c);
                throw e;
            }
        }
    }

    /**
     * Pushes held back and commits. On a connection of our own found lost, once more on a new one,
     * but only if the first push certainly did not commit: it ran in a transaction whose COMMIT was
     * not sent. A push that may have committed is never repeated.
     */
    private void pushBack(List<IdRange> held) throws SQLException {
        for (boolean retry = false; ; retry = true) {
            Connection c = connection();
            boolean mayHaveCommitted = false;
            try {
                if (ownsConn && c.getAutoCommit()) {
                    c.setAutoCommit(false); // our own: the COMMIT is then ours to send
                }
                mayHaveCommitted = c.getAutoCommit();
                Hilo.push(c, seq, held);
                mayHaveCommitted = true;
                commit(c);
                return;
            } catch (SQLException e) {
                rollback(c);
                if (mayHaveCommitted || !lost(c, e) || retry) {
                    throw e;
                }
            } catch (RuntimeException e) {
                rollback(c);
                throw e;
            }
        }
    }

    /** The connection; a new one from the factory if the last one was lost. */
    private Connection connection() throws SQLException {
        if (conn == null) {
            conn = factory.connect();
        }
        return conn;
    }

    /**
     * After a failed call on c: whether c was lost and was one of our own (then it is closed, and
     * the next use opens a new one).
     */
    private boolean lost(Connection c, SQLException e) {
        if (!ownsConn || !broken(c, e)) {
            return false;
        }
        closeQuietly(c);
        conn = null;
        return true;
    }

    /**
     * Whether e says that c is lost: SQLSTATE class 08 (connection exception), 57P01 to 57P03
     * (the server shut the session down, or is starting), or a closed connection.
     */
    static boolean broken(Connection c, SQLException e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof SQLException) {
                String state = ((SQLException) t).getSQLState();
                if (state != null && (state.startsWith("08") || state.equals("57P01")
                        || state.equals("57P02") || state.equals("57P03"))) {
                    return true;
                }
            }
        }
        try {
            return c.isClosed();
        } catch (SQLException closed) {
            return true;
        }
    }

    private static void closeQuietly(Connection c) {
        try {
            c.close();
        } catch (SQLException ignored) {
            // lost already
        }
    }

    private static void commit(Connection c) throws SQLException {
        if (!c.getAutoCommit()) {
            c.commit();
        }
    }

    private static void rollback(Connection c) {
        try {
            if (!c.getAutoCommit()) {
                c.rollback();
            }
        } catch (SQLException ignored) {
            // a broken connection: the caller's exception is the one that matters
        }
    }

    private void run() {
        for (; ; ) {
            lock.lock();
            try {
                while (!refilling && !closed) {
                    changed.awaitUninterruptibly();
                }
                if (closed) {
                    return;
                }
            } finally {
                lock.unlock();
            }
            List<IdRange> batch = null;
            SQLException failure = null;
            try {
                batch = takeBatch();
            } catch (SQLException e) {
                failure = e;
            } catch (RuntimeException e) {
                failure = new SQLException("hilo IdSet refill failed", e);
            }
            lock.lock();
            try {
                if (batch != null) {
                    add(batch);
                    refills++;
                } else {
                    error = failure;
                }
                refilling = false;
                changed.signalAll();
            } finally {
                lock.unlock();
            }
        }
    }
}
