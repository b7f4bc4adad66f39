//! Anthropic's Messages API (`anthropic-messages`, `/v1/messages`): its stream events as
//! Anthropic documents the stream and vLLM 0.33's `entrypoints/anthropic` sends it, and its
//! verdict.
//!
//! Every event names itself in its JSON `type` (the SSE `event:` line carries the same name;
//! we read the JSON, as for the Responses API). What matters:
//! - `content_block_delta` with a non-empty `text_delta`, `thinking_delta` or
//!   `input_json_delta` is a token event (the first sets TTFT, each later one adds an ITL
//!   gap): the same rule as chat, where non-empty `delta.content`, `delta.reasoning` and tool
//!   calls are tokens. Only `text_delta` text is kept as the generated text;
//!   `signature_delta` is not a token;
//! - `message_start` carries the input usage (`message.usage`), `message_delta` the output
//!   usage and the `stop_reason`; a count in `message_delta` wins over `message_start`'s.
//!   The prompt count is `input_tokens + cache_read_input_tokens +
//!   cache_creation_input_tokens`: Anthropic (and vLLM with prompt token details) reports
//!   cached input apart, and the prompt is all three;
//! - `message_stop` ends the message;
//! - `error` fails the request with `<error.type>: <error.message>`;
//! - `ping`, `content_block_start` / `content_block_stop` and unknown events are ignored
//!   (Anthropic asks clients to ignore event types they do not know).
//!
//! The same tape walk as [`super::tape`]: strings borrow the payload, unused
//! subtrees are jumped over, and only the error path (rare) allocates.

use bytes::Bytes;
use serde_json::{json, Map, Value};

use super::chat::user_messages;
use super::reader::{FinishReason, StreamFacts, StreamReader, Token, TypedEvent, TypedEvents};
use super::tape::{opt_str, to_value, token_count, ChunkDecoder, ChunkError, Json, Usage};
use super::{prompt_value, ApiSpec, BodyError, BodyOptions, MmPosition};
use crate::datasets::media::ContentPart;
use crate::datasets::Prompt;
use crate::pyfmt::json_dumps;

/// The Messages API.
pub struct Messages;

impl ApiSpec for Messages {
    /// Anthropic's required fields; the stream always reports usage. A `system` prompt
    /// comes from `--extra-body '{"system": "..."}'` (merged like any field).
    fn fields(
        &self,
        prompt: Value,
        output_len: usize,
        _: &BodyOptions,
        body: &mut Map<String, Value>,
    ) {
        body.insert("max_tokens".into(), json!(output_len));
        body.insert("messages".into(), user_messages(prompt));
        body.insert("stream".into(), json!(true));
    }

    fn media_layout(
        &self,
        prompt: &Prompt,
        _: Option<&str>,
    ) -> Result<Option<(Value, MmPosition)>, BodyError> {
        Ok(Some((prompt_value(prompt), MmPosition::Last)))
    }

    fn takes_content(&self) -> bool {
        true
    }

    fn content_parts(&self, item: &ContentPart) -> Result<Vec<Bytes>, BodyError> {
        Ok(anthropic_block(item)?.parts)
    }

    fn output_limit(&self) -> &'static str {
        "max_tokens"
    }

    /// The Messages API has no `min_tokens`.
    fn takes_min_tokens(&self) -> bool {
        false
    }

    fn reader(&self) -> Option<&'static dyn StreamReader> {
        Some(&AnthropicReader)
    }
}

