package org.hilo;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.Callable;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;

/**
 * Tests against a real server named by HILO_TEST_JDBC_URL, with hilo preloaded (JUnit 5).
 */
public final class HiloTest {
    public static final String URL =
            System.getenv().getOrDefault(
                    "HILO_TEST_JDBC_URL", "jdbc:postgresql://127.0.0.1:5432/postgres?user=postgres");
    static final AtomicInteger counter = new AtomicInteger();

    @BeforeAll
    public static void createExtension() throws SQLException {
        try (Connection c = connect(); Statement st = c.createStatement()) {
            st.execute("CREATE EXTENSION IF NOT EXISTS hilo");
        }
    }

    public static Connection connect() throws SQLException {
        return DriverManager.getConnection(URL);
    }

    public static String newSeq(Connection c, String options) throws SQLException {
        String name = "java_" + UUID.randomUUID().toString().substring(0, 8) + "_" + counter.getAndIncrement();
        try (var st = c.prepareStatement("SELECT hilo_create(?" + (options.isEmpty() ? "" : ", " + options) + ")")) {
            st.setString(1, name);
            st.execute();
        }
        return name;
    }

    public static String newSeq(Connection c) throws SQLException {
        return newSeq(c, "window_size => 100000, block_size => 100");
    }

    public static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }

    public static void equal(Object expected, Object got) {
        if (!expected.equals(got)) {
            throw new AssertionError("expected " + expected + ", got " + got);
        }
    }

    /** The body of one of inThreads' threads, t = 0 .. n - 1. */
    public interface ThreadBody {
        void run(int t) throws Exception;
    }

    /** Runs body(0) .. body(n - 1) on n threads at once, waits for all,
     *  and fails with every error they threw. */
    public static void inThreads(int n, ThreadBody body) throws InterruptedException {
        ExecutorService pool = Executors.newFixedThreadPool(n);
        try {
            List<Callable<Void>> tasks = new ArrayList<>();
            for (int t = 0; t < n; t++) {
                int index = t;
                tasks.add(() -> {
                    body.run(index);
                    return null;
                });
            }
            List<Throwable> errors = new ArrayList<>();
            for (Future<Void> done : pool.invokeAll(tasks)) {
                try {
                    done.get();
                } catch (ExecutionException e) {
                    errors.add(e.getCause());
                }
            }
            check(errors.isEmpty(), "thread errors: " + errors);
        } finally {
            pool.shutdown();
        }
    }

    static SQLException sqlError(ThrowingRunnable r) {
        try {
            r.run();
        } catch (SQLException e) {
            return e;
        } catch (Exception e) {
            throw new AssertionError("expected an SQLException, got " + e, e);
        }
        throw new AssertionError("expected an SQLException, got none");
    }

    interface ThrowingRunnable {
        void run() throws Exception;
    }

    public static void waitFor(BooleanSupplier cond, String what) throws InterruptedException {
        long deadline = System.nanoTime() + 60_000_000_000L; // an event, not a speed check
        while (!cond.getAsBoolean()) {
            check(System.nanoTime() < deadline, "timed out waiting for " + what);
            Thread.sleep(10);
        }
    }

    /**
     * hilo holds every ID of ranges as free (pushed back, not handed out since): in
     * hilo.free_ranges or already moved into the sequence's pool by the allocator. Pushing each
     * range again must be refused with 22023, which changes nothing; a range never pushed back
     * would be accepted.
     */
    public static void assertFree(Connection c, String seq, List<IdRange> ranges) {
        for (IdRange r : ranges) {
            SQLException e = sqlError(() -> Hilo.push(c, seq, List.of(r)));
            equal("22023", e.getSQLState());
            check(e.getMessage().contains("already free") || e.getMessage().contains("wait in a pool"),
                    "IDs " + r + " were not pushed back: " + e.getMessage());
        }
    }

    static Set<Long> idsOf(List<IdRange> ranges) {
        Set<Long> s = new HashSet<>();
        for (IdRange r : ranges) {
            for (long i = r.first(); i <= r.last(); i++) {
                s.add(i);
            }
        }
        return s;
    }

    // ---- take / push / nextval ----

    @Test
    void testTakeReturnsInclusiveLongRanges() throws Exception {
        try (Connection c = connect()) {
            String seq = newSeq(c);
            equal(List.of(new IdRange(1, 10)), Hilo.take(c, seq, 10));
            equal(List.of(new IdRange(11, 15)), Hilo.take(c, seq, 5));
        }
    }

    @Test
    void testPushTakesRangesAndTheyAreFreeAgain() throws Exception {
        try (Connection c = connect()) {
            String seq = newSeq(c);
            Hilo.take(c, seq, 20);
            List<IdRange> back = List.of(new IdRange(3, 5), new IdRange(8, 9));
            equal(5L, Hilo.push(c, seq, back));
            assertFree(c, seq, back);
            equal(0L, Hilo.push(c, seq, List.of()));
        }
    }

    @Test
    void testBigIdsRoundTrip() throws Exception {
        try (Connection c = connect()) {
            long start = (1L << 62) + 12345;
            String seq = newSeq(c, "start_value => " + start);
            equal(List.of(new IdRange(start, start + 2)), Hilo.take(c, seq, 3));
            equal(2L, Hilo.push(c, seq, List.of(new IdRange(start + 1, start + 2))));
            assertFree(c, seq, List.of(new IdRange(start + 1, start + 2)));
        }
    }

    @Test
    void testPartialTakeAndExhaustion() throws Exception {
        try (Connection c = connect()) {
            String seq = newSeq(c, "max_value => 7, window_size => 7, block_size => 1");
            equal("2200H", sqlError(() -> Hilo.take(c, seq, 100)).getSQLState());
            equal(List.of(new IdRange(1, 7)), Hilo.take(c, seq, 100, true));
        }
    }

    @Test
    void testNextvalIncreases() throws Exception {
        try (Connection c = connect()) {
            String seq = newSeq(c);
            long a = Hilo.nextval(c, seq);
            long b = Hilo.nextval(c, seq);
            check(b > a, b + " > " + a);
        }
    }

    @Test
    void testUnknownSequenceIs42704FromTheDriver() throws Exception {
        try (Connection c = connect()) {
            for (ThrowingRunnable r : new ThrowingRunnable[] {
                () -> Hilo.take(c, "no_such_seq", 1),
                () -> Hilo.push(c, "no_such_seq", List.of(new IdRange(1, 1))),
                () -> Hilo.nextval(c, "no_such_seq"),
                () -> IdSet.open(HiloTest::connect, "no_such_seq", 10),
            }) {
                SQLException e = sqlError(r);
                equal("42704", e.getSQLState());
                equal("org.postgresql.util.PSQLException", e.getClass().getName());
            }
        }
    }

    @Test
    void testBadPushIsRefusedWhole() throws Exception {
        try (Connection c = connect()) {
            String seq = newSeq(c);
            Hilo.take(c, seq, 10);
            SQLException e = sqlError(() -> Hilo.push(c, seq, List.of(new IdRange(2, 5), new IdRange(4, 6))));
            equal("22023", e.getSQLState());
            try (Statement st = c.createStatement();
                    ResultSet rs = st.executeQuery("SELECT count(*) FROM hilo.free_ranges JOIN hilo.sequences"
                            + " USING (seq_id) WHERE name = '" + seq + "'")) {
                rs.next();
                equal(0L, rs.getLong(1));
            }
            try {
                new IdRange(5, 4);
                throw new AssertionError("IdRange(5, 4) accepted");
            } catch (IllegalArgumentException expected) {
                // refused before any round trip
            }
        }
    }

    @Test
    void testTakeInRolledBackTransactionStillReserves() throws Exception {
        try (Connection c = connect()) {
            String seq = newSeq(c);
            c.setAutoCommit(false);
            Set<Long> first = idsOf(Hilo.take(c, seq, 4));
            c.rollback();
            Set<Long> again = idsOf(Hilo.take(c, seq, 4));
            c.commit();
            again.retainAll(first);
            check(again.isEmpty(), "IDs came twice: " + again);
        }
    }

    // ---- IdSet ----

    @Test
    void testIdSetUniqueAcross8ThreadsAndPushedBackOnClose() throws Exception {
        try (Connection c = connect()) {
            String seq = newSeq(c);
            IdSet ids = IdSet.open(HiloTest::connect, seq, 50, 20);
            int perThread = 5000;
            long[][] got = new long[8][perThread];
            CyclicBarrier start = new CyclicBarrier(8);
            inThreads(8, t -> {
                start.await();
                for (int i = 0; i < perThread; i++) {
                    got[t][i] = ids.next();
                }
            });
            Set<Long> handed = new HashSet<>();
            for (long[] out : got) {
                for (int i = 0; i < out.length; i++) {
                    check(handed.add(out[i]), "ID " + out[i] + " handed out twice");
                    check(i == 0 || out[i] > out[i - 1], "each thread's IDs increase");
                }
            }
            check(ids.refills() > 0, "refills happened");
            waitFor(() -> ids.remaining() >= ids.lowWater(), "the last refill");
            List<IdRange> held = ids.ranges();
            equal(ids.remaining(), IdRange.count(held));
            check(ids.remaining() > 0, "IDs held");
            Set<Long> heldIds = idsOf(held);
            heldIds.retainAll(handed);
            check(heldIds.isEmpty(), "held IDs were handed out");
            ids.close();
            equal(0L, ids.remaining());
            assertFree(c, seq, held);
            try {
                ids.next();
                throw new AssertionError("next() after close()");
            } catch (IdSet.ClosedException expected) {
                // closed
            }
            ids.close(); // idempotent
        }
    }

    @Test
    void testIdSetRefillsInTheBackground() throws Exception {
        try (Connection c = connect()) {
            String seq = newSeq(c);
            try (IdSet ids = IdSet.open(HiloTest::connect, seq, 100, 50)) {
                equal(100L, ids.remaining());
                for (int i = 0; i < 51; i++) {
                    ids.next();
                }
                waitFor(() -> ids.refills() == 1, "the background refill");
                equal(149L, ids.remaining());
            }
        }
    }

    @Test
    void testIdSetWaitsForRefillWhenDry() throws Exception {
        try (Connection c = connect()) {
            String seq = newSeq(c);
            try (IdSet ids = IdSet.open(HiloTest::connect, seq, 10, 0)) {
                Set<Long> got = new HashSet<>();
                for (int i = 0; i < 35; i++) {
                    got.add(ids.next());
                }
                equal(35, got.size());
                check(ids.refills() >= 3, "refills");
            }
        }
    }

    @Test
    void testIdSetRefillErrorSurfacesWhenDry() throws Exception {
        try (Connection c = connect()) {
            String seq = newSeq(c);
            IdSet ids = IdSet.open(HiloTest::connect, seq, 10, 0);
            try (Statement st = c.createStatement()) {
                st.execute("SELECT hilo_drop('" + seq + "')");
            }
            Set<Long> got = new HashSet<>();
            for (int i = 0; i < 10; i++) {
                got.add(ids.next()); // the batch held still serves
            }
            equal(10, got.size());
            equal("42704", sqlError(ids::next).getSQLState());
            equal("42704", sqlError(ids::next).getSQLState()); // retried
            ids.close();
        }
    }

    @Test
    void testIdSetOnAGivenConnectionCommitsAndLeavesItOpen() throws Exception {
        try (Connection c = connect(); Connection own = connect()) {
            String seq = newSeq(c);
            own.setAutoCommit(false);
            IdSet ids = IdSet.open(own, seq, 10);
            long a = ids.next();
            ids.close();
            assertFree(c, seq, List.of(new IdRange(a + 1, a + 9)));
            check(!own.isClosed(), "the given connection stays open");
        }
    }

    static String[] runChild(String seq, boolean hang, Process[] proc) throws Exception {
        ProcessBuilder pb = new ProcessBuilder(
                System.getProperty("java.home") + "/bin/java", "-cp",
                System.getProperty("hilo.test.classpath", System.getProperty("java.class.path")),
                "org.hilo.ExitChild");
        pb.environment().put("HILO_TEST_JDBC_URL", URL);
        pb.environment().put("SEQ", seq);
        if (hang) {
            pb.environment().put("HANG", "1");
        }
        pb.redirectError(ProcessBuilder.Redirect.INHERIT);
        Process p = pb.start();
        proc[0] = p;
        BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
        String line = r.readLine();
        check(line != null, "the child printed nothing");
        return line.split(";", -1);
    }

    static List<IdRange> parseRanges(String s) {
        List<IdRange> out = new ArrayList<>();
        for (String r : s.split(",")) {
            String[] b = r.split("-");
            out.add(new IdRange(Long.parseLong(b[0]), Long.parseLong(b[1])));
        }
        return out;
    }

    @Test
    void testShutdownHookPushesBack() throws Exception {
        try (Connection c = connect()) {
            String seq = newSeq(c);
            Process[] p = new Process[1];
            String[] out = runChild(seq, false, p);
            equal(0, p[0].waitFor());
            List<IdRange> held = parseRanges(out[1]);
            equal(97L, IdRange.count(held));
            assertFree(c, seq, held);
        }
    }

    @Test
    void testCrashLeavesOnlyAGap() throws Exception {
        try (Connection c = connect()) {
            String seq = newSeq(c);
            Process[] p = new Process[1];
            String[] out = runChild(seq, true, p);
            p[0].destroyForcibly(); // SIGKILL
            p[0].waitFor();
            Set<Long> child = idsOf(parseRanges(out[1]));
            for (String id : out[0].split(",")) {
                child.add(Long.parseLong(id));
            }
            Set<Long> later = idsOf(Hilo.take(c, seq, 5000));
            later.retainAll(child);
            check(later.isEmpty(), "IDs came again: " + later);
        }
    }

    // ---- a lost connection ----

    /** A connection factory whose connections carry application_name {@code app}. */
    public static IdSet.ConnectionFactory named(String app) {
        String url = URL + (URL.contains("?") ? "&" : "?") + "ApplicationName=" + app;
        return () -> DriverManager.getConnection(url);
    }

    /**
     * Ends the server session named {@code app} (as a server restart or failover would) once it is
     * the only one of that name, and waits until it is gone.
     */
    public static void terminateBackend(Connection c, String app) throws Exception {
        String others = " FROM pg_stat_activity WHERE application_name = ? AND pid <> pg_backend_pid()";
        waitFor(() -> {
            try (var st = c.prepareStatement("SELECT count(*)" + others)) {
                st.setString(1, app);
                try (ResultSet rs = st.executeQuery()) {
                    rs.next();
                    return rs.getLong(1) == 1;
                }
            } catch (SQLException e) {
                throw new RuntimeException(e);
            }
        }, "one session " + app);
        try (var st = c.prepareStatement("SELECT pg_terminate_backend(pid, 60000)" + others)) {
            st.setString(1, app);
            try (ResultSet rs = st.executeQuery()) {
                check(rs.next() && rs.getBoolean(1) && !rs.next(), "the session " + app + " was terminated");
            }
        }
    }

    static String appName() {
        return "hilo_test_" + ProcessHandle.current().pid() + "_" + counter.getAndIncrement();
    }

    @Test
    void testIdSetRefillReconnectsAfterTheConnectionWasLost() throws Exception {
        try (Connection c = connect()) {
            String seq = newSeq(c);
            String app = appName();
            IdSet ids = IdSet.open(named(app), seq, 10, 0);
            Set<Long> got = new HashSet<>();
            for (int i = 0; i < 10; i++) {
                got.add(ids.next()); // dry now
            }
            terminateBackend(c, app);
            for (int i = 0; i < 25; i++) {
                check(got.add(ids.next()), "an ID was handed out twice"); // refills on a new connection
            }
            List<IdRange> held = ids.ranges();
            ids.close();
            assertFree(c, seq, held);
        }
    }

    @Test
    void testIdSetClosePushesBackOnANewConnectionAfterTheOldWasLost() throws Exception {
        try (Connection c = connect()) {
            String seq = newSeq(c);
            String app = appName();
            IdSet ids = IdSet.open(named(app), seq, 10, 0);
            ids.next();
            List<IdRange> held = ids.ranges();
            terminateBackend(c, app);
            ids.close(); // the push on the old connection never committed: it goes on a new one
            assertFree(c, seq, held);
        }
    }


    @Test
    void testJarIsTheAutomaticModuleOrgHilo() throws Exception {
        String jar = System.getProperty("hilo.test.jar");
        check(jar != null, "-Dhilo.test.jar names the client's jar (build.sh test sets it)");
        var modules = java.lang.module.ModuleFinder.of(java.nio.file.Path.of(jar)).findAll();
        equal(1, modules.size());
        var descriptor = modules.iterator().next().descriptor();
        equal("org.hilo", descriptor.name());
        check(descriptor.isAutomatic(), "an automatic module");
        equal(Set.of("org.hilo"), descriptor.packages());
    }
}
