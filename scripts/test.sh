#!/usr/bin/env bash
# Runs every hilo test: installs what it needs, builds and installs hilo,
# then runs each stage and ends with the line "N passed, N failed".
#
#   scripts/test.sh                  every stage
#   scripts/test.sh regress tap      only the stages named
#   HILO_FUZZ_SECONDS=600 scripts/test.sh fuzz    a longer fuzzing run
#   HILO_TAP='006*' scripts/test.sh tap          only some TAP files
#   HILO_TAP_LANES=1 scripts/test.sh tap         every TAP file alone (the cluster files always are)
#   HILO_KEEP_WORK=1 scripts/test.sh ...         keep /tmp/hilo-test.* (logs)
#   HILO_BACKGROUND=0 scripts/test.sh            unit, valgrind, fuzz in turn, not beside TAP
#
# Stages: format unit valgrind fuzz regress isolation tap versions clients sanitize monitoring package
source "$(dirname "$0")/lib.sh"
# The stages that have a file of their own.
source "$HILO_ROOT/scripts/stages/clients.sh"
source "$HILO_ROOT/scripts/stages/monitoring.sh"
source "$HILO_ROOT/scripts/stages/package.sh"
source "$HILO_ROOT/scripts/stages/versions.sh"

ALL_STAGES=(format unit valgrind fuzz regress isolation tap versions clients sanitize monitoring package)
STAGES=("$@")
[ ${#STAGES[@]} -gt 0 ] || STAGES=("${ALL_STAGES[@]}")
FUZZ_SECONDS=${HILO_FUZZ_SECONDS:-15}


PASSED=0
FAILED=0
FAILURES=()
pass() { PASSED=$((PASSED + $1)); }
fail() {
    FAILED=$((FAILED + $1))
    FAILURES+=("$2")
}

ensure_packages
log "building hilo"
make -C "$HILO_ROOT" -s -j"$(nproc)"

# Tests that start servers run as postgres, on a copy of the tests it can
# read, against a private copy of PostgreSQL with this build installed.
make_pg_dir WORK test
# stop_background: the background stages (start_background) run in a
# session of their own, which no Ctrl-C reaches: on any exit of this script
# their whole process group goes too.
BACKGROUND_PID=
VERSIONS_PID=
stop_background() {
    if [ -n "$VERSIONS_PID" ]; then
        kill -TERM -- "-$VERSIONS_PID" 2>/dev/null || true
        wait "$VERSIONS_PID" 2>/dev/null || true
        VERSIONS_PID=
    fi
    [ -n "$BACKGROUND_PID" ] || return 0
    kill -TERM -- "-$BACKGROUND_PID" 2>/dev/null || true
    wait "$BACKGROUND_PID" 2>/dev/null || true
    BACKGROUND_PID=
}
trap 'stop_background; cleanup_dirs' EXIT
install_private "$WORK/pg"
cp -r "$HILO_ROOT/sql" "$HILO_ROOT/expected" "$HILO_ROOT/test" "$HILO_ROOT/Makefile" \
    "$HILO_ROOT/hilo.control" "$WORK/"
chown -R "$PG_USER": "$WORK"

stage_format() {
    log "format: clang-format --dry-run on every C++ file"
    local bad=0
    while IFS= read -r f; do
        clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || {
            echo "needs clang-format: $f"
            bad=1
        }
    done < <(cd "$HILO_ROOT" && git ls-files '*.cpp' '*.hpp' '*.h' | sed "s|^|$HILO_ROOT/|")
    if [ $bad -eq 0 ]; then pass 1; else fail 1 "format"; fi
}

stage_unit() {
    log "unit: GoogleTest through CTest"
    local build=$HILO_ROOT/build
    cmake -S "$HILO_ROOT" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
    cmake --build "$build" -j"$(nproc)" >/dev/null
    local out
    out=$(cd "$build" && ctest --output-on-failure -j"$(nproc)" 2>&1) || true
    echo "$out" | grep -E "tests passed|Failed|\*\*\*" || true
    local total failed
    total=$(echo "$out" | sed -n 's/.*tests failed out of \([0-9]*\).*/\1/p')
    failed=$(echo "$out" | sed -n 's/.*tests passed, \([0-9]*\) tests failed.*/\1/p')
    if [ -z "$total" ]; then
        fail 1 "unit (ctest did not run)"
        return
    fi
    pass $((total - failed))
    [ "$failed" -eq 0 ] || fail "$failed" "unit"
}

# Every GoogleTest binary under valgrind memcheck: any invalid access,
# uninitialised read or definite/indirect leak fails it. The simulations run
# a quarter of their random steps here (HILO_SIM_DIVISOR; whole in the unit
# stage): whole, they alone took three of the stage's minutes.
stage_valgrind() {
    log "valgrind: the unit tests under memcheck"
    local build=$HILO_ROOT/build
    cmake -S "$HILO_ROOT" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
    cmake --build "$build" -j"$(nproc)" >/dev/null
    local t logs=$WORK/valgrind
    mkdir -p "$logs"
    for t in "$build"/*_test; do echo "$t"; done |
        HILO_SIM_DIVISOR=4 xargs -P "$(nproc)" -I{} sh -c 'valgrind -q --error-exitcode=99 --leak-check=full \
            --errors-for-leak-kinds=definite,indirect "$1" >"$2/$(basename "$1").log" 2>&1;
            echo $? >"$2/$(basename "$1").rc"' _ {} "$logs"
    for t in "$build"/*_test; do
        local name rc
        name=$(basename "$t")
        rc=$(cat "$logs/$name.rc" 2>/dev/null || echo missing)
        if [ "$rc" = 0 ]; then
            echo "$name: valgrind clean ($(grep -o '\[  PASSED  \] [0-9]* tests' "$logs/$name.log"))"
            pass 1
        else
            grep -v '^\[' "$logs/$name.log" | sed -n 1,60p
            fail 1 "valgrind $name (exit $rc)"
        fi
    done
}

stage_fuzz() {
    log "fuzz: each libFuzzer target for ${FUZZ_SECONDS}s"
    local build=$HILO_ROOT/build-fuzz
    CC=clang CXX=clang++ cmake -S "$HILO_ROOT" -B "$build" -DHILO_FUZZ=ON \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
    cmake --build "$build" -j"$(nproc)" >/dev/null
    # Two targets at a time (each fuzzes on one core), reported in order.
    local target name corpus runs=$WORK/fuzz
    mkdir -p "$runs"
    for target in "$build"/*_fuzz; do
        while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n || true; done
        name=$(basename "$target")
        corpus=$runs/$name
        mkdir -p "$corpus"
        cp -r "$HILO_ROOT/test/fuzz/corpus/${name%_fuzz}/." "$corpus/" 2>/dev/null || true
        (
            rc=0
            cd "$corpus" && "$target" -max_total_time="$FUZZ_SECONDS" "$corpus" >"$corpus.log" 2>&1 || rc=$?
            echo "$rc" >"$corpus.rc"
        ) &
    done
    wait
    for target in "$build"/*_fuzz; do
        name=$(basename "$target")
        corpus=$runs/$name
        if [ "$(cat "$corpus.rc" 2>/dev/null)" = 0 ]; then
            echo "$name: $(grep -o 'Done [0-9]* runs' "$corpus.log" || echo ok)"
            pass 1
        else
            # The target's own message (which invariant broke) comes before
            # the stack trace; the tail has the input, in Base64.
            grep -E "^$name: |ERROR: |runtime error" "$corpus.log" | sed -n 1,5p
            tail -30 "$corpus.log"
            fail 1 "fuzz $name"
        fi
    done
}

# Reads pg_regress' summary: "All N tests passed." or "F of N tests failed."
count_regress() {
    local out=$1 name=$2 total failed
    if grep -qE 'All [0-9]+ tests passed' "$out"; then
        pass "$(sed -n 's/.*All \([0-9]*\) tests passed.*/\1/p' "$out")"
    elif grep -qE '[0-9]+ of [0-9]+ tests failed' "$out"; then
        failed=$(sed -n 's/.* \([0-9]*\) of [0-9]* tests failed.*/\1/p' "$out")
        total=$(sed -n 's/.* [0-9]* of \([0-9]*\) tests failed.*/\1/p' "$out")
        pass $((total - failed))
        fail "$failed" "$name"
    else
        fail 1 "$name (did not finish)"
    fi
}

# The Makefile's test targets, run as postgres on the copy of the tests in
# $WORK, with the PGXS of the PostgreSQL copy in use.
pgxs_make() {
    (cd "$WORK" && as_pg env "$@")
}

# installcheck OUT SUITE [VAR=VALUE...]: `make installcheck` of one suite
# (regress or isolation) on a temporary instance of its own with
# test/regress.conf; results and diffs in OUT, the output in OUT.log.
# VAR=VALUE go into the environment (the sanitize stage's preloads).
installcheck() {
    local out=$1 suite=$2 only
    shift 2
    case $suite in
    regress) only=ISOLATION= ;;
    isolation) only=REGRESS= ;;
    esac
    pgxs_make "$@" make -s PG_CONFIG="$PG_BIN/pg_config" installcheck "$only" \
        EXTRA_REGRESS_OPTS="--temp-instance=$out/instance --outputdir=$out" >"$out.log" 2>&1 || true
}

