#!/usr/bin/env bash
# The versions stage of scripts/test.sh: hilo on the PostgreSQL majors
# besides this machine's 15 (which has the whole suite), each in a Debian
# root of its own (scripts/roots.sh) entered with chroot:
#   17, 18: build (-Werror), install, regress and isolation through
#           `make installcheck`, and the TAP files of one server whose
#           PostgreSQL APIs differ between majors (VERSIONS_TAP);
#   19:     build and regress; while it is a release candidate a failure
#           is reported here but not counted;
# and pg_upgrade with hilo from the older majors (test/t/110_*): the 17
# root holds bookworm's 15 too (15 -> 17), the 18 root trixie's 17 and
# bookworm's 15 (17 -> 18, 15 -> 18), each with the hilo built for it
# (this machine's build for 15, the 17 root's for 17, so 17 goes first).
#
#   scripts/versions.sh [MAJOR...]      (default: 17 18 19)
#   HILO_VERSIONS_TAP='005*' scripts/versions.sh 17    some TAP files only
#
# Ends with "versions: N passed, N failed" (the line scripts/test.sh
# counts) and exits non-zero if something counted failed. Work directories
# in HILO_VERSIONS_WORK (default a new /tmp/hilo-versions.*), removed at
# the end unless HILO_KEEP_WORK=1; the roots' mounts go on any exit.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/roots.sh"

MAJORS=("$@")
[ ${#MAJORS[@]} -gt 0 ] || MAJORS=(17 18 19)
# Majors still at a release candidate: their failures are not counted.
PRERELEASE=" 19 "

# The TAP files of one server whose PostgreSQL APIs differ between majors:
# crashes and restarts, buffers, standby and failover, database commands,
# dump and restore, extension upgrade, the crash loop (with fewer cycles
# than on 15); and pg_upgrade across majors when a root has the older one
# (upgrade_tap: one server, and the nodes of a cluster from 15 to 17). The
# other cluster files stay with 15's TAP stage.
VERSIONS_TAP=(001_take_durability 003_preload_and_standby 004_database_commands
    005_nextval_buffers 006_nextval_crash 020_crash_loop 130_failover_sync
    100_upgrade 105_dump_restore)

# The older majors each root holds, for pg_upgrade from them.
upgrades_from() {
    case $1 in
    17) echo 15 ;;
    18) echo 17 15 ;;
    esac
}

PASSED=0
FAILED=0
FAILURES=()
NOT_COUNTED=()
OPEN_ROOTS=()
START=$SECONDS

WORKDIR=${HILO_VERSIONS_WORK:-}
if [ -z "$WORKDIR" ]; then
    WORKDIR=$(mktemp -d /tmp/hilo-versions.XXXXXX)
fi
cleanup() {
    local r
    for r in "${OPEN_ROOTS[@]}"; do root_close "$r"; done
    # Never remove a directory with a mount below it (a bind mount of the
    # same file system would be removed through).
    if grep -q " $WORKDIR/" /proc/mounts; then
        echo "versions: mounts left below $WORKDIR, not removing it" >&2
    elif [ "${HILO_KEEP_WORK:-0}" != 1 ]; then
        for r in "${OPEN_ROOTS[@]}"; do as_root rm -rf --one-file-system "$r"; done
        [ -n "${HILO_VERSIONS_WORK:-}" ] || as_root rm -rf --one-file-system "$WORKDIR"
    else
        echo "kept: $WORKDIR"
    fi
}
trap cleanup EXIT
trap 'exit 143' TERM INT HUP

# result MAJOR WHAT RC: counts one check of MAJOR (or reports it only, for a
# release candidate).
result() {
    local major=$1 what=$2 rc=$3
    if [ "$rc" -eq 0 ]; then
        echo "ok     PostgreSQL $major: $what"
        PASSED=$((PASSED + 1))
    elif [[ "$PRERELEASE" == *" $major "* ]]; then
        echo "FAILED PostgreSQL $major: $what (release candidate: reported, not counted)"
        NOT_COUNTED+=("$major $what")
    else
        echo "FAILED PostgreSQL $major: $what"
        FAILED=$((FAILED + 1))
        FAILURES+=("versions $major $what")
    fi
}

# The source tree as git sees it (tracked and untracked but not ignored
# files): no build products of this machine's major.
copy_source() {
    local dest=$1
    as_root mkdir -p "$dest"
    git -C "$HILO_ROOT" ls-files -z --cached --others --exclude-standard |
        (cd "$HILO_ROOT" && tar --null --ignore-failed-read -T - -cf - 2>/dev/null) |
        as_root tar -C "$dest" -xf -
}

