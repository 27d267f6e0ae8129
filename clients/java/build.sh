#!/bin/sh
# Builds the hilo JDBC client with javac against Debian's PostgreSQL JDBC
# driver (libpostgresql-jdbc-java), and the Hibernate generator against
# Debian's Hibernate 3.6 (libhibernate3-java) if that is installed; with
# "test", runs the tests of both:
#
#   ./build.sh          build/hilo-client-0.5.0.jar, build/hilo-hibernate3-0.5.0.jar
#   HILO_TEST_JDBC_URL=jdbc:postgresql://127.0.0.1:5432/postgres?user=postgres ./build.sh test
#
# The sources are in Maven's layout (src/main/java, src/test/java; pom.xml
# names the same coordinates) for builds that can reach Maven Central.
set -eu
cd "$(dirname "$0")"
J=/usr/share/java
JDBC=${HILO_JDBC_JAR:-$J/postgresql.jar}
VERSION=0.5.0
JAVAC="javac -Xlint:all,-options -Werror --release 17"
rm -rf build
mkdir -p build/classes build/test-classes
$JAVAC -d build/classes $(find src/main/java -name '*.java')
jar --create --file "build/hilo-client-$VERSION.jar" -C build/classes .
echo "built build/hilo-client-$VERSION.jar"

# Hibernate 3.6 and what it needs at run time (javassist is not packaged:
# no lazy proxies, reflection instead of generated accessors).
HIB=
if [ -f $J/hibernate3.jar ]; then
    HIB=$J/hibernate3.jar:$J/dom4j.jar:$J/commons-collections3.jar:$J/antlr.jar
    HIB=$HIB:$J/geronimo-jpa_2.0_spec.jar:$J/geronimo-jta-1.2-spec.jar:$J/slf4j-api.jar:$J/slf4j-nop.jar
    HIB=$HIB:$J/hibernate-commons-annotations.jar
    mkdir -p build/hibernate-classes
    $JAVAC -Xlint:-processing -cp "build/classes:$HIB" -d build/hibernate-classes \
        $(find hibernate/src/main/java -name '*.java')
    jar --create --file "build/hilo-hibernate3-$VERSION.jar" -C build/hibernate-classes .
    echo "built build/hilo-hibernate3-$VERSION.jar"
else
    echo "no $J/hibernate3.jar (libhibernate3-java): the Hibernate generator is not built"
fi

if [ "${1:-}" = test ]; then
    CP="build/hilo-client-$VERSION.jar:build/test-classes:$JDBC"
    TESTS="org.hilo.HiloTest"
    $JAVAC -cp "build/classes:$JDBC" -d build/test-classes $(find src/test/java -name '*.java')
    if [ -n "$HIB" ]; then
        $JAVAC -cp "build/classes:build/test-classes:build/hibernate-classes:$HIB" -d build/test-classes \
            $(find hibernate/src/test/java -name '*.java')
        CP="$CP:build/hilo-hibernate3-$VERSION.jar:$HIB"
        TESTS="$TESTS org.hilo.hibernate.HibernateTest"
    fi
    exec java -cp "$CP" org.hilo.TestRunner $TESTS
fi
