//! The server-metrics scrape end to end: against an in-process mock whose `/metrics` counters
//! did not start at zero (a first run warms it), the second run's figures are exactly what
//! the mock counted in it; an endpoint that hangs, answers garbage or 404 is one line and
//! leaves the run finishing normally; `--no-server-metrics` shows nothing.

use std::io::Write;
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use vllm_bench::mock::{MockConfig, MockServer};

use crate::util::{shared_dir, vllm_bench, Run, TempDir};

const PROMPTS: usize = 24;
const OUTPUT_LEN: u64 = 4;

fn mock(tweak: impl FnOnce(&mut MockConfig)) -> MockServer {
    let mut cfg = MockConfig {
        request_log: true,
        first_token_delay: Duration::from_millis(5),
        token_interval: Duration::from_millis(1),
        ..MockConfig::default()
    };
    tweak(&mut cfg);
    MockServer::start(cfg).expect("mock server starts")
}

/// A small run against `server` with `extra` flags: the binary's output and the result.
fn run(server: &MockServer, extra: &[&str]) -> (Run, Map<String, Value>) {
    let dir = TempDir::new("server-metrics");
    let tokenizer = shared_dir().join("fixtures/tokenizers/smollm2");
    let url = server.base_url();
    let prompts = PROMPTS.to_string();
    let out_len = OUTPUT_LEN.to_string();
    let mut args = vec![
        "--base-url",
        &url,
        "--model",
        "mock-model",
        "--tokenizer",
        tokenizer.to_str().expect("utf-8 path"),
        "--random-input-len",
        "48",
        "--random-prefix-len",
        "32",
        "--random-output-len",
        &out_len,
        "--num-prompts",
        &prompts,
        "--max-concurrency",
        "4",
        "--num-cores",
        "1",
        "--server-metrics-interval",
        "0.05",
        "--disable-tqdm",
        "--save-result",
        "--result-dir",
        dir.arg(),
        "--result-filename",
        "r.json",
    ];
    args.extend_from_slice(extra);
    let out = vllm_bench(&args, dir.path());
    assert_eq!(out.code, 0, "vllm-bench {args:?}:\n{}", out.stderr);
    let text = std::fs::read_to_string(dir.path().join("r.json")).expect("result saved");
    (out, serde_json::from_str(&text).expect("one JSON object"))
}

fn num(v: &Value, path: &[&str]) -> f64 {
    let mut v = v;
    for k in path {
        v = &v[*k];
    }
    v.as_f64()
        .unwrap_or_else(|| panic!("{path:?} is not a number: {v}"))
}

#[test]
fn a_runs_deltas_are_what_the_mock_counted_in_it_though_its_counters_did_not_start_at_zero() {
    let server = mock(|_| {});
    run(&server, &[]);
    let (before, logged_before) = (server.stats(), server.request_log().len());
    let (out, doc) = run(&server, &[]);
    let after = server.stats();
    let window: Vec<_> = server
        .request_log()
        .into_iter()
        .skip(logged_before)
        .collect();
    let model: Vec<_> = window.iter().filter(|r| r.seq.is_some()).collect();
    assert_eq!(model.len(), PROMPTS);
    let m = &doc["vllm_bench_server_metrics"];
    let counter = |name: &str| num(m, &["counters", name]);
    assert_eq!(counter("vllm:request_success"), PROMPTS as f64);
    let prompt_tokens: u64 = model.iter().filter_map(|r| r.prompt_tokens).sum();
    assert_eq!(counter("vllm:prompt_tokens"), prompt_tokens as f64);
    assert_eq!(
        counter("vllm:generation_tokens"),
        (PROMPTS as u64 * OUTPUT_LEN) as f64
    );
    let queries = after.prefix_cache_queries - before.prefix_cache_queries;
    let hits = after.prefix_cache_hits - before.prefix_cache_hits;
    assert_eq!(counter("vllm:prefix_cache_queries"), queries as f64);
    assert_eq!(counter("vllm:prefix_cache_hits"), hits as f64);
    assert!(hits > 0, "the shared prefix is a hit");
    assert_eq!(
        num(m, &["prefix_cache_hit_rate"]),
        hits as f64 / queries as f64
    );
    let count = |name: &str| num(m, &["histograms", name, "count"]);
    assert_eq!(count("vllm:time_to_first_token_seconds"), PROMPTS as f64);
    assert_eq!(count("vllm:e2e_request_latency_seconds"), PROMPTS as f64);
    assert_eq!(
        count("vllm:inter_token_latency_seconds"),
        (PROMPTS as u64 * (OUTPUT_LEN - 1)) as f64
    );
    let running_max = num(m, &["gauges", "vllm:num_requests_running", "max"]);
    assert!(
        (0.0..=4.0).contains(&running_max),
        "at most --max-concurrency 4 run at once: {running_max}"
    );
    let t = m["series"]["t_s"].as_array().expect("the samples' times");
    assert!(t.len() >= 2, "{t:?}");
    assert!(m["went_down"].as_object().unwrap().is_empty());
    assert!(out.stdout.contains(" Server Metrics "), "{}", out.stdout);
    assert!(
        out.stdout.contains(&format!(
            "Successful requests:                     {PROMPTS}"
        )),
        "{}",
        out.stdout
    );
    server.shutdown();
}

