//! The fault matrix (issue 14): each fault the mock injects, a server killed mid-run and one
//! restarted mid-run, crossed with the completions, chat and embeddings backends and the
//! closed-loop, rate and trace-replay schedules; then response shapes a server may send
//! (an SSE event over 1 MiB, a head over the client's limit, `Content-Encoding: gzip`).
//! Every cell runs the whole program (in process) against an in-process mock and reads the result file
//! written with `--save-result`:
//!
//! - every request is accounted for: completed + failed + cancelled + not sent = planned
//!   (cancelled: the client's own `--request-cancellation-rate` cells), the failures
//!   by reason add up to the failed count and each failed request has its error text;
//! - the reasons are the fault's (and, for injected faults, every injected fault is one
//!   failed request, or one transparent retry the mock saw as an extra request);
//! - nothing hangs: stalls last 60 s and are cut by a 3 s request timeout, endless responses
//!   by `--max-response-events` (streams, `response_too_long`) or the 64 MiB body limit
//!   (`body_too_large`), every other cell has a 25 s timeout, and a cell must end within 30 s;
//! - the exit status says whether any request succeeded.
//!
//! The cells run a few at a time (their runs mostly wait on sockets). A crash happens at
//! a fixed model request, not at a time, so what a cell asserts does not depend on how fast
//! the machine is; loopback only, and every mock stops when its cell ends.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use vllm_bench::mock::{
    AfterCrash, Crash, FaultConfig, FaultKind, MockConfig, MockServer, MockStats,
};

use crate::util::{fixture, run_in_process, TempDir};

/// Requests per cell.
const N: u64 = 8;
/// Concurrency of the closed-loop schedule.
const CONCURRENCY: u64 = 4;
/// Request rate of the rate schedule, and the gap between trace records (1 / rate).
const RATE: u64 = 16;
/// The client's per-request timeout in the stall cells, where it is what ends a stalled
/// request: hundreds of times what an answered request here takes.
const STALL_TIMEOUT_SEC: u64 = 3;
/// The per-request timeout of every other cell: only a bound, should something hang.
const TIMEOUT_SEC: u64 = 25;
/// How long a stalled response stays silent: far beyond the request timeout.
const STALL: Duration = Duration::from_secs(60);
/// Fraction of requests an injected fault hits (2 or 3 of 8 with the seed below).
const FRACTION: f64 = 0.3;
/// The model request at which a crash cell's server crashes.
const CRASH_AT: u64 = 2;
/// Cells run at once per test (two tests run at a time).
const PARALLEL: usize = 3;
/// `--max-response-events` of the endless cells: far above the 7 events of an answer here,
/// reached in about a second at the mock's 1 ms token interval (the default, a million,
/// would outlast the request timeout).
const ENDLESS_MAX_EVENTS: u64 = 1000;
/// `--request-cancellation-rate` of the cancel cells.
const CANCEL_PCT: u64 = 40;
/// The mock's first-token delay in the cancel cells: a cancel right after the request was
/// sent (delay 0) always comes first.
const CANCEL_FIRST_TOKEN: Duration = Duration::from_millis(200);

/// The mock's token interval in the cancel cells.
const CANCEL_TOKEN_INTERVAL: Duration = Duration::from_millis(20);

/// Far below the 60 s stall, far above any honest run of eight small requests: a cell slower
/// than this waited for something it should have cut.
const NO_HANG: Duration = Duration::from_secs(30);

/// What goes wrong in a cell.
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// [`FRACTION`] of the model requests get this mock fault.
    Injected(FaultKind),
    /// The server crashes at model request [`CRASH_AT`], then stays down or comes back.
    Crash(AfterCrash),
    /// Every generation event and response body is padded past 1 MiB.
    EventOver1MiB,
    /// Every 200 head carries one header over the client's 64 KiB head limit.
    HeadOverLimit,
    /// Every 200 response says `Content-Encoding: gzip`.
    Gzip,
    /// Not the server's fault: the client cancels [`CANCEL_PCT`] % of the requests
    /// (`--request-cancellation-rate`) right after sending them, long before the answer.
    Cancel,
}

/// The API a cell's backend speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Api {
    Completions,
    Chat,
    Embeddings,
}

