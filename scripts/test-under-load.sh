#!/usr/bin/env bash
# Runs the test suite N times in a row while busy loops keep every core occupied, to find tests
# that race the machine instead of waiting for what they assert on (docs/reliability.md).
#
#   scripts/test-under-load.sh [RUNS] [-- CARGO TEST ARGS...]
#
# RUNS defaults to 10. The tests are built once before the load starts; each run is then
# `cargo test --locked` (plus the arguments after `--`), with one `yes > /dev/null` per core
# beside it. Prints one line per run and a closing "N passed, N failed" line; the log of each
# failed run is kept under target/test-under-load/. Exits nonzero if any run failed.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=10
if [[ $# -gt 0 && $1 != "--" ]]; then
    runs=$1
    shift
fi
[[ ${1:-} == "--" ]] && shift
if ! [[ $runs =~ ^[1-9][0-9]*$ ]]; then
    echo "test-under-load: RUNS must be a positive integer, got '$runs'" >&2
    exit 2
fi

logs=target/test-under-load
mkdir -p "$logs"
echo "== building the tests (no load yet)" >&2
cargo test --locked --no-run "$@" >"$logs/build.log" 2>&1 || {
    echo "test-under-load: the build failed; see $logs/build.log" >&2
    exit 1
}

busy=()
stop_load() {
    if ((${#busy[@]})); then
        kill "${busy[@]}" 2>/dev/null || true
        wait "${busy[@]}" 2>/dev/null || true
    fi
}
trap stop_load EXIT
for _ in $(seq "$(nproc)"); do
    yes >/dev/null &
    busy+=($!)
done
echo "== $runs runs with ${#busy[@]} busy loops beside them" >&2

passed=0
failed=0
for i in $(seq "$runs"); do
    log="$logs/run-$i.log"
    start=$SECONDS
    if cargo test --locked "$@" >"$log" 2>&1; then
        passed=$((passed + 1))
        echo "run $i: ok ($((SECONDS - start)) s)"
        rm -f "$log"
    else
        failed=$((failed + 1))
        echo "run $i: FAILED ($((SECONDS - start)) s): $(grep -E '^(test .* FAILED|    [a-z_:]+$)' "$log" | sort -u | tr '\n' ' ')"
        echo "        log: $log"
    fi
done
echo "$passed passed, $failed failed"
((failed == 0))
