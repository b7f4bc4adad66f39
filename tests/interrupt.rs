//! Ctrl-C and SIGTERM through the real binary, in every schedule mode: the run stops at once
//! (also when every request was already claimed and is waiting for its arrival time), requests
//! in flight are cancelled after the grace period, the block and the result JSON are written
//! and marked interrupted, every planned request is accounted for, and the exit status is 130.
//!
//! Each run's schedule is far longer than the test allows (minutes), so a run that ignored the
//! signal fails the test instead of passing late. The signal is sent only once the run is
//! measurably under way (the mock has received requests), never after a sleep.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;
use vllm_bench::mock::{MockConfig, MockServer, MockStats};

use crate::util::{fixture, MOONCAKE};

/// Longest any step here may take (a debug build on two busy cores); the runs themselves
/// would take minutes if the signal were ignored.
pub(crate) const STEP_TIMEOUT: Duration = Duration::from_secs(60);

/// A run of the binary that is signalled part way.
struct Signalled {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    result: Value,
}

fn smollm2() -> String {
    crate::util::smollm2()
        .to_str()
        .expect("utf-8 path")
        .to_string()
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "vllm-bench-interrupt-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create temp dir");
    dir
}

/// Starts the binary in its own process group against `server`, with `extra` flags and
/// `--interrupt-grace-sec grace`, through `via` (a wrapper command such as `timeout`) when
/// given.
pub(crate) fn spawn(
    server: &MockServer,
    dir: &Path,
    extra: &[&str],
    grace: &str,
    via: &[&str],
) -> Child {
    let mut args: Vec<String> = [
        "--base-url",
        &server.base_url(),
        "--model",
        "mock-model",
        "--tokenizer",
        &smollm2(),
        "--seed",
        "0",
        "--disable-tqdm",
        "--interrupt-grace-sec",
        grace,
        "--ready-check-timeout-sec",
        "0",
        "--save-result",
        "--result-dir",
        dir.to_str().expect("utf-8 path"),
        "--result-filename",
        "r.json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    let bin = env!("CARGO_BIN_EXE_vllm-bench");
    let mut cmd = match via.split_first() {
        Some((program, rest)) => {
            let mut c = Command::new(program);
            c.args(rest).arg(bin);
            c
        }
        None => Command::new(bin),
    };
    cmd.args(&args)
        .env("HF_HUB_OFFLINE", "1")
        .env_remove("VLLM_BENCH_CORES")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("spawn vllm-bench")
}

/// Runs the binary (grace 1 s), sends `signal` once the measured run started and the mock's
/// counters satisfy `under_way`, and collects what the run left behind.
fn run_and_signal(
    server: &MockServer,
    name: &str,
    extra: &[&str],
    under_way: impl Fn(&MockStats) -> bool,
    signal: libc::c_int,
) -> Signalled {
    run_and_signal_all(
        server,
        name,
        extra,
        "1",
        under_way,
        &[signal],
        Pace::AsAPerson,
    )
}

/// How several signals follow each other.
#[derive(Clone, Copy, PartialEq)]
enum Pace {
    /// Each once the notice of the one before is on stderr and the window in which a signal
    /// repeats the first has passed: a person pressing Ctrl-C again.
    AsAPerson,
    /// Back to back, as `timeout` or `docker stop` signal a process and its group.
    AtOnce,
}

/// [`run_and_signal`] with `--interrupt-grace-sec grace` and several signals at `pace`.
fn run_and_signal_all(
    server: &MockServer,
    name: &str,
    extra: &[&str],
    grace: &str,
    under_way: impl Fn(&MockStats) -> bool,
    signals: &[libc::c_int],
    pace: Pace,
) -> Signalled {
    run_via(server, name, extra, grace, under_way, signals, pace, &[])
}

/// [`run_and_signal_all`] with the binary started through `via`, whose process gets the
/// signals.
#[allow(clippy::too_many_arguments)]
fn run_via(
    server: &MockServer,
    name: &str,
    extra: &[&str],
    grace: &str,
    under_way: impl Fn(&MockStats) -> bool,
    signals: &[libc::c_int],
    pace: Pace,
    via: &[&str],
) -> Signalled {
    let dir = temp_dir(name);
    let mut child = spawn(server, &dir, extra, grace, via);
    let pid = child.id() as libc::pid_t;
    let (started_tx, started_rx) = mpsc::channel();
    let stdout = child.stdout.take().expect("stdout");
    let out = collect_lines(stdout, "Starting main benchmark run", started_tx);
    let (notice_tx, notice_rx) = mpsc::channel();
    let stderr = child.stderr.take().expect("stderr");
    let err = collect_lines(stderr, "Interrupted: no new requests are sent", notice_tx);
    let started = started_rx.recv_timeout(STEP_TIMEOUT).is_ok();
    if started {
        wait_until(STEP_TIMEOUT, || under_way(&server.stats()));
        for (i, &signal) in signals.iter().enumerate() {
            if i > 0 && pace == Pace::AsAPerson {
                // The first signal was handled (its notice is out) before the next one, and
                // the next one is no repeat of it. The window is counted from the notice,
                // which the process prints after it took the first signal's time: counted
                // from the first kill, a process that a busy machine let take the signal late
                // saw the second one inside the window and rightly ignored it.
                let _ = notice_rx.recv_timeout(STEP_TIMEOUT);
                let noticed = Instant::now();
                let window = vllm_bench::runtime::stop_handle::SAME_REQUEST_WINDOW;
                wait_until(STEP_TIMEOUT, || noticed.elapsed() > window);
            }
            // SAFETY: plain kill(2) on our own child's pid.
            unsafe { libc::kill(pid, signal) };
        }
    }
    let code = wait_exit(&mut child, STEP_TIMEOUT);
    let stdout = out.join().expect("stdout reader");
    let stderr = err.join().expect("stderr reader");
    assert!(
        started,
        "the measured run never started:\n{stdout}\n{stderr}"
    );
    let result = std::fs::read_to_string(dir.join("r.json"))
        .map(|s| serde_json::from_str(&s).unwrap_or_else(|e| panic!("result JSON: {e}\n{s}")))
        .unwrap_or(Value::Null);
    let _ = std::fs::remove_dir_all(&dir);
    Signalled {
        code,
        stdout,
        stderr,
        result,
    }
}

/// Reads `stream` to its end on a thread, signalling `seen` when a line starts with
/// `marker`; the thread returns everything read.
pub(crate) fn collect_lines(
    stream: impl std::io::Read + Send + 'static,
    marker: &'static str,
    seen: mpsc::Sender<()>,
) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            if line.starts_with(marker) {
                let _ = seen.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    })
}

