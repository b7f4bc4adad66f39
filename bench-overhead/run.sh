#!/usr/bin/env bash
# bench-overhead: every available client against the same deterministic mock-llm-server
# workload; writes bench-overhead/results/<date>.{json,md}. See docs/performance.md.
#
# Usage: bench-overhead/run.sh [--full] [--no-build] [harness.py flags...]
#   default   streams 1,100,1000,10000, peers once and vllm-bench and the floor three times
#             (--ratio-repeats: streaming, HTTPS and firehose levels; each HTTPS run beside a
#             plain one), peers up to 1000 streams
#   --full    streams 1,100,1000,5000,10000, three repeats, peers at every level (Python
#             still up to 1000: --python-max-streams), firehose at 100 and 1000 streams
#   --no-build  use the binaries already in target/$PROFILE
# Each run gets a fresh mock (--no-tokenize --timing-report); TTFT/ITL errors are reported
# against what the mock emitted and against the nominal 50/10 ms (harness.py docstring).
# Peers: run bench-overhead/install-peers.sh first (--aiperf --guidellm --python for those;
# a missing peer is reported and skipped). AIPerf and GuideLLM run several processes: their
# CPU is the whole process tree's within the phase each reports as measured (harness.py).
# PROFILE=release builds with fat LTO (what ships); the default bench-fast skips LTO so the
# build takes minutes, not tens of minutes, on small machines.
# Idle CPUs are kept awake for the whole run (a 0 us request on /dev/cpu_dma_latency, for
# every client alike; needs root): pass --host-idle as-is to leave the host's idle states.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
profile="${PROFILE:-bench-fast}"
build=1
extra=()
for arg in "$@"; do
    case "$arg" in
        --full) extra+=(--streams 1,100,1000,5000,10000 --repeats 3 --peer-max-streams 10000
                        --firehose-streams 100,1000) ;;
        --no-build) build=0 ;;
        -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
        *) extra+=("$arg") ;;
    esac
done

for tool in python3 taskset; do
    command -v "$tool" >/dev/null || { echo "run.sh: $tool is required" >&2; exit 2; }
done

target="${CARGO_TARGET_DIR:-$root/target}"
if [[ "$build" == 1 ]]; then
    (cd "$root" && cargo build --locked --profile "$profile" --bins)
fi
bin="$target/$profile"
for b in vllm-bench mock-llm-server; do
    [[ -x "$bin/$b" ]] || { echo "run.sh: $bin/$b missing (build without --no-build)" >&2; exit 2; }
done
# The floor client: its own small workspace (bench-overhead/floor), release build.
floor_target="$target/floor"
if [[ "$build" == 1 ]]; then
    (cd "$here/floor" && CARGO_TARGET_DIR="$floor_target" cargo build --release)
fi
floor="$floor_target/release/floor-client"

sharing="Load average before the run: $(cut -d' ' -f1-3 /proc/loadavg)."
exec python3 "$here/harness.py" --vllm-bench "$bin/vllm-bench" --mock "$bin/mock-llm-server" \
    --floor "$floor" --sharing "$sharing" "${extra[@]}"
