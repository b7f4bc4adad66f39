//! The OpenAI Responses API (`openai-responses`, `/v1/responses`): its stream events as
//! Python's `async_request_openai_responses` (vLLM 0.33) reads them, and its verdict.
//!
//! Every event names itself in its JSON `type` (the SSE `event:` line carries the same name,
//! and Python ignores it, so do we). What matters:
//! - `response.output_text.delta` and `response.reasoning_text.delta` are token events (the
//!   first sets TTFT, each later one adds an ITL gap); reasoning deltas count because the
//!   server is already decoding, but only output text is kept as the generated text;
//! - `response.completed` / `response.incomplete` end the request, with `response.usage`
//!   (`input_tokens`, `output_tokens`, and `output_tokens_details.reasoning_tokens` when the
//!   server counts them);
//! - `error` / `response.failed`, or any other event with a truthy `error`, fail the request
//!   with Python's error text, `json.dumps(data.get("error") or data)`.
//!
//! The same tape walk as [`super::tape`]: strings borrow the payload, unused
//! subtrees are jumped over, and only the error path (rare) allocates.

use serde_json::{json, Map, Value};

use super::reader::{FinishReason, StreamFacts, StreamReader, Token, TypedEvent, TypedEvents};
use super::tape::{
    opt_str, reasoning_tokens, to_value, token_count, truthy, ChunkDecoder, ChunkError, Json, Usage,
};
use super::{ApiSpec, BodyOptions};
use crate::pyfmt::json_dumps;

/// The Responses API.
pub struct Responses;

impl ApiSpec for Responses {
    /// Python's `async_request_openai_responses` payload.
    fn fields(
        &self,
        prompt: Value,
        output_len: usize,
        _: &BodyOptions,
        body: &mut Map<String, Value>,
    ) {
        body.insert("input".into(), prompt);
        body.insert("max_output_tokens".into(), json!(output_len));
        body.insert("stream".into(), json!(true));
        // Python: a server keeping stored responses would grow its heap over a run.
        body.insert("store".into(), json!(false));
    }

    fn reader(&self) -> Option<&'static dyn StreamReader> {
        Some(&ResponsesReader)
    }
}

/// The Responses API's reader.
pub struct ResponsesReader;

impl TypedEvents for ResponsesReader {
    type Kind = EventKind;
    const NO_TOKEN: &'static str = "the stream ended without an output or reasoning text delta";
    const NO_TERMINAL: &'static str =
        "the stream ended without response.completed or response.incomplete";

    fn decode<'a>(
        json: &mut ChunkDecoder,
        data: &'a mut [u8],
    ) -> Result<ResponsesEvent<'a>, ChunkError> {
        decode(json, data)
    }

    fn token<'a>(event: &mut ResponsesEvent<'a>) -> Option<Token<'a>> {
        event.is_token().then(|| Token {
            output: event.is_output(),
            text: event.delta.take(),
        })
    }

    fn apply(event: ResponsesEvent<'_>, facts: &mut StreamFacts) {
        if event.kind == EventKind::Terminal {
            facts.terminal = true;
            if let Some(u) = event.usage {
                facts.usage_completion_tokens =
                    u.completion_tokens.or(facts.usage_completion_tokens);
                facts.usage_prompt_tokens = u.prompt_tokens.or(facts.usage_prompt_tokens);
                facts.usage_reasoning_tokens = u.reasoning_tokens.or(facts.usage_reasoning_tokens);
            }
            facts.finish_reason = match event.reason.as_deref() {
                Some("incomplete") => Some(FinishReason::Length),
                Some("completed") => Some(FinishReason::Stop),
                Some(_) => Some(FinishReason::Other),
                None => facts.finish_reason,
            };
        } else if let Some(error) = event.error {
            facts.stream_error = Some(error);
        }
    }
}

/// What an event means to the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// `response.output_text.delta`: a token; its `delta` is generated text.
    OutputText,
    /// `response.reasoning_text.delta`: a token whose text is not kept.
    ReasoningText,
    /// `response.completed` / `response.incomplete`: the end, with usage.
    Terminal,
    /// Anything else (`response.created`, `response.output_item.added`, …): ignored.
    Other,
}

