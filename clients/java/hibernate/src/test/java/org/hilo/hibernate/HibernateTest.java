package org.hilo.hibernate;

import org.junit.jupiter.api.Test;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.hibernate.HibernateException;
import org.hibernate.Session;
import org.hibernate.SessionFactory;
import org.hibernate.Transaction;
import org.hibernate.cfg.Configuration;
import org.hibernate.engine.SessionFactoryImplementor;
import org.hilo.HiloTest;
import org.hilo.IdRange;

/** HiloGenerator in a real Hibernate 3.6 session factory against a real server. */
public final class HibernateTest {
    @org.junit.jupiter.api.BeforeAll
    static void createExtension() throws SQLException {
        HiloTest.createExtension();
    }

    /** The mapped entity. */
    public static class Item {
        private long id;
        private String name;

        public Item() {}

        Item(String name) {
            this.name = name;
        }

        public long getId() {
            return id;
        }

        public void setId(long id) {
            this.id = id;
        }

        public String getName() {
            return name;
        }

        public void setName(String name) {
            this.name = name;
        }
    }

    static SessionFactory factory(String table, String seq) {
        return factory(table, seq, HiloTest.URL, 20);
    }

    /** poolSize: Hibernate's own pool of connections (0: each session's is closed at its end). */
    static SessionFactory factory(String table, String seq, String url, int poolSize) {
        String mapping = "<?xml version=\"1.0\"?>\n"
                + "<!DOCTYPE hibernate-mapping PUBLIC \"-//Hibernate/Hibernate Mapping DTD 3.0//EN\""
                + " \"http://www.hibernate.org/dtd/hibernate-mapping-3.0.dtd\">\n"
                + "<hibernate-mapping>\n"
                + " <class name=\"" + Item.class.getName() + "\" table=\"" + table + "\" lazy=\"false\">\n"
                + "  <id name=\"id\" type=\"long\">\n"
                + "   <generator class=\"org.hilo.hibernate.HiloGenerator\">\n"
                + "    <param name=\"sequence\">" + seq + "</param>\n"
                + "    <param name=\"batch_size\">20</param>\n"
                + "   </generator>\n"
                + "  </id>\n"
                + "  <property name=\"name\" type=\"string\"/>\n"
                + " </class>\n"
                + "</hibernate-mapping>\n";
        return new Configuration()
                .setProperty("hibernate.connection.driver_class", "org.postgresql.Driver")
                .setProperty("hibernate.connection.url", url)
                .setProperty("hibernate.dialect", "org.hibernate.dialect.PostgreSQLDialect")
                .setProperty("hibernate.hbm2ddl.auto", "create")
                .setProperty("hibernate.bytecode.use_reflection_optimizer", "false")
                .setProperty("hibernate.connection.pool_size", Integer.toString(poolSize))
                .addXML(mapping)
                .buildSessionFactory();
    }

    @Test
    void testHibernateEntitiesGetIdsFromAnIdSet() throws Exception {
        try (Connection c = HiloTest.connect()) {
            String seq = HiloTest.newSeq(c, "start_value => 5000001, block_size => 100");
            String table = "items_" + seq;
            SessionFactory sf = factory(table, seq);
            Set<Long> ids = new HashSet<>();
            HiloTest.inThreads(4, t -> {
                Session s = sf.openSession();
                Transaction tx = s.beginTransaction();
                for (int i = 0; i < 25; i++) {
                    Item item = new Item("item " + i);
                    s.save(item);
                    synchronized (ids) {
                        HiloTest.check(ids.add(item.getId()), "ID " + item.getId() + " twice");
                    }
                }
                tx.commit();
                s.close();
            });
            HiloTest.equal(100, ids.size());
            try (Statement st = c.createStatement();
                    ResultSet rs = st.executeQuery("SELECT count(DISTINCT id), min(id) FROM " + table)) {
                rs.next();
                HiloTest.equal(100L, rs.getLong(1));
                HiloTest.check(rs.getLong(2) >= 5000001, "IDs come from the hilo sequence: " + rs.getLong(2));
            }
            HiloGenerator gen = (HiloGenerator) ((SessionFactoryImplementor) sf)
                    .getIdentifierGenerator(Item.class.getName());
            HiloTest.check(gen.idSet() != null && gen.idSet().refills() > 0, "batches of 20 were refilled");
            closeAndCheckFree(c, gen, sf, seq, table);
        }
    }

    @Test
    void testHibernateUnknownSequenceFailsWith42704() throws Exception {
        SessionFactory sf = factory("items_nosuch_" + System.nanoTime(), "no_such_seq");
        Session s = sf.openSession();
        try {
            s.save(new Item("x"));
            throw new AssertionError("save() with an unknown sequence succeeded");
        } catch (HibernateException e) {
            HiloTest.check(e.getCause() instanceof SQLException, "cause: " + e.getCause());
            HiloTest.equal("42704", ((SQLException) e.getCause()).getSQLState());
        } finally {
            s.close();
            sf.close();
        }
    }

    /* Closes the generator and the factory once the last refill is in; what
     * the generator held is free again. Drops the table. */
    static void closeAndCheckFree(Connection c, HiloGenerator gen, SessionFactory sf, String seq,
            String table) throws Exception {
        HiloTest.waitFor(() -> gen.idSet().remaining() >= gen.idSet().lowWater(), "the last refill");
        List<IdRange> held = gen.idSet().ranges();
        gen.close();
        sf.close();
        HiloTest.assertFree(c, seq, held);
        try (Statement st = c.createStatement()) {
            st.execute("DROP TABLE " + table);
        }
    }

    static void saveItems(SessionFactory sf, int n, Set<Long> ids) {
        Session s = sf.openSession();
        Transaction tx = s.beginTransaction();
        for (int i = 0; i < n; i++) {
            Item item = new Item("item " + i);
            s.save(item);
            HiloTest.check(ids.add(item.getId()), "ID " + item.getId() + " twice");
        }
        tx.commit();
        s.close();
    }

    @Test
    void testHibernateGeneratorReconnectsAfterItsConnectionWasLost() throws Exception {
        try (Connection c = HiloTest.connect()) {
            String seq = HiloTest.newSeq(c, "start_value => 7000001, block_size => 100");
            String table = "items_" + seq;
            String app = "hilo_hib_" + seq;
            String url = HiloTest.URL + (HiloTest.URL.contains("?") ? "&" : "?") + "ApplicationName=" + app;
            // No pool: once its sessions are closed, the IdSet's is the only connection named app.
            SessionFactory sf = factory(table, seq, url, 0);
            Set<Long> ids = new HashSet<>();
            saveItems(sf, 10, ids);
            HiloGenerator gen = (HiloGenerator) ((SessionFactoryImplementor) sf)
                    .getIdentifierGenerator(Item.class.getName());
            HiloTest.waitFor(() -> gen.idSet().remaining() >= gen.idSet().lowWater(), "the refill");
            HiloTest.terminateBackend(c, app);
            saveItems(sf, 100, ids); // 5 batches of 20: refills on a new connection
            HiloTest.equal(110, ids.size());
            try (Statement st = c.createStatement();
                    ResultSet rs = st.executeQuery("SELECT count(DISTINCT id) FROM " + table)) {
                rs.next();
                HiloTest.equal(110L, rs.getLong(1));
            }
            closeAndCheckFree(c, gen, sf, seq, table);
        }
    }
}
