//! Model request bodies: the few fields the mock acts on, read in one pass over the JSON.
//!
//! Prompts are never materialised as `serde_json::Value`s: a visitor walks the prompt
//! (`prompt`, `messages`, `input`, `query`, `documents`) once and produces a [`Digest`]:
//! - `tokens`: the prompt token count, by the body's [`PromptTokenizer`] (the toy one, or the
//!   client's: see [`parse_prompts`]) —
//!   a token-id list counts its length; a string counts its tokens (at least 1, the golden
//!   mock's rule); a chat message counts the tokens of its text: a string `content`, or the
//!   `text` of its `{"type": "text"}` parts concatenated (as the client joins them when it
//!   plans a prompt); image, audio and video parts, and a message without text, count 0
//!   (vLLM counts an image's placeholder tokens, which the client does not plan); any other
//!   prompt value (an object, a number) counts 1;
//! - `hash`: a structural FNV-1a hash of the value (type-tagged, so `"1"` ≠ `1`, and
//!   independent of JSON whitespace) — equal prompts give equal hashes;
//! - `items`: one hash per input (a string or a token-id list is one input, a list of them
//!   is several) for embeddings and rerank;
//! - `blocks`: chained hashes of each full 16-token block of toy token ids (words through
//!   [`toy_tokenizer`](super::toy_tokenizer), ids as given), for the toy prefix cache. They
//!   stay toy ids with a real tokenizer too: the cache is a toy either way.

use std::fmt;

use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::Arc;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use super::hash::Fnv64;
use super::prompt_tokenizer::PromptTokenizer;
use super::toy_tokenizer::word_id;

/// Tokens per prefix-cache block (vLLM's default block size).
pub const BLOCK_TOKENS: usize = 16;
/// Blocks hashed per prompt at most (1 Mi tokens): bounds the per-request memory.
const MAX_BLOCKS: usize = 1 << 16;

/// What the mock learned from one prompt-like value; see the module doc.
#[derive(Debug, Default, Clone)]
pub struct Digest {
    /// Prompt tokens by the golden rules.
    pub tokens: u64,
    /// Structural hash of the whole value.
    pub hash: u64,
    /// One hash per input.
    pub items: Vec<u64>,
    /// Chained hash of each full block of [`BLOCK_TOKENS`] toy ids.
    pub blocks: Vec<u64>,
}

thread_local! {
    /// The tokenizer of the body [`parse_prompts`] is reading on this thread (`None`: the
    /// toy one). A thread-local because serde's derived field visitors cannot carry it down
    /// to the prompt visitors.
    static COUNTING: RefCell<Option<Arc<PromptTokenizer>>> = const { RefCell::new(None) };
}

/// Parses a model request body whose prompts are counted with `tokenizer`.
pub fn parse_prompts<'a, T: Deserialize<'a>>(
    body: &'a [u8],
    tokenizer: &Arc<PromptTokenizer>,
) -> Result<T, InvalidBody> {
    /// Puts the previous tokenizer back, even when parsing unwinds.
    struct Restore(Option<Arc<PromptTokenizer>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            COUNTING.with(|c| *c.borrow_mut() = previous);
        }
    }
    let _restore = Restore(COUNTING.with(|c| c.replace(Some(Arc::clone(tokenizer)))));
    parse(body)
}

/// Every prompt-like field of any model request body: parsed for the counts it leaves in
/// the tokenizer's cache, never read.
#[allow(dead_code)]
#[derive(Default, Deserialize)]
#[serde(default)]
struct AnyPrompts {
    prompt: Option<Text>,
    messages: Option<Messages>,
    input: Option<Text>,
    query: Option<Text>,
    documents: Option<Text>,
}

/// Counts the prompts of a model request body with `tokenizer` (which caches the counts); a
/// body that is not JSON is left alone.
pub fn count_ahead(body: &[u8], tokenizer: &Arc<PromptTokenizer>) {
    let _ = parse_prompts::<AnyPrompts>(body, tokenizer);
}

