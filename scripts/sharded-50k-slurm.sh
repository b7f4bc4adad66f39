#!/usr/bin/env bash
# scripts/sharded-50k.sh's 50,000 concurrent streams, with the three shards started as Slurm
# tasks (`srun -n 3`, `--shard auto` from SLURM_PROCID/SLURM_NTASKS, one `--start-at`) instead
# of background processes: the same workload and servers, launched as a cluster user would
# (bench-overhead/results/HISTORY.md, "50,000 streams as three Slurm tasks"). Each shard still talks to its
# own mock-llm-server on its own loopback address (127.0.0.1-3, one port), because every
# process here may open 20,000 files: one server could not hold 50,000 connections either.
# The servers run outside Slurm (they stand for the remote deployment); on one node only.
#
#   scripts/sharded-50k-slurm.sh [BIN_DIR] [OUT_DIR]
#
# Needs a running Slurm whose node this is (scripts/servers/slurm-local.sh start gives a
# one-node cluster with 8 task slots on this machine). BIN_DIR holds vllm-bench and
# mock-llm-server (default target/bench-fast; `cargo build --profile bench-fast --bins`).
# OUT_DIR must be a directory the tasks can write (here: the same machine). EXTRA_ARGS (split
# on spaces) go after each shard's flags, e.g. EXTRA_ARGS=--no-preconnect. Prints each
# shard's peak RSS (from /usr/bin/time inside its task), then the merge.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="$(realpath "${1:-target/bench-fast}")"
OUT="${2:-$(mktemp -d /tmp/sharded-50k-slurm.XXXXXX)}"
mkdir -p "$OUT"
OUT="$(realpath "$OUT")"
SHARDS=3
PROMPTS="${PROMPTS:-50000}"
PORT="${PORT:-18500}"
command -v srun >/dev/null || { echo "srun not found: start a Slurm first (slurm-local.sh start)" >&2; exit 2; }
sinfo -h -o %T >/dev/null 2>&1 || { echo "no Slurm controller answers: start it first (slurm-local.sh start)" >&2; exit 2; }
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; }
trap cleanup EXIT
for k in $(seq 0 $((SHARDS - 1))); do
  "$BIN/mock-llm-server" --host "127.0.0.$((k + 1))" --port "$PORT" --workers 1 \
    --first-token-delay-ms 50 --token-interval-ms 100 2>"$OUT/mock-$k.log" &
  pids+=($!)
done
for k in $(seq 0 $((SHARDS - 1))); do
  for _ in $(seq 100); do grep -q listening "$OUT/mock-$k.log" && break; sleep 0.1; done
  grep -q listening "$OUT/mock-$k.log" || { echo "mock-llm-server $k did not start; see $OUT/mock-$k.log" >&2; exit 1; }
done
# Far enough ahead for srun to start the tasks and for every shard to build 50,000 requests
# and open ~16,667 connections.
START_AT=$(( $(date +%s) + ${START_DELAY:-60} ))
EXTRA_ARGS="${EXTRA_ARGS:-}"
export BIN OUT PROMPTS PORT START_AT EXTRA_ARGS
echo "srun -n $SHARDS --oversubscribe, --start-at $START_AT ($(date -u -d "@$START_AT" +%T) UTC)" >&2
rc=0
# Every rank: its own server (127.0.0.(rank+1)), K/N from Slurm, one shared --start-at.
srun --ntasks="$SHARDS" --oversubscribe --job-name=sharded-50k --time=15 bash -c '
  k=$SLURM_PROCID
  exec /usr/bin/time -f "shard $k/$SLURM_NTASKS on $(hostname): peak RSS %M KiB, %e s wall, %U s user, %S s sys" \
    "$BIN/vllm-bench" --base-url "http://127.0.0.$((k + 1)):$PORT" --model mock-model \
      --dataset-name random --random-input-len 32 --random-output-len 20 \
      --num-prompts "$PROMPTS" --max-concurrency "$PROMPTS" --ready-check-timeout-sec 0 \
      --shard auto --start-at "$START_AT" --disable-tqdm \
      --save-result --result-dir "$OUT" --result-filename "shard-$k.json" $EXTRA_ARGS \
      >"$OUT/shard-$k.txt" 2>"$OUT/shard-$k.err"' || rc=$?
for k in $(seq 0 $((SHARDS - 1))); do tail -n 1 "$OUT/shard-$k.err" 2>/dev/null || true; done
[ "$rc" = 0 ] || { echo "srun exited $rc (a shard failed); see $OUT" >&2; exit 1; }
"$BIN/vllm-bench" merge "$OUT"/shard-*.json --result-dir "$OUT" --result-filename merged.json
echo "results in $OUT"
