//! Request cancellation (`--request-cancellation-rate`, `--request-cancellation-delay`)
//! through the real binary against an in-process mock: the share cancelled, the connections
//! really closed (the mock counts the responses its client left), cancelled requests counted
//! apart from completed and failed ones and kept out of the latency lists, a response that
//! ends before the delay counted as completed, a cancelled turn ending its conversation, and
//! the flags' refusals. (The fault matrix crosses it with every backend and schedule.)

use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use vllm_bench::engine::schedule::Cancellations;
use vllm_bench::mock::MockServer;

use crate::e2e::{assert_refused, mock};
use crate::util::{run_against_mock, TempDir};

/// A mock slow enough that a cancel 10 ms after the request comes first even on a loaded
/// machine (a cancel timer late by more than the first token's 250 ms would find a finished
/// response, which the mock never sees cut), with each event its own write (so the mock
/// sees a client that left at its next writes).
fn slow_mock(request_log_bodies: bool) -> MockServer {
    mock(|c| {
        c.first_token_delay = Duration::from_millis(250);
        c.token_interval = Duration::from_millis(15);
        c.request_log_bodies = request_log_bodies;
    })
}

/// A run against `server` with `extra` flags: its stdout and result document.
fn run(server: &MockServer, extra: &[&str]) -> (String, Map<String, Value>) {
    let dir = TempDir::new("cancellation");
    let mut args = vec!["--save-detailed", "--result-filename", "r.json"];
    args.extend(extra);
    let stdout = run_against_mock(&server.base_url(), &dir, &args);
    let text = std::fs::read_to_string(dir.path().join("r.json")).expect("result saved");
    (
        stdout,
        serde_json::from_str(&text).expect("one JSON object"),
    )
}

fn count(doc: &Map<String, Value>, key: &str) -> u64 {
    doc.get(key)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{key} is a count"))
}

/// completed + failed + cancelled + not sent = planned; returns (completed, cancelled).
fn accounted(doc: &Map<String, Value>, planned: u64) -> (u64, u64) {
    let completed = count(doc, "completed");
    let failed = count(doc, "failed");
    let cancelled = count(doc, "vllm_bench_cancelled");
    let not_sent = count(doc, "vllm_bench_not_sent");
    assert_eq!(failed, 0, "a cancelled request is never a failure");
    assert_eq!(
        completed + failed + cancelled + not_sent,
        planned,
        "completed {completed} + failed {failed} + cancelled {cancelled} + not sent {not_sent}"
    );
    (completed, cancelled)
}

/// Waits (bounded) until the mock has seen `n` responses cut by their client: it sees a
/// close at its next write, which may come after the client exited.
fn closes_seen(server: &MockServer, n: u64) -> u64 {
    let until = Instant::now() + Duration::from_secs(10);
    while server.stats().closed_by_client < n && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    server.stats().closed_by_client
}

#[test]
fn a_share_of_requests_is_cancelled_and_the_mock_sees_each_connection_close() {
    let server = slow_mock(false);
    let n = 100u64;
    // The mock sees a close only at a write after the client's reset: 40 tokens keep each
    // response writing for 0.6 s after its first token. With the default 4, a mock thread
    // starved for 45 ms on a busy machine wrote a whole cancelled response in one write,
    // before the reset came back, and counted it complete (30 closes for 32 cancels in CI).
    let (stdout, doc) = run(
        &server,
        &[
            "--random-output-len",
            "40",
            "--num-prompts",
            "100",
            "--max-concurrency",
            "10",
            "--request-cancellation-rate",
            "30",
            "--request-cancellation-delay",
            "0.01",
            "--seed",
            "0",
        ],
    );
    let (completed, cancelled) = accounted(&doc, n);
    // The requests the seeded draw chose, each cancelled (every response outlasts the delay).
    let chosen = Cancellations::draw(30.0, Duration::from_millis(10), 0, n as usize).count();
    assert!((1..n as usize).contains(&chosen), "{chosen}: some, not all");
    assert_eq!(
        cancelled, chosen as u64,
        "{cancelled} of {n} cancelled at 30 %"
    );
    // Left out of the latency metrics: the per-request lists hold the completed only.
    assert_eq!(doc["ttfts"].as_array().unwrap().len() as u64, completed);
    assert_eq!(
        closes_seen(&server, cancelled),
        cancelled,
        "every cancelled request's connection was closed mid-response"
    );
    assert_eq!(server.stats().model_requests, n, "nothing is sent twice");
    assert!(
        stdout.contains(&format!("{:<40} {cancelled}\n", "Cancelled requests:")),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "{completed} completed + 0 failed + {cancelled} cancelled + 0 not sent"
        )),
        "{stdout}"
    );
}

/// The run's last request, cancelled: its connection ends at the cancel, not when the
/// engine's runtime next turns (after the run, with the mock long done writing its answer
/// into an open socket). Two requests one after the other, the first answered and the
/// second cancelled (a seed whose draw says so), so the cancel is the last thing the run does.
#[test]
fn the_last_request_cancelled_closes_its_connection_at_once() {
    let server = slow_mock(false);
    let seed = (0..1000u64)
        .find(|&s| {
            let c = Cancellations::draw(50.0, Duration::ZERO, s, 2);
            !c.is_chosen(0) && c.is_chosen(1)
        })
        .expect("a seed that cancels the second request only");
    let (_, doc) = run(
        &server,
        &[
            "--num-prompts",
            "2",
            "--max-concurrency",
            "1",
            "--seed",
            &seed.to_string(),
            "--request-cancellation-rate",
            "50",
            "--request-cancellation-delay",
            "0",
        ],
    );
    assert_eq!(accounted(&doc, 2), (1, 1));
    assert_eq!(
        closes_seen(&server, 1),
        1,
        "the cancelled request's connection was closed mid-response"
    );
}

