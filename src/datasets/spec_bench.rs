//! The SpecBench dataset (`--dataset-name spec_bench`, Python 0.33's `SpecBench`): Spec-Bench's
//! `question.jsonl` (`{"category": ..., "turns": [first question, ...]}`), optionally only
//! `--spec-bench-category`; the first turn is the prompt and the rest is the custom dataset
//! ([`super::custom`]) with `--spec-bench-output-len` tokens out.
//!
//! Python quirks kept: the dataset is built without `--seed`, so rows are shuffled (and
//! oversampled) with seed 0 whatever `--seed` says. Python always renders the chat template
//! here; `--skip-chat-template` is honoured (an extension, for tokenizers without one).

use std::path::Path;

use serde_json::Value;

use super::custom::Custom;
use super::error::DatasetError;

/// The seed Python's `SpecBench` always uses (`BenchmarkDataset.DEFAULT_SEED`).
pub const SEED: u64 = 0;

/// Loads `path`, keeping the rows of `category` (all when `None`).
pub fn load(path: &Path, category: Option<&str>) -> Result<Custom, DatasetError> {
    let text = std::fs::read_to_string(path).map_err(|e| DatasetError::file(path, e))?;
    parse(path, &text, category)
}

/// Parses `question.jsonl` text (`path` names it in errors).
pub fn parse(path: &Path, text: &str, category: Option<&str>) -> Result<Custom, DatasetError> {
    let mut prompts = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = |why: String| DatasetError::line(path, i + 1, why);
        let row: Value = serde_json::from_str(line).map_err(|e| at(format!("not JSON: {e}")))?;
        if let Some(want) = category.filter(|c| !c.is_empty()) {
            if row.get("category").and_then(Value::as_str) != Some(want) {
                continue;
            }
        }
        let first = row
            .get("turns")
            .and_then(Value::as_array)
            .and_then(|t| t.first())
            .and_then(Value::as_str)
            .ok_or_else(|| {
                at(
                    "no \"turns\" list starting with a string (Spec-Bench's question.jsonl \
                    format)"
                        .into(),
                )
            })?;
        prompts.push((i + 1, first.to_owned()));
    }
    if prompts.is_empty() {
        let which = category.map_or(String::new(), |c| format!(" of --spec-bench-category {c}"));
        return Err(DatasetError::file(path, format!("has no question{which}")));
    }
    Ok(Custom::from_prompts(path, prompts))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"{"question_id": 1, "category": "writing", "turns": ["Write a poem.", "Shorter."]}
{"question_id": 2, "category": "math_reasoning", "turns": ["What is 2+2?"]}
{"question_id": 3, "category": "writing", "turns": ["Write a letter."]}
"#;

    #[test]
    fn keeps_first_turns_of_the_category() {
        let all = parse(Path::new("q.jsonl"), FILE, None).unwrap();
        assert_eq!(all.len(), 3);
        let writing = parse(Path::new("q.jsonl"), FILE, Some("writing")).unwrap();
        assert_eq!(writing.len(), 2);
        let e = parse(Path::new("q.jsonl"), FILE, Some("nope"))
            .err()
            .unwrap()
            .to_string();
        assert_eq!(
            e,
            "--dataset-path q.jsonl: has no question of --spec-bench-category nope"
        );
        let e = parse(Path::new("q.jsonl"), "{\"turns\": []}", None)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.starts_with("--dataset-path q.jsonl:1: no \"turns\""),
            "{e}"
        );
    }
}
