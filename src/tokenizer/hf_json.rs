//! Parsing a `tokenizer.json` into a `tokenizers::Tokenizer` at a low peak memory.
//!
//! `Tokenizer::from_bytes` deserializes the `model` through `ModelWrapper`, whose untagged
//! `Deserialize` first buffers the whole model (vocabulary and merges) in serde's `Content`,
//! then copies it into a `serde_json::Value` (an `IndexMap` per object here, as the crate
//! enables `preserve_order`), and only then builds the model from that `Value`: several
//! transient copies of a 151k-entry vocabulary, which made loading Qwen3's json peak at
//! 180 MB although the loaded tokenizer needs a fraction of it.
//!
//! Every tokenizer this benchmark meets in practice has a BPE model, so the json is first
//! parsed as a `TokenizerImpl` whose model type is BPE itself: the crate's own `Tokenizer`
//! deserializer (added tokens, normalizer, pre-tokenizer, …) runs unchanged, only the model
//! is read straight from the json, no `Value` in between. The tokenization is therefore the
//! same. Any other model (WordPiece, Unigram, WordLevel), or an invalid file, takes the
//! crate's generic path, which also gives the error message.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer};
use tokenizers::models::bpe::{BpeTrainer, BPE};
use tokenizers::{
    DecoderWrapper, Model, ModelWrapper, NormalizerWrapper, PostProcessorWrapper,
    PreTokenizerWrapper, Token, Tokenizer, TokenizerImpl,
};

/// Parses `json` (the bytes of a `tokenizer.json`); a BPE model gets a per-thread word cache
/// of [`WORD_CACHE_CAPACITY`] entries.
pub(super) fn parse(json: &[u8]) -> tokenizers::Result<Tokenizer> {
    // Not a BPE model (or not valid): the crate's generic path decides and explains.
    parse_bpe(json).or_else(|_| Tokenizer::from_bytes(json))
}

/// Parses `json` if its model is BPE, reading the model straight into its final form.
fn parse_bpe(json: &[u8]) -> serde_json::Result<Tokenizer> {
    type BpeTokenizer = TokenizerImpl<
        CachedBpe,
        NormalizerWrapper,
        PreTokenizerWrapper,
        PostProcessorWrapper,
        DecoderWrapper,
    >;
    let mut de = serde_json::Deserializer::from_slice(json);
    let tokenizer = BpeTokenizer::deserialize(&mut de)?;
    de.end()?;
    Ok(tokenizer.into())
}

/// Words (pre-tokens) each thread's BPE cache may hold; the crate's default is 10,000.
///
/// The random dataset's text is the whole vocabulary walked in order, so it has about one
/// distinct word per vocabulary entry (~150k for Qwen3); with the default most lookups miss
/// and re-run the merges, which then dominate generation time. Entries are added only for
/// words a thread actually meets (~100 bytes each).
pub(super) const WORD_CACHE_CAPACITY: usize = 262_144;

/// A BPE model that is given its word-cache capacity as it is deserialized, so the model never
/// has to be cloned (the crate offers no `&mut` access to a tokenizer's model) to resize it.
/// It exists only while the json is parsed; the tokenizer then holds the plain [`BPE`].
struct CachedBpe(BPE);

impl<'de> Deserialize<'de> for CachedBpe {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut bpe = BPE::deserialize(deserializer)?;
        bpe.resize_cache(WORD_CACHE_CAPACITY);
        Ok(Self(bpe))
    }
}

impl From<CachedBpe> for ModelWrapper {
    fn from(model: CachedBpe) -> Self {
        ModelWrapper::BPE(model.0)
    }
}

/// Plain delegation: the `Tokenizer` deserializer asks the model for ids of the added tokens.
impl Model for CachedBpe {
    type Trainer = BpeTrainer;

    fn tokenize(&self, sequence: &str) -> tokenizers::Result<Vec<Token>> {
        self.0.tokenize(sequence)
    }

    fn token_to_id(&self, token: &str) -> Option<u32> {
        self.0.token_to_id(token)
    }

    fn id_to_token(&self, id: u32) -> Option<String> {
        self.0.id_to_token(id)
    }

