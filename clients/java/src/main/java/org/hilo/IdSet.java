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
 * IDs of one hilo sequence, taken in batches and handed out in the process (seed 004's IDSet).
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
 * <p>Thread safe. {@link #close()} pushes back every ID not handed out, and so does a
 * shutdown hook if the JVM exits (normally, or on SIGTERM/SIGINT) without it. If the process
 * dies instead, its IDs are never handed out again: a gap, no duplicate.
 *
 * <p>The IdSet uses its connection alone: it commits after each take and push unless the
 * connection is in auto-commit mode.
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

    private final Connection conn;
    private final boolean ownsConn;
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
        Connection c = factory.connect();
        try {
            return new IdSet(c, true, seq, batchSize, lowWater);
        } catch (SQLException | RuntimeException e) {
            c.close();
            throw e;
        }
    }

    /** An IdSet on a connection it uses alone and leaves open; lowWater = batchSize. */
    public static IdSet open(Connection conn, String seq, int batchSize) throws SQLException {
        return new IdSet(conn, false, seq, batchSize, batchSize);
    }

    public static IdSet open(Connection conn, String seq, int batchSize, int lowWater)
            throws SQLException {
        return new IdSet(conn, false, seq, batchSize, lowWater);
    }

    private IdSet(Connection conn, boolean ownsConn, String seq, int batchSize, int lowWater)
            throws SQLException {
        if (batchSize < 1) {
            throw new IllegalArgumentException("batchSize must be at least 1");
        }
        if (lowWater < 0) {
            throw new IllegalArgumentException("lowWater must not be negative");
        }
        this.conn = conn;
        this.ownsConn = ownsConn;
        this.seq = seq;
        this.batchSize = batchSize;
        this.lowWater = lowWater;
        add(takeBatch());
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
                try {
                    Hilo.push(conn, seq, held);
                    commit();
                } catch (SQLException | RuntimeException e) {
                    rollback();
                    throw e;
                }
            }
        } finally {
            if (ownsConn) {
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

    private List<IdRange> takeBatch() throws SQLException {
        try {
            List<IdRange> batch = Hilo.take(conn, seq, batchSize);
            commit();
            return batch;
        } catch (SQLException | RuntimeException e) {
            rollback();
            throw e;
        }
    }

    private void commit() throws SQLException {
        if (!conn.getAutoCommit()) {
            conn.commit();
        }
    }

    private void rollback() {
        try {
            if (!conn.getAutoCommit()) {
                conn.rollback();
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
