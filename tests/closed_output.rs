//! Console output that cannot be written never loses the result: the binary with its stdout
//! closed part way (`| head -n 3`), or on a full device (`> /dev/full`), still saves its
//! result file, and exits 0 (a closed pipe, as ripgrep does) or 1 with one line (any other
//! write error), never with a panic.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::TempDir;

/// Longest a 50-request mock run may take here (a debug build on two busy cores).
const RUN_LIMIT: Duration = Duration::from_secs(120);

fn mock_run(dir: &TempDir) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vllm-bench"));
    cmd.args([
        "--mock-server",
        "--num-prompts",
        "50",
        "--random-input-len",
        "16",
        "--random-output-len",
        "4",
        "--disable-tqdm",
        "--save-result",
        "--result-dir",
        dir.arg(),
        "--result-filename",
        "r.json",
    ])
    .env("HF_HUB_OFFLINE", "1")
    .env_remove("VLLM_BENCH_CORES")
    .stdin(Stdio::null());
    cmd
}

/// Waits for `child`, killing it after [`RUN_LIMIT`]; its exit code and stderr.
fn finish(mut child: std::process::Child) -> (Option<i32>, String) {
    let mut stderr = child.stderr.take().expect("stderr");
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    });
    let deadline = Instant::now() + RUN_LIMIT;
    let code = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (code, err.join().expect("stderr reader"))
}

/// Every planned request is in the saved result.
fn assert_result_saved(dir: &TempDir) {
    let text = std::fs::read_to_string(dir.path().join("r.json")).expect("r.json written");
    let v: serde_json::Value = serde_json::from_str(&text).expect("strict JSON");
    assert_eq!(v["num_prompts"], 50, "{v}");
    assert_eq!(v["completed"].as_u64().unwrap_or(0), 50, "{v}");
}

#[test]
fn a_pipe_closed_after_three_lines_keeps_the_result_and_exits_0() {
    let dir = TempDir::new("head");
    let mut child = mock_run(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // `head -n 3`: read three lines, then close the pipe while the run goes on.
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    for _ in 0..3 {
        lines.next().expect("a line").expect("utf-8");
    }
    drop(lines);
    let (code, stderr) = finish(child);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        !stderr.contains("error:"),
        "a closed pipe is not an error: {stderr}"
    );
    assert_result_saved(&dir);
}

#[test]
fn stdout_on_a_full_device_keeps_the_result_and_says_so_in_one_line() {
    let full = match std::fs::OpenOptions::new().write(true).open("/dev/full") {
        Ok(full) => full,
        Err(e) => {
            crate::util::skip_or_fail("/dev/full", &format!("cannot open it: {e}"));
            return;
        }
    };
    let dir = TempDir::new("full");
    let child = mock_run(&dir)
        .stdout(full)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let (code, stderr) = finish(child);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(code, Some(1), "{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(
        errors,
        ["error: cannot write to standard output: No space left on device (os error 28)"],
        "{stderr}"
    );
    assert_result_saved(&dir);
}

#[test]
fn help_into_a_closed_pipe_exits_0_without_a_panic() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_vllm-bench"))
        .arg("--help")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // Closed before the help is written: the write fails with a broken pipe.
    drop(child.stdout.take());
    let (code, stderr) = finish(child);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(code, Some(0), "{stderr}");
}
