# Sourced by scripts/test.sh: its stage "versions", with the helpers it uses
# (pass, fail, log).

# The versions stage: hilo on the other PostgreSQL majors, each in a
# Debian root (scripts/versions.sh). Beside the TAP stage it runs in a
# session of its own at nice 19 from the start (start_versions) and its
# output and counts come after the TAP stage's (collect_versions); its
# servers are inside the roots, on ports reserved in PG_TEST_PORT_DIR. Its
# roots are in a directory of its own (not under $WORK), which it removes
# itself once their mounts are gone.

# count_versions LOG: adds the counts of the line "versions: N passed, N failed".
count_versions() {
    local line p f
    line=$(grep -E '^versions: [0-9]+ passed, [0-9]+ failed$' "$1" | tail -n 1)
    if [ -z "$line" ]; then
        fail 1 "versions (did not finish)"
        return
    fi
    read -r p f < <(echo "$line" | sed 's/^versions: \([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/')
    pass "$p"
    [ "$f" -eq 0 ] || fail "$f" "versions ($(sed -n 's/^failed: //p' "$1" | tail -n 1))"
}

stage_versions() {
    log "versions: hilo on PostgreSQL 17, 18 and 19, in Debian roots"
    local start=$SECONDS
    "$HILO_ROOT/scripts/versions.sh" 2>&1 | tee "$WORK/versions.log" || true
    count_versions "$WORK/versions.log"
    echo "versions stage: $((SECONDS - start)) s"
}

start_versions() {
    setsid --wait nice -n 19 bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null || true; "$@"' _ \
        "$HILO_ROOT/scripts/versions.sh" \
        >"$WORK/versions.log" 2>&1 &
    VERSIONS_PID=$!
    VERSIONS_START=$SECONDS
}

collect_versions() {
    [ -n "$VERSIONS_PID" ] || return 0
    log "waiting for the versions stage"
    wait "$VERSIONS_PID" || true
    VERSIONS_PID=
    cat "$WORK/versions.log"
    count_versions "$WORK/versions.log"
    echo "versions stage (in the background): ended $((SECONDS - VERSIONS_START)) s after it started"
}
