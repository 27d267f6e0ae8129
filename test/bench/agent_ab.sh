#!/usr/bin/env bash
# A/B of the agent's pass in two builds of hilo, side by side (
# "the agent benchmark does not get worse"). Each build gets a cluster of
# NODES (3) local nodes with no agent worker; rounds alternate old, new.
# A round creates SEQS (100) new sequences (window_size 1000,
# min_open_windows 2) on node 0 and times, with hilo_agent_run() on node 0:
#   from zero  the passes until every node has 2 open windows of each new
#              sequence (the sum of the passes' times; the check between
#              passes is not counted), and how many passes;
#   steady     5 more passes with nothing to do: the median pass.
# The sequences of earlier rounds stay, so later rounds carry more; both
# builds alike. Prints one line per run and the medians and ratios.
#
#   test/bench/agent_ab.sh OLD_TREE NEW_TREE     (each a built checkout)
#   ROUNDS (3), NODES (3), SEQS (100)
source "$(dirname "$0")/../../scripts/lib.sh"
OLD=$1 NEW=$2
ROUNDS=${ROUNDS:-3}
NODES=${NODES:-3}
SEQS=${SEQS:-100}
[ -f "$OLD/hilo.so" ] && [ -f "$NEW/hilo.so" ] || { echo "usage: $0 OLD_TREE NEW_TREE (built)" >&2; exit 2; }

declare -A BIN
trap stop_nodes EXIT
HILO_NODE_PORT=55600
for v in old new; do
    T=$([ $v = old ] && echo "$OLD" || echo "$NEW")
    make_pg_dir D "agent-ab-$v"
    HILO_ROOT=$T install_private "$D/pg" "$T"
    chown -R "$PG_USER": "$D"
    BIN[$v]=$PG_BIN
    for k in $(seq 0 $((NODES - 1))); do
        start_node "$v$k" "max_connections = 50" "hilo.claim_timeout = '500ms'"
        on_node "$v$k" -c 'CREATE EXTENSION hilo'
    done
    log "forming the $v cluster"
    for k in $(seq 0 $((NODES - 1))); do
        on_node "${v}0" -c "SELECT hilo_add_node('node$k', '$(node_conninfo "$v$k")')" >/dev/null 2>&1
    done
    echo "$v: $(on_node "${v}0" -c 'SELECT count(*) FROM hilo.nodes') nodes"
done

now_ns() { date +%s%N; }
# supplied V R: how many (node, sequence of round R) have 2 open windows.
supplied() { supplied_count "r${2}\\_%" $(for k in $(seq 0 $((NODES - 1))); do echo "$1$k"; done); }
# pass V: one hilo_agent_run() on node 0 of V; prints its milliseconds.
pass() {
    local t0 t1
    t0=$(now_ns)
    on_node "${1}0" -c 'SELECT hilo_agent_run()' >/dev/null
    t1=$(now_ns)
    echo $(((t1 - t0) / 1000000))
}

declare -A ZERO STEADY PASSES
echo "round | build | from zero ms | passes | steady pass ms (median of 5)"
for r in $(seq 1 "$ROUNDS"); do
    for v in old new; do
        PG_BIN=${BIN[$v]}
        on_node "${v}0" -c "SELECT count(hilo_create('r${r}_' || i, window_size => 1000,
                                                  min_open_windows => 2))
                              FROM generate_series(1, $SEQS) i" >/dev/null
        sum=0 passes=0
        while [ "$(supplied "$v" "$r")" -lt $((NODES * SEQS)) ]; do
            sum=$((sum + $(pass "$v")))
            passes=$((passes + 1))
            [ $passes -lt 20 ] || { echo "$v: not supplied after 20 passes" >&2; exit 1; }
        done
        steady=$(for i in 1 2 3 4 5; do pass "$v"; done | sort -n | sed -n 3p)
        ZERO[$v,$r]=$sum STEADY[$v,$r]=$steady PASSES[$v,$r]=$passes
        echo "$r | $v | $sum | $passes | $steady"
    done
done

ratios() { # ratios KIND: new/old per round
    local r
    for r in $(seq 1 "$ROUNDS"); do
        eval "echo \"scale=3; \${$1[new,$r]} / \${$1[old,$r]}\"" | bc -l
    done
}
med() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
for kind in ZERO STEADY; do
    for v in old new; do
        eval "vals=\$(for r in \$(seq 1 $ROUNDS); do echo \${$kind[$v,\$r]}; done)"
        echo "$kind $v: median $(echo "$vals" | med) ms (rounds: $(echo $vals))"
    done
    rs=$(ratios $kind)
    echo "$kind new/old per round: $(echo $rs); median $(echo "$rs" | med)"
done