impl Api {
    const ALL: [Api; 3] = [Api::Completions, Api::Chat, Api::Embeddings];

    fn backend(self) -> &'static str {
        match self {
            Api::Completions => "openai",
            Api::Chat => "openai-chat",
            Api::Embeddings => "openai-embeddings",
        }
    }

    fn streams(self) -> bool {
        self != Api::Embeddings
    }
}

/// How a cell's requests are released.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Schedule {
    /// `--max-concurrency` [`CONCURRENCY`], no rate.
    ClosedLoop,
    /// `--request-rate` [`RATE`] (Poisson).
    Rate,
    /// A Mooncake trace with one record every 1/[`RATE`] s.
    Trace,
}

impl Schedule {
    const ALL: [Schedule; 3] = [Schedule::ClosedLoop, Schedule::Rate, Schedule::Trace];
}

#[derive(Debug, Clone, Copy)]
struct Cell {
    fault: Fault,
    api: Api,
    schedule: Schedule,
}

impl fmt::Display for Cell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} × {} × {:?}",
            self.fault,
            self.api.backend(),
            self.schedule
        )
    }
}

/// Every backend × schedule for each fault; trace replay needs a generation backend
/// (embeddings × trace is refused up front, see `a_trace_cannot_be_replayed_to_embeddings`).
fn cells(faults: &[Fault], schedules: &[Schedule]) -> Vec<Cell> {
    let mut out = Vec::new();
    for &fault in faults {
        for api in Api::ALL {
            for &schedule in schedules {
                if api == Api::Embeddings && schedule == Schedule::Trace {
                    continue;
                }
                out.push(Cell {
                    fault,
                    api,
                    schedule,
                });
            }
        }
    }
    out
}

/// The mock of a cell: small real delays (crash cells a longer first token, so requests are
/// mid-stream when the server dies).
fn mock_config(fault: Fault) -> MockConfig {
    let mut cfg = MockConfig {
        first_token_delay: Duration::from_millis(5),
        token_interval: Duration::from_millis(1),
        stall_for: STALL,
        seed: 3,
        ..MockConfig::default()
    };
    match fault {
        Fault::Injected(kind) => cfg.faults = only(kind, FRACTION),
        Fault::Crash(then) => {
            cfg.first_token_delay = Duration::from_millis(100);
            cfg.crash = Some(Crash {
                at_request: CRASH_AT,
                then,
            });
        }
        Fault::EventOver1MiB => cfg.padding = (1 << 20) + (1 << 18),
        Fault::HeadOverLimit => {
            cfg.response_headers = vec![("x-padding".into(), "p".repeat(70 << 10))]
        }
        Fault::Gzip => cfg.response_headers = vec![("content-encoding".into(), "gzip".into())],
        Fault::Cancel => {
            cfg.first_token_delay = CANCEL_FIRST_TOKEN;
            // Each event its own write: a client that closed without unread bytes is seen
            // at the second write after its close (the first is answered with a reset).
            cfg.token_interval = CANCEL_TOKEN_INTERVAL;
        }
    }
    cfg
}

fn only(kind: FaultKind, fraction: f64) -> FaultConfig {
    let mut f = FaultConfig::default();
    *match kind {
        FaultKind::Error500 => &mut f.error_500,
        FaultKind::Error429 => &mut f.error_429,
        FaultKind::Disconnect => &mut f.disconnect,
        FaultKind::Stall => &mut f.stall,
        FaultKind::Malformed => &mut f.malformed,
        FaultKind::CloseAfterHead => &mut f.close_after_head,
        FaultKind::Endless => &mut f.endless,
        FaultKind::StreamError => &mut f.stream_error,
    } = fraction;
    f
}

fn request_timeout_sec(fault: Fault) -> u64 {
    match fault {
        Fault::Injected(FaultKind::Stall) => STALL_TIMEOUT_SEC,
        _ => TIMEOUT_SEC,
    }
}

