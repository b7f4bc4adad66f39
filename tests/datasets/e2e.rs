//! The file datasets end to end: the real binary against the in-process mock, checking what
//! the mock received (request ids and `max_tokens`) against the Python expectations, and
//! bad input refused with one line.

use std::collections::HashMap;

use serde_json::Value;

use crate::e2e::{assert_refused, mock};
use crate::util::{fetched, fixture, fixture_arg, run_in_process, vllm_bench_env, TempDir};
use crate::util::{QWEN3, SHAREGPT};

fn path_of(rel: &str) -> String {
    fixture_arg(rel)
}

/// The Qwen3 tokenizer's directory; `None` (the test returns) when it has not been fetched.
fn qwen3_arg() -> Option<String> {
    fetched(QWEN3).map(|dir| dir.to_str().unwrap().to_string())
}

/// `max_tokens` the mock saw, by request id.
fn max_tokens_by_id(server: &vllm_bench::mock::MockServer) -> HashMap<String, u64> {
    server
        .request_log()
        .iter()
        .filter_map(|r| Some((r.request_id.clone()?, r.max_tokens?)))
        .collect()
}

#[test]
fn sharegpt_sends_pythons_selection() {
    let Some(tok) = qwen3_arg() else { return };
    let server = mock(|_| {});
    let args = [
        "--base-url",
        &server.base_url(),
        "--model",
        "mock-model",
        "--tokenizer",
        &tok,
        "--dataset-name",
        "sharegpt",
        "--dataset-path",
        &path_of(SHAREGPT),
        "--num-prompts",
        "30",
        "--seed",
        "42",
        "--request-id-prefix",
        "r",
        "--disable-tqdm",
    ];
    let run = run_in_process(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run
        .stdout
        .contains("Successful requests:                     30 "));
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/sharegpt/expected.json"
        ))
        .unwrap(),
    )
    .unwrap();
    // Case 2: seed 42, completion lengths; its first 30 samples are the selection for 30.
    let case = &expected["cases"][2];
    assert_eq!(
        (case["seed"].as_u64(), case["output_len"].as_u64()),
        (Some(42), None)
    );
    let seen = max_tokens_by_id(&server);
    assert_eq!(seen.len(), 30);
    for (i, s) in case["samples"].as_array().unwrap()[..30].iter().enumerate() {
        assert_eq!(
            seen.get(&format!("r{i}")),
            Some(&s[2].as_u64().unwrap()),
            "r{i}"
        );
    }
}