/// The Anthropic content block of one chat content part: a text part as it is, an
/// `image_url` as an `image` block (a `data:…;base64,` URL as a `base64` source, any other
/// URL as a `url` source, which vLLM turns back into the same URL). Built before the clock;
/// the base64 data of a part made of several byte strings (`random-mm`'s images, shared by
/// every request that carries them) is referenced, not copied.
fn anthropic_block(item: &ContentPart) -> Result<ContentPart, BodyError> {
    const DATA_HEAD: &[u8] = br#"{"type":"image_url","image_url":{"url":"data:"#;
    const TAIL: &[u8] = br#""}}"#;
    if let [first, middle @ .., last] = &item.parts[..] {
        let media_end = first
            .strip_prefix(DATA_HEAD)
            .and_then(|rest| memchr::memmem::find(rest, b";base64,"));
        if let (Some(end), true) = (media_end, &last[..] == TAIL && !middle.is_empty()) {
            let media_type = &first[DATA_HEAD.len()..DATA_HEAD.len() + end];
            let plain = |c: &u8| c.is_ascii_alphanumeric() || b"/+.-".contains(c);
            if media_type.iter().all(plain) {
                let head = format!(
                    r#"{{"type":"image","source":{{"type":"base64","media_type":"{}","data":""#,
                    String::from_utf8_lossy(media_type)
                );
                let data_at = DATA_HEAD.len() + end + b";base64,".len();
                let mut parts = vec![Bytes::from(head)];
                if data_at < first.len() {
                    parts.push(first.slice(data_at..));
                }
                parts.extend(middle.iter().cloned());
                parts.push(Bytes::from_static(TAIL));
                return Ok(ContentPart { parts });
            }
        }
    }
    let part: Value = serde_json::from_slice(&item.to_vec()).map_err(BodyError::Serialize)?;
    let kind = part
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("untyped");
    let url = part
        .get("image_url")
        .and_then(|u| u.get("url"))
        .and_then(Value::as_str);
    let block = match (kind, url) {
        ("text", _) => {
            json!({ "type": "text", "text": part.get("text").cloned().unwrap_or_default() })
        }
        ("image_url", Some(url)) => {
            let base64 = url
                .strip_prefix("data:")
                .and_then(|rest| rest.split_once(";base64,"));
            match base64 {
                Some((media_type, data)) => json!({
                    "type": "image",
                    "source": { "type": "base64", "media_type": media_type, "data": data },
                }),
                None => json!({ "type": "image", "source": { "type": "url", "url": url } }),
            }
        }
        (kind, _) => return Err(BodyError::AnthropicMedia(kind.to_string())),
    };
    Ok(ContentPart::from_json(&block))
}

/// The Messages API's reader: deltas are tokens (text kept), `message_start` and
/// `message_delta` carry usage (the later count wins), `message_stop` ends the message,
/// `error` fails it.
pub struct AnthropicReader;

impl TypedEvents for AnthropicReader {
    type Kind = EventKind;
    const NO_TOKEN: &'static str = "the stream ended without a text, thinking or tool-input delta";
    const NO_TERMINAL: &'static str = "the stream ended without message_stop";

    fn decode<'a>(
        json: &mut ChunkDecoder,
        data: &'a mut [u8],
    ) -> Result<AnthropicEvent<'a>, ChunkError> {
        decode(json, data)
    }

    fn token<'a>(event: &mut AnthropicEvent<'a>) -> Option<Token<'a>> {
        event.is_token().then(|| Token {
            output: event.is_output(),
            text: match event.kind {
                EventKind::Text => event.delta.take(),
                _ => None,
            },
        })
    }

    fn apply(event: AnthropicEvent<'_>, facts: &mut StreamFacts) {
        if let Some(u) = event.usage {
            facts.usage_completion_tokens = u.completion_tokens.or(facts.usage_completion_tokens);
            facts.usage_prompt_tokens = u.prompt_tokens.or(facts.usage_prompt_tokens);
        }
        match event.kind {
            EventKind::MessageDelta => {
                facts.finish_reason = match event.reason.as_deref() {
                    Some("max_tokens") => Some(FinishReason::Length),
                    Some("end_turn" | "stop_sequence") => Some(FinishReason::Stop),
                    Some(_) => Some(FinishReason::Other),
                    None => facts.finish_reason,
                };
            }
            EventKind::MessageStop => facts.terminal = true,
            EventKind::Error => facts.stream_error = event.error,
            _ => {}
        }
    }
}

