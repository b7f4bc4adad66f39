//! Loading a `tokenizer.json` into a `tokenizers::Tokenizer` at a low peak memory.
//!
//! `Tokenizer::from_bytes` deserializes the `model` through `ModelWrapper`, whose untagged
//! `Deserialize` first buffers the whole model (vocabulary and merges) in serde's `Content`,
//! then copies it into a `serde_json::Value` (an `IndexMap` per object here, as this crate
//! enables `preserve_order`), and only then builds the model from that `Value`; the BPE
//! deserializer then buffers the merges once more to tell pairs from legacy lines. Loading
//! Qwen3's 11 MB json peaked at 180 MB although the loaded tokenizer needs about 30.
//!
//! Every tokenizer this benchmark meets in practice has a BPE model, so the file is first
//! streamed (never held whole in memory) into a `TokenizerImpl` whose model type is our
//! [`WordCachedBpe`]: the crate's own `Tokenizer` deserializer (added tokens and their ids,
//! normalizer, pre-tokenizer, post-processor, decoder) runs unchanged, and only the model's
//! fields are read here, into our [`super::compact_bpe::CompactBpe`] (the crate's tokens in
//! a third of its memory) or, for options it does not build, the crate's `BpeBuilder`.
//! Any other model (WordPiece, Unigram, WordLevel), or an invalid file, takes the
//! crate's generic path, which also gives the error message.

use std::borrow::Cow;
use std::fmt;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use super::{Result, TokenizerError};
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Unexpected, Visitor};
use serde::{Deserialize, Deserializer};
use tokenizers::models::bpe::{Merges, Vocab};
use tokenizers::{
    DecoderWrapper, NormalizerWrapper, PostProcessorWrapper, PreTokenizerWrapper, Tokenizer,
    TokenizerImpl,
};

use super::compact_bpe::{BpeOptions, CompactBpe};
use super::word_cache::WordCachedBpe;

/// A tokenizer with a BPE model behind our compact word cache.
pub(super) type BpeTokenizer = TokenizerImpl<
    WordCachedBpe,
    NormalizerWrapper,
    PreTokenizerWrapper,
    PostProcessorWrapper,
    DecoderWrapper,
>;

/// A loaded `tokenizer.json`: BPE (every tokenizer met in practice) or any other model.
pub(super) enum Loaded {
    Bpe(BpeTokenizer),
    Other(Tokenizer),
}

/// Loads the `tokenizer.json` at `path`; a BPE model gets the compact per-thread word cache
/// of [`super::word_cache`].
pub(super) fn load(path: &Path) -> Result<Loaded> {
    let cannot_read = |source| TokenizerError::ReadTokenizerFile {
        path: path.to_owned(),
        source,
    };
    let file = File::open(path).map_err(cannot_read)?;
    if let Ok(tokenizer) = parse_bpe(BufReader::with_capacity(1 << 16, file)) {
        return Ok(Loaded::Bpe(tokenizer));
    }
    // Not a BPE model (or not valid): the crate's generic path decides and explains.
    let bytes = std::fs::read(path).map_err(cannot_read)?;
    Tokenizer::from_bytes(&bytes)
        .map(Loaded::Other)
        .map_err(|e| TokenizerError::InvalidTokenizerJson {
            path: path.to_owned(),
            reason: e.to_string(),
        })
}

/// Parses a `tokenizer.json` read from `json` if its model is BPE.
fn parse_bpe(json: impl Read) -> serde_json::Result<BpeTokenizer> {
    let mut de = serde_json::Deserializer::from_reader(json);
    let tokenizer = BpeTokenizer::deserialize(&mut de)?;
    de.end()?;
    Ok(tokenizer)
}

/// Read by [`BpeVisitor`] straight from the json.
impl<'de> Deserialize<'de> for WordCachedBpe {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(BpeVisitor)
    }
}

/// The fields the crate's BPE deserializer reads, with the same meaning, except that each
/// merge goes straight into the list: the crate's untagged pair-or-line choice first
/// buffers the whole list (151k entries for Qwen3) in serde's `Content`.
struct BpeVisitor;

