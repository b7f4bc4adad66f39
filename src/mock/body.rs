//! Model request bodies: the few fields the mock acts on, read in one pass over the JSON.
//!
//! Prompts are never materialised as `serde_json::Value`s: a visitor walks the prompt
//! (`prompt`, `messages`, `input`, `query`, `documents`) once and produces a [`Digest`]:
//! - `tokens`: the prompt token count, by the golden mock's rules —
//!   a token-id list counts its length; a string counts its whitespace-separated words
//!   (at least 1); a chat message counts its words when `content` is a string and **1**
//!   otherwise; anything else (an object, a number) counts 1;
//! - `hash`: a structural FNV-1a hash of the value (type-tagged, so `"1"` ≠ `1`, and
//!   independent of JSON whitespace) — equal prompts give equal hashes;
//! - `items`: one hash per input (a string or a token-id list is one input, a list of them
//!   is several) for embeddings and rerank;
//! - `blocks`: chained hashes of each full 16-token block of toy token ids (words through
//!   [`toy_tokenizer`](super::toy_tokenizer), ids as given, one synthetic id per non-string
//!   chat content), for the toy prefix cache.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use super::hash::Fnv64;
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

/// Accumulates a [`Digest`] while a visitor walks the value.
#[derive(Default)]
struct Acc {
    tokens: u64,
    hash: Fnv64,
    items: Vec<u64>,
    chain: Fnv64,
    in_block: usize,
    blocks: Vec<u64>,
}

impl Acc {
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

    /// A string counted as words (at least 1); feeds the hash and the block chain.
    fn words(&mut self, s: &str, hash: &mut Fnv64) {
        hash_str(hash, s);
        let mut n = 0u64;
        for w in s.split_whitespace() {
            self.push_id(u64::from(word_id(w)));
            n += 1;
        }
        self.tokens += n.max(1);
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
        let mut acc = Acc::default();
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
        self.0.words(s, &mut item);
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
        self.acc.words(s, &mut item);
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

/// A chat `messages` list: each message's `content` counted by the golden rule.
#[derive(Debug, Default, Clone)]
pub struct Messages(pub Digest);

impl<'de> Deserialize<'de> for Messages {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut acc = Acc::default();
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
        let mut counted = false;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            hash_str(&mut hash, &key);
            if key == "content" {
                map.next_value_seed(ContentSeed {
                    acc: &mut *acc,
                    hash: &mut hash,
                })?;
                counted = true;
            } else {
                map.next_value_seed(HashVisitor(&mut hash))?;
            }
        }
        if !counted {
            // No content at all (e.g. an assistant tool call): "otherwise" counts 1.
            acc.tokens += 1;
            acc.push_id(u64::MAX);
        }
        hash.write_u8(TAG_END);
        acc.hash = hash;
        Ok(())
    }
}

/// A message's `content`: a string counts its words, anything else 1.
struct ContentSeed<'a> {
    acc: &'a mut Acc,
    hash: &'a mut Fnv64,
}

impl<'de> DeserializeSeed<'de> for ContentSeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl ContentSeed<'_> {
    /// Non-string content: 1 token whose toy id is the content's own hash.
    fn other(self, feed: impl FnOnce(&mut Fnv64)) {
        let mut item = Fnv64::new();
        feed(&mut item);
        self.hash.write_u64(item.finish());
        self.acc.tokens += 1;
        self.acc.push_id(item.finish());
    }
}

impl<'de> Visitor<'de> for ContentSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("message content")
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<(), E> {
        self.acc.words(s, self.hash);
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<(), A::Error> {
        let mut res = Ok(());
        self.other(|h| res = HashVisitor(h).visit_seq(seq));
        res
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        let mut res = Ok(());
        self.other(|h| res = HashVisitor(h).visit_map(map));
        res
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.other(|h| h.write_u8(TAG_NULL));
        Ok(())
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<(), E> {
        self.other(|h| h.write_u8(if v { TAG_TRUE } else { TAG_FALSE }));
        Ok(())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        self.other(|h| {
            h.write_u8(TAG_INT);
            h.write_u64(v)
        });
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        self.visit_u64(v as u64)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        self.other(|h| {
            h.write_u8(TAG_FLOAT);
            h.write_u64(v.to_bits())
        });
        Ok(())
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
    fn chat_string_content_counts_words_list_content_counts_one() {
        let b = gen(r#"{"messages":[{"role":"system","content":"be brief"},
                {"role":"user","content":[{"type":"text","text":"many words here"}]}]}"#);
        assert_eq!(b.messages.unwrap().0.tokens, 2 + 1);
        let b = gen(r#"{"messages":[{"role":"assistant","content":null}]}"#);
        assert_eq!(b.messages.unwrap().0.tokens, 1);
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
