//! Multi-turn conversations through the real binary against an in-process mock that logs
//! every request with its body: the history each turn sends (the answers exactly as the
//! mock streamed them), the order and think time of turns, the session header, the
//! concurrency cap, variable turn counts, prefix-sharing mode, and a failed turn ending its
//! conversation with every request accounted for.

use std::collections::{BTreeMap, HashSet};

use serde_json::{Map, Value};
use vllm_bench::mock::{FaultConfig, LoggedRequest, MockServer};

use crate::e2e::{assert_refused, mock};
use crate::util::{fixture, run_in_process, TempDir, SHAREGPT};

const CHAT: &str = "/v1/chat/completions";

/// A multi-turn run of `conversations` against `server` with `extra` flags; the result.
fn run(server: &MockServer, conversations: usize, extra: &[&str]) -> Map<String, Value> {
    let dir = TempDir::new("multi-turn");
    let n = conversations.to_string();
    let mut args = vec![
        "--backend",
        "openai-chat",
        "--multi-turn",
        "--save-detailed",
    ];
    args.extend(["--result-filename", "r.json", "--num-prompts", &n]);
    args.extend(extra);
    let stdout = crate::util::run_against_mock(&server.base_url(), &dir, &args);
    assert!(stdout.contains("===== Turn 1 ====="), "{stdout}");
    let text = std::fs::read_to_string(dir.path().join("r.json")).expect("result saved");
    serde_json::from_str(&text).expect("one JSON object")
}

/// The chat requests the mock logged, by session id, in arrival order.
fn sessions(server: &MockServer) -> BTreeMap<String, Vec<LoggedRequest>> {
    let mut by: BTreeMap<String, Vec<LoggedRequest>> = BTreeMap::new();
    for r in server.request_log().into_iter().filter(|r| r.path == CHAT) {
        let id = r
            .session_id
            .clone()
            .expect("every turn carries X-Session-ID");
        by.entry(id).or_default().push(r);
    }
    by
}

fn messages(r: &LoggedRequest) -> Vec<Value> {
    let body: Value = serde_json::from_str(r.body.as_ref().expect("body logged")).unwrap();
    body["messages"]
        .as_array()
        .expect("a messages list")
        .clone()
}

fn list<'a>(doc: &'a Map<String, Value>, key: &str) -> &'a Vec<Value> {
    doc[key]
        .as_array()
        .unwrap_or_else(|| panic!("{key} is a list"))
}

/// The result's requests as (conversation, turn) → index in its per-request lists.
fn positions(doc: &Map<String, Value>) -> BTreeMap<(String, u64), usize> {
    let ids = list(doc, "vllm_bench_conversation_ids");
    let turns = list(doc, "vllm_bench_turns");
    ids.iter()
        .zip(turns)
        .enumerate()
        .map(|(i, (c, t))| ((c.as_str().unwrap().to_string(), t.as_u64().unwrap()), i))
        .collect()
}

