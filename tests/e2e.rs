//! End-to-end parity through the real `vllm-bench` binary (issue 3): every implemented backend
//! and schedule mode against an in-process mock that logs what it received, the saved file's
//! key order against Python's golden result files, bad input (one line, the right exit code,
//! never a panic), the seed README's example commands (mock and llama.cpp), and the console
//! block's line structure against the golden console.txt.
//!
//! Every run has a timeout and talks to 127.0.0.1 only; `HF_HUB_OFFLINE=1` keeps tokenizer
//! lookups off the network.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use vllm_bench::engine::schedule::{arrival_offsets, RampUp, RampUpStrategy, RateSpec};
use vllm_bench::mock::{AfterCrash, Crash, FaultConfig, MockConfig, MockServer};

use crate::util::{
    fixture, free_port, run_in_process, start_tool_server, vllm_bench, vllm_bench_env, Run, TempDir,
};

/// The result file name every mock run here uses.
pub(crate) const RESULT: &str = "r.json";

/// An in-process mock that logs every request, with small real delays so the client's
/// concurrency is visible in the server's in-flight count.
pub(crate) fn mock(tweak: impl FnOnce(&mut MockConfig)) -> MockServer {
    let mut cfg = MockConfig {
        request_log: true,
        first_token_delay: Duration::from_millis(5),
        token_interval: Duration::from_millis(1),
        ..MockConfig::default()
    };
    tweak(&mut cfg);
    MockServer::start(cfg).expect("mock server starts")
}

fn smollm2() -> String {
    path_arg(crate::util::smollm2())
}

/// The tokenizer of [`base_args`]: the goldens' byte-level BPE (4,096 ids). Those runs check
/// what the mock received and what the client saved, not the prompts' text, and it loads in
/// a tenth of the CPU time SmolLM2's (49,152 ids) takes, in every run.
fn small_tokenizer() -> String {
    path_arg(fixture(crate::util::SMALL_TOKENIZER))
}

fn path_arg(p: PathBuf) -> String {
    p.to_str().expect("utf-8 path").to_string()
}