/// Accumulates a [`Digest`] while a visitor walks the value.
#[derive(Default)]
struct Acc {
    /// Counts the tokens of text (`None`: the toy tokenizer).
    tokenizer: Option<Arc<PromptTokenizer>>,
    tokens: u64,
    hash: Fnv64,
    items: Vec<u64>,
    chain: Fnv64,
    in_block: usize,
    blocks: Vec<u64>,
}

impl Acc {
    /// An accumulator counting with the tokenizer of the body being parsed.
    fn new() -> Acc {
        Acc {
            tokenizer: COUNTING.with(|c| c.borrow().clone()),
            ..Acc::default()
        }
    }

    /// Tokens of `text`; feeds its toy ids to the block chain.
    fn count(&mut self, text: &str) -> u64 {
        let mut words = 0u64;
        for w in text.split_whitespace() {
            self.push_id(u64::from(word_id(w)));
            words += 1;
        }
        match &self.tokenizer {
            Some(t) => t.count(text),
            None => words,
        }
    }

    fn push_id(&mut self, id: u64) {
        if self.blocks.len() >= MAX_BLOCKS {
            return;
        }
        self.chain.write_u64(id);
        self.in_block += 1;
        if self.in_block == BLOCK_TOKENS {
            self.blocks.push(self.chain.finish());
            self.in_block = 0;
        }
    }

    /// A prompt string: its tokens, at least 1; feeds the hash and the block chain.
    fn prompt(&mut self, s: &str, hash: &mut Fnv64) {
        hash_str(hash, s);
        self.tokens += self.count(s).max(1);
    }

    /// A chat message's text: its tokens, 0 included.
    fn message_text(&mut self, s: &str) {
        self.tokens += self.count(s);
    }

    fn finish(self) -> Digest {
        Digest {
            tokens: self.tokens,
            hash: self.hash.finish(),
            items: self.items,
            blocks: self.blocks,
        }
    }
}

// Type tags of the structural hash.
const TAG_NULL: u8 = 0;
const TAG_FALSE: u8 = 1;
const TAG_TRUE: u8 = 2;
const TAG_INT: u8 = 3;
const TAG_FLOAT: u8 = 4;
const TAG_STR: u8 = 5;
const TAG_SEQ: u8 = 6;
const TAG_MAP: u8 = 7;
const TAG_END: u8 = 8;

fn hash_str(h: &mut Fnv64, s: &str) {
    h.write_u8(TAG_STR);
    h.write_u64(s.len() as u64);
    h.write(s.as_bytes());
}

/// A prompt-like field (`prompt`, `input`, `query`, `documents`).
#[derive(Debug, Default, Clone)]
pub struct Text(pub Digest);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut acc = Acc::new();
        d.deserialize_any(TextVisitor(&mut acc))?;
        Ok(Text(acc.finish()))
    }
}

struct TextVisitor<'a>(&'a mut Acc);

impl<'de> Visitor<'de> for TextVisitor<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string, a list of token ids, or a list of those")
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<(), E> {
        let mut item = Fnv64::new();
        self.0.prompt(s, &mut item);
        hash_str(&mut self.0.hash, s);
        self.0.items.push(item.finish());
        Ok(())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        scalar_item(self.0, |h| {
            h.write_u8(TAG_INT);
            h.write_u64(v)
        });
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        self.visit_u64(v as u64)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        scalar_item(self.0, |h| {
            h.write_u8(TAG_FLOAT);
            h.write_u64(v.to_bits())
        });
        Ok(())
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<(), E> {
        scalar_item(self.0, |h| h.write_u8(if v { TAG_TRUE } else { TAG_FALSE }));
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        let mut item = Fnv64::new();
        HashVisitor(&mut item).visit_map(map)?;
        self.0.tokens += 1;
        self.0.hash.write_u64(item.finish());
        self.0.items.push(item.finish());
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let acc = self.0;
        acc.hash.write_u8(TAG_SEQ);
        // Token ids directly in this list form one input (a pre-tokenized prompt).
        let mut ids = Fnv64::new();
        let mut n_ids = 0u64;
        while let Some(elem) = seq.next_element_seed(ElemSeed {
            acc: &mut *acc,
            ids: &mut ids,
        })? {
            n_ids += elem;
        }
        if n_ids > 0 {
            acc.items.push(ids.finish());
        }
        acc.hash.write_u8(TAG_END);
        Ok(())
    }
}