#[test]
fn every_turn_sends_the_real_history_in_order_after_the_think_time() {
    let server = mock(|c| c.request_log_bodies = true);
    let think = 0.030;
    let doc = run(
        &server,
        6,
        &[
            "--multi-turn-min-turns",
            "2",
            "--multi-turn-max-turns",
            "4",
            "--multi-turn-concurrency",
            "2",
            "--multi-turn-delay-ms",
            "30",
        ],
    );
    let by = sessions(&server);
    assert_eq!(by.len(), 6, "six conversations");
    let counts: Vec<usize> = by.values().map(Vec::len).collect();
    assert!(counts.iter().all(|n| (2..=4).contains(n)), "{counts:?}");
    assert_eq!(
        doc["completed"].as_u64(),
        Some(counts.iter().sum::<usize>() as u64)
    );
    assert_eq!(doc["vllm_bench_not_sent"].as_u64(), Some(0));
    assert!(
        server.stats().peak_in_flight <= 2,
        "at most 2 conversations in flight"
    );
    let texts = list(&doc, "generated_texts");
    let starts = list(&doc, "start_times");
    let latencies = list(&doc, "latencies");
    let at = positions(&doc);
    let f = |v: &Value| v.as_f64().unwrap();
    let mut request_ids = HashSet::new();
    for (conv, turns) in &by {
        let mut history: Vec<Value> = Vec::new();
        for (t, r) in turns.iter().enumerate() {
            let id = r.request_id.clone().unwrap();
            assert_eq!(id, format!("{conv}-turn-{t}"), "turns arrive in order");
            assert!(request_ids.insert(id), "request ids are unique");
            let sent = messages(r);
            assert_eq!(sent.len(), 2 * t + 1, "{conv} turn {t}");
            assert_eq!(
                &sent[..history.len()],
                &history[..],
                "{conv} turn {t} keeps the history"
            );
            assert_eq!(sent[2 * t]["role"], "user");
            let i = at[&(conv.clone(), t as u64 + 1)];
            if t > 0 {
                let prev = at[&(conv.clone(), t as u64)];
                let answer = &sent[2 * t - 1];
                assert_eq!(answer["role"], "assistant");
                assert_eq!(
                    answer["content"], texts[prev],
                    "the answer exactly as streamed"
                );
                let ended = f(&starts[prev]) + f(&latencies[prev]);
                assert!(
                    f(&starts[i]) >= ended + think,
                    "{conv} turn {t} waited the think time"
                );
            }
            assert!(!texts[i].as_str().unwrap().is_empty());
            // The next turn must start with these messages.
            history = sent;
        }
    }
    let per_turn = list(&doc, "per_turn_metrics");
    assert_eq!(per_turn[0]["turn"], 1);
    assert_eq!(
        per_turn[0]["completed"], 6,
        "every conversation has a first turn"
    );
    let total: u64 = per_turn
        .iter()
        .map(|t| t["completed"].as_u64().unwrap())
        .sum();
    assert_eq!(Some(total), doc["completed"].as_u64());
}

#[test]
fn prefix_sharing_sends_each_turn_alone() {
    let server = mock(|c| c.request_log_bodies = true);
    let doc = run(
        &server,
        3,
        &[
            "--random-input-len",
            "40",
            "--multi-turn-prefix-global-ratio",
            "0.25",
            "--multi-turn-prefix-conversation-ratio",
            "0.25",
        ],
    );
    assert_eq!(
        doc["completed"].as_u64(),
        Some(9),
        "3 conversations x 3 turns"
    );
    let text = |r: &LoggedRequest| {
        let m = messages(r);
        assert_eq!(m.len(), 1, "no history in prefix-sharing mode");
        m[0]["content"][0]["text"].as_str().unwrap().to_string()
    };
    let by = sessions(&server);
    let all: Vec<Vec<String>> = by.values().map(|t| t.iter().map(text).collect()).collect();
    let common = |a: &str, b: &str| a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    let across = common(&all[0][0], &all[1][0]);
    assert!(across > 0, "conversations share the global prefix");
    for conv in &all {
        assert!(
            common(&conv[0], &conv[1]) > across,
            "a conversation shares more than the global prefix"
        );
    }
}

#[test]
fn a_failed_turn_ends_its_conversation_and_is_accounted_for() {
    let server = mock(|c| {
        c.faults = FaultConfig {
            error_500: 0.3,
            ..FaultConfig::default()
        }
    });
    let doc = run(&server, 8, &["--multi-turn-num-turns", "3"]);
    let errors = list(&doc, "errors");
    let failed = errors.iter().filter(|e| e.as_str() != Some("")).count() as u64;
    let not_sent = doc["vllm_bench_not_sent"].as_u64().unwrap();
    assert!(failed > 0, "the fault rate makes some turn fail");
    assert_eq!(doc["completed"].as_u64().unwrap() + failed + not_sent, 24);
    assert_eq!(
        doc["vllm_bench_not_sent_session_ended"].as_u64(),
        Some(not_sent)
    );
    for (conv, turns) in sessions(&server) {
        let first_failure = turns.iter().position(|r| r.status == 500);
        if let Some(k) = first_failure {
            assert_eq!(
                turns.len(),
                k + 1,
                "{conv}: nothing is sent after a failed turn"
            );
        }
    }
}