# suite ROOT MAJOR NAME: `make installcheck` of the regress or isolation
# suite on a temporary instance, as postgres inside the root.
suite() {
    local root=$1 major=$2 name=$3 only rc=0 out=/hilo/out/$3
    case $name in
    regress) only=ISOLATION= ;;
    isolation) only=REGRESS= ;;
    esac
    as_pg_in_root "$root" make -C /hilo -s installcheck "$only" \
        EXTRA_REGRESS_OPTS="--temp-instance=$out/instance --outputdir=$out" \
        >"$WORKDIR/$major-$name.log" 2>&1 || rc=$?
    grep -E 'tests (passed|failed)|^not ok|FAILED|failed \(' "$WORKDIR/$major-$name.log" | head -20 || true
    if [ "$rc" -ne 0 ]; then
        tail -20 "$WORKDIR/$major-$name.log"
        [ -f "$root$out/regression.diffs" ] && head -60 "$root$out/regression.diffs"
    fi
    result "$major" "$name" "$rc"
}

# tap ROOT MAJOR: the VERSIONS_TAP files, one at a time, as postgres
# inside the root; the port reservations are shared with the machine's
# (PG_TEST_PORT_DIR, mounted into the root).
# root_prove ROOT T LOG [VAR=VALUE...]: test/t/T.pl in the root, with the
# variables given, its output in LOG; when it fails, the lines that say
# why. Returns its status.
root_prove() {
    local root=$1 t=$2 log=$3 rc=0
    shift 3
    as_pg_in_root "$root" env PG_TEST_PORT_DIR=/tmp/portlock "$@" \
        make -C /hilo -s prove_installcheck PROVE_TESTS="test/t/$t.pl" >"$log" 2>&1 || rc=$?
    if [ "$rc" -ne 0 ]; then
        tail -30 "$log"
        grep -h -E '(^|\) )not ok|^# +(Failed test|got:|expected:)|error running SQL|BAIL|died' \
            "$root"/hilo/tmp_check/log/regress_log_"$t" 2>/dev/null | head -30 || true
    fi
    return "$rc"
}

tap() {
    local root=$1 major=$2 t rc start files=()
    for t in "${VERSIONS_TAP[@]}"; do
        # shellcheck disable=SC2053 # a pattern
        [[ "$t" == ${HILO_VERSIONS_TAP:-*} ]] || continue
        [ -f "$HILO_ROOT/test/t/$t.pl" ] && files+=("$t")
    done
    for t in "${files[@]}"; do
        start=$SECONDS
        rc=0
        root_prove "$root" "$t" "$WORKDIR/$major-tap-$t.log" HILO_CRASH_CYCLES=6 || rc=$?
        result "$major" "tap $t ($((SECONDS - start)) s)" "$rc"
    done
}

# hilo built for this machine's 15, installed into a directory of its own
# (DESTDIR), to copy into the roots that hold 15 beside their major.
stage_hilo_15() {
    [ -d "$WORKDIR/hilo-15" ] && return 0
    local pg_config=/usr/lib/postgresql/15/bin/pg_config
    make -C "$HILO_ROOT" -s -j"$(nproc)" PG_CONFIG="$pg_config" >/dev/null
    make -C "$HILO_ROOT" -s install PG_CONFIG="$pg_config" DESTDIR="$WORKDIR/hilo-15" >/dev/null
}

# upgrade_tap ROOT MAJOR FROM [T]: test/t/T (110_*, the default: one
# server; 111_*: a node of a three-node cluster at a time) from the older
# major FROM to MAJOR, with FROM's hilo put in place first; skipped
# (reported) if no build of hilo for FROM is at hand.
upgrade_tap() {
    local root=$1 major=$2 from=$3 t=${4:-110_pg_upgrade_majors} rc=0 start=$SECONDS
    # shellcheck disable=SC2053 # a pattern
    [[ "$t" == ${HILO_VERSIONS_TAP:-*} ]] || return 0
    [ "$from" != 15 ] || stage_hilo_15
    if [ ! -d "$WORKDIR/hilo-$from" ]; then
        # A run of some majors only (scripts/versions.sh 18) built none.
        echo "skipped PostgreSQL $major: tap $t from $from (no hilo built for $from in this run)"
        return
    fi
    as_root cp -a "$WORKDIR/hilo-$from/." "$root/"
    root_prove "$root" "$t" "$WORKDIR/$major-tap-$t-$from.log" \
        HILO_UPGRADE_FROM="/usr/lib/postgresql/$from" || rc=$?
    if [ "$rc" -eq 0 ] && grep -q 'skipped:' "$WORKDIR/$major-tap-$t-$from.log"; then
        echo "skipped PostgreSQL $major: tap $t from $from: $(sed -n 's/.*skipped: //p' "$WORKDIR/$major-tap-$t-$from.log")"
        return
    fi
    result "$major" "tap $t from $from ($((SECONDS - start)) s)" "$rc"
}

