//! The ShareGPT dataset (`--dataset-name sharegpt`), with Python 0.33's exact selection:
//!
//! 1. the file is a JSON list of `{"conversations": [{"value": ...}, ...]}`; entries with
//!    fewer than two turns are dropped;
//! 2. `random.seed(seed)`, then `random.shuffle` of the kept entries (not with
//!    `--disable-shuffle`), with CPython's generator ([`super::pyrandom`]);
//! 3. in that order, turn 0 is the prompt and turn 1 the completion; both are counted by the
//!    tokenizer **with** special tokens (`tokenizer(text).input_ids`); an entry is kept when
//!    `is_valid_sequence` holds (the output check skipped when `--sharegpt-output-len` /
//!    `--output-len` fixes the output length), until `--num-prompts` are kept;
//! 4. too few: oversampled with `random.seed(seed)` and `random.choice` (not with
//!    `--no-oversample`).
//!
//! Without `--dataset-path` the file of the Hub dataset Python's README points at is used
//! from the HF cache (downloaded once when allowed).
//!
//! Speed: only the first two turns of each entry are kept while parsing; tokenizing runs on
//! rayon in chunks sized to what is still needed, and the chunk's results are then taken in
//! Python's order, so the selection is the sequential one.

use std::path::Path;
use std::sync::Arc;

use serde::de::{Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde::Deserialize;

use super::error::DatasetError;
use super::pyrandom::PyRandom;
use super::sampling::{is_valid_sequence, maybe_oversample, take_in_order, Sampling};
use super::{Prompt, SampleRequest};
use crate::tokenizer::Tokenizer;

/// The Hub dataset and file Python's documentation downloads for ShareGPT.
pub const HUB_DATASET: &str = "anon8231489123/ShareGPT_Vicuna_unfiltered";
pub const HUB_FILE: &str = "ShareGPT_V3_unfiltered_cleaned_split.json";

/// `--sharegpt-output-len` (or `--output-len`): a fixed output length instead of the
/// completion's token count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ShareGptOptions {
    pub output_len: Option<usize>,
}

/// One conversation with at least two turns, as far as sampling needs it.
#[derive(Debug)]
struct Conversation {
    /// Position in the file, for error messages.
    index: usize,
    prompt: Option<String>,
    completion: Option<String>,
    /// An `image` or `video` key (multimodal ShareGPT), which is not supported yet.
    media: bool,
}

/// The loaded file: the conversations with two or more turns, in file order.
pub struct ShareGpt {
    path: std::path::PathBuf,
    conversations: Vec<Conversation>,
}

#[derive(Deserialize)]
struct RawEntry {
    #[serde(default)]
    conversations: Option<FirstTwo>,
    #[serde(default)]
    image: Option<IgnoredAny>,
    #[serde(default)]
    video: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct RawTurn {
    #[serde(default)]
    value: Option<String>,
}

/// A turn list reduced to its length and its first two turns.
struct FirstTwo {
    turns: usize,
    first: Option<RawTurn>,
    second: Option<RawTurn>,
}

impl<'de> Deserialize<'de> for FirstTwo {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = FirstTwo;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of conversation turns")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<FirstTwo, A::Error> {
                let first = seq.next_element::<RawTurn>()?;
                let second = match first {
                    Some(_) => seq.next_element::<RawTurn>()?,
                    None => None,
                };
                let mut turns = usize::from(first.is_some()) + usize::from(second.is_some());
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    turns += 1;
                }
                Ok(FirstTwo {
                    turns,
                    first,
                    second,
                })
            }
        }
        d.deserialize_seq(V)
    }
}

impl ShareGpt {
    /// Reads and parses `path` (a JSON list); keeps the entries with two or more turns.
    pub fn load(path: &Path) -> Result<Self, DatasetError> {
        let bytes = std::fs::read(path).map_err(|e| DatasetError::file(path, e))?;
        Self::parse(path, &bytes)
    }

    /// Parses the bytes of a ShareGPT file (`path` names it in errors).
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<Self, DatasetError> {
        let raw: Vec<RawEntry> = serde_json::from_slice(bytes).map_err(|e| {
            DatasetError::file(
                path,
                format!("not a ShareGPT JSON list of {{\"conversations\": [...]}}: {e}"),
            )
        })?;
        let conversations = raw
            .into_iter()
            .enumerate()
            .filter_map(|(index, e)| {
                let c = e.conversations?;
                (c.turns >= 2).then(|| Conversation {
                    index,
                    prompt: c.first.and_then(|t| t.value),
                    completion: c.second.and_then(|t| t.value),
                    media: e.image.is_some() || e.video.is_some(),
                })
            })
            .collect();
        Ok(Self {
            path: path.to_owned(),
            conversations,
        })
    }