/// One scalar as a whole input: 1 token, hashed with `feed`.
fn scalar_item(acc: &mut Acc, feed: impl Fn(&mut Fnv64)) {
    let mut item = Fnv64::new();
    feed(&mut item);
    feed(&mut acc.hash);
    acc.tokens += 1;
    acc.items.push(item.finish());
}

/// One element of a top-level prompt list; yields 1 when it was a bare token id.
struct ElemSeed<'a> {
    acc: &'a mut Acc,
    ids: &'a mut Fnv64,
}

impl<'de> DeserializeSeed<'de> for ElemSeed<'_> {
    type Value = u64;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<u64, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ElemSeed<'_> {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a token id, a string or a list of token ids")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
        for h in [&mut *self.ids, &mut self.acc.hash] {
            h.write_u8(TAG_INT);
            h.write_u64(v);
        }
        self.acc.tokens += 1;
        self.acc.push_id(v);
        Ok(1)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
        self.visit_u64(v as u64)
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<u64, E> {
        let mut item = Fnv64::new();
        self.acc.prompt(s, &mut item);
        hash_str(&mut self.acc.hash, s);
        self.acc.items.push(item.finish());
        Ok(0)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<u64, A::Error> {
        // A nested list is one input; its token ids count one each, anything else one too.
        let mut item = Fnv64::new();
        item.write_u8(TAG_SEQ);
        while let Some(id) = seq.next_element_seed(NestedSeed(&mut item))? {
            self.acc.tokens += 1;
            if let Some(id) = id {
                self.acc.push_id(id);
            }
        }
        item.write_u8(TAG_END);
        self.acc.hash.write_u64(item.finish());
        self.acc.items.push(item.finish());
        Ok(0)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<u64, A::Error> {
        let mut item = Fnv64::new();
        HashVisitor(&mut item).visit_map(map)?;
        self.acc.tokens += 1;
        self.acc.hash.write_u64(item.finish());
        self.acc.items.push(item.finish());
        Ok(0)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<u64, E> {
        scalar_item(self.acc, |h| {
            h.write_u8(TAG_FLOAT);
            h.write_u64(v.to_bits())
        });
        Ok(0)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<u64, E> {
        scalar_item(self.acc, |h| {
            h.write_u8(if v { TAG_TRUE } else { TAG_FALSE })
        });
        Ok(0)
    }

    fn visit_unit<E: de::Error>(self) -> Result<u64, E> {
        scalar_item(self.acc, |h| h.write_u8(TAG_NULL));
        Ok(0)
    }
}

/// An element of a nested list: hashed; yields its id when it is a token id.
struct NestedSeed<'a>(&'a mut Fnv64);

impl<'de> DeserializeSeed<'de> for NestedSeed<'_> {
    type Value = Option<u64>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<u64>, D::Error> {
        let h = self.0;
        let id = d.deserialize_any(IdOrOther(h))?;
        Ok(id)
    }
}

struct IdOrOther<'a>(&'a mut Fnv64);

