# Shared helpers for scripts/demo.sh, scripts/test.sh and test/bench/*.sh.
# Source it; it sets HILO_ROOT and PG_BIN.
#
# Everything runs as root (as in CI) but PostgreSQL refuses root, so servers
# and the tools that start them run as the postgres user, in directories it
# owns.

set -euo pipefail

HILO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# This machine's major; inside a root of scripts/roots.sh (the benchmarks
# of test/bench/majors.sh) HILO_PG_MAJOR names the root's.
PG_MAJOR=${HILO_PG_MAJOR:-15}
PG_BIN=/usr/lib/postgresql/$PG_MAJOR/bin
PG_USER=postgres

# Debian packages the build, the demo and the tests need.
HILO_PACKAGES=(
    make g++ cmake pkg-config
    "postgresql-$PG_MAJOR" "postgresql-server-dev-$PG_MAJOR" postgresql-contrib
    libgtest-dev clang clang-format libclang-rt-dev
    libipc-run-perl libdbd-pg-perl valgrind
    patroni etcd-server
    "postgresql-$PG_MAJOR-cron"
)

# What only the package stage (scripts/test.sh package) needs: Debian's
# packaging tools, the PostgreSQL packaging helpers (pg_buildext,
# pg_virtualenv, the dh pgxs sequences; postgresql-all is the package's
# build dependency for its build-time tests) and the PGXN client.
HILO_PACKAGE_STAGE_PACKAGES=(
    dpkg-dev debhelper fakeroot lintian autopkgtest
    postgresql-all postgresql-server-dev-all pgxnclient
)

log() { printf '\n==> %s (at %d s)\n' "$*" "$SECONDS"; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

as_pg() { runuser -u "$PG_USER" -- "$@"; }

# install_missing WHAT PKG...: installs whichever of the Debian packages
# named are missing ("installing Debian packages WHAT: ...").
install_missing() {
    local what=$1 missing=() pkg
    shift
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep "install ok installed" >/dev/null ||
            missing+=("$pkg")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        log "installing Debian packages$what: ${missing[*]}"
        as_root apt-get -o DPkg::Lock::Timeout=900 update -qq
        as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -qq "${missing[@]}" >/dev/null
    fi
}

# ensure_packages [PKG...]: installs whichever of the packages named (by
# default HILO_PACKAGES) are missing.
ensure_packages() {
    # A root of scripts/roots.sh has what it was made with, and nothing to
    # install from here.
    [ -z "${HILO_PG_MAJOR:-}" ] || return 0
    if [ $# -gt 0 ]; then install_missing "" "$@"; else install_missing "" "${HILO_PACKAGES[@]}"; fi
    # Debian's postgresql package starts a cluster of its own; ours never use it.
    id "$PG_USER" >/dev/null 2>&1 || { echo "no $PG_USER user after installing PostgreSQL" >&2; exit 1; }
}

# What the client libraries (clients/) and their tests need: the stage
# `clients` of scripts/test.sh and test/bench/clients.sh install them.
# Node.js and npm count as present when their commands are (a nodejs
# package from elsewhere may bundle npm and conflict with Debian's).
HILO_CLIENT_PACKAGES=(
    python3-psycopg python3-psycopg2 python3-psycopg-pool python3-pytest
    python3-sqlalchemy python3-django
    ruby ruby-pg ruby-activerecord ruby-minitest
    default-jdk-headless libpostgresql-jdbc-java libhibernate3-java junit5
    nodejs npm
)

ensure_client_packages() {
    local wanted=() pkg
    for pkg in "${HILO_CLIENT_PACKAGES[@]}"; do
        case "$pkg" in
        nodejs) command -v node >/dev/null && continue ;;
        npm) command -v npm >/dev/null && continue ;;
        esac
        wanted+=("$pkg")
    done
    install_missing " for the clients" "${wanted[@]}"
}

# start_client_cluster DIR PORT: start_cluster, then also listening on
# TCP on 127.0.0.1 (JDBC has no Unix sockets). Trust authentication, user
# postgres, database postgres; sets PGHOST, PGPORT, PGUSER, PGDATABASE
# (libpq, psycopg and node-postgres read them) and HILO_TEST_JDBC_URL.
start_client_cluster() {
    local dir=$1 port=$2
    start_cluster "$dir" "$port"
    echo "listen_addresses = '127.0.0.1'" >>"$dir/data/postgresql.conf"
    as_pg "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w restart >/dev/null
    as_pg "$PG_BIN/psql" -h "$dir" -p "$port" -d postgres -X -q -c 'CREATE EXTENSION hilo'
    export PGHOST=$dir PGPORT=$port PGUSER=$PG_USER PGDATABASE=postgres
    export HILO_TEST_JDBC_URL="jdbc:postgresql://127.0.0.1:$port/postgres?user=$PG_USER"
}

