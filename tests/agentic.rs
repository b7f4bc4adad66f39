//! `--dataset-name agentic_trace` through the binary: the shipped sample traces
//! (`tests/fixtures/agentic/`) described by `--dry-run`, and bad trace files refused with one
//! line naming the file, the trace and the field before anything is sent.

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::util::{run_in_process, TempDir};

fn samples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agentic/traces")
}

fn sample(name: &str) -> String {
    std::fs::read_to_string(samples().join(name)).expect("sample trace")
}

#[test]
fn dry_run_describes_the_sample_trees() {
    let path = samples();
    let out = run_in_process(&[
        "--mock-server",
        "--backend",
        "openai-chat",
        "--dataset-name",
        "agentic_trace",
        "--dataset-path",
        path.to_str().unwrap(),
        "--dry-run",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .contains("Streams: 5 (root 3, subagent 2, aux 0, wg 0, fa 0)"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("Branches: 1 joined, 1 background"));
}

/// A loopback listener that counts the bytes of the requests sent to it until dropped. A
/// reachability check may connect, and the control plane's `GET`s (`/v1/models`, `/metrics`,
/// asked in the background while the dataset is read) are not the workload's: only a request
/// of another method (the benchmark's `POST`) counts.
struct Capture {
    url: String,
    bytes: Arc<AtomicUsize>,
    done: Arc<AtomicBool>,
}

impl Capture {
    fn start() -> Capture {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let bytes = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let (n, stop) = (bytes.clone(), done.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((mut s, _)) => {
                        let _ = s.set_nonblocking(false);
                        let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
                        let mut head = [0u8; 1024];
                        let got = s.read(&mut head).unwrap_or(0);
                        if !head[..got].starts_with(b"GET ") {
                            n.fetch_add(got, Ordering::Relaxed);
                        }
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Capture { url, bytes, done }
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
    }
}

/// Runs the binary on `files` (name, text) in a fresh directory against a capturing
/// listener; returns stderr, after checking the exit code, the one line and no connection.
fn refused(files: &[(&str, String)], path: &str) -> String {
    let dir = TempDir::new("agentic-bad");
    for (name, text) in files {
        let file = dir.path().join(name);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }
    let capture = Capture::start();
    let path = dir.path().join(path);
    let out = run_in_process(&[
        "--base-url",
        &capture.url,
        "--model",
        "m",
        "--skip-tokenizer-init",
        "--backend",
        "openai-chat",
        "--dataset-name",
        "agentic_trace",
        "--dataset-path",
        path.to_str().expect("utf-8 path"),
    ]);
    assert_ne!(out.code, 0, "{}", out.stdout);
    assert_eq!(out.stderr.trim_end().lines().count(), 1, "{}", out.stderr);
    assert_eq!(capture.bytes.load(Ordering::Relaxed), 0, "nothing is sent");
    out.stderr
}

#[test]
fn an_unknown_key_is_one_line_naming_file_trace_and_field_and_nothing_is_sent() {
    let bad = sample("trace-a.json").replacen("\"ttft\": 0.2", "\"ttft\": 0.2, \"cost\": 3", 1);
    let e = refused(&[("bad.json", bad)], "bad.json");
    assert!(
        e.contains("bad.json") && e.contains("trace \"trace-a\"") && e.contains("`cost`"),
        "{e}"
    );
    assert!(e.contains("line 18"), "the line of the key: {e}");
}

#[test]
fn a_directory_names_the_bad_file_among_good_ones() {
    let bad = sample("trace-c.json").replace("\"type\": \"n\"", "\"type\": \"x\"");
    let files = [("dir/a.json", sample("trace-a.json")), ("dir/c.json", bad)];
    let e = refused(&files, "dir");
    assert!(
        e.contains("c.json") && e.contains("requests[0]: `type` \"x\""),
        "{e}"
    );
}

#[test]
fn a_duplicate_trace_id_names_both_files() {
    let files = [
        ("dir/1.json", sample("trace-a.json")),
        ("dir/2.json", sample("trace-a.json")),
    ];
    let e = refused(&files, "dir");
    assert!(
        e.contains("2.json") && e.contains("1.json") && e.contains("duplicate `id`"),
        "{e}"
    );
}

// The replay's timing (SPEC §3, §6) on the embedded mock: every response takes the mock's
// first-token delay (its tokens follow at once), so the send times are the specification's
// hand-derived timelines. Tolerance: each send within TOLERANCE of its planned time (a
// chain of sequential responses adds a few ms per hop on a loaded machine).

use vllm_bench::backends::conversation::ChatBody;
use vllm_bench::backends::{Api, BodyOptions};
use vllm_bench::datasets::agentic::{Phase, ReplayOutcome, ReplayRecord};
use vllm_bench::datasets::timed_trace::TokenSpace;
use vllm_bench::engine::{Engine, RunReport, TimeBound};
use vllm_bench::http::request::{HeadTemplate, Method};
use vllm_bench::http::url::BaseUrl;
use vllm_bench::mock::{MockConfig, MockServer};
use vllm_bench::modes::agentic::AgenticReplay;
use vllm_bench::modes::agentic_replay::{AgenticRun, ReplayOptions, SYSTEM_IDLE_CAP};

const TOLERANCE_MS: i64 = 150;

struct Replay {
    server: MockServer,
    engine: Engine,
    run: AgenticRun,
    trees: Vec<String>,
}

/// One token id per word: decoding is exact, a prompt's words are its tokens.
fn words(ids: &[u32]) -> String {
    ids.iter().map(|i| format!("t{i} ")).collect()
}

fn replay(path: &Path, lanes: usize, ratio: f64, warmup: usize, ttft: Duration) -> Replay {
    replay_on(mock(ttft, |_| {}), path, lanes, ratio, warmup, None)
}

/// The mock every replay here runs against: `ttft` per response, tokens at once, every
/// request logged with its body; `tweak` sets the rest.
fn mock(ttft: Duration, tweak: impl FnOnce(&mut MockConfig)) -> MockServer {
    let mut config = MockConfig {
        first_token_delay: ttft,
        token_interval: Duration::ZERO,
        request_log: true,
        request_log_bodies: true,
        ..MockConfig::default()
    };
    tweak(&mut config);
    MockServer::start(config).expect("start mock")
}

/// [`replay`] on `server`, with `--agentic-failed-request-threshold` `threshold`.
fn replay_on(
    server: MockServer,
    path: &Path,
    lanes: usize,
    ratio: f64,
    warmup: usize,
    threshold: Option<f64>,
) -> Replay {
    let url = BaseUrl::parse(&server.base_url()).unwrap();
    let trees = AgenticReplay::from_path(path).expect("corpus").trees;
    let head = HeadTemplate::new(
        Method::Post,
        &url.request_path("/v1/chat/completions"),
        &url.host_header(),
        &[],
    );
    let opts = BodyOptions {
        model: "m".into(),
        ignore_eos: true,
        ..BodyOptions::default()
    };
    let body = ChatBody::new(Api::Chat, &opts, false).unwrap();
    let space = TokenSpace::new(50_000, &[0]).unwrap();
    let opts = ReplayOptions {
        lanes,
        start_ratio: (ratio, ratio),
        warmup_per_lane: warmup,
        trace_idle_cap: None,
        system_idle_cap: Some(SYSTEM_IDLE_CAP),
        seed: 42,
        mode: Api::Chat.response_mode(),
        failed_request_threshold: threshold,
        shard: None,
    };
    let run = AgenticRun::prepare(&trees, &head, &body, &space, &words, opts).expect("prepare");
    let engine = Engine::start(
        crate::util::endpoint(&url),
        crate::util::options(1, crate::util::auto_driver()),
    )
    .expect("engine");
    Replay {
        server,
        engine,
        run,
        trees: trees.iter().map(|t| t.id.clone()).collect(),
    }
}

impl Replay {
    fn run(&self, duration: f64, grace: f64) -> (RunReport, Vec<ReplayRecord>) {
        let bound = TimeBound {
            after: Duration::from_secs_f64(duration),
            grace: Duration::from_secs_f64(grace),
        };
        self.run.replay(&self.engine, Some(bound)).expect("replay")
    }

    /// The records of `phase` as [`Sent`], in send order.
    fn sends(&self, records: &[ReplayRecord], phase: Phase) -> Vec<Sent> {
        let mut out: Vec<_> = records
            .iter()
            .filter(|r| r.phase == phase)
            .map(|r| Sent {
                ms: r.sent_ns / 1_000_000,
                end_ms: r.end_ns / 1_000_000,
                id: (
                    self.trees[r.tree as usize].clone(),
                    r.pass,
                    r.stream,
                    r.turn,
                ),
            })
            .collect();
        out.sort_by_key(|x| (x.ms, x.id.clone()));
        out
    }

    /// The cache-bust marker of every model request the mock saw, in arrival order.
    fn markers(&self) -> Vec<String> {
        let mut log = self.server.request_log();
        log.retain(|r| r.method == "POST");
        log.sort_by_key(|r| r.arrival);
        log.iter()
            .map(|r| {
                let body = r.body.as_deref().unwrap_or_default();
                let at = body
                    .find("[rid:")
                    .expect("every request carries the marker");
                body[at..at + 18].to_string()
            })
            .collect()
    }
}

/// One request as sent: its send and end (ms from the start of its phase) and identity
/// `(trace, pass, stream, turn)`.
#[derive(Debug, Clone)]
struct Sent {
    ms: i64,
    end_ms: i64,
    id: (String, u32, u32, u32),
}

/// Planned `(ms, trace, pass, stream, turn)` against what was sent: the same requests in the
/// same order, none early, and each late by at most [`TOLERANCE_MS`] beyond the lateness it
/// inherited. Every send in a replay waits on earlier responses (a turn's delay runs from a
/// response's end, a spawn starts on one, a join waits for one), so when a response ends
/// late (a starved machine, the mock's own lateness) what follows is late by as much: the
/// replay's own contribution is what is checked, the inherited part is each earlier
/// response's end past its plan (its planned send + `response_ms`). Planned sends past the
/// run's `bound_ms` may be missing only when that inherited lateness carried them past it.
fn assert_timeline(
    got: &[Sent],
    want: &[(i64, &str, u32, u32, u32)],
    response_ms: i64,
    bound_ms: Option<i64>,
) {
    let shown = format!("got {got:?}\nwant {want:?}");
    assert!(got.len() <= want.len(), "{shown}");
    let mut inherited = 0i64;
    for (i, w) in want.iter().enumerate() {
        let Some(g) = got.get(i) else {
            let bound = bound_ms.expect("a timeline without a bound sends every planned request");
            assert!(
                w.0 + inherited + TOLERANCE_MS > bound,
                "planned send {w:?} missing although it was due before the bound: {shown}"
            );
            continue;
        };
        assert_eq!(
            (g.id.0.as_str(), g.id.1, g.id.2, g.id.3),
            (w.1, w.2, w.3, w.4),
            "{shown}"
        );
        assert!(g.ms >= w.0 - TOLERANCE_MS, "sent early: {shown}");
        assert!(
            g.ms - w.0 <= inherited + TOLERANCE_MS,
            "{}: late {} ms, {} ms of it inherited from earlier responses: {shown}",
            i,
            g.ms - w.0,
            inherited
        );
        inherited = inherited.max(g.end_ms - (w.0 + response_ms));
    }
}

fn accounted(r: &RunReport, records: &[ReplayRecord]) {
    // The engine's `not_sent` is planned - completed/failed - cancelled: a request sent and
    // not counted in the plan would have underflowed it; one recorded twice shows here.
    // A context overflow is in no output (Python's block leaves it out, SPEC §3.5).
    let profiling: Vec<_> = records
        .iter()
        .filter(|r| r.phase == Phase::Profiling)
        .collect();
    let overflows = profiling
        .iter()
        .filter(|x| x.outcome == ReplayOutcome::ContextOverflow)
        .count();
    assert_eq!(
        profiling.len(),
        r.merged.outputs.len() + r.cancelled + overflows,
        "one record per request sent"
    );
    let cancelled = profiling
        .iter()
        .filter(|x| x.outcome == ReplayOutcome::Cancelled)
        .count();
    assert_eq!(cancelled, r.cancelled);
}

/// SPEC TC1: the subagent starts on the spawning response, the root joins at its deadline,
/// the drained tree's lane takes the trace again (a new pass, a new marker).
#[test]
fn tc1_spawn_on_return_join_at_the_deadline_and_recycle() {
    let _serial = crate::util::serial();
    let r = replay(
        &samples().join("trace-a.json"),
        1,
        0.0,
        0,
        Duration::from_millis(500),
    );
    let (report, records) = r.run(6.0, 2.0);
    assert!(
        records.iter().all(|x| x.phase == Phase::Profiling),
        "nothing precedes t* = 0"
    );
    let sent = r.sends(&records, Phase::Profiling);
    assert_timeline(
        &sent,
        &[
            (0, "trace-a", 0, 0, 0),
            (500, "trace-a", 0, 1, 0),
            (1500, "trace-a", 0, 1, 1),
            (3500, "trace-a", 0, 0, 1),
            (5300, "trace-a", 0, 0, 2),
            (5800, "trace-a", 1, 0, 0),
        ],
        500,
        Some(6000),
    );
    accounted(&report, &records);
    assert!(records
        .iter()
        .all(|x| x.outcome == ReplayOutcome::Completed));
    let markers = r.markers();
    assert_eq!(markers.len(), sent.len());
    assert!(
        markers[..5].iter().all(|m| *m == markers[0]),
        "one marker per tree: {markers:?}"
    );
    if let Some(recycled) = markers.get(5) {
        assert_ne!(*recycled, markers[0], "a new pass, a new marker");
    }
    // The mock's prefix cache holds the tree's shared prefix: each request records the
    // cached tokens its usage reported (none on the tree's first request).
    let cached = |stream: u32, turn: u32| {
        records
            .iter()
            .find(|x| x.pass == 0 && x.stream == stream && x.turn == turn)
            .and_then(|x| x.cached_tokens)
    };
    assert_eq!(cached(0, 0), None);
    assert!(cached(0, 1).is_some_and(|c| c >= 192), "{:?}", cached(0, 1));
    assert!(cached(0, 2).is_some_and(|c| c > 0), "{:?}", cached(0, 2));
    // Prompt tokens as the server counted them are the client's exact `in` (plus the
    // marker and the template): the record keeps the server's count.
    assert!(records
        .iter()
        .all(|x| x.prompt_tokens > 0 && x.output_tokens > 0));
}

/// SPEC TC3: mid-trace starts at t* = 0.4 of each span, the primers spread so both lanes reach
/// t* together, profiling from the smallest offset, recycling in the sampler's order, and the
/// background child of trace-c keeping its lane.
#[test]
fn tc3_primers_offsets_and_recycle_order() {
    let _serial = crate::util::serial();
    let r = replay(&samples(), 2, 0.4, 0, Duration::from_millis(500));
    let (report, records) = r.run(4.3, 2.0);
    let primers = r.sends(&records, Phase::Primer);
    let first = primers[0].ms;
    let rel: Vec<Sent> = primers
        .iter()
        .map(|p| Sent {
            ms: p.ms - first,
            end_ms: p.end_ms - first,
            id: p.id.clone(),
        })
        .collect();
    assert_timeline(
        &rel,
        &[
            (0, "trace-b", 0, 0, 0),
            (600, "trace-a", 0, 0, 0),
            (2100, "trace-a", 0, 1, 0),
        ],
        500,
        None,
    );
    assert!(
        records
            .iter()
            .filter(|x| x.phase == Phase::Primer)
            .all(|x| x.output_tokens <= 1),
        "primers ask for one token"
    );
    let sent = r.sends(&records, Phase::Profiling);
    assert_timeline(
        &sent,
        &[
            (0, "trace-a", 0, 1, 1),
            (1200, "trace-a", 0, 0, 1),
            (1600, "trace-b", 0, 0, 1),
            (3000, "trace-a", 0, 0, 2),
            (3500, "trace-c", 0, 0, 0),
            (3600, "trace-b", 0, 0, 2),
            (4100, "trace-a", 1, 0, 0),
        ],
        500,
        Some(4300),
    );
    accounted(&report, &records);
    // Tree instances: trace-a pass 0 (lane 0), trace-b (lane 1), trace-c (lane 0), trace-a
    // pass 1 (lane 1, when a late machine did not carry it past the bound): a tree's requests
    // all carry its own marker.
    let mut markers = r.markers();
    assert_eq!(markers.len(), 3 + sent.len());
    let trees = sent
        .iter()
        .map(|x| (x.id.0.as_str(), x.id.1))
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    markers.sort();
    markers.dedup();
    assert_eq!(markers.len(), trees, "{markers:?}");
}

/// The cache-pressure warm-up: K zero-delay one-token requests per lane after the primers,
/// then profiling; every warm-up request is recorded apart.
#[test]
fn the_warm_up_sends_k_requests_per_lane_before_profiling() {
    let _serial = crate::util::serial();
    let r = replay(&samples(), 2, 0.4, 2, Duration::from_millis(50));
    let (report, records) = r.run(0.5, 1.0);
    let warm: Vec<_> = records
        .iter()
        .filter(|x| x.phase == Phase::Warmup)
        .collect();
    assert_eq!(warm.len(), 4, "{warm:?}");
    for lane in 0..2 {
        assert_eq!(warm.iter().filter(|x| x.lane == lane).count(), 2);
    }
    assert!(warm.iter().all(|x| x.sent_ns < 0 && x.output_tokens <= 1));
    assert!(records
        .iter()
        .filter(|x| x.phase == Phase::Profiling)
        .all(|x| x.sent_ns >= 0));
    accounted(&report, &records);
}

/// SPEC TC9 / `--duration`: a request in flight at the bound is cancelled after the grace
/// period; one that ends within it completes and its next turn is counted as not sent.
#[test]
fn duration_stops_the_replay_and_accounts_for_every_request() {
    let _serial = crate::util::serial();
    let r = replay(
        &samples().join("trace-b.json"),
        1,
        0.0,
        0,
        Duration::from_millis(500),
    );
    let (report, records) = r.run(0.2, 0.0);
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].outcome, ReplayOutcome::Cancelled);
    assert_eq!((report.cancelled, report.merged.outputs.len()), (1, 0));
    accounted(&report, &records);
    let (report, records) = r.run(0.2, 2.0);
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].outcome, ReplayOutcome::Completed);
    assert_eq!(
        report.not_sent, 1,
        "trace-b#1 was due when the replay stopped"
    );
    accounted(&report, &records);
}

