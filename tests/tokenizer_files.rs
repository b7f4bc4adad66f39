//! The real tokenizer files (Qwen3, SmolLM2) through our loader (its compact BPE model and
//! word cache) and through the `tokenizers` crate give the same tokens for real text.

use crate::util::{fetched, fixture, QWEN3, SHAREGPT};

/// Texts of the first ShareGPT conversations, and strings that stress the merge loop.
fn sample_texts() -> Vec<String> {
    let path = fixture(SHAREGPT);
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).expect("the ShareGPT sample")).unwrap();
    let mut texts: Vec<String> = json
        .as_array()
        .unwrap()
        .iter()
        .take(80)
        .flat_map(|c| c["conversations"].as_array().cloned().unwrap_or_default())
        .filter_map(|turn| turn["value"].as_str().map(str::to_owned))
        .collect();
    texts.extend([
        "-".repeat(700),
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa bbbbbbbbbbb".into(),
        "emoji 🤖🧪 and 中文字符 and ąčęėįšųūž \0 \t\r\n".into(),
        "x".repeat(300) + &"🙂".repeat(80),
    ]);
    texts
}

#[test]
fn real_tokenizers_encode_as_the_crate_does() {
    let texts = sample_texts();
    for name in ["qwen3", "smollm2"] {
        let dir = match name {
            "qwen3" => match fetched(QWEN3) {
                Some(dir) => dir,
                None => continue,
            },
            _ => crate::util::smollm2(),
        };
        let path = dir.join("tokenizer.json");
        let ours = vllm_bench::tokenizer::Tokenizer::from_hf_file(name, &path).unwrap();
        let crates = tokenizers::Tokenizer::from_file(&path).unwrap();
        for text in &texts {
            let want = crates.encode(text.as_str(), false).unwrap();
            // Twice: the second encode takes the word cache.
            for _ in 0..2 {
                assert_eq!(
                    ours.encode(text, false).unwrap(),
                    want.get_ids(),
                    "{name}: {text:?}"
                );
            }
        }
    }
}
