//! The tokenizer the mock counts prompt tokens with (`usage.prompt_tokens`) and serves at
//! `/tokenize` and `/detokenize`: its [`toy_tokenizer`](super::toy_tokenizer), or the
//! client's own [`Tokenizer`] ([`MockConfig::tokenizer`](super::MockConfig::tokenizer):
//! `--tokenizer` of `mock-llm-server`, and the run's `--tokenizer` when the mock is embedded).
//!
//! Why the client's: a run's input tokens are the server's `usage.prompt_tokens`, and the
//! random dataset re-aligns its prompts when the server's `/tokenize` counts them differently
//! from the client. With one tokenizer on both sides the totals are the ones the client
//! planned and no prompt is cut.
//!
//! Counting never adds special tokens and never applies a chat template: vLLM does both (a
//! chat's `prompt_tokens` includes the template's tokens), but the client plans prompt
//! lengths from the bare text, and a mock whose totals differ from the plan would hide the
//! client's own counting bugs behind an expected difference.
//!
//! Real tokenizers are not free (a millisecond or more for a thousand-token prompt), and the
//! embedded mock shares the machine with the client: counts are cached by the text's hash,
//! so a text seen before (counted ahead of the run by `MockServer::count_ahead`, or a
//! warm-up, the ready check, a conversation's history) is not counted again on the request
//! path. The cache is bounded ([`MAX_CACHED`] texts; it starts over when full).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::hash::fnv64;
use super::toy_tokenizer;
use crate::tokenizer::Tokenizer;

/// Texts whose counts are kept at most (~5 MB): the prompts of a large run, counted ahead.
const MAX_CACHED: usize = 1 << 18;

/// See the module doc.
#[derive(Debug)]
pub struct PromptTokenizer {
    /// `None`: the toy tokenizer.
    real: Option<Arc<Tokenizer>>,
    /// Token count by FNV-1a hash of the text (real tokenizer only; toy counts are cheaper
    /// than a lookup).
    counts: Mutex<HashMap<u64, u32>>,
}

/// A `/tokenize` or `/detokenize` request the tokenizer cannot answer (a 400).
#[derive(Debug, thiserror::Error)]
pub enum TokenizeError {
    /// A token id outside the tokenizer's `u32` range.
    #[error("token id {0} is out of range (ids are 0 to 4294967295)")]
    IdOutOfRange(i64),
    /// The real tokenizer refused the text or the ids.
    #[error("{0}")]
    Tokenizer(String),
}

impl PromptTokenizer {
    /// `real`, or the toy tokenizer when `None`.
    pub fn new(real: Option<Arc<Tokenizer>>) -> Self {
        PromptTokenizer {
            real,
            counts: Mutex::new(HashMap::new()),
        }
    }

    /// Whether this is the toy tokenizer.
    pub fn is_toy(&self) -> bool {
        self.real.is_none()
    }

    /// Tokens of `text` without special tokens: whitespace-separated words for the toy
    /// tokenizer, the real tokenizer's count otherwise.
    pub fn count(&self, text: &str) -> u64 {
        let Some(real) = &self.real else {
            return text.split_whitespace().count() as u64;
        };
        let key = fnv64(text.as_bytes());
        let lock = || self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(&n) = lock().get(&key) {
            return u64::from(n);
        }
        // Counted outside the lock: other workers keep counting meanwhile.
        let n = u32::try_from(real.count_tokens(text)).unwrap_or(u32::MAX);
        let mut counts = lock();
        if counts.len() >= MAX_CACHED {
            counts.clear();
        }
        counts.insert(key, n);
        u64::from(n)
    }

    /// `/tokenize`: the ids of `text` (`add_special`: the real tokenizer's BOS/EOS, as vLLM's
    /// `add_special_tokens`; the toy tokenizer has none).
    pub fn encode(&self, text: &str, add_special: bool) -> Result<Vec<u32>, TokenizeError> {
        match &self.real {
            None => Ok(toy_tokenizer::tokenize(text).collect()),
            Some(real) => real
                .encode(text, add_special)
                .map_err(|e| TokenizeError::Tokenizer(format!("cannot tokenize: {e:#}"))),
        }
    }

    /// `/detokenize`: the text of `ids` (special tokens kept, as vLLM's `/detokenize`).
    pub fn decode(&self, ids: &[i64]) -> Result<String, TokenizeError> {
        let Some(real) = &self.real else {
            return Ok(toy_tokenizer::detokenize(ids));
        };
        let ids = ids
            .iter()
            .map(|&id| u32::try_from(id).map_err(|_| TokenizeError::IdOutOfRange(id)))
            .collect::<Result<Vec<u32>, _>>()?;
        real.decode(&ids, false)
            .map_err(|e| TokenizeError::Tokenizer(format!("cannot detokenize: {e:#}")))
    }
}

impl Default for PromptTokenizer {
    /// The toy tokenizer.
    fn default() -> Self {
        PromptTokenizer::new(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toy_counts_words_and_round_trips() {
        let t = PromptTokenizer::default();
        assert_eq!(t.count("a  b\nc"), 3);
        assert_eq!(t.count(""), 0);
        let ids = t.encode("the fox", true).unwrap();
        assert_eq!(ids.len(), 2);
        let ids: Vec<i64> = ids.into_iter().map(i64::from).collect();
        assert_eq!(t.decode(&ids).unwrap(), "the fox");
    }
}