/// SPEC TC7 through the engine: the mock refuses trace-b#1 as vLLM does a prompt past the
/// context (400, "maximum context length"): the stream ends there (#2 is never sent, the lane
/// takes the trace again at the error's return), and the overflow is left out of Python's
/// block: not an output (no latency, not failed, no failure reason), counted apart.
#[test]
fn tc7_a_context_overflow_ends_its_stream_and_leaves_pythons_block() {
    let _serial = crate::util::serial();
    // trace-b's turns ask for 300+1+100, 450+1+50 and 520+1+40 tokens (the marker's word
    // with each prompt): a window of 450 refuses #1 and #2.
    let server = mock(Duration::from_millis(100), |c| {
        c.max_model_len = 450;
        c.refuse_past_context = true;
    });
    let r = replay_on(
        server,
        &samples().join("trace-b.json"),
        1,
        0.0,
        0,
        Some(0.1),
    );
    let (report, records) = r.run(4.0, 2.0);
    assert_timeline(
        &r.sends(&records, Phase::Profiling),
        &[
            (0, "trace-b", 0, 0, 0),
            (3100, "trace-b", 0, 0, 1),
            (3200, "trace-b", 1, 0, 0),
        ],
        100,
        None,
    );
    let outcomes: Vec<ReplayOutcome> = records.iter().map(|x| x.outcome).collect();
    assert_eq!(
        outcomes,
        [
            ReplayOutcome::Completed,
            ReplayOutcome::ContextOverflow,
            ReplayOutcome::Completed
        ]
    );
    assert_eq!(r.run.context_overflows(), 1);
    assert_eq!(report.merged.outputs.len(), 2);
    assert!(report.merged.outputs.iter().all(|o| o.success));
    assert!(
        report.merged.failures_by_kind.is_empty(),
        "{:?}",
        report.merged.failures_by_kind
    );
    assert_eq!(
        report.not_sent, 1,
        "pass 1's #1 was due when the replay stopped"
    );
    assert_eq!(
        r.run.threshold_crossed(),
        None,
        "an overflow is not a failure"
    );
    accounted(&report, &records);
}

