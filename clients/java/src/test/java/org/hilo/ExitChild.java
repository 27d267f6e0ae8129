package org.hilo;

import java.sql.DriverManager;
import java.util.List;
import java.util.stream.Collectors;

/**
 * Run by HiloTest in a JVM of its own: opens an IdSet, hands out 3 IDs, prints them and the
 * ranges it holds, then returns without close() (the shutdown hook must push back) or, with
 * HANG set, waits to be killed (a crash: only a gap).
 */
public final class ExitChild {
    public static void main(String[] args) throws Exception {
        String url = System.getenv("HILO_TEST_JDBC_URL");
        // lowWater 0: no refill before the set runs dry, so it holds exactly the 97 IDs left
        // of its one batch when it prints them (with the default, a background refill could
        // land first: 197, seen once in CI).
        IdSet ids = IdSet.open(() -> DriverManager.getConnection(url), System.getenv("SEQ"), 100, 0);
        StringBuilder out = new StringBuilder();
        for (int i = 0; i < 3; i++) {
            out.append(ids.next()).append(i < 2 ? "," : "");
        }
        List<IdRange> held = ids.ranges();
        out.append(';')
                .append(held.stream().map(r -> r.first() + "-" + r.last()).collect(Collectors.joining(",")));
        System.out.println(out);
        System.out.flush();
        if (System.getenv("HANG") != null) {
            Thread.sleep(600_000);
        }
    }
}
