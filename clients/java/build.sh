#!/bin/sh
# Builds the hilo JDBC client with javac against Debian's PostgreSQL JDBC
# driver (libpostgresql-jdbc-java) and, with "test", runs its tests:
#
#   ./build.sh          build/hilo-client-0.5.0.jar
#   HILO_TEST_JDBC_URL=jdbc:postgresql://127.0.0.1:5432/postgres?user=postgres ./build.sh test
#
# The sources are in Maven's layout (src/main/java, src/test/java; pom.xml
# names the same coordinates) for builds that can reach Maven Central.
set -eu
cd "$(dirname "$0")"
JDBC=${HILO_JDBC_JAR:-/usr/share/java/postgresql.jar}
VERSION=0.5.0
rm -rf build
mkdir -p build/classes build/test-classes
javac -Xlint:all -Werror --release 17 -d build/classes $(find src/main/java -name '*.java')
jar --create --file "build/hilo-client-$VERSION.jar" -C build/classes .
echo "built build/hilo-client-$VERSION.jar"
if [ "${1:-}" = test ]; then
    shift
    javac -Xlint:all -Werror --release 17 -cp "build/classes:$JDBC" -d build/test-classes $(find src/test/java -name '*.java')
    exec java -cp "build/hilo-client-$VERSION.jar:build/test-classes:$JDBC" org.hilo.HiloTest "$@"
fi
