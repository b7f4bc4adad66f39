//! The Anthropic Messages (`/v1/messages`) events and body as vLLM 0.33's
//! `entrypoints/anthropic` sends them (pydantic `exclude_unset` JSON, fields in the model's
//! order, each with its `event:` line): `message_start` with the input usage, one text block
//! (`content_block_start`, one `content_block_delta` / `text_delta` per content chunk,
//! `content_block_stop`), `message_delta` with `stop_reason: "max_tokens"` (the mock always
//! stops at the output-token limit) and the usage, and `message_stop`. No `[DONE]`, no
//! `ping` (vLLM sends none). The `stream_error` fault sends vLLM's `error` event instead of
//! the rest of the stream.
//!
//! With reasoning, a `thinking` block (index 0, `thinking_delta`s) comes first and the text
//! block is index 1. Anthropic's usage has no reasoning count (`output_tokens` includes the
//! thinking).

use std::io::Write;

use super::response::{padding_member, push_tokens};

/// The names of the events the mock sends (also their SSE `event:` line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    MessageStart,
    BlockStart,
    BlockDelta,
    BlockStop,
    MessageDelta,
    MessageStop,
    Error,
}

impl Event {
    /// The event's `type` (and SSE `event:` name).
    pub fn name(self) -> &'static str {
        match self {
            Event::MessageStart => "message_start",
            Event::BlockStart => "content_block_start",
            Event::BlockDelta => "content_block_delta",
            Event::BlockStop => "content_block_stop",
            Event::MessageDelta => "message_delta",
            Event::MessageStop => "message_stop",
            Event::Error => "error",
        }
    }
}

/// What the events of one message need.
#[derive(Debug, Clone, Copy)]
pub struct Message {
    /// Message id suffix (32 hex digits).
    pub id: u128,
    /// `usage.input_tokens`.
    pub prompt_tokens: u64,
    /// `usage.output_tokens`.
    pub tokens: u64,
    /// Of `tokens`, the thinking ones (sent first, in their own block).
    pub reasoning: u64,
    /// Report usage (else no `usage` member).
    pub usage: bool,
    /// Filler bytes in every event and body.
    pub padding: usize,
}

impl Message {
    fn usage_json(&self, out: &mut Vec<u8>, output_tokens: u64) {
        let _ = write!(
            out,
            "\"usage\":{{\"input_tokens\":{},\"output_tokens\":{output_tokens}}}",
            self.prompt_tokens
        );
    }

    /// The message object; `content` is written by `content` (between the brackets).
    fn object(
        &self,
        out: &mut Vec<u8>,
        model_json: &str,
        stop_reason: &str,
        output_tokens: u64,
        content: impl FnOnce(&mut Vec<u8>),
    ) {
        let _ = write!(
            out,
            "{{\"id\":\"chatcmpl-{:032x}\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[",
            self.id
        );
        content(out);
        let _ = write!(
            out,
            "],\"model\":{model_json},\"stop_reason\":{stop_reason},\"stop_sequence\":null"
        );
        if self.usage {
            out.push(b',');
            self.usage_json(out, output_tokens);
        }
        out.push(b'}');
    }

    /// `message_start` (with the padding member): what the stream opens with.
    pub fn start(&self, out: &mut Vec<u8>, model_json: &str) {
        out.extend_from_slice(b"{\"type\":\"message_start\",");
        padding_member(out, self.padding);
        out.extend_from_slice(b"\"message\":");
        self.object(out, model_json, "null", 0, |_| {});
        out.push(b'}');
    }

    /// The text block's index: 1 after a thinking block, else 0.
    fn text_index(&self) -> u8 {
        u8::from(self.reasoning > 0)
    }

