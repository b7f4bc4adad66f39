//! The one error type of the file datasets: each variant renders as one line that says what
//! is wrong, where (file and entry, line or key) and, where there is one, how to fix it.

use std::path::PathBuf;

/// Why a dataset could not be built.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    /// The file cannot be read or parsed as a whole (the reason carries the line and column).
    #[error("--dataset-path {}: {why}", path.display())]
    File { path: PathBuf, why: String },
    /// One entry of the file is unusable.
    #[error("--dataset-path {}: entry {index}: {why}", path.display())]
    Entry {
        path: PathBuf,
        /// 0-based position of the entry in the file (for line formats, the line is `index + 1`).
        index: usize,
        why: String,
    },
    /// One line of a line-based file (JSONL, CSV) is unusable.
    #[error("--dataset-path {}:{line}: {why}", path.display())]
    Line {
        path: PathBuf,
        /// 1-based.
        line: usize,
        why: String,
    },
    /// The dataset cannot produce what was asked for (no valid samples, a needed file missing).
    #[error("{0}")]
    Unusable(String),
    /// The tokenizer failed on a prompt (a server-side tokenizer that is unreachable).
    #[error("tokenizing the dataset failed: {0:#}")]
    Tokenize(crate::tokenizer::TokenizerError),
}

impl DatasetError {
    pub(crate) fn file(path: impl Into<PathBuf>, why: impl std::fmt::Display) -> Self {
        Self::File {
            path: path.into(),
            why: why.to_string(),
        }
    }

    pub(crate) fn line(path: impl Into<PathBuf>, line: usize, why: impl Into<String>) -> Self {
        Self::Line {
            path: path.into(),
            line,
            why: why.into(),
        }
    }

    pub(crate) fn entry(path: impl Into<PathBuf>, index: usize, why: impl Into<String>) -> Self {
        Self::Entry {
            path: path.into(),
            index,
            why: why.into(),
        }
    }
}