    /// Conversations with two or more turns.
    pub fn len(&self) -> usize {
        self.conversations.len()
    }

    pub fn is_empty(&self) -> bool {
        self.conversations.is_empty()
    }

    /// Python's `ShareGPTDataset(...).sample(...)`: the selected requests, in order.
    pub fn sample(
        &self,
        s: &Sampling,
        opts: ShareGptOptions,
        tokenizer: &Tokenizer,
    ) -> Result<Vec<SampleRequest>, DatasetError> {
        let mut order: Vec<&Conversation> = self.conversations.iter().collect();
        if s.shuffle {
            PyRandom::new(s.seed).shuffle(&mut order);
        }
        let mut samples = take_in_order(&order, s, |c| {
            let (prompt_len, output_len) = self.count(c, opts, tokenizer)?;
            if !is_valid_sequence(prompt_len, output_len, opts.output_len.is_some()) {
                return Ok(None);
            }
            if c.media {
                return Err(DatasetError::entry(
                    &self.path,
                    c.index,
                    "has an \"image\" or \"video\" key; multimodal ShareGPT is not \
                     implemented yet (remove those entries)",
                ));
            }
            Ok(Some(SampleRequest {
                prompt: Prompt::Text(Arc::from(c.prompt.as_deref().unwrap_or_default())),
                prompt_len,
                expected_output_len: output_len,
                request_id: None,
            }))
        })?;
        maybe_oversample(&mut samples, s, "sharegpt")?;
        Ok(samples)
    }

    /// `(prompt_len, output_len)` of one conversation.
    fn count<'a>(
        &self,
        c: &'a Conversation,
        opts: ShareGptOptions,
        tok: &Tokenizer,
    ) -> Result<(usize, usize), DatasetError> {
        let turn = |t: Option<&'a str>, n: usize| {
            t.ok_or_else(|| {
                DatasetError::entry(
                    &self.path,
                    c.index,
                    format!("conversation turn {n} has no string \"value\""),
                )
            })
        };
        let len = |text: &str| {
            tok.encode(text, true)
                .map(|ids| ids.len())
                .map_err(DatasetError::Tokenize)
        };
        // Python reads both turns whether or not the output length is fixed.
        let (prompt, completion) = (
            turn(c.prompt.as_deref(), 0)?,
            turn(c.completion.as_deref(), 1)?,
        );
        let prompt_len = len(prompt)?;
        let output_len = match opts.output_len {
            Some(n) => n,
            None => len(completion)?,
        };
        Ok((prompt_len, output_len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<ShareGpt, DatasetError> {
        ShareGpt::parse(Path::new("x.json"), json.as_bytes())
    }

    #[test]
    fn keeps_two_turn_entries_and_only_their_first_two_turns() {
        let d = parse(
            r#"[{"id": "a", "conversations": [{"from": "human", "value": "q"}]},
                {"id": "b", "conversations": [{"value": "q"}, {"value": "a"}, {"value": "z"}]},
                {"id": "c"},
                {"id": "d", "conversations": []},
                {"conversations": [{"value": "q2"}, {"from": "gpt"}], "extra": [1, 2]}]"#,
        )
        .unwrap();
        assert_eq!(d.len(), 2);
        let c = &d.conversations;
        assert_eq!((c[0].index, c[0].prompt.as_deref()), (1, Some("q")));
        assert_eq!(c[0].completion.as_deref(), Some("a"));
        assert_eq!((c[1].index, c[1].completion.as_deref()), (4, None));
    }

    #[test]
    fn malformed_files_name_the_file_and_the_line() {
        let e = parse("[{\"conversations\": [}]").err().unwrap().to_string();
        assert!(
            e.starts_with("--dataset-path x.json: not a ShareGPT JSON list"),
            "{e}"
        );
        assert!(e.contains("line 1"), "{e}");
        let e = parse("{\"a\": 1}").err().unwrap().to_string();
        assert!(e.contains("expected a sequence"), "{e}");
        let e = parse("[{\"conversations\": [{\"value\": 3}, {}]}]")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("invalid type: integer"), "{e}");
    }
}
