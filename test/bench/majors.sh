#!/usr/bin/env bash
# test/bench/nextval.sh (quick) on other PostgreSQL majors: inside the
# Debian root of each (scripts/roots.sh), hilo built and installed there,
# the benchmark run as on this machine. Writes docs/bench/nextval-majors.md:
# per major, hilo_nextval against SELECT 1 in pgbench at 2, 8 and 32
# clients, and the bulk cost per call (each major's full tables are left
# out: nextval.sh prints them as it runs).
#
#   test/bench/majors.sh [MAJOR...]        (default: 15 17 18; 15 runs here)
source "$(dirname "$0")/lib.sh"
source "$HILO_ROOT/scripts/roots.sh"

MAJORS=("$@")
[ ${#MAJORS[@]} -gt 0 ] || MAJORS=(15 17 18)
OUT=$(mktemp -d /tmp/hilo-bench-majors.XXXXXX)
ROOTS=()
finish() {
    local r
    for r in "${ROOTS[@]}"; do root_close "$r"; done
    if grep -q " $OUT/" /proc/mounts; then
        echo "mounts left below $OUT, not removing it" >&2
    else
        rm -rf --one-file-system "$OUT"
    fi
}
trap finish EXIT
trap 'exit 143' TERM INT HUP

main() {
    local major root
    for major in "${MAJORS[@]}"; do
        if [ "$major" = "$PG_MAJOR" ]; then
            # This machine's own, for the numbers side by side.
            log "PostgreSQL $major (this machine's): benchmark"
            BULK_ROWS=1000000 INSERT_ROWS=500000 PGBENCH_SECONDS=3 PGBENCH_ROUNDS=1 \
                BENCH_DOC="$OUT/nextval-$major.md" "$HILO_ROOT/test/bench/nextval.sh"
            continue
        fi
        root=$OUT/root-$major
        ROOTS+=("$root")
        log "PostgreSQL $major: root, build, benchmark"
        root_open "$major" "$root"
        mkdir -p "$root/hilo"
        git -C "$HILO_ROOT" ls-files -z --cached --others --exclude-standard |
            (cd "$HILO_ROOT" && tar --null --ignore-failed-read -T - -cf - 2>/dev/null) |
            tar -C "$root/hilo" -xf -
        in_root "$root" env HILO_PG_MAJOR="$major" BULK_ROWS=1000000 INSERT_ROWS=500000 \
            PGBENCH_SECONDS=3 PGBENCH_ROUNDS=1 BENCH_DOC="/hilo/out-$major.md" \
            bash /hilo/test/bench/nextval.sh
        cp "$root/hilo/out-$major.md" "$OUT/nextval-$major.md"
        root_close "$root"
    done
    {
        cat <<DOC
# hilo_nextval on PostgreSQL $(IFS=,; echo "${MAJORS[*]}" | sed "s/,/, /g")

\`test/bench/majors.sh\` on $(date -u +%Y-%m-%d): \`test/bench/nextval.sh\`
(quick: 10^6 calls in the bulk loop, pgbench 3 s, one round) inside a
Debian root of each major (\`scripts/roots.sh\`), on this machine
($(nproc) cores, shared with other work: one short round per major is a
quick look, not a verdict). The targets are those of
[nextval.md](nextval.md): hilo_nextval at least 0.95 of SELECT 1 in
pgbench, and in the bulk loop no slower than nextval with CACHE 1000.
Per major, hilo_nextval / SELECT 1 in pgbench, and the bulk cost per call:

| major | 2 clients | 8 clients | 32 clients | bulk, ns per call (nextval CACHE 1000) |
|---|---:|---:|---:|---:|
DOC
        for major in "${MAJORS[@]}"; do
            # The targets of the benchmark's own document, one row.
            awk -v major="$major" '
                /^- pgbench, [0-9]+ clients:/ { r[++n] = $10 }
                /^- bulk:/ { bulk = $4 " (" $11 ")" }
                END { printf "| %s | %s | %s | %s | %s |\n", major, r[1], r[2], r[3], bulk }
            ' "$OUT/nextval-$major.md"
        done
    } >"$HILO_ROOT/docs/bench/nextval-majors.md"
    log "wrote docs/bench/nextval-majors.md"
}

main; exit