/// `--base-url` at `server`, its model, a local tokenizer, a small random dataset, and the
/// result file in `dir`.
pub(crate) fn base_args(server: &MockServer, dir: &TempDir, num_prompts: usize) -> Vec<String> {
    [
        "--base-url",
        &server.base_url(),
        "--model",
        "mock-model",
        "--tokenizer",
        &small_tokenizer(),
        "--dataset-name",
        "random",
        "--random-input-len",
        "16",
        "--random-output-len",
        "4",
        "--num-prompts",
        &num_prompts.to_string(),
        "--seed",
        "0",
        "--disable-tqdm",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        dir.arg(),
        "--result-filename",
        RESULT,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// The program (in process) on `args` then `extra`; it must exit 0.
pub(crate) fn run_with(args: &[String], extra: &[&str]) -> Run {
    let all: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .chain(extra.iter().copied())
        .collect();
    let run = run_in_process(&all);
    assert_eq!(run.code, 0, "vllm-bench {all:?} failed:\n{}", run.stderr);
    run
}

/// The saved result file (one JSON object) with its key order.
pub(crate) fn saved(dir: &TempDir) -> Map<String, Value> {
    let text = std::fs::read_to_string(dir.path().join(RESULT)).expect("result file saved");
    serde_json::from_str(&text).expect("result file is one JSON object")
}

/// Our keys minus the additive extras (`vllm_bench_*`, and the seed's `steady_state` and
/// `per_turn_metrics`), in file order.
fn python_keys_of(doc: &Map<String, Value>) -> Vec<String> {
    doc.keys()
        .filter(|k| !k.starts_with("vllm_bench_") && !SEED_KEYS.contains(&k.as_str()))
        .cloned()
        .collect()
}

/// Keys the seed README names for vllm-bench's own additions.
const SEED_KEYS: [&str; 2] = ["steady_state", "per_turn_metrics"];

fn golden_dir(scenario: &str) -> PathBuf {
    fixture("golden/python-0.33").join(scenario)
}

/// The key order of Python's result.json for `scenario`.
fn golden_keys(scenario: &str) -> Vec<String> {
    let text =
        std::fs::read_to_string(golden_dir(scenario).join("result.json")).expect("golden result");
    let doc: Map<String, Value> = serde_json::from_str(&text).expect("golden JSON");
    doc.keys().cloned().collect()
}

const GOLDEN_01: &str = "01-random-c16-p50-90-99-99.9";
const GOLDEN_02: &str = "02-random-rate40-burst0.5-goodput";
const GOLDEN_03: &str = "03-chat-tpc3-c8-rate100-queue";
const GOLDEN_06: &str = "06-embeddings-pooling";

/// Percentile flags of golden 01 (generation) and 06 (pooling), so the key sets match.
const GEN_PERCENTILES: [&str; 4] = [
    "--percentile-metrics",
    "ttft,tpot,itl,e2el",
    "--metric-percentiles",
    "50,90,99,99.9",
];
const POOL_PERCENTILES: [&str; 2] = ["--metric-percentiles", "50,90,99"];

pub(crate) fn count(doc: &Map<String, Value>, key: &str) -> u64 {
    doc.get(key)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{key} is not a count in {doc:?}"))
}

/// Requests the mock logged on `path`, arrival offsets in seconds, sorted.
pub(crate) fn arrivals(server: &MockServer, path: &str) -> Vec<f64> {
    let mut a: Vec<f64> = server
        .request_log()
        .iter()
        .filter(|r| r.path == path)
        .map(|r| r.arrival.as_secs_f64())
        .collect();
    a.sort_by(f64::total_cmp);
    a
}

/// completed + failed = num_prompts, with failures equal to the non-empty `errors`.
pub(crate) fn assert_accounted(doc: &Map<String, Value>, n: u64) {
    let errors = doc["errors"].as_array().expect("errors list");
    let failed = errors
        .iter()
        .filter(|e| e.as_str().is_some_and(|s| !s.is_empty()))
        .count() as u64;
    assert_eq!(count(doc, "completed") + failed, n, "completed + failed");
    if let Some(f) = doc.get("failed") {
        assert_eq!(f.as_u64(), Some(failed), "failed key equals failed errors");
    }
}

#[test]
fn every_backend_sends_each_request_once_and_saves_pythons_keys() {
    let cases: [(&str, &str, &[&str], &str); 12] = [
        ("vllm", "/v1/completions", &GEN_PERCENTILES, GOLDEN_01),
        ("openai", "/v1/completions", &GEN_PERCENTILES, GOLDEN_01),
        (
            "openai-chat",
            "/v1/chat/completions",
            &GEN_PERCENTILES,
            GOLDEN_01,
        ),
        (
            "openai-responses",
            "/v1/responses",
            &GEN_PERCENTILES,
            GOLDEN_01,
        ),
        (
            "openai-embeddings",
            "/v1/embeddings",
            &POOL_PERCENTILES,
            GOLDEN_06,
        ),
        (
            "openai-embeddings-chat",
            "/v1/embeddings",
            &POOL_PERCENTILES,
            GOLDEN_06,
        ),
        (
            "openai-embeddings-clip",
            "/v1/embeddings",
            &POOL_PERCENTILES,
            GOLDEN_06,
        ),
        (
            "openai-embeddings-vlm2vec",
            "/v1/embeddings",
            &POOL_PERCENTILES,
            GOLDEN_06,
        ),
        (
            "infinity-embeddings",
            "/embeddings",
            &POOL_PERCENTILES,
            GOLDEN_06,
        ),
        (
            "infinity-embeddings-clip",
            "/embeddings",
            &POOL_PERCENTILES,
            GOLDEN_06,
        ),
        ("vllm-pooling", "/pooling", &POOL_PERCENTILES, GOLDEN_06),
        ("vllm-rerank", "/rerank", &POOL_PERCENTILES, GOLDEN_06),
    ];
    let n = 12;
    for (backend, path, percentiles, golden) in cases {
        let server = mock(|_| {});
        let dir = TempDir::new(backend);
        let mut extra = vec!["--backend", backend];
        extra.extend_from_slice(percentiles);
        if backend == "vllm-rerank" {
            // The random dataset gives the query; rerank needs documents beside it.
            extra.extend_from_slice(&["--extra-body", r#"{"documents": ["a b c", "d e"]}"#]);
        }
        let run = run_with(&base_args(&server, &dir, n), &extra);
        let doc = saved(&dir);
        assert_accounted(&doc, n as u64);
        assert_eq!(
            count(&doc, "completed"),
            n as u64,
            "{backend}: {}",
            run.stdout
        );
        assert_eq!(
            arrivals(&server, path).len(),
            n,
            "{backend}: one request each"
        );
        assert_eq!(doc["backend"], backend);
        assert_eq!(
            python_keys_of(&doc),
            golden_keys(golden),
            "{backend} key order"
        );
        assert!(
            run.stdout.contains(&format!(
                "Successful requests:                     {n:<10}\n"
            )),
            "{backend}:\n{}",
            run.stdout
        );
    }
}

/// The schedule the binary must follow for these flags (same seed, same generator).
fn planned(rate: f64, burstiness: f64, ramp: Option<RampUp>, n: usize) -> Vec<f64> {
    let spec = RateSpec {
        request_rate: rate,
        burstiness,
        ramp_up: ramp,
        seed: 0,
    };
    arrival_offsets(&spec, n)
        .expect("valid schedule")
        .expect("a timed schedule")
}

/// The client's send times (`start_times`, seconds since the run's epoch) against the plan:
/// the k-th request sent is never sent before the k-th planned arrival (no request leaves
/// early), and never waits for anything but its time (`LATE_BOUND`). How close to the plan
/// they leave is a speed, measured by bench-overhead (dispatch lag), not asserted here: a
/// descheduled machine makes any tight bound race.
fn assert_follows(sent: &[f64], plan: &[f64], what: &str) {
    /// Far above any dispatch lag, far below a schedule that waited for the run to end.
    const LATE_BOUND: f64 = 2.0;
    assert_eq!(sent.len(), plan.len(), "{what}: every request was sent");
    let mut sent = sent.to_vec();
    sent.sort_by(f64::total_cmp);
    let mut plan = plan.to_vec();
    plan.sort_by(f64::total_cmp);
    for (i, (s, p)) in sent.iter().zip(&plan).enumerate() {
        assert!(
            *s >= p - 1e-6,
            "{what}: request {i} sent at {s:.6}s, before its planned {p:.6}s"
        );
        assert!(
            s - p < LATE_BOUND,
            "{what}: request {i} sent at {s:.3}s, planned {p:.3}s: it waited for something else"
        );
    }
}

#[test]
fn rate_and_ramp_up_arrivals_follow_the_schedule() {
    let n = 30;
    let linear = RampUp {
        strategy: RampUpStrategy::Linear,
        start_rps: 20,
        end_rps: 80,
    };
    let exponential = RampUp {
        strategy: RampUpStrategy::Exponential,
        start_rps: 10,
        end_rps: 80,
    };
    let cases: [(&str, Vec<&str>, Vec<f64>); 4] = [
        (
            "rate 40, Poisson",
            vec!["--request-rate", "40"],
            planned(40.0, 1.0, None, n),
        ),
        (
            "rate 40, burstiness 0.5",
            vec!["--request-rate", "40", "--burstiness", "0.5"],
            planned(40.0, 0.5, None, n),
        ),
        (
            "linear ramp-up",
            vec![
                "--ramp-up-strategy",
                "linear",
                "--ramp-up-start-rps",
                "20",
                "--ramp-up-end-rps",
                "80",
            ],
            planned(f64::INFINITY, 1.0, Some(linear), n),
        ),
        (
            "exponential ramp-up",
            vec![
                "--ramp-up-strategy",
                "exponential",
                "--ramp-up-start-rps",
                "10",
                "--ramp-up-end-rps",
                "80",
            ],
            planned(f64::INFINITY, 1.0, Some(exponential), n),
        ),
    ];
    for (what, flags, plan) in cases {
        let server = mock(|_| {});
        let dir = TempDir::new("rate");
        let mut extra = flags.clone();
        extra.extend_from_slice(&GEN_PERCENTILES);
        run_with(&base_args(&server, &dir, n), &extra);
        let doc = saved(&dir);
        assert_accounted(&doc, n as u64);
        assert_eq!(
            arrivals(&server, "/v1/completions").len(),
            n,
            "{what}: every request reached the server"
        );
        let sent: Vec<f64> = doc["start_times"]
            .as_array()
            .expect("start_times (--save-detailed)")
            .iter()
            .map(|t| t.as_f64().expect("a number"))
            .collect();
        assert_follows(&sent, &plan, what);
        let keys = python_keys_of(&doc);
        if what.contains("ramp") {
            // Python inserts the ramp-up settings after max_concurrency and the rate changes
            // after rtfx (golden README, schema items 3 and 7).
            let mut want = golden_keys(GOLDEN_01);
            let at = want.iter().position(|k| k == "max_concurrency").unwrap() + 1;
            for (i, k) in ["ramp_up_strategy", "ramp_up_start_rps", "ramp_up_end_rps"]
                .iter()
                .enumerate()
            {
                want.insert(at + i, k.to_string());
            }
            let at = want.iter().position(|k| k == "rtfx").unwrap() + 1;
            want.insert(at, "rps_change_events".into());
            assert_eq!(keys, want, "{what} key order");
            assert!(doc["rps_change_events"]
                .as_array()
                .is_some_and(|e| !e.is_empty()));
        } else {
            // Rate runs: the schedule ends at N / rate (Python rescales the gaps so it ends
            // exactly there), and the last request was sent no earlier (assert_follows).
            let last = plan.iter().copied().fold(0.0, f64::max);
            let want = n as f64 / 40.0;
            assert!(
                (last - want).abs() < 1e-6,
                "{what}: the schedule ends at {last:.6}s, expected {want:.6}s"
            );
            assert_eq!(keys, golden_keys(GOLDEN_01), "{what} key order");
        }
    }
}

#[test]
fn max_concurrency_caps_requests_in_flight() {
    let n = 24;
    for (what, flags, cap) in [
        ("concurrency 4", vec!["--max-concurrency", "4"], 4u64),
        (
            "rate 100 + concurrency 3",
            vec!["--max-concurrency", "3", "--request-rate", "100"],
            3,
        ),
    ] {
        let server = mock(|c| c.first_token_delay = Duration::from_millis(20));
        let dir = TempDir::new("conc");
        run_with(&base_args(&server, &dir, n), &flags);
        let doc = saved(&dir);
        assert_accounted(&doc, n as u64);
        assert_eq!(count(&doc, "max_concurrency"), cap);
        let stats = server.stats();
        assert!(
            stats.peak_in_flight <= cap,
            "{what}: {} in flight at once, cap {cap}",
            stats.peak_in_flight
        );
        assert_eq!(
            stats.peak_in_flight, cap,
            "{what}: 20 ms responses keep the cap full"
        );
        assert_eq!(arrivals(&server, "/v1/completions").len(), n);
        if flags.contains(&"--request-rate") {
            // The cap can only delay an arrival, never bring it forward.
            let observed = arrivals(&server, "/v1/completions");
            let mut plan = planned(100.0, 1.0, None, n);
            plan.sort_by(f64::total_cmp);
            for (i, (o, p)) in observed.iter().zip(&plan).enumerate() {
                assert!(
                    o - observed[0] >= p - plan[0] - 0.03,
                    "{what}: request {i} arrived before its planned time"
                );
            }
        }
    }
}

/// The engine line and the result name the driver and, on io_uring, the ring setup; a setup
/// pinned with `VLLM_BENCH_URING_SETUP` is the one that ran.
#[test]
fn the_result_names_the_driver_and_the_ring_setup() {
    let server = mock(|_| {});
    let dir = TempDir::new("ring-setup");
    let args = base_args(&server, &dir, 4);
    let epoll = run_with(&args, &["--io-driver", "epoll"]);
    let doc = saved(&dir);
    assert_eq!(doc["vllm_bench_io_driver"], "epoll");
    assert!(!doc.contains_key("vllm_bench_uring_setup"), "{doc:?}");
    assert!(epoll.stdout.contains(" cores, epoll, "), "{}", epoll.stdout);

    let all: Vec<&str> = args.iter().map(String::as_str).collect();
    let pinned = vllm_bench_env(
        &all,
        dir.path(),
        &[("VLLM_BENCH_URING_SETUP", Path::new("coop"))],
    );
    assert_eq!(pinned.code, 0, "{}", pinned.stderr);
    let doc = saved(&dir);
    match doc["vllm_bench_io_driver"].as_str() {
        Some("io_uring") => {
            assert_eq!(doc["vllm_bench_uring_setup"], "coop");
            assert!(
                pinned.stdout.contains(" cores, io_uring (coop), "),
                "{}",
                pinned.stdout
            );
        }
        // A kernel without io_uring (or without COOP_TASKRUN) falls back, and says so.
        other => {
            assert_eq!(other, Some("epoll"));
            assert!(
                pinned.stderr.contains("using the epoll driver"),
                "{}",
                pinned.stderr
            );
        }
    }
}

/// `--random-range-ratio '{"input": 0.25, "output": 0.75}'` (Python's per-key form): every
/// prompt is drawn from `[floor(40·0.75), ceil(40·1.25)]` = [30, 50] tokens and every output
/// limit from `[floor(40·0.25), ceil(40·1.75)]` = [10, 70] — each length with its own ratio
/// (the input ratio once bounded both), the outputs reaching beyond the input range on
/// both sides. (Ratios exact in binary, so the products are exact.)
#[test]
fn input_and_output_lengths_follow_their_own_range_ratio() {
    let server = mock(|_| {});
    let dir = TempDir::new("range-ratio");
    let mut args = base_args(&server, &dir, 48);
    set(&mut args, "--random-input-len", "40");
    set(&mut args, "--random-output-len", "40");
    run_with(
        &args,
        &[
            "--prompt-token-ids",
            "--random-range-ratio",
            r#"{"input": 0.25, "output": 0.75}"#,
        ],
    );
    let doc = saved(&dir);
    let inputs: Vec<u64> = doc["input_lens"]
        .as_array()
        .expect("input_lens (--save-detailed)")
        .iter()
        .map(|v| v.as_u64().expect("a length"))
        .collect();
    let outputs: Vec<u64> = server
        .request_log()
        .iter()
        .filter(|r| r.path == "/v1/completions")
        .map(|r| r.max_tokens.expect("max_tokens sent"))
        .collect();
    assert_eq!((inputs.len(), outputs.len()), (48, 48));
    assert!(inputs.iter().all(|n| (30..=50).contains(n)), "{inputs:?}");
    assert!(outputs.iter().all(|n| (10..=70).contains(n)), "{outputs:?}");
    assert!(
        outputs.iter().any(|&n| n < 30) && outputs.iter().any(|&n| n > 50),
        "output limits drawn with the input ratio: {outputs:?}"
    );
}

#[test]
fn append_label_metadata_and_default_file_name() {
    let server = mock(|_| {});
    let dir = TempDir::new("append");
    let args: Vec<String> = base_args(&server, &dir, 5)
        .into_iter()
        .filter(|a| a != "--save-detailed")
        .collect();
    let extra = [
        "--append-result",
        "--label",
        "lab",
        "--metadata",
        "version=0.3.3",
        "tp=1",
    ];
    run_with(&args, &extra);
    run_with(&args, &extra);
    let text = std::fs::read_to_string(dir.path().join(RESULT)).expect("appended file");
    let lines: Vec<&str> = text.split('\n').collect();
    assert_eq!(
        lines.len(),
        2,
        "two JSON lines, no trailing newline: {text:?}"
    );
    // Python removes the per-request lists without --save-detailed and puts the metadata
    // right after num_prompts.
    let mut want = golden_keys(GOLDEN_02);
    want.retain(|k| {
        ![
            "input_lens",
            "output_lens",
            "ttfts",
            "itls",
            "start_times",
            "generated_texts",
            "errors",
        ]
        .contains(&k.as_str())
    });
    let at = want.iter().position(|k| k == "num_prompts").unwrap() + 1;
    want.insert(at, "version".into());
    want.insert(at + 1, "tp".into());
    for line in lines {
        let doc: Map<String, Value> = serde_json::from_str(line).expect("a JSON line");
        assert_eq!(doc["label"], "lab");
        assert_eq!(doc["version"], "0.3.3");
        assert_eq!(doc["completed"], 5);
        assert_eq!(python_keys_of(&doc), want);
    }

    // Without --result-filename: {label}-{rate}qps-concurrency{N}-{model}-{date}.json.
    let dir2 = TempDir::new("name");
    let args: Vec<String> = base_args(&server, &dir2, 3)
        .into_iter()
        .take_while(|a| a != "--result-filename")
        .collect();
    run_with(&args, &["--label", "lab", "--max-concurrency", "2"]);
    let names: Vec<String> = std::fs::read_dir(dir2.path())
        .expect("result dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(
        names[0].starts_with("lab-infqps-concurrency2-mock-model-") && names[0].ends_with(".json"),
        "{names:?}"
    );
}

/// A command line refused before anything is sent (by the configuration, or after it: a
/// dataset file, the tokenizer, the server): exit 2, exactly one `error:` line. Run in
/// process (`util::run_in_process`).
pub(crate) fn assert_refused(args: &[&str], needle: &str) {
    assert_refusal(run_in_process(args), args, needle);
}

pub(crate) fn assert_refusal(run: Run, args: &[&str], needle: &str) {
    assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
    let lines: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(
        lines.len(),
        1,
        "{args:?}: one line on stderr, got {lines:?}"
    );
    assert!(lines[0].starts_with("error: "), "{args:?}: {lines:?}");
    assert!(
        lines[0].contains(needle),
        "{args:?}: {lines:?} lacks {needle}"
    );
    assert!(!run.stdout.contains("Serving Benchmark Result"), "{args:?}");
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let closed = free_port().to_string();
    let unreachable = format!("http://127.0.0.1:{closed}");
    assert_refused(&["--num-prompts", "abc"], "--num-prompts abc");
    assert_refused(&["--mock-server", "--bogus-flag", "1"], "--bogus-flag");
    assert_refused(&["--dataset-name", "nope"], "--dataset-name nope");
    // Past the configuration (the dataset, the tokenizer, the server).
    assert_refused(
        &["--mock-server", "--dataset-name", "hf"],
        "--dataset-name hf needs --dataset-path ORG/NAME",
    );
    assert_refused(
        &[
            "--mock-server",
            "--tokenizer",
            "/nonexistent/tok",
            "--num-prompts",
            "2",
        ],
        "/nonexistent/tok",
    );
    // No server: said first, with what to check, and no hint about --model or --tokenizer
    // (neither can make a missing server answer).
    let missing = format!("no server is reachable at {unreachable} (cannot connect to");
    assert_refused(
        &["--base-url", &unreachable, "--num-prompts", "2"],
        &missing,
    );
    assert_refused(
        &[
            "--base-url",
            &unreachable,
            "--model",
            "m",
            "--tokenizer",
            &smollm2(),
            "--num-prompts",
            "2",
        ],
        &missing,
    );
}

/// A server that accepts connections and never answers: the control-plane call says what it
/// waits for after a second and gives up after its own 10 s, not minutes.
#[test]
fn a_server_that_never_answers_is_reported_not_waited_on() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    // Accepts and holds every connection, answering nothing; stops by itself after 60 s.
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let until = Instant::now() + Duration::from_secs(60);
        let mut held = Vec::new();
        while Instant::now() < until {
            match listener.accept() {
                Ok((s, _)) => held.push(s),
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    });
    let run = run_in_process(&["--base-url", &url, "--num-prompts", "2"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("note: waiting for GET /v1/models at 127.0.0.1:"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("no response within 10s; pass --model"),
        "{}",
        run.stderr
    );
}

/// The API key and every `--header` value reach no output: not stdout, stderr, the result
/// file or the mock's request log — in a good run and in one whose every request fails.
#[test]
fn secrets_never_appear_in_output() {
    const KEY: &str = "sk-SECRET-KEY-31337";
    const HEADER: &str = "hdr-SECRET-VALUE-4242";
    for fail in [false, true] {
        let server = mock(|c| {
            if fail {
                c.faults = FaultConfig {
                    error_500: 1.0,
                    ..FaultConfig::default()
                }
            }
        });
        let dir = TempDir::new("secrets");
        let mut args = base_args(&server, &dir, 3);
        for h in [format!("X-Tenant={HEADER}"), format!("X-Other: {HEADER}")] {
            args.extend(["--header".to_string(), h]);
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let run = vllm_bench_env(&refs, dir.path(), &[("OPENAI_API_KEY", Path::new(KEY))]);
        assert_eq!(run.code, if fail { 1 } else { 0 }, "{}", run.stderr);
        let saved = std::fs::read_to_string(dir.path().join(RESULT)).expect("result file");
        let log = serde_json::to_string(&server.request_log()).unwrap();
        for (what, text) in [
            ("stdout", &run.stdout),
            ("stderr", &run.stderr),
            ("result", &saved),
            ("request log", &log),
        ] {
            for secret in [KEY, HEADER] {
                assert!(!text.contains(secret), "{secret} in {what} (fail={fail})");
            }
        }
    }
}

/// `--profile`: start and stop are posted once each, with Python's lines around the run.
#[test]
fn profile_starts_before_the_run_and_stops_after_the_block() {
    let server = mock(|_| {});
    let dir = TempDir::new("profile");
    let run = run_with(&base_args(&server, &dir, 3), &["--profile"]);
    let at = |needle: &str| {
        run.stdout
            .find(needle)
            .unwrap_or_else(|| panic!("{needle} missing:\n{}", run.stdout))
    };
    assert!(at("Starting main benchmark run...") < at("Starting profiler..."));
    assert!(at("Profiler started") < at("Serving Benchmark Result"));
    assert!(at("Serving Benchmark Result") < at("Stopping profiler..."));
    assert!(at("Stopping profiler...") < at("Profiler stopped"));
    assert_profiled_once(&server);
}

/// One `POST /start_profile` and one `/stop_profile` reached the server.
fn assert_profiled_once(server: &MockServer) {
    let paths = server.stats().by_path;
    assert_eq!(
        (paths.get("/start_profile"), paths.get("/stop_profile")),
        (Some(&1), Some(&1))
    );
}

/// `--profile-batch-threshold`: the profiler starts only once the server runs that many
/// requests (after the first measured request arrived) and stops after the duration.
#[test]
fn profile_starts_at_the_batch_threshold_and_stops_after_the_duration() {
    // 80 closed-loop requests of ~150 ms, 4 at a time: about 3 s of 4 running requests.
    let server = mock(|c| {
        c.first_token_delay = Duration::from_millis(50);
        c.token_interval = Duration::from_millis(25);
    });
    let dir = TempDir::new("profile-threshold");
    let flags = [
        "--profile",
        "--profile-batch-threshold",
        "4",
        "--profile-duration",
        "0.3",
        "--max-concurrency",
        "4",
    ];
    run_with(&base_args(&server, &dir, 80), &flags);
    let log = server.request_log();
    let at = |path: &str| {
        log.iter()
            .find(|r| r.path == path)
            .unwrap_or_else(|| panic!("no {path} in the log"))
            .arrival
    };
    let first = at("/v1/completions");
    let (start, stop) = (at("/start_profile"), at("/stop_profile"));
    assert!(start > first, "started once requests were running");
    assert!(
        stop >= start + Duration::from_millis(300),
        "{start:?} .. {stop:?}"
    );
    assert_profiled_once(&server);
}

/// `--probe-request-rate`: one-token "Hi" probes beside the workload, outside its
/// concurrency cap, each sent the interval after the previous answer, reported apart.
#[test]
fn probe_requests_run_beside_the_workload_and_are_reported_apart() {
    let server = mock(|c| {
        c.first_token_delay = Duration::from_millis(20);
        c.token_interval = Duration::from_millis(10);
    });
    let dir = TempDir::new("probe");
    let flags = ["--probe-request-rate", "20", "--max-concurrency", "2"];
    let run = run_with(&base_args(&server, &dir, 30), &flags);
    assert!(
        run.stdout.contains("Probe request rate: 20.0 req/s"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("Probe requests completed:"),
        "{}",
        run.stdout
    );
    let doc = saved(&dir);
    assert_eq!(
        count(&doc, "completed"),
        30,
        "probes are not the workload's requests"
    );
    let log = server.request_log();
    let probes: Vec<_> = log.iter().filter(|r| r.max_tokens == Some(1)).collect();
    assert!(!probes.is_empty());
    assert!(probes
        .iter()
        .all(|p| p.request_id.is_none() && p.prompt_tokens == Some(1)));
    assert_eq!(
        count(&doc, "probe_completed") + count(&doc, "probe_failed"),
        probes.len() as u64
    );
    for pair in probes.windows(2) {
        let gap = pair[1].arrival - pair[0].arrival;
        assert!(
            gap >= Duration::from_millis(50),
            "a probe waits 1/rate after the answer: {gap:?}"
        );
    }
    let keys: Vec<&String> = doc.keys().collect();
    let at = |k: &str| keys.iter().position(|x| *x == k).unwrap();
    assert!(at("rtfx") < at("probe_completed") && at("probe_max_e2el_ms") < at("mean_ttft_ms"));
}

/// A missing input file: one line naming it, the OS error said once (a `source` that is
/// also in the message would print it twice).
#[test]
fn a_missing_dataset_file_names_the_os_error_once() {
    for ds in ["timed_trace", "sharegpt", "burstgpt"] {
        let missing = "/nonexistent-vllm-bench/trace.jsonl";
        let args = [
            "--mock-server",
            "--dataset-name",
            ds,
            "--dataset-path",
            missing,
            "--num-prompts",
            "2",
        ];
        assert_refused(&args, missing);
        let run = run_in_process(&args);
        assert_eq!(
            run.stderr.matches("os error 2").count(),
            1,
            "{ds}: {}",
            run.stderr
        );
    }
}

/// An unusable result target is refused before anything is sent (exit 2, one line), not
/// after the run with its numbers lost.
#[test]
fn an_unusable_result_target_is_refused_before_the_run() {
    let server = mock(|_| {});
    let dir = TempDir::new("target");
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let file = file.to_str().expect("utf-8 path");
    let common = [
        "--base-url",
        &server.base_url(),
        "--model",
        "mock-model",
        "--tokenizer",
        &smollm2(),
        "--num-prompts",
        "2",
        "--save-result",
    ];
    fn with<'a>(common: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
        common.iter().chain(extra).copied().collect()
    }
    assert_refused(
        &with(&common, &["--result-dir", file]),
        "cannot create the directory",
    );
    assert_refused(
        &with(
            &common,
            &["--result-dir", dir.arg(), "--result-filename", "."],
        ),
        "it is a directory",
    );
    assert_refused(
        &with(&common, &["--result-filename", "/nonexistent-dir/r.json"]),
        "not a directory",
    );
    assert_eq!(
        server.stats().by_path.get("/v1/completions"),
        None,
        "nothing was sent"
    );
}

#[test]
fn failures_are_counted_in_the_block_and_the_file() {
    // A server that went away after the run's start check: every request is refused, the
    // run reports them, and the client is not blamed for a server that was not there.
    let server = mock(|c| {
        c.crash = Some(Crash {
            at_request: 0,
            then: AfterCrash::Down,
        })
    });
    let dir = TempDir::new("refused");
    let owned = base_args(&server, &dir, 3);
    let mut args: Vec<&str> = owned.iter().map(String::as_str).collect();
    args.push("--save-detailed");
    let run = run_in_process(&args);
    // Not one request succeeded: exit 1 with one line saying so, after the block and file.
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(
        run.stderr
            .lines()
            .filter(|l| l.starts_with("error: no request succeeded (3 failed, e.g. "))
            .count(),
        1,
        "{}",
        run.stderr
    );
    assert!(run
        .stdout
        .contains("Failed requests:                         3 "));
    let doc = saved(&dir);
    assert_eq!((count(&doc, "completed"), count(&doc, "failed")), (0, 3));
    assert!(
        run.stdout
            .contains("client: no verdict (the server answered no request)"),
        "{}",
        run.stdout
    );

    // A server answering 500 to every model request.
    let server = mock(|c| {
        c.faults = FaultConfig {
            error_500: 1.0,
            ..FaultConfig::default()
        }
    });
    let dir = TempDir::new("faults");
    let owned = base_args(&server, &dir, 6);
    let args: Vec<&str> = owned.iter().map(String::as_str).collect();
    let run = run_in_process(&args);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run
        .stdout
        .contains("Failed requests:                         6 "));
    assert!(run
        .stdout
        .contains("Failed requests during benchmark run detected (capping to 10):"));
    let doc = saved(&dir);
    assert_eq!((count(&doc, "completed"), count(&doc, "failed")), (0, 6));
    assert_accounted(&doc, 6);
}

/// The seed README's commands with `<model-name>`/`--base-url` filled in.
fn seed_commands(base_url: &str, model: &str) -> [Vec<String>; 3] {
    let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    let common = |v: &[&str]| {
        let mut a = s(&[
            "--backend",
            "vllm",
            "--base-url",
            base_url,
            "--model",
            model,
        ]);
        a.extend(s(v));
        a
    };
    [
        // Quick Start.
        common(&[
            "--dataset-name",
            "random",
            "--random-input-len",
            "1024",
            "--random-output-len",
            "128",
            "--num-prompts",
            "1000",
            "--max-concurrency",
            "200",
        ]),
        // Generation, "full production-style run".
        common(&[
            "--dataset-name",
            "random",
            "--random-input-len",
            "8192",
            "--random-output-len",
            "1024",
            "--ignore-eos",
            "--num-prompts",
            "4096",
            "--percentile-metrics",
            "ttft,tpot,itl,e2el",
            "--save-result",
            "--max-concurrency",
            "1400",
        ]),
        // Generation, token ids.
        common(&[
            "--dataset-name",
            "random",
            "--random-input-len",
            "1024",
            "--prompt-token-ids",
            "--num-prompts",
            "1000",
        ]),
    ]
}

/// Replaces the value after `flag` (scaling a seed command down).
fn set(args: &mut [String], flag: &str, value: &str) {
    let i = args.iter().position(|a| a == flag).expect(flag) + 1;
    args[i] = value.to_string();
}

fn prompts_of(args: &[String]) -> usize {
    let i = args
        .iter()
        .position(|a| a == "--num-prompts")
        .expect("--num-prompts")
        + 1;
    args[i].parse().expect("a count")
}

fn run_seed(args: &[String], dir: &TempDir, extra: &[&str]) -> Run {
    let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
    all.extend_from_slice(extra);
    let run = vllm_bench(&all, dir.path());
    assert_eq!(run.code, 0, "{all:?}:\n{}", run.stderr);
    let n = prompts_of(args);
    assert!(
        run.stdout.contains(&format!(
            "Successful requests:                     {n:<10}\n"
        )),
        "{all:?}:\n{}",
        run.stdout
    );
    run
}

#[test]
fn seed_examples_run_against_the_mock() {
    let server = mock(|c| {
        c.first_token_delay = Duration::ZERO;
        c.token_interval = Duration::ZERO;
        c.request_log = false;
    });
    let dir = TempDir::new("seed");
    let [quick, mut full, ids] = seed_commands(&server.base_url(), "mock-model");
    // Quick Start and the token-id example run unchanged. The production-style run is
    // scaled from 4096 x (8192 in, 1024 out) at concurrency 1400 to 256 x (1024, 64) at 128
    // to stay fast in a debug build.
    run_seed(&quick, &dir, &["--disable-tqdm"]);
    set(&mut full, "--random-input-len", "1024");
    set(&mut full, "--random-output-len", "64");
    set(&mut full, "--num-prompts", "256");
    set(&mut full, "--max-concurrency", "128");
    run_seed(&full, &dir, &["--disable-tqdm"]);
    let saved: Vec<_> = std::fs::read_dir(dir.path())
        .expect("cwd")
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("vllm-infqps-concurrency128-")
        })
        .collect();
    assert_eq!(
        saved.len(),
        1,
        "--save-result writes into the working directory"
    );
    run_seed(&ids, &dir, &["--disable-tqdm"]);
}

#[test]
fn seed_examples_run_against_llama_cpp() {
    let Some(server) = start_tool_server("llama-server.sh", &[], &[]) else {
        return;
    };
    let dir = TempDir::new("llama");
    let tok = smollm2();
    // llama.cpp here has 1024 tokens of context per slot and runs on a shared CPU: 4 prompts
    // of 32 tokens in, 8 out, concurrency 4 where the command sets one.
    for mut args in seed_commands(&server.url, &server.model) {
        set(&mut args, "--random-input-len", "32");
        set(&mut args, "--num-prompts", "4");
        if args.iter().any(|a| a == "--random-output-len") {
            set(&mut args, "--random-output-len", "8");
        }
        if args.iter().any(|a| a == "--max-concurrency") {
            set(&mut args, "--max-concurrency", "4");
        }
        let mut extra = vec!["--tokenizer", &tok, "--disable-tqdm"];
        if !args.iter().any(|a| a == "--random-output-len") {
            extra.extend_from_slice(&["--random-output-len", "8"]);
        }
        run_seed(&args, &dir, &extra);
    }
}

/// The result block of a run's stdout: the banner through the closing line of 50 `=`.
fn block(stdout: &str) -> Vec<&str> {
    let lines: Vec<&str> = stdout.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.starts_with("============ Serving Benchmark Result"))
        .expect("result block");
    let end = lines[start + 1..]
        .iter()
        .position(|l| *l == "=".repeat(50))
        .expect("closing line")
        + start
        + 1;
    lines[start..=end].to_vec()
}

/// A line's structure: separators as they are; a metric as its 40-column label, with the
/// value column checked to be `{:<10}`-padded.
fn shape(line: &str) -> String {
    if line.len() == 50 && (line.starts_with('=') || line.starts_with('-')) {
        return line.to_string();
    }
    assert!(line.len() >= 51, "short metric line {line:?}");
    let (label, value) = line.split_at(40);
    assert!(value.starts_with(' '), "no space after the label: {line:?}");
    let value = &value[1..];
    let shown = value.trim_end().len();
    assert!(
        value.len() == shown.max(10) && shown > 0,
        "value not padded to 10: {line:?}"
    );
    label.to_string()
}

/// Runs the golden scenario's flags (scaled by `extra`) against a mock configured like the
/// golden one, then compares the console block's structure and the result keys.
fn golden_check(scenario: &str, flags: &[&str], tokens_per_chunk: usize) {
    let server = mock(|c| {
        c.tokenize_endpoints = false;
        c.metrics_endpoint = false;
        c.tokens_per_chunk = tokens_per_chunk;
        c.first_token_delay = Duration::from_millis(20);
        c.token_interval = Duration::from_millis(5);
    });
    let dir = TempDir::new("golden");
    let tok = path_arg(fixture(crate::util::SMALL_TOKENIZER));
    let url = server.base_url();
    let mut args = vec![
        "--base-url",
        &url,
        "--model",
        "mock-model",
        "--tokenizer",
        &tok,
        "--dataset-name",
        "random",
        "--seed",
        "0",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        dir.arg(),
        "--result-filename",
        RESULT,
        "--disable-tqdm",
    ];
    args.extend_from_slice(flags);
    let run = run_in_process(&args);
    assert_eq!(run.code, 0, "{scenario}: {}", run.stderr);
    let golden = std::fs::read_to_string(golden_dir(scenario).join("console.txt")).expect("golden");
    let want: Vec<String> = golden.lines().map(shape).collect();
    let got: Vec<String> = block(&run.stdout).into_iter().map(shape).collect();
    assert_eq!(got, want, "{scenario}: console structure\n{}", run.stdout);
    assert_eq!(
        python_keys_of(&saved(&dir)),
        golden_keys(scenario),
        "{scenario}"
    );
}

#[test]
fn console_block_and_keys_match_the_golden_structure() {
    // Each golden command with --num-prompts (and 03's output length) scaled down.
    golden_check(
        GOLDEN_01,
        &[
            "--backend",
            "vllm",
            "--random-input-len",
            "128",
            "--random-output-len",
            "32",
            "--num-prompts",
            "32",
            "--max-concurrency",
            "16",
            "--percentile-metrics",
            "ttft,tpot,itl,e2el",
            "--metric-percentiles",
            "50,90,99,99.9",
        ],
        1,
    );
    golden_check(
        GOLDEN_02,
        &[
            "--backend",
            "openai",
            "--random-input-len",
            "64",
            "--random-output-len",
            "24",
            "--num-prompts",
            "30",
            "--request-rate",
            "40",
            "--burstiness",
            "0.5",
            "--goodput",
            "ttft:30",
            "tpot:8",
            "e2el:400",
        ],
        1,
    );
    golden_check(
        GOLDEN_03,
        &[
            "--backend",
            "openai-chat",
            "--endpoint",
            "/v1/chat/completions",
            "--random-input-len",
            "64",
            "--random-output-len",
            "30",
            "--num-prompts",
            "30",
            "--request-rate",
            "100",
            "--max-concurrency",
            "8",
            "--percentile-metrics",
            "ttft,tpot,itl,e2el,client_queue_time,e2el_including_client_queue",
            "--metric-percentiles",
            "50,95,99",
        ],
        3,
    );
    golden_check(
        GOLDEN_06,
        &[
            "--backend",
            "openai-embeddings",
            "--endpoint",
            "/v1/embeddings",
            "--random-input-len",
            "64",
            "--num-prompts",
            "20",
            "--max-concurrency",
            "10",
            "--metric-percentiles",
            "50,90,99",
        ],
        1,
    );
}

#[test]
fn dry_run_with_a_tokenizer_asks_no_server() {
    // A closed port makes any model lookup fail, so exit 0 proves none happened.
    let closed = format!("http://127.0.0.1:{}", free_port());
    let tok = smollm2();
    let args = [
        "--base-url",
        &closed,
        "--dry-run",
        "--tokenizer",
        &tok,
        "--num-prompts",
        "20",
        "--random-input-len",
        "32",
        "--random-output-len",
        "8",
    ];
    let run = run_in_process(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("Requests: 20"), "{}", run.stdout);
    assert!(!run.stdout.contains("Serving Benchmark Result"));
}

/// `--version` and `-V` answer through the start-up fast path with the same text clap prints.
#[test]
fn version_is_printed_fast_path_and_matches_clap() {
    let clap_text = match vllm_bench::cli::parse_from(["vllm-bench", "--version"]) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("--version must not parse into a run"),
    };
    for flag in ["--version", "-V"] {
        let out = run_in_process(&[flag]);
        assert_eq!(out.code, 0);
        assert_eq!(out.stdout, clap_text, "{flag}");
    }
}

/// `--num-cores N --mock-server` on all N cores: the mock keeps one, and the run says so
/// instead of printing "Engine: N-1 cores" unexplained; without --num-cores it says nothing.
#[test]
fn num_cores_taken_by_the_embedded_mock_is_noted() {
    let n = vllm_bench::runtime::available_cores().len();
    if n < 2 {
        crate::util::skip_or_fail("two cores", &format!("this process may run on {n}"));
        return;
    }
    let small = [
        "--mock-server",
        "--num-prompts",
        "2",
        "--random-input-len",
        "8",
    ];
    let n_arg = n.to_string();
    let mut args = small.to_vec();
    args.extend([
        "--random-output-len",
        "2",
        "--disable-tqdm",
        "--num-cores",
        &n_arg,
    ]);
    let run = run_in_process(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let note = format!(
        "note: the client runs on {} of the {n} cores asked for",
        n - 1
    );
    assert!(run.stderr.contains(&note), "{note}:\n{}", run.stderr);
    let run = run_in_process(&args[..args.len() - 2]);
    assert!(!run.stderr.contains("cores asked for"), "{}", run.stderr);
}

/// `--keep-cpus-awake` either holds its request for the run (root: the engine line and the
/// result say so) or stops before any request with one line naming the device and the fix.
#[test]
fn keep_cpus_awake_is_said_where_it_held_and_refused_in_one_line_where_it_cannot() {
    let server = mock(|_| {});
    let dir = TempDir::new("keep-awake");
    let args = base_args(&server, &dir, 4);
    let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
    all.push("--keep-cpus-awake");
    let run = run_in_process(&all);
    let writable = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/cpu_dma_latency")
        .is_ok();
    if writable {
        assert_eq!(run.code, 0, "{}", run.stderr);
        let engine = run
            .stdout
            .lines()
            .find(|l| l.starts_with("Engine:"))
            .expect("the engine line");
        assert!(engine.ends_with(", CPUs kept awake"), "{engine}");
        assert_eq!(saved(&dir)["vllm_bench_cpus_kept_awake"], Value::Bool(true));
        // Without the flag the key is absent and the engine line says nothing of it.
        let plain = run_with(&args, &[]);
        assert!(
            !plain.stdout.contains("CPUs kept awake"),
            "{}",
            plain.stdout
        );
        assert!(!saved(&dir).contains_key("vllm_bench_cpus_kept_awake"));
    } else {
        assert_refusal(run, &all, "through /dev/cpu_dma_latency (");
    }
}