impl<'de> Visitor<'de> for IdOrOther<'_> {
    type Value = Option<u64>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a token id")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Option<u64>, E> {
        self.0.write_u8(TAG_INT);
        self.0.write_u64(v);
        Ok(Some(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Option<u64>, E> {
        self.visit_u64(v as u64)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Option<u64>, E> {
        HashVisitor(self.0).visit_f64(v).map(|()| None)
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Option<u64>, E> {
        hash_str(self.0, s);
        Ok(None)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Option<u64>, E> {
        HashVisitor(self.0).visit_bool(v).map(|()| None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Option<u64>, E> {
        HashVisitor(self.0).visit_unit().map(|()| None)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Option<u64>, A::Error> {
        HashVisitor(self.0).visit_seq(seq).map(|()| None)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Option<u64>, A::Error> {
        HashVisitor(self.0).visit_map(map).map(|()| None)
    }
}

/// Hashes any JSON value structurally.
struct HashVisitor<'a>(&'a mut Fnv64);

impl<'de> DeserializeSeed<'de> for HashVisitor<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for HashVisitor<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.0.write_u8(TAG_NULL);
        Ok(())
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<(), E> {
        self.0.write_u8(if v { TAG_TRUE } else { TAG_FALSE });
        Ok(())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        self.0.write_u8(TAG_INT);
        self.0.write_u64(v);
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        self.visit_u64(v as u64)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        self.0.write_u8(TAG_FLOAT);
        self.0.write_u64(v.to_bits());
        Ok(())
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<(), E> {
        hash_str(self.0, s);
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.0.write_u8(TAG_SEQ);
        while seq.next_element_seed(HashVisitor(&mut *self.0))?.is_some() {}
        self.0.write_u8(TAG_END);
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.0.write_u8(TAG_MAP);
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            hash_str(self.0, &key);
            map.next_value_seed(HashVisitor(&mut *self.0))?;
        }
        self.0.write_u8(TAG_END);
        Ok(())
    }
}

/// A chat `messages` list: each message counted by its text (see the module doc).
#[derive(Debug, Default, Clone)]
pub struct Messages(pub Digest);

impl<'de> Deserialize<'de> for Messages {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut acc = Acc::new();
        d.deserialize_seq(MessagesVisitor(&mut acc))?;
        let mut digest = acc.finish();
        // A conversation is one input.
        digest.items = vec![digest.hash];
        Ok(Messages(digest))
    }
}

struct MessagesVisitor<'a>(&'a mut Acc);

impl<'de> Visitor<'de> for MessagesVisitor<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of chat messages")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.0.hash.write_u8(TAG_SEQ);
        while seq.next_element_seed(MessageSeed(&mut *self.0))?.is_some() {}
        self.0.hash.write_u8(TAG_END);
        Ok(())
    }
}

struct MessageSeed<'a>(&'a mut Acc);

impl<'de> DeserializeSeed<'de> for MessageSeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for MessageSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a chat message object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let acc = self.0;
        let mut hash = acc.hash;
        hash.write_u8(TAG_MAP);
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            hash_str(&mut hash, &key);
            if key == "content" {
                // No content at all (e.g. an assistant tool call) has no text: 0 tokens.
                let text = map.next_value_seed(ContentSeed(&mut hash))?;
                acc.message_text(text.as_deref().unwrap_or(""));
            } else {
                map.next_value_seed(HashVisitor(&mut hash))?;
            }
        }
        hash.write_u8(TAG_END);
        acc.hash = hash;
        Ok(())
    }
}

/// A message's `content`, hashed: yields its text (a string, or its text parts
/// concatenated), `None` when it has none.
struct ContentSeed<'a>(&'a mut Fnv64);

impl<'de> DeserializeSeed<'de> for ContentSeed<'_> {
    type Value = Option<Cow<'de, str>>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl ContentSeed<'_> {
    /// Content that is neither a string nor a list: hashed as one item, no text.
    fn other<T>(self, feed: impl FnOnce(&mut Fnv64) -> T) -> T {
        let mut item = Fnv64::new();
        let out = feed(&mut item);
        self.0.write_u64(item.finish());
        out
    }
}

impl<'de> Visitor<'de> for ContentSeed<'_> {
    type Value = Option<Cow<'de, str>>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("message content")
    }

    fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Self::Value, E> {
        hash_str(self.0, s);
        Ok(Some(Cow::Borrowed(s)))
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
        hash_str(self.0, s);
        Ok(Some(Cow::Owned(s.to_owned())))
    }

    /// Content parts: hashed as one item (as any other non-string content), their text
    /// concatenated.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        self.other(|item| {
            item.write_u8(TAG_SEQ);
            let mut text: Option<Cow<'de, str>> = None;
            while let Some(part) = seq.next_element_seed(PartSeed(&mut *item))? {
                match (&mut text, part) {
                    (_, None) => {}
                    (None, Some(t)) => text = Some(t),
                    (Some(all), Some(t)) => all.to_mut().push_str(&t),
                }
            }
            item.write_u8(TAG_END);
            Ok(text)
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        self.other(|h| HashVisitor(h).visit_map(map).map(|()| None))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        self.other(|h| HashVisitor(h).visit_unit().map(|()| None))
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        self.other(|h| HashVisitor(h).visit_bool(v).map(|()| None))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        self.other(|h| HashVisitor(h).visit_u64(v).map(|()| None))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        self.visit_u64(v as u64)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        self.other(|h| HashVisitor(h).visit_f64(v).map(|()| None))
    }
}

