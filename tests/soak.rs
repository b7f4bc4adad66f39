//! Memory per completed request (issue 36): a long run must not hold more per request than its
//! compact record, its inter-token gaps and the report's own per-request figures. Measured as
//! the growth of the process's peak resident memory past the moment the clock starts (so the
//! prompts, built before, are not counted), between a short and a long run of the same
//! workload against the embedded mock: the difference divided by the difference in requests
//! is what one more completed request costs, fixed costs (connections, buffers) cancelled.
//!
//! Ignored by default (a few minutes on a debug build): `cargo test --test tests -- --ignored
//! soak::`. It prints the figure it measured.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::util::TempDir;

/// Streams of the soak (the soak ran 1000).
const STREAMS: &str = "1000";
/// Output tokens per request: 15 inter-token gaps each.
const OUTPUT_LEN: &str = "16";
/// The two run lengths whose difference is measured.
const SHORT: u64 = 20_000;
const LONG: u64 = 120_000;
/// What one more completed request may cost at the peak, in bytes: its record (96 bytes)
/// and gaps (4 bytes each) during the run, then its Python-shaped output (the gaps as f64),
/// and the calculator's copies of its latencies. Before the records were made compact and
/// the merge in place, a request of this workload cost 862 bytes (596 after).
const BOUND_BYTES_PER_REQUEST: u64 = 700;
/// Longest one run may take before the test fails (a debug build on two shared cores).
const RUN_LIMIT: Duration = Duration::from_secs(600);

/// Resident memory of `pid` now, in KiB (`VmRSS`).
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// One run of `requests` requests: (resident KiB when the clock started, peak resident KiB).
// The child is reaped by `wait4` (which also reads its peak memory), not by `Child::wait`.
#[allow(clippy::zombie_processes)]
fn run(requests: u64, dir: &TempDir) -> (u64, u64) {
    let n = requests.to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_vllm-bench"))
        .args([
            "--mock-server",
            "--dataset-name",
            "random",
            "--random-input-len",
            "16",
            "--random-output-len",
            OUTPUT_LEN,
            "--num-prompts",
            &n,
            "--max-concurrency",
            STREAMS,
            "--seed",
            "0",
            "--disable-tqdm",
        ])
        .current_dir(dir.path())
        .env("HF_HUB_OFFLINE", "1")
        .env_remove("VLLM_BENCH_CORES")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn vllm-bench");
    let pid = child.id();
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.contains("Starting main benchmark run") {
                let _ = tx.send(rss_kib(pid));
            }
            text.push_str(&line);
            text.push('\n');
        }
        text
    });
    let deadline = Instant::now() + RUN_LIMIT;
    let (status, peak_kib) = loop {
        let mut status = 0;
        // SAFETY: `usage` is a plain C struct that wait4 fills; `pid` is our own child,
        // not yet reaped (std's `Child` is never waited on here).
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: as above; WNOHANG returns at once.
        let got =
            unsafe { libc::wait4(pid as libc::pid_t, &mut status, libc::WNOHANG, &mut usage) };
        assert!(got >= 0, "wait4: {}", std::io::Error::last_os_error());
        if got > 0 {
            break (status, usage.ru_maxrss as u64);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{requests} requests did not finish within {RUN_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = reader.join().expect("stdout reader");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "exit status {status}:\n{stdout}"
    );
    let completed = stdout
        .lines()
        .find_map(|l| l.strip_prefix("Successful requests:"))
        .map(str::trim);
    assert_eq!(
        completed,
        Some(n.as_str()),
        "every request completes:\n{stdout}"
    );
    let start_kib = rx
        .try_recv()
        .ok()
        .flatten()
        .expect("resident memory read when the clock started");
    (start_kib, peak_kib)
}

#[test]
#[ignore = "a soak of a few minutes: cargo test --test tests -- --ignored soak::"]
fn memory_per_completed_request_is_bounded() {
    let dir = TempDir::new("soak");
    let (start_short, peak_short) = run(SHORT, &dir);
    let (start_long, peak_long) = run(LONG, &dir);
    let grew_short = peak_short.saturating_sub(start_short);
    let grew_long = peak_long.saturating_sub(start_long);
    let per_request = grew_long.saturating_sub(grew_short) * 1024 / (LONG - SHORT);
    println!(
        "soak: {STREAMS} streams, {OUTPUT_LEN} output tokens: peak grew {grew_short} KiB over \
         {SHORT} requests and {grew_long} KiB over {LONG}: {per_request} bytes per completed \
         request (bound {BOUND_BYTES_PER_REQUEST})"
    );
    assert!(
        per_request <= BOUND_BYTES_PER_REQUEST,
        "{per_request} bytes per completed request, over the bound of {BOUND_BYTES_PER_REQUEST}"
    );
}