/// Polls `cond` every 10 ms until it holds; panics after `limit`.
fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "condition not reached in {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The exit code, or `None` if the process had to be killed after `limit` (it ignored the
/// signal).
pub(crate) fn wait_exit(child: &mut Child, limit: Duration) -> Option<i32> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(s) = child.try_wait().expect("wait for vllm-bench") {
            return s.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Model requests the mock has answered (control-plane calls such as `/tokenize` left out).
fn completions(s: &MockStats) -> u64 {
    s.by_path.get("/v1/completions").copied().unwrap_or(0)
}

fn count(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} missing: {v}"))
}

/// What every interrupted run must show; returns (completed, failed, not sent).
fn assert_interrupted(run: &Signalled, planned: u64) -> (u64, u64, u64) {
    assert_eq!(
        run.code,
        Some(130),
        "exit status\nstdout:\n{}\nstderr:\n{}",
        run.stdout,
        run.stderr
    );
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    assert!(
        run.stderr.contains("Interrupted: no new requests are sent"),
        "the notice is on stderr without a bar: {}",
        run.stderr
    );
    assert!(
        run.stdout.contains("Serving Benchmark Result"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("Interrupted:"), "{}", run.stdout);
    let r = &run.result;
    assert_eq!(r["vllm_bench_interrupted"], Value::Bool(true), "{r}");
    let (completed, failed, not_sent) = (
        count(r, "completed"),
        count(r, "failed"),
        count(r, "vllm_bench_not_sent"),
    );
    assert_eq!(
        completed + failed + not_sent,
        planned,
        "every request accounted for"
    );
    assert!(not_sent > 0, "the run stopped before its end");
    (completed, failed, not_sent)
}

fn fast_mock() -> MockServer {
    MockServer::start(MockConfig {
        first_token_delay: Duration::from_millis(5),
        token_interval: Duration::from_millis(1),
        ..MockConfig::default()
    })
    .expect("mock server starts")
}

/// A mock that streams a token every 200 ms: a 1000-token answer takes minutes.
fn slow_mock() -> MockServer {
    MockServer::start(MockConfig {
        first_token_delay: Duration::from_millis(5),
        token_interval: Duration::from_millis(200),
        ..MockConfig::default()
    })
    .expect("mock server starts")
}

/// A closed loop of `prompts` 1000-token streams, `concurrency` at a time.
fn closed_loop<'a>(prompts: &'a str, concurrency: &'a str) -> [&'a str; 11] {
    [
        "--dataset-name",
        "random",
        "--random-input-len",
        "8",
        "--random-output-len",
        "1000",
        "--ignore-eos",
        "--num-prompts",
        prompts,
        "--max-concurrency",
        concurrency,
    ]
}