    /// `content_block_start` of the first block: the thinking block with reasoning, else
    /// the text block.
    pub fn block_start(&self, out: &mut Vec<u8>) {
        if self.reasoning > 0 {
            out.extend_from_slice(
                b"{\"type\":\"content_block_start\",\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"},\"index\":0}",
            );
        } else {
            self.text_start(out);
        }
    }

    /// `content_block_start` of the text block.
    pub fn text_start(&self, out: &mut Vec<u8>) {
        let _ = write!(
            out,
            "{{\"type\":\"content_block_start\",\"content_block\":{{\"type\":\"text\",\"text\":\"\"}},\"index\":{}}}",
            self.text_index()
        );
    }

    /// `content_block_delta` with `tokens` tokens of thinking (block 0).
    pub fn thinking_delta(&self, out: &mut Vec<u8>, tokens: u64) {
        out.extend_from_slice(b"{\"type\":\"content_block_delta\",");
        padding_member(out, self.padding);
        out.extend_from_slice(b"\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"");
        push_tokens(out, tokens);
        out.extend_from_slice(b"\"},\"index\":0}");
    }

    /// `content_block_stop` of the thinking block.
    pub fn thinking_stop(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"type\":\"content_block_stop\",\"index\":0}");
    }

    /// `content_block_delta` with `tokens` tokens of text.
    pub fn delta(&self, out: &mut Vec<u8>, tokens: u64) {
        out.extend_from_slice(b"{\"type\":\"content_block_delta\",");
        padding_member(out, self.padding);
        out.extend_from_slice(b"\"delta\":{\"type\":\"text_delta\",\"text\":\"");
        push_tokens(out, tokens);
        let _ = write!(out, "\"}},\"index\":{}}}", self.text_index());
    }

    /// `content_block_stop` of the text block.
    pub fn block_stop(&self, out: &mut Vec<u8>) {
        let _ = write!(
            out,
            "{{\"type\":\"content_block_stop\",\"index\":{}}}",
            self.text_index()
        );
    }

    /// `message_delta` with the stop reason and the usage.
    pub fn message_delta(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(
            b"{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\",\"stop_sequence\":null}",
        );
        if self.usage {
            out.push(b',');
            self.usage_json(out, self.tokens);
        }
        out.push(b'}');
    }

    /// `message_stop`.
    pub fn message_stop(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"type\":\"message_stop\"}");
    }

    /// vLLM's `error` event (an engine error after the stream started).
    pub fn error(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(
            b"{\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"injected fault: the mock server failed mid-stream\"}}",
        );
    }
}

/// The non-streaming `/v1/messages` body (`stream: false`): the message itself.
pub fn body(m: &Message, out: &mut Vec<u8>, model_json: &str) {
    m.object(out, model_json, "\"max_tokens\"", m.tokens, |out| {
        out.extend_from_slice(b"{\"type\":\"text\",\"text\":\"");
        push_tokens(out, m.tokens - m.reasoning);
        out.extend_from_slice(b"\"}");
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn message(usage: bool) -> Message {
        Message {
            id: 0xabc,
            prompt_tokens: 7,
            tokens: 3,
            reasoning: 0,
            usage,
            padding: 0,
        }
    }

    fn json(fill: impl FnOnce(&mut Vec<u8>)) -> Value {
        let mut out = Vec::new();
        fill(&mut out);
        serde_json::from_slice(&out).expect("valid JSON")
    }

    fn text(fill: impl FnOnce(&mut Vec<u8>)) -> String {
        let mut out = Vec::new();
        fill(&mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn events_are_vllms_bytes() {
        let m = message(true);
        assert_eq!(
            text(|o| m.start(o, "\"m\"")),
            format!(
                r#"{{"type":"message_start","message":{{"id":"chatcmpl-{:032x}","type":"message","role":"assistant","content":[],"model":"m","stop_reason":null,"stop_sequence":null,"usage":{{"input_tokens":7,"output_tokens":0}}}}}}"#,
                0xabc
            )
        );
        assert_eq!(
            text(|o| m.block_start(o)),
            r#"{"type":"content_block_start","content_block":{"type":"text","text":""},"index":0}"#
        );
        assert_eq!(
            text(|o| m.delta(o, 2)),
            r#"{"type":"content_block_delta","delta":{"type":"text_delta","text":" tok tok"},"index":0}"#
        );
        assert_eq!(
            text(|o| m.block_stop(o)),
            r#"{"type":"content_block_stop","index":0}"#
        );
        assert_eq!(
            text(|o| m.message_delta(o)),
            r#"{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"input_tokens":7,"output_tokens":3}}"#
        );
        assert_eq!(text(|o| m.message_stop(o)), r#"{"type":"message_stop"}"#);
        assert_eq!(json(|o| m.error(o))["error"]["type"], "api_error");
        let quiet = message(false);
        assert!(json(|o| quiet.message_delta(o)).get("usage").is_none());
    }

    #[test]
    fn the_whole_body_is_the_message() {
        let v = json(|o| body(&message(true), o, "\"m\""));
        assert_eq!(v["type"], "message");
        assert_eq!(
            v["content"],
            json!([{"type": "text", "text": " tok tok tok"}])
        );
        assert_eq!(v["stop_reason"], "max_tokens");
        assert_eq!(v["usage"], json!({"input_tokens": 7, "output_tokens": 3}));
    }
}
