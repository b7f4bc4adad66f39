//! `--backend anthropic-messages` end to end: the embedded mock's usage and latencies, the
//! bodies an in-process mock logs (fields, system prompt, images, a conversation's turns),
//! and an `error` event mid-stream failing its request with its reason.

use serde_json::Value;

use crate::e2e::{assert_accounted, base_args, count, mock, saved};
use crate::util::{run_in_process, TempDir};
use vllm_bench::mock::{FaultConfig, MockServer};

const MESSAGES: &str = "/v1/messages";

/// The JSON bodies the mock received on `/v1/messages`, in arrival order.
fn bodies(server: &MockServer) -> Vec<Value> {
    let mut log = server.request_log();
    log.sort_by_key(|r| r.arrival);
    log.into_iter()
        .filter(|r| r.path == MESSAGES)
        .map(|r| serde_json::from_str(r.body.as_deref().expect("request_log_bodies")).unwrap())
        .collect()
}

/// A run of `n` random prompts against `server` with the anthropic backend and `extra`.
fn run(server: &MockServer, dir: &TempDir, n: usize, extra: &[&str]) -> crate::util::Run {
    let mut args = base_args(server, dir, n);
    args.extend(["--backend", "anthropic-messages"].map(String::from));
    args.extend(extra.iter().map(|s| s.to_string()));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    run_in_process(&argv)
}

fn lists<'a>(doc: &'a serde_json::Map<String, Value>, key: &str) -> &'a Vec<Value> {
    doc[key].as_array().unwrap_or_else(|| panic!("{key} list"))
}