/// 500 requests at 2/s: every request is claimed at once by its own worker, which then waits
/// for its arrival time; Ctrl-C must end those waits.
#[test]
fn ctrl_c_stops_a_rate_driven_run_whose_workers_wait_for_arrivals() {
    let server = fast_mock();
    let run = run_and_signal(
        &server,
        "rate",
        &[
            "--dataset-name",
            "random",
            "--random-input-len",
            "8",
            "--random-output-len",
            "4",
            "--num-prompts",
            "500",
            "--request-rate",
            "2",
        ],
        |s| completions(s) >= 2,
        libc::SIGINT,
    );
    let (completed, _, _) = assert_interrupted(&run, 500);
    assert!(completed >= 1);
}

/// Closed loop with streams that would take minutes: the 4 requests in flight are cancelled
/// after the 1 s grace period and counted as failed (`interrupted`).
#[test]
fn sigterm_cancels_requests_in_flight_after_the_grace_period() {
    let server = slow_mock();
    let run = run_and_signal(
        &server,
        "closed",
        &closed_loop("40", "4"),
        |s| s.in_flight >= 4,
        libc::SIGTERM,
    );
    let (completed, failed, not_sent) = assert_interrupted(&run, 40);
    assert_eq!((completed, failed, not_sent), (0, 4, 36));
    assert_eq!(
        run.result["vllm_bench_failures_by_reason"]["interrupted"],
        4
    );
}

/// A linear ramp-up from 1 to 2 requests/s over 300 requests.
#[test]
fn ctrl_c_stops_a_ramp_up() {
    let server = fast_mock();
    let run = run_and_signal(
        &server,
        "ramp",
        &[
            "--dataset-name",
            "random",
            "--random-input-len",
            "8",
            "--random-output-len",
            "4",
            "--num-prompts",
            "300",
            "--ramp-up-strategy",
            "linear",
            "--ramp-up-start-rps",
            "1",
            "--ramp-up-end-rps",
            "2",
        ],
        |s| completions(s) >= 1,
        libc::SIGINT,
    );
    assert_interrupted(&run, 300);
}

/// The first 200 Mooncake records in real time (72 s of arrivals).
#[test]
fn ctrl_c_stops_a_trace_replay() {
    let server = fast_mock();
    let trace = fixture(MOONCAKE);
    let run = run_and_signal(
        &server,
        "trace",
        &[
            "--dataset-name",
            "timed_trace",
            "--dataset-path",
            trace.to_str().expect("utf-8 path"),
            "--num-prompts",
            "200",
            "--timed-trace-chunk-hash-size",
            "512",
            "--timed-trace-sec-multiplier",
            "0.001",
        ],
        |s| completions(s) >= 3,
        libc::SIGINT,
    );
    assert_interrupted(&run, 200);
}

/// A second Ctrl-C does not wait for the grace period (here ten minutes): the process exits
/// 130 at once, without the block.
#[test]
fn a_second_ctrl_c_exits_at_once() {
    let server = slow_mock();
    let run = run_and_signal_all(
        &server,
        "twice",
        &closed_loop("8", "2"),
        "600",
        |s| s.in_flight >= 2,
        &[libc::SIGINT, libc::SIGINT],
        Pace::AsAPerson,
    );
    assert_eq!(run.code, Some(130), "{}", run.stderr);
    assert!(run.stderr.contains("Interrupted: no new requests are sent"));
    assert!(
        !run.stdout.contains("Serving Benchmark Result"),
        "{}",
        run.stdout
    );
    assert_eq!(
        run.result,
        Value::Null,
        "no result file after the second Ctrl-C"
    );
}

/// Two signals back to back (`docker stop`, a process manager signalling a job's processes)
/// are one request to stop: the block and the result are written, not lost to a "second
/// Ctrl-C".
#[test]
fn two_signals_at_once_are_one_request_to_stop() {
    let server = slow_mock();
    let run = run_and_signal_all(
        &server,
        "at-once",
        &closed_loop("8", "2"),
        "1",
        |s| s.in_flight >= 2,
        &[libc::SIGTERM, libc::SIGTERM],
        Pace::AtOnce,
    );
    assert_interrupted(&run, 8);
}

