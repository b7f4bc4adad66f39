//! ShareGPT against Python: `tests/data/sharegpt/expected.json` is what vllm 0.33's
//! `ShareGPTDataset` selects from the 300-conversation sample (tests/fixtures) with the Qwen3
//! tokenizer (written by `tests/data/sharegpt/make_expected.py`, CPython + `tokenizers`):
//! for two seeds, with and without a fixed output length, unshuffled, and past the valid
//! count with and without oversampling. Each case checks the selected conversations, their
//! order, prompt and output lengths and request ids.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::Value;
use vllm_bench::datasets::sharegpt::{ShareGpt, ShareGptOptions};
use vllm_bench::datasets::{DatasetError, Prompt, SampleRequest, Sampling};
use vllm_bench::tokenizer::Tokenizer;

use crate::util::{fixture, SHAREGPT};

fn data_file() -> PathBuf {
    fixture(SHAREGPT)
}

/// The Qwen3 tokenizer the expectations were made with; `None` (the test returns) when it
/// has not been fetched (scripts/fetch-fixtures.sh).
fn qwen3() -> Option<&'static Tokenizer> {
    super::qwen3()
}

fn loaded() -> &'static ShareGpt {
    static DATA: OnceLock<ShareGpt> = OnceLock::new();
    DATA.get_or_init(|| ShareGpt::load(&data_file()).unwrap())
}

/// The raw file, to compare selected prompts with the conversations Python picked.
fn raw() -> &'static Vec<Value> {
    static RAW: OnceLock<Vec<Value>> = OnceLock::new();
    RAW.get_or_init(|| {
        serde_json::from_str(&std::fs::read_to_string(data_file()).unwrap()).unwrap()
    })
}

fn expected() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/sharegpt/expected.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn sampling(case: &Value, num_prompts: usize) -> Sampling {
    Sampling {
        num_requests: num_prompts,
        seed: case["seed"].as_u64().unwrap(),
        shuffle: case["shuffle"].as_bool().unwrap(),
        oversample: case["oversample"].as_bool().unwrap(),
        request_id_prefix: String::new(),
    }
}

fn text(r: &SampleRequest) -> &str {
    match &r.prompt {
        Prompt::Text(t) => t,
        _ => panic!("sharegpt sends text"),
    }
}

fn check_case(case: &Value, qwen3: &Tokenizer) {
    let num = case["num_prompts"].as_u64().unwrap() as usize;
    let opts = ShareGptOptions {
        output_len: case["output_len"].as_u64().map(|n| n as usize),
    };
    let got = loaded().sample(&sampling(case, num), opts, qwen3).unwrap();
    let want = case["samples"].as_array().unwrap();
    let tag = format!(
        "seed {} output_len {:?} n {num} shuffle {} oversample {}",
        case["seed"], opts.output_len, case["shuffle"], case["oversample"]
    );
    assert_eq!(got.len(), want.len(), "{tag}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let index = w[0].as_u64().unwrap() as usize;
        let prompt = raw()[index]["conversations"][0]["value"].as_str().unwrap();
        assert_eq!(text(g), prompt, "{tag}: sample {i} is conversation {index}");
        assert_eq!(
            g.prompt_len as u64,
            w[1].as_u64().unwrap(),
            "{tag}: sample {i}"
        );
        assert_eq!(
            g.expected_output_len as u64,
            w[2].as_u64().unwrap(),
            "{tag}: sample {i}"
        );
        assert_eq!(
            g.request_id.as_deref(),
            Some(i.to_string().as_str()),
            "{tag}"
        );
    }
}

#[test]
fn selection_matches_python_for_two_seeds_with_and_without_output_len() {
    let Some(qwen3) = qwen3() else { return };
    let doc = expected();
    let cases: Vec<_> = doc["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c.get("valid").is_none())
        .collect();
    assert_eq!(cases.len(), 5);
    for case in cases {
        check_case(case, qwen3);
    }
}

#[test]
fn past_the_valid_count_oversampling_matches_python() {
    let Some(qwen3) = qwen3() else { return };
    let doc = expected();
    let cases: Vec<_> = doc["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c.get("valid").is_some())
        .collect();
    assert_eq!(cases.len(), 4);
    for case in cases {
        let valid = case["valid"].as_u64().unwrap() as usize;
        let n = case["samples"].as_array().unwrap().len();
        if case["oversample"].as_bool().unwrap() {
            assert!(n > valid, "the fixture oversamples");
        } else {
            assert_eq!(n, valid);
        }
        check_case(case, qwen3);
    }
}

#[test]
fn request_ids_carry_the_prefix() {
    let Some(qwen3) = qwen3() else { return };
    let s = Sampling {
        num_requests: 3,
        seed: 0,
        shuffle: true,
        oversample: true,
        request_id_prefix: "bench-".into(),
    };
    let got = loaded()
        .sample(&s, ShareGptOptions::default(), qwen3)
        .unwrap();
    let ids: Vec<_> = got.iter().map(|r| r.request_id.clone().unwrap()).collect();
    assert_eq!(ids, ["bench-0", "bench-1", "bench-2"]);
}

fn write(dir: &Path, name: &str, body: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

#[test]
fn bad_files_are_one_line_naming_the_file_and_the_entry() {
    let Some(qwen3) = qwen3() else { return };
    let dir = std::env::temp_dir().join(format!("vb-sharegpt-{}", std::process::id()));
    let missing = dir.join("nope.json");
    let e = ShareGpt::load(&missing).err().unwrap().to_string();
    assert!(
        e.starts_with(&format!("--dataset-path {}: ", missing.display())),
        "{e}"
    );
    let broken = write(&dir, "broken.json", "[\n{\"conversations\": [\n}\n]");
    let e = ShareGpt::load(&broken).err().unwrap().to_string();
    assert!(e.contains("broken.json: not a ShareGPT JSON list"), "{e}");
    assert!(e.contains("line 3"), "{e}");
    let no_value = write(
        &dir,
        "novalue.json",
        r#"[{"conversations": [{"value": "hello there my friend"}, {"value": "hi, how are you"}]},
            {"conversations": [{"from": "human"}, {"value": "x"}]}]"#,
    );
    let s = Sampling {
        num_requests: 2,
        seed: 0,
        shuffle: false,
        oversample: false,
        request_id_prefix: String::new(),
    };
    let e = ShareGpt::load(&no_value)
        .unwrap()
        .sample(&s, ShareGptOptions::default(), qwen3)
        .err()
        .unwrap();
    assert!(matches!(e, DatasetError::Entry { index: 1, .. }), "{e}");
    assert!(e
        .to_string()
        .ends_with("entry 1: conversation turn 0 has no string \"value\""));
    let _ = std::fs::remove_dir_all(&dir);
}
