#!/bin/sh
# Builds the hilo JDBC client with javac against Debian's PostgreSQL JDBC
# driver (libpostgresql-jdbc-java), and the Hibernate generator against
# Debian's Hibernate 3.6 (libhibernate3-java) if that is installed; with
# "test", runs the tests of both with JUnit 5 (Debian's junit5):
#
#   ./build.sh          build/hilo-ids-VERSION.jar, build/hilo-ids-hibernate3-VERSION.jar
#   HILO_TEST_JDBC_URL=jdbc:postgresql://127.0.0.1:5432/postgres?user=postgres ./build.sh test
#
# The sources are in Maven's layout (src/main/java, src/test/java; pom.xml
# names the same coordinates) for builds that can reach Maven Central.
set -eu
cd "$(dirname "$0")"
J=/usr/share/java
JDBC=${HILO_JDBC_JAR:-$J/postgresql.jar}
# The version is hilo.control's default_version, written nowhere else
# (pom.xml, which Maven needs literal, must agree: checked here).
VERSION=$(sed -n "s/^default_version = '\(.*\)'/\1/p" ../../hilo.control)
POM_VERSION=$(sed -n 's|^  <version>\(.*\)</version>$|\1|p' pom.xml)
if [ "$POM_VERSION" != "$VERSION" ]; then
    echo "pom.xml's version $POM_VERSION is not hilo.control's $VERSION" >&2
    exit 1
fi
JAVAC="javac -Xlint:all,-options -Werror --release 17"
rm -rf build
mkdir -p build/classes build/test-classes
$JAVAC -d build/classes $(find src/main/java -name '*.java')
mkdir -p build/classes/META-INF
cp ../../LICENSE build/classes/META-INF/LICENSE
# A module name for the module path (the client is an automatic module).
printf 'Automatic-Module-Name: org.hilo\nImplementation-Title: hilo-ids\nImplementation-Version: %s\n' \
    "$VERSION" >build/manifest.txt
jar --create --file "build/hilo-ids-$VERSION.jar" --manifest=build/manifest.txt -C build/classes .
echo "built build/hilo-ids-$VERSION.jar"

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
    mkdir -p build/hibernate-classes/META-INF
    cp ../../LICENSE build/hibernate-classes/META-INF/LICENSE
    printf 'Automatic-Module-Name: org.hilo.hibernate\nImplementation-Version: %s\n' "$VERSION" >build/manifest-hibernate.txt
    jar --create --file "build/hilo-ids-hibernate3-$VERSION.jar" --manifest=build/manifest-hibernate.txt \
        -C build/hibernate-classes .
    echo "built build/hilo-ids-hibernate3-$VERSION.jar"
else
    echo "no $J/hibernate3.jar (libhibernate3-java): the Hibernate generator is not built"
fi

if [ "${1:-}" = test ]; then
    JUNIT=$J/junit-jupiter-api.jar:$J/apiguardian-api.jar:$J/opentest4j.jar:$J/junit-platform-commons.jar
    CP="build/hilo-ids-$VERSION.jar:build/test-classes:$JDBC"
    SELECT="--select-class=org.hilo.HiloTest"
    $JAVAC -cp "build/classes:$JDBC:$JUNIT" -d build/test-classes $(find src/test/java -name '*.java')
    if [ -n "$HIB" ]; then
        $JAVAC -cp "build/classes:build/test-classes:build/hibernate-classes:$HIB:$JUNIT" -d build/test-classes \
            $(find hibernate/src/test/java -name '*.java')
        CP="$CP:build/hilo-ids-hibernate3-$VERSION.jar:$HIB"
        SELECT="$SELECT --select-class=org.hilo.hibernate.HibernateTest"
    fi
    # JUnit's console launcher; its summary ("[ 20 tests successful ]",
    # "[ 0 tests failed ]") is restated as the plain "N passed, N failed".
    # hilo.test.classpath: for the child JVMs of the tests; hilo.test.jar:
    # the jar whose module name a test reads.
    rc=0
    java -Dhilo.test.classpath="$CP" -Dhilo.test.jar="build/hilo-ids-$VERSION.jar" -jar $J/junit-platform-console-standalone.jar --class-path "$CP" $SELECT \
        --disable-banner --details=tree --disable-ansi-colors >build/junit.log 2>&1 || rc=$?
    cat build/junit.log
    ok=$(sed -n 's/^\[ *\([0-9]*\) tests successful *\]$/\1/p' build/junit.log)
    bad=$(sed -n 's/^\[ *\([0-9]*\) tests failed *\]$/\1/p' build/junit.log)
    echo "${ok:-0} passed, ${bad:-0} failed"
    exit $rc
fi