/// `timeout -s TERM ... vllm-bench`: when `timeout` fires (here: is itself told to stop,
/// which it handles the same way) it signals the benchmark and then its whole process group,
/// so the benchmark gets SIGTERM twice. The result must survive, and the exit status is the
/// benchmark's 130.
#[test]
fn coreutils_timeout_keeps_the_result() {
    if let Err(e) = Command::new("timeout").arg("--version").output() {
        crate::util::skip_or_fail("coreutils timeout", &format!("cannot run it: {e}"));
        return;
    }
    let server = slow_mock();
    let run = run_via(
        &server,
        "timeout",
        &closed_loop("8", "2"),
        "1",
        |s| s.in_flight >= 2,
        &[libc::SIGTERM],
        Pace::AtOnce,
        &["timeout", "-s", "TERM", "600"],
    );
    assert_interrupted(&run, 8);
}

/// Conversations waiting out a minute of think time: Ctrl-C ends the waits at once; the
/// turns never sent are counted as not sent (interrupted, not ended by a failure).
#[test]
fn ctrl_c_stops_conversations_in_their_think_time() {
    let server = fast_mock();
    let run = run_and_signal(
        &server,
        "multi-turn",
        &[
            "--backend",
            "openai-chat",
            "--dataset-name",
            "random",
            "--random-input-len",
            "8",
            "--random-output-len",
            "4",
            "--num-prompts",
            "4",
            "--multi-turn",
            "--multi-turn-num-turns",
            "3",
            "--multi-turn-delay-ms",
            "60000",
        ],
        |s| s.by_path.get("/v1/chat/completions").copied().unwrap_or(0) >= 4,
        libc::SIGINT,
    );
    let (completed, failed, not_sent) = assert_interrupted(&run, 12);
    assert_eq!((completed, failed, not_sent), (4, 0, 8));
    assert!(run
        .result
        .get("vllm_bench_not_sent_session_ended")
        .is_none());
}

/// `timeout` or Ctrl-C before the measured run (here: while the ready check waits for a
/// server that answers every request with a 500): the run stops as it starts, and still
/// reports and saves (the requests not sent counted), instead of dying with nothing said.
#[test]
fn a_signal_before_the_measured_run_still_reports_every_request_as_not_sent() {
    let server = MockServer::start(MockConfig {
        faults: vllm_bench::mock::FaultConfig {
            error_500: 1.0,
            ..Default::default()
        },
        ..MockConfig::default()
    })
    .expect("mock server starts");
    let dir = temp_dir("before-run");
    let mut extra = closed_loop("8", "2").to_vec();
    extra.extend(["--ready-check-timeout-sec", "600"]);
    let mut child = spawn(&server, &dir, &extra, "1", &[]);
    let pid = child.id() as libc::pid_t;
    let (waiting_tx, waiting_rx) = mpsc::channel();
    let out = collect_lines(
        child.stdout.take().expect("stdout"),
        "Waiting for endpoint to become up",
        waiting_tx,
    );
    let (_tx, _rx) = mpsc::channel();
    let err = collect_lines(child.stderr.take().expect("stderr"), "\u{0}", _tx);
    let waiting = waiting_rx.recv_timeout(STEP_TIMEOUT).is_ok();
    if waiting {
        // SAFETY: plain kill(2) on our own child's pid.
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }
    let code = wait_exit(&mut child, STEP_TIMEOUT);
    let (stdout, stderr) = (out.join().expect("stdout"), err.join().expect("stderr"));
    assert!(
        waiting,
        "the ready check never started:\n{stdout}\n{stderr}"
    );
    assert_eq!(code, Some(130), "{stdout}\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let result: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("r.json")).expect("the result is saved"),
    )
    .expect("strict JSON");
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        result["vllm_bench_interrupted"],
        Value::Bool(true),
        "{result}"
    );
    // Every request accounted for. The stop reaches the workers with the run's first
    // progress tick, so requests they claim before it (fast 500s here) may still go out.
    let n = |k: &str| {
        result[k]
            .as_u64()
            .unwrap_or_else(|| panic!("{k}: {result}"))
    };
    assert_eq!(n("completed"), 0, "every answer is a 500: {result}");
    assert_eq!(n("failed") + n("vllm_bench_not_sent"), 8, "{result}");
}