#[test]
fn multi_turn_needs_a_chat_backend() {
    assert_refused(
        &["--mock-server", "--multi-turn", "--backend", "vllm"],
        "needs --backend openai-chat",
    );
    assert_refused(
        &["--mock-server", "--multi-turn-delay-ms", "5"],
        "needs --multi-turn",
    );
}

/// ShareGPT conversations: the human turns of the file's entries (in file order with
/// `--disable-shuffle`), capped at `--multi-turn-max-turns`, each asking for the recorded
/// answer's length; the history holds the mock's answers, never the recorded ones.
#[test]
fn sharegpt_conversations_send_their_human_turns_with_real_answers() {
    let file = fixture(SHAREGPT);
    let entries: Vec<Value> = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let server = mock(|c| c.request_log_bodies = true);
    let path = file.to_str().unwrap();
    let doc = run(
        &server,
        3,
        &[
            "--dataset-name",
            "sharegpt",
            "--dataset-path",
            path,
            "--disable-shuffle",
            "--multi-turn-max-turns",
            "2",
        ],
    );
    let humans: Vec<Vec<String>> = entries
        .iter()
        .map(|e| {
            let turns = e["conversations"].as_array().unwrap();
            turns
                .chunks(2)
                .take_while(|p| p.len() == 2 && p[0]["from"] == "human" && p[1]["from"] != "human")
                .map(|p| p[0]["value"].as_str().unwrap().to_string())
                .take(2)
                .collect()
        })
        .filter(|h: &Vec<String>| !h.is_empty())
        .take(3)
        .collect();
    let planned: usize = humans.iter().map(Vec::len).sum();
    assert_eq!(doc["completed"].as_u64(), Some(planned as u64));
    for (c, (conv, turns)) in sessions(&server).iter().enumerate() {
        assert!(conv.ends_with(&format!("conv-{c}")));
        for (t, r) in turns.iter().enumerate() {
            let sent = messages(r);
            assert_eq!(
                sent[2 * t]["content"][0]["text"],
                humans[c][t],
                "{conv} turn {t}"
            );
            if t > 0 {
                assert!(
                    sent[2 * t - 1]["content"]
                        .as_str()
                        .unwrap()
                        .starts_with(" tok"),
                    "the mock's answer"
                );
            }
            assert!(r.max_tokens.is_some_and(|m| m > 0));
        }
    }
}

/// The seed README's four multi-turn examples (`tests/fixtures/seeds/`), at `base_url`.
fn seed_examples(base_url: &str, model: &str, sharegpt: &str) -> Vec<Vec<String>> {
    let common = [
        "--backend",
        "openai-chat",
        "--base-url",
        base_url,
        "--model",
        model,
    ];
    let with = |rest: &[&str]| -> Vec<String> {
        common.iter().chain(rest).map(|s| s.to_string()).collect()
    };
    vec![
        with(&[
            "--dataset-name",
            "random",
            "--multi-turn",
            "--multi-turn-num-turns",
            "5",
            "--random-input-len",
            "512",
            "--random-output-len",
            "256",
            "--num-prompts",
            "50",
            "--multi-turn-concurrency",
            "10",
            "--percentile-metrics",
            "ttft,tpot,itl,e2el",
            "--save-result",
        ]),
        with(&[
            "--dataset-name",
            "random",
            "--multi-turn",
            "--multi-turn-min-turns",
            "2",
            "--multi-turn-max-turns",
            "8",
            "--random-input-len",
            "2048",
            "--per-turn-input-len",
            "256",
            "--random-output-len",
            "128",
            "--num-prompts",
            "100",
            "--multi-turn-concurrency",
            "20",
        ]),
        with(&[
            "--dataset-name",
            "sharegpt",
            "--dataset-path",
            sharegpt,
            "--multi-turn",
            "--num-prompts",
            "50",
            "--multi-turn-concurrency",
            "10",
            "--save-result",
        ]),
        with(&[
            "--multi-turn",
            "--multi-turn-num-turns",
            "3",
            "--multi-turn-delay-ms",
            "500",
            "--num-prompts",
            "100",
            "--multi-turn-concurrency",
            "20",
        ]),
    ]
}