/// One content part, hashed exactly as [`HashVisitor`] hashes it: yields the `text` of a
/// `{"type": "text"}` part (a bare string part counts as text too), `None` for any other
/// part (images, audio, video).
struct PartSeed<'a>(&'a mut Fnv64);

impl<'de> DeserializeSeed<'de> for PartSeed<'_> {
    type Value = Option<Cow<'de, str>>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for PartSeed<'_> {
    type Value = Option<Cow<'de, str>>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a content part")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        self.0.write_u8(TAG_MAP);
        let (mut kind, mut text) = (None, None);
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            hash_str(self.0, &key);
            match &*key {
                "type" => kind = map.next_value_seed(StrOrOther(&mut *self.0))?,
                "text" => text = map.next_value_seed(StrOrOther(&mut *self.0))?,
                _ => map.next_value_seed(HashVisitor(&mut *self.0))?,
            }
        }
        self.0.write_u8(TAG_END);
        Ok(text.filter(|_| kind.as_deref() == Some("text")))
    }

    fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Self::Value, E> {
        StrOrOther(self.0).visit_borrowed_str(s)
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
        StrOrOther(self.0).visit_str(s)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        HashVisitor(self.0).visit_seq(seq).map(|()| None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        HashVisitor(self.0).visit_unit().map(|()| None)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        HashVisitor(self.0).visit_bool(v).map(|()| None)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        HashVisitor(self.0).visit_u64(v).map(|()| None)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        self.visit_u64(v as u64)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        HashVisitor(self.0).visit_f64(v).map(|()| None)
    }
}

/// Any value, hashed as [`HashVisitor`] hashes it; yields it when it is a string.
struct StrOrOther<'a>(&'a mut Fnv64);

impl<'de> DeserializeSeed<'de> for StrOrOther<'_> {
    type Value = Option<Cow<'de, str>>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrOrOther<'_> {
    type Value = Option<Cow<'de, str>>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Self::Value, E> {
        hash_str(self.0, s);
        Ok(Some(Cow::Borrowed(s)))
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
        hash_str(self.0, s);
        Ok(Some(Cow::Owned(s.to_owned())))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        HashVisitor(self.0).visit_seq(seq).map(|()| None)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        HashVisitor(self.0).visit_map(map).map(|()| None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        HashVisitor(self.0).visit_unit().map(|()| None)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        HashVisitor(self.0).visit_bool(v).map(|()| None)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        HashVisitor(self.0).visit_u64(v).map(|()| None)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        self.visit_u64(v as u64)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        HashVisitor(self.0).visit_f64(v).map(|()| None)
    }
}

/// `stream_options` of a generation request.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct StreamOptions {
    /// Ask for the final usage chunk.
    pub include_usage: Option<bool>,
}

/// `POST /v1/completions` and `POST /v1/chat/completions`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct GenerationBody {
    /// Completions prompt.
    pub prompt: Option<Text>,
    /// Chat messages.
    pub messages: Option<Messages>,
    /// Output tokens (completions; also accepted by chat).
    pub max_tokens: Option<u64>,
    /// Output tokens (chat; also accepted by completions).
    pub max_completion_tokens: Option<u64>,
    /// SSE stream or one JSON body.
    pub stream: Option<bool>,
    /// `include_usage`.
    pub stream_options: Option<StreamOptions>,
}

/// `POST /v1/responses`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct ResponsesBody {
    /// The input (a string, like Python's client sends).
    pub input: Option<Text>,
    /// Output tokens.
    pub max_output_tokens: Option<u64>,
    /// SSE stream of typed events or one JSON body.
    pub stream: Option<bool>,
}

