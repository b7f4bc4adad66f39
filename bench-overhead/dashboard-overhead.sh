#!/usr/bin/env bash
# dashboard-overhead.sh - what the live dashboard costs the client: the streaming workload of
# bench-overhead (mock on core 0: first token 50 ms, 10 ms between tokens, 100 tokens) run by
# vllm-bench on core 1 inside a pseudo-terminal (tmux), with `--ui none` and `--ui dashboard`
# interleaved, at 100 and 1000 streams. Prints the client's CPU (user+sys, whole process:
# tokenizer load and dataset included, the same for both) per 100,000 streamed events.
#
# Usage: bench-overhead/dashboard-overhead.sh [ROUNDS]   (default 2; needs tmux, taskset and
# the bench-fast binaries: cargo build --locked --profile bench-fast --bins)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${CARGO_TARGET_DIR:-$root/target}/bench-fast"
rounds="${1:-2}"
tokens=100
# shellcheck source=bench-overhead/tmux-mock.sh
source "$root/bench-overhead/tmux-mock.sh"
need dashboard-overhead.sh "$bin" "build the bench-fast profile" tmux taskset /usr/bin/time
setup dash-overhead
start_mock taskset -c 0 "$bin/mock-llm-server" --port "$port" --workers 1 --model mock-model \
    --num-tokens "$tokens" --no-tokenize --first-token-delay-ms 50 --token-interval-ms 10

# One run in a 120x50 pseudo-terminal; echoes "user sys completed".
run() {
    local ui="$1" streams="$2" n="$3" tag="$4"
    local done="$work/$tag.done"
    local cmd=(/usr/bin/time -f "%U %S" -o "$work/$tag.time" taskset -c 1 "$bin/vllm-bench"
        --backend openai --host 127.0.0.1 --port "$port" --model mock-model
        --tokenizer "${VLLM_BENCH_CACHE:-$HOME/.cache/vllm-bench}/fixtures/tokenizers/smollm2" --dataset-name random
        --random-input-len 32 --random-output-len "$tokens" --ignore-eos --num-prompts "$n"
        --max-concurrency "$streams" --seed 0 --ui "$ui" --save-result --result-dir "$work"
        --result-filename "$tag.json")
    tmux -L "$sock" kill-server 2>/dev/null || true
    LANG=C.UTF-8 tmux -L "$sock" new-session -d -x 120 -y 50 \
        "$(printf '%q ' "${cmd[@]}"); touch $(printf '%q' "$done")"
    for _ in $(seq 1200); do
        [[ -f "$done" ]] && break
        sleep 0.25
    done
    [[ -f "$done" ]] || { echo "dashboard-overhead.sh: $tag did not finish in 300 s" >&2; exit 1; }
    local completed
    completed="$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['completed'])" "$work/$tag.json")"
    echo "$(cat "$work/$tag.time") $completed"
}

echo "| streams | round | --ui | completed | CPU s /100k events (user+sys) |"
echo "|---:|---:|---|---:|---:|"
for streams in 100 1000; do
    n=$((streams * 10))
    for round in $(seq "$rounds"); do
        for ui in none dashboard; do
            read -r user sys completed < <(run "$ui" "$streams" "$n" "$ui-$streams-$round")
            python3 -c "import sys; u,s,c=map(float,sys.argv[1:4]); print(f'| {int(sys.argv[4])} | {sys.argv[5]} | {sys.argv[6]} | {int(c)} | {(u+s)/(c*$tokens)*1e5:.2f} |')" \
                "$user" "$sys" "$completed" "$streams" "$round" "$ui"
        done
    done
done
echo "Load average before the run: $(cut -d' ' -f1-3 /proc/loadavg) (now)."