impl<'de> Visitor<'de> for BpeVisitor {
    type Value = WordCachedBpe;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a BPE model")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<WordCachedBpe, A::Error> {
        let mut options = BpeOptions::default();
        let mut vocab: Option<Vocab> = None;
        let mut merges: Option<Merges> = None;
        while let Some(key) = map.next_key::<Cow<str>>()? {
            match key.as_ref() {
                "type" => {
                    let kind: Cow<str> = map.next_value()?;
                    if kind != "BPE" {
                        return Err(de::Error::invalid_value(Unexpected::Str(&kind), &"BPE"));
                    }
                }
                "dropout" => options.dropout = map.next_value()?,
                "unk_token" => options.unk_token = map.next_value()?,
                "continuing_subword_prefix" => {
                    options.continuing_subword_prefix = map.next_value()?;
                }
                "end_of_word_suffix" => options.end_of_word_suffix = map.next_value()?,
                "fuse_unk" => options.fuse_unk = map.next_value::<Option<bool>>()?.unwrap_or(false),
                "byte_fallback" => {
                    options.byte_fallback = map.next_value::<Option<bool>>()?.unwrap_or(false);
                }
                "ignore_merges" => {
                    options.ignore_merges = map.next_value::<Option<bool>>()?.unwrap_or(false);
                }
                "vocab" => vocab = Some(map.next_value()?),
                // A BPE has about one merge per vocabulary entry, and the json lists the
                // vocabulary first: sizing the list from it spares the doubling growth
                // (a 262k-entry buffer and a copy for Qwen3's 151k merges).
                "merges" => {
                    let expected = vocab.as_ref().map_or(0, |v| v.len());
                    merges = Some(map.next_value_seed(MergeList { expected })?);
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let (Some(vocab), Some(merges)) = (vocab, merges) else {
            return Err(de::Error::custom("Missing vocab/merges"));
        };
        if let Some(compact) = CompactBpe::build(&vocab, &merges, &options) {
            return Ok(WordCachedBpe::compact(compact));
        }
        let bpe = options
            .build_crate(vocab, merges)
            .map_err(de::Error::custom)?;
        Ok(WordCachedBpe::new(bpe))
    }
}

/// Reads the `merges` list, each entry either a `["a", "b"]` pair or a legacy `"a b"` line
/// (`#version` lines skipped), in rank order, into a list of `expected` initial capacity.
struct MergeList {
    expected: usize,
}

impl<'de> DeserializeSeed<'de> for MergeList {
    type Value = Merges;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Merges, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for MergeList {
    type Value = Merges;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of merges")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Merges, A::Error> {
        let capacity = seq.size_hint().unwrap_or(self.expected);
        let mut merges = Merges::with_capacity(capacity);
        while let Some(merge) = seq.next_element::<Merge>()? {
            merges.extend(merge.0);
        }
        Ok(merges)
    }
}

/// One merge; `None` for a `#version` header line.
struct Merge(Option<(String, String)>);

impl<'de> Deserialize<'de> for Merge {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(MergeVisitor)
    }
}

struct MergeVisitor;

impl<'de> Visitor<'de> for MergeVisitor {
    type Value = Merge;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(r#"a merge: ["a", "b"] or "a b""#)
    }

