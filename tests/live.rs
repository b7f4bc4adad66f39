//! Watching a run live (docs/live.md), through the real binary against an in-process mock:
//! the client's own `/metrics` scraped while a sweep runs (counters monotone, a point's final
//! counts equal its result file's), and the dashboard in a real terminal (tmux: the pane
//! shows non-zero figures and the server's while the run goes; the block after it is the
//! block of `--ui none`; Ctrl-C exits 130 with the result saved). Every wait is bounded.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use vllm_bench::mock::{MockConfig, MockServer};

use crate::util::{free_port, mock_random_args, skip_or_fail, TempDir};

/// The longest any wait here may take (a debug build on two busy cores).
const LIMIT: Duration = Duration::from_secs(120);

fn mock(ttft_ms: u64, itl_ms: u64, error_500: f64) -> MockServer {
    let mut cfg = MockConfig {
        first_token_delay: Duration::from_millis(ttft_ms),
        token_interval: Duration::from_millis(itl_ms),
        ..MockConfig::default()
    };
    cfg.faults.error_500 = error_500;
    MockServer::start(cfg).expect("mock server starts")
}

fn get(port: u16) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let (head, body) = out.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_string())
}

/// The value of every sample of `family` by its label text (`run=...,point=...,...`).
fn samples(page: &str, family: &str) -> BTreeMap<String, f64> {
    page.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(family)?.strip_prefix('{')?;
            let (labels, value) = rest.rsplit_once("} ")?;
            Some((labels.to_string(), value.parse().ok()?))
        })
        .collect()
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("result file")).expect("json")
}

