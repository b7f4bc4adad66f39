//! Several replicas in one run (`--base-url` repeated): requests spread round-robin, a
//! conversation and a shared prefix kept on one replica (`--replica-affinity session`), the
//! per-replica block, a replica down at start named after a bounded wait, and the documented
//! example of docs/servers.md ("Several replicas") run as written against two mocks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::{Map, Value};
use vllm_bench::mock::{LoggedRequest, MockServer};

use crate::e2e::mock;
use crate::util::{free_port, run_in_process, Run, TempDir};

const CHAT: &str = "/v1/chat/completions";
const COMPLETIONS: &str = "/v1/completions";

fn logging_bodies() -> MockServer {
    mock(|c| c.request_log_bodies = true)
}

/// `--base-url` for each of `servers`, the mock model, the local tokenizer, `extra`; the run
/// saves `r.json` in `dir`.
fn run(servers: &[&MockServer], dir: &TempDir, extra: &[&str]) -> Run {
    let tokenizer = crate::util::smollm2();
    let urls: Vec<String> = servers.iter().map(|s| s.base_url()).collect();
    let mut args: Vec<&str> = Vec::new();
    for u in &urls {
        args.extend(["--base-url", u]);
    }
    args.extend([
        "--model",
        "mock-model",
        "--tokenizer",
        tokenizer.to_str().expect("utf-8 path"),
        "--disable-tqdm",
        "--save-result",
        "--result-dir",
        dir.arg(),
        "--result-filename",
        "r.json",
    ]);
    args.extend(extra);
    run_in_process(&args)
}

fn ok(run: Run) -> Run {
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    run
}

fn saved(dir: &Path) -> Map<String, Value> {
    let text = std::fs::read_to_string(dir.join("r.json")).expect("result saved");
    serde_json::from_str(&text).expect("one JSON object")
}

fn logged(server: &MockServer, path: &str) -> Vec<LoggedRequest> {
    server
        .request_log()
        .into_iter()
        .filter(|r| r.path == path)
        .collect()
}

/// The prompt's first `n` characters of a logged completions request.
fn prompt_start(r: &LoggedRequest, n: usize) -> String {
    let body: Value = serde_json::from_str(r.body.as_deref().expect("body logged")).unwrap();
    body["prompt"]
        .as_str()
        .expect("a text prompt")
        .chars()
        .take(n)
        .collect()
}

fn random(n: &str) -> [&str; 8] {
    [
        "--dataset-name",
        "random",
        "--random-input-len",
        "16",
        "--random-output-len",
        "4",
        "--num-prompts",
        n,
    ]
}

#[test]
fn two_replicas_each_get_half_the_requests_round_robin() {
    let (a, b) = (mock(|_| {}), mock(|_| {}));
    let dir = TempDir::new("replicas-rr");
    let out = ok(run(&[&a, &b], &dir, &random("10")));
    assert_eq!(logged(&a, COMPLETIONS).len(), 5);
    assert_eq!(logged(&b, COMPLETIONS).len(), 5);
    assert!(out.stdout.contains(" Replicas "), "{}", out.stdout);
    let doc = saved(dir.path());
    let list = doc["vllm_bench_replicas"].as_array().expect("a list");
    let urls: Vec<&str> = list.iter().map(|r| r["url"].as_str().unwrap()).collect();
    assert_eq!(urls, [a.base_url(), b.base_url()]);
    for r in list {
        assert_eq!(
            (r["requests"].as_u64(), r["failed"].as_u64()),
            (Some(5), Some(0))
        );
        assert!(r["p99_ttft_ms"].as_f64().unwrap() > 0.0, "{r}");
    }
}

#[test]
fn one_server_has_no_replica_block_or_key() {
    let a = mock(|_| {});
    let dir = TempDir::new("replicas-one");
    let out = ok(run(&[&a], &dir, &random("4")));
    assert!(!out.stdout.contains(" Replicas "), "{}", out.stdout);
    assert!(!saved(dir.path()).contains_key("vllm_bench_replicas"));
}

#[test]
fn three_replicas_keep_each_conversation_on_one_replica() {
    let servers = [logging_bodies(), logging_bodies(), logging_bodies()];
    let dir = TempDir::new("replicas-multi-turn");
    let refs: Vec<&MockServer> = servers.iter().collect();
    ok(run(
        &refs,
        &dir,
        &[
            "--backend",
            "openai-chat",
            "--multi-turn",
            "--multi-turn-num-turns",
            "3",
            "--num-prompts",
            "6",
        ],
    ));
    let mut replica_of: BTreeMap<String, BTreeSet<usize>> = BTreeMap::new();
    for (i, s) in servers.iter().enumerate() {
        let turns = logged(s, CHAT);
        assert_eq!(
            turns.len(),
            6,
            "two conversations of 3 turns on replica {i}"
        );
        for t in turns {
            let id = t.session_id.expect("every turn carries X-Session-ID");
            replica_of.entry(id).or_default().insert(i);
        }
    }
    assert_eq!(replica_of.len(), 6);
    for (id, on) in &replica_of {
        assert_eq!(on.len(), 1, "conversation {id} went to replicas {on:?}");
    }
}

