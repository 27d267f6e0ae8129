# shellcheck shell=bash
# Roots with other PostgreSQL majors, for scripts/versions.sh and the
# benchmarks: a Debian root per major, made with mmdebstrap from the
# registry's suite that has it, kept as a tarball in HILO_ROOTS_CACHE
# (outside the clone: a second run on the same machine skips the download,
# a fresh machine makes them). Source it after scripts/lib.sh.

HILO_ROOTS_CACHE=${HILO_ROOTS_CACHE:-/var/cache/hilo/roots}

# The majors tested besides this machine's, and the suite each comes from.
# 16 is in none of the registry's suites.
root_suite() {
    case $1 in
    15) echo bookworm ;;
    17) echo trixie ;;
    18) echo sid ;;
    19) echo experimental ;;
    *) echo "no suite known for PostgreSQL $1" >&2; return 1 ;;
    esac
}

# What a root holds besides PostgreSQL: the build, the TAP modules' needs
# and the benchmarks' tools.
HILO_ROOT_PACKAGES=(g++ make libipc-run-perl libdbd-pg-perl perl procps)

# The Debian mirror this machine's own apt sources name.
debian_mirror() {
    local uri
    uri=$(grep -hE '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null |
        grep -o 'https\?://[^ ]*/debian/\?$' | head -n 1 || true)
    echo "${uri:-http://deb.debian.org/debian}"
}

# The security mirror this machine's apt sources name.
debian_security_mirror() {
    local uri
    uri=$(grep -hE '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null |
        grep -o 'https\?://[^ ]*/debian-security/\?$' | head -n 1 || true)
    echo "${uri:-http://deb.debian.org/debian-security}"
}

# suite_sources SUITE: the apt lines of SUITE, with its security updates
# for a released one (this machine's 15 is bookworm-security's: hilo built
# here needs a server at least as new).
suite_sources() {
    local suite=$1
    echo "deb $(debian_mirror) $suite main"
    case $suite in
    bookworm | trixie) echo "deb $(debian_security_mirror) $suite-security main" ;;
    esac
}

# root_tarball MAJOR [OLDER...]: prints the cached root of MAJOR, making it
# first if it is missing (a lock keeps two runs from making the same root
# at once). OLDER majors come into it too, each from its own suite (for
# pg_upgrade from them): bookworm's postgresql-15 in the trixie root.
root_tarball() {
    local major=$1 suite mirror tar tmp older name
    shift
    suite=$(root_suite "$major")
    name=postgresql-$major-$suite
    for older in "$@"; do name+=-with-$older; done
    tar=$HILO_ROOTS_CACHE/$name.tar
    as_root mkdir -p "$HILO_ROOTS_CACHE"
    (
        flock 9
        [ -s "$tar" ] && exit 0
        install_missing " for the roots" mmdebstrap
        mirror=$(debian_mirror)
        local opts=() pkgs=("postgresql-$major" "postgresql-server-dev-$major" "${HILO_ROOT_PACKAGES[@]}")
        local sources=() line
        while IFS= read -r line; do sources+=("$line"); done < <(suite_sources "$suite")
        case $suite in
        sid | experimental) opts+=(--aptopt='Acquire::Check-Valid-Until "false"') ;;
        esac
        for older in "$@"; do
            pkgs+=("postgresql-$older")
            while IFS= read -r line; do sources+=("$line"); done < <(suite_sources "$(root_suite "$older")")
        done
        if [ "$suite" = experimental ]; then
            # experimental holds only what differs from sid: sid beside
            # it, and libpq from experimental (19's server needs the newer one).
            sources=("deb $mirror sid main" "deb $mirror experimental main")
            pkgs+=(libpq5/experimental libpq-dev/experimental)
        fi
        log "making the PostgreSQL $major root from $suite ($mirror)" >&2
        tmp=$tar.tmp.$$
        as_root mmdebstrap --quiet --variant=apt --format=tar "${opts[@]}" \
            --include="$(IFS=,; echo "${pkgs[*]}")" \
            "$suite" "$tmp" "${sources[@]}" >&2 || { as_root rm -f "$tmp"; exit 1; }
        as_root mv "$tmp" "$tar"
    ) 9>"$HILO_ROOTS_CACHE/.lock-$name"
    echo "$tar"
}

# root_open MAJOR DIR [OLDER...]: unpacks MAJOR's root (with the OLDER
# majors, see root_tarball) into DIR (a fresh directory)
# and mounts what its servers need: /proc, and /dev/shm for their shared
# memory (the tarball has the device nodes). root_close DIR undoes the
# mounts; callers run it from a trap, so that it runs also on failure.
root_open() {
    local major=$1 dir=$2 tar
    shift 2
    tar=$(root_tarball "$major" "$@")
    root_close "$dir"
    as_root rm -rf --one-file-system "$dir"
    as_root mkdir -p "$dir"
    as_root tar -C "$dir" -xf "$tar"
    as_root mount -t proc proc "$dir/proc"
    as_root mount -t tmpfs -o mode=1777 shm "$dir/dev/shm"
    # The resolver and the host name, for servers listening on localhost.
    as_root cp /etc/hosts "$dir/etc/hosts"
    # The root's postgres gets this machine's user and group IDs, so that
    # both share the port reservations of PG_TEST_PORT_DIR.
    local uid gid
    if uid=$(id -u postgres 2>/dev/null) && gid=$(id -g postgres); then
        in_root "$dir" sh -ec '
            old_uid=$(id -u postgres) old_gid=$(id -g postgres)
            [ "$old_uid:$old_gid" != "$1:$2" ] || exit 0
            groupmod -o -g "$2" postgres
            usermod -o -u "$1" -g "$2" postgres
            find / -xdev -uid "$old_uid" -exec chown -h "$1" {} +
            find / -xdev -gid "$old_gid" -exec chgrp -h "$2" {} +' _ "$uid" "$gid"
    fi
}

root_close() {
    local dir=$1 m
    [ -d "$dir" ] || return 0
    for m in tmp/portlock dev/shm proc; do
        if mountpoint -q "$dir/$m"; then as_root umount -l "$dir/$m" || true; fi
    done
}

# in_root DIR CMD...: runs CMD inside the root, as root, in a clean
# environment; as_pg_in_root runs it as postgres.
in_root() {
    local dir=$1
    shift
    as_root env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        HOME=/root LANG=C.UTF-8 chroot "$dir" "$@"
}

as_pg_in_root() {
    local dir=$1
    shift
    in_root "$dir" runuser -u postgres -- "$@"
}
