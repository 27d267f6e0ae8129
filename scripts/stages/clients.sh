# Sourced by scripts/test.sh: its stage "clients", with the helpers it uses
# (pass, fail, log, the server helpers of scripts/lib.sh).

# The client libraries (clients/python over psycopg 3 and psycopg2,
# clients/node over node-postgres, clients/java over JDBC), each with its own
# test runner, against one throwaway server with hilo preloaded. Each
# runner's own count of passed and failed tests goes into the totals.
stage_clients() {
    log "clients: Python, Ruby, Node.js and Java clients against a server with hilo"
    ensure_client_packages
    local dir=$WORK/clients port out rc p f
    # start_client_cluster exports where its server is for the runners:
    # local here, so no later stage inherits them (the package stage's
    # pg_virtualenv took PGPORT for its own cluster, and found the port
    # taken once this stage ran beside the TAP files).
    local PGHOST PGPORT PGUSER PGDATABASE HILO_TEST_JDBC_URL
    as_pg mkdir -p "$dir"
    port=$(tcp_port 420)
    start_client_cluster "$dir" "$port"

    # Debian's python3 (the drivers are Debian's), whatever python3 PATH has.
    out=$WORK/clients-python.log
    # A hung runner (a lost wake-up would make next() wait for ever) fails
    # after 10 minutes instead of holding up the suite.
    (cd "$HILO_ROOT/clients/python" && PYTHONDONTWRITEBYTECODE=1 timeout 600 /usr/bin/python3 -m pytest \
        -q -p no:cacheprovider) >"$out" 2>&1 && rc=0 || rc=$?
    # pytest's last line: "2 failed, 1 error, 35 passed in 1.30s".
    p=$(tail -1 "$out" | awk '{for (i = 1; i < NF; i++) if ($(i + 1) ~ /^passed,?$/) s += $i} END {print s + 0}')
    f=$(tail -1 "$out" | awk '{for (i = 1; i < NF; i++) if ($(i + 1) ~ /^(failed|errors?),?$/) s += $i} END {print s + 0}')
    client_counts python "$out" "$rc" "${p:-0}" "${f:-0}"

    # Debian's ruby with ruby-pg, ruby-activerecord and ruby-minitest.
    out=$WORK/clients-ruby.log
    (cd "$HILO_ROOT/clients/ruby" && timeout 600 /usr/bin/ruby test/run.rb) >"$out" 2>&1 && rc=0 || rc=$?
    # minitest's last line: "12 runs, 65 assertions, 0 failures, 0 errors, 0 skips".
    p=$(sed -n 's/^\([0-9]*\) runs, [0-9]* assertions, \([0-9]*\) failures, \([0-9]*\) errors, \([0-9]*\) skips$/\1 \2 \3 \4/p' "$out" |
        tail -1 | awk '{print $1 - $2 - $3 - $4}')
    f=$(sed -n 's/^[0-9]* runs, [0-9]* assertions, \([0-9]*\) failures, \([0-9]*\) errors, [0-9]* skips$/\1 \2/p' "$out" |
        tail -1 | awk '{print $1 + $2}')
    client_counts ruby "$out" "$rc" "${p:-0}" "${f:-0}"

    out=$WORK/clients-node.log
    (cd "$HILO_ROOT/clients/node" && npm ci --no-audit --no-fund --loglevel=error && timeout 600 npm test) \
        >"$out" 2>&1 && rc=0 || rc=$?
    # node --test's summary: "# pass 15" (TAP reporter) or "ℹ pass 15" (spec).
    p=$(sed -n 's/^\(#\|ℹ\) pass \([0-9]*\)$/\2/p' "$out" | tail -1)
    f=$(sed -n 's/^\(#\|ℹ\) fail \([0-9]*\)$/\2/p' "$out" | tail -1)
    client_counts node "$out" "$rc" "${p:-0}" "${f:-0}"

    out=$WORK/clients-java.log
    timeout 600 "$HILO_ROOT/clients/java/build.sh" test >"$out" 2>&1 && rc=0 || rc=$?
    p=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1/p' "$out" | tail -1)
    f=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\2/p' "$out" | tail -1)
    client_counts java "$out" "$rc" "${p:-0}" "${f:-0}"

    stop_cluster "$dir"
}

# client_counts NAME LOG EXIT PASSED FAILED: a runner that failed without
# counting a failure (it did not start, or crashed) counts as one failure.
client_counts() {
    local name=$1 out=$2 rc=$3 p=$4 f=$5
    if [ "$rc" -eq 0 ] && [ "$f" -eq 0 ] && [ "$p" -gt 0 ]; then
        echo "clients $name: $p passed"
        pass "$p"
        return
    fi
    cat "$out"
    echo "clients $name: $p passed, $f failed (exit $rc)"
    pass "$p"
    [ "$f" -gt 0 ] || f=1
    fail "$f" "clients $name"
}