#[test]
fn session_affinity_keeps_a_shared_prefix_on_one_replica() {
    let dir = TempDir::new("replicas-affinity");
    let prefix_run = |affinity: &str| {
        let servers = [logging_bodies(), logging_bodies()];
        let refs: Vec<&MockServer> = servers.iter().collect();
        ok(run(
            &refs,
            &dir,
            &[
                "--dataset-name",
                "prefix_repetition",
                "--prefix-repetition-num-prefixes",
                "3",
                "--prefix-repetition-prefix-len",
                "128",
                "--prefix-repetition-suffix-len",
                "8",
                "--prefix-repetition-output-len",
                "4",
                "--num-prompts",
                "24",
                "--replica-affinity",
                affinity,
            ],
        ));
        servers
            .iter()
            .map(|s| {
                logged(s, COMPLETIONS)
                    .iter()
                    .map(|r| prompt_start(r, 100))
                    .collect::<BTreeSet<_>>()
            })
            .collect::<Vec<_>>()
    };
    let prefixes = prefix_run("session");
    assert_eq!(prefixes[0].len() + prefixes[1].len(), 3, "{prefixes:?}");
    assert!(prefixes[0].is_disjoint(&prefixes[1]), "{prefixes:?}");
    // Round-robin spreads every prefix over both.
    let spread = prefix_run("round-robin");
    assert_eq!((spread[0].len(), spread[1].len()), (3, 3), "{spread:?}");
}

/// The text of an Anthropic Messages request's first content block.
fn anthropic_prompt_start(r: &LoggedRequest, n: usize) -> String {
    let body: Value = serde_json::from_str(r.body.as_deref().expect("body logged")).unwrap();
    body["messages"][0]["content"][0]["text"]
        .as_str()
        .expect("a text block")
        .chars()
        .take(n)
        .collect()
}

#[test]
fn session_affinity_groups_anthropic_messages_by_prompt_not_body_start() {
    let dir = TempDir::new("replicas-affinity-anthropic");
    let servers = [logging_bodies(), logging_bodies()];
    // A served name this long fills the body's first 256 bytes (model and max_tokens come
    // before Anthropic's messages): grouping by body bytes would put every session in one
    // group, on one replica.
    let long_name = "m".repeat(300);
    ok(run(
        &[&servers[0], &servers[1]],
        &dir,
        &[
            "--backend",
            "anthropic-messages",
            "--served-model-name",
            &long_name,
            "--dataset-name",
            "prefix_repetition",
            "--prefix-repetition-num-prefixes",
            "3",
            "--prefix-repetition-prefix-len",
            "128",
            "--prefix-repetition-suffix-len",
            "8",
            "--prefix-repetition-output-len",
            "4",
            "--num-prompts",
            "24",
            "--replica-affinity",
            "session",
        ],
    ));
    let prefixes: Vec<BTreeSet<String>> = servers
        .iter()
        .map(|s| {
            logged(s, "/v1/messages")
                .iter()
                .map(|r| anthropic_prompt_start(r, 100))
                .collect()
        })
        .collect();
    assert_eq!(prefixes[0].len() + prefixes[1].len(), 3, "{prefixes:?}");
    assert!(
        !prefixes[0].is_empty() && !prefixes[1].is_empty(),
        "{prefixes:?}"
    );
    assert!(prefixes[0].is_disjoint(&prefixes[1]), "{prefixes:?}");
}

/// `(url, requests, failed)` of each replica in a saved result's `vllm_bench_replicas`.
fn replica_counts(doc: &Map<String, Value>) -> Vec<(String, u64, u64)> {
    doc["vllm_bench_replicas"]
        .as_array()
        .expect("a replicas list")
        .iter()
        .map(|r| {
            let n = |k: &str| r[k].as_u64().expect("a count");
            (
                r["url"].as_str().unwrap().to_owned(),
                n("requests"),
                n("failed"),
            )
        })
        .collect()
}