    fn get_vocab(&self) -> HashMap<String, u32> {
        self.0.get_vocab()
    }

    fn get_vocab_size(&self) -> usize {
        self.0.get_vocab_size()
    }

    fn save(&self, folder: &Path, prefix: Option<&str>) -> tokenizers::Result<Vec<PathBuf>> {
        self.0.save(folder, prefix)
    }

    fn get_trainer(&self) -> BpeTrainer {
        self.0.get_trainer()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small BPE tokenizer.json with a normalizer and added tokens, one of them also in
    /// the vocabulary and one not (its id comes from the model's size as the json is read).
    const BPE_JSON: &str = r#"{
      "version": "1.0", "truncation": null, "padding": null,
      "added_tokens": [
        {"id": 0, "content": "<unk>", "single_word": false, "lstrip": false, "rstrip": false,
         "normalized": false, "special": true},
        {"id": 6, "content": "<|end|>", "single_word": false, "lstrip": false, "rstrip": false,
         "normalized": false, "special": true}
      ],
      "normalizer": {"type": "Lowercase"},
      "pre_tokenizer": {"type": "Whitespace"},
      "post_processor": null, "decoder": null,
      "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>",
        "continuing_subword_prefix": null, "end_of_word_suffix": null, "fuse_unk": false,
        "byte_fallback": false, "ignore_merges": false,
        "vocab": {"<unk>": 0, "a": 1, "b": 2, "c": 3, "ab": 4, "abc": 5},
        "merges": [["a", "b"], ["ab", "c"]]}
    }"#;

    fn ids(tokenizer: &Tokenizer, text: &str) -> Vec<u32> {
        tokenizer.encode(text, false).unwrap().get_ids().to_vec()
    }

    #[test]
    fn bpe_json_loads_directly_and_exactly_as_the_crate_loads_it() {
        let ours = parse_bpe(BPE_JSON.as_bytes()).unwrap();
        let crates = Tokenizer::from_bytes(BPE_JSON).unwrap();
        assert!(matches!(ours.get_model(), ModelWrapper::BPE(_)));
        // Same model, added tokens, normalizer, … (the serialization holds all of them).
        assert_eq!(
            serde_json::to_string(&ours).unwrap(),
            serde_json::to_string(&crates).unwrap()
        );
        let text = "ABC ab<|end|>c ba x";
        assert_eq!(ids(&ours, text), vec![5, 4, 6, 3, 2, 1, 0]);
        assert_eq!(ids(&ours, text), ids(&crates, text));
    }

    #[test]
    fn legacy_string_merges_load_too() {
        let legacy = BPE_JSON.replace(r#"[["a", "b"], ["ab", "c"]]"#, r#"["a b", "ab c"]"#);
        let ours = parse_bpe(legacy.as_bytes()).unwrap();
        assert_eq!(ids(&ours, "abc ab"), vec![5, 4]);
    }

    #[test]
    fn other_models_take_the_generic_path() {
        let json = r#"{"version": "1.0", "truncation": null, "padding": null,
          "added_tokens": [], "normalizer": null, "pre_tokenizer": {"type": "Whitespace"},
          "post_processor": null, "decoder": null,
          "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "hi": 1, "there": 2},
                    "unk_token": "[UNK]"}}"#;
        assert!(parse_bpe(json.as_bytes()).is_err());
        let tokenizer = parse(json.as_bytes()).unwrap();
        assert!(matches!(tokenizer.get_model(), ModelWrapper::WordLevel(_)));
        assert_eq!(ids(&tokenizer, "hi there you"), vec![1, 2, 0]);
    }

    #[test]
    fn invalid_json_is_an_error() {
        assert!(parse(b"{\"version\": \"1.0\"").is_err());
        // A merge whose parts are not in the vocabulary.
        let bad = BPE_JSON.replace(r#"["ab", "c"]"#, r#"["ab", "z"]"#);
        assert!(parse(bad.as_bytes()).is_err());
        // Trailing garbage after a valid tokenizer.
        assert!(parse(format!("{BPE_JSON} x").as_bytes()).is_err());
    }
}