# logrep_tap ROOT MAJOR: test/t/115_* with the publisher on 15 (the root's
# bookworm 15 with this machine's build of hilo) and the subscriber on
# MAJOR: logical replication across majors, the blue/green way up.
logrep_tap() {
    local root=$1 major=$2 t=115_logical_replication rc=0 start=$SECONDS
    # shellcheck disable=SC2053 # a pattern
    [[ "$t" == ${HILO_VERSIONS_TAP:-*} ]] || return 0
    stage_hilo_15
    if [ ! -d "$WORKDIR/hilo-15" ]; then
        echo "skipped PostgreSQL $major: tap $t from 15 (no hilo built for 15 in this run)"
        return
    fi
    as_root cp -a "$WORKDIR/hilo-15/." "$root/"
    root_prove "$root" "$t" "$WORKDIR/$major-tap-$t-15.log" \
        HILO_PUBLISHER_INSTALL_PATH=/usr/lib/postgresql/15 || rc=$?
    result "$major" "tap $t, publisher on 15 ($((SECONDS - start)) s)" "$rc"
}

# The whole run is one function: bash has read all of it before it starts,
# so that an edit of this file meanwhile changes nothing of a run.
main() {
local major root step rc from
# The roots missing from the cache are made all at once (on a fresh
# machine: minutes each, mostly downloads).
install_missing " for the roots" mmdebstrap
for major in "${MAJORS[@]}"; do
    # shellcheck disable=SC2046 # a list of majors
    root_tarball "$major" $(upgrades_from "$major") >/dev/null &
done
wait
for major in "${MAJORS[@]}"; do
    root=$WORKDIR/root-$major
    # shellcheck disable=SC2046 # a list of majors
    set -- $(upgrades_from "$major")
    log "versions: PostgreSQL $major in a $(root_suite "$major") root${1:+ (with $* for pg_upgrade)}"
    step=$SECONDS
    OPEN_ROOTS+=("$root")
    if ! root_open "$major" "$root" "$@"; then
        result "$major" "root (mmdebstrap)" 1
        continue
    fi
    if [ -n "${PG_TEST_PORT_DIR:-}" ] && [ -d "$PG_TEST_PORT_DIR" ]; then
        as_root mkdir -p "$root/tmp/portlock"
        as_root mount --bind "$PG_TEST_PORT_DIR" "$root/tmp/portlock"
    else
        as_root install -d -o postgres -m 0777 "$root/tmp/portlock"
    fi
    copy_source "$root/hilo"
    echo "root ready: $((SECONDS - step)) s"
    step=$SECONDS
    rc=0
    in_root "$root" sh -c 'make -C /hilo -s -j"$(nproc)" && make -C /hilo -s install' \
        >"$WORKDIR/$major-build.log" 2>&1 || rc=$?
    [ "$rc" -eq 0 ] || grep -E 'error|Error' "$WORKDIR/$major-build.log" | sed -n 1,40p
    result "$major" "build and install ($((SECONDS - step)) s)" "$rc"
    [ "$rc" -eq 0 ] || continue
    # What the build installs, for the roots that upgrade from this major.
    in_root "$root" make -C /hilo -s install DESTDIR=/hilo-installed >/dev/null 2>&1 &&
        as_root cp -a "$root/hilo-installed" "$WORKDIR/hilo-$major" || true
    in_root "$root" chown -R postgres: /hilo
    as_pg_in_root "$root" mkdir -p /hilo/out
    suite "$root" "$major" regress
    if [[ "$PRERELEASE" != *" $major "* ]]; then
        suite "$root" "$major" isolation
        tap "$root" "$major"
        for from in $(upgrades_from "$major"); do upgrade_tap "$root" "$major" "$from"; done
        # The nodes of a cluster one at a time, under load on the others:
        # 15 to 17 (to 18, pg_upgrade itself fails here, 110 says why).
        [ "$major" != 17 ] || upgrade_tap "$root" "$major" 15 111_pg_upgrade_cluster
        case " $(upgrades_from "$major") " in *" 15 "*) logrep_tap "$root" "$major" ;; esac
    fi
    echo "PostgreSQL $major: $((SECONDS - step)) s after the build"
    root_close "$root"
done

echo
[ ${#NOT_COUNTED[@]} -eq 0 ] || echo "failed but not counted (release candidates): ${NOT_COUNTED[*]}"
[ ${#FAILURES[@]} -eq 0 ] || echo "failed: ${FAILURES[*]}"
echo "versions stage: $((SECONDS - START)) s"
echo "versions: $PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
}

main; exit