#[test]
fn a_response_that_ends_before_the_delay_is_a_normal_completion() {
    let server = mock(|_| {});
    let (stdout, doc) = run(
        &server,
        &[
            "--num-prompts",
            "10",
            "--request-cancellation-rate",
            "100",
            "--request-cancellation-delay",
            "30",
        ],
    );
    let (completed, cancelled) = accounted(&doc, 10);
    assert_eq!((completed, cancelled), (10, 0));
    assert_eq!(server.stats().closed_by_client, 0);
    assert!(stdout.contains("Cancelled requests:"), "{stdout}");
}

#[test]
fn a_cancelled_turn_ends_its_conversation_and_is_accounted_for() {
    let server = slow_mock(true);
    let (_, doc) = run(
        &server,
        &[
            "--backend",
            "openai-chat",
            "--multi-turn",
            "--multi-turn-num-turns",
            "3",
            "--num-prompts",
            "8",
            "--request-cancellation-rate",
            "50",
            "--request-cancellation-delay",
            "0.01",
        ],
    );
    let (completed, cancelled) = accounted(&doc, 24);
    assert!(cancelled > 0, "half the turns are cancelled");
    let not_sent = count(&doc, "vllm_bench_not_sent");
    assert_eq!(
        count(&doc, "vllm_bench_not_sent_session_cancelled"),
        not_sent
    );
    // The mock got every turn sent, and no turn after a cancelled one.
    let mut turns: std::collections::BTreeMap<String, u64> = Default::default();
    for r in server.request_log() {
        if r.path == "/v1/chat/completions" {
            *turns
                .entry(r.session_id.expect("session header"))
                .or_default() += 1;
        }
    }
    assert_eq!(turns.values().sum::<u64>(), completed + cancelled);
    let missing: u64 = turns.values().map(|&t| 3 - t).sum::<u64>() + 3 * (8 - turns.len() as u64);
    assert_eq!(
        missing, not_sent,
        "each conversation stops at its cancelled turn"
    );
}

#[test]
fn cancellation_flags_out_of_range_are_refused_in_one_line() {
    for (args, needle) in [
        (
            &["--request-cancellation-rate", "101"][..],
            "--request-cancellation-rate 101.0: must be a percentage between 0 and 100",
        ),
        (
            &["--request-cancellation-rate", "-1"][..],
            "between 0 and 100",
        ),
        (
            &["--request-cancellation-rate", "nan"][..],
            "between 0 and 100",
        ),
        (
            &[
                "--request-cancellation-rate",
                "5",
                "--request-cancellation-delay",
                "-1",
            ][..],
            "--request-cancellation-delay -1.0: is negative",
        ),
        (
            &["--request-cancellation-delay", "2"][..],
            "has no effect without --request-cancellation-rate",
        ),
    ] {
        let mut all = vec!["--mock-server"];
        all.extend(args);
        assert_refused(&all, needle);
    }
}

/// A llama.cpp run of `n` prompts with `extra` flags: its result document.
fn llama_run(llama: &crate::util::ToolServer, n: &str, extra: &[&str]) -> Map<String, Value> {
    let dir = TempDir::new("cancellation-llama");
    let tokenizer = crate::util::smollm2();
    let mut args = vec![
        "--base-url",
        &llama.url,
        "--backend",
        "openai-chat",
        "--model",
        &llama.model,
        "--tokenizer",
        tokenizer.to_str().expect("utf-8 path"),
        "--random-input-len",
        "16",
        "--random-output-len",
        "32",
        "--num-prompts",
        n,
        "--max-concurrency",
        "4",
        "--disable-tqdm",
        "--save-result",
        "--result-dir",
        dir.arg(),
        "--result-filename",
        "r.json",
    ];
    args.extend(extra);
    let out = crate::util::run_in_process(&args);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let text = std::fs::read_to_string(dir.path().join("r.json")).expect("result saved");
    serde_json::from_str(&text).expect("one JSON object")
}

/// llama.cpp with half its requests cut 50 ms after sending: every request accounted for,
/// and the server, whose streams the client left mid-way, answers a later run in full.
#[test]
fn llama_cpp_keeps_serving_after_cancelled_requests() {
    let _serial = crate::util::serial();
    let Some(llama) = crate::util::start_tool_server("llama-server.sh", &[], &[]) else {
        return;
    };
    let doc = llama_run(
        &llama,
        "12",
        &[
            "--request-cancellation-rate",
            "50",
            "--request-cancellation-delay",
            "0.05",
        ],
    );
    let (_, cancelled) = accounted(&doc, 12);
    assert!(cancelled >= 1, "{doc:?}");
    let after = llama_run(&llama, "4", &[]);
    assert_eq!(
        (count(&after, "completed"), count(&after, "failed")),
        (4, 0)
    );
}