/// What an event means to the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// `message_start`: the input usage.
    MessageStart,
    /// `content_block_delta` / `text_delta`: answer text.
    Text,
    /// `content_block_delta` / `thinking_delta`: reasoning, timed but not kept.
    Thinking,
    /// `content_block_delta` / `input_json_delta`: a tool call's arguments (a token, as
    /// chat's tool calls are).
    ToolInput,
    /// `message_delta`: the stop reason and the output usage.
    MessageDelta,
    /// `message_stop`: the end of the message.
    MessageStop,
    /// `error`: the request failed mid-stream.
    Error,
    /// `ping`, block start/stop, `signature_delta`, unknown events: ignored.
    Other,
}

/// What the client needs from one Messages event.
pub type AnthropicEvent<'a> = TypedEvent<'a, EventKind>;

impl AnthropicEvent<'_> {
    /// Whether this event is a token (TTFT, then ITL): a non-empty text, thinking or
    /// tool-input delta.
    pub fn is_token(&self) -> bool {
        matches!(
            self.kind,
            EventKind::Text | EventKind::Thinking | EventKind::ToolInput
        ) && self.delta.as_deref().is_some_and(|d| !d.is_empty())
    }

    /// Whether this token is an answer token (text or tool input), not thinking: what TTFO
    /// waits for.
    pub fn is_output(&self) -> bool {
        self.is_token() && self.kind != EventKind::Thinking
    }

    /// The generated text this event adds (text deltas only).
    pub fn text(&self) -> Option<&str> {
        match self.kind {
            EventKind::Text => self.delta.as_deref(),
            _ => None,
        }
    }
}

/// Decode one event payload in place.
pub fn decode<'a>(
    decoder: &mut ChunkDecoder,
    data: &'a mut [u8],
) -> Result<AnthropicEvent<'a>, ChunkError> {
    decoder.decode_with(data, read_event)
}

fn read_event<'a>(root: Json<'_, 'a>) -> Result<AnthropicEvent<'a>, ChunkError> {
    let members = root.members().ok_or(ChunkError::NotAnObject)?;
    let mut event_type = None;
    let (mut message, mut delta, mut usage, mut error) = (None, None, None, None);
    for (key, value) in members {
        match key {
            "type" => event_type = value.as_str(),
            "message" => message = Some(value),
            "delta" => delta = Some(value),
            "usage" => usage = Some(value),
            "error" => error = Some(value),
            _ => {}
        }
    }
    let mut event = AnthropicEvent::new(EventKind::Other);
    match event_type {
        Some("message_start") => {
            event.kind = EventKind::MessageStart;
            if let Some(members) = message
                .map(|m| m.object_or_null("message"))
                .transpose()?
                .flatten()
            {
                for (key, value) in members {
                    if key == "usage" {
                        event.usage = read_usage(value, "message.usage")?;
                    }
                }
            }
        }
        Some("content_block_delta") => {
            if let Some(d) = delta.filter(|d| !d.is_null()) {
                read_block_delta(d, &mut event)?;
            }
        }
        Some("message_delta") => {
            event.kind = EventKind::MessageDelta;
            if let Some(members) = delta
                .map(|d| d.object_or_null("delta"))
                .transpose()?
                .flatten()
            {
                for (key, value) in members {
                    if key == "stop_reason" {
                        event.reason = opt_str(value, "delta.stop_reason")?;
                    }
                }
            }
            if let Some(u) = usage {
                event.usage = read_usage(u, "usage")?;
            }
        }
        Some("message_stop") => event.kind = EventKind::MessageStop,
        Some("error") => {
            event.kind = EventKind::Error;
            event.error = Some(error_text(error.unwrap_or(root), root));
        }
        _ => {}
    }
    Ok(event)
}

/// A `content_block_delta`'s `delta`: its kind by `type`, and its text.
fn read_block_delta<'a>(
    value: Json<'_, 'a>,
    event: &mut AnthropicEvent<'a>,
) -> Result<(), ChunkError> {
    let members = value.members().ok_or(ChunkError::BadField {
        field: "delta",
        expected: "an object or null",
    })?;
    let (mut kind, mut text, mut thinking, mut json) = (None, None, None, None);
    for (key, value) in members {
        match key {
            "type" => kind = value.as_str(),
            "text" => text = Some(value),
            "thinking" => thinking = Some(value),
            "partial_json" => json = Some(value),
            _ => {}
        }
    }
    let (kind, value, field) = match kind {
        Some("text_delta") => (EventKind::Text, text, "delta.text"),
        Some("thinking_delta") => (EventKind::Thinking, thinking, "delta.thinking"),
        Some("input_json_delta") => (EventKind::ToolInput, json, "delta.partial_json"),
        _ => return Ok(()),
    };
    event.kind = kind;
    event.delta = value.map(|v| opt_str(v, field)).transpose()?.flatten();
    Ok(())
}