/// `--agentic-failed-request-threshold`: half of the mock's answers are 500s; once 10
/// profiling requests were answered (max(lanes, 10)) and more than a tenth failed, the
/// replay stops at once, long before its bound; what was in flight is cancelled and every
/// request is accounted for.
#[test]
fn the_failure_threshold_stops_the_replay_and_accounts_for_every_request() {
    let _serial = crate::util::serial();
    let dir = TempDir::new("agentic-threshold");
    quick_corpus(dir.path(), 20);
    let server = mock(Duration::from_millis(5), |c| {
        c.faults.error_500 = 0.5;
    });
    let r = replay_on(server, dir.path(), 4, 0.0, 0, Some(0.1));
    let started = std::time::Instant::now();
    let (report, records) = r.run(60.0, 2.0);
    let took = started.elapsed();
    let crossed = r
        .run
        .threshold_crossed()
        .expect("the threshold was crossed");
    assert!(crossed.answered >= 10, "{crossed:?}");
    assert!(
        crossed.failed as f64 > 0.1 * crossed.answered as f64,
        "{crossed:?}"
    );
    assert!(took < Duration::from_secs(30), "stopped early: {took:?}");
    let failed = records
        .iter()
        .filter(|x| x.outcome == ReplayOutcome::Failed)
        .count() as u64;
    assert!(failed >= crossed.failed, "{failed} {crossed:?}");
    accounted(&report, &records);
}

