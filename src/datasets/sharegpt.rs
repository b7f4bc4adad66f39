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
use serde_json::{json, Value};

use super::custom_image::image_url;
use super::error::DatasetError;
use super::media::{ChatMedia, ContentPart};
use super::pyrandom::PyRandom;
use super::sampling::{
    is_valid_sequence, maybe_oversample, oversample_pairs, take_in_order, Sampling,
};
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
    /// An `image` or `video` key (multimodal ShareGPT).
    media: Option<MediaKey>,
}

/// A conversation's `image` or `video` value, as Python's `entry.get(...)` sees it.
#[derive(Debug, Clone)]
enum MediaKey {
    Image(String),
    Video(String),
    /// A truthy value that is not a path or URL (raw bytes): not supported.
    Other,
}

impl MediaKey {
    /// Python: `if image_path := entry.get("image")` first, then `video`.
    fn of(image: Option<Value>, video: Option<Value>) -> Option<MediaKey> {
        let truthy = |v: &Value| match v {
            Value::Null | Value::Bool(false) => false,
            Value::String(s) => !s.is_empty(),
            Value::Array(a) => !a.is_empty(),
            Value::Object(o) => !o.is_empty(),
            _ => true,
        };
        match (image.filter(truthy), video.filter(truthy)) {
            (Some(Value::String(p)), _) => Some(MediaKey::Image(p)),
            (Some(_), _) => Some(MediaKey::Other),
            (None, Some(Value::String(p))) => Some(MediaKey::Video(p)),
            (None, Some(_)) => Some(MediaKey::Other),
            (None, None) => None,
        }
    }

    /// The content part Python's `process_image` / `process_video` make of it.
    fn part(&self) -> Option<ContentPart> {
        Some(match self {
            MediaKey::Image(p) => ContentPart::from_json(
                &json!({"type": "image_url", "image_url": {"url": image_url(p)}}),
            ),
            MediaKey::Video(p) => {
                let url = if ["http://", "https://", "file://"]
                    .iter()
                    .any(|s| p.starts_with(s))
                {
                    p.clone()
                } else {
                    format!("file://{p}")
                };
                ContentPart::from_json(&json!({"type": "video_url", "video_url": {"url": url}}))
            }
            MediaKey::Other => return None,
        })
    }
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
    image: Option<Value>,
    #[serde(default)]
    video: Option<Value>,
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
                    media: MediaKey::of(e.image, e.video),
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

    /// Whether some conversation has an `image` or `video` key (then the run goes through
    /// [`Self::sample_with_media`]).
    pub fn has_media(&self) -> bool {
        self.conversations.iter().any(|c| c.media.is_some())
    }

    /// Python's `ShareGPTDataset(...).sample(...)`: the selected requests, in order.
    pub fn sample(
        &self,
        s: &Sampling,
        opts: ShareGptOptions,
        tokenizer: &Tokenizer,
    ) -> Result<Vec<SampleRequest>, DatasetError> {
        let mut samples: Vec<SampleRequest> = self
            .select(s, opts, tokenizer)?
            .into_iter()
            .map(|(r, _)| r)
            .collect();
        maybe_oversample(&mut samples, s, "sharegpt")?;
        Ok(samples)
    }

    /// The same selection, each request with its entry's image or video part (Python's
    /// `multi_modal_data`, sent after the text by the chat backends); `--enable-multimodal-chat`
    /// makes the text part and the item the whole content, as Python's
    /// `apply_multimodal_chat_transformation` does (its text part lists `text` first).
    pub fn sample_with_media(
        &self,
        s: &Sampling,
        opts: ShareGptOptions,
        tokenizer: &Tokenizer,
        multimodal_chat: bool,
    ) -> Result<Vec<(SampleRequest, ChatMedia)>, DatasetError> {
        let mut pairs = self
            .select(s, opts, tokenizer)?
            .into_iter()
            .map(|(req, c)| {
                let item = match &c.media {
                    None => None,
                    Some(m) => Some(m.part().ok_or_else(|| {
                        DatasetError::entry(
                            &self.path,
                            c.index,
                            "has an \"image\" or \"video\" that is not a path or URL; only \
                             paths and URLs are supported",
                        )
                    })?),
                };
                let media = if multimodal_chat {
                    let text = c.prompt.as_deref().unwrap_or_default();
                    let mut parts = vec![ContentPart::from_json(
                        &json!({"text": text, "type": "text"}),
                    )];
                    parts.extend(item);
                    ChatMedia {
                        parts,
                        replaces_text: true,
                    }
                } else {
                    ChatMedia::beside_text(item.into_iter().collect())
                };
                Ok((req, media))
            })
            .collect::<Result<Vec<_>, DatasetError>>()?;
        oversample_pairs(&mut pairs, s, "sharegpt")?;
        Ok(pairs)
    }

    /// Python's selection loop, before oversampling: each request and its conversation.
    fn select(
        &self,
        s: &Sampling,
        opts: ShareGptOptions,
        tokenizer: &Tokenizer,
    ) -> Result<Vec<(SampleRequest, &Conversation)>, DatasetError> {
        let mut order: Vec<&Conversation> = self.conversations.iter().collect();
        if s.shuffle {
            PyRandom::new(s.seed).shuffle(&mut order);
        }
        let mut samples = take_in_order(&order, s.num_requests, |c| {
            let (prompt_len, output_len) = self.count(c, opts, tokenizer)?;
            if !is_valid_sequence(prompt_len, output_len, opts.output_len.is_some()) {
                return Ok(None);
            }
            let req = SampleRequest {
                prompt: Prompt::Text(Arc::from(c.prompt.as_deref().unwrap_or_default())),
                prompt_len,
                expected_output_len: output_len,
                request_id: None,
            };
            Ok(Some((req, *c)))
        })?;
        for (i, (req, _)) in samples.iter_mut().enumerate() {
            req.request_id = Some(s.request_id(i));
        }
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
