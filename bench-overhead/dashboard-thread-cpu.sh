#!/usr/bin/env bash
# dashboard-thread-cpu.sh - what one second of the dashboard costs, read directly: the CPU
# time of the dashboard's own thread over a window of a
# running benchmark, per second of that window. Independent of the machine's load (it counts
# the thread's CPU, not the wall time of the run), so a before/after of a redraw change can be
# taken on a busy machine. The CPU time is the scheduler's (/proc/PID/task/TID/schedstat,
# nanoseconds), finer than stat's clock ticks.
#
# The run: 100 streams against the mock (first token 50 ms, 10 ms between tokens, 100 tokens;
# the mock also serves a DCGM exporter for 2 GPUs, scraped with --gpu-telemetry), in a 120x50
# tmux terminal with --ui dashboard; the window is WINDOW seconds after a 3 s settle.
#
# Usage: bench-overhead/dashboard-thread-cpu.sh [PROFILE] [WINDOW] [ROUNDS]
#   PROFILE: a target/ directory (debug, bench-fast; default debug), WINDOW seconds
#   (default 10), ROUNDS (default 3). Prints one line per round and the load average.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${CARGO_TARGET_DIR:-$root/target}/${1:-debug}"
window="${2:-10}"
rounds="${3:-3}"
# shellcheck source=bench-overhead/tmux-mock.sh
source "$root/bench-overhead/tmux-mock.sh"
need dashboard-thread-cpu.sh "$bin" "cargo build" tmux pgrep
setup dash-thread
start_mock "$bin/mock-llm-server" --port "$port" --workers 1 --model mock-model \
    --num-tokens 100 --no-tokenize --first-token-delay-ms 50 --token-interval-ms 10 --dcgm 2

# Time a task spent on a CPU, ns (the first field of schedstat).
cpu_ns() { cut -d' ' -f1 "$1"; }

for round in $(seq "$rounds"); do
    cmd=("$bin/vllm-bench" --backend openai --host 127.0.0.1 --port "$port" --model mock-model
        --tokenizer "${VLLM_BENCH_CACHE:-$HOME/.cache/vllm-bench}/fixtures/tokenizers/smollm2" --dataset-name random
        --random-input-len 32 --random-output-len 100 --ignore-eos --num-prompts 100000
        --max-concurrency 100 --seed 0 --ui dashboard
        --gpu-telemetry "http://127.0.0.1:$port/metrics")
    tmux -L "$sock" kill-server 2>/dev/null || true
    LANG=C.UTF-8 tmux -L "$sock" new-session -d -x 120 -y 50 "$(printf '%q ' "${cmd[@]}")"
    pid=""
    tid=""
    for _ in $(seq 600); do
        pid="$(pgrep -n -f -- "--port $port --model mock-model --tokenizer" || true)"
        if [[ -n "$pid" ]]; then
            for t in /proc/"$pid"/task/*; do
                [[ "$(cat "$t/comm" 2>/dev/null)" == dashboard ]] && tid="${t##*/}"
            done
        fi
        [[ -n "$tid" ]] && break
        sleep 0.1
    done
    [[ -n "$tid" ]] || { echo "dashboard-thread-cpu.sh: no dashboard thread" >&2; exit 1; }
    sleep 3
    stat="/proc/$pid/task/$tid/schedstat"
    a="$(cpu_ns "$stat")"
    t0="$(date +%s.%N)"
    sleep "$window"
    b="$(cpu_ns "$stat")"
    t1="$(date +%s.%N)"
    tmux -L "$sock" kill-server 2>/dev/null || true
    python3 -c "import sys; a,b,t0,t1=map(float,sys.argv[1:5]); print(f'round {sys.argv[5]}: dashboard thread {(b-a)/1e6/(t1-t0):.2f} ms CPU per s of run (over {t1-t0:.1f} s)')" \
        "$a" "$b" "$t0" "$t1" "$round"
done
echo "Load average: $(cut -d' ' -f1-3 /proc/loadavg)."