/// What the client needs from one Responses event.
pub type ResponsesEvent<'a> = TypedEvent<'a, EventKind>;

impl ResponsesEvent<'_> {
    /// Whether Python counts this event as a token (TTFT, then ITL).
    pub fn is_token(&self) -> bool {
        matches!(self.kind, EventKind::OutputText | EventKind::ReasoningText)
    }

    /// Whether this token is an answer token (output text), not reasoning: what TTFO waits
    /// for.
    pub fn is_output(&self) -> bool {
        self.kind == EventKind::OutputText
    }
}

/// Decode one event payload in place.
pub fn decode<'a>(
    decoder: &mut ChunkDecoder,
    data: &'a mut [u8],
) -> Result<ResponsesEvent<'a>, ChunkError> {
    decoder.decode_with(data, read_event)
}

fn kind_of(event_type: Option<&str>) -> EventKind {
    match event_type {
        Some("response.output_text.delta") => EventKind::OutputText,
        Some("response.reasoning_text.delta") => EventKind::ReasoningText,
        Some("response.completed" | "response.incomplete") => EventKind::Terminal,
        _ => EventKind::Other,
    }
}

fn read_event<'a>(root: Json<'_, 'a>) -> Result<ResponsesEvent<'a>, ChunkError> {
    let members = root.members().ok_or(ChunkError::NotAnObject)?;
    let mut event_type = None;
    let (mut delta, mut response, mut error) = (None, None, None);
    for (key, value) in members {
        match key {
            "type" => event_type = value.as_str(),
            "delta" => delta = Some(value),
            "response" => response = Some(value),
            "error" => error = Some(value),
            _ => {}
        }
    }
    let kind = kind_of(event_type);
    let mut event = ResponsesEvent::new(kind);
    match kind {
        EventKind::OutputText => {
            event.delta = delta.map(|d| opt_str(d, "delta")).transpose()?.flatten();
        }
        EventKind::ReasoningText => {}
        EventKind::Terminal => {
            if let Some(r) = response {
                read_response(r, &mut event)?;
            }
        }
        EventKind::Other => {
            let named_error = matches!(event_type, Some("error" | "response.failed"));
            let error = error.filter(|e| truthy(*e));
            if named_error || error.is_some() {
                event.error = Some(json_dumps(&to_value(error.unwrap_or(root))));
            }
        }
    }
    Ok(event)
}

/// A terminal event's `response`: its `status` and `usage` (`null` or absent = none).
fn read_response<'a>(
    value: Json<'_, 'a>,
    event: &mut ResponsesEvent<'a>,
) -> Result<(), ChunkError> {
    let Some(members) = value.object_or_null("response")? else {
        return Ok(());
    };
    for (key, value) in members {
        match key {
            "status" => event.reason = opt_str(value, "response.status")?,
            "usage" if !value.is_null() => event.usage = Some(read_usage(value)?),
            _ => {}
        }
    }
    Ok(())
}

