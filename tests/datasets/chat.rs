//! Chat-templated datasets against Python: `tests/data/chat/expected.json` holds what
//! `jinja2` (configured as `transformers` configures it) and `tokenizers` give for the custom
//! prompts of `tests/data/chat/prompts.jsonl` and for vLLM 0.11's sonnet sampling, with both
//! fixture tokenizers (written by `tests/data/chat/make_expected.py`).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use vllm_bench::datasets::chat_format::ChatFormat;
use vllm_bench::datasets::custom::{Custom, CustomOptions};
use vllm_bench::datasets::sonnet::{Sonnet, SonnetOptions};
use vllm_bench::datasets::{Prompt, SampleRequest, Sampling};
use vllm_bench::tokenizer::Tokenizer;

use crate::util::sonnet;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/chat")
        .join(name)
}

fn expected() -> Value {
    serde_json::from_str(&std::fs::read_to_string(data("expected.json")).unwrap()).unwrap()
}

/// The `qwen3` (fetched; `None` when it is not) or `smollm2` tokenizer, loaded once for the
/// whole `datasets` module.
fn tokenizer(name: &str) -> Option<&'static Tokenizer> {
    match name {
        "qwen3" => super::qwen3(),
        "smollm2" => Some(super::smollm2()),
        other => panic!("no fixture tokenizer {other}"),
    }
}

fn sampling(seed: u64, n: usize) -> Sampling {
    Sampling {
        num_requests: n,
        seed,
        shuffle: true,
        oversample: true,
        request_id_prefix: String::new(),
    }
}

fn text(r: &SampleRequest) -> &str {
    match &r.prompt {
        Prompt::Text(t) => t,
        _ => panic!("text expected"),
    }
}

#[test]
fn custom_prompts_are_rendered_and_counted_as_python() {
    let doc = expected();
    let data = Custom::load(&data("prompts.jsonl")).unwrap();
    for name in ["qwen3", "smollm2"] {
        let Some(tok) = tokenizer(name) else {
            continue;
        };
        for case in doc[name]["custom"].as_array().unwrap() {
            let kwargs: Map<String, Value> = case["kwargs"].as_object().unwrap().clone();
            let format = ChatFormat::of_tokenizer(tok, Some(kwargs.clone()), "custom").unwrap();
            let want = case["samples"].as_array().unwrap();
            let got = data
                .sample(
                    &sampling(0, want.len()),
                    CustomOptions::default(),
                    &format,
                    Some(tok),
                )
                .unwrap();
            assert_eq!(got.len(), want.len());
            for (g, w) in got.iter().zip(want) {
                let tag = format!("{name} {kwargs:?}");
                assert_eq!(text(g), w["prompt"].as_str().unwrap(), "{tag}");
                assert_eq!(
                    g.prompt_len as u64,
                    w["prompt_len"].as_u64().unwrap(),
                    "{tag}"
                );
                assert_eq!(
                    g.expected_output_len as u64,
                    w["output_len"].as_u64().unwrap(),
                    "{tag}"
                );
            }
        }
    }
}

#[test]
fn custom_without_template_or_tokenizer() {
    let data = Custom::load(&data("prompts.jsonl")).unwrap();
    let Some(tok) = tokenizer("qwen3") else {
        return;
    };
    let s = Sampling {
        shuffle: false,
        ..sampling(0, 8)
    };
    let opts = CustomOptions {
        output_len: Some(5),
    };
    let raw = data
        .sample(&s, opts, &ChatFormat::raw(), Some(tok))
        .unwrap();
    // 6 rows, oversampled to 8; the raw prompt is sent and counted.
    assert_eq!(raw.len(), 8);
    assert_eq!(text(&raw[0]), "What is the capital of India?");
    assert_eq!(
        raw[0].prompt_len,
        tok.encode("What is the capital of India?", true)
            .unwrap()
            .len()
    );
    assert!(raw.iter().all(|r| r.expected_output_len == 5));
    let none = data.sample(&s, opts, &ChatFormat::raw(), None).unwrap();
    assert!(none
        .iter()
        .all(|r| r.prompt_len == 1 && r.expected_output_len == 1));
}

#[test]
fn sonnet_lengths_match_python_for_both_tokenizers() {
    let doc = expected();
    let sonnet = Sonnet::load(&sonnet()).unwrap();
    for name in ["qwen3", "smollm2"] {
        let Some(tok) = tokenizer(name) else {
            continue;
        };
        let format = ChatFormat::of_tokenizer(tok, None, "sonnet").unwrap();
        for case in doc[name]["sonnet"].as_array().unwrap() {
            let u = |k: &str| case[k].as_u64().unwrap() as usize;
            let want = case["samples"].as_array().unwrap();
            for send_rendered in [false, true] {
                let opts = SonnetOptions {
                    input_len: u("input_len"),
                    output_len: u("output_len"),
                    prefix_len: u("prefix_len"),
                    send_rendered,
                };
                let got = sonnet
                    .sample(&sampling(u("seed") as u64, u("num")), opts, &format, tok)
                    .unwrap();
                assert_eq!(got.len(), want.len());
                let chars = if send_rendered {
                    "rendered_chars"
                } else {
                    "raw_chars"
                };
                for (i, (g, w)) in got.iter().zip(want).enumerate() {
                    let tag = format!("{name} seed {} sample {i}", u("seed"));
                    assert_eq!(
                        g.prompt_len as u64,
                        w["prompt_len"].as_u64().unwrap(),
                        "{tag}"
                    );
                    assert_eq!(
                        text(g).chars().count() as u64,
                        w[chars].as_u64().unwrap(),
                        "{tag}"
                    );
                    assert_eq!(g.expected_output_len, u("output_len"));
                    assert!(text(g).starts_with(if send_rendered {
                        "<|im_start|>"
                    } else {
                        "Pick as many lines as you can from these poem lines:\nFROM fairest"
                    }));
                }
            }
        }
    }
}

#[test]
fn sonnet_refuses_an_input_len_below_the_base_prompt() {
    let Some(tok) = tokenizer("qwen3") else {
        return;
    };
    let format = ChatFormat::of_tokenizer(tok, None, "sonnet").unwrap();
    let opts = SonnetOptions {
        input_len: 10,
        output_len: 1,
        prefix_len: 0,
        send_rendered: true,
    };
    let e = Sonnet::builtin()
        .sample(&sampling(0, 1), opts, &format, tok)
        .err()
        .unwrap()
        .to_string();
    assert_eq!(
        e,
        "--sonnet-input-len 10 must be higher than the base prompt length (20 tokens)"
    );
}
