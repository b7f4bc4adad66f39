//! `--slo-search` through the real binary against an in-process mock with a fixed number of
//! slots (a request waits for a free slot, then the first-token delay, then the token
//! interval), whose capacity is known: the concurrency search finds the slot count exactly,
//! the rate search a rate that meets again while 1.3× it does not; a never-met SLO exits 1
//! with the lowest probe, a budget stops the search and says so, bad terms are refused.
//!
//! Delays are tens of milliseconds, far above this machine's noise for the bounds used,
//! and probes are a few dozen requests, so the whole file runs in seconds.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use vllm_bench::mock::MockServer;

use crate::e2e::mock;
use crate::util::{mock_random_args, run_in_process, vllm_bench, Run, TempDir};

/// A mock of `slots` slots: 50 ms to the first token, then 20 ms per token (4 tokens: a
/// request holds its slot 110 ms).
fn slotted(slots: usize, first_ms: u64, itl_ms: u64) -> MockServer {
    mock(|c| {
        c.slots = Some(slots);
        c.request_log = false;
        c.first_token_delay = Duration::from_millis(first_ms);
        c.token_interval = Duration::from_millis(itl_ms);
    })
}

fn search(server: &MockServer, dir: &TempDir, extra: &[&str]) -> Run {
    let base = mock_random_args(&server.base_url());
    let mut args: Vec<&str> = base.iter().map(String::as_str).collect();
    args.extend([
        "--disable-tqdm",
        "--save-result",
        "--result-dir",
        dir.arg(),
        "--result-filename",
        "s.json",
    ]);
    args.extend(extra);
    vllm_bench(&args, dir.path())
}