/// A Mooncake trace of [`N`] one-block records, 1/[`RATE`] s apart (timestamps in ms).
fn write_trace(dir: &TempDir) -> String {
    let gap_ms = 1000 / RATE;
    let lines: String = (0..N)
        .map(|i| {
            format!(
                "{{\"timestamp\": {}, \"input_length\": 16, \"output_length\": 4, \"hash_ids\": [{i}]}}\n",
                i * gap_ms
            )
        })
        .collect();
    let path = dir.path().join("trace.jsonl");
    std::fs::write(&path, lines).expect("write the trace");
    path.to_str().expect("utf-8 path").to_string()
}

/// The cells' tokenizer: the goldens' byte-level BPE (vocabulary 4,096). What a cell checks
/// is the accounting and the failure reasons, not the prompts' text, and this one loads in a
/// tenth of the CPU time SmolLM2's (49,152) takes: a load in each of the 97 cells.
fn tokenizer() -> String {
    fixture(crate::util::SMALL_TOKENIZER)
        .to_str()
        .expect("utf-8 path")
        .to_string()
}

/// The command line of a cell against `url`, saving `r.json` in `dir`.
fn args(cell: &Cell, url: &str, dir: &TempDir) -> Vec<String> {
    let mut a: Vec<String> = [
        "--base-url",
        url,
        "--backend",
        cell.api.backend(),
        "--model",
        "mock-model",
        "--tokenizer",
        &tokenizer(),
        "--num-prompts",
        &N.to_string(),
        "--seed",
        "0",
        "--disable-tqdm",
        "--ready-check-timeout-sec",
        "0",
        "--request-timeout-sec",
        &request_timeout_sec(cell.fault).to_string(),
        "--save-result",
        "--save-detailed",
        "--result-dir",
        dir.arg(),
        "--result-filename",
        "r.json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let random = [
        "--dataset-name",
        "random",
        "--random-input-len",
        "16",
        "--random-output-len",
        "4",
    ];
    let schedule: Vec<String> = match cell.schedule {
        Schedule::ClosedLoop => vec!["--max-concurrency".into(), CONCURRENCY.to_string()],
        Schedule::Rate => vec!["--request-rate".into(), RATE.to_string()],
        Schedule::Trace => vec![
            "--dataset-name".into(),
            "timed_trace".into(),
            "--dataset-path".into(),
            write_trace(dir),
            "--timed-trace-sec-multiplier".into(),
            "0.001".into(),
        ],
    };
    if cell.schedule != Schedule::Trace {
        a.extend(random.iter().map(|s| s.to_string()));
    }
    if let Fault::Cancel = cell.fault {
        a.extend([
            "--request-cancellation-rate".into(),
            CANCEL_PCT.to_string(),
            "--request-cancellation-delay".into(),
            "0".into(),
        ]);
    }
    if let Fault::Injected(FaultKind::Endless) = cell.fault {
        a.extend([
            "--max-response-events".into(),
            ENDLESS_MAX_EVENTS.to_string(),
        ]);
    }
    a.extend(schedule);
    a
}

/// What a cell's run left behind: the result file's accounting and the mock's counters.
#[derive(Debug)]
struct Outcome {
    code: i32,
    planned: u64,
    completed: u64,
    failed: u64,
    /// `vllm_bench_cancelled` (0 when absent: the run cancelled nothing on purpose).
    cancelled: u64,
    not_sent: u64,
    reasons: BTreeMap<String, u64>,
    /// Error texts of the failed requests (`errors`, empty ones left out).
    errors: Vec<String>,
    server: MockStats,
    wall: Duration,
    stderr: String,
}

impl Outcome {
    fn reasons_text(&self) -> String {
        if self.reasons.is_empty() {
            return "none".into();
        }
        let parts: Vec<String> = self
            .reasons
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        parts.join(", ")
    }
}

fn count(doc: &Map<String, Value>, key: &str) -> Result<u64, String> {
    doc.get(key)
        .and_then(Value::as_u64)
        .ok_or_else(|| format!("{key} is not a count in the result file"))
}

