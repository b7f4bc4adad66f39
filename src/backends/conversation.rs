//! Chat bodies of a conversation, assembled from message parts: a turn's body is the fixed
//! fields of every chat request with the `messages` list written as shared [`Bytes`], one
//! part per message. The next turn adds the answer and its new user message as two more
//! parts; the history already serialized is shared, never re-serialized or copied.

use bytes::Bytes;
use serde_json::{json, Value};

use super::{body_fields, serialize, Api, BodyError, BodyOptions};
use crate::http::request::{HeadTemplate, Ids, PreparedRequest};

/// Where the messages list and the output-token limit go in [`ChatBody`].
const MESSAGES_SLOT: &str = "\0vllm-bench-messages\0";
const OUTPUT_SLOT: &str = "\0vllm-bench-max-tokens\0";

/// One piece of a chat body.
#[derive(Debug, Clone)]
enum Piece {
    Fixed(Bytes),
    /// The `messages` list.
    Messages,
    /// The output-token limit (`max_completion_tokens`, and `min_tokens` when set; Anthropic
    /// `max_tokens`).
    OutputLen,
}

/// The bytes of a chat body around its `messages` list and its output-token limit, split
/// once so that each turn only adds its own parts.
#[derive(Debug, Clone)]
pub struct ChatBody {
    pieces: Vec<Piece>,
}

impl ChatBody {
    /// The body `api` sends (Python's openai-chat body, or Anthropic's Messages body), with
    /// `min_tokens` set to the output length when `min_tokens` is true (synthetic
    /// conversations: every answer has the planned length without `--ignore-eos`) unless
    /// `--extra-body` sets it. The Messages API has no `min_tokens`: it is never sent there.
    pub fn new(api: Api, opts: &BodyOptions, min_tokens: bool) -> Result<ChatBody, BodyError> {
        if opts.extra_body.contains_key("messages") {
            return Err(BodyError::ExtraBodyMessages);
        }
        let mut map = body_fields(api, Value::Null, 0, opts);
        map.insert("messages".into(), json!(MESSAGES_SLOT));
        let limit = api.spec().output_limit();
        if !opts.extra_body.contains_key(limit) {
            map.insert(limit.into(), json!(OUTPUT_SLOT));
        }
        let min_tokens = min_tokens && api.spec().takes_min_tokens();
        if min_tokens && !opts.extra_body.contains_key("min_tokens") {
            map.insert("min_tokens".into(), json!(OUTPUT_SLOT));
        }
        let body = Bytes::from(serialize(&map)?);
        let slots = [
            (serialize(&json!(MESSAGES_SLOT))?, Piece::Messages),
            (serialize(&json!(OUTPUT_SLOT))?, Piece::OutputLen),
        ];
        let mut pieces = Vec::new();
        let mut at = 0;
        while at < body.len() {
            let next = slots
                .iter()
                .filter_map(|(slot, piece)| {
                    memchr::memmem::find(&body[at..], slot).map(|i| (at + i, slot.len(), piece))
                })
                .min_by_key(|(i, _, _)| *i);
            match next {
                Some((i, len, piece)) => {
                    if i > at {
                        pieces.push(Piece::Fixed(body.slice(at..i)));
                    }
                    pieces.push(piece.clone());
                    at = i + len;
                }
                None => {
                    pieces.push(Piece::Fixed(body.slice(at..)));
                    at = body.len();
                }
            }
        }
        Ok(ChatBody { pieces })
    }

    /// [`ChatBody::new`] whose output-token limit is the server's: the API's limit field is
    /// sent as `null` (a `dag_jsonl` turn without `max_tokens`); [`ChatBody::parts`] then
    /// ignores its `output_len`.
    pub fn with_server_limit(api: Api, opts: &BodyOptions) -> Result<ChatBody, BodyError> {
        let mut opts = opts.clone();
        let limit = api.spec().output_limit();
        opts.extra_body
            .entry(limit.to_string())
            .or_insert(Value::Null);
        ChatBody::new(api, &opts, false)
    }

    /// The body with `messages` (each one serialized message) and `output_len`.
    pub fn parts(&self, messages: &[Bytes], output_len: usize) -> Vec<Bytes> {
        let mut out = Vec::with_capacity(2 * messages.len() + self.pieces.len() + 2);
        let len = Bytes::from(output_len.to_string());
        for piece in &self.pieces {
            match piece {
                Piece::Fixed(b) => out.push(b.clone()),
                Piece::OutputLen => out.push(len.clone()),
                Piece::Messages => {
                    out.push(Bytes::from_static(b"["));
                    for (i, m) in messages.iter().enumerate() {
                        if i > 0 {
                            out.push(Bytes::from_static(b","));
                        }
                        out.push(m.clone());
                    }
                    out.push(Bytes::from_static(b"]"));
                }
            }
        }
        out
    }
}

/// A conversation's messages as sent so far, each serialized once and shared by every later
/// request of the conversation (and by a fork's copy): a turn adds its own messages, the
/// answer is added exactly as it was streamed, and a request is the fixed body around them.
/// Multi-turn conversations and `dag_jsonl` streams both keep one.
#[derive(Debug, Clone, Default)]
pub struct Transcript {
    messages: Vec<Bytes>,
    /// Prompt tokens of the messages, as the client counts them.
    tokens: u64,
}

