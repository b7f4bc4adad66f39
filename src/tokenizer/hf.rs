//! Tier 1: a Hugging Face `tokenizer.json`, with Python `transformers` semantics.
//!
//! The `tokenizers` crate does the encoding (the same Rust code Python's fast tokenizers
//! run), so ids match Python and llama.cpp exactly (see the fixtures' README). What this
//! module adds is the part `transformers` keeps outside `tokenizer.json`: the special tokens
//! named in `tokenizer_config.json` (`all_special_ids`), a config-only `add_bos_token`, and
//! `clean_up_tokenization_spaces` on decode. Truncation and padding stored in the json are
//! switched off, as `transformers` does for a plain `encode`.

use std::path::Path;

use super::{Result, TokenizerError};
use tokenizers::PostProcessor;

use super::hf_json::Loaded;
use super::special::SpecialTokensConfig;

/// Runs `$body` with `$t` bound to the loaded tokenizer, whichever model type it has (the
/// two are different `TokenizerImpl` types with the same methods).
macro_rules! with_loaded {
    ($loaded:expr, $t:ident => $body:expr) => {
        match $loaded {
            Loaded::Bpe($t) => $body,
            Loaded::Other($t) => $body,
        }
    };
}

/// A loaded `tokenizer.json` plus its sibling config.
pub struct HfTokenizer {
    inner: Loaded,
    vocab_size: usize,
    all_special_ids: Vec<u32>,
    added_ids: Vec<u32>,
    /// Tokens the config (not the json's post-processor) asks `encode(.., true)` to add.
    extra_bos: Option<u32>,
    extra_eos: Option<u32>,
    post_processor_added: usize,
    clean_up_spaces: bool,
}

impl HfTokenizer {
    /// Loads `path` (a `tokenizer.json`) and the config files in its directory.
    pub fn from_file(path: &Path) -> Result<Self> {
        let mut inner = super::hf_json::load(path)?;
        with_loaded!(&mut inner, t => {
            t.with_padding(None);
            t.with_truncation(None).map(drop)
        })
        .map_err(|e| TokenizerError::Truncation {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
        let dir = path.parent().unwrap_or_else(|| Path::new("."));
        let config = SpecialTokensConfig::from_dir(dir)?;
        Ok(Self::new(inner, &config))
    }

    fn new(inner: Loaded, config: &SpecialTokensConfig) -> Self {
        let token_to_id = |token: &str| with_loaded!(&inner, t => t.token_to_id(token));
        let added = with_loaded!(&inner, t => t.get_added_tokens_decoder());
        let mut added_ids: Vec<u32> = added.keys().copied().collect();
        added_ids.sort_unstable();
        let all_special_ids = if config.missing {
            // No config: the json's own special flags are all we know.
            added_ids
                .iter()
                .copied()
                .filter(|id| added[id].special)
                .collect()
        } else {
            config
                .all_special_tokens()
                .into_iter()
                .filter_map(token_to_id)
                .collect()
        };
        let post_processor_added = with_loaded!(&inner, t => t.get_post_processor())
            .map(|pp| pp.added_tokens(false))
            .unwrap_or(0);
        // A config-only add_bos_token/add_eos_token applies when the json's post-processor
        // adds nothing itself (otherwise the json already encodes the rule).
        let config_token = |flag: Option<bool>, attr: &str| {
            (post_processor_added == 0 && flag == Some(true))
                .then(|| config.named(attr).and_then(token_to_id))
                .flatten()
        };
        let extra_bos = config_token(config.add_bos_token, "bos_token");
        let extra_eos = config_token(config.add_eos_token, "eos_token");
        let vocab_size = with_loaded!(&inner, t => t.get_vocab_size(false));
        Self {
            vocab_size,
            inner,
            all_special_ids,
            added_ids,
            extra_bos,
            extra_eos,
            post_processor_added,
            clean_up_spaces: config.clean_up_tokenization_spaces,
        }
    }

    /// Token ids of `text`.
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>> {
        let enc = with_loaded!(&self.inner, t => t.encode_fast(text, add_special_tokens))
            .map_err(|e| TokenizerError::Encode(e.to_string()))?;
        let ids = enc.get_ids();
        if !add_special_tokens || (self.extra_bos.is_none() && self.extra_eos.is_none()) {
            return Ok(ids.to_vec());
        }
        let mut out = Vec::with_capacity(ids.len() + 2);
        out.extend(self.extra_bos);
        out.extend_from_slice(ids);
        out.extend(self.extra_eos);
        Ok(out)
    }

    /// Ids of `text` (no special tokens) with their byte offsets.
    pub fn encode_with_offsets(&self, text: &str) -> Result<super::TokenSpans> {
        let enc = with_loaded!(&self.inner, t => t.encode(text, false))
            .map_err(|e| TokenizerError::Encode(e.to_string()))?;
        Ok(super::TokenSpans {
            ids: enc.get_ids().to_vec(),
            offsets: enc.get_offsets().to_vec(),
        })
    }

    /// Number of tokens of `text` without special tokens.
    pub fn count(&self, text: &str) -> Result<usize> {
        with_loaded!(&self.inner, t => t.encode_fast(text, false))
            .map(|e| e.len())
            .map_err(|e| TokenizerError::Encode(e.to_string()))
    }

    /// Text of `ids` (unknown ids are skipped, as the Rust and Python fast tokenizers do).
    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> Result<String> {
        let text = with_loaded!(&self.inner, t => t.decode(ids, skip_special_tokens))
            .map_err(|e| TokenizerError::Decode(e.to_string()))?;
        Ok(if self.clean_up_spaces {
            clean_up_tokenization(&text)
        } else {
            text
        })
    }

    /// Base vocabulary size (without added tokens).
    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    /// Python's `all_special_ids`.
    pub fn all_special_ids(&self) -> &[u32] {
        &self.all_special_ids
    }

    /// Ids of every added token of the json, sorted.
    pub fn added_token_ids(&self) -> &[u32] {
        &self.added_ids
    }

    /// Python's `num_special_tokens_to_add()`.
    pub fn num_special_tokens_to_add(&self) -> usize {
        self.post_processor_added
            + usize::from(self.extra_bos.is_some())
            + usize::from(self.extra_eos.is_some())
    }
}

/// `transformers`' `clean_up_tokenization`: drop the space before punctuation and common
/// English contractions.
fn clean_up_tokenization(text: &str) -> String {
    const RULES: [(&str, &str); 10] = [
        (" .", "."),
        (" ?", "?"),
        (" !", "!"),
        (" ,", ","),
        (" ' ", "'"),
        (" n't", "n't"),
        (" 'm", "'m"),
        (" 's", "'s"),
        (" 've", "'ve"),
        (" 're", "'re"),
    ];
    RULES
        .iter()
        .fold(text.to_owned(), |acc, (from, to)| acc.replace(from, to))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_up_matches_transformers_rules() {
        assert_eq!(
            clean_up_tokenization("Hi , I 'm here . Do n't !"),
            "Hi, I'm here. Don't!"
        );
    }
}
