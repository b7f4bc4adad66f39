//! `--duration`: a time-bounded run on every schedule. No request leaves after the bound,
//! requests in flight at the bound get the grace and are then cut and counted as cancelled,
//! and completed + failed + cancelled + not sent = planned, in the engine and through the
//! binary (rate-driven, closed-loop and multi-turn schedules).

use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use vllm_bench::cli::Backend;
use vllm_bench::engine::{RunReport, TimeBound};
use vllm_bench::http::url::BaseUrl;
use vllm_bench::mock::{MockConfig, MockServer};

use crate::util::{auto_driver, options, run, run_in_process, workload, TempDir};

fn mock(ttft_ms: u64, itl_ms: u64) -> (MockServer, BaseUrl) {
    let server = MockServer::start(MockConfig {
        first_token_delay: Duration::from_millis(ttft_ms),
        token_interval: Duration::from_millis(itl_ms),
        ..MockConfig::default()
    })
    .expect("start mock");
    let url = BaseUrl::parse(&server.base_url()).unwrap();
    (server, url)
}

fn accounted(r: &RunReport, planned: usize) {
    assert_eq!(
        r.merged.outputs.len() + r.cancelled + r.not_sent,
        planned,
        "completed+failed {} + cancelled {} + not sent {}",
        r.merged.outputs.len(),
        r.cancelled,
        r.not_sent
    );
}

#[test]
fn no_request_of_a_timed_schedule_leaves_after_the_bound() {
    let _serial = crate::util::serial();
    let (_server, url) = mock(5, 1);
    let n = 40;
    let mut w = workload(&url, Backend::Vllm, "mock-model", n, 4);
    // One request every 50 ms: a 2 s schedule, bounded at 0.5 s.
    w.arrivals = Some(
        (0..n)
            .map(|i| Duration::from_millis(50 * i as u64))
            .collect(),
    );
    w.time_bound = Some(TimeBound {
        after: Duration::from_millis(500),
        grace: Duration::from_secs(5),
    });
    let r = run(&url, w, options(2, auto_driver()));
    accounted(&r, n);
    let bound_ns = 500_000_000;
    assert!(
        r.merged
            .records
            .iter()
            .all(|rec| rec.scheduled_ns < bound_ns),
        "a request due at or after the bound was sent"
    );
    // 0, 50, ..., 450 ms are due before the bound.
    assert_eq!(r.merged.outputs.len() + r.cancelled, 10);
    assert_eq!(r.cancelled, 0, "every request finished within the grace");
    assert!(r.merged.outputs.iter().all(|o| o.success));
}

#[test]
fn requests_in_flight_past_the_grace_are_cut_and_counted_as_cancelled() {
    let _serial = crate::util::serial();
    // 200 tokens at 50 ms: 10 s per request, far past the bound and its grace.
    let (_server, url) = mock(5, 50);
    let mut w = workload(&url, Backend::Vllm, "mock-model", 8, 200);
    w.max_concurrency = Some(4);
    w.time_bound = Some(TimeBound {
        after: Duration::from_millis(300),
        grace: Duration::from_millis(200),
    });
    let started = Instant::now();
    let r = run(&url, w, options(2, auto_driver()));
    let took = started.elapsed();
    accounted(&r, 8);
    assert_eq!((r.merged.outputs.len(), r.cancelled, r.not_sent), (0, 4, 4));
    assert!(
        took < Duration::from_secs(5),
        "the run ended at bound + grace, not {took:?}"
    );
}

fn count(doc: &Map<String, Value>, key: &str) -> u64 {
    doc.get(key)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{key} is a count in {doc:?}"))
}

/// A `--duration` run of the binary against the embedded mock; its result document.
fn bounded_run(extra: &[&str]) -> Map<String, Value> {
    bounded_run_exiting(0, extra)
}

/// [`bounded_run`] with the exit code it must end with (1: no request succeeded).
fn bounded_run_exiting(code: i32, extra: &[&str]) -> Map<String, Value> {
    let dir = TempDir::new("duration");
    let mut args = vec![
        "--mock-server",
        "--disable-tqdm",
        "--save-result",
        "--result-dir",
        dir.arg(),
        "--result-filename",
        "r.json",
        "--duration",
        "1",
        "--duration-grace",
        "0.3",
    ];
    args.extend(extra);
    let out = run_in_process(&args);
    assert_eq!(out.code, code, "{args:?}:\n{}\n{}", out.stdout, out.stderr);
    if code == 1 {
        assert!(
            out.stderr
                .contains("cancelled by the --duration bound (after --duration-grace)"),
            "{}",
            out.stderr
        );
        assert!(
            out.stdout
                .contains("Not sent (the run's bound came first):"),
            "{}",
            out.stdout
        );
    }
    let text = std::fs::read_to_string(dir.path().join("r.json")).expect("result file");
    serde_json::from_str(&text).expect("result JSON")
}

fn identity(doc: &Map<String, Value>, planned: u64) -> (u64, u64, u64) {
    let completed = count(doc, "completed");
    let failed = count(doc, "failed");
    let cancelled = count(doc, "vllm_bench_cancelled");
    let not_sent = count(doc, "vllm_bench_not_sent");
    assert_eq!(
        completed + failed + cancelled + not_sent,
        planned,
        "completed {completed} + failed {failed} + cancelled {cancelled} + not sent {not_sent}"
    );
    (completed, cancelled, not_sent)
}

#[test]
fn the_binary_bounds_a_rate_driven_run() {
    let doc = bounded_run(&["--num-prompts", "200", "--request-rate", "20"]);
    let (completed, _, not_sent) = identity(&doc, 200);
    // About 20 due in the first second of a Poisson schedule of 10 s.
    assert!((5..=60).contains(&completed), "{completed} completed");
    assert!(not_sent >= 100, "{not_sent} not sent");
}

#[test]
fn the_binary_bounds_a_closed_loop_of_slow_requests() {
    // The embedded mock's answer takes ~5 s (1000 tokens at 5 ms): in flight at the bound,
    // cut after the grace. Nothing succeeded, so the run exits 1 and names the bound.
    let doc = bounded_run_exiting(
        1,
        &[
            "--num-prompts",
            "8",
            "--max-concurrency",
            "2",
            "--random-output-len",
            "1000",
        ],
    );
    let (completed, cancelled, not_sent) = identity(&doc, 8);
    assert_eq!((completed, cancelled, not_sent), (0, 2, 6));
}

#[test]
fn the_binary_bounds_multi_turn_conversations() {
    let doc = bounded_run(&[
        "--multi-turn",
        "--backend",
        "openai-chat",
        "--num-prompts",
        "50",
        "--max-concurrency",
        "2",
        "--random-output-len",
        "64",
    ]);
    let planned = count(&doc, "completed")
        + count(&doc, "failed")
        + count(&doc, "vllm_bench_cancelled")
        + count(&doc, "vllm_bench_not_sent");
    let (_, _, not_sent) = identity(&doc, planned);
    assert!(not_sent > 0, "conversations left when the bound came");
}
