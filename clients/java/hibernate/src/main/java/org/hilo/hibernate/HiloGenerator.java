package org.hilo.hibernate;

import java.io.Serializable;
import java.sql.SQLException;
import java.util.Properties;
import org.hibernate.HibernateException;
import org.hibernate.MappingException;
import org.hibernate.dialect.Dialect;
import org.hibernate.engine.SessionFactoryImplementor;
import org.hibernate.engine.SessionImplementor;
import org.hibernate.id.Configurable;
import org.hibernate.id.IdentifierGenerator;
import org.hibernate.id.PersistentIdentifierGenerator;
import org.hibernate.type.Type;
import org.hilo.IdSet;

/**
 * A Hibernate identifier generator that assigns IDs from a hilo sequence through an {@link
 * IdSet}: block allocation, no round trip per entity (the pattern of Hibernate's pooled
 * optimizers). Built against Hibernate 3.6 (Debian's libhibernate3-java).
 *
 * <pre>{@code
 * <id name="id" type="long">
 *   <generator class="org.hilo.hibernate.HiloGenerator">
 *     <param name="sequence">orders</param>     <!-- default: the entity's table name -->
 *     <param name="batch_size">1000</param>     <!-- default: 1000 -->
 *   </generator>
 * </id>
 * }</pre>
 *
 * <p>The IdSet opens on the first insert, on a connection of its own from the session
 * factory's connection provider, and pushes back what it did not hand out when the JVM exits
 * (its shutdown hook) or on {@link #close()}. If that connection is lost (server restart,
 * failover), the IdSet takes another from the provider for its next take or push.
 */
public class HiloGenerator implements IdentifierGenerator, Configurable, AutoCloseable {
    public static final String SEQUENCE = "sequence";
    public static final String BATCH_SIZE = "batch_size";

    private String sequence;
    private int batchSize;
    private Class<?> returnedClass;
    private volatile IdSet ids;

    @Override
    public void configure(Type type, Properties params, Dialect dialect) throws MappingException {
        sequence = params.getProperty(SEQUENCE, params.getProperty(PersistentIdentifierGenerator.TABLE));
        if (sequence == null) {
            throw new MappingException("HiloGenerator needs a 'sequence' parameter");
        }
        batchSize = Integer.parseInt(params.getProperty(BATCH_SIZE, "1000"));
        returnedClass = type.getReturnedClass();
        if (returnedClass != Long.class && returnedClass != long.class) {
            throw new MappingException("HiloGenerator generates long IDs, not " + returnedClass.getName());
        }
    }

    @Override
    public Serializable generate(SessionImplementor session, Object object) throws HibernateException {
        try {
            return idSet(session.getFactory()).next();
        } catch (SQLException e) {
            throw new HibernateException("hilo sequence \"" + sequence + "\": " + e.getMessage(), e);
        }
    }

    private IdSet idSet(SessionFactoryImplementor factory) throws SQLException {
        IdSet s = ids;
        if (s == null) {
            synchronized (this) {
                s = ids;
                if (s == null) {
                    s = IdSet.open(() -> factory.getConnectionProvider().getConnection(), sequence, batchSize);
                    ids = s;
                }
            }
        }
        return s;
    }

    /** Pushes back the IDs not handed out (also done by a shutdown hook at JVM exit). */
    @Override
    public void close() throws SQLException {
        IdSet s;
        synchronized (this) {
            s = ids;
            ids = null;
        }
        if (s != null) {
            s.close();
        }
    }

    /** The IdSet behind this generator, or null before the first insert. */
    public IdSet idSet() {
        return ids;
    }
}
