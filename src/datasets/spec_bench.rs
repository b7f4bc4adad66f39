//! The SpecBench dataset (`--dataset-name spec_bench`, Python 0.33's `SpecBench`): Spec-Bench's
//! `question.jsonl` (`{"category": ..., "turns": [first question, ...]}`), optionally only
//! `--spec-bench-category`; the first turn is the prompt and the rest is the custom dataset
//! ([`super::custom`]) with `--spec-bench-output-len` tokens out.
//!
//! Python quirks kept: the dataset is built without `--seed`, so rows are shuffled (and
//! oversampled) with seed 0 whatever `--seed` says. Python always renders the chat template
//! here; `--skip-chat-template` is honoured (an extension, for tokenizers without one).

use std::path::Path;

use super::custom::Custom;
use super::error::DatasetError;
use super::question_file::{self, QuestionFormat};

/// The seed Python's `SpecBench` always uses (`BenchmarkDataset.DEFAULT_SEED`).
pub const SEED: u64 = 0;

const FORMAT: QuestionFormat = QuestionFormat {
    first_prompt: |row| row.get("turns")?.as_array()?.first()?.as_str(),
    expected: "no \"turns\" list starting with a string (Spec-Bench's question.jsonl format)",
    category_flag: "--spec-bench-category",
};

/// Loads `path`, keeping the rows of `category` (all when `None`).
pub fn load(path: &Path, category: Option<&str>) -> Result<Custom, DatasetError> {
    question_file::load(path, category, &FORMAT)
}

/// Parses `question.jsonl` text (`path` names it in errors).
pub fn parse(path: &Path, text: &str, category: Option<&str>) -> Result<Custom, DatasetError> {
    question_file::parse(path, text, category, &FORMAT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

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

    #[test]
    fn a_value_that_is_not_a_row_is_refused() {
        let v: Value = serde_json::from_str("[1]").unwrap();
        assert_eq!((FORMAT.first_prompt)(&v), None);
    }
}