# Builds hilo and installs it into the PostgreSQL that pg_config names.
build_and_install() {
    log "building and installing hilo"
    make -C "$HILO_ROOT" -s -j"$(nproc)" "$@"
    as_root make -C "$HILO_ROOT" -s install "$@"
}

# install_private DIR [BUILD]: copies the system's PostgreSQL $PG_MAJOR into
# DIR and installs the hilo just built (in BUILD, by default the source
# tree) into that copy, then points PG_BIN and
# PGXS_DIR at it. Debian's PostgreSQL is relocatable (it finds its share and
# lib directories relative to its binaries), so servers started from the
# copy load this build of hilo and no other, whatever else is installed
# system-wide meanwhile. Used by the tests and benchmarks.
install_private() {
    local root=$1 build=${2:-$HILO_ROOT}
    local lib=$root/usr/lib/postgresql/$PG_MAJOR share=$root/usr/share/postgresql/$PG_MAJOR
    mkdir -p "$root/usr/lib/postgresql" "$root/usr/share/postgresql"
    cp -a "/usr/lib/postgresql/$PG_MAJOR" "$root/usr/lib/postgresql/"
    cp -a "/usr/share/postgresql/$PG_MAJOR" "$root/usr/share/postgresql/"
    # Whatever hilo the system has (another build, another version) goes.
    rm -f "$lib/lib/hilo.so" "$share"/extension/hilo.control "$share"/extension/hilo--*.sql
    install -m 755 "$build/hilo.so" "$lib/lib/hilo.so"

    install -m 644 "$HILO_ROOT/hilo.control" "$HILO_ROOT"/src/hilo--*.sql "$share/extension/"
    # src/hilo.sql, the whole current schema, as the Makefile installs it
    # (a tree older than 0.5.0, which test/bench/take_ab.sh may install, has
    # none: its scripts are all versioned).
    [ ! -f "$HILO_ROOT/src/hilo.sql" ] || install -m 644 "$HILO_ROOT/src/hilo.sql" \
        "$share/extension/hilo--$(sed -n "s/^default_version = '\(.*\)'/\1/p" "$HILO_ROOT/hilo.control").sql"
    # The open version's upgrade script, as the Makefile built it from
    # src/hilo--A--B.sql.in (none in a tree older than 0.5.0).
    local open
    for open in "$HILO_ROOT"/src/hilo--*.sql.in; do
        [ ! -f "$open" ] || install -m 644 "$build/$(basename "$open" .in)" "$share/extension/"
    done
    PG_BIN=$lib/bin
    PGXS_DIR=$lib/lib/pgxs
    [ "$("$PG_BIN/pg_config" --pkglibdir)" = "$lib/lib" ] ||
        { echo "the PostgreSQL copy in $root is not relocatable" >&2; exit 1; }
}