fn run(cell: &Cell) -> Result<Outcome, String> {
    let server = MockServer::start(mock_config(cell.fault)).expect("mock server starts");
    let dir = TempDir::new("fault-matrix");
    let owned = args(cell, &server.base_url(), &dir);
    let argv: Vec<&str> = owned.iter().map(String::as_str).collect();
    let started = Instant::now();
    let r = run_in_process(&argv);
    let wall = started.elapsed();
    let text = std::fs::read_to_string(dir.path().join("r.json"))
        .map_err(|e| format!("no result file ({e}); exit {}: {}", r.code, r.stderr));
    let doc: Result<Map<String, Value>, String> = text.and_then(|t| {
        serde_json::from_str(&t).map_err(|e| format!("result file is not JSON: {e}"))
    });
    let cancelled = doc.as_ref().map_or(0, |d| {
        d.get("vllm_bench_cancelled")
            .and_then(Value::as_u64)
            .unwrap_or(0)
    });
    if cell.api.streams() {
        // The mock sees a close at its next write to the stream, which may come after the
        // client exited: wait (bounded) for it to have seen every cancelled request.
        let until = Instant::now() + Duration::from_secs(10);
        while server.stats().closed_by_client < cancelled && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let stats = server.stats();
    server.shutdown();
    let doc = doc?;
    let reasons = doc
        .get("vllm_bench_failures_by_reason")
        .and_then(Value::as_object)
        .ok_or("no vllm_bench_failures_by_reason")?
        .iter()
        .map(|(k, v)| Ok((k.clone(), v.as_u64().ok_or("a reason count")?)))
        .collect::<Result<_, String>>()?;
    let errors: Vec<String> = doc
        .get("errors")
        .and_then(Value::as_array)
        .ok_or("no errors list")?
        .iter()
        .filter_map(Value::as_str)
        .filter(|e| !e.is_empty())
        .map(str::to_string)
        .collect();
    // Python's pooling result has no `failed` key: there, the failed are the error texts.
    let failed = match doc.get("failed") {
        Some(_) => count(&doc, "failed")?,
        None => errors.len() as u64,
    };
    Ok(Outcome {
        code: r.code,
        planned: count(&doc, "num_prompts")?,
        completed: count(&doc, "completed")?,
        failed,
        cancelled,
        not_sent: count(&doc, "vllm_bench_not_sent")?,
        reasons,
        errors,
        server: stats,
        wall,
        stderr: r.stderr,
    })
}

/// `Err(why)` unless `cond`.
fn ensure(cond: bool, why: impl FnOnce() -> String) -> Result<(), String> {
    if cond {
        Ok(())
    } else {
        Err(why())
    }
}

/// What holds in every cell: each request accounted for once, with a reason when it failed,
/// and an exit status that says whether any succeeded.
fn check_accounting(o: &Outcome) -> Result<(), String> {
    ensure(o.planned == N, || {
        format!("planned {} requests, not {N}", o.planned)
    })?;
    ensure(
        o.completed + o.failed + o.cancelled + o.not_sent == o.planned,
        || {
            format!(
                "completed {} + failed {} + cancelled {} + not sent {} != planned {}",
                o.completed, o.failed, o.cancelled, o.not_sent, o.planned
            )
        },
    )?;
    ensure(o.not_sent == 0, || format!("{} not sent", o.not_sent))?;
    ensure(o.reasons.values().sum::<u64>() == o.failed, || {
        format!(
            "reasons {} do not add up to {} failed",
            o.reasons_text(),
            o.failed
        )
    })?;
    ensure(o.errors.len() as u64 == o.failed, || {
        format!(
            "{} error texts for {} failed requests",
            o.errors.len(),
            o.failed
        )
    })?;
    let code = if o.completed > 0 { 0 } else { 1 };
    ensure(o.code == code, || {
        format!(
            "exit {} with {} completed: {}",
            o.code, o.completed, o.stderr
        )
    })?;
    ensure(o.wall < NO_HANG, || format!("took {:?}", o.wall))
}

/// The failure reason, and a piece of its error text, of each injected fault.
fn injected_reason(kind: FaultKind, api: Api) -> (&'static str, &'static str) {
    match kind {
        FaultKind::Error500 => ("http_500", "Internal Server Error"),
        FaultKind::Error429 => ("http_429", "Too Many Requests"),
        FaultKind::Disconnect if api.streams() => ("disconnected", "not completed"),
        FaultKind::Disconnect => ("disconnected", "Server disconnected"),
        FaultKind::Stall => ("timeout", "TimeoutError"),
        FaultKind::Malformed if api.streams() => ("malformed_event", "malformed SSE event"),
        FaultKind::Malformed => ("malformed_body", "not valid JSON"),
        FaultKind::CloseAfterHead => ("disconnected", "not completed"),
        FaultKind::Endless if api.streams() => ("response_too_long", "more than 1000 SSE events"),
        FaultKind::Endless => ("body_too_large", "over 64 MiB"),
        // Completions, chat and embeddings have no error event: the mock answers 500
        // (the Anthropic and Responses error events are tests/anthropic.rs' and
        // tests/backends.rs').
        FaultKind::StreamError => ("http_500", "Internal Server Error"),
    }
}

fn only_reasons(o: &Outcome, allowed: &[&str]) -> Result<(), String> {
    ensure(
        o.reasons.keys().all(|k| allowed.contains(&k.as_str())),
        || format!("reasons {} outside {allowed:?}", o.reasons_text()),
    )
}

fn errors_mention(o: &Outcome, needle: &str) -> Result<(), String> {
    ensure(o.errors.iter().all(|e| e.contains(needle)), || {
        format!("an error text lacks {needle:?}: {:?}", o.errors)
    })
}

/// The fault's own expectations.
fn check_fault(cell: &Cell, o: &Outcome) -> Result<(), String> {
    let s = &o.server;
    match cell.fault {
        Fault::Injected(kind) => {
            let (reason, needle) = injected_reason(kind, cell.api);
            only_reasons(o, &[reason])?;
            errors_mention(o, needle)?;
            let injected = s.faults.of(kind);
            ensure(injected > 0, || {
                "no fault was injected: pick another seed".into()
            })?;
            // A request cut before any response byte on a kept-alive connection is retried
            // once on a new one (the mock sees one more request); nothing else is retried.
            let retried = s.model_requests - N;
            ensure(o.failed + retried == injected, || {
                format!(
                    "{injected} injected = {} failed + {retried} retried does not hold",
                    o.failed
                )
            })
        }
        Fault::Crash(then) => {
            ensure(s.crashes == 1, || format!("{} crashes", s.crashes))?;
            match then {
                AfterCrash::Down => {
                    only_reasons(o, &["disconnected", "connect", "read", "write"])?;
                    ensure(o.completed <= CRASH_AT, || {
                        format!(
                            "{} completed, only {CRASH_AT} were before the crash",
                            o.completed
                        )
                    })?;
                    ensure(o.reasons.contains_key("connect"), || {
                        format!(
                            "no refused connection after the crash: {}",
                            o.reasons_text()
                        )
                    })
                }
                AfterCrash::Restart => {
                    // No failure at all is possible: a request cut before any response byte
                    // on a kept-alive connection is retried, and the retry is answered.
                    only_reasons(o, &["disconnected", "read", "write"])?;
                    // Requests the server received after the crash, all answered.
                    let after = s.model_requests - CRASH_AT - 1;
                    ensure(after > 0 && o.completed >= after, || {
                        format!(
                            "{} completed, {after} received after the restart",
                            o.completed
                        )
                    })
                }
            }
        }
        Fault::EventOver1MiB => ensure(o.completed == N, || {
            format!("large events are read: {}", o.reasons_text())
        }),
        Fault::HeadOverLimit => {
            only_reasons(o, &["bad_response"])?;
            errors_mention(o, "response head exceeds 65536 bytes")?;
            ensure(o.failed == N, || format!("{} failed", o.failed))
        }
        Fault::Gzip => {
            only_reasons(o, &["bad_response"])?;
            errors_mention(o, "Content-Encoding")?;
            ensure(o.failed == N, || format!("{} failed", o.failed))
        }
        Fault::Cancel => {
            // Cancelled is its own outcome: never a failure, never retried.
            ensure(o.failed == 0, || format!("{} failed", o.failed))?;
            ensure(o.cancelled > 0 && o.cancelled < N, || {
                format!("{} of {N} cancelled at {CANCEL_PCT} %", o.cancelled)
            })?;
            ensure(s.model_requests == N, || {
                format!("the mock got {} requests for {N}", s.model_requests)
            })?;
            // The connection really was closed: the mock's stream could not be written on.
            // (A whole body is written once, so a close before it is not seen.)
            let seen = if cell.api.streams() { o.cancelled } else { 0 };
            ensure(s.closed_by_client == seen, || {
                format!(
                    "the mock saw {} streams closed by the client, {seen} expected",
                    s.closed_by_client
                )
            })
        }
    }
}

/// Runs every cell ([`PARALLEL`] at a time), prints what each did (the table in
/// docs/reliability.md), and fails naming every cell that broke a rule.
fn run_matrix(cells: &[Cell]) {
    let next = Mutex::new(0usize);
    let results = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..PARALLEL {
            scope.spawn(|| loop {
                let i = {
                    let mut n = next.lock().unwrap();
                    *n += 1;
                    *n - 1
                };
                let Some(cell) = cells.get(i) else { return };
                let verdict = run(cell).and_then(|o| {
                    check_accounting(&o)
                        .and_then(|()| check_fault(cell, &o))
                        .map_err(|why| {
                            format!(
                                "{why}\n    errors: {:?}\n    mock: {:?}",
                                o.errors, o.server
                            )
                        })
                        .map(|()| o)
                });
                results.lock().unwrap().push((i, verdict));
            });
        }
    });
    let mut results = results.into_inner().unwrap();
    results.sort_by_key(|(i, _)| *i);
    let mut broken = Vec::new();
    for (i, verdict) in &results {
        match verdict {
            Ok(o) => println!(
                "{:<55} completed {} failed {} ({}) cancelled {}; mock saw {} requests; {:.1}s",
                cells[*i].to_string(),
                o.completed,
                o.failed,
                o.reasons_text(),
                o.cancelled,
                o.server.model_requests,
                o.wall.as_secs_f64()
            ),
            Err(why) => broken.push(format!("{}: {why}", cells[*i])),
        }
    }
    assert!(
        broken.is_empty(),
        "{} cells broke:\n{}",
        broken.len(),
        broken.join("\n")
    );
}

