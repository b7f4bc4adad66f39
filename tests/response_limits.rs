//! Response limits (issue 26): an endless stream fails its request with `response_too_long`
//! at `--max-response-events` and the run ends, every request accounted for; generated text
//! is saved only with `--save-detailed`, and then no more than 16 bytes per allowed event.
//! The binary runs against an in-process mock on loopback that stops when the test ends.

use serde_json::{Map, Value};
use vllm_bench::mock::{FaultConfig, MockConfig, MockServer};

use super::e2e::{count, saved};
use super::util::{run_in_process, Run, TempDir};

fn mock(tweak: impl FnOnce(&mut MockConfig)) -> MockServer {
    let mut cfg = MockConfig::default();
    tweak(&mut cfg);
    MockServer::start(cfg).expect("mock server starts")
}

/// A completions run of `n` random prompts asking for `output_len` tokens, saved as
/// `r.json` in `dir`, with `extra` flags: its exit code.
fn run(server: &MockServer, dir: &TempDir, n: usize, output_len: usize, extra: &[&str]) -> i32 {
    run_output(server, dir, n, output_len, extra).code
}

/// [`run`], the whole output.
fn run_output(
    server: &MockServer,
    dir: &TempDir,
    n: usize,
    output_len: usize,
    extra: &[&str],
) -> Run {
    let tokenizer = crate::util::smollm2();
    let (n, output_len, url) = (n.to_string(), output_len.to_string(), server.base_url());
    let mut args = vec![
        "--base-url",
        &url,
        "--model",
        "mock-model",
        "--tokenizer",
        tokenizer.to_str().expect("utf-8 path"),
        "--dataset-name",
        "random",
        "--random-input-len",
        "16",
        "--random-output-len",
        &output_len,
        "--num-prompts",
        &n,
        "--max-concurrency",
        "2",
        "--seed",
        "0",
        "--disable-tqdm",
        "--ready-check-timeout-sec",
        "0",
        // Only a bound: were the event cap not applied, the endless requests would fail
        // with `timeout` after this, not with `response_too_long`.
        "--request-timeout-sec",
        "120",
        "--save-result",
        "--result-dir",
        dir.arg(),
        "--result-filename",
        "r.json",
    ];
    args.extend_from_slice(extra);
    let r = run_in_process(&args);
    assert!(r.code == 0 || r.code == 1, "exit {}: {}", r.code, r.stderr);
    r
}

fn reasons(doc: &Map<String, Value>) -> Vec<(String, u64)> {
    doc["vllm_bench_failures_by_reason"]
        .as_object()
        .expect("failures by reason")
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().expect("a count")))
        .collect()
}

fn texts(doc: &Map<String, Value>) -> Vec<&str> {
    doc["generated_texts"]
        .as_array()
        .expect("generated_texts")
        .iter()
        .map(|t| t.as_str().expect("a text"))
        .collect()
}

#[test]
fn an_endless_stream_fails_with_response_too_long_and_the_run_ends() {
    // No delays: the mock streams as fast as it can write, forever.
    let server = mock(|c| {
        c.faults = FaultConfig {
            endless: 1.0,
            ..FaultConfig::default()
        }
    });
    let dir = TempDir::new("endless-stream");
    let code = run(
        &server,
        &dir,
        4,
        4,
        &["--max-response-events", "2000", "--save-detailed"],
    );
    let stats = server.stats();
    server.shutdown();
    assert_eq!(code, 1, "no request can succeed");
    let doc = saved(&dir);
    let planned = count(&doc, "num_prompts");
    let (completed, failed) = (count(&doc, "completed"), count(&doc, "failed"));
    let not_sent = count(&doc, "vllm_bench_not_sent");
    assert_eq!((planned, completed, failed, not_sent), (4, 0, 4, 0));
    assert_eq!(reasons(&doc), [("response_too_long".to_string(), 4)]);
    let errors = doc["errors"].as_array().expect("errors");
    assert!(
        errors.iter().all(|e| e
            .as_str()
            .is_some_and(|e| e.contains("more than 2000 SSE events"))),
        "{errors:?}"
    );
    assert_eq!(
        stats.faults.endless, 4,
        "every request got the endless fault"
    );
    assert_eq!(stats.model_requests, 4, "no request was retried");
}