fn summary(dir: &TempDir) -> Value {
    let path = dir.path().join("s-slo-search-summary.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let doc: Value = serde_json::from_str(&text).unwrap();
    doc["vllm_bench_slo_search"].clone()
}

#[test]
fn the_concurrency_search_returns_exactly_the_slot_count() {
    let _one_at_a_time = crate::util::serial();
    let server = slotted(4, 50, 20);
    let dir = TempDir::new("slo-c");
    // A TTFT bound just above the first-token delay: a fifth request in flight waits a
    // whole 110 ms service for its slot.
    let out = search(
        &server,
        &dir,
        &[
            "--num-prompts",
            "10",
            "--slo-search",
            "max-concurrency",
            "--slo",
            "ttft:p99=80",
            "--plot",
        ],
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let s = summary(&dir);
    assert_eq!(s["variable"], "max_concurrency");
    assert_eq!(s["best"]["max_concurrency"], 4, "{s:#}");
    assert_eq!(s["next_failed"]["max_concurrency"], 5, "{s:#}");
    let points = s["points"].as_array().unwrap();
    let runs_of = |v: u64| points.iter().filter(|p| p["max_concurrency"] == v).count();
    assert!(runs_of(4) >= 2 && runs_of(5) >= 2, "both confirmed: {s:#}");
    // One line per probe, then the block; every probe's own result file.
    let lines = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("SLO probe"))
        .count();
    assert_eq!(lines, points.len(), "{}", out.stdout);
    assert!(out
        .stdout
        .contains("Capacity (max_concurrency):              4"));
    assert!(out.stdout.contains("Tightest term:"), "{}", out.stdout);
    assert!(out.stdout.contains("Overhead between probes (ms):"));
    for p in points {
        let file = p["result_file"].as_str().expect("a result file per probe");
        assert!(Path::new(file).exists(), "{file}");
    }
    let page = std::fs::read_to_string(dir.path().join("s-slo-search-summary.html")).unwrap();
    assert!(page.contains("class=\"bound\"") && page.contains("class=\"answer\""));
}

fn p99_ttft_at(server: &MockServer, rate: f64) -> f64 {
    let dir = TempDir::new("slo-again");
    let rate = format!("{rate}");
    let base = mock_random_args(&server.base_url());
    let mut args: Vec<&str> = base.iter().map(String::as_str).collect();
    args.extend([
        "--disable-tqdm",
        "--num-prompts",
        "60",
        "--burstiness",
        "100",
        "--request-rate",
        &rate,
        "--save-result",
        "--result-dir",
        dir.arg(),
        "--result-filename",
        "r.json",
    ]);
    let out = vllm_bench(&args, dir.path());
    assert_eq!(out.code, 0, "{}", out.stderr);
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    doc["p99_ttft_ms"].as_f64().unwrap()
}

#[test]
fn the_rate_search_answer_meets_again_and_1_3x_it_does_not() {
    // Alone: the answer is a boundary, and the re-run must not share the cores with
    // another search.
    let _one_at_a_time = crate::util::serial();
    // 2 slots of 35 ms: about 57 requests per second at most. Arrivals nearly evenly spaced
    // (burstiness 100), so below the capacity nothing queues and above it the queue grows
    // through the run: the boundary is steep, and a re-run is not a coin toss.
    let server = slotted(2, 20, 5);
    let dir = TempDir::new("slo-r");
    let out = search(
        &server,
        &dir,
        &[
            "--num-prompts",
            "60",
            "--burstiness",
            "100",
            "--slo-search",
            "request-rate",
            "--slo",
            "ttft:p99=100",
        ],
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let s = summary(&dir);
    let points = s["points"].as_array().unwrap();
    assert_eq!(
        points[0]["request_rate"], "inf",
        "bracketed from a run at inf"
    );
    let rate = s["best"]["request_rate"].as_f64().expect("a rate");
    let failed = s["next_failed"]["request_rate"].as_f64().expect("a rate");
    assert!((failed - rate) / rate <= 0.05 + 1e-9, "{rate} {failed}");
    assert!(p99_ttft_at(&server, rate) <= 100.0, "{rate} meets again");
    assert!(
        p99_ttft_at(&server, rate * 1.3) > 100.0,
        "1.3 × {rate} does not"
    );
}

#[test]
fn a_never_met_slo_exits_1_with_the_lowest_probe() {
    let server = slotted(4, 30, 5);
    let dir = TempDir::new("slo-never");
    let out = search(
        &server,
        &dir,
        &[
            "--num-prompts",
            "6",
            "--slo-search",
            "max-concurrency",
            "--slo",
            "ttft:p99=1",
        ],
    );
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains(
            "even the lowest value probed (1) does not meet (max_concurrency = 1: ttft:p99"
        ),
        "{}",
        out.stderr
    );
    let s = summary(&dir);
    assert!(s["best"].is_null());
    assert_eq!(s["next_failed"]["max_concurrency"], 1);
    assert_eq!(s["next_failed"]["meets"], false);
}

#[test]
fn a_request_budget_stops_the_search_and_says_so() {
    let server = slotted(8, 10, 2);
    let dir = TempDir::new("slo-budget");
    let out = search(
        &server,
        &dir,
        &[
            "--num-prompts",
            "10",
            "--slo-search",
            "max-concurrency",
            "--slo",
            "e2el:mean=5000",
            "--slo-search-max-requests",
            "25",
        ],
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let s = summary(&dir);
    assert_eq!(s["points"].as_array().unwrap().len(), 2, "{s:#}");
    let why = s["stopped_because"].as_str().unwrap();
    assert!(
        why.starts_with("the request budget (25) was reached"),
        "{why}"
    );
    assert_eq!(s["best"]["max_concurrency"], 2);
    assert!(out.stdout.contains("the request budget (25) was reached"));
}

#[test]
fn bad_terms_are_refused_one_line_each() {
    let out = run_in_process(&[
        "--mock-server",
        "--slo-search",
        "max-concurrency",
        "--slo",
        "ttft:p99=500,tfft:p99=5",
        "--slo",
        "tpot:p100.5=50,e2el:mean",
    ]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    let errors: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.starts_with("error: "))
        .collect();
    assert_eq!(errors.len(), 3, "{}", out.stderr);
    assert!(errors[0].contains("--slo tfft:p99=5: unknown metric 'tfft'"));
    let out = run_in_process(&[
        "--mock-server",
        "--slo-search",
        "request-rate",
        "--slo",
        "ttft:p99=5",
        "--shard",
        "0/2",
    ]);
    assert_eq!(out.code, 2);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(
        out.stderr.contains("cannot run with --shard yet"),
        "{}",
        out.stderr
    );
}
