//! The SPEED-Bench dataset (`--dataset-name speed_bench`, Python 0.33's `SpeedBench`): a
//! directory prepared by NeMo-Skills' `speed-bench/prepare.py` holding one
//! `<subset>.jsonl` per `--speed-bench-dataset-subset` (`qualitative`, `throughput_1k`, …),
//! rows `{"category": ..., "messages": [{"content": first prompt}, ...]}`; optionally only
//! `--speed-bench-category`; then the custom dataset's rules ([`super::custom`]): chat
//! template unless `--skip-chat-template`, `--chat-template-kwargs`, and
//! `--speed-bench-output-len` tokens out.
//!
//! As in Python the rows are shuffled with seed 0 whatever `--seed` says (the dataset is built
//! without it). `--speed-bench-max-input-len N` (a vllm-bench option of the seed) cuts each raw
//! prompt to its first N tokens before the template is applied.

use std::path::{Path, PathBuf};

use super::custom::Custom;
use super::error::DatasetError;
use super::question_file::{self, QuestionFormat};

/// The seed Python's `SpeedBench` always uses.
pub const SEED: u64 = 0;

const FORMAT: QuestionFormat = QuestionFormat {
    first_prompt: |row| {
        row.get("messages")?
            .as_array()?
            .first()?
            .get("content")?
            .as_str()
    },
    expected: "no \"messages\" list whose first message has a string \"content\" (the format \
               NeMo-Skills' speed-bench prepare.py writes)",
    category_flag: "--speed-bench-category",
};

/// The dataset's flags, as the configuration validated them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpeedBenchOptions {
    /// `--speed-bench-dataset-subset`: the `<subset>.jsonl` read (`qualitative`,
    /// `throughput_1k`, …).
    pub subset: String,
    /// `--speed-bench-output-len` (or `--output-len`).
    pub output_len: usize,
    /// `--speed-bench-category`: only the rows of this category.
    pub category: Option<String>,
    /// `--speed-bench-max-input-len`: each raw prompt cut to its first N tokens.
    pub max_input_len: Option<usize>,
}

/// `<dir>/<subset>.jsonl`, keeping the rows of `category`.
pub fn load(dir: &Path, subset: &str, category: Option<&str>) -> Result<Custom, DatasetError> {
    if !dir.is_dir() {
        return Err(DatasetError::file(
            dir,
            "is not a directory; SPEED-Bench is read from the directory NeMo-Skills' \
             speed-bench/prepare.py writes (one <subset>.jsonl per split)",
        ));
    }
    let file: PathBuf = dir.join(format!("{subset}.jsonl"));
    if !file.is_file() {
        return Err(DatasetError::file(
            &file,
            "not found; pass the prepared SPEED-Bench directory, or another \
             --speed-bench-dataset-subset",
        ));
    }
    question_file::load(&file, category, &FORMAT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_message_content_of_each_row() {
        let ok: serde_json::Value =
            serde_json::from_str(r#"{"messages": [{"role": "user", "content": "hi"}]}"#).unwrap();
        assert_eq!((FORMAT.first_prompt)(&ok), Some("hi"));
        let bad: serde_json::Value = serde_json::from_str(r#"{"messages": []}"#).unwrap();
        assert_eq!((FORMAT.first_prompt)(&bad), None);
    }

    #[test]
    fn a_missing_directory_or_split_says_what_to_pass() {
        let e = load(Path::new("/nonexistent/sb"), "qualitative", None)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("is not a directory"), "{e}");
        let dir = std::env::temp_dir().join(format!("vb-speed-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let e = load(&dir, "throughput_2k", None).err().unwrap().to_string();
        assert!(e.contains("throughput_2k.jsonl: not found"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
