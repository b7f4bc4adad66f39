//! Text prompts, for servers that refuse token ids and for chat endpoints.
//!
//! The caller supplies the tokenizer's decode (`&dyn Fn(&[u32]) -> String`), so this module
//! does not depend on the tokenizer module. Decoding is block by block, cached per block
//! (and per cut length), so a shared prefix is decoded once and its text is shared too.
//!
//! The re-tokenized length is approximate: the server tokenizes the text again, and text
//! decoded from random ids does not round-trip (merges across block boundaries, byte-level
//! pieces split between blocks become U+FFFD). Expect a few percent off `input_len`; only
//! token-id prompts are exact. Blocks sharing ids still produce identical text, so prefix
//! sharing survives up to the last shared block.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use super::prompt::{segments, PromptBuilder, Segment};
use super::record::TraceRecord;

/// A decoded block: its text and the same text JSON-escaped (no quotes).
#[derive(Debug, Clone)]
struct TextBlock {
    text: Arc<str>,
    json: Bytes,
}

impl TextBlock {
    fn new(text: String) -> Self {
        let quoted = serde_json::Value::String(text.clone()).to_string();
        let json = Bytes::from(quoted).slice(1..);
        let json = json.slice(..json.len() - 1);
        Self {
            text: text.into(),
            json,
        }
    }
}

static QUOTE: Bytes = Bytes::from_static(b"\"");

/// Caches decoded blocks (unbounded: text mode serves chat-sized replays; its footprint is
/// the distinct blocks' text, about the size of their id fragments).
#[derive(Default)]
pub struct TextPrompter {
    blocks: Mutex<HashMap<(u64, u32), TextBlock>>,
}

impl TextPrompter {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    fn pieces(
        &self,
        builder: &PromptBuilder,
        rec: &TraceRecord,
        decode: &dyn Fn(&[u32]) -> String,
    ) -> Vec<TextBlock> {
        segments(rec, builder.chunk_size())
            .map(|seg| match seg {
                Segment::Block { hash_id, len } => {
                    let key = (hash_id, len);
                    let cached = self
                        .blocks
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get(&key)
                        .cloned();
                    cached.unwrap_or_else(|| {
                        let block = TextBlock::new(decode(&builder.segment_tokens(seg, rec)));
                        self.blocks
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .entry(key)
                            .or_insert(block)
                            .clone()
                    })
                }
                Segment::Tail { .. } => TextBlock::new(decode(&builder.segment_tokens(seg, rec))),
            })
            .collect()
    }

    /// The prompt's text, one shared piece per block (plus the tail).
    pub fn text_parts(
        &self,
        builder: &PromptBuilder,
        rec: &TraceRecord,
        decode: &dyn Fn(&[u32]) -> String,
    ) -> Vec<Arc<str>> {
        self.pieces(builder, rec, decode)
            .into_iter()
            .map(|b| b.text)
            .collect()
    }

    /// The prompt's text as one string.
    pub fn text(
        &self,
        builder: &PromptBuilder,
        rec: &TraceRecord,
        decode: &dyn Fn(&[u32]) -> String,
    ) -> String {
        self.text_parts(builder, rec, decode).concat()
    }

    /// The prompt as parts of one JSON string literal (`"` … `"`, escaped), ready to be
    /// written into a request body like [`PromptBuilder::prompt_json_parts`].
    pub fn text_json_parts(
        &self,
        builder: &PromptBuilder,
        rec: &TraceRecord,
        decode: &dyn Fn(&[u32]) -> String,
    ) -> Vec<Bytes> {
        let mut parts = vec![QUOTE.clone()];
        parts.extend(
            self.pieces(builder, rec, decode)
                .into_iter()
                .map(|b| b.json),
        );
        parts.push(QUOTE.clone());
        parts
    }

    /// Decoded blocks held.
    pub fn cached_blocks(&self) -> usize {
        self.blocks.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}
