# The monitoring stage of scripts/test.sh (sourced by it): Debian's
# prometheus-postgres-exporter with monitoring/postgres_exporter.yml against
# real hilo servers (one node, then a cluster of three) on loopback; each
# /metrics scrape (curl) is checked against what SQL says, then
# `promtool test rules` runs monitoring/hilo_rules_test.yml. Uses
# scripts/lib.sh's helpers and test.sh's pass, fail, log and PG_BIN (the
# private copy of PostgreSQL with this build of hilo).

HILO_MONITORING_PACKAGES=(prometheus-postgres-exporter prometheus curl)

# monitoring_start_exporter NAME PORT DIR: the exporter against node NAME's
# database postgres, listening on 127.0.0.1:PORT, its log in DIR; it runs
# until monitoring_stop_exporters.
MONITORING_EXPORTERS=()
monitoring_start_exporter() {
    local name=$1 port=$2 dir=$3
    cp "$HILO_ROOT/monitoring/postgres_exporter.yml" "$dir/queries.yml"
    chown "$PG_USER": "$dir/queries.yml"
    rm -f "$dir/exporter-$name.pid"
    as_pg env DATA_SOURCE_NAME="host=${NODE_DIR[$name]} port=${NODE_PORT[$name]} user=$PG_USER dbname=postgres sslmode=disable" \
        bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$dir/exporter-$name.pid" \
        prometheus-postgres-exporter --web.listen-address="127.0.0.1:$port" \
        --extend.query-path="$dir/queries.yml" --disable-default-metrics \
        --disable-settings-metrics >"$dir/exporter-$name.log" 2>&1 &
    local i
    for i in $(seq 50); do [ -s "$dir/exporter-$name.pid" ] && break; sleep 0.1; done
    MONITORING_EXPORTERS+=("$(cat "$dir/exporter-$name.pid")")
}
monitoring_stop_exporters() {
    local pid
    for pid in "${MONITORING_EXPORTERS[@]}"; do kill "$pid" 2>/dev/null || true; done
    MONITORING_EXPORTERS=()
}

# monitoring_scrape PORT OUT [PATTERN]: /metrics into OUT, again every
# 0.5 s for up to 30 s until it has a line matching PATTERN (by default
# any hilo_ series).
monitoring_scrape() {
    local port=$1 out=$2 pattern=${3:-^hilo_} i
    for i in $(seq 60); do
        curl -sf "http://127.0.0.1:$port/metrics" >"$out" 2>/dev/null && grep -qE "$pattern" "$out" && return 0
        sleep 0.5
    done
    return 1
}

# monitoring_value FILE SERIES LABEL=VALUE...: the value of the series whose
# labels include every LABEL=VALUE (empty if none).
monitoring_value() {
    local file=$1 series=$2 line
    shift 2
    while IFS= read -r line; do
        local ok=1 kv
        for kv in "$@"; do
            [[ "$line" == *"${kv%%=*}=\"${kv#*=}\""* ]] || ok=0
        done
        [ $ok -eq 1 ] && { echo "${line##* }"; return; }
    done < <(grep -E "^$series[{ ]" "$file")
}

# monitoring_check WHAT GOT WANT: one check, counted; numbers compare as
# numbers (the exporter prints 1e+06 for 1000000).
MONITORING_FAILED=0
monitoring_check() {
    local what=$1 got=$2 want=$3
    if [ -n "$got" ] && awk -v g="$got" -v w="$want" 'BEGIN { d = g - w; if (d < 0) d = -d;
            m = w < 0 ? -w : w; exit !(d <= 1e-9 * m || d == 0) }'; then
        echo "ok     $what: $got"
    else
        echo "FAILED $what: got '$got', SQL says '$want'"
        MONITORING_FAILED=$((MONITORING_FAILED + 1))
    fi
}