# make_pg_dir VAR NAME: sets VAR to a new directory the postgres user owns,
# removed by cleanup_dirs at exit (kept if HILO_KEEP_WORK is set).
HILO_TMP_DIRS=()
make_pg_dir() {
    local dir
    dir=$(mktemp -d "${TMPDIR:-/tmp}/hilo-$2.XXXXXX")
    chown "$PG_USER": "$dir"
    chmod 700 "$dir"
    HILO_TMP_DIRS+=("$dir")
    printf -v "$1" '%s' "$dir"
}
cleanup_dirs() {
    if [ -n "${HILO_KEEP_WORK:-}" ]; then
        echo "kept: ${HILO_TMP_DIRS[*]}"
        return
    fi
    [ ${#HILO_TMP_DIRS[@]} -eq 0 ] || rm -rf "${HILO_TMP_DIRS[@]}"
}

# free_port FROM: the first port from FROM up that a server can listen on
# at 127.0.0.1 now: nothing listens on it, and no connection has it as its
# own end. (The kernel gives an outgoing connection a port of its ephemeral
# range; the check before, a connection attempt, did not see those, and
# the clients stage's server once could not start: "Address already in
# use".)
free_port() {
    local port=$1
    until perl -MIO::Socket::INET -e 'exit !IO::Socket::INET->new(LocalAddr => "127.0.0.1",
        LocalPort => $ARGV[0], Listen => 1, ReuseAddr => 1)' "$port"; do
        port=$((port + 1))
    done
    echo "$port"
}

# tcp_port OFFSET: free_port for a server that listens on TCP: OFFSET above
# the kernel's ephemeral ports (ip_local_port_range, 32768 to 60999 unless
# changed), where no outgoing connection can take it between the check and
# the server's start, and above the ports PostgreSQL::Test::Cluster gives
# its nodes (10200 to 32767). The TAP files beside the background stages
# connect over TCP (Patroni, etcd, the proxy of the cluster files).
tcp_port() {
    local low high
    read -r low high </proc/sys/net/ipv4/ip_local_port_range
    if [ $((high + 1 + $1)) -le 65535 ]; then free_port $((high + 1 + $1)); else free_port $((low - 1000 + $1)); fi
}

# start_cluster DIR PORT [LINE...]: a throwaway server with hilo preloaded,
# listening only on a Unix socket in DIR; each LINE is added to its
# postgresql.conf (a later line wins over an earlier one).
start_cluster() {
    local dir=$1 port=$2
    shift 2
    as_pg "$PG_BIN/initdb" -D "$dir/data" -A trust -U "$PG_USER" --no-sync >/dev/null
    {
        cat <<CONF
shared_preload_libraries = 'hilo'
port = $port
listen_addresses = ''
unix_socket_directories = '$dir'
CONF
        [ $# -eq 0 ] || printf '%s\n' "$@"
    } >>"$dir/data/postgresql.conf"
    as_pg "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w start >/dev/null
}

# The nodes of a local cluster, by name. start_node NAME [LINE...] starts a
# server (start_cluster with the LINEs) in a new directory, on the first free
# port from HILO_NODE_PORT (54500 unless set); NODE_DIR[NAME] and
# NODE_PORT[NAME] say where. stop_nodes stops them all and removes their
# directories (trap it on EXIT).
declare -A NODE_DIR=() NODE_PORT=()
NODE_NAMES=()
HILO_NODE_PORT=${HILO_NODE_PORT:-54500}
start_node() {
    local name=$1 node_dir
    shift
    make_pg_dir node_dir "node-$name"
    NODE_DIR[$name]=$node_dir
    NODE_PORT[$name]=$(free_port "$HILO_NODE_PORT")
    HILO_NODE_PORT=$((NODE_PORT[$name] + 1))
    NODE_NAMES+=("$name")
    start_cluster "$node_dir" "${NODE_PORT[$name]}" "$@"
}
stop_nodes() {
    local n
    for n in "${NODE_NAMES[@]}"; do stop_cluster "${NODE_DIR[$n]}"; done
    cleanup_dirs
}
# pg_ctl_node NAME ARGS...: pg_ctl on a node's data directory.
pg_ctl_node() {
    local n=$1
    shift
    as_pg "$PG_BIN/pg_ctl" -D "${NODE_DIR[$n]}/data" -l "${NODE_DIR[$n]}/server.log" -w "$@" >/dev/null
}
node_conninfo() { echo "host=${NODE_DIR[$1]} port=${NODE_PORT[$1]} dbname=postgres user=$PG_USER"; }
# on_node NAME [PSQL ARGS...]: psql on a node's database postgres, unaligned
# tuples only, stopping at the first error.
on_node() {
    local n=$1
    shift
    as_pg "$PG_BIN/psql" -h "${NODE_DIR[$n]}" -p "${NODE_PORT[$n]}" -d postgres -X -q -At \
        -v ON_ERROR_STOP=1 "$@"
}
# show_on NAME [PSQL ARGS...]: psql on a node for the demos: every statement
# echoed after a "NAME=# " prompt, output indented; errors are part of the
# show.
show_on() {
    local n=$1
    shift
    echo "-- on node $n"
    as_pg "$PG_BIN/psql" -h "${NODE_DIR[$n]}" -p "${NODE_PORT[$n]}" -d postgres -X -e \
        -v PROMPT1="$n=# " "$@" 2>&1 | sed 's/^/    /' || true
}

stop_cluster() {
    local dir=$1
    [ -f "$dir/data/postmaster.pid" ] &&
        as_pg "$PG_BIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
}