#[test]
fn injected_faults_fail_their_requests_with_their_reason() {
    let faults = FaultKind::ALL
        .into_iter()
        .filter(|k| *k != FaultKind::Stall)
        .map(Fault::Injected)
        .collect::<Vec<_>>();
    run_matrix(&cells(&faults, &Schedule::ALL));
}

/// Stalls on their own: each cell waits out the request timeout.
#[test]
fn stalls_are_cut_by_the_request_timeout() {
    run_matrix(&cells(&[Fault::Injected(FaultKind::Stall)], &Schedule::ALL));
}

#[test]
fn a_server_killed_or_restarted_mid_run() {
    let faults = [
        Fault::Crash(AfterCrash::Down),
        Fault::Crash(AfterCrash::Restart),
    ];
    run_matrix(&cells(&faults, &Schedule::ALL));
}

/// Response shapes: the schedule does not matter, closed loop only.
#[test]
fn large_events_oversized_heads_and_compressed_bodies() {
    let faults = [Fault::EventOver1MiB, Fault::HeadOverLimit, Fault::Gzip];
    run_matrix(&cells(&faults, &[Schedule::ClosedLoop]));
}

/// Requests the client cancels on purpose, on every backend and schedule.
#[test]
fn cancelled_requests_are_counted_apart_and_their_connections_closed() {
    run_matrix(&cells(&[Fault::Cancel], &Schedule::ALL));
}

/// The one combination the matrix leaves out is refused before anything is sent.
#[test]
fn a_trace_cannot_be_replayed_to_embeddings() {
    let server = MockServer::start(mock_config(Fault::EventOver1MiB)).expect("mock starts");
    let dir = TempDir::new("fault-matrix-refused");
    let cell = Cell {
        fault: Fault::EventOver1MiB,
        api: Api::Embeddings,
        schedule: Schedule::Trace,
    };
    let owned = args(&cell, &server.base_url(), &dir);
    let argv: Vec<&str> = owned.iter().map(String::as_str).collect();
    let r = run_in_process(&argv);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("timed_trace"), "{}", r.stderr);
    assert_eq!(server.stats().model_requests, 0, "nothing was sent");
}