/// `n` trees of a root of three quick turns and a joined subagent, as `gen-NNNN.json` in
/// `dir` (every tenth with a background child too).
fn quick_corpus(dir: &Path, n: usize) {
    for i in 0..n {
        let background = if i % 10 == 0 {
            r#",{"t":0.05,"type":"subagent","agent_id":"bg","requests":[
                {"t":0.05,"type":"n","model":"m","in":64,"out":2,"hash_ids":[9],"api_time":0.001}]}"#
        } else {
            ""
        };
        let text = format!(
            r#"{{"id":"gen-{i:04}","models":["m"],"block_size":64,"hash_id_scope":"local","requests":[
            {{"t":0.0,"type":"n","model":"m","in":100,"out":3,"hash_ids":[1],"api_time":0.001}},
            {{"t":0.002,"type":"subagent","agent_id":"sa","duration_ms":2,"requests":[
                {{"t":0.002,"type":"n","model":"m","in":80,"out":2,"hash_ids":[1],"api_time":0.001}}]}},
            {{"t":0.01,"type":"n","model":"m","in":200,"out":3,"hash_ids":[1,2,3],"api_time":0.001}},
            {{"t":0.02,"type":"n","model":"m","in":260,"out":3,"hash_ids":[1,2,3,4],"api_time":0.001}}{background}]}}"#
        );
        std::fs::write(dir.join(format!("gen-{i:04}.json")), text).unwrap();
    }
}

/// A synthetic corpus of 1,000 small trees (a root of three turns, a joined subagent, every
/// tenth a background one) replayed at 100 lanes: every trace is drawn, every request is
/// accounted for, within a bounded time. (Its CPU time and memory are printed: on a quiet
/// machine the replay gets through the corpus several times; the assertions hold at any speed.)
#[test]
fn a_thousand_tree_corpus_at_a_hundred_lanes() {
    let _serial = crate::util::serial();
    let dir = TempDir::new("agentic-1000");
    quick_corpus(dir.path(), 1000);
    let r = replay(dir.path(), 100, 0.5, 1, Duration::from_millis(1));
    let cpu = |who| {
        // SAFETY: rusage is plain integers, for which all zeroes is a valid value.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: a valid rusage on the stack, filled by the kernel.
        unsafe { libc::getrusage(who, &mut u) };
        let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
        (t(u.ru_utime) + t(u.ru_stime), u.ru_maxrss)
    };
    let (cpu0, _) = cpu(libc::RUSAGE_SELF);
    let started = std::time::Instant::now();
    let (report, records) = r.run(5.0, 2.0);
    let took = started.elapsed();
    let (cpu1, rss_kb) = cpu(libc::RUSAGE_SELF);
    let profiling = records
        .iter()
        .filter(|x| x.phase == Phase::Profiling)
        .count();
    eprintln!(
        "1000 trees, 100 lanes: {} requests ({profiling} profiling) in {took:.2?}, \
         CPU {:.2} s (mock included), max RSS {} MB",
        records.len(),
        cpu1 - cpu0,
        rss_kb / 1024
    );
    assert!(took < Duration::from_secs(30), "bounded: {took:?}");
    accounted(&report, &records);
    let failed = records
        .iter()
        .filter(|x| {
            matches!(
                x.outcome,
                ReplayOutcome::Failed | ReplayOutcome::ContextOverflow
            )
        })
        .count();
    assert_eq!(failed, 0);
    let mut drawn: Vec<u32> = records.iter().map(|x| x.tree).collect();
    drawn.sort_unstable();
    drawn.dedup();
    // The sampler draws the traces in file order, cycling: whatever the machine's speed, the
    // traces drawn are the first ones, every lane had at least one, and a run that got
    // through the corpus drew every trace.
    assert!(
        drawn.len() >= 100,
        "every lane drew a tree: {}",
        drawn.len()
    );
    assert_eq!(
        drawn,
        (0..drawn.len() as u32).collect::<Vec<_>>(),
        "in file order"
    );
}

/// The replay through the binary: `--duration` bounds it, the run's accounting line holds,
/// and a replay without its lanes or its bound is refused with one line.
/// A replay of the sample traces (`path`: [`samples`]) against the embedded mock, with
/// `extra`.
fn sample_replay<'a>(path: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "--mock-server",
        "--backend",
        "openai-chat",
        "--dataset-name",
        "agentic_trace",
        "--dataset-path",
        path.to_str().expect("utf-8 path"),
    ];
    args.extend_from_slice(extra);
    args
}

