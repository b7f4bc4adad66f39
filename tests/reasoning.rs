//! TTFO (time to first output token) against a mock that reasons before it answers: on chat,
//! Responses and Anthropic Messages the gap between TTFT and TTFO is at least the mock's
//! thinking pause, reasoning tokens are totalled from the usage, a request that only reasons
//! is left out of TTFO (and misses a `ttfo` goodput SLO), and a run that does not ask for
//! `ttfo` prints and saves Python's block as before.

use std::time::Duration;

use serde_json::Value;

use crate::e2e::{base_args, count, mock, saved};
use crate::util::{run_in_process, TempDir};
use vllm_bench::mock::MockServer;

/// The mock's pause between its reasoning and its answer.
const THINKING: Duration = Duration::from_millis(250);
/// `e2e::mock`'s first-token delay, ms.
const FIRST_TOKEN_MS: f64 = 5.0;
/// Reasoning tokens per response (of `base_args`' 4 output tokens).
const REASONING: usize = 2;

fn reasoning_mock(tokens: usize) -> MockServer {
    mock(|c| {
        c.reasoning_tokens = tokens;
        c.thinking_delay = THINKING;
    })
}

/// A saved run of `n` prompts against `server` with `backend` and `extra`; its stdout and
/// result document.
fn run(
    server: &MockServer,
    backend: &str,
    n: usize,
    extra: &[&str],
) -> (String, serde_json::Map<String, Value>) {
    let dir = TempDir::new("reasoning");
    let mut args = base_args(server, &dir, n);
    args.extend(["--backend", backend].map(String::from));
    args.extend(extra.iter().map(|s| s.to_string()));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = run_in_process(&argv);
    assert_eq!(run.code, 0, "{backend}: {}", run.stderr);
    (run.stdout, saved(&dir))
}

fn ms(doc: &serde_json::Map<String, Value>, key: &str) -> f64 {
    doc[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key}: {:?}", doc.get(key)))
}

#[test]
fn ttfo_trails_ttft_by_the_mocks_thinking_time_on_chat_responses_and_anthropic() {
    let server = reasoning_mock(REASONING);
    let thinking_ms = THINKING.as_secs_f64() * 1000.0;
    for backend in ["openai-chat", "openai-responses", "anthropic-messages"] {
        let (stdout, doc) = run(
            &server,
            backend,
            6,
            // One at a time: the first tokens arrive close to when they were due.
            &[
                "--percentile-metrics",
                "ttft,ttfo,tpot,itl",
                "--max-concurrency",
                "1",
            ],
        );
        assert_eq!(count(&doc, "completed"), 6, "{backend}");
        // TTFT is the first reasoning token, TTFO the first answer token after the pause.
        // The mock's deadlines are anchored at the request's arrival, so a first token
        // delivered late (a busy debug build) shortens the gap by its lateness, at most the
        // TTFT itself: TTFO >= first-token delay + thinking, and TTFO - TTFT >= thinking - TTFT.
        for stat in ["mean", "median", "p99"] {
            let ttft = ms(&doc, &format!("{stat}_ttft_ms"));
            let ttfo = ms(&doc, &format!("{stat}_ttfo_ms"));
            assert!(
                ttfo >= FIRST_TOKEN_MS + thinking_ms,
                "{backend}: {stat} TTFO {ttfo} ms before the answer was due"
            );
            assert!(
                ttfo - ttft >= thinking_ms - ttft,
                "{backend}: {stat} TTFO - TTFT = {} ms, thinking {thinking_ms} ms, TTFT {ttft} ms",
                ttfo - ttft
            );
        }
        assert_eq!(count(&doc, "no_output_token_requests"), 0, "{backend}");
        // Chat and Responses count reasoning tokens in their usage; Anthropic does not.
        let reasoning = &doc["total_reasoning_tokens"];
        if backend == "anthropic-messages" {
            assert!(reasoning.is_null(), "{backend}: {reasoning}");
        } else {
            assert_eq!(reasoning.as_u64(), Some(6 * REASONING as u64), "{backend}");
            assert!(stdout.contains("Total reasoning tokens:"), "{stdout}");
        }
        assert!(
            stdout.contains("------------Time to First Output Token------------\n"),
            "{stdout}"
        );
        let ttft = stdout.find("Mean TTFT (ms):").expect("TTFT section");
        let ttfo = stdout.find("Mean TTFO (ms):").expect("TTFO section");
        let tpot = stdout.find("Mean TPOT (ms):").expect("TPOT section");
        assert!(ttft < ttfo && ttfo < tpot, "{stdout}");
    }
}

#[test]
fn a_run_that_does_not_ask_for_ttfo_reports_as_python_does_even_when_the_server_reasons() {
    let server = reasoning_mock(REASONING);
    let (stdout, doc) = run(&server, "openai-chat", 4, &[]);
    assert_eq!(count(&doc, "completed"), 4);
    for needle in ["TTFO", "reasoning", "output token:"] {
        assert!(!stdout.contains(needle), "{needle}: {stdout}");
    }
    for key in doc.keys() {
        assert!(
            !key.contains("ttfo") && !key.contains("reasoning") && !key.contains("no_output"),
            "{key}"
        );
    }
}

#[test]
fn a_request_that_only_reasons_is_left_out_of_ttfo_and_misses_a_ttfo_slo() {
    // More reasoning tokens than the 4 asked for: every token is reasoning.
    let server = reasoning_mock(100);
    let (stdout, doc) = run(
        &server,
        "openai-chat",
        3,
        &[
            "--percentile-metrics",
            "ttft,ttfo",
            "--goodput",
            "ttfo:60000",
        ],
    );
    assert_eq!(count(&doc, "completed"), 3, "still successes");
    assert_eq!(count(&doc, "no_output_token_requests"), 3);
    assert_eq!(doc["total_reasoning_tokens"].as_u64(), Some(3 * 4));
    assert_eq!(doc["request_goodput"].as_f64(), Some(0.0));
    assert_eq!(ms(&doc, "mean_ttfo_ms"), 0.0, "no sample");
    assert!(
        stdout.contains(&format!(
            "{:<40} {:<10}\n",
            "Requests with no output token:", 3
        )),
        "{stdout}"
    );
}

#[test]
fn mock_reasoning_flags_need_the_embedded_mock_and_a_pause_needs_tokens() {
    let run = run_in_process(&["--mock-reasoning-tokens", "4"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("--mock-reasoning-tokens") && run.stderr.contains("--mock-server"),
        "{}",
        run.stderr
    );
    let run = run_in_process(&["--mock-server", "--mock-thinking-ms", "50"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("--mock-thinking-ms 50.0")
            && run.stderr.contains("--mock-reasoning-tokens"),
        "{}",
        run.stderr
    );
}