fn read_usage(value: Json<'_, '_>) -> Result<Usage, ChunkError> {
    let members = value.members().ok_or(ChunkError::BadField {
        field: "response.usage",
        expected: "an object or null",
    })?;
    let mut usage = Usage::default();
    for (key, value) in members {
        match key {
            "input_tokens" => {
                usage.prompt_tokens = token_count(value, "response.usage.input_tokens")?;
            }
            "output_tokens" => {
                usage.completion_tokens = token_count(value, "response.usage.output_tokens")?;
            }
            "output_tokens_details" => {
                usage.reasoning_tokens =
                    reasoning_tokens(value, "response.usage.output_tokens_details")?;
            }
            _ => {}
        }
    }
    Ok(usage)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    fn event(json: &str) -> ResponsesEvent<'static> {
        let mut data = json.as_bytes().to_vec();
        let e = decode(&mut ChunkDecoder::new(), &mut data).expect("valid event");
        ResponsesEvent {
            delta: e.delta.map(|d| Cow::Owned(d.into_owned())),
            reason: e.reason.map(|d| Cow::Owned(d.into_owned())),
            ..e
        }
    }

    #[test]
    fn deltas_are_tokens_and_only_output_text_is_kept() {
        let e = event(
            r#"{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":" Hello","logprobs":[]}"#,
        );
        assert_eq!(e.kind, EventKind::OutputText);
        assert!(e.is_token());
        assert_eq!(e.delta.as_deref(), Some(" Hello"));
        let r = event(
            r#"{"type":"response.reasoning_text.delta","item_id":"rs_1","output_index":0,"content_index":0,"delta":"think","sequence_number":2}"#,
        );
        assert!(r.is_token());
        assert_eq!(r.delta, None, "reasoning text is timed, not kept");
        for other in [
            r#"{"type":"response.created","response":{"id":"resp_1","status":"in_progress","usage":null}}"#,
            r#"{"type":"response.output_text.done","text":"Hello"}"#,
            r#"{"type":"response.content_part.added","part":{"type":"output_text","text":""}}"#,
            r#"{"delta":"x"}"#,
        ] {
            let e = event(other);
            assert!(
                !e.is_token() && e.error.is_none() && e.usage.is_none(),
                "{other}"
            );
        }
    }

    #[test]
    fn terminal_events_carry_usage_and_status() {
        let e = event(
            r#"{"type":"response.completed","sequence_number":9,"response":{"id":"resp_1","object":"response","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[{"type":"message","content":[{"type":"output_text","text":"a b"}]}],"usage":{"input_tokens":12,"input_tokens_details":{"cached_tokens":0},"output_tokens":5,"output_tokens_details":{"reasoning_tokens":2},"total_tokens":17}}}"#,
        );
        assert_eq!(e.kind, EventKind::Terminal);
        assert_eq!(
            e.usage,
            Some(Usage {
                prompt_tokens: Some(12),
                completion_tokens: Some(5),
                reasoning_tokens: Some(2),
                cached_tokens: None,
            })
        );
        assert_eq!(e.reason.as_deref(), Some("incomplete"));
        let e = event(r#"{"type":"response.incomplete","response":{"usage":null}}"#);
        assert_eq!((e.kind, e.usage), (EventKind::Terminal, None));
        let e = event(r#"{"type":"response.completed"}"#);
        assert_eq!((e.kind, e.usage), (EventKind::Terminal, None));
    }

    #[test]
    fn errors_carry_python_json_dumps() {
        let e = event(
            r#"{"type":"error","code":"server_error","message":"boom","param":null,"sequence_number":3}"#,
        );
        assert_eq!(
            e.error.as_deref(),
            Some(
                r#"{"type": "error", "code": "server_error", "message": "boom", "param": null, "sequence_number": 3}"#
            ),
            "no `error` member: the whole event is dumped"
        );
        let e = event(
            r#"{"type":"response.failed","response":{"status":"failed","error":{"code":"x","message":"y"}}}"#,
        );
        assert!(e
            .error
            .as_deref()
            .unwrap()
            .starts_with(r#"{"type": "response.failed", "response": {"status": "failed""#));
        let e = event(r#"{"type":"whatever","error":{"message":"caf\u00e9"}}"#);
        assert_eq!(e.error.as_deref(), Some(r#"{"message": "caf\u00e9"}"#));
        for not_error in [
            r#"{"type":"whatever","error":null}"#,
            r#"{"type":"whatever","error":{}}"#,
            r#"{"type":"whatever","error":""}"#,
            r#"{"type":"response.output_text.delta","delta":"a","error":"x"}"#,
        ] {
            assert_eq!(event(not_error).error, None, "{not_error}");
        }
    }

    #[test]
    fn bad_events_are_errors() {
        let mut dec = ChunkDecoder::new();
        for (bad, kind) in [
            (&b"[1]"[..], "chunk_not_an_object"),
            (b"{\"type\":", "chunk_invalid_json"),
            (
                br#"{"type":"response.output_text.delta","delta":5}"#,
                "chunk_bad_field",
            ),
            (
                br#"{"type":"response.completed","response":{"usage":{"output_tokens":"5"}}}"#,
                "chunk_bad_field",
            ),
            (
                br#"{"type":"response.completed","response":[]}"#,
                "chunk_bad_field",
            ),
        ] {
            let mut data = bad.to_vec();
            let err = decode(&mut dec, &mut data).expect_err(&String::from_utf8_lossy(bad));
            assert_eq!(err.kind(), kind, "{}", String::from_utf8_lossy(bad));
        }
    }
}