/// Replaces the value of `flag` in `args` when it is there.
fn scale(args: &mut [String], flag: &str, value: &str) {
    if let Some(i) = args.iter().position(|a| a == flag) {
        args[i + 1] = value.to_string();
    }
}

fn run_example(args: &[String], extra: &[&str]) -> String {
    let dir = TempDir::new("seed-multi-turn");
    let tokenizer = crate::util::smollm2();
    let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
    all.extend(["--tokenizer", tokenizer.to_str().unwrap(), "--disable-tqdm"]);
    // Saved results (--save-result in the examples) go to the test's directory.
    all.extend(["--result-dir", dir.arg()]);
    all.extend(extra);
    let out = run_in_process(&all);
    assert_eq!(out.code, 0, "{all:?}:\n{}", out.stderr);
    assert!(
        out.stdout
            .contains("Failed requests:                         0 "),
        "{all:?}:\n{}",
        out.stdout
    );
    assert!(out.stdout.contains("===== Turn 2 ====="), "{}", out.stdout);
    out.stdout
}

fn sharegpt_file() -> String {
    let p = fixture(SHAREGPT);
    p.to_str().unwrap().to_string()
}

#[test]
fn seed_examples_run_against_the_mock() {
    let server = mock(|c| {
        c.first_token_delay = std::time::Duration::ZERO;
        c.token_interval = std::time::Duration::ZERO;
        c.request_log = false;
    });
    for mut args in seed_examples(&server.base_url(), "mock-model", &sharegpt_file()) {
        // Smaller, same shape: the think-time example keeps its 500 ms.
        scale(&mut args, "--num-prompts", "12");
        scale(&mut args, "--random-input-len", "64");
        scale(&mut args, "--per-turn-input-len", "16");
        run_example(&args, &[]);
    }
}

/// The synthetic examples against llama.cpp, small: 2 conversations of 3 turns; the
/// prompts the server counted grow turn by turn (the history is really sent).
#[test]
fn synthetic_examples_run_against_llama_cpp() {
    let Some(server) = crate::util::start_tool_server("llama-server.sh", &[], &[]) else {
        return;
    };
    let examples = seed_examples(&server.url, &server.model, &sharegpt_file());
    for i in [0, 1, 3] {
        let mut args = examples[i].clone();
        scale(&mut args, "--num-prompts", "2");
        scale(&mut args, "--multi-turn-num-turns", "3");
        scale(&mut args, "--multi-turn-min-turns", "3");
        scale(&mut args, "--multi-turn-max-turns", "3");
        scale(&mut args, "--random-input-len", "24");
        scale(&mut args, "--per-turn-input-len", "8");
        scale(&mut args, "--random-output-len", "6");
        scale(&mut args, "--multi-turn-delay-ms", "50");
        scale(&mut args, "--multi-turn-concurrency", "2");
        let dir = TempDir::new("llama-multi-turn");
        let mut extra = vec![
            "--save-result",
            "--result-dir",
            dir.arg(),
            "--result-filename",
            "r.json",
        ];
        // The think-time example leaves the lengths at their defaults (1024 tokens in is
        // this llama.cpp's whole context).
        for (flag, value) in [("--random-output-len", "6"), ("--random-input-len", "24")] {
            if !args.iter().any(|a| a == flag) {
                extra.extend([flag, value]);
            }
        }
        args.retain(|a| a != "--save-result");
        run_example(&args, &extra);
        let text = std::fs::read_to_string(dir.path().join("r.json")).unwrap();
        let doc: Map<String, Value> = serde_json::from_str(&text).unwrap();
        let per_turn = list(&doc, "per_turn_metrics");
        let input = |t: usize| per_turn[t]["total_input_tokens"].as_u64().unwrap();
        assert_eq!(per_turn.len(), 3, "{args:?}");
        assert!(
            input(0) < input(1) && input(1) < input(2),
            "history grows: {per_turn:?}"
        );
    }
}