impl Transcript {
    /// Adds one serialized message of `tokens` tokens.
    pub fn push(&mut self, message: Bytes, tokens: u64) {
        self.messages.push(message);
        self.tokens += tokens;
    }

    /// Adds the answer to the last request as an assistant message (`tokens`: its length).
    pub fn push_answer(&mut self, text: &str, tokens: u64) {
        self.push(assistant_message(text), tokens);
    }

    /// Forgets every message (a conversation sent without its history).
    pub fn clear(&mut self) {
        self.messages.clear();
        self.tokens = 0;
    }

    pub fn messages(&self) -> &[Bytes] {
        &self.messages
    }

    /// The client's prompt length of a request of these messages.
    pub fn tokens(&self) -> u64 {
        self.tokens
    }

    /// The request of these messages: `head` with `ids`, `body` with `output_len`.
    pub fn request(
        &self,
        head: &HeadTemplate,
        ids: Ids<'_>,
        body: &ChatBody,
        output_len: usize,
    ) -> PreparedRequest {
        head.build_parts_with(
            ids,
            Some("application/json"),
            body.parts(&self.messages, output_len),
        )
    }
}

/// A user message as Python's chat backend writes one: list content with one text part
/// (also an Anthropic user message: the same text block).
pub fn user_message(text: &str) -> Bytes {
    message(json!({ "role": "user", "content": [{ "type": "text", "text": text }] }))
}

/// An assistant message holding an answer exactly as it was streamed (string content, which
/// Anthropic's Messages API takes too).
pub fn assistant_message(text: &str) -> Bytes {
    message(json!({ "role": "assistant", "content": text }))
}

fn message(value: Value) -> Bytes {
    Bytes::from(serde_json::to_vec(&value).expect("a message of strings serializes"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::build_body;
    use crate::datasets::Prompt;
    use serde_json::Map;

    fn opts(extra: Map<String, Value>) -> BodyOptions {
        BodyOptions {
            model: "m".into(),
            logprobs: None,
            ignore_eos: false,
            extra_body: extra,
        }
    }

    #[test]
    fn one_message_is_the_plain_chat_body() {
        let body = ChatBody::new(Api::Chat, &opts(Map::new()), false).unwrap();
        let joined = body.parts(&[user_message("hi \"there\"")], 7).concat();
        let plain = build_body(
            Api::Chat,
            &Prompt::Text("hi \"there\"".into()),
            7,
            &opts(Map::new()),
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(joined).unwrap(),
            String::from_utf8(plain).unwrap()
        );
    }

    #[test]
    fn history_and_min_tokens() {
        let mut extra = Map::new();
        extra.insert("temperature".into(), json!(0.5));
        let body = ChatBody::new(Api::Chat, &opts(extra), true).unwrap();
        let messages = [
            user_message("a"),
            assistant_message("b\n"),
            user_message("c"),
        ];
        let v: Value = serde_json::from_slice(&body.parts(&messages, 12).concat()).unwrap();
        assert_eq!(
            v["messages"][1],
            json!({"role": "assistant", "content": "b\n"})
        );
        assert_eq!(v["messages"][2]["content"][0]["text"], "c");
        assert_eq!(v["max_completion_tokens"], 12);
        assert_eq!(v["min_tokens"], 12);
        assert_eq!(v["temperature"], 0.5);
        let mut fixed = Map::new();
        fixed.insert("min_tokens".into(), json!(1));
        let v: Value = serde_json::from_slice(
            &ChatBody::new(Api::Chat, &opts(fixed), true)
                .unwrap()
                .parts(&messages, 3)
                .concat(),
        )
        .unwrap();
        assert_eq!(
            (v["min_tokens"].clone(), v["max_completion_tokens"].clone()),
            (json!(1), json!(3))
        );
    }

    #[test]
    fn an_anthropic_conversation_limits_max_tokens_and_sends_no_min_tokens() {
        let body = ChatBody::new(Api::AnthropicMessages, &opts(Map::new()), true).unwrap();
        let messages = [user_message("a"), assistant_message("b"), user_message("c")];
        let text = String::from_utf8(body.parts(&messages, 9).concat()).unwrap();
        assert_eq!(
            text,
            r#"{"model":"m","max_tokens":9,"messages":[{"role":"user","content":[{"type":"text","text":"a"}]},{"role":"assistant","content":"b"},{"role":"user","content":[{"type":"text","text":"c"}]}],"stream":true}"#
        );
        let one = ChatBody::new(Api::AnthropicMessages, &opts(Map::new()), false).unwrap();
        let plain = build_body(
            Api::AnthropicMessages,
            &Prompt::Text("q".into()),
            4,
            &opts(Map::new()),
        )
        .unwrap();
        assert_eq!(one.parts(&[user_message("q")], 4).concat(), plain);
    }

    #[test]
    fn extra_body_messages_are_refused() {
        let mut extra = Map::new();
        extra.insert("messages".into(), json!([]));
        assert!(ChatBody::new(Api::Chat, &opts(extra), false)
            .unwrap_err()
            .to_string()
            .contains("--extra-body"));
    }
}
