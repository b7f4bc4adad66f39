#!/usr/bin/env bash
# agentic-overhead.sh - what an agentic replay costs the client per streamed event, against a
# --multi-turn run of the same shape (issue 40: "no more client CPU per event than a
# multi-turn run"). The mock on core 0 (first token 50 ms, then one token every 10 ms, one
# token per chunk, every delay ± 2 ms); vllm-bench on core 1, the whole client (every
# thread) measured. Three runs per round, interleaved:
#
# - agentic: `vllm-bench synthesize agentic` (SESSIONS sessions, seed 1, --max-isl 120000,
#   --max-osl 200) replayed at LANES lanes from turn 0 (--agentic-start-ratio 0,0, no warm-up,
#   so no one-token primers), bounded by --duration DURATION;
# - multi-turn: `--dataset-name random --multi-turn` of the corpus's shape, read from its
#   files: turns per session (the root's mean), turn 0's prompt, the new tokens per later
#   turn, the output tokens and the idle gap between turns (their means), LANES conversations
#   at once, 4×LANES of them, bounded by the same --duration. Its answers are the mock's,
#   threaded into the history;
# - agentic-same: those multi-turn sessions as a Mooncake JSONL (SPEC §1.4: the same turns,
#   lengths and think time) replayed at LANES lanes: the replay's code on the multi-turn
#   run's own timing. The synthetic corpus's streams are spread in time (lognormal gaps,
#   outputs of 30 to 200 tokens, subagents), where the multi-turn conversations start
#   together and stay close, so each wake-up of the client reads more events at once; this
#   run tells the cost of the code from the cost of the workload's timing.
#
# Every run: --ignore-eos, --no-server-metrics, the SmolLM2 tokenizer of the fixtures.
# Printed per run: the client's CPU (user+sys) before the measured run (tokenizer, dataset,
# prompts) and during it (for a replay: its primers, none here, and profiling), the streamed
# events (output tokens, one per chunk), CPU seconds per 100,000 events, whole process and
# measured run only, and the client's sleeps (voluntary context switches, all threads) per
# 100 events: how many events each wake-up found.
#
# Usage: bench-overhead/agentic-overhead.sh [ROUNDS] [LANES] [DURATION] [SESSIONS]
#   (defaults 2, 32, 60, 80; needs taskset, python3 and the bench-fast binaries:
#   cargo build --locked --profile bench-fast --bins)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${CARGO_TARGET_DIR:-$root/target}/bench-fast"
rounds="${1:-2}"
lanes="${2:-32}"
duration="${3:-60}"
sessions="${4:-80}"
for tool in taskset python3; do
    command -v "$tool" >/dev/null || { echo "agentic-overhead.sh: $tool is required" >&2; exit 2; }
done
for b in vllm-bench mock-llm-server; do
    [[ -x "$bin/$b" ]] || { echo "agentic-overhead.sh: $bin/$b missing (build the bench-fast profile)" >&2; exit 2; }