/// `usage` of `message_start` / `message_delta` (`null` or absent = none).
fn read_usage(value: Json<'_, '_>, field: &'static str) -> Result<Option<Usage>, ChunkError> {
    let Some(members) = value.object_or_null(field)? else {
        return Ok(None);
    };
    let mut usage = Usage::default();
    let mut input: Option<u64> = None;
    for (key, value) in members {
        let count = match key {
            "input_tokens" => token_count(value, "usage.input_tokens")?,
            "cache_read_input_tokens" => token_count(value, "usage.cache_read_input_tokens")?,
            "cache_creation_input_tokens" => {
                token_count(value, "usage.cache_creation_input_tokens")?
            }
            "output_tokens" => {
                usage.completion_tokens = token_count(value, "usage.output_tokens")?;
                continue;
            }
            _ => continue,
        };
        if let Some(n) = count {
            input = Some(input.unwrap_or(0).saturating_add(n));
        }
    }
    usage.prompt_tokens = input;
    Ok(Some(usage))
}

/// An error event's reason: `<type>: <message>` of its `error` object, else the error (or
/// the whole event) as JSON.
#[cold]
fn error_text(error: Json<'_, '_>, root: Json<'_, '_>) -> String {
    let (mut kind, mut message) = (None, None);
    for (key, value) in error.members().into_iter().flatten() {
        match key {
            "type" => kind = value.as_str().filter(|s| !s.is_empty()),
            "message" => message = value.as_str().filter(|s| !s.is_empty()),
            _ => {}
        }
    }
    match (kind, message) {
        (Some(kind), Some(message)) => format!("{kind}: {message}"),
        (None, Some(message)) => message.to_string(),
        _ if error.is_null() => json_dumps(&to_value(root)),
        _ => json_dumps(&to_value(error)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    fn event(json: &str) -> AnthropicEvent<'static> {
        let mut data = json.as_bytes().to_vec();
        let e = decode(&mut ChunkDecoder::new(), &mut data).expect("valid event");
        AnthropicEvent {
            delta: e.delta.map(|d| Cow::Owned(d.into_owned())),
            reason: e.reason.map(|d| Cow::Owned(d.into_owned())),
            ..e
        }
    }

    /// vLLM 0.33's `message_start` (pydantic `exclude_unset`), as its serving.py builds it.
    const VLLM_START: &str = r#"{"type":"message_start","message":{"id":"chatcmpl-1","type":"message","role":"assistant","content":[],"model":"m","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":0}}}"#;

    #[test]
    fn message_start_carries_the_input_usage() {
        let e = event(VLLM_START);
        assert_eq!(e.kind, EventKind::MessageStart);
        assert!(!e.is_token());
        assert_eq!(
            e.usage,
            Some(Usage {
                prompt_tokens: Some(12),
                completion_tokens: Some(0),
                ..Usage::default()
            })
        );
        // Anthropic reports cached input apart: the prompt is all of it.
        let e = event(
            r#"{"type":"message_start","message":{"usage":{"input_tokens":3,"cache_creation_input_tokens":10,"cache_read_input_tokens":20,"output_tokens":1}}}"#,
        );
        assert_eq!(e.usage.unwrap().prompt_tokens, Some(33));
        let e = event(r#"{"type":"message_start","message":{"usage":null}}"#);
        assert_eq!((e.kind, e.usage), (EventKind::MessageStart, None));
    }

    #[test]
    fn text_thinking_and_tool_deltas_are_tokens_and_only_text_is_kept() {
        let t = event(
            r#"{"type":"content_block_delta","delta":{"type":"text_delta","text":" Hello"},"index":1}"#,
        );
        assert_eq!(t.kind, EventKind::Text);
        assert!(t.is_token());
        assert_eq!(t.text(), Some(" Hello"));
        let r = event(
            r#"{"type":"content_block_delta","delta":{"type":"thinking_delta","thinking":"hmm"},"index":0}"#,
        );
        assert_eq!(r.kind, EventKind::Thinking);
        assert!(r.is_token());
        assert_eq!(r.text(), None, "thinking is timed, not kept");
        let j = event(
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}"#,
        );
        assert!(j.is_token() && j.text().is_none());
        for not_token in [
            r#"{"type":"content_block_delta","delta":{"type":"text_delta","text":""},"index":0}"#,
            r#"{"type":"content_block_delta","delta":{"type":"signature_delta","signature":"c2ln"},"index":0}"#,
            r#"{"type":"content_block_start","content_block":{"type":"thinking","thinking":""},"index":0}"#,
            r#"{"type":"content_block_start","content_block":{"type":"text","text":""},"index":1}"#,
            r#"{"type":"content_block_stop","index":1}"#,
            r#"{"type":"ping"}"#,
            r#"{"type":"some_future_event","delta":{"type":"text_delta","text":"x"}}"#,
            r#"{"delta":{"type":"text_delta","text":"x"}}"#,
        ] {
            let e = event(not_token);
            assert!(
                !e.is_token() && e.error.is_none() && e.usage.is_none(),
                "{not_token}"
            );
        }
    }

    #[test]
    fn message_delta_carries_stop_reason_and_output_usage_and_stop_ends() {
        // vLLM: input and output counts; Anthropic: output only.
        let e = event(
            r#"{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"input_tokens":12,"output_tokens":5}}"#,
        );
        assert_eq!(e.kind, EventKind::MessageDelta);
        assert_eq!(e.reason.as_deref(), Some("max_tokens"));
        assert_eq!(
            e.usage,
            Some(Usage {
                prompt_tokens: Some(12),
                completion_tokens: Some(5),
                ..Usage::default()
            })
        );
        let e = event(
            r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}"#,
        );
        assert_eq!(
            e.usage,
            Some(Usage {
                prompt_tokens: None,
                completion_tokens: Some(15),
                ..Usage::default()
            })
        );
        assert_eq!(
            event(r#"{"type":"message_stop"}"#).kind,
            EventKind::MessageStop
        );
    }

    #[test]
    fn error_events_carry_type_and_message() {
        let e =
            event(r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#);
        assert_eq!(e.kind, EventKind::Error);
        assert_eq!(e.error.as_deref(), Some("overloaded_error: Overloaded"));
        let e = event(r#"{"type":"error","error":{"message":"caf\u00e9"}}"#);
        assert_eq!(e.error.as_deref(), Some("café"));
        let e = event(r#"{"type":"error","error":{"code":7}}"#);
        assert_eq!(e.error.as_deref(), Some(r#"{"code": 7}"#));
        let e = event(r#"{"type":"error"}"#);
        assert_eq!(e.error.as_deref(), Some(r#"{"type": "error"}"#));
    }

    #[test]
    fn bad_events_are_errors() {
        let mut dec = ChunkDecoder::new();
        for (bad, kind) in [
            (&b"[1]"[..], "chunk_not_an_object"),
            (b"{\"type\":", "chunk_invalid_json"),
            (
                br#"{"type":"content_block_delta","delta":{"type":"text_delta","text":5}}"#,
                "chunk_bad_field",
            ),
            (
                br#"{"type":"content_block_delta","delta":"x"}"#,
                "chunk_bad_field",
            ),
            (
                br#"{"type":"message_delta","usage":{"output_tokens":"5"}}"#,
                "chunk_bad_field",
            ),
            (
                br#"{"type":"message_start","message":{"usage":[]}}"#,
                "chunk_bad_field",
            ),
            (
                br#"{"type":"message_start","message":3}"#,
                "chunk_bad_field",
            ),
        ] {
            let mut data = bad.to_vec();
            let err = decode(&mut dec, &mut data).expect_err(&String::from_utf8_lossy(bad));
            assert_eq!(err.kind(), kind, "{}", String::from_utf8_lossy(bad));
        }
    }
}