# Every hilo_sequence_* series of every sequence against hilo.status on
# node NAME (IDs are not handed out meanwhile, so they agree exactly).
monitoring_check_sequences() {
    local name=$1 file=$2 seq column metric
    local columns=(issued_since_start:issued_total ids_left:ids_left open_windows:open_windows
        ids_in_open_windows:ids_in_open_windows free_ids:free_ids pool_ids:pool_ids
        buffered_ids:buffered_ids)
    for seq in $(on_node "$name" -c "SELECT sequence FROM hilo.status ORDER BY 1"); do
        for column in "${columns[@]}"; do
            metric=hilo_sequence_${column#*:}
            monitoring_check "$name $metric{sequence=\"$seq\"}" \
                "$(monitoring_value "$file" "$metric" sequence="$seq")" \
                "$(on_node "$name" -c "SELECT ${column%%:*} FROM hilo.status WHERE sequence = '$seq'")"
        done
    done
}

stage_monitoring() {
    log "monitoring: prometheus-postgres-exporter with monitoring/postgres_exporter.yml against one node and a cluster of three, promtool test rules"
    local start=$SECONDS mdir n
    install_missing " for the monitoring stage" "${HILO_MONITORING_PACKAGES[@]}"
    echo "$(dpkg-query -W prometheus-postgres-exporter prometheus | tr '\t\n' ' ')"
    [[ "$(prometheus-postgres-exporter --help 2>&1)" == *--extend.query-path* ]] || {
        fail 1 "monitoring (this prometheus-postgres-exporter has no --extend.query-path)"
        return
    }
    make_pg_dir mdir monitoring
    MONITORING_FAILED=0
    # Nodes of their own (lib.sh's start_node), all stopped at the end; a
    # command that fails is a failed check, not the end of test.sh (errexit
    # does not apply inside a function called before ||).
    local NODE_NAMES=() HILO_NODE_PORT=54700
    local -A NODE_DIR=() NODE_PORT=()
    monitoring_body "$mdir" || MONITORING_FAILED=$((MONITORING_FAILED + 1))
    monitoring_stop_exporters
    for n in "${NODE_NAMES[@]}"; do stop_cluster "${NODE_DIR[$n]}"; done
    echo "monitoring stage: $((SECONDS - start)) s"
    if [ "$MONITORING_FAILED" -eq 0 ]; then pass 1; else fail 1 "monitoring ($MONITORING_FAILED checks)"; fi
}

monitoring_body() {
    local dir=$1 port n i

    # --- One node: every path of handing out IDs, and a sequence near its end.
    start_node m1 "hilo.naptime = '100ms'"
    on_node m1 -c "CREATE EXTENSION hilo" \
        -c "SELECT hilo_create('orders', block_size => 100)" \
        -c "SELECT hilo_create('events', block_size => 1000)" \
        -c "SELECT hilo_create('small', max_value => 1000, block_size => 10)" \
        -c "SELECT hilo_take('orders', 5)" -c "SELECT hilo_nextval('orders') FROM generate_series(1, 250)" \
        -c "SELECT hilo_take('events', 25000) FROM generate_series(1, 6)" \
        -c "SELECT hilo_take('small', 990)" >/dev/null
    # The allocator tops the pools up after the calls: wait until it is done.
    sleep 2
    port=$(free_port 9700)
    monitoring_start_exporter m1 "$port" "$dir"
    if monitoring_scrape "$port" "$dir/metrics-m1.txt" '^hilo_sequence_ids_left'; then
        cp "$dir/metrics-m1.txt" "$WORK/monitoring-metrics-m1.txt" 2>/dev/null || true
        monitoring_check_sequences m1 "$dir/metrics-m1.txt"
        monitoring_check "m1 hilo_sequence_ids_per_second{sequence=\"events\"} > 0" \
            "$(awk -v v="$(monitoring_value "$dir/metrics-m1.txt" hilo_sequence_ids_per_second sequence=events)" 'BEGIN { print (v > 0) }')" 1
        monitoring_check "m1 TYPE of hilo_sequence_issued_total" \
            "$(grep -c '^# TYPE hilo_sequence_issued_total counter' "$dir/metrics-m1.txt")" 1
        monitoring_check "m1 no hilo_node series on a server in no cluster" \
            "$(grep -c '^hilo_node_' "$dir/metrics-m1.txt")" 0
    else
        echo "FAILED m1: no hilo series in /metrics"; cat "$dir/exporter-m1.log"
        MONITORING_FAILED=$((MONITORING_FAILED + 1))
    fi
    monitoring_stop_exporters

    # --- Three nodes: the serving node of a 'cluster' sequence, peers, the agent.
    local conf=("hilo.agent_database = 'postgres'" "hilo.agent_interval = '300ms'"
        "hilo.claim_timeout = '2s'" "hilo.lease_time = '1s'")
    for n in c1 c2 c3; do
        start_node "$n" "${conf[@]}"
        on_node "$n" -c "CREATE EXTENSION hilo" >/dev/null
    done
    for n in c1 c2 c3; do
        on_node c1 -c "SELECT hilo_add_node('$n', \$\$$(node_conninfo "$n")\$\$)" >/dev/null
    done
    on_node c1 -c "SELECT hilo_create('c', ordering => 'cluster', window_size => 1000)" \
        -c "SELECT hilo_create('plain', window_size => 1000)" >/dev/null
    for n in c1 c2 c3; do
        for i in $(seq 100); do
            on_node "$n" -c "SELECT hilo_nextval('c')" >/dev/null 2>&1 && break
            sleep 0.3
        done
    done
    port=$(free_port 9710)
    monitoring_start_exporter c2 "$port" "$dir"
    if monitoring_scrape "$port" "$dir/metrics-c2.txt" '^hilo_lease_serving_node'; then
        cp "$dir/metrics-c2.txt" "$WORK/monitoring-metrics-c2.txt" 2>/dev/null || true
        monitoring_check_sequences c2 "$dir/metrics-c2.txt"
        monitoring_check "c2 hilo_lease_serving_node{sequence=\"c\"}" \
            "$(monitoring_value "$dir/metrics-c2.txt" hilo_lease_serving_node sequence=c)" \
            "$(on_node c2 -c "SELECT serving_node FROM hilo.status WHERE sequence = 'c'")"
        # The lease age: as hilo.status's serving_since says, and it grows
        # while the holder stays.
        local age age_sql
        sleep 2
        monitoring_scrape "$port" "$dir/metrics-c2-age.txt" '^hilo_lease_age_seconds' || true
        age=$(monitoring_value "$dir/metrics-c2-age.txt" hilo_lease_age_seconds sequence=c)
        age_sql=$(on_node c2 -c "SELECT extract(epoch FROM clock_timestamp() - serving_since)
                                   FROM hilo.status WHERE sequence = 'c'")
        monitoring_check "c2 hilo_lease_age_seconds{sequence=\"c\"} >= 2, at most SQL's age" \
            "$(awk -v a="$age" -v s="$age_sql" 'BEGIN { print (a != "" && a >= 2 && a <= s && s - a < 30) }')" 1
        monitoring_check "c2 hilo_node_reachable_peers" \
            "$(monitoring_value "$dir/metrics-c2.txt" hilo_node_reachable_peers node=c2)" 2
        monitoring_check "c2 hilo_node_fenced" \
            "$(monitoring_value "$dir/metrics-c2.txt" hilo_node_fenced node=c2)" 0
        monitoring_check "c2 hilo_node_agent_pass_age_seconds < 10" \
            "$(awk -v v="$(monitoring_value "$dir/metrics-c2.txt" hilo_node_agent_pass_age_seconds node=c2)" 'BEGIN { print (v >= 0 && v < 10) }')" 1
        monitoring_check "c2 hilo_peer_reachable{peer=\"c3\"}" \
            "$(monitoring_value "$dir/metrics-c2.txt" hilo_peer_reachable peer=c3)" 1
        # c3 stops: c2's agent sees it, and so does the next scrape.
        pg_ctl_node c3 -m immediate stop
        for i in $(seq 120); do
            [ "$(on_node c2 -c "SELECT reachable FROM hilo.nodes WHERE name = 'c3'")" = f ] && break
            sleep 0.5
        done
        monitoring_scrape "$port" "$dir/metrics-c2-down.txt" 'hilo_peer_reachable\{.*peer="c3".* 0$' || true
        monitoring_check "c2 hilo_peer_reachable{peer=\"c3\"} with c3 stopped" \
            "$(monitoring_value "$dir/metrics-c2-down.txt" hilo_peer_reachable peer=c3)" 0
        monitoring_check "c2 hilo_node_reachable_peers with c3 stopped" \
            "$(monitoring_value "$dir/metrics-c2-down.txt" hilo_node_reachable_peers node=c2)" 1
    else
        echo "FAILED c2: no hilo_lease_serving_node in /metrics"; cat "$dir/exporter-c2.log"
        MONITORING_FAILED=$((MONITORING_FAILED + 1))
    fi
    monitoring_stop_exporters

    # --- The alert rules.
    if (cd "$HILO_ROOT/monitoring" && promtool check rules hilo_rules.yml && promtool test rules hilo_rules_test.yml); then
        echo "ok     promtool test rules"
    else
        echo "FAILED promtool test rules"
        MONITORING_FAILED=$((MONITORING_FAILED + 1))
    fi
}