/// `POST /v1/messages` (Anthropic Messages).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct MessagesBody {
    /// The conversation (user and assistant messages, Anthropic content blocks).
    pub messages: Option<Messages>,
    /// The system prompt: a string or a list of text blocks.
    pub system: Option<System>,
    /// Output tokens (required by the API).
    pub max_tokens: Option<u64>,
    /// SSE stream of typed events or one JSON body.
    pub stream: Option<bool>,
}

impl MessagesBody {
    /// The prompt: the system prompt's tokens and the messages' (`None` without messages).
    /// The hash covers both; the prefix-cache blocks are the messages' (the system prompt
    /// is not part of the toy cache's chain).
    pub fn prompt(self) -> Option<Digest> {
        let mut prompt = self.messages?.0;
        if let Some(System(system)) = self.system {
            let mut hash = Fnv64::new();
            hash.write_u64(system.hash);
            hash.write_u64(prompt.hash);
            prompt.tokens += system.tokens;
            prompt.hash = hash.finish();
            prompt.items = vec![prompt.hash];
        }
        Some(prompt)
    }
}

/// Anthropic's top-level `system`: counted and hashed as a message's content (a string, or
/// the text of its text blocks).
#[derive(Debug, Default, Clone)]
pub struct System(pub Digest);

impl<'de> Deserialize<'de> for System {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut acc = Acc::new();
        let mut hash = Fnv64::new();
        let text = ContentSeed(&mut hash).deserialize(d)?;
        acc.message_text(text.as_deref().unwrap_or(""));
        acc.hash = hash;
        Ok(System(acc.finish()))
    }
}

/// `POST /v1/embeddings`, `/pooling`, `/v1/pooling`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct PoolingBody {
    /// One input or a list of inputs.
    pub input: Option<Text>,
    /// Chat-style input (one conversation = one input).
    pub messages: Option<Messages>,
}

/// `POST /rerank`, `/v1/rerank`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct RerankBody {
    /// The query.
    pub query: Option<Text>,
    /// The documents to score against the query.
    pub documents: Option<Text>,
}

/// `POST /tokenize` (vLLM's `prompt`, or `text` / llama.cpp's `content`).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct TokenizeBody<'a> {
    /// vLLM field.
    #[serde(borrow)]
    pub prompt: Option<std::borrow::Cow<'a, str>>,
    /// Alternative field.
    #[serde(borrow)]
    pub text: Option<std::borrow::Cow<'a, str>>,
    /// llama.cpp field.
    #[serde(borrow)]
    pub content: Option<std::borrow::Cow<'a, str>>,
    /// vLLM's switch for the tokenizer's BOS/EOS (default on).
    pub add_special_tokens: Option<bool>,
    /// llama.cpp's name for it.
    pub add_special: Option<bool>,
}

/// `POST /detokenize`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct DetokenizeBody {
    /// Token ids.
    pub tokens: Option<Vec<i64>>,
}

/// A request body that is not the JSON its endpoint takes (answered with a 400).
#[derive(Debug, thiserror::Error)]
#[error("invalid JSON body: {0}")]
pub struct InvalidBody(serde_json::Error);