    fn visit_str<E: de::Error>(self, line: &str) -> Result<Merge, E> {
        if line.starts_with("#version") {
            return Ok(Merge(None));
        }
        let mut parts = line.split(' ');
        match (parts.next(), parts.next(), parts.next()) {
            (Some(a), Some(b), None) => Ok(Merge(Some((a.to_owned(), b.to_owned())))),
            _ => Err(E::invalid_value(Unexpected::Str(line), &self)),
        }
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Merge, A::Error> {
        let a: String = seq
            .next_element()?
            .ok_or_else(|| de::Error::invalid_length(0, &self))?;
        let b: String = seq
            .next_element()?
            .ok_or_else(|| de::Error::invalid_length(1, &self))?;
        if seq.next_element::<IgnoredAny>()?.is_some() {
            return Err(de::Error::invalid_length(3, &self));
        }
        Ok(Merge(Some((a, b))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use tokenizers::{Model, ModelWrapper};

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

    fn ids<M: Model, N, PT, PP, D>(
        tokenizer: &TokenizerImpl<M, N, PT, PP, D>,
        text: &str,
    ) -> Vec<u32>
    where
        N: tokenizers::Normalizer,
        PT: tokenizers::PreTokenizer,
        PP: tokenizers::PostProcessor,
        D: tokenizers::Decoder,
    {
        tokenizer.encode(text, false).unwrap().get_ids().to_vec()
    }

    fn serialized(tokenizer: &impl serde::Serialize) -> String {
        serde_json::to_string(tokenizer).unwrap()
    }

    /// A file under the temp dir holding `json`, unique to the test `tag`.
    fn temp_json(tag: &str, json: &str) -> PathBuf {
        let path =
            std::env::temp_dir().join(format!("vb-hfjson-{tag}-{}.json", std::process::id()));
        std::fs::write(&path, json).unwrap();
        path
    }

    #[test]
    fn bpe_json_loads_directly_and_exactly_as_the_crate_loads_it() {
        let ours = parse_bpe(BPE_JSON.as_bytes()).unwrap();
        let crates = Tokenizer::from_bytes(BPE_JSON).unwrap();
        // Same model, added tokens, normalizer, … (the serialization holds all of them).
        assert_eq!(serialized(&ours), serialized(&crates));
        let text = "ABC ab<|end|>c ba x";
        assert_eq!(ids(&ours, text), vec![5, 4, 6, 3, 2, 1, 0]);
        assert_eq!(ids(&ours, text), ids(&crates, text));
    }

    #[test]
    fn every_bpe_option_is_read() {
        let json = BPE_JSON
            .replace(r#""dropout": null"#, r#""dropout": 0.25"#)
            .replace(r#""fuse_unk": false"#, r#""fuse_unk": true"#)
            .replace(r#""byte_fallback": false"#, r#""byte_fallback": true"#)
            .replace(r#""ignore_merges": false"#, r#""ignore_merges": true"#)
            .replace(
                r#""end_of_word_suffix": null"#,
                r#""end_of_word_suffix": "</w>", "unknown_field": [1, {"x": 2}]"#,
            );
        let ours = parse_bpe(json.as_bytes()).unwrap();
        assert_eq!(
            serialized(&ours),
            serialized(&Tokenizer::from_bytes(&json).unwrap())
        );
        assert!(serialized(&ours).contains(r#""dropout":0.25"#));
    }

    #[test]
    fn legacy_string_merges_load_too() {
        let legacy = BPE_JSON.replace(
            r#"[["a", "b"], ["ab", "c"]]"#,
            r##"["#version: 0.2", "a b", "ab c"]"##,
        );
        let ours = parse_bpe(legacy.as_bytes()).unwrap();
        assert_eq!(
            serialized(&ours),
            serialized(&Tokenizer::from_bytes(&legacy).unwrap())
        );
        assert_eq!(ids(&ours, "abc ab"), vec![5, 4]);
        let bad = BPE_JSON.replace(r#"["ab", "c"]"#, r#""ab c a""#);
        assert!(parse_bpe(bad.as_bytes()).is_err());
        let triple = BPE_JSON.replace(r#"["ab", "c"]"#, r#"["ab", "c", "a"]"#);
        assert!(parse_bpe(triple.as_bytes()).is_err());
    }

    #[test]
    fn other_models_take_the_generic_path() {
        let json = r#"{"version": "1.0", "truncation": null, "padding": null,
          "added_tokens": [], "normalizer": null, "pre_tokenizer": {"type": "Whitespace"},
          "post_processor": null, "decoder": null,
          "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "hi": 1, "there": 2},
                    "unk_token": "[UNK]"}}"#;
        assert!(parse_bpe(json.as_bytes()).is_err());
        let path = temp_json("wordlevel", json);
        let Loaded::Other(tokenizer) = load(&path).unwrap() else {
            panic!("a WordLevel model loaded as BPE");
        };
        std::fs::remove_file(&path).unwrap();
        assert!(matches!(tokenizer.get_model(), ModelWrapper::WordLevel(_)));
        assert_eq!(ids(&tokenizer, "hi there you"), vec![1, 2, 0]);
    }

    #[test]
    fn bpe_models_met_in_practice_load_compact() {
        // Qwen's json has an empty subword prefix and word suffix: no change, so compact.
        let qwen_like = BPE_JSON
            .replace(
                r#""continuing_subword_prefix": null"#,
                r#""continuing_subword_prefix": """#,
            )
            .replace(
                r#""end_of_word_suffix": null"#,
                r#""end_of_word_suffix": """#,
            );
        for json in [BPE_JSON.to_owned(), qwen_like] {
            let ours = parse_bpe(json.as_bytes()).unwrap();
            assert!(ours.get_model().is_compact(), "{json}");
            let crates = Tokenizer::from_bytes(&json).unwrap();
            assert_eq!(serialized(&ours), serialized(&crates));
            let text = "ABC ab<|end|>c ba x";
            assert_eq!(ids(&ours, text), ids(&crates, text));
        }
        // Dropout stays with the crate.
        let dropout = BPE_JSON.replace(r#""dropout": null"#, r#""dropout": 0.25"#);
        assert!(!parse_bpe(dropout.as_bytes())
            .unwrap()
            .get_model()
            .is_compact());
    }

    #[test]
    fn bad_files_are_clear_errors() {
        let missing = std::env::temp_dir().join("vb-hfjson-no-such-file.json");
        let err = format!("{:#}", load(&missing).err().expect("an error"));
        assert!(err.contains("cannot read tokenizer file"), "{err}");

        // A merge whose parts are not in the vocabulary.
        let bad = BPE_JSON.replace(r#"["ab", "c"]"#, r#"["ab", "z"]"#);
        assert!(parse_bpe(bad.as_bytes()).is_err());
        let path = temp_json("bad-merge", &bad);
        let err = format!("{:#}", load(&path).err().expect("an error"));
        std::fs::remove_file(&path).unwrap();
        assert!(err.contains("is not a valid tokenizer.json"), "{err}");

        assert!(parse_bpe(&b"{\"version\": \"1.0\""[..]).is_err());
        // Trailing garbage after a valid tokenizer.
        assert!(parse_bpe(format!("{BPE_JSON} x").as_bytes()).is_err());
    }
}