#[test]
fn the_binary_replays_the_samples_for_its_duration() {
    let path = samples();
    let base = sample_replay(&path, &["--disable-tqdm"]);
    let with = |extra: &[&str]| {
        let mut args: Vec<&str> = base.to_vec();
        args.extend_from_slice(extra);
        run_in_process(&args)
    };
    let out = with(&[
        "--max-concurrency",
        "2",
        "--duration",
        "1.5",
        "--duration-grace",
        "0",
        "--agentic-start-ratio",
        "0.25,0.75",
        "--agentic-warmup-per-lane",
        "1",
    ]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let n = accounting(&out.stdout);
    assert!(n[1] > 0, "{n:?}");
    for (extra, want) in [
        (&["--duration", "1"][..], "--max-concurrency N is required"),
        (&["--max-concurrency", "2"][..], "--duration S is required"),
        (
            &[
                "--max-concurrency",
                "2",
                "--duration",
                "1",
                "--agentic-start-ratio",
                "0.8,0.2",
            ][..],
            "--agentic-start-ratio",
        ),
        (
            &[
                "--max-concurrency",
                "2",
                "--duration",
                "1",
                "--request-rate",
                "5",
            ][..],
            "--request-rate does not apply",
        ),
        (
            &[
                "--max-concurrency",
                "2",
                "--duration",
                "1",
                "--request-cancellation-rate",
                "50",
            ][..],
            "--request-cancellation-rate does not apply",
        ),
    ] {
        let out = with(extra);
        assert_ne!(out.code, 0, "{extra:?}");
        assert!(out.stderr.contains(want), "{extra:?}: {}", out.stderr);
        assert_eq!(out.stderr.trim_end().lines().count(), 1, "{}", out.stderr);
    }
}

/// One non-streaming chat request to `addr`; returns the answer's `usage`.
fn chat_usage(addr: std::net::SocketAddr, messages: &str) -> serde_json::Value {
    use std::io::Write;
    let body = format!(r#"{{"model":"mock-model","messages":{messages},"max_tokens":1}}"#);
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    let json = answer.split_once("\r\n\r\n").expect("a head").1;
    let v: serde_json::Value = serde_json::from_str(json).expect(json);
    v["usage"].clone()
}

/// Item 7 of issue 40: the mock's prefix cache answers the replay's prompts. Turn 0 and
/// turn 1 of trace-a's root, built by the replay's own prompt code (one word per token, as
/// the mock's toy tokenizer counts), share the marker and hash blocks 1–3: the second is
/// answered with those tokens cached, in its usage and in `/metrics`; the same turn under
/// another tree's marker hits nothing.
#[test]
fn the_mock_prefix_cache_hits_the_shared_blocks_of_a_tree() {
    use vllm_bench::datasets::agentic::{derive, layouts, marker, prompt, Seeds, WekaTrace};
    use vllm_bench::datasets::timed_trace::TokenSpace;
    use vllm_bench::mock::{MockConfig, MockServer};

    let tree = derive(&WekaTrace::parse(&sample("trace-a.json")).unwrap());
    let root = &tree.streams[0];
    let turns = layouts(root, 64).unwrap();
    let space = TokenSpace::new(50_000, &[]).unwrap();
    let seeds = Seeds::new(0, &tree.id, &root.id);
    let words = |ids: &[u32]| ids.iter().map(|i| format!(" t{i}")).collect::<String>();
    let messages = |turn: usize, pass: u32| {
        let m = marker(7, pass, 0, &tree.id);
        prompt::messages_json(&turns[turn], &space, &seeds, 64, &m, &words)
    };
    let server = MockServer::start(MockConfig::default()).unwrap();
    let metric = |name: &str| -> f64 {
        let mut s = std::net::TcpStream::connect(server.addr()).unwrap();
        std::io::Write::write_all(
            &mut s,
            b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        let line = text
            .lines()
            .find(|l| l.starts_with(name) && !l.starts_with('#'))
            .unwrap_or_else(|| panic!("{name} in {text}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    let first = chat_usage(server.addr(), &messages(0, 0));
    // The marker's word and the 200 tokens of turn 0.
    assert_eq!(first["prompt_tokens"], 201);
    assert!(first.get("prompt_tokens_details").is_none(), "{first}");
    let second = chat_usage(server.addr(), &messages(1, 0));
    assert_eq!(second["prompt_tokens"], 401);
    // Shared: the marker and blocks 1–3 (193 words), 12 whole blocks of the mock's 16.
    assert_eq!(
        second["prompt_tokens_details"]["cached_tokens"], 192,
        "{second}"
    );
    assert_eq!(metric("vllm:prefix_cache_hits_total"), 192.0);
    assert_eq!(metric("vllm:prefix_cache_queries_total"), 602.0);
    // Another tree instance (pass 1): another marker, nothing cached.
    let other = chat_usage(server.addr(), &messages(1, 1));
    assert!(other.get("prompt_tokens_details").is_none(), "{other}");
    assert_eq!(metric("vllm:prefix_cache_hits_total"), 192.0);
}

/// `vllm-bench synthesize agentic`: the same seed writes the same files, the corpus reads as
/// the replay's input, and a directory that holds traces is refused with one line.
#[test]
fn synthesize_writes_a_corpus_the_replay_reads() {
    let dir = TempDir::new("agentic-synth");
    // In process: paths absolute (the run has no working directory of its own).
    let at = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    let synth = |out: &str| {
        let out = at(out);
        run_in_process(&[
            "synthesize",
            "agentic",
            "--num-sessions",
            "12",
            "--seed",
            "5",
            "--max-isl",
            "120000",
            "--output",
            &out,
        ])
    };
    let out = synth("a");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.starts_with("Wrote 12 sessions ("),
        "{}",
        out.stdout
    );
    let files = |d: &str| {
        let mut v: Vec<(String, String)> = std::fs::read_dir(dir.path().join(d))
            .unwrap()
            .map(|e| {
                let p = e.unwrap().path();
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                (name, std::fs::read_to_string(&p).unwrap())
            })
            .collect();
        v.sort();
        v
    };
    assert_eq!(files("a").len(), 12);
    assert_eq!(synth("b").code, 0);
    assert_eq!(files("a"), files("b"), "same seed, same corpus");
    let again = synth("a");
    assert_eq!(again.code, 2);
    assert_eq!(
        again.stderr.trim_end().lines().count(),
        1,
        "{}",
        again.stderr
    );
    assert!(
        again.stderr.contains("already holds *.json"),
        "{}",
        again.stderr
    );
    let corpus = at("a");
    let dry = run_in_process(&[
        "--mock-server",
        "--backend",
        "openai-chat",
        "--dataset-name",
        "agentic_trace",
        "--dataset-path",
        &corpus,
        "--dry-run",
    ]);
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    assert!(
        dry.stdout.contains("Agentic traces: 12 trees"),
        "{}",
        dry.stdout
    );
}

/// `--shard K/3` of a replay at 6 lanes, then `vllm-bench merge`: shard K runs exactly the
/// lanes l ≡ K (mod 3), each lane's first tree is the one-process run's (draw l: trace
/// l mod 3, pass l div 3), no tree instance (trace, pass) is replayed by two shards, and the
/// merged agentic section counts every shard's trees and requests once; a split the replay
/// cannot make is one line.
#[test]
fn three_shards_run_the_lanes_of_one_replay_and_merge() {
    let path = samples();
    let dir = TempDir::new("agentic-shards");
    let base = sample_replay(
        &path,
        &[
            "--max-concurrency",
            "6",
            "--duration",
            "2",
            "--agentic-start-ratio",
            "0,0",
            "--seed",
            "3",
            "--disable-tqdm",
            "--save-result",
            "--result-dir",
            dir.arg(),
        ],
    );
    let runs = crate::shards::at_one_start(3, |k, start_at| {
        let shard = format!("{k}/3");
        let file = format!("shard{k}.json");
        let mut args = base.to_vec();
        args.extend(["--shard", &shard, "--start-at", start_at]);
        args.extend(["--result-filename", &file]);
        run_in_process(&args)
    });
    assert!(
        runs[1].stdout.contains("Shard 1/3: 2 of the run's lanes"),
        "{}",
        runs[1].stdout
    );
    let files: Vec<String> = (0..3).map(|k| format!("shard{k}.json")).collect();
    let docs: Vec<serde_json::Value> = files
        .iter()
        .map(|f| crate::shards::read_json(&dir.path().join(f)))
        .collect();
    let records = |doc: &serde_json::Value| -> Vec<serde_json::Value> {
        doc["vllm_bench_shard"]["agentic"]["records"]
            .as_array()
            .expect("the shard's replay records")
            .clone()
    };
    let num = |v: &serde_json::Value, k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k}: {v}"));
    let mut instances = std::collections::HashMap::new();
    let mut all_lanes = std::collections::BTreeSet::new();
    for (k, doc) in docs.iter().enumerate() {
        let recs = records(doc);
        assert!(!recs.is_empty(), "shard {k} sent nothing");
        let mut first = std::collections::BTreeMap::new();
        for r in &recs {
            let lane = num(r, "lane");
            assert_eq!(lane % 3, k as u64, "shard {k} ran lane {lane}");
            all_lanes.insert(lane);
            let instance = (num(r, "tree"), num(r, "pass"));
            let owner = *instances.entry(instance).or_insert((k, lane));
            assert_eq!(
                owner,
                (k, lane),
                "tree instance {instance:?} replayed twice"
            );
            first.entry(lane).or_insert(instance);
        }
        for (lane, instance) in first {
            assert_eq!(instance, (lane % 3, lane / 3), "lane {lane}'s first tree");
        }
    }
    assert_eq!(all_lanes, (0..6).collect(), "every lane of the run, once");
    let merged = crate::shards::merge(&dir, &files, "merged.json");
    assert_eq!(merged.code, 0, "{}\n{}", merged.stdout, merged.stderr);
    let merged = crate::shards::read_json(&dir.path().join("merged.json"));
    let sum = |f: &dyn Fn(&serde_json::Value) -> u64| docs.iter().map(f).sum::<u64>();
    let section = |d: &serde_json::Value| d["vllm_bench_agentic"].clone();
    for key in ["started", "completed"] {
        assert_eq!(
            num(&section(&merged)["trees"], key),
            sum(&|d| num(&section(d)["trees"], key)),
            "trees {key}"
        );
    }
    assert_eq!(num(&merged, "completed"), sum(&|d| num(d, "completed")));
    let profiling = sum(&|d| {
        records(d)
            .iter()
            .filter(|r| r["phase"] == "Profiling")
            .count() as u64
    });
    let outcomes = &section(&merged)["profiling"];
    let counted: u64 = ["completed", "failed", "cancelled", "context_overflow"]
        .iter()
        .map(|k| outcomes[*k].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(counted, profiling, "{outcomes}");
    // What a shard cannot run is refused before anything is sent.
    for (extra, want) in [
        (&["--shard", "0/7"][..], "6 is fewer than the 7 shards"),
        (
            &["--shard", "0/2", "--agentic-warmup-per-lane", "1"][..],
            "--shard 0/2 with --agentic-warmup-per-lane",
        ),
    ] {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        let out = run_in_process(&args);
        assert_ne!(out.code, 0, "{extra:?}");
        assert!(out.stderr.contains(want), "{extra:?}: {}", out.stderr);
        assert_eq!(out.stderr.trim_end().lines().count(), 1, "{}", out.stderr);
    }
}

/// Ctrl-C in a replay whose every request is in flight (one lane, answers of seconds): the
/// lanes stop at once, the requests in flight get the interrupt's grace, and the run ends
/// with its accounting, far before its `--duration` (a lane whose workers were all busy
/// used to step on without yielding until the bound).
#[test]
fn ctrl_c_stops_a_replay_whose_requests_are_all_in_flight() {
    let _serial = crate::util::serial();
    let server = crate::e2e::mock(|c| c.token_interval = Duration::from_millis(100));
    let tokenizer = crate::util::fixture("golden/python-0.33/tok");
    let (url, path) = (server.base_url(), samples());
    let target = crate::util::chat_mock_flags(&url, tokenizer.to_str().unwrap());
    let replay = [
        "--dataset-name",
        "agentic_trace",
        "--dataset-path",
        path.to_str().unwrap(),
        "--max-concurrency",
        "1",
        "--duration",
        "200",
        "--agentic-start-ratio",
        "0,0",
        "--interrupt-grace-sec",
        "0.5",
        "--disable-tqdm",
    ];
    let args = [&target[..], &replay[..]].concat();
    let stop = vllm_bench::runtime::stop_handle::StopHandle::manual();
    let started = std::time::Instant::now();
    let out = std::thread::scope(|s| {
        let run = s.spawn(|| crate::util::run_in_process_stopped(&args, &stop));
        // The first turn (50 tokens at 100 ms) is in flight: stop then.
        for _ in 0..600 {
            if !server.request_log().is_empty() || run.is_finished() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        stop.request_stop();
        run.join().unwrap()
    });
    let took = started.elapsed();
    assert!(out.stdout.contains("Interrupted:"), "{}", out.stdout);
    assert!(
        took < Duration::from_secs(100),
        "the replay ran on to its bound after Ctrl-C: {took:?}"
    );
    accounting(&out.stdout);
}

/// The run's accounting line (`Requests planned: N = completed + failed + cancelled + not
/// sent`) as its five numbers, checked to add up.
fn accounting(stdout: &str) -> Vec<usize> {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("Requests planned:"))
        .unwrap_or_else(|| panic!("{stdout}"));
    let n: Vec<usize> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    assert_eq!(n.len(), 5, "{line}");
    assert_eq!(n[0], n[1] + n[2] + n[3] + n[4], "{line}");
    n
}

// `dag_jsonl` (SPEC §1.3): trees of literal messages, each request built when it is sent
// from its stream's history with the live answers threaded in.

fn dag_sample() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agentic/dag/sample.jsonl")
}

/// A replay of the `dag_jsonl` file at `path` on a mock answering after `ttft`, one lane,
/// start ratio 0 (the first tree primes root turn 0 and resumes at turn 1; the lane's next
/// tree runs from turn 0); the body options send no `ignore_eos` of their own.
fn dag_replay(path: &Path, ttft: Duration) -> Replay {
    let server = mock(ttft, |_| {});
    let url = BaseUrl::parse(&server.base_url()).unwrap();
    let dag = AgenticReplay::from_path(path)
        .expect("dag file")
        .dag
        .expect("read as dag_jsonl");
    let head = HeadTemplate::new(
        Method::Post,
        &url.request_path("/v1/chat/completions"),
        &url.host_header(),
        &[],
    );
    let body = BodyOptions {
        model: "m".into(),
        ..BodyOptions::default()
    };
    let opts = ReplayOptions {
        lanes: 1,
        start_ratio: (0.0, 0.0),
        warmup_per_lane: 0,
        trace_idle_cap: None,
        system_idle_cap: Some(SYSTEM_IDLE_CAP),
        seed: 42,
        mode: Api::Chat.response_mode(),
        failed_request_threshold: None,
        shard: None,
    };
    let words = |t: &str| t.split_whitespace().count() as u64;
    let run =
        AgenticRun::prepare_dag(&dag, &head, Api::Chat, &body, &words, opts).expect("prepare");
    let engine = Engine::start(
        crate::util::endpoint(&url),
        crate::util::options(1, crate::util::auto_driver()),
    )
    .expect("engine");
    Replay {
        server,
        engine,
        run,
        trees: dag.trees.iter().map(|t| t.id.clone()).collect(),
    }
}

/// The bodies of the model requests the mock saw, in arrival order.
fn bodies(server: &MockServer) -> Vec<serde_json::Value> {
    let mut log = server.request_log();
    log.retain(|r| r.method == "POST");
    log.sort_by_key(|r| r.arrival);
    log.iter()
        .map(|r| serde_json::from_str(r.body.as_deref().unwrap_or_default()).expect("JSON body"))
        .collect()
}

/// Replays the `dag_jsonl` `text` (every response 500 ms) until `bound_ms` (2 s of grace) and
/// checks its profiling sends against `want` and its accounting.
fn dag_timeline(
    text: &str,
    want: &[(i64, &str, u32, u32, u32)],
    bound_ms: i64,
) -> (Replay, Vec<ReplayRecord>) {
    let dir = TempDir::new("dag-timeline");
    let path = dir.path().join("tree.jsonl");
    std::fs::write(&path, text).unwrap();
    let r = dag_replay(&path, Duration::from_millis(500));
    let (report, records) = r.run(bound_ms as f64 / 1000.0, 2.0);
    assert_timeline(
        &r.sends(&records, Phase::Profiling),
        want,
        500,
        Some(bound_ms),
    );
    accounted(&report, &records);
    (r, records)
}

/// A message's role and text content.
fn said(m: &serde_json::Value) -> (String, String) {
    let role = m["role"].as_str().unwrap_or_default().to_string();
    (role, m["content"].as_str().unwrap_or_default().to_string())
}

/// The specification's example: the first tree primes root#0 (one token) and resumes at
/// root#1 (its workers, spawned before the start point, are over); the recycled tree runs
/// from turn 0: w1 and w2 start on root#0's answer, root#1 goes its 1 s delay after root#0
/// ended, and the join (root#2) goes 500 ms after root#1 ended, both workers done. Each
/// request is the stream's history: the file's messages and the live answers, `extra` merged,
/// `max_tokens` as given (none: `null`), one marker per tree instance.
#[test]
fn dag_the_spec_example_threads_live_answers_and_joins_its_workers() {
    let _serial = crate::util::serial();
    let r = dag_replay(&dag_sample(), Duration::from_millis(500));
    let (report, records) = r.run(4.3, 2.0);
    let primers = r.sends(&records, Phase::Primer);
    let ids: Vec<_> = primers.iter().map(|p| p.id.clone()).collect();
    assert_eq!(ids, [("root".to_string(), 0, 0, 0)]);
    assert_timeline(
        &r.sends(&records, Phase::Profiling),
        &[
            (0, "root", 0, 0, 1),
            (1000, "root", 0, 0, 2),
            (1500, "root", 1, 0, 0),
            (2000, "root", 1, 1, 0),
            (2000, "root", 1, 2, 0),
            (3000, "root", 1, 0, 1),
            (4000, "root", 1, 0, 2),
        ],
        500,
        Some(4300),
    );
    accounted(&report, &records);
    let b = bodies(&r.server);
    let markers = r.markers();
    // The primer and the first tree's two turns; then the recycled tree.
    assert_eq!(
        b[0]["max_completion_tokens"], 1,
        "the primer asks for one token"
    );
    let texts = |v: &serde_json::Value| -> Vec<(String, String)> {
        v["messages"].as_array().unwrap().iter().map(said).collect()
    };
    let first = texts(&b[1]);
    let roles: Vec<&str> = first.iter().map(|(r, _)| r.as_str()).collect();
    // Turns before the start point are history without answers (none was generated).
    assert_eq!(roles, ["system", "user", "user"], "{first:?}");
    assert_eq!(b[1]["max_completion_tokens"], serde_json::Value::Null);
    let pass1: Vec<&serde_json::Value> = b[3..].iter().collect();
    assert!(pass1.len() >= 5, "{pass1:?}");
    let root0 = texts(pass1[0]);
    assert_eq!(root0[0], ("system".into(), "You are a coder".into()));
    assert_eq!(root0[1].1, format!("{}\n\nPlan", markers[3]));
    assert_eq!(pass1[0]["max_completion_tokens"], 64);
    assert!(pass1[0].get("ignore_eos").is_none());
    // The workers: their own history, the tree's marker, their own limit.
    let mut workers: Vec<Vec<(String, String)>> = pass1[1..3].iter().map(|v| texts(v)).collect();
    workers.sort();
    assert_eq!(
        workers,
        [
            vec![("user".into(), format!("{}\n\nsearch A", markers[3]))],
            vec![("user".into(), format!("{}\n\nsearch B", markers[3]))],
        ]
    );
    assert!(pass1[1..3].iter().all(|v| v["max_completion_tokens"] == 32));
    // root#1: the history, root#0's live answer, then its own message.
    let root1 = texts(pass1[3]);
    assert_eq!(root1.len(), 4, "{root1:?}");
    assert_eq!(root1[2].0, "assistant");
    assert!(!root1[2].1.is_empty(), "the live answer: {root1:?}");
    assert_eq!(root1[3], ("user".into(), "go on".into()));
    // root#2 (the join): everything so far, root#1's answer, "merge"; `extra` merged.
    let root2 = texts(pass1[4]);
    assert_eq!(root2[..4], root1[..]);
    assert_eq!(root2[4].0, "assistant");
    assert_eq!(root2[5], ("user".into(), "merge".into()));
    assert_eq!(pass1[4]["ignore_eos"], true);
    assert!(markers[3..].iter().all(|m| *m == markers[3]), "{markers:?}");
    assert_ne!(markers[0], markers[3], "a new tree instance, a new marker");
}

/// A join waits for its slowest child: w1's second turn (2 s after its first) holds root#1,
/// whose own delay is 0, until it ended.
#[test]
fn dag_a_join_waits_for_its_last_child() {
    let _serial = crate::util::serial();
    let u = |t: &str| format!(r#"{{"messages":[{{"role":"user","content":"{t}"}}]"#);
    let text = format!(
        "{{\"session_id\":\"r\",\"turns\":[{},\"spawns\":[\"w1\",\"w2\"]}},{}}},{}}}]}}\n\
         {{\"session_id\":\"w1\",\"turns\":[{}}},{},\"delay\":2000}}]}}\n\
         {{\"session_id\":\"w2\",\"turns\":[{}}}]}}\n",
        u("r0"),
        u("r1"),
        u("r2"),
        u("a0"),
        u("a1"),
        u("b0")
    );
    // The first tree: primer r#0, r#1 at 0 (its workers were before the start point), r#2.
    dag_timeline(
        &text,
        &[
            (0, "r", 0, 0, 1),
            (500, "r", 0, 0, 2),
            (1000, "r", 1, 0, 0),
            (1500, "r", 1, 1, 0),
            (1500, "r", 1, 2, 0),
            (4000, "r", 1, 1, 1),
            (4500, "r", 1, 0, 1),
            (5000, "r", 1, 0, 2),
        ],
        5300,
    );
}

/// A background fork starts with a copy of the parent's history (its answer included) and
/// the parent goes on; a spawn on the last turn runs in the background and keeps the lane
/// until it ended.
#[test]
fn dag_a_fork_inherits_the_history_and_a_background_child_holds_the_lane() {
    let _serial = crate::util::serial();
    let text = r#"{"session_id":"r","turns":[{"messages":[{"role":"user","content":"a"}],"forks":[{"child":"f","background":true}]},{"messages":[{"role":"user","content":"b"}],"spawns":["bg"]}]}
{"session_id":"f","turns":[{"messages":[{"role":"user","content":"f0"}]}]}
{"session_id":"bg","turns":[{"messages":[{"role":"user","content":"g0"}]},{"messages":[{"role":"user","content":"g1"}],"delay":1000}]}
"#;
    let (r, records) = dag_timeline(
        text,
        &[
            (0, "r", 0, 0, 1),
            (500, "r", 0, 2, 0),
            (2000, "r", 0, 2, 1),
            (2500, "r", 1, 0, 0),
            (3000, "r", 1, 0, 1),
            (3000, "r", 1, 1, 0),
            (3500, "r", 1, 2, 0),
            (5000, "r", 1, 2, 1),
        ],
        5300,
    );
    let kinds: std::collections::BTreeSet<&str> = records
        .iter()
        .filter(|x| x.pass == 1)
        .map(|x| x.kind.name())
        .collect();
    assert_eq!(kinds, ["fork", "root", "spawn"].into());
    let b = bodies(&r.server);
    let find = |last: &str| {
        b.iter()
            .find(|v| {
                let m = v["messages"].as_array().unwrap();
                said(m.last().unwrap()).1.ends_with(last) && m.len() > 1
            })
            .unwrap_or_else(|| panic!("a request ending in {last:?}: {b:?}"))
    };
    let fork: Vec<(String, String)> = find("f0")["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(said)
        .collect();
    let roles: Vec<&str> = fork.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(roles, ["user", "assistant", "user"], "{fork:?}");
    assert!(fork[0].1.starts_with("[rid:") && fork[0].1.ends_with("\n\na"));
    assert_eq!(
        fork[2].1, "f0",
        "the fork's own message carries no marker of its own"
    );
}

/// `--duration` stops a dag replay: what is in flight at the bound is cancelled (no grace),
/// what was due is not sent, and every request is accounted for.
#[test]
fn dag_duration_stops_the_replay_and_accounts_for_every_request() {
    let _serial = crate::util::serial();
    let r = dag_replay(&dag_sample(), Duration::from_millis(500));
    let (report, records) = r.run(1.7, 0.0);
    accounted(&report, &records);
    assert!(
        records
            .iter()
            .any(|x| x.phase == Phase::Profiling && x.outcome == ReplayOutcome::Cancelled),
        "the recycled root#0 was in flight at the bound: {records:?}"
    );
    assert!(report.cancelled >= 1);
}

#[test]
fn dag_refusals_are_one_line_naming_the_line_and_field_and_nothing_is_sent() {
    let user = r#"{"role":"user","content":"u"}"#;
    let sys = r#"{"role":"system","content":"s"}"#;
    let line = |sid: &str, turns: &[&str]| {
        let t: Vec<String> = turns
            .iter()
            .map(|x| format!(r#"{{"messages":[{user}]{x}}}"#))
            .collect();
        format!(r#"{{"session_id":"{sid}","turns":[{}]}}"#, t.join(","))
    };
    let cases = [
        (
            line("r", &[r#","max_token":3"#]),
            "bad.jsonl:1: unknown field `max_token`",
        ),
        (
            format!("{}\n{}\n{}", line("r", &[r#","spawns":["a"]"#]), line("a", &[r#","spawns":["b"]"#]), line("b", &[r#","spawns":["a"]"#])),
            "bad.jsonl:2: session \"a\": a cycle of links: a -> b -> a",
        ),
        (
            line("r", &["", &format!(r#","messages":[{sys}]"#)]).replace(&format!(r#"[{user}],"messages":"#), ""),
            "bad.jsonl:1: session \"r\": turn 1: `messages`: a `system` message here",
        ),
        (
            format!("{}\n{}", line("r", &[r#","forks":["c"]"#, ""]), line("c", &[""])),
            "bad.jsonl:1: session \"r\": turn 0: `forks`: a foreground fork (\"c\") must be on the session's last turn",
        ),
        (
            line("r", &[r#","spawns":["ghost"]"#]),
            "bad.jsonl:1: session \"r\": turn 0: `spawns`: unknown session \"ghost\"",
        ),
    ];
    for (text, want) in cases {
        let e = refused(&[("bad.jsonl", text.clone())], "bad.jsonl");
        assert!(e.contains(want), "{text}\n{e}");
    }
}