# installcheck_stage NAME SUITE: one suite, its output, its count.
installcheck_stage() {
    local out=$WORK/$2
    installcheck "$out" "$2"
    cat "$out.log"
    [ -f "$out/regression.diffs" ] && head -100 "$out/regression.diffs"
    count_regress "$out.log" "$1"
}

stage_regress() {
    log "regress: make installcheck (pg_regress) on a temporary instance with hilo preloaded"
    installcheck_stage regress regress
}

stage_isolation() {
    log "isolation: make installcheck (isolationtester specs) on a temporary instance"
    installcheck_stage isolation isolation
}

# prove_one DIR TEST [VAR=VALUE...]: `make prove_installcheck` of one TAP
# file, with its servers and logs in DIR/tmp_check. The files share the
# data directories that HiloTest.pm copies instead of running initdb for
# every node ($WORK/initdb).
prove_one() {
    local dir=$1 t=$2
    shift 2
    as_pg mkdir -p "$dir" "$WORK/initdb"
    (cd "$dir" && as_pg env PATH="$PG_BIN:$PATH" HILO_INITDB_TEMPLATES="$WORK/initdb" "$@" make -s -f "$WORK/Makefile" srcdir="$WORK" \
        PG_CONFIG="$PG_BIN/pg_config" prove_installcheck PROVE_TESTS="test/t/$(basename "$t")")
}

