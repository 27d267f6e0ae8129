import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CyclicBarrier;
import org.hilo.Hilo;
import org.hilo.IdSet;

/**
 * One round of the Java client benchmark (test/bench/clients.sh). Prints one line: java
 * next_ns rt_ns idset8_ids_per_s rt8_ids_per_s, as bench.py.
 */
public final class Bench {
    static final String URL = System.getenv("HILO_TEST_JDBC_URL");
    static final String SEQ = System.getenv().getOrDefault("HILO_BENCH_SEQ", "bench_clients");
    static final int N_NEXT = Integer.parseInt(System.getenv().getOrDefault("HILO_BENCH_JAVA_NEXT", "20000000"));
    static final int N_RT = Integer.parseInt(System.getenv().getOrDefault("HILO_BENCH_JAVA_RT", "4000"));
    static final int BATCH = 1_000_000;
    static volatile long sink;

    interface Body {
        void run(int thread) throws Exception;
    }

    static double inThreads(int n, Body body) throws Exception {
        CyclicBarrier barrier = new CyclicBarrier(n + 1);
        List<Thread> ts = new ArrayList<>();
        List<Exception> errors = new ArrayList<>();
        for (int t = 0; t < n; t++) {
            int id = t;
            Thread th = new Thread(() -> {
                try {
                    barrier.await();
                    body.run(id);
                } catch (Exception e) {
                    synchronized (errors) {
                        errors.add(e);
                    }
                }
            });
            th.start();
            ts.add(th);
        }
        barrier.await();
        long t0 = System.nanoTime();
        for (Thread th : ts) {
            th.join();
        }
        if (!errors.isEmpty()) {
            throw errors.get(0);
        }
        return (System.nanoTime() - t0) / 1e9;
    }

    public static void main(String[] args) throws Exception {
        IdSet ids = IdSet.open(() -> DriverManager.getConnection(URL), SEQ, BATCH);
        long s = 0;
        for (int i = 0; i < 2_000_000; i++) {
            s += ids.next(); // warm up the JIT
        }
        long t0 = System.nanoTime();
        for (int i = 0; i < N_NEXT; i++) {
            s += ids.next();
        }
        double nextNs = (double) (System.nanoTime() - t0) / N_NEXT;

        double rtNs;
        try (Connection c = DriverManager.getConnection(URL)) {
            for (int i = 0; i < 200; i++) {
                s += Hilo.nextval(c, SEQ);
            }
            t0 = System.nanoTime();
            for (int i = 0; i < N_RT; i++) {
                s += Hilo.nextval(c, SEQ);
            }
            rtNs = (double) (System.nanoTime() - t0) / N_RT;
        }

        int per = N_NEXT / 8;
        double secs = inThreads(8, t -> {
            long x = 0;
            for (int i = 0; i < per; i++) {
                x += ids.next();
            }
            sink += x;
        });
        double idset8 = 8.0 * per / secs;
        ids.close();

        List<Connection> conns = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            conns.add(DriverManager.getConnection(URL));
        }
        int perRt = N_RT / 8;
        secs = inThreads(8, t -> {
            long x = 0;
            for (int i = 0; i < perRt; i++) {
                x += Hilo.nextval(conns.get(t), SEQ);
            }
            sink += x;
        });
        double rt8 = 8.0 * perRt / secs;
        for (Connection c : conns) {
            c.close();
        }
        sink += s;
        System.out.printf("java %.1f %.1f %.0f %.0f%n", nextNs, rtNs, idset8, rt8);
    }
}