/// Parses a body, or explains in one line why it is not acceptable.
pub fn parse<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, InvalidBody> {
    serde_json::from_slice(body).map_err(InvalidBody)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gen(json: &str) -> GenerationBody {
        parse(json.as_bytes()).expect(json)
    }

    #[test]
    fn a_messages_body_counts_its_system_prompt_and_its_messages() {
        let b: MessagesBody = parse(
            br#"{"model":"m","max_tokens":3,"system":[{"type":"text","text":"be brief"}],"messages":[{"role":"user","content":[{"type":"text","text":"a b c"}]}],"stream":true}"#,
        )
        .unwrap();
        assert_eq!((b.max_tokens, b.stream), (Some(3), Some(true)));
        let with_system = b.prompt().unwrap();
        assert_eq!(with_system.tokens, 5);
        let b: MessagesBody =
            parse(br#"{"system":"be","messages":[{"role":"user","content":"a b c"}]}"#).unwrap();
        assert_eq!(b.prompt().unwrap().tokens, 4);
        let b: MessagesBody =
            parse(br#"{"messages":[{"role":"user","content":"a b c"}]}"#).unwrap();
        let plain = b.prompt().unwrap();
        assert_eq!(plain.tokens, 3);
        assert_ne!(plain.hash, with_system.hash);
        let none: MessagesBody = parse(br#"{"max_tokens":3}"#).unwrap();
        assert!(none.prompt().is_none());
    }

    #[test]
    fn string_prompt_counts_words_at_least_one() {
        assert_eq!(gen(r#"{"prompt":"a b  c\nd"}"#).prompt.unwrap().0.tokens, 4);
        assert_eq!(gen(r#"{"prompt":""}"#).prompt.unwrap().0.tokens, 1);
        assert_eq!(gen(r#"{"prompt":"   "}"#).prompt.unwrap().0.tokens, 1);
    }

    #[test]
    fn token_id_list_counts_its_length_as_one_input() {
        let d = gen(r#"{"prompt":[1,2,3,4,5]}"#).prompt.unwrap().0;
        assert_eq!(d.tokens, 5);
        assert_eq!(d.items.len(), 1);
    }

    #[test]
    fn batch_prompts_are_several_inputs() {
        let d = gen(r#"{"prompt":["a b", "c", [1,2,3]]}"#).prompt.unwrap().0;
        assert_eq!(d.tokens, 2 + 1 + 3);
        assert_eq!(d.items.len(), 3);
    }

    #[test]
    fn chat_content_parts_count_as_their_text() {
        let b = gen(r#"{"messages":[{"role":"system","content":"be brief"},
                {"role":"user","content":[{"type":"text","text":"many words here"}]}]}"#);
        assert_eq!(b.messages.unwrap().0.tokens, 2 + 3);
        // Text parts concatenated as the client joins them ("Compare " + "and" + "mo" "re"
        // is "Compare andmore": 2 words), "type" in any position; images count nothing.
        let b = gen(r#"{"messages":[{"role":"user","content":[
                {"type":"text","text":"Compare "},
                {"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}},
                {"text":"and","type":"text"},
                {"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}},
                {"type":"text","text":"mo"},"re"]}]}"#);
        assert_eq!(b.messages.unwrap().0.tokens, 2);
        // Escaped text is counted unescaped.
        let b = gen(
            r#"{"messages":[{"role":"user","content":[{"type":"text","text":"a\u0020b\nc"}]}]}"#,
        );
        assert_eq!(b.messages.unwrap().0.tokens, 3);
        // No text at all: 0 (an image-only message, an assistant tool call).
        for content in [
            r#"[{"type":"image_url","image_url":{"url":"x"}}]"#,
            "null",
            "[]",
        ] {
            let b = gen(&format!(
                r#"{{"messages":[{{"role":"assistant","content":{content}}}]}}"#
            ));
            assert_eq!(b.messages.unwrap().0.tokens, 0, "{content}");
        }
        let b = gen(r#"{"messages":[{"role":"assistant","tool_calls":[]}]}"#);
        assert_eq!(b.messages.unwrap().0.tokens, 0);
    }

    #[test]
    fn content_parts_hash_by_structure_not_only_by_text() {
        let hash = |content: &str| {
            gen(&format!(
                r#"{{"messages":[{{"role":"user","content":{content}}}]}}"#
            ))
            .messages
            .unwrap()
            .0
            .hash
        };
        let one = hash(r#"[{"type":"text","text":"hi"}]"#);
        assert_eq!(one, hash(r#"[ {"type" : "text", "text" : "hi"} ]"#));
        assert_ne!(one, hash(r#""hi""#));
        assert_ne!(
            hash(r#"[{"type":"text","text":"q"},{"type":"image_url","image_url":{"url":"a"}}]"#),
            hash(r#"[{"type":"text","text":"q"},{"type":"image_url","image_url":{"url":"b"}}]"#)
        );
    }

    #[test]
    fn parse_prompts_counts_with_the_given_tokenizer_and_restores_the_toy_one() {
        let toy = Arc::new(PromptTokenizer::default());
        let body = br#"{"messages":[{"role":"user","content":[{"type":"text","text":"a b c"}]}]}"#;
        let b: GenerationBody = parse_prompts(body, &toy).unwrap();
        assert_eq!(b.messages.unwrap().0.tokens, 3);
        assert!(
            COUNTING.with(|c| c.borrow().is_none()),
            "restored after parsing"
        );
    }

    #[test]
    fn equal_prompts_hash_equal_regardless_of_formatting() {
        let a = gen(r#"{"prompt":"hello world","max_tokens":5}"#)
            .prompt
            .unwrap()
            .0
            .hash;
        let b = gen(r#"{ "max_tokens" : 7, "prompt" : "hello world" }"#)
            .prompt
            .unwrap()
            .0
            .hash;
        let c = gen(r#"{"prompt":"hello worlds"}"#).prompt.unwrap().0.hash;
        assert_eq!(a, b);
        assert_ne!(a, c);
        let m1 = gen(r#"{"messages":[{"role":"user","content":"hi"}]}"#)
            .messages
            .unwrap()
            .0
            .hash;
        let m2 = gen(r#"{"messages":[{"role":"system","content":"hi"}]}"#)
            .messages
            .unwrap()
            .0
            .hash;
        assert_ne!(m1, m2);
        // A string and a token-id list with "the same" digits differ.
        let s = gen(r#"{"prompt":"1"}"#).prompt.unwrap().0.hash;
        let i = gen(r#"{"prompt":[1]}"#).prompt.unwrap().0.hash;
        assert_ne!(s, i);
    }

    #[test]
    fn blocks_chain_every_sixteen_tokens() {
        let words: Vec<String> = (0..40).map(|i| format!("w{i}")).collect();
        let p1 = format!(r#"{{"prompt":"{}"}}"#, words.join(" "));
        let mut other = words.clone();
        other[20] = "changed".into();
        let p2 = format!(r#"{{"prompt":"{}"}}"#, other.join(" "));
        let d1 = gen(&p1).prompt.unwrap().0;
        let d2 = gen(&p2).prompt.unwrap().0;
        assert_eq!(d1.blocks.len(), 2);
        assert_eq!(d1.blocks[0], d2.blocks[0], "first block shared");
        assert_ne!(d1.blocks[1], d2.blocks[1], "second block differs");
    }

    #[test]
    fn generation_fields_are_read() {
        let b = gen(r#"{"model":"m","prompt":"x","max_tokens":7,"stream":true,
                "stream_options":{"include_usage":true},"temperature":0.0,"ignore_eos":true}"#);
        assert_eq!(b.max_tokens, Some(7));
        assert_eq!(b.stream, Some(true));
        assert_eq!(b.stream_options.unwrap().include_usage, Some(true));
        let b = gen(r#"{"messages":[],"max_completion_tokens":3,"max_tokens":null}"#);
        assert_eq!(b.max_completion_tokens, Some(3));
        assert_eq!(b.max_tokens, None);
    }

    #[test]
    fn bad_bodies_give_one_line_errors() {
        for bad in [
            r#"{"prompt":"x","max_tokens":-1}"#,
            r#"{"prompt":"x""#,
            "not json",
            r#"{"messages":"hi"}"#,
        ] {
            let err = parse::<GenerationBody>(bad.as_bytes())
                .expect_err(bad)
                .to_string();
            assert!(err.starts_with("invalid JSON body"), "{err}");
            assert!(!err.contains('\n'));
        }
    }

    #[test]
    fn pooling_and_rerank_inputs() {
        let p: PoolingBody = parse(br#"{"input":["a b","c d e"]}"#).unwrap();
        let d = p.input.unwrap().0;
        assert_eq!((d.tokens, d.items.len()), (5, 2));
        let r: RerankBody =
            parse(br#"{"query":"q","documents":["x","y z",{"text":"w"}]}"#).unwrap();
        assert_eq!(r.documents.unwrap().0.items.len(), 3);
        assert_eq!(r.query.unwrap().0.tokens, 1);
    }
}