# The single-node TAP files that take longest (10 s to a minute and a
# half each in CI), and the cluster files that take longest (half a
# minute to two): started first, longest first, so that the lanes end
# together instead of one finishing a long file alone (135_patroni, last
# by name, did so).
TAP_LONGEST=(135_patroni 002_concurrency 020_crash_loop 031_cancel_terminate_storm
    121_recreate_storm 073_pool_slot_reused_during_attach 076_monotonic_slot_reused
    001_take_durability 030_abandoned_while_push_locked
    203_max_nodes 317_lease_settings_rolling 332_waits_end_under_locks
    310_cluster_order 312_cluster_order_recreate 311_cluster_membership
    111_pg_upgrade_cluster 320_cluster_direct_forward 322_cluster_forward_cancel
    252_ops_log 313_cluster_order_no_failed_calls 202_cluster_errors
    316_cluster_slow_acceptors 200_cluster_load 300_quorum_order)

# Whether a TAP file is a cluster file. test/t/ is numbered by area: 0NN
# one server, 1NN lifecycle (upgrades, dump and restore, re-creation,
# replication, failover), 2NN cluster membership and agent, 3NN the
# orderings, 4NN keys; the files of 2NN to 4NN start several nodes, and a
# file of another area that does says so in its name
# (111_pg_upgrade_cluster). They run after the files of one server,
# HILO_TAP_CLUSTER_LANES (default 2) at a time: they mostly wait, and one
# at a time the TAP stage took 25 minutes. Two at a time is load
# that has found real bugs: 200_cluster_load's "0 of 3 nodes answered"
# next to 312_cluster_order_recreate (9244db2), and 230's IDs handed out
# twice after a membership change's pre-sync kept the last answer, not the
# highest (d335faf). HILO_TAP_CLUSTER_LANES=1 runs them alone (a busy file
# beside one can make it miss a timeout of seconds).
tap_runs_alone() {
    local name
    name=$(basename "$1" .pl)
    [[ $name == [234][0-9][0-9]_* || $name == *cluster* ]]
}

