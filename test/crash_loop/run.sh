#!/usr/bin/env bash
# A long crash loop by hand (see docs/crash-loop.md): builds hilo, runs
# test/t/020_crash_loop.pl with HILO_CRASH_CYCLES cycles (default 300) and
# prints its summary. Runs as root, like scripts/test.sh.
#
#   HILO_CRASH_CYCLES=500 test/crash_loop/run.sh
#   HILO_CRASH_SEED=1234 test/crash_loop/run.sh    replays a seed's choices
#
# When the run fails, its work directory (server log, the clients' ledgers
# under tap/020_crash_loop.pl/tmp_check) is kept and named.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
export HILO_CRASH_CYCLES=${HILO_CRASH_CYCLES:-300}
out=$(mktemp)
HILO_KEEP_WORK=1 HILO_TAP=020_crash_loop "$root/scripts/test.sh" tap 2>&1 | tee "$out"
status=${PIPESTATUS[0]}
work=$(sed -n 's/^kept: //p' "$out")
rm -f "$out"
echo
[ -n "$work" ] && grep -h '^# crash loop' "$work/tap-020_crash_loop.pl.log"
if [ "$status" -eq 0 ]; then
    rm -rf "$work"
else
    echo "failed; kept $work"
fi
exit "$status"
