package org.hilo;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.sql.Connection;
import java.sql.Statement;
import java.util.Arrays;

/**
 * A small test runner (no JUnit needed): every public static void test*() method of the classes
 * named runs once, in name order; the last line is "N passed, N failed", and the exit code is 1
 * if any failed. -Dhilo.test=NAME runs only that method.
 */
public final class TestRunner {
    public static void main(String[] classes) throws Exception {
        try (Connection c = HiloTest.connect(); Statement st = c.createStatement()) {
            st.execute("CREATE EXTENSION IF NOT EXISTS hilo");
        }
        String only = System.getProperty("hilo.test");
        int passed = 0;
        int failed = 0;
        for (String name : classes) {
            Method[] methods = Class.forName(name).getDeclaredMethods();
            Arrays.sort(methods, (a, b) -> a.getName().compareTo(b.getName()));
            for (Method m : methods) {
                if (!m.getName().startsWith("test") || !Modifier.isStatic(m.getModifiers())
                        || !Modifier.isPublic(m.getModifiers()) || m.getParameterCount() != 0) {
                    continue;
                }
                if (only != null && !only.equals(m.getName())) {
                    continue;
                }
                try {
                    m.invoke(null);
                    System.out.println("ok     " + m.getName());
                    passed++;
                } catch (InvocationTargetException e) {
                    System.out.println("FAILED " + m.getName() + ": " + e.getCause());
                    e.getCause().printStackTrace(System.out);
                    failed++;
                }
            }
        }
        System.out.println(passed + " passed, " + failed + " failed");
        System.exit(failed == 0 && passed > 0 ? 0 : 1);
    }
}