# run_tap_file TEST: one TAP file; prints its line when it ends and leaves
# its exit status and time in $WORK/tap-NAME.result.
run_tap_file() {
    local t=$1 name start=$SECONDS rc=0
    name=$(basename "$t")
    prove_one "$WORK/tap/$name" "$t" >"$WORK/tap-$name.log" 2>&1 || rc=$?
    echo "$rc $((SECONDS - start))" >"$WORK/tap-$name.result"
    if [ "$rc" -eq 0 ]; then echo "ok     $name ($((SECONDS - start)) s)"; else echo "FAILED $name ($((SECONDS - start)) s)"; fi
}

# run_tap_lanes LANES FILE...: the files, LANES at a time, in this order.
# It counts and waits for its own jobs only: the background stages are a
# job of this shell too.
run_tap_lanes() {
    local lanes=$1 t p pids=() running
    shift
    for t in "$@"; do
        while :; do
            running=()
            for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && running+=("$p"); done
            pids=("${running[@]}")
            [ ${#pids[@]} -ge "$lanes" ] || break
            wait -n "${pids[@]}" || true
        done
        run_tap_file "$t" &
        pids+=($!)
    done
    [ ${#pids[@]} -eq 0 ] || wait "${pids[@]}" || true
}

# The lines of a failed TAP file's log that say what failed (failed tests
# with got/expected, diagnostics, errors of SQL the test ran), at most 30:
# printed again at the very end, where a CI log cut in the middle keeps them.
tap_failure_summary() {
    local name=$1
    echo "--- $name"
    local pattern='(^|\) )not ok|^\[[^]]*\]\([^)]*\) # |^# +(at |Failed test|got:|expected:|>=|<=|>|<|==|!=)'
    pattern+="|^# +'|^(DETAIL|HINT):|error running SQL|^while running|BAIL|died"
    grep -h -E "$pattern" \
        "$WORK/tap/$name"/tmp_check/log/regress_log_* 2>/dev/null |
        grep -v -E '# (connect output|issuing query|results query|Running:)' |
        sed -n 1,30p
}

stage_tap() {
    # HILO_TAP=pattern runs only the matching files, e.g. HILO_TAP='00[56]*'.
    # The files of one server run HILO_TAP_LANES (default 2) at a time, the
    # longest first; then the cluster files (tap_runs_alone)
    # HILO_TAP_CLUSTER_LANES (default 2) at a time, the longest first.
    # HILO_TAP_LANES=1 runs every file alone.
    local lanes=${HILO_TAP_LANES:-2} cluster_lanes=${HILO_TAP_CLUSTER_LANES:-2} t name
    log "tap: make prove_installcheck (PostgreSQL::Test::Cluster tests): files of one server $lanes at a time, cluster files $cluster_lanes at a time"
    local files=() single=() alone=() first
    for t in "$WORK"/test/t/${HILO_TAP:-*}.pl; do [ -f "$t" ] && files+=("$t"); done
    for first in "${TAP_LONGEST[@]}"; do
        for t in "${files[@]}"; do
            [ "$(basename "$t" .pl)" = "$first" ] || continue
            if tap_runs_alone "$t"; then alone+=("$t"); else single+=("$t"); fi
        done
    done
    for t in "${files[@]}"; do
        if [[ " ${TAP_LONGEST[*]} " == *" $(basename "$t" .pl) "* ]]; then
            continue
        elif tap_runs_alone "$t"; then
            alone+=("$t")
        else
            single+=("$t")
        fi
    done
    run_tap_lanes "$lanes" "${single[@]}"
    run_tap_lanes "$cluster_lanes" "${alone[@]}"
    for t in "${files[@]}"; do
        name=$(basename "$t")
        local rc
        read -r rc _ <"$WORK/tap-$name.result" 2>/dev/null || rc=1
        if [ "$rc" -eq 0 ]; then
            pass 1
            continue
        fi
        echo "--- FAILED $name"
        cat "$WORK/tap-$name.log"
        for l in "$WORK/tap/$name"/tmp_check/log/*; do
            [ -f "$l" ] && { echo "--- $l"; tail -40 "$l"; }
        done
        fail 1 "tap $name"
        tap_failure_summary "$name" >>"$WORK/failure-summary"
    done
}

# The pg_regress suite, the isolation specs and the cancel/terminate storm
# (TAP 031, 8 s) against hilo built with
# AddressSanitizer and UndefinedBehaviorSanitizer. PostgreSQL itself is not
# instrumented, so the ASan runtime is preloaded (LD_PRELOAD) into every
# program pg_regress starts: only then do hilo's new and malloc reach ASan's
# allocator (loaded later, with hilo.so, the runtime would see no heap at
# all: PostgreSQL's libraries bind malloc and operator new to glibc and
# libstdc++ first). test/sanitize/swift_demangle_stub.c, preloaded with it,
# keeps the runtime's late initialisation from hanging glibc's locale locks.
# hilo's own code is checked (its stack, globals, the memory it gets from
# new/malloc, and every UBSan check); PostgreSQL's code, and memory from
# palloc, are not. Leak detection is off: PostgreSQL frees memory by
# resetting contexts and exits without freeing. An ASan report aborts the
# process that made it and lands in a report file. UBSan reads its options
# only at its first report, after PostgreSQL has overwritten the process's
# environment with its ps title, so it writes to the server log and exits
# with code 1 (-fno-sanitize-recover). Either way the server restarts, the
# test that ran fails, and the stage fails on the report file or the log.
# hilo is built with -fno-wrapv here (PostgreSQL's -fwrapv would make signed
# overflow defined), so UBSan reports signed overflow in hilo's code too.
# build_sanitized: hilo built with SANITIZE=1 in $WORK/sanitize/src (in the
# background, during the TAP stage, when the suite runs whole).
build_sanitized() {
    local src=$WORK/sanitize/src
    mkdir -p "$src"
    cp -r "$HILO_ROOT/Makefile" "$HILO_ROOT/hilo.control" "$HILO_ROOT/src" "$src/"
    find "$src" \( -name '*.o' -o -name '*.so' -o -name '*.bc' \) -delete
    make -C "$src" -s -j"$(nproc)" SANITIZE=1 && touch "$src/.built"
}

stage_sanitize() {
    log "sanitize: pg_regress, isolation and the cancel/terminate storm against hilo built with ASan and UBSan"
    local src=$WORK/sanitize/src reports=$WORK/sanitize/reports
    [ -f "$src/.built" ] || build_sanitized
    mkdir -p "$reports"
    ldd "$src/hilo.so" | grep libasan >/dev/null || {
        fail 1 "sanitize (hilo.so is not instrumented)"
        return
    }
    # The very runtime hilo.so links, first in every process.
    local runtime
    runtime=$(ldd "$src/hilo.so" | awk '/libasan/ {print $3}')
    gcc -shared -fPIC -o "$src/swift_demangle_stub.so" "$HILO_ROOT/test/sanitize/swift_demangle_stub.c"
    local saved_bin=$PG_BIN saved_pgxs=$PGXS_DIR
    install_private "$WORK/sanitize/pg" "$src"
    chown -R "$PG_USER": "$WORK/sanitize"
    chmod 777 "$reports"
    # No verify_asan_link_order=0: should the runtime not come first after
    # all, ASan refuses to start and so does every test.
    local asan_env=(
        LD_PRELOAD="$runtime $src/swift_demangle_stub.so"
        ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:disable_coredump=1:log_path=$reports/asan"
        UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:abort_on_error=1:log_path=$reports/ubsan"
    )
    as_pg mkdir -p "$WORK/sanitize/storm"
    installcheck "$WORK/sanitize/regress" regress "${asan_env[@]}"
    installcheck "$WORK/sanitize/iso" isolation "${asan_env[@]}"
    # The cancel/terminate storm (TAP 031, shortened): takes, nextval and
    # pushes while sessions are cancelled and terminated at random and the
    # allocator now and then; the allocator once crashed under it.
    prove_one "$WORK/sanitize/storm" 031_cancel_terminate_storm.pl "${asan_env[@]}" HILO_STORM_SECONDS=8 \
        >"$WORK/sanitize/storm.log" 2>&1 || true
    PG_BIN=$saved_bin PGXS_DIR=$saved_pgxs
    cat "$WORK/sanitize/regress.log" "$WORK/sanitize/iso.log" "$WORK/sanitize/storm.log"
    local found=0 f
    for f in "$reports"/*; do
        [ -f "$f" ] || continue
        echo "--- sanitizer report $f"
        head -60 "$f"
        found=1
    done
    if grep -l "runtime error:\|AddressSanitizer\|terminated by signal" \
        "$WORK"/sanitize/{regress,iso}/log/postmaster.log "$WORK"/sanitize/storm/tmp_check/log/*.log \
        2>/dev/null; then
        grep -h -B2 -A20 "runtime error:\|AddressSanitizer\|terminated by signal" \
            "$WORK"/sanitize/{regress,iso}/log/postmaster.log "$WORK"/sanitize/storm/tmp_check/log/*.log \
            2>/dev/null | sed -n 1,80p
        found=1
    fi
    count_regress "$WORK/sanitize/regress.log" "sanitize regress"
    count_regress "$WORK/sanitize/iso.log" "sanitize isolation"
    if grep -q "^Result: PASS" "$WORK/sanitize/storm.log"; then
        pass 1
    else
        fail 1 "sanitize storm (TAP 031)"
    fi
    if [ $found -ne 0 ]; then
        fail 1 "sanitize (sanitizer reports)"
    elif grep -q "tests passed\|tests failed" "$WORK/sanitize/regress.log" &&
        grep -q "tests passed\|tests failed" "$WORK/sanitize/iso.log"; then
        pass 1 # no sanitizer report from either run
    fi
}

# Beside the TAP stage, when it runs, the other stages run in the
# background, in a session of their own whose autogroup runs at nice 19:
# first those that need no server (unit, valgrind, fuzz, and the build of
# the sanitize stage), while the files of one server keep both cores busy;
# then clients, sanitize and package, which start servers of their own,
# while the cluster files run. The TAP files of several
# nodes spend most of their time waiting (claim and lease timeouts), and
# get the CPU whenever they want it (every server started by pg_ctl is in
# an autogroup of its own, at the usual weight; without autogroups, nice 19
# alone does it). The background's servers are private copies on ports of
# their own: pg_regress' temporary instances and pg_virtualenv's clusters
# find a free port, the storm of the sanitize stage reserves its ports in
# the TAP stage's PG_TEST_PORT_DIR, and the TAP servers run from the private
# copy of PostgreSQL made above, which the package's install into the
# system does not touch. Their output and counts come right after the TAP
# stage. HILO_BACKGROUND=0 runs every stage in turn.
BACKGROUND=()
if [[ " ${STAGES[*]} " == *" tap "* ]] && [ "${HILO_BACKGROUND:-1}" != 0 ]; then
    # At the lowest priority a target gets fewer runs in its time: twice it.
    FUZZ_SECONDS=${HILO_FUZZ_SECONDS:-30}
    for stage in "${STAGES[@]}"; do
        case "$stage" in
        unit | valgrind | fuzz) BACKGROUND+=("stage_$stage") ;;
        sanitize) BACKGROUND+=(build_sanitized) ;;
        esac
    done
    for stage in "${STAGES[@]}"; do
        case "$stage" in
        clients | sanitize | monitoring | package) BACKGROUND+=("stage_$stage") ;;
        esac
    done
fi
in_background() { [[ " ${BACKGROUND[*]} " == *" stage_$1 "* ]]; }
VERSIONS_BESIDE=0
if [[ " ${STAGES[*]} " == *" tap "* ]] && [[ " ${STAGES[*]} " == *" versions "* ]] &&
    [ "${HILO_BACKGROUND:-1}" != 0 ]; then
    VERSIONS_BESIDE=1
fi

# start_background: runs the steps in $BACKGROUND in that session, with
# this script's functions and settings (the PostgreSQL copy in PG_BIN and
# PGXS_DIR); their output goes to $WORK/background.log, their counts and
# failures to $WORK/background.counts and $WORK/background.failures. The
# temporary directories are this script's to remove (HILO_TMP_DIRS is empty
# there); a package the package stage installed it purges itself, on any
# exit (stop_background's TERM included).
start_background() {
    # shellcheck disable=SC2016 # expanded by the shell in the new session
    setsid --wait nice -n 19 bash -c "$(declare -f)
        $(declare -p PG_BIN PGXS_DIR PG_MAJOR PG_USER HILO_PACKAGES HILO_PACKAGE_STAGE_PACKAGES HILO_CLIENT_PACKAGES HILO_MONITORING_PACKAGES)"'
        set -euo pipefail
        echo 19 >/proc/self/autogroup 2>/dev/null || true
        HILO_TMP_DIRS=() BACKGROUND_PID=
        SECONDS=$1
        shift
        PASSED=0 FAILED=0 FAILURES=()
        for step in "$@"; do "$step"; done
        echo "$PASSED $FAILED" >"$WORK/background.counts"
        if [ ${#FAILURES[@]} -gt 0 ]; then printf "%s\n" "${FAILURES[@]}"; fi >"$WORK/background.failures"
    ' _ "$SECONDS" "${BACKGROUND[@]}" >"$WORK/background.log" 2>&1 &
    BACKGROUND_PID=$!
}

# collect_background: waits for it, prints its output and adds its counts.
collect_background() {
    [ -n "$BACKGROUND_PID" ] || return 0
    log "waiting for the background stages: ${BACKGROUND[*]#stage_}"
    wait "$BACKGROUND_PID" || true
    BACKGROUND_PID=
    cat "$WORK/background.log"
    local p f line
    if read -r p f <"$WORK/background.counts" 2>/dev/null; then
        pass "$p"
        FAILED=$((FAILED + f))
        while IFS= read -r line; do FAILURES+=("$line"); done <"$WORK/background.failures"
    else
        fail 1 "background stages (${BACKGROUND[*]#stage_}) did not finish"
    fi
}

# One port reservation directory for every TAP lane and the sanitize
# stage's storm (PostgreSQL::Test::Cluster). A PG_TEST_PORT_DIR set by the
# caller is kept: runs from two checkouts at once then share it and never
# pick the same port.
export HILO_ROOT WORK FUZZ_SECONDS PG_TEST_PORT_DIR=${PG_TEST_PORT_DIR:-$WORK/portlock}
as_pg mkdir -p "$PG_TEST_PORT_DIR"
[ ${#BACKGROUND[@]} -eq 0 ] || start_background
[ "$VERSIONS_BESIDE" = 0 ] || start_versions
for stage in "${STAGES[@]}"; do
    case "$stage" in
    unit | valgrind | fuzz | clients | sanitize | monitoring | package)
        in_background "$stage" || "stage_$stage"
        ;;
    tap)
        stage_tap
        collect_background
        collect_versions
        ;;
    versions) [ "$VERSIONS_BESIDE" = 1 ] || stage_versions ;;
    format | regress | isolation) "stage_$stage" ;;
    *)
        echo "unknown stage: $stage (known: ${ALL_STAGES[*]})" >&2
        exit 2
        ;;
    esac
done

echo
if [ -s "$WORK/failure-summary" ]; then
    echo "what failed, in short (each failure's whole output is above):"
    head -120 "$WORK/failure-summary"
    echo
fi
[ ${#FAILURES[@]} -eq 0 ] || echo "failed: ${FAILURES[*]}"
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
