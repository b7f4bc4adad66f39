//! The backends beyond completions/chat end to end against the mock: what the client reads
//! from each API's answers (token counts, generated text), and every request accounted for
//! when the mock injects faults.

use serde_json::Value;

use crate::e2e::{assert_accounted, base_args, count, mock, saved};
use crate::util::{vllm_bench, TempDir};
use vllm_bench::mock::FaultConfig;

fn texts(doc: &serde_json::Map<String, Value>) -> Vec<String> {
    doc["generated_texts"]
        .as_array()
        .expect("generated_texts with --save-detailed")
        .iter()
        .map(|t| t.as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn responses_reads_text_and_usage_from_typed_events() {
    let server = mock(|c| c.tokens_per_chunk = 2);
    let dir = TempDir::new("responses");
    let mut args = base_args(&server, &dir, 6);
    args.extend(["--backend", "openai-responses"].map(String::from));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = vllm_bench(&argv, dir.path());
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc = saved(&dir);
    assert_eq!(count(&doc, "completed"), 6);
    // 4 output tokens in 2 deltas of 2: usage from response.completed, text from deltas.
    assert_eq!(count(&doc, "total_output_tokens"), 24);
    assert!(
        texts(&doc).iter().all(|t| t == " tok tok tok tok"),
        "{doc:?}"
    );
    let itls = doc["itls"].as_array().unwrap();
    assert!(
        itls.iter().all(|l| l.as_array().unwrap().len() == 1),
        "two deltas, one gap"
    );
}

#[test]
fn responses_faults_are_failures_and_every_request_is_accounted_for() {
    let server = mock(|c| {
        c.faults = FaultConfig {
            malformed: 0.25,
            disconnect: 0.25,
            close_after_head: 0.25,
            ..FaultConfig::default()
        }
    });
    let dir = TempDir::new("responses-faults");
    let mut args = base_args(&server, &dir, 16);
    args.extend(["--backend", "openai-responses"].map(String::from));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = vllm_bench(&argv, dir.path());
    let doc = saved(&dir);
    assert_accounted(&doc, 16);
    let failed = count(&doc, "failed");
    assert!(
        failed > 0 && failed < 16,
        "{failed} failed:\n{}",
        run.stdout
    );
    assert_eq!(run.code, 0, "some requests succeeded:\n{}", run.stderr);
}

#[test]
fn beam_search_and_no_stream_are_accepted_and_change_nothing() {
    // Python 0.33's serve parses both and sends nothing for them: the run is the same.
    let server = mock(|_| {});
    let dir = TempDir::new("beam");
    let mut args = base_args(&server, &dir, 4);
    args.extend(["--use-beam-search", "--no-stream"].map(String::from));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = vllm_bench(&argv, dir.path());
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc = saved(&dir);
    assert_eq!(count(&doc, "completed"), 4);
    assert_eq!(
        count(&doc, "total_output_tokens"),
        16,
        "still streamed, 4 tokens each"
    );
}