#[test]
fn the_embedded_mock_serves_messages_with_exact_usage_ttft_and_itl() {
    let dir = TempDir::new("anthropic-embedded");
    let run = run_in_process(&[
        "--mock-server",
        "--backend",
        "anthropic-messages",
        "--random-input-len",
        "32",
        "--random-output-len",
        "8",
        "--num-prompts",
        "6",
        "--disable-tqdm",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        dir.arg(),
        "--result-filename",
        "r.json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let text = std::fs::read_to_string(dir.path().join("r.json")).unwrap();
    let doc: serde_json::Map<String, Value> = serde_json::from_str(&text).unwrap();
    assert_eq!(doc["backend"], "anthropic-messages");
    assert_eq!(count(&doc, "completed"), 6);
    // The mock's usage: message_start's input tokens, message_delta's output tokens.
    assert_eq!(count(&doc, "total_input_tokens"), 6 * 32);
    assert_eq!(count(&doc, "total_output_tokens"), 6 * 8);
    assert!(
        lists(&doc, "ttfts")
            .iter()
            .all(|t| t.as_f64().unwrap() > 0.0),
        "{doc:?}"
    );
    assert!(
        lists(&doc, "itls")
            .iter()
            .all(|l| l.as_array().unwrap().len() == 7),
        "8 text deltas, 7 gaps: {:?}",
        doc["itls"]
    );
    assert!(lists(&doc, "generated_texts")
        .iter()
        .all(|t| t == &Value::from(" tok".repeat(8))));
    assert!(run.stdout.contains("Mean TTFT (ms):"), "{}", run.stdout);
    assert!(run.stdout.contains("Mean ITL (ms):"), "{}", run.stdout);
}

#[test]
fn bodies_are_the_messages_api_and_usage_is_the_mocks() {
    let server = mock(|c| c.request_log_bodies = true);
    let dir = TempDir::new("anthropic-bodies");
    let run = run(
        &server,
        &dir,
        4,
        &[
            "--extra-body",
            r#"{"system": "be brief", "temperature": 0.5}"#,
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc = saved(&dir);
    assert_eq!(count(&doc, "completed"), 4);
    let sent = bodies(&server);
    let body = sent.last().expect("a request");
    let keys: Vec<&str> = body
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    // No ignore_eos: it is forced only for the OpenAI-compatible backends.
    assert_eq!(
        keys,
        [
            "model",
            "max_tokens",
            "messages",
            "stream",
            "system",
            "temperature"
        ]
    );
    assert_eq!(body["model"], "mock-model");
    assert_eq!(
        (&body["max_tokens"], &body["stream"]),
        (&Value::from(4), &Value::Bool(true))
    );
    assert_eq!(body["messages"][0]["role"], "user");
    assert_eq!(body["messages"][0]["content"][0]["type"], "text");
    assert_eq!(body["system"], "be brief");
    // The totals are the usage the mock reported, the system prompt included.
    let log: Vec<_> = server
        .request_log()
        .into_iter()
        .filter(|r| r.path == MESSAGES)
        .collect();
    let measured = &log[log.len() - 4..];
    let prompt: u64 = measured.iter().map(|r| r.prompt_tokens.unwrap()).sum();
    assert_eq!(count(&doc, "total_input_tokens"), prompt);
    assert_eq!(count(&doc, "total_output_tokens"), 4 * 4);
}

#[test]
fn an_error_event_mid_stream_fails_its_request_with_its_reason() {
    let server = mock(|c| {
        c.faults = FaultConfig {
            stream_error: 0.5,
            ..FaultConfig::default()
        }
    });
    let dir = TempDir::new("anthropic-error");
    let run = run(&server, &dir, 12, &[]);
    let doc = saved(&dir);
    assert_accounted(&doc, 12);
    let failed = count(&doc, "failed");
    assert!(
        failed > 0 && failed < 12,
        "{failed} failed:\n{}",
        run.stdout
    );
    assert_eq!(server.stats().faults.stream_error, failed);
    let errors: Vec<&str> = lists(&doc, "errors")
        .iter()
        .filter_map(Value::as_str)
        .filter(|e| !e.is_empty())
        .collect();
    assert!(
        errors
            .iter()
            .all(|e| *e == "api_error: injected fault: the mock server failed mid-stream"),
        "{errors:?}"
    );
    assert_eq!(run.code, 0, "some requests succeeded:\n{}", run.stderr);
}

#[test]
fn a_conversation_sends_its_history_as_messages() {
    let server = mock(|c| c.request_log_bodies = true);
    let dir = TempDir::new("anthropic-multi-turn");
    let run = run(
        &server,
        &dir,
        2,
        &["--multi-turn", "--multi-turn-num-turns", "3"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("===== Turn 1 ====="), "{}", run.stdout);
    let doc = saved(&dir);
    assert_eq!(count(&doc, "completed"), 6);
    let sent = bodies(&server);
    let last_turns: Vec<&Value> = sent
        .iter()
        .filter(|b| b["messages"].as_array().unwrap().len() == 5)
        .collect();
    assert_eq!(last_turns.len(), 2, "each conversation's third turn");
    for body in last_turns {
        let m = &body["messages"];
        assert_eq!(
            m[1],
            serde_json::json!({"role": "assistant", "content": " tok tok tok tok"})
        );
        assert_eq!(m[4]["role"], "user");
        assert!(
            body.get("min_tokens").is_none(),
            "no min_tokens in the Messages API"
        );
        assert!(body.get("max_tokens").is_some());
    }
}

#[test]
fn random_mm_images_are_base64_image_blocks() {
    let server = mock(|c| c.request_log_bodies = true);
    let dir = TempDir::new("anthropic-mm");
    let run = run(
        &server,
        &dir,
        3,
        &[
            "--dataset-name",
            "random-mm",
            "--random-mm-base-items-per-request",
            "1",
            "--random-mm-limit-mm-per-prompt",
            r#"{"image": 1, "video": 0}"#,
            "--random-mm-bucket-config",
            "{(32, 40, 1): 1.0}",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    for body in &bodies(&server)[1..] {
        let content = &body["messages"][0]["content"];
        assert_eq!(content[0]["type"], "text");
        let source = &content[1]["source"];
        assert_eq!(content[1]["type"], "image");
        assert_eq!(
            (&source["type"], &source["media_type"]),
            (&Value::from("base64"), &Value::from("image/jpeg"))
        );
        assert!(
            source["data"].as_str().unwrap().starts_with("/9j/"),
            "a JPEG"
        );
    }
}

#[test]
fn help_lists_the_backend() {
    let run = run_in_process(&["--help"]);
    assert_eq!(run.code, 0);
    assert!(run.stdout.contains("anthropic-messages"), "{}", run.stdout);
}

/// llama.cpp's `llama-server` serves `/v1/messages` (streamed Anthropic events, usage with
/// `input_tokens`): every request completes with the server's counts.
#[test]
fn llama_cpp_serves_anthropic_messages_streams() {
    let _serial = crate::util::serial();
    let Some(llama) = crate::util::start_tool_server("llama-server.sh", &[], &[]) else {
        return;
    };
    let dir = TempDir::new("anthropic-llama");
    let tokenizer = crate::util::smollm2();
    let out = run_in_process(&[
        "--base-url",
        &llama.url,
        "--backend",
        "anthropic-messages",
        "--model",
        &llama.model,
        "--tokenizer",
        tokenizer.to_str().expect("utf-8 path"),
        "--random-input-len",
        "16",
        "--random-output-len",
        "8",
        "--num-prompts",
        "4",
        "--max-concurrency",
        "2",
        "--disable-tqdm",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        dir.arg(),
        "--result-filename",
        crate::e2e::RESULT,
    ]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let doc = saved(&dir);
    assert_eq!((count(&doc, "completed"), count(&doc, "failed")), (4, 0));
    for (input, output) in lists(&doc, "input_lens")
        .iter()
        .zip(lists(&doc, "output_lens"))
    {
        let (input, output) = (input.as_u64().unwrap(), output.as_u64().unwrap());
        assert!(input > 1, "prompt tokens from the server's usage: {input}");
        assert!((1..=8).contains(&output), "output tokens {output}");
    }
    assert!(lists(&doc, "ttfts").iter().all(|t| t.as_f64() > Some(0.0)));
}
