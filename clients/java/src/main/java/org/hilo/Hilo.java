package org.hilo;

import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;

/**
 * take, push and nextval of the hilo PostgreSQL extension over plain JDBC.
 *
 * <p>Ranges are inclusive {@link IdRange}s of {@code long}s both ways: they are read from
 * {@code hilo_take_ranges} and written with {@code hilo_push_ranges}, so no caller parses
 * {@code '{[1,11)}'} or binds a multirange. Errors are the driver's own {@link SQLException}s
 * ({@code getSQLState()} is the server's SQLSTATE, such as 42704 for an unknown sequence).
 * Each call runs in the connection's current transaction: a take reserves its IDs for good
 * whether that commits or not; a push counts once it commits.
 */
public final class Hilo {
    static final String TAKE =
            "SELECT first_id, last_id FROM hilo_take_ranges(?::text, ?::bigint, ?::boolean)";
    static final String PUSH = "SELECT hilo_push_ranges(?::text, ?::bigint[], ?::bigint[])";
    static final String NEXTVAL = "SELECT hilo_nextval(?::text)";

    private Hilo() {}

    /** Reserves exactly {@code n} IDs of {@code seq}. */
    public static List<IdRange> take(Connection conn, String seq, long n) throws SQLException {
        return take(conn, seq, n, false);
    }

    /** Reserves {@code n} IDs; with {@code partial}, as many as remain (at least one). */
    public static List<IdRange> take(Connection conn, String seq, long n, boolean partial)
            throws SQLException {
        try (PreparedStatement st = conn.prepareStatement(TAKE)) {
            st.setString(1, seq);
            st.setLong(2, n);
            st.setBoolean(3, partial);
            List<IdRange> out = new ArrayList<>();
            try (ResultSet rs = st.executeQuery()) {
                while (rs.next()) {
                    out.add(new IdRange(rs.getLong(1), rs.getLong(2)));
                }
            }
            return out;
        }
    }

    /** Gives unused IDs back; returns how many went back. */
    public static long push(Connection conn, String seq, Collection<IdRange> ranges)
            throws SQLException {
        Long[] firsts = new Long[ranges.size()];
        Long[] lasts = new Long[ranges.size()];
        int i = 0;
        for (IdRange r : ranges) {
            firsts[i] = r.first();
            lasts[i] = r.last();
            i++;
        }
        Array a = conn.createArrayOf("int8", firsts);
        Array b = conn.createArrayOf("int8", lasts);
        try (PreparedStatement st = conn.prepareStatement(PUSH)) {
            st.setString(1, seq);
            st.setArray(2, a);
            st.setArray(3, b);
            try (ResultSet rs = st.executeQuery()) {
                rs.next();
                return rs.getLong(1);
            }
        } finally {
            a.free();
            b.free();
        }
    }

    /** One ID, one round trip: {@code SELECT hilo_nextval(seq)}. */
    public static long nextval(Connection conn, String seq) throws SQLException {
        try (PreparedStatement st = conn.prepareStatement(NEXTVAL)) {
            st.setString(1, seq);
            try (ResultSet rs = st.executeQuery()) {
                rs.next();
                return rs.getLong(1);
            }
        }
    }
}