#[test]
fn metrics_are_served_mid_run_monotone_and_a_points_final_counts_are_its_results() {
    let server = mock(30, 10, 0.2);
    let dir = TempDir::new("live-metrics");
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let base = mock_random_args(&server.base_url());
    let mut args: Vec<&str> = base.iter().map(String::as_str).collect();
    args.extend([
        "--num-prompts",
        "40",
        "--sweep-max-concurrency",
        "2,4",
        "--ui",
        "none",
        "--metrics-listen",
        &listen,
        "--save-result",
        "--result-dir",
        dir.arg(),
        "--result-filename",
        "m.json",
    ]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_vllm-bench"))
        .args(&args)
        .current_dir(dir.path())
        .env("HF_HUB_OFFLINE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn vllm-bench");
    let started = Instant::now();
    let mut pages = Vec::new();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > LIMIT {
            let _ = child.kill();
            panic!("the sweep did not end within {LIMIT:?}");
        }
        if let Some(page) = get(port) {
            pages.push(page);
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    let _ = child
        .stderr
        .take()
        .map(|mut e| e.read_to_string(&mut stderr));
    assert!(status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("http://{listen}/metrics")),
        "{stderr}"
    );
    assert!(
        pages.len() > 2,
        "scraped while the sweep ran: {}",
        pages.len()
    );
    // Every counter only grows, series by series.
    let counters = [
        "vllm_bench_requests_total",
        "vllm_bench_requests_sent_total",
        "vllm_bench_output_tokens_total",
        "vllm_bench_ttft_seconds_count",
        "vllm_bench_itl_seconds_bucket",
    ];
    for family in counters {
        let mut last: BTreeMap<String, f64> = BTreeMap::new();
        for page in &pages {
            for (labels, v) in samples(page, family) {
                let before = last.insert(labels.clone(), v).unwrap_or(0.0);
                assert!(
                    v >= before,
                    "{family}{{{labels}}} went from {before} to {v}"
                );
            }
        }
    }
    let p0 = "run=\"mock-model\",point=\"0\",shard=\"\"";
    let completed = |page: &str| {
        samples(page, "vllm_bench_requests_total")
            .get(&format!("{p0},outcome=\"completed\""))
            .copied()
    };
    assert!(
        pages
            .iter()
            .any(|p| completed(p).is_some_and(|c| c > 0.0 && c < 40.0)),
        "a scrape in the middle of the first point"
    );
    // Point 0 ended while point 1 ran: its final counts are its result file's.
    let ended = pages
        .iter()
        .find(|p| samples(p, "vllm_bench_run_active").get(p0) == Some(&0.0))
        .expect("a scrape after the first point ended");
    let result = json(&dir.path().join("m-max_concurrency2.json"));
    let outcome =
        |o: &str| samples(ended, "vllm_bench_requests_total")[&format!("{p0},outcome=\"{o}\"")];
    assert_eq!(outcome("completed"), result["completed"].as_f64().unwrap());
    assert_eq!(outcome("failed"), result["failed"].as_f64().unwrap());
    assert!(outcome("failed") > 0.0, "the mock failed some: {result}");
    assert_eq!(
        samples(ended, "vllm_bench_request_failures_total")[&format!("{p0},reason=\"http_500\"")],
        outcome("failed")
    );
    assert_eq!(
        samples(ended, "vllm_bench_output_tokens_total")[p0],
        result["total_output_tokens"].as_f64().unwrap()
    );
    assert_eq!(samples(ended, "vllm_bench_requests_in_flight")[p0], 0.0);
    assert_eq!(
        samples(ended, "vllm_bench_ttft_seconds_count")[p0],
        outcome("completed")
    );
}

/// A tmux server of its own (killed on drop) running the binary in a 120×50 pane that stays
/// after it exits (`remain-on-exit`), so its text and exit status can be read.
struct Tmux {
    socket: String,
    conf: std::path::PathBuf,
}

impl Tmux {
    /// Runs the binary with `args` in a UTF-8 locale; `None` (and a SKIP line) without tmux.
    fn start(name: &str, dir: &TempDir, args: &[String]) -> Option<Tmux> {
        let present = Command::new("tmux")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success());
        if !present {
            skip_or_fail(
                "the dashboard under tmux",
                "tmux is not installed (.ci/run installs it)",
            );
            return None;
        }
        let conf = dir.path().join("tmux.conf");
        std::fs::write(
            &conf,
            "set -g remain-on-exit on\nset -g history-limit 10000\n",
        )
        .expect("tmux.conf");
        let t = Tmux {
            socket: format!("vllm-bench-live-{}-{name}", std::process::id()),
            conf,
        };
        let mut new = vec!["new-session", "-d", "-x", "120", "-y", "50", "-s", "live"];
        let bin = env!("CARGO_BIN_EXE_vllm-bench");
        // More than one argument: tmux executes the binary itself, no shell between.
        new.push(bin);
        new.extend(args.iter().map(String::as_str));
        let ok = t.cmd(&new).status.success();
        assert!(ok, "tmux new-session");
        Some(t)
    }

    fn cmd(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .args(["-L", &self.socket, "-f"])
            .arg(&self.conf)
            .args(args)
            .env("LANG", "C.UTF-8")
            .env_remove("LC_ALL")
            .env_remove("LC_CTYPE")
            .env("HF_HUB_OFFLINE", "1")
            .env_remove("VLLM_BENCH_CORES")
            .output()
            .expect("run tmux")
    }

    /// The pane's text, its history included.
    fn capture(&self) -> String {
        let out = self.cmd(&["capture-pane", "-p", "-J", "-S", "-", "-t", "live"]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The binary's exit status once it ended (minus the signal's number when a signal
    /// killed it). Two sources, because tmux alone can miss the end for good: under load
    /// (the fresh-clone CI run, the two tests looped beside busy loops) tmux saw the pane's
    /// terminal close but never reaped the binary — it stayed a zombie of the tmux server,
    /// exit code 0 in its `/proc/PID/stat`, with `#{pane_dead_status}` empty ever after — so
    /// a run that had printed its block, saved its result and exited looked hung. The
    /// kernel keeps a zombie's wait status (`/proc/PID/stat` field 52, Linux 3.5+): read
    /// there, the end is seen whether or not tmux reaped it. `#{pane_dead_status}` is also
    /// empty for a binary killed by a signal (`#{pane_dead_signal}` then), read too.
    fn exit_status(&self) -> Option<i32> {
        let out = self.cmd(&[
            "display-message",
            "-p",
            "-t",
            "live",
            "#{pane_dead} #{pane_dead_status} #{pane_dead_signal} #{pane_pid}",
        ]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let fields: Vec<&str> = text.trim_end_matches('\n').split(' ').collect();
        let [dead, status, signal, pid] = fields[..] else {
            return None;
        };
        if dead == "1" {
            if let Ok(status) = status.parse() {
                return Some(status);
            }
            if let Ok(signal) = signal.parse::<i32>() {
                return Some(-signal);
            }
        }
        zombie_status(pid)
    }

    /// Waits (bounded) until the pane satisfies `ok`; returns its text.
    fn wait_for(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let started = Instant::now();
        loop {
            let text = self.capture();
            if ok(&text) {
                return text;
            }
            assert!(
                started.elapsed() < LIMIT,
                "waited {LIMIT:?} for {what}; the pane:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits (bounded) for the binary's end; its exit status and the pane's text.
    fn wait_exit(&self) -> (i32, String) {
        let started = Instant::now();
        loop {
            if let Some(status) = self.exit_status() {
                return (status, self.capture());
            }
            assert!(
                started.elapsed() < LIMIT,
                "the run did not end within {LIMIT:?}; {}; the pane:\n{}",
                self.diagnosis(),
                self.capture()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// What tmux says of the pane and, while its process lives, what each of its threads
    /// waits on (and their stacks when gdb is installed): enough to tell a hung binary
    /// from one that died by a signal (no exit status) at once.
    fn diagnosis(&self) -> String {
        let out = self.cmd(&[
            "display-message",
            "-p",
            "-t",
            "live",
            "dead=#{pane_dead} status=#{pane_dead_status} signal=#{pane_dead_signal} pid=#{pane_pid}",
        ]);
        let state = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let Some(pid) = state.rsplit_once("pid=").map(|(_, p)| p.to_string()) else {
            return state;
        };
        let mut text = format!("tmux: {state}");
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task"));
        for task in tasks.into_iter().flatten().flatten() {
            let read = |f: &str| std::fs::read_to_string(task.path().join(f)).unwrap_or_default();
            text.push_str(&format!(
                "\nthread {}: {} waits in {}",
                task.file_name().to_string_lossy(),
                read("comm").trim(),
                read("wchan").trim()
            ));
        }
        if let Ok(gdb) = Command::new("gdb")
            .args(["-p", &pid, "-batch", "-ex", "thread apply all bt 30"])
            .output()
        {
            let bt = String::from_utf8_lossy(&gdb.stdout);
            for l in bt
                .lines()
                .filter(|l| l.starts_with('#') || l.starts_with("Thread"))
            {
                text.push_str(&format!("\n{l}"));
            }
        }
        text
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}

/// The wait status of process `pid` if it is a zombie (it exited and its parent has not
/// reaped it yet): its exit code, or minus the signal that killed it.
fn zombie_status(pid: &str) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name in parentheses: field 3 (the state) onwards.
    let (_, rest) = stat.rsplit_once(") ")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    if fields.first() != Some(&"Z") {
        return None;
    }
    let wait: i32 = fields.get(52 - 3)?.parse().ok()?;
    Some(match wait & 0x7f {
        0 => (wait >> 8) & 0xff,
        signal => -signal,
    })
}

/// A figure of the dashboard's requests line (`sent 12`).
fn figure(pane: &str, name: &str) -> Option<u64> {
    let line = pane.lines().find(|l| l.contains("Requests  planned"))?;
    let at = line.find(&format!("{name} "))? + name.len() + 1;
    line[at..].split_whitespace().next()?.parse().ok()
}

/// The result block (from its title to its closing rule), each line's trailing blanks cut
/// and every figure that depends on timing masked: the counts stay.
fn block(text: &str) -> Vec<String> {
    let exact = [
        "Successful requests:",
        "Failed requests:",
        "Maximum request concurrency:",
        "Total input tokens:",
        "Total generated tokens:",
    ];
    let lines: Vec<&str> = text.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.contains("Serving Benchmark Result"))
        .unwrap_or_else(|| panic!("no block in:\n{text}"));
    let end = (start + 1..lines.len())
        .find(|&i| !lines[i].trim().is_empty() && lines[i].trim().chars().all(|c| c == '='))
        .unwrap_or_else(|| panic!("no end of the block in:\n{text}"));
    lines[start..=end]
        .iter()
        .map(|l| {
            let l = l.trim_end();
            if exact.iter().any(|e| l.starts_with(e)) {
                l.to_string()
            } else {
                mask_numbers(l)
            }
        })
        .collect()
}

/// `l` with each number (a run of digits and points) replaced by one `#`, and the blanks
/// that pad a figure to its column cut: a timing figure may take more digits in one run
/// than in the other (`99.49` against `100.62`).
fn mask_numbers(l: &str) -> String {
    let mut out = String::new();
    let mut in_number = false;
    for c in l.chars() {
        if c.is_ascii_digit() || (in_number && c == '.') {
            if !in_number {
                out.push('#');
            }
            in_number = true;
        } else {
            in_number = false;
            out.push(c);
        }
    }
    let mut squeezed = String::new();
    for word in out.split(' ').filter(|w| !w.is_empty()) {
        if !squeezed.is_empty() {
            squeezed.push(' ');
        }
        squeezed.push_str(word);
    }
    squeezed
}

#[test]
fn the_dashboard_shows_the_run_and_leaves_the_block_of_ui_none() {
    let _serial = crate::util::serial();
    // The mock also speaks as a DCGM exporter for two GPUs (100 W and 110 W, 50 % and 51 %).
    let server = MockServer::start(MockConfig {
        first_token_delay: Duration::from_millis(20),
        token_interval: Duration::from_millis(40),
        dcgm_gpus: 2,
        ..MockConfig::default()
    })
    .expect("mock server starts");
    let dir = TempDir::new("live-dashboard");
    let mut args = mock_random_args(&server.base_url());
    let gpu_telemetry = format!("{}/metrics", server.base_url());
    args.extend(["--gpu-telemetry".to_string(), gpu_telemetry]);
    args.extend(
        [
            "--num-prompts",
            "60",
            "--max-concurrency",
            "2",
            "--seed",
            "7",
            "--save-result",
            "--result-dir",
            dir.arg(),
        ]
        .map(String::from),
    );
    let mut dash = args.clone();
    // No --ui: on a terminal the dashboard is the default.
    dash.extend(["--result-filename", "dash.json"].map(String::from));
    let Some(tmux) = Tmux::start("dash", &dir, &dash) else {
        return;
    };
    // The mock's /metrics is scraped: the server's line shows its running gauge.
    let live = tmux.wait_for("the dashboard with requests sent and completed", |p| {
        figure(p, "sent").is_some_and(|n| n > 0)
            && figure(p, "completed").is_some_and(|n| n > 0)
            && p.contains("Server    running")
            && p.contains("GPU       2 GPUs  power 210 W  utilisation 50.5%  energy")
    });
    assert!(live.contains("TTFT"), "{live}");
    let (status, pane) = tmux.wait_exit();
    assert_eq!(status, 0, "{pane}");
    assert!(
        !pane.contains("Requests  planned"),
        "the dashboard is cleared before the block:\n{pane}"
    );
    let mut none = args.clone();
    none.extend(["--result-filename", "none.json", "--ui", "none"].map(String::from));
    let none: Vec<&str> = none.iter().map(String::as_str).collect();
    let plain = crate::util::vllm_bench(&none, dir.path());
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    assert_eq!(block(&pane), block(&plain.stdout));
    let (a, b) = (
        json(&dir.path().join("dash.json")),
        json(&dir.path().join("none.json")),
    );
    for key in [
        "completed",
        "failed",
        "total_input_tokens",
        "total_output_tokens",
    ] {
        assert_eq!(a[key], b[key], "{key}");
    }
}

/// A run on the dashboard far longer than a test waits (2000 requests, 2 at a time), with a
/// 1 s grace on Ctrl-C, saving `file` into `dir`.
fn long_dashboard_run(server: &MockServer, dir: &TempDir, file: &str) -> Vec<String> {
    let mut args = mock_random_args(&server.base_url());
    args.extend(
        [
            "--num-prompts",
            "2000",
            "--max-concurrency",
            "2",
            "--interrupt-grace-sec",
            "1",
            "--ui",
            "dashboard",
            "--save-result",
            "--result-dir",
            dir.arg(),
            "--result-filename",
            file,
        ]
        .map(String::from),
    );
    args
}

#[test]
fn ctrl_c_on_the_dashboard_exits_130_with_the_result_saved() {
    let _serial = crate::util::serial();
    let server = mock(20, 50, 0.0);
    let dir = TempDir::new("live-ctrl-c");
    let args = long_dashboard_run(&server, &dir, "c.json");
    let Some(tmux) = Tmux::start("ctrl-c", &dir, &args) else {
        return;
    };
    tmux.wait_for("the dashboard with requests completed", |p| {
        figure(p, "completed").is_some_and(|n| n > 0)
    });
    assert!(tmux
        .cmd(&["send-keys", "-t", "live", "C-c"])
        .status
        .success());
    let (status, pane) = tmux.wait_exit();
    assert_eq!(status, 130, "{pane}");
    assert!(pane.contains("Serving Benchmark Result"), "{pane}");
    let r = json(&dir.path().join("c.json"));
    assert_eq!(r["vllm_bench_interrupted"], Value::Bool(true), "{r}");
    let count = |k: &str| r[k].as_u64().unwrap_or(0);
    assert_eq!(
        count("completed") + count("failed") + count("vllm_bench_not_sent"),
        2000,
        "every request accounted for: {r}"
    );
}

/// A pseudo-terminal the test is the terminal of: the master side, and the slave's path.
struct Pty {
    master: std::fs::File,
    slave: std::path::PathBuf,
}

impl Pty {
    /// A new one of `cols` × `rows`; the reason when it cannot be made.
    fn open(cols: u16, rows: u16) -> Result<Pty, String> {
        use std::os::fd::FromRawFd;
        let fail = |what: &str| format!("{what}: {}", std::io::Error::last_os_error());
        // SAFETY: `posix_openpt` takes flags only and returns a new descriptor or -1.
        let fd = unsafe { libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY) };
        if fd < 0 {
            return Err(fail("posix_openpt"));
        }
        // SAFETY: `fd` is a new descriptor nothing else owns; the File closes it.
        let master = unsafe { std::fs::File::from_raw_fd(fd) };
        let mut name = [0 as libc::c_char; 128];
        let size = libc::winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: each call gets the open master descriptor; `ptsname_r` writes at most
        // `name.len()` bytes into `name`; TIOCSWINSZ reads one winsize.
        let ok = unsafe {
            libc::grantpt(fd) == 0
                && libc::unlockpt(fd) == 0
                && libc::ptsname_r(fd, name.as_mut_ptr(), name.len()) == 0
                && libc::ioctl(fd, libc::TIOCSWINSZ, &size) == 0
        };
        if !ok {
            return Err(fail("grantpt/unlockpt/ptsname_r/TIOCSWINSZ"));
        }
        // SAFETY: `ptsname_r` succeeded: `name` holds a NUL-terminated path.
        let path = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) };
        let slave = std::path::PathBuf::from(path.to_str().map_err(|e| e.to_string())?);
        Ok(Pty { master, slave })
    }
}

/// A Ctrl-C typed in the moment the dashboard asks the terminal where its cursor is (the
/// terminal then in raw mode) stops the run as any Ctrl-C: exit 130, the result saved. The
/// test is the terminal (a pseudo-terminal it holds, the binary's controlling terminal), so
/// it types the Ctrl-C while the query is unanswered, and answers only after it.
#[test]
fn ctrl_c_while_the_dashboard_asks_for_the_cursor_stops_the_run() {
    use std::os::unix::process::CommandExt;
    let _serial = crate::util::serial();
    let pty = match Pty::open(120, 50) {
        Ok(p) => p,
        Err(why) => return skip_or_fail("a pseudo-terminal", &why),
    };
    let server = mock(20, 50, 0.0);
    let dir = TempDir::new("live-ctrl-c-query");
    let args = long_dashboard_run(&server, &dir, "q.json");
    let slave = std::fs::File::options()
        .read(true)
        .write(true)
        .open(&pty.slave)
        .expect("open the pty's slave");
    let io = || Stdio::from(slave.try_clone().expect("dup the slave"));
    let mut command = Command::new(env!("CARGO_BIN_EXE_vllm-bench"));
    command
        .args(&args)
        .current_dir(dir.path())
        .env("HF_HUB_OFFLINE", "1")
        .env("LANG", "C.UTF-8")
        .env("TERM", "xterm")
        .stdin(io())
        .stdout(io())
        .stderr(io());
    // SAFETY: between fork and exec only async-signal-safe calls: `setsid` makes the child a
    // session leader, and TIOCSCTTY makes its stdin (the pty) its controlling terminal, its
    // process group the terminal's foreground one (whom a typed Ctrl-C signals).
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn().expect("spawn vllm-bench");
    drop(command);
    drop(slave);
    // Everything the binary writes, read as it comes (a full pty would block it).
    let shown = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
    let reader = {
        let (shown, mut master) = (shown.clone(), pty.master.try_clone().expect("dup"));
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // Ends with an error (EIO) once the binary and every copy of the slave closed.
            while let Ok(n @ 1..) = master.read(&mut buf) {
                shown.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        })
    };
    let text = |shown: &std::sync::Mutex<Vec<u8>>| {
        String::from_utf8_lossy(&shown.lock().unwrap()).into_owned()
    };
    let started = Instant::now();
    while !text(&shown).contains("\x1b[6n") {
        if let Some(status) = child.try_wait().expect("wait") {
            panic!(
                "ended ({status}) before asking for the cursor:\n{}",
                text(&shown)
            );
        }
        if started.elapsed() > LIMIT {
            let _ = child.kill();
            panic!("no cursor query within {LIMIT:?}:\n{}", text(&shown));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // Ctrl-C, then the answer: row 1, column 1.
    let mut master = &pty.master;
    master.write_all(b"\x03").expect("type Ctrl-C");
    master.write_all(b"\x1b[1;1R").expect("answer the query");
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > LIMIT {
            let _ = child.kill();
            panic!(
                "the Ctrl-C typed during the cursor query did not stop the run within \
                 {LIMIT:?}:\n{}",
                text(&shown)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    drop(pty);
    let _ = reader.join();
    let out = text(&shown);
    assert_eq!(status.code(), Some(130), "{out}");
    assert!(out.contains("Serving Benchmark Result"), "{out}");
    let r = json(&dir.path().join("q.json"));
    assert_eq!(r["vllm_bench_interrupted"], Value::Bool(true), "{r}");
}

#[test]
fn a_zombies_exit_status_is_read_from_proc() {
    let mut child = Command::new("sh")
        .args(["-c", "exit 3"])
        .spawn()
        .expect("spawn sh");
    let pid = child.id().to_string();
    let started = Instant::now();
    let status = loop {
        if let Some(s) = zombie_status(&pid) {
            break s;
        }
        assert!(started.elapsed() < LIMIT, "sh -c 'exit 3' did not end");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status, 3);
    assert_eq!(child.wait().expect("reap").code(), Some(3));
    assert_eq!(zombie_status(&pid), None, "reaped: no zombie any more");
}