/// Test servers on loopback that stop when dropped.
struct Misbehaving {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    urls: Vec<String>,
}

impl Misbehaving {
    /// One endpoint that accepts and never answers, one that answers a web page.
    fn start() -> Misbehaving {
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        let mut urls = Vec::new();
        for garbage in [false, true] {
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
            listener.set_nonblocking(true).expect("nonblocking");
            urls.push(format!(
                "http://{}/metrics",
                listener.local_addr().expect("addr")
            ));
            let stop = stop.clone();
            threads.push(std::thread::spawn(move || {
                let mut held = Vec::new();
                // Bounded: the test ends well before, and stops it.
                let deadline = Instant::now() + Duration::from_secs(200);
                while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                    match listener.accept() {
                        Ok((mut s, _)) if garbage => {
                            let body = "<html>not metrics</html>";
                            let _ = write!(
                                s,
                                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                                body.len()
                            );
                            held.push(s);
                        }
                        Ok((s, _)) => held.push(s),
                        Err(_) => std::thread::sleep(Duration::from_millis(10)),
                    }
                }
            }));
        }
        Misbehaving {
            stop,
            threads,
            urls,
        }
    }
}

impl Drop for Misbehaving {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

#[test]
fn a_hung_or_garbage_endpoint_is_one_line_and_the_run_finishes_with_the_servers_figures() {
    let server = mock(|_| {});
    let bad = Misbehaving::start();
    let (out, doc) = run(
        &server,
        &[
            "--server-metrics-url",
            &bad.urls[0],
            "--server-metrics-url",
            &bad.urls[1],
        ],
    );
    for url in &bad.urls {
        let lines: Vec<&str> = out.stderr.lines().filter(|l| l.contains(url)).collect();
        assert_eq!(lines.len(), 1, "one line for {url}:\n{}", out.stderr);
    }
    assert!(out.stderr.contains("no answer within"), "{}", out.stderr);
    assert!(out.stderr.contains("not Prometheus text"), "{}", out.stderr);
    let m = &doc["vllm_bench_server_metrics"];
    assert_eq!(
        num(m, &["counters", "vllm:request_success"]),
        PROMPTS as f64
    );
    assert!(m.get("other_endpoints").is_none(), "{m}");
    assert_eq!(doc["completed"], PROMPTS);
    server.shutdown();
}

#[test]
fn a_server_without_metrics_is_one_note_and_no_block() {
    let server = mock(|c| c.metrics_endpoint = false);
    let (out, doc) = run(&server, &[]);
    assert!(!out.stdout.contains("Server Metrics"), "{}", out.stdout);
    let notes: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("server metrics"))
        .collect();
    assert_eq!(notes.len(), 1, "{}", out.stderr);
    assert!(notes[0].contains("HTTP 404"), "{notes:?}");
    assert_eq!(doc["vllm_bench_server_metrics"], Value::Null);
    server.shutdown();
}

#[test]
fn no_server_metrics_shows_nothing_and_scrapes_nothing() {
    let server = mock(|_| {});
    let (out, doc) = run(&server, &["--no-server-metrics"]);
    assert!(!out.stdout.contains("Server Metrics"), "{}", out.stdout);
    assert!(!out.stderr.contains("server metrics"), "{}", out.stderr);
    assert_eq!(doc["vllm_bench_server_metrics"], Value::Null);
    assert!(
        !server.stats().by_path.contains_key("/metrics"),
        "{:?}",
        server.stats().by_path
    );
    server.shutdown();
}