#[test]
fn generated_text_is_saved_only_with_save_detailed() {
    let server = mock(|_| {});
    let dir = TempDir::new("text-not-kept");
    assert_eq!(run(&server, &dir, 3, 8, &[]), 0);
    let doc = saved(&dir);
    assert_eq!(count(&doc, "completed"), 3);
    assert!(!doc.contains_key("generated_texts"), "{:?}", doc.keys());

    let dir = TempDir::new("text-kept");
    assert_eq!(run(&server, &dir, 3, 8, &["--save-detailed"]), 0);
    let doc = saved(&dir);
    assert_eq!(texts(&doc), vec![" tok".repeat(8); 3]);
    server.shutdown();
}

#[test]
fn generated_text_is_cut_at_16_bytes_per_allowed_event() {
    // 64 tokens in 4 events of 16 tokens (64 text bytes) each; with the usage chunk and
    // `[DONE]`, 6 events. At most 8 events → at most 128 text bytes: the first 2 events.
    let server = mock(|c| c.tokens_per_chunk = 16);
    let dir = TempDir::new("text-capped");
    let cap = ["--max-response-events", "8", "--save-detailed"];
    assert_eq!(run(&server, &dir, 2, 64, &cap), 0);
    let doc = saved(&dir);
    assert_eq!(count(&doc, "completed"), 2);
    assert_eq!(texts(&doc), vec![" tok".repeat(32); 2]);
    let lens: Vec<u64> = doc["output_lens"]
        .as_array()
        .expect("output_lens")
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    assert_eq!(
        lens,
        [64, 64],
        "the server's usage counts the output, not the cut text"
    );
    server.shutdown();

    // Without usage the output is counted from the text: a cut text fails the request.
    let server = mock(|c| {
        c.tokens_per_chunk = 16;
        c.usage = false;
    });
    let dir = TempDir::new("text-capped-no-usage");
    assert_eq!(run(&server, &dir, 2, 64, &cap), 1);
    let doc = saved(&dir);
    assert_eq!(reasons(&doc), [("response_too_long".to_string(), 2)]);
    let dir = TempDir::new("text-whole-no-usage");
    assert_eq!(
        run(&server, &dir, 2, 64, &["--max-response-events", "16"]),
        0
    );
    assert_eq!(
        count(&saved(&dir), "completed"),
        2,
        "256 bytes fit under 16 events"
    );
    server.shutdown();
}

#[test]
fn max_response_events_zero_or_4294967295_is_refused() {
    let server = mock(|_| {});
    for n in ["0", "4294967295"] {
        let r = run_in_process(&["--base-url", &server.base_url(), "--max-response-events", n]);
        assert_eq!(r.code, 2, "{}", r.stderr);
        assert!(
            r.stderr.contains(&format!(
                "--max-response-events {n}: must be between 1 and 10000000"
            )),
            "{}",
            r.stderr
        );
    }
    server.shutdown();
}

/// A server whose usage counts 10^18 tokens per response: before, 20 such responses summed to
/// `Total generated tokens: 1553255926290448384` (wrapped past 2^64) while the throughput
/// used the unwrapped sum. Now each such response is a failed request (`bad_usage`) whose
/// error names the figure, and its tokens are in no total, so console, file and throughput
/// agree.
#[test]
fn a_usage_no_response_can_hold_fails_the_request_instead_of_wrapping_the_totals() {
    let server = mock(|c| c.usage_completion_tokens = Some(1_000_000_000_000_000_000));
    let dir = TempDir::new("bad-usage");
    let r = run_output(&server, &dir, 20, 4, &["--save-detailed"]);
    assert_eq!(
        r.code, 1,
        "no request succeeded:\n{}\n{}",
        r.stdout, r.stderr
    );
    let doc = saved(&dir);
    assert_eq!(reasons(&doc), [("bad_usage".to_string(), 20)]);
    assert_eq!(
        (
            count(&doc, "completed"),
            count(&doc, "failed"),
            count(&doc, "total_output_tokens")
        ),
        (0, 20, 0)
    );
    assert_eq!(doc["output_throughput"].as_f64(), Some(0.0));
    let errors = doc["errors"].as_array().expect("errors");
    assert!(
        errors.iter().all(|e| e
            .as_str()
            .is_some_and(|e| e.contains("completion_tokens = 1000000000000000000"))),
        "{errors:?}"
    );
    let console = format!("{}{}", r.stdout, r.stderr);
    assert!(console.contains("bad_usage"), "{console}");
    assert!(!console.contains("1553255926290448384"), "{console}");
}
