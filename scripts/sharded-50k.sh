#!/usr/bin/env bash
# 50,000 concurrent streams from one machine whose processes may open 20,000 files each:
# three shards of ~16,667 streams, merged (bench-overhead/results/HISTORY.md, "Sharded runs"). A process
# limit binds the server too, so each shard talks to its own mock-llm-server on its own
# loopback address (127.0.0.1-3, one port): one server process cannot hold 50,000
# connections here either.
#
#   scripts/sharded-50k.sh [BIN_DIR] [OUT_DIR]
#
# BIN_DIR holds vllm-bench and mock-llm-server (default target/bench-fast; build them with
# `cargo build --profile bench-fast --bins`). Prints each shard's peak RSS and the merge.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${1:-target/bench-fast}"
OUT="${2:-$(mktemp -d /tmp/sharded-50k.XXXXXX)}"
SHARDS=3
PROMPTS="${PROMPTS:-50000}"
PORT="${PORT:-18500}"
mkdir -p "$OUT"
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
done
# Far enough ahead for every shard to build 50,000 requests and open ~16,667 connections.
T=$(( $(date +%s) + ${START_DELAY:-45} ))
shard_pids=()
for k in $(seq 0 $((SHARDS - 1))); do
  /usr/bin/time -f "shard $k: peak RSS %M KiB, %e s wall, %U s user, %S s sys" \
    "$BIN/vllm-bench" --base-url "http://127.0.0.$((k + 1)):$PORT" --model mock-model \
      --dataset-name random --random-input-len 32 --random-output-len 20 \
      --num-prompts "$PROMPTS" --max-concurrency "$PROMPTS" --ready-check-timeout-sec 0 \
      --shard "$k/$SHARDS" --start-at "$T" --disable-tqdm \
      --save-result --result-dir "$OUT" --result-filename "shard-$k.json" \
      >"$OUT/shard-$k.txt" 2>"$OUT/shard-$k.err" &
  shard_pids+=($!)
done
rc=0
for p in "${shard_pids[@]}"; do wait "$p" || rc=1; done
for k in $(seq 0 $((SHARDS - 1))); do tail -n 1 "$OUT/shard-$k.err"; done
[ "$rc" = 0 ] || { echo "a shard failed; see $OUT" >&2; exit 1; }
"$BIN/vllm-bench" merge "$OUT"/shard-*.json --result-dir "$OUT" --result-filename merged.json
echo "results in $OUT"
