//! The `/v1/responses` events and body as vLLM sends them: `response.created` when the
//! request is accepted, one `response.output_text.delta` per content chunk, and the terminal
//! `response.completed` carrying the usage (`status: "incomplete"`, because the mock always
//! stops at the output-token limit, which vLLM reports this way). No `[DONE]` follows.
//!
//! Every event of a stream is serialized once (see `generation::Script`), so events that
//! differ only by their position (`sequence_number`) would each need their own bytes; the
//! mock leaves `sequence_number` out, which no client reads.
//!
//! With reasoning, `response.reasoning_text.delta` events (output item 0) come before the
//! output text (item 1), and the usage's `output_tokens_details.reasoning_tokens` counts them.

use std::io::Write;

use super::response::{padding_member, push_tokens};

/// The names of the events the mock sends (also their SSE `event:` line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    Created,
    ReasoningDelta,
    Delta,
    Completed,
    Error,
}

impl Event {
    /// The event's `type` (and SSE `event:` name).
    pub fn name(self) -> &'static str {
        match self {
            Event::Created => "response.created",
            Event::ReasoningDelta => "response.reasoning_text.delta",
            Event::Delta => "response.output_text.delta",
            Event::Completed => "response.completed",
            Event::Error => "error",
        }
    }
}

/// What the events of one response need.
#[derive(Debug, Clone, Copy)]
pub struct Response {
    /// Response id suffix (32 hex digits).
    pub id: u128,
    /// `created_at` (Unix seconds).
    pub created: u64,
    /// `usage.input_tokens`.
    pub prompt_tokens: u64,
    /// `usage.output_tokens`.
    pub tokens: u64,
    /// Of `tokens`, the reasoning ones (sent first).
    pub reasoning: u64,
    /// Report usage (else `"usage": null`).
    pub usage: bool,
    /// Filler bytes in every event and body.
    pub padding: usize,
}

impl Response {
    /// `"response":{…}` (the object every lifecycle event carries), `status` as given;
    /// `with_output` adds the full output text.
    fn object(&self, out: &mut Vec<u8>, model_json: &str, status: &str, with_output: bool) {
        let _ = write!(
            out,
            "{{\"id\":\"resp_{:032x}\",\"object\":\"response\",\"created_at\":{},\"model\":{model_json},\"status\":\"{status}\",",
            self.id, self.created
        );
        if status == "incomplete" {
            out.extend_from_slice(b"\"incomplete_details\":{\"reason\":\"max_output_tokens\"},");
        }
        out.extend_from_slice(b"\"output\":[");
        if with_output {
            let _ = write!(
                out,
                "{{\"id\":\"msg_{:032x}\",\"type\":\"message\",\"role\":\"assistant\",\"status\":\"{status}\",\"content\":[{{\"type\":\"output_text\",\"annotations\":[],\"text\":\"",
                self.id
            );
            push_tokens(out, self.tokens - self.reasoning);
            out.extend_from_slice(b"\"}]}");
        }
        out.extend_from_slice(b"],\"usage\":");
        if self.usage && with_output {
            let _ = write!(
                out,
                "{{\"input_tokens\":{},\"input_tokens_details\":{{\"cached_tokens\":0}},\"output_tokens\":{},\"output_tokens_details\":{{\"reasoning_tokens\":{}}},\"total_tokens\":{}}}",
                self.prompt_tokens,
                self.tokens,
                self.reasoning,
                self.prompt_tokens + self.tokens
            );
        } else {
            out.extend_from_slice(b"null");
        }
        out.push(b'}');
    }

    /// `response.created`.
    pub fn created(&self, out: &mut Vec<u8>, model_json: &str) {
        out.extend_from_slice(b"{\"type\":\"response.created\",");
        padding_member(out, self.padding);
        out.extend_from_slice(b"\"response\":");
        self.object(out, model_json, "in_progress", false);
        out.push(b'}');
    }

    /// `response.reasoning_text.delta` with `tokens` tokens of reasoning (output item 0).
    pub fn reasoning_delta(&self, out: &mut Vec<u8>, tokens: u64) {
        let _ = write!(
            out,
            "{{\"type\":\"response.reasoning_text.delta\",\"item_id\":\"rs_{:032x}\",\"output_index\":0,\"content_index\":0,",
            self.id
        );
        padding_member(out, self.padding);
        out.extend_from_slice(b"\"delta\":\"");
        push_tokens(out, tokens);
        out.extend_from_slice(b"\"}");
    }

    /// `response.output_text.delta` with `tokens` tokens of text (output item 1 after
    /// reasoning, else 0).
    pub fn delta(&self, out: &mut Vec<u8>, tokens: u64) {
        let _ = write!(
            out,
            "{{\"type\":\"response.output_text.delta\",\"item_id\":\"msg_{:032x}\",\"output_index\":{},\"content_index\":0,",
            self.id,
            u8::from(self.reasoning > 0)
        );
        padding_member(out, self.padding);
        out.extend_from_slice(b"\"delta\":\"");
        push_tokens(out, tokens);
        out.extend_from_slice(b"\",\"logprobs\":[]}");
    }

    /// `response.completed` with the whole output and the usage.
    pub fn completed(&self, out: &mut Vec<u8>, model_json: &str) {
        out.extend_from_slice(b"{\"type\":\"response.completed\",");
        padding_member(out, self.padding);
        out.extend_from_slice(b"\"response\":");
        self.object(out, model_json, "incomplete", true);
        out.push(b'}');
    }
}

impl Response {
    /// vLLM's `error` event (an engine error after the stream started).
    pub fn error(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(
            b"{\"type\":\"error\",\"code\":\"server_error\",\"message\":\"injected fault: the mock server failed mid-stream\",\"param\":null}",
        );
    }
}

/// The non-streaming `/v1/responses` body (`stream: false`): the response object itself.
pub fn body(r: &Response, out: &mut Vec<u8>, model_json: &str) {
    r.object(out, model_json, "incomplete", true);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn response(usage: bool) -> Response {
        Response {
            id: 0xabc,
            created: 1_700_000_000,
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

    #[test]
    fn events_look_like_vllm() {
        let r = response(true);
        let created = json(|o| r.created(o, "\"m\""));
        assert_eq!(created["type"], "response.created");
        assert_eq!(created["response"]["status"], "in_progress");
        assert_eq!(created["response"]["usage"], Value::Null);
        let delta = json(|o| r.delta(o, 2));
        assert_eq!(delta["type"], Event::Delta.name());
        assert_eq!(delta["delta"], " tok tok");
        let done = json(|o| r.completed(o, "\"m\""));
        assert_eq!(done["type"], "response.completed");
        assert_eq!(done["response"]["status"], "incomplete");
        assert_eq!(done["response"]["model"], "m");
        assert_eq!(
            done["response"]["output"][0]["content"][0]["text"],
            " tok tok tok"
        );
        assert_eq!(done["response"]["usage"]["input_tokens"], 7);
        assert_eq!(done["response"]["usage"]["output_tokens"], 3);
        let without = json(|o| response(false).completed(o, "\"m\""));
        assert_eq!(without["response"]["usage"], Value::Null);
        let whole = json(|o| body(&r, o, "\"m\""));
        assert_eq!(whole["object"], "response");
        assert_eq!(whole["usage"]["total_tokens"], 10);
    }
}