done
work="$(mktemp -d)"
port=$((20000 + $$ % 20000))
cleanup() {
    [[ -n "${mock:-}" ]] && kill "$mock" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
"$bin/vllm-bench" synthesize agentic --num-sessions "$sessions" --seed 1 --max-isl 120000 \
    --max-osl 200 --output "$work/corpus" >/dev/null

taskset -c 0 "$bin/mock-llm-server" --port "$port" --workers 1 --model mock-model \
    --no-tokenize --first-token-delay-ms 50 --token-interval-ms 10 --jitter-ms 2 \
    >/dev/null 2>&1 &
mock=$!
for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.1
done

export AO_BIN="$bin/vllm-bench" AO_ROOT="$root" AO_WORK="$work" AO_PORT="$port" \
    AO_LANES="$lanes" AO_DURATION="$duration" AO_ROUNDS="$rounds"
python3 - <<'PY'
import glob, json, math, os, statistics, subprocess

env = os.environ
work, lanes, duration = env["AO_WORK"], int(env["AO_LANES"]), env["AO_DURATION"]

# The corpus's shape (root streams; subagents are the replay's extra).
turns, in0, new, out, gaps = [], [], [], [], []
for path in sorted(glob.glob(f"{work}/corpus/*.json")):
    reqs = [r for r in json.load(open(path))["requests"] if r["type"] != "subagent"]
    turns.append(len(reqs))
    in0.append(reqs[0]["in"])
    out += [r["out"] for r in reqs]
    for a, b in zip(reqs, reqs[1:]):
        new.append(b["in"] - a["in"] - a["out"])
        gaps.append(b["t"] - a["t"] - a["api_time"])
shape = {
    "turns": round(statistics.mean(turns)),
    "input": round(statistics.mean(in0)),
    "per_turn": round(statistics.mean(new)),
    "output": round(statistics.mean(out)),
    "gap_ms": round(1000 * statistics.mean(gaps)),
}
print(f"Corpus: {len(turns)} sessions; multi-turn shape {shape}")

# The multi-turn sessions as Mooncake rows (hash ids: one per 512 tokens).
with open(f"{work}/same.jsonl", "w") as f:
    for s in range(4 * lanes):
        for k in range(shape["turns"]):
            n = shape["input"] if k == 0 else shape["per_turn"]
            row = {"session_id": f"sess-{s:012x}", "input_length": n,
                   "output_length": shape["output"],
                   "hash_ids": list(range(k * 1000, k * 1000 + math.ceil(n / 512)))}
            row.update({"timestamp": 0.0} if k == 0 else {"delay": shape["gap_ms"]})
            f.write(json.dumps(row) + "\n")

common = [
    "--backend", "openai-chat", "--host", "127.0.0.1", "--port", env["AO_PORT"],
    "--model", "mock-model", "--tokenizer", f"{env.get('VLLM_BENCH_CACHE', os.path.expanduser('~/.cache/vllm-bench'))}/fixtures/tokenizers/smollm2",
    "--ignore-eos", "--no-server-metrics", "--duration", duration, "--seed", "0",
    "--save-result", "--result-dir", work,
]
replay = ["--dataset-name", "agentic_trace", "--max-concurrency", str(lanes),
          "--agentic-start-ratio", "0,0", "--dataset-path"]
modes = {
    "agentic": [*replay, f"{work}/corpus"],
    "multi-turn": [
        "--dataset-name", "random", "--multi-turn",
        "--multi-turn-num-turns", str(shape["turns"]),
        "--random-input-len", str(shape["input"]), "--per-turn-input-len", str(shape["per_turn"]),
        "--random-output-len", str(shape["output"]), "--random-range-ratio", "0",
        "--multi-turn-delay-ms", str(shape["gap_ms"]),
        "--num-prompts", str(4 * lanes), "--multi-turn-concurrency", str(lanes),
    ],
    "agentic-same": [*replay, f"{work}/same.jsonl"],
}

def cpu(pid):
    """utime + stime of a live process, seconds."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

def run(mode, tag):
    name = f"{tag}.json"
    cmd = ["taskset", "-c", "1", env["AO_BIN"], *common, "--result-filename", name, *modes[mode]]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    before, lines = None, []
    for line in p.stdout:
        lines.append(line)
        if before is None and line.startswith("Starting main benchmark run"):
            before = cpu(p.pid)
    _, status, usage = os.wait4(p.pid, 0)
    if status != 0 or before is None:
        raise SystemExit(f"{tag} failed ({status}):\n" + "".join(lines[-30:]))
    total = usage.ru_utime + usage.ru_stime
    doc = json.load(open(f"{work}/{name}"))
    return total, before, doc["completed"], doc["total_output_tokens"], usage.ru_nvcsw

print("| round | run | requests | events | CPU s before / during the run "
      "| CPU s /100k events (whole / run) | sleeps /100 events |")
print("|---:|---|---:|---:|---:|---:|---:|")
for r in range(1, int(env["AO_ROUNDS"]) + 1):
    for mode in modes:
        total, before, done, events, sleeps = run(mode, f"{mode}-{r}")
        per = lambda s: s / events * 1e5
        print(f"| {r} | {mode} | {done} | {events} | {before:.2f} / {total - before:.2f} "
              f"| {per(total):.2f} / {per(total - before):.2f} | {100 * sleeps / events:.0f} |",
              flush=True)
PY
echo "Load average: $load_before before, $(cut -d' ' -f1-3 /proc/loadavg) after."