#[test]
fn merged_shards_rebuild_the_replicas_block_of_the_one_process_run() {
    let (a, b) = (mock(|_| {}), mock(|_| {}));
    let dir = TempDir::new("replicas-merge");
    // Three prefixes over two replicas by session: uneven counts, so a merge that dealt
    // requests anew would not match.
    let workload = [
        "--dataset-name",
        "prefix_repetition",
        "--prefix-repetition-num-prefixes",
        "3",
        "--prefix-repetition-prefix-len",
        "64",
        "--prefix-repetition-suffix-len",
        "8",
        "--prefix-repetition-output-len",
        "4",
        "--num-prompts",
        "24",
        "--replica-affinity",
        "session",
    ];
    ok(run(&[&a, &b], &dir, &workload));
    let single = replica_counts(&saved(dir.path()));
    let on: Vec<u64> = single.iter().map(|r| r.1).collect();
    assert_eq!(on.iter().sum::<u64>(), 24, "{single:?}");
    assert_ne!(on[0], on[1], "{single:?}");
    crate::shards::at_one_start(2, |k, start_at| {
        let spec = format!("{k}/2");
        let name = format!("shard{k}.json");
        let mut args = workload.to_vec();
        args.extend([
            "--shard",
            &spec,
            "--start-at",
            start_at,
            "--result-filename",
            &name,
        ]);
        run(&[&a, &b], &dir, &args)
    });
    let files = ["shard0.json".to_string(), "shard1.json".to_string()];
    let merged = crate::shards::merge(&dir, &files, "merged.json");
    assert_eq!(merged.code, 0, "{}\n{}", merged.stdout, merged.stderr);
    assert!(merged.stdout.contains(" Replicas "), "{}", merged.stdout);
    let text = std::fs::read_to_string(dir.path().join("merged.json")).unwrap();
    let doc: Map<String, Value> = serde_json::from_str(&text).unwrap();
    assert_eq!(replica_counts(&doc), single);
}

#[test]
fn a_replica_down_at_start_is_named_after_a_bounded_wait() {
    let a = mock(|_| {});
    let down = format!("http://127.0.0.1:{}", free_port());
    let tokenizer = crate::util::smollm2();
    let base = a.base_url();
    let mut args = vec![
        "--base-url",
        &base,
        "--base-url",
        &down,
        "--model",
        "mock-model",
        "--tokenizer",
        tokenizer.to_str().unwrap(),
        "--ready-check-timeout-sec",
        "1",
        "--disable-tqdm",
    ];
    args.extend(random("4"));
    let out = run_in_process(&args);
    assert_ne!(out.code, 0, "{}", out.stdout);
    let want = format!("1 of 2 replicas not ready after 1s: {down} (");
    assert!(out.stderr.contains(&want), "{}", out.stderr);
    assert_eq!(
        out.stderr.lines().filter(|l| l.contains("error")).count(),
        1
    );
    assert!(
        !logged(&a, COMPLETIONS).is_empty(),
        "the live replica was asked"
    );
    assert!(!out.stdout.contains("Serving Benchmark Result"));
}

#[test]
fn a_bad_replica_url_is_one_line_and_exit_2() {
    let dir = TempDir::new("replicas-bad");
    std::fs::write(
        dir.path().join("urls.txt"),
        "http://127.0.0.1:9\n# c\n\nhttp://x/y\n",
    )
    .unwrap();
    // `@FILE` as an absolute path: the run is in this process, whose directory is not `dir`.
    let urls = format!("@{}", dir.path().join("urls.txt").display());
    let missing = format!("@{}", dir.path().join("missing.txt").display());
    for (args, want) in [
        (
            vec![
                "--base-url",
                "http://127.0.0.1:9",
                "--base-url",
                "http://127.0.0.1:9",
            ],
            "--base-url http://127.0.0.1:9: given twice".to_string(),
        ),
        (
            vec!["--base-url", &urls],
            format!(
                "--base-url {urls}: http://x/y: every replica needs the first one's scheme and path"
            ),
        ),
        (
            vec!["--base-url", &missing],
            format!("--base-url {missing}: cannot read the file"),
        ),
    ] {
        let out = run_in_process(&args);
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains(&want), "{args:?}: {}", out.stderr);
        assert_eq!(out.stderr.trim().lines().count(), 1, "{}", out.stderr);
    }
}

/// The block of docs/servers.md after `<!-- test: replicas -->`, its two ports pointed at two
/// mocks.
#[test]
fn the_documented_replicas_example_runs_against_two_mocks() {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/servers.md"))
            .expect("docs/servers.md");
    let at = doc.find("<!-- test: replicas -->").expect("the marker");
    let block = doc[at..].split("```").nth(1).expect("a code block");
    let command = block
        .replace("\\\n", " ")
        .lines()
        .find(|l| l.trim_start().starts_with("vllm-bench "))
        .expect("a vllm-bench command")
        .to_string();
    let (a, b) = (logging_bodies(), logging_bodies());
    let command = command
        .replace("http://127.0.0.1:8001", &a.base_url())
        .replace("http://127.0.0.1:8002", &b.base_url());
    let mut args: Vec<&str> = command.split_whitespace().skip(1).collect();
    args.push("--disable-tqdm");
    let dir = TempDir::new("replicas-doc");
    // The command saves into the working directory: here, the test's.
    args.extend(["--result-dir", dir.arg()]);
    let out = run_in_process(&args);
    assert_eq!(out.code, 0, "{args:?}\n{}\n{}", out.stdout, out.stderr);
    let (on_a, on_b) = (logged(&a, COMPLETIONS).len(), logged(&b, COMPLETIONS).len());
    assert!(on_a > 0 && on_b > 0, "{on_a} / {on_b}");
    let text = std::fs::read_to_string(dir.path().join("replicas.json")).expect("saved");
    assert!(text.contains("\"vllm_bench_replicas\""));
}
