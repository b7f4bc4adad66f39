//! Steady-state metrics through the real binary against the in-process mock: a closed loop
//! gets the block after Python's and the `steady_state` object, whose window
//! starts when the last worker of the ramp-up sends and ends before the drain does; open
//! loops and `--no-steady-state` get neither (the key is `null`).
//!
//! The assertions are structural (which request opened the window, which end closed it),
//! never a guess at how long something took. One client core (`--num-cores 1`) sends and
//! stamps requests one after another, so no two of them share a timestamp.

use std::time::Duration;

use serde_json::{Map, Value};

use vllm_bench::mock::MockServer;

use crate::e2e::mock;
use crate::util::{vllm_bench as run_binary, TempDir};

const CONCURRENCY: usize = 8;
const PROMPTS: usize = 64;

/// Runs a small random workload against `server` with `extra` flags; the saved result.
fn run(server: &MockServer, extra: &[&str]) -> (String, Map<String, Value>) {
    let dir = TempDir::new("steady");
    let tokenizer = crate::util::smollm2();
    let url = server.base_url();
    let prompts = PROMPTS.to_string();
    let mut args = vec![
        "--base-url",
        &url,
        "--model",
        "mock-model",
        "--tokenizer",
        tokenizer.to_str().expect("utf-8 path"),
        "--random-input-len",
        "16",
        "--random-output-len",
        "4",
        "--num-prompts",
        &prompts,
        "--num-cores",
        "1",
        "--disable-tqdm",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        dir.arg(),
        "--result-filename",
        "r.json",
    ];
    args.extend_from_slice(extra);
    let out = run_binary(&args, dir.path());
    assert_eq!(out.code, 0, "vllm-bench {args:?}:\n{}", out.stderr);
    let text = std::fs::read_to_string(dir.path().join("r.json")).expect("result saved");
    (
        out.stdout,
        serde_json::from_str(&text).expect("one JSON object"),
    )
}

fn num(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is not a number in {v}"))
}

#[test]
fn closed_loop_window_excludes_ramp_up_and_drain() {
    let server = mock(|c| c.first_token_delay = Duration::from_millis(20));
    let concurrency = CONCURRENCY.to_string();
    let (stdout, doc) = run(&server, &["--max-concurrency", &concurrency]);
    assert_eq!(server.stats().peak_in_flight, CONCURRENCY as u64);

    let s = &doc["steady_state"];
    assert!(s.is_object(), "steady state computed: {s}");
    // 0.95 × 8 = 7.6: all eight workers busy.
    assert_eq!(s["in_flight_threshold"].as_u64(), Some(CONCURRENCY as u64));
    let (open, close) = (num(s, "window_start_s"), num(s, "window_end_s"));

    // Ramp-up: the window opens exactly when the eighth request is sent, after the first.
    let mut starts: Vec<f64> = doc["start_times"]
        .as_array()
        .expect("start_times (--save-detailed)")
        .iter()
        .map(|v| v.as_f64().expect("a start time"))
        .collect();
    starts.sort_by(f64::total_cmp);
    assert_eq!(starts.len(), PROMPTS);
    assert_eq!(open, starts[CONCURRENCY - 1], "opened by the 8th send");
    assert!(starts[0] < open, "the ramp-up is before the window");

    // Drain: the run's last response ends after the window closed.
    let duration = doc["duration"].as_f64().expect("a duration");
    assert!(
        open < close && close < duration,
        "{open} < {close} < {duration}"
    );

    // So the requests inside exclude the seven sent before the window and at least one that
    // ended after it, and the first request counts only in part; every figure is over the
    // window.
    let inside = s["requests_inside"].as_u64().unwrap() as usize;
    assert!(
        inside > 0 && inside <= PROMPTS - CONCURRENCY,
        "{inside} inside"
    );
    let served = num(s, "requests_in_window");
    assert!(
        served > inside as f64 && served < PROMPTS as f64,
        "{served} served"
    );
    assert_eq!(num(s, "window_duration_s"), close - open);
    assert_eq!(num(s, "request_throughput"), served / (close - open));
    // A sub-second window is reported, flagged as short (minimum: 10 s).
    assert_eq!(s["short_window"], Value::Bool(true));
    assert_eq!(num(s, "min_window_s"), 10.0);

    // The block comes after Python's, before our engine section.
    let python = stdout
        .find(" Serving Benchmark Result ")
        .expect("Python's block");
    let steady = stdout.find(" Steady-State Metrics ").expect("our block");
    let engine = stdout.find("vllm-bench---").expect("the engine section");
    assert!(python < steady && steady < engine, "{stdout}");
    let block = &stdout[steady..engine];
    assert!(block.contains("Requests inside window:"), "{block}");
    assert!(block.contains("P90 TPOT (ms):"), "{block}");
    // A run shorter than the minimum window cannot hold one: no warning (the JSON still says
    // short_window), as on every quick run.
    assert!(!block.contains("Warning: the window ("), "{block}");
}

#[test]
fn open_loops_and_no_steady_state_leave_it_out() {
    let server = mock(|_| {});
    let concurrency = CONCURRENCY.to_string();
    for extra in [
        &["--max-concurrency", &concurrency, "--no-steady-state"][..],
        &["--max-concurrency", &concurrency, "--request-rate", "2000"][..],
    ] {
        let (stdout, doc) = run(&server, extra);
        assert_eq!(doc["steady_state"], Value::Null, "{extra:?}");
        assert!(!stdout.contains("Steady-State"), "{extra:?}:\n{stdout}");
    }
}