#[test]
fn sharegpt_dry_run_and_fixed_output_len() {
    let Some(tok) = qwen3_arg() else { return };
    let args = [
        "--tokenizer",
        &tok,
        "--model",
        "m",
        "--dataset-name",
        "sharegpt",
        "--dataset-path",
        &path_of(SHAREGPT),
        "--num-prompts",
        "2000",
        "--sharegpt-output-len",
        "64",
        "--dry-run",
    ];
    let run = run_in_process(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // Fewer than 2000 conversations are valid (1,799 for seed 42 at 128, the fixture), so
    // this oversamples; every output length is fixed at 64 and every prompt is within
    // Python's 4..=1024 bounds.
    assert!(
        run.stdout.contains("Requests: 2000 (text prompts)"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("Output tokens: min 64 / mean 64.00 / max 64 / total 128000"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("Prompt tokens: min 4 / "),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains(" / max 1024 / "), "{}", run.stdout);
}

#[test]
fn sharegpt_bad_input_is_one_line() {
    let dir = TempDir::new("sharegpt-bad");
    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, "[{\"conversations\": [}]").unwrap();
    let Some(tok) = qwen3_arg() else { return };
    let base = [
        "--mock-server",
        "--tokenizer",
        &tok,
        "--dataset-name",
        "sharegpt",
    ];
    for (path, needle) in [
        (
            broken.to_str().unwrap(),
            "broken.json: not a ShareGPT JSON list",
        ),
        (
            "/nonexistent/sg.json",
            "--dataset-path /nonexistent/sg.json",
        ),
    ] {
        let mut args = base.to_vec();
        args.extend(["--dataset-path", path]);
        assert_refused(&args, needle);
    }
}

/// Without `--dataset-path`, Python's ShareGPT file is taken from the HF cache (the
/// `huggingface_hub` layout), with `HF_HUB_OFFLINE=1`; missing, one line says what to do.
#[test]
fn sharegpt_from_the_hub_cache_offline() {
    let dir = TempDir::new("sharegpt-hub");
    let cache = dir.path().join("hub");
    let repo = cache.join("datasets--anon8231489123--ShareGPT_Vicuna_unfiltered");
    let snapshot = repo.join("snapshots/0123abc");
    std::fs::create_dir_all(&snapshot).unwrap();
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs/main"), "0123abc").unwrap();
    std::os::unix::fs::symlink(
        fixture(SHAREGPT),
        snapshot.join("ShareGPT_V3_unfiltered_cleaned_split.json"),
    )
    .unwrap();
    let Some(tok) = qwen3_arg() else { return };
    let args = [
        "--mock-server",
        "--tokenizer",
        &tok,
        "--dataset-name",
        "sharegpt",
        "--num-prompts",
        "5",
        "--disable-tqdm",
    ];
    let run = vllm_bench_env(&args, dir.path(), &[("HF_HUB_CACHE", &cache)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run
        .stdout
        .contains("Successful requests:                     5 "));
    let empty = dir.path().join("empty-hub");
    std::fs::create_dir_all(&empty).unwrap();
    let run = vllm_bench_env(&args, dir.path(), &[("HF_HUB_CACHE", &empty)]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    let lines: Vec<_> = run
        .stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("HF_HUB_OFFLINE is set"), "{lines:?}");
    assert!(lines[0].contains("--dataset-path"), "{lines:?}");
}

fn run_ok(args: &[&str], n: usize) {
    let run = run_in_process(args);
    assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
    assert!(
        run.stdout.contains(&format!(
            "Successful requests:                     {n:<10}\n"
        )),
        "{}",
        run.stdout
    );
}

/// The seed README's sonnet command (scaled to 20 prompts) against the mock: the built-in
/// sonnet.txt, Qwen3's chat template, every request asking for --sonnet-output-len.
#[test]
fn sonnet_seed_command_runs_against_the_mock() {
    let server = mock(|_| {});
    let Some(tok) = qwen3_arg() else { return };
    let url = server.base_url();
    let target = crate::util::chat_mock_flags(&url, &tok);
    let sonnet = [
        "--dataset-name",
        "sonnet",
        "--sonnet-input-len",
        "550",
        "--sonnet-output-len",
        "150",
        "--sonnet-prefix-len",
        "200",
        "--num-prompts",
        "20",
        "--disable-tqdm",
    ];
    run_ok(&[&target[..], &sonnet[..]].concat(), 20);
    let seen = max_tokens_by_id(&server);
    assert_eq!(seen.len(), 20);
    assert!(seen.values().all(|&m| m == 150), "{seen:?}");
}

#[test]
fn sonnet_needs_a_chat_template_unless_skipped() {
    // The embedded mock's tokenizer is the server's /tokenize: it has no chat template.
    let base = [
        "--mock-server",
        "--dataset-name",
        "sonnet",
        "--num-prompts",
        "5",
    ];
    assert_refused(&base, "--skip-chat-template");
    let mut skip = base.to_vec();
    skip.extend(["--skip-chat-template", "--disable-tqdm"]);
    run_ok(&skip, 5);
}

#[test]
fn custom_jsonl_sends_each_rows_output_tokens() {
    let server = mock(|_| {});
    let dir = TempDir::new("custom");
    let file = dir.path().join("prompts.jsonl");
    let rows: String = (0..12)
        .map(|i| {
            format!(
                "{{\"prompt\": \"question number {i}?\", \"output_tokens\": {}}}\n",
                5 + i
            )
        })
        .collect();
    std::fs::write(&file, rows).unwrap();
    let tok = crate::util::smollm2_arg();
    let url = server.base_url();
    let args = [
        "--base-url",
        &url,
        "--model",
        "mock-model",
        "--tokenizer",
        &tok,
        "--dataset-name",
        "custom",
        "--dataset-path",
        file.to_str().unwrap(),
        "--custom-output-len",
        "-1",
        "--disable-shuffle",
        "--num-prompts",
        "10",
        "--request-id-prefix",
        "c",
        "--disable-tqdm",
    ];
    run_ok(&args, 10);
    let seen = max_tokens_by_id(&server);
    let want: HashMap<String, u64> = (0..10).map(|i| (format!("c{i}"), 5 + i as u64)).collect();
    assert_eq!(seen, want);
}

#[test]
fn custom_bad_input_is_one_line_with_file_and_line() {
    let dir = TempDir::new("custom-bad");
    let file = dir.path().join("bad.jsonl");
    std::fs::write(&file, "{\"prompt\": \"ok\"}\n{\"text\": \"no prompt\"}\n").unwrap();
    let path = file.to_str().unwrap().to_string();
    let Some(tok) = qwen3_arg() else { return };
    let base = [
        "--mock-server",
        "--tokenizer",
        &tok,
        "--dataset-name",
        "custom",
    ];
    let mut args = base.to_vec();
    args.extend(["--dataset-path", &path]);
    assert_refused(&args, &format!("{path}:2: no \"prompt\" key"));
    let ok = dir.path().join("ok.jsonl");
    std::fs::write(&ok, "{\"prompt\": \"ok\"}\n").unwrap();
    let ok = ok.to_str().unwrap().to_string();
    let mut args = base.to_vec();
    args.extend(["--dataset-path", &ok, "--custom-output-len", "-1"]);
    assert_refused(&args, "ok.jsonl:1: no \"output_tokens\"");
    let csv = dir.path().join("p.csv");
    std::fs::write(&csv, "prompt\nx\n").unwrap();
    let mut args = base.to_vec();
    args.extend(["--dataset-path", csv.to_str().unwrap()]);
    assert_refused(&args, "reads JSONL only");
}

#[test]
fn prefix_repetition_runs_against_the_mock() {
    let server = mock(|_| {});
    let Some(tok) = qwen3_arg() else { return };
    let url = server.base_url();
    let args = [
        "--base-url",
        &url,
        "--model",
        "mock-model",
        "--tokenizer",
        &tok,
        "--dataset-name",
        "prefix_repetition",
        "--prefix-repetition-prefix-len",
        "64",
        "--prefix-repetition-suffix-len",
        "16",
        "--prefix-repetition-num-prefixes",
        "4",
        "--prefix-repetition-output-len",
        "9",
        "--num-prompts",
        "12",
        "--disable-tqdm",
    ];
    run_ok(&args, 12);
    let log = server.request_log();
    let model: Vec<_> = log.iter().filter(|r| r.path == "/v1/completions").collect();
    assert_eq!(model.len(), 12);
    assert!(model.iter().all(|r| r.max_tokens == Some(9)));
    let distinct: std::collections::HashSet<_> = model.iter().map(|r| r.prompt_hash).collect();
    assert_eq!(distinct.len(), 12, "every prompt differs (its suffix)");
    let mut args = args.to_vec();
    let at = args.iter().position(|a| *a == "12").unwrap();
    args[at] = "3";
    assert_refused(
        &args,
        "must be at least --prefix-repetition-num-prefixes (4)",
    );
}

/// With the mock's own word-level tokenizer (its `/tokenize`), shared prefixes still give
/// exact lengths: the fitter joins prefix and suffix as the tokenizer's decode joins words.
#[test]
fn prefix_repetition_with_the_servers_word_tokenizer_is_exact() {
    let server = mock(|_| {});
    let url = server.base_url();
    let args = [
        "--base-url",
        &url,
        "--model",
        "mock-model",
        "--dataset-name",
        "prefix_repetition",
        "--prefix-repetition-prefix-len",
        "50",
        "--prefix-repetition-suffix-len",
        "30",
        "--prefix-repetition-num-prefixes",
        "2",
        "--num-prompts",
        "6",
        "--disable-tqdm",
    ];
    run_ok(&args, 6);
    let log = server.request_log();
    let lens: Vec<_> = log
        .iter()
        .filter(|r| r.path == "/v1/completions")
        .map(|r| r.prompt_tokens)
        .collect();
    assert_eq!(lens, vec![Some(80); 6]);
}

#[test]
fn burstgpt_runs_against_the_mock() {
    let server = mock(|_| {});
    let csv = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/burstgpt/burstgpt_sample.csv"
    );
    let Some(tok) = qwen3_arg() else { return };
    let url = server.base_url();
    let args = [
        "--base-url",
        &url,
        "--model",
        "mock-model",
        "--tokenizer",
        &tok,
        "--dataset-name",
        "burstgpt",
        "--dataset-path",
        csv,
        "--num-prompts",
        "10",
        "--request-id-prefix",
        "b",
        "--disable-tqdm",
    ];
    run_ok(&args, 10);
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/burstgpt/expected.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let case = &expected["cases"][1];
    assert_eq!(
        (case["seed"].as_u64(), case["num"].as_u64()),
        (Some(0), Some(10))
    );
    let seen = max_tokens_by_id(&server);
    for (i, pair) in case["pairs"].as_array().unwrap().iter().enumerate() {
        assert_eq!(
            seen.get(&format!("b{i}")),
            Some(&pair[1].as_u64().unwrap()),
            "b{i}"
        );
    }
}

/// spec_bench: the category's first turns, the fixed output length, and (a Python quirk)
/// the same shuffle whatever `--seed` says.
#[test]
fn spec_bench_runs_against_the_mock_and_ignores_the_seed_as_python() {
    let dir = TempDir::new("spec-bench");
    let file = dir.path().join("question.jsonl");
    let rows: String = (0..9)
        .map(|i| {
            let cat = if i % 3 == 0 { "math_reasoning" } else { "writing" };
            format!("{{\"question_id\": {i}, \"category\": \"{cat}\", \"turns\": [\"Question {i}?\", \"Follow-up\"]}}\n")
        })
        .collect();
    std::fs::write(&file, rows).unwrap();
    let Some(tok) = qwen3_arg() else { return };
    let by_id = |seed: &str| {
        let server = mock(|_| {});
        let url = server.base_url();
        let args = [
            "--base-url",
            &url,
            "--model",
            "mock-model",
            "--tokenizer",
            &tok,
            "--dataset-name",
            "spec_bench",
            "--dataset-path",
            file.to_str().unwrap(),
            "--spec-bench-category",
            "writing",
            "--spec-bench-output-len",
            "33",
            "--num-prompts",
            "6",
            "--seed",
            seed,
            "--request-id-prefix",
            "s",
            "--disable-tqdm",
        ];
        run_ok(&args, 6);
        let log = server.request_log();
        assert!(log
            .iter()
            .filter(|r| r.request_id.is_some())
            .all(|r| r.max_tokens == Some(33)));
        let mut pairs: Vec<_> = log
            .iter()
            .filter_map(|r| Some((r.request_id.clone()?, r.prompt_hash?)))
            .collect();
        pairs.sort();
        pairs
    };
    let a = by_id("1");
    assert_eq!(a.len(), 6);
    let distinct: std::collections::HashSet<_> = a.iter().map(|(_, h)| h).collect();
    assert_eq!(distinct.len(), 6, "the 6 writing questions");
    assert_eq!(a, by_id("12345"));
}

/// `--output-len` overrides the reply lengths, `--max-model-len` drops what does not fit,
/// and `--no-oversample` runs with what is valid.
#[test]
fn sharegpt_overrides_max_model_len_and_no_oversample() {
    let Some(tok) = qwen3_arg() else { return };
    let data = path_of(SHAREGPT);
    let base = [
        "--tokenizer",
        &tok,
        "--model",
        "m",
        "--dataset-name",
        "sharegpt",
        "--dataset-path",
        &data,
        "--dry-run",
    ];
    let run = |extra: &[&str]| {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        let r = run_in_process(&args);
        assert_eq!(r.code, 0, "{}", r.stderr);
        r
    };
    let r = run(&["--num-prompts", "50", "--output-len", "7"]);
    assert!(
        r.stdout
            .contains("Output tokens: min 7 / mean 7.00 / max 7 / total 350"),
        "{}",
        r.stdout
    );
    let r = run(&["--num-prompts", "200", "--max-model-len", "300"]);
    let dropped = r
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("note: --max-model-len dropped "))
        .and_then(|l| l.strip_suffix(" requests"))
        .and_then(|n| n.parse::<usize>().ok())
        .expect("a note saying how many were dropped");
    assert!(dropped > 0 && dropped < 200, "{dropped}");
    assert!(
        r.stdout
            .contains(&format!("Requests: {} (text prompts)", 200 - dropped)),
        "{}",
        r.stdout
    );
    // Fewer valid conversations than asked for: the valid ones, as Python counted them for
    // seed 0 (tests/data/sharegpt/expected.json).
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/sharegpt/expected.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let valid = expected["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["seed"] == 0 && c["output_len"].is_null() && c.get("valid").is_some())
        .and_then(|c| c["valid"].as_u64())
        .unwrap();
    let r = run(&["--num-prompts", "300", "--no-oversample"]);
    assert!(
        r.stdout
            .contains(&format!("Requests: {valid} (text prompts)")),
        "{}",
        r.stdout
    );
}

/// SPEED-Bench from a prepared directory: the split's file, the category, the output length
/// (`--output-len` overrides it, as the seed's example uses), and `--speed-bench-max-input-len`.
#[test]
fn speed_bench_from_a_prepared_directory() {
    let dir = TempDir::new("speed-bench");
    let data = dir.path().join("speed");
    std::fs::create_dir_all(&data).unwrap();
    let row = |cat: &str, text: &str| {
        serde_json::json!({"category": cat, "messages": [{"role": "user", "content": text}]})
            .to_string()
            + "\n"
    };
    let qualitative: String = (0..6)
        .map(|i| {
            row(
                if i < 4 { "coding" } else { "math" },
                &format!("Question {i}: explain it."),
            )
        })
        .collect();
    std::fs::write(data.join("qualitative.jsonl"), qualitative).unwrap();
    let long = "The quick brown fox jumps over the lazy dog. ".repeat(200);
    std::fs::write(data.join("throughput_1k.jsonl"), row("low_entropy", &long)).unwrap();
    let server = mock(|_| {});
    let url = server.base_url();
    let Some(tok) = qwen3_arg() else { return };
    let d = data.to_str().unwrap();
    let base = [
        "--base-url",
        &url,
        "--model",
        "mock-model",
        "--backend",
        "openai-chat",
        "--tokenizer",
        &tok,
        "--dataset-name",
        "speed-bench",
        "--dataset-path",
        d,
        "--disable-tqdm",
    ];
    let mut args = base.to_vec();
    args.extend([
        "--speed-bench-config",
        "qualitative",
        "--speed-bench-category",
        "coding",
        "--num-prompts",
        "4",
        "--output-len",
        "21",
    ]);
    run_ok(&args, 4);
    let log = server.request_log();
    let chat: Vec<_> = log
        .iter()
        .filter(|r| r.path == "/v1/chat/completions")
        .collect();
    assert_eq!(chat.len(), 4);
    assert!(chat.iter().all(|r| r.max_tokens == Some(21)));
    let distinct: std::collections::HashSet<_> = chat.iter().map(|r| r.prompt_hash).collect();
    assert_eq!(distinct.len(), 4, "the four coding questions");
    // Truncation: the 2,000-word prompt is cut to 100 tokens before anything else.
    let mut args = base.to_vec();
    args.extend([
        "--speed-bench-config",
        "throughput_1k",
        "--speed-bench-max-input-len",
        "100",
        "--skip-chat-template",
        "--num-prompts",
        "1",
        "--dry-run",
    ]);
    let run = run_in_process(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .contains("Prompt tokens: min 100 / mean 100.00 / max 100"),
        "{}",
        run.stdout
    );
    // A split that is not there: one line naming the file.
    let mut args = base.to_vec();
    args.extend([
        "--speed-bench-config",
        "throughput_8k",
        "--num-prompts",
        "1",
    ]);
    assert_refused(&args, "throughput_8k.jsonl: not found");
}
