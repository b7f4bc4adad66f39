//! The OpenAI chunk schema: decoding of streamed JSON chunks (completions, chat, audio) in
//! place.
//!
//! One SSE `data:` payload of an OpenAI-compatible stream becomes a [`ChunkFields`]: whether
//! the chunk carries a choice, its text / reasoning / tool-call delta, the finish reason, the
//! usage counts and an in-stream error. Everything else (`id`, `model`, `logprobs`,
//! llama.cpp's `timings`, …) is skipped without being materialised, and only the first choice
//! is looked at.
//!
//! The chunks are read with the shared tape walker ([`super::tape`]); a plain token chunk
//! that repeats the stream's previous one outside its text is read without parsing
//! ([`ChunkTemplate`]).
//!
//! What counts as a token event follows Python `vllm bench serve` 0.33 (the golden README is
//! authoritative): see [`ChunkFields::is_token`].

use std::borrow::Cow;

use simd_json::{Node, StaticNode};

use super::chunk_template::ChunkTemplate;
use super::reader::{ApiFailure, FinishReason, Scratch, StreamFacts, StreamReader, Token};
use super::tape::{
    cached_tokens, opt_str, reasoning_tokens, token_count, ChunkDecoder, ChunkError, Json, Usage,
};

/// Message used when a server reports an error without saying what it was.
const ERROR_WITHOUT_MESSAGE: &str = "error object without a message";

/// Which of the OpenAI chunk shapes a stream has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkShape {
    /// `/v1/completions`: text in `choices[0].text`.
    Completions,
    /// `/v1/chat/completions`: text in `choices[0].delta.content`.
    Chat,
    /// `/v1/audio/transcriptions`: chat-shaped chunks (`choices[0].delta.content`), and
    /// Python counts every chunk with choices as a token.
    Audio,
}

/// What the client needs from one streamed chunk. Strings borrow the payload buffer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChunkFields<'a> {
    /// `choices` is present and non-empty.
    pub has_choices: bool,
    /// Completions `choices[0].text`; chat `choices[0].delta.content`.
    pub text: Option<Cow<'a, str>>,
    /// Chat `delta.reasoning`, or `delta.reasoning_content` when that one is empty or absent.
    pub reasoning: Option<Cow<'a, str>>,
    /// Chat `delta.tool_calls` is a non-empty array.
    pub has_tool_calls: bool,
    /// `choices[0].finish_reason`.
    pub finish_reason: Option<Cow<'a, str>>,
    /// The top-level `usage` object, when present and not `null`.
    pub usage: Option<Usage>,
    /// An in-stream error: `{"error": {"message": …}}`, `{"error": "…"}`, or vLLM's older
    /// top-level `{"object": "error", "message": …}`.
    pub error: Option<Cow<'a, str>>,
}

impl<'a> ChunkFields<'a> {
    /// A chunk with a choice whose text is `text` and nothing else: what a template match
    /// reads ([`ChunkTemplate`]).
    #[inline]
    fn plain_token(text: &'a str) -> ChunkFields<'a> {
        ChunkFields {
            has_choices: true,
            text: Some(Cow::Borrowed(text)),
            ..ChunkFields::default()
        }
    }

    /// Whether Python 0.33 counts this chunk as a token event (first one sets TTFT, each
    /// later one adds an ITL entry).
    ///
    /// Completions and audio: any chunk with non-empty `choices`, even with empty or `null`
    /// text (the audio role chunk too).
    /// Chat: non-empty `choices` whose delta has non-empty content or reasoning, or tool
    /// calls; the opening `{"role":"assistant","content":""}` chunk and an empty finish delta
    /// are not tokens.
    pub fn is_token(&self, api: ChunkShape) -> bool {
        if !self.has_choices {
            return false;
        }
        match api {
            ChunkShape::Completions | ChunkShape::Audio => true,
            ChunkShape::Chat => {
                let non_empty =
                    |s: &Option<Cow<'_, str>>| s.as_deref().is_some_and(|s| !s.is_empty());
                non_empty(&self.text) || non_empty(&self.reasoning) || self.has_tool_calls
            }
        }
    }

    /// Whether this token event is an answer token, not reasoning: what TTFO (time to first
    /// output token) waits for. Chat: non-empty content or tool calls (a chunk that carries
    /// reasoning too still has answer text). Completions and audio have no reasoning field, so
    /// every token is output.
    pub fn is_output(&self, api: ChunkShape) -> bool {
        if !self.is_token(api) {
            return false;
        }
        match api {
            ChunkShape::Chat => {
                self.text.as_deref().is_some_and(|s| !s.is_empty()) || self.has_tool_calls
            }
            _ => true,
        }
    }
}

/// The reader of the APIs that stream OpenAI chunks (completions, chat, audio), by shape.
pub struct ChunkReader(pub ChunkShape);

impl ChunkReader {
    /// The token `chunk` is in this shape, if any.
    #[inline]
    fn token<'a>(&self, chunk: ChunkFields<'a>) -> Option<Token<'a>> {
        let shape = self.0;
        if !chunk.is_token(shape) {
            return None;
        }
        Some(Token {
            output: chunk.is_output(shape),
            text: chunk.text,
        })
    }
}

impl StreamReader for ChunkReader {
    fn event<'a>(
        &self,
        data: &'a mut [u8],
        scratch: &mut Scratch<'_>,
        facts: &mut StreamFacts,
    ) -> Result<Option<Token<'a>>, ChunkError> {
        let shape = self.0;
        let chunk = scratch.json.decode_stream(shape, data, scratch.template)?;
        if chunk.has_choices {
            if let Some(reason) = chunk.finish_reason.as_deref().and_then(FinishReason::parse) {
                facts.finish_reason = Some(reason);
            }
            if let Some(u) = &chunk.usage {
                facts.fallback_usage = Some(*u);
            }
        } else if let Some(u) = &chunk.usage {
            facts.usage_completion_tokens = u.completion_tokens;
            facts.usage_reasoning_tokens = u.reasoning_tokens;
            facts.usage_cached_tokens = u.cached_tokens;
            // Python's audio loop reads only the completion count.
            if u.prompt_tokens.is_some() && shape != ChunkShape::Audio {
                facts.usage_prompt_tokens = u.prompt_tokens;
            }
        }
        Ok(self.token(chunk))
    }

    /// A chunk that matches the stream's template is a plain token chunk: it says nothing
    /// for the facts (no finish reason, usage or error), and the match proves it one line.
    fn known_event<'a>(
        &self,
        data: &'a [u8],
        template: &ChunkTemplate,
    ) -> Option<Option<Token<'a>>> {
        template
            .matched(data)
            .map(|text| self.token(ChunkFields::plain_token(text)))
    }

    /// The usage of a chunk with choices (llama.cpp) counts when no usage-only chunk came.
    fn settle(&self, facts: &mut StreamFacts) -> Result<(), ApiFailure> {
        if facts.usage_completion_tokens.is_none() && facts.usage_prompt_tokens.is_none() {
            if let Some(u) = facts.fallback_usage.take() {
                facts.usage_prompt_tokens = u.prompt_tokens;
                facts.usage_completion_tokens = u.completion_tokens;
                facts.usage_reasoning_tokens = u.reasoning_tokens;
                facts.usage_cached_tokens = u.cached_tokens;
            }
        }
        Ok(())
    }

    fn verdict(&self, _facts: &StreamFacts, got_token: bool) -> Result<(), ApiFailure> {
        if got_token {
            return Ok(());
        }
        Err(ApiFailure::new(
            "no_token",
            "Never received a valid chunk to calculate TTFT.This response will be marked as failed!",
            "the stream ended without a token event",
        ))
    }
}

/// The OpenAI chunk readers of the shared tape decoder.
impl ChunkDecoder {
    /// Decode one payload in place (simd-json rewrites `data`; the strings returned point
    /// into it).
    pub fn decode<'a>(
        &mut self,
        api: ChunkShape,
        data: &'a mut [u8],
    ) -> Result<ChunkFields<'a>, ChunkError> {
        self.decode_with(data, |root| read_chunk(api, root))
    }

    /// [`ChunkDecoder::decode`] for one stream's chunks: a plain token chunk that matches
    /// the stream's `template` is read without parsing, any other is parsed (and may become
    /// the template).
    pub fn decode_stream<'a>(
        &mut self,
        api: ChunkShape,
        data: &'a mut [u8],
        template: &mut ChunkTemplate,
    ) -> Result<ChunkFields<'a>, ChunkError> {
        if let Some(range) = template.matched_range(data) {
            let data: &'a [u8] = data;
            let text = std::str::from_utf8(&data[range]).expect("checked by the match");
            return Ok(ChunkFields::plain_token(text));
        }
        template.stage(data);
        let base = data.as_ptr();
        let fields = self.decode(api, data)?;
        let plain = fields.has_choices
            && fields.reasoning.is_none()
            && !fields.has_tool_calls
            && fields.finish_reason.is_none()
            && fields.usage.is_none()
            && fields.error.is_none();
        if let (true, Some(Cow::Borrowed(text))) = (plain, &fields.text) {
            template.arm(base, text);
        }
        Ok(fields)
    }
}

/// Read the top-level object.
fn read_chunk<'a>(api: ChunkShape, root: Json<'_, 'a>) -> Result<ChunkFields<'a>, ChunkError> {
    let members = root.members().ok_or(ChunkError::NotAnObject)?;
    let mut fields = ChunkFields::default();
    let mut error_object = false;
    let mut message = None;
    for (key, value) in members {
        match key {
            "choices" => read_choices(api, value, &mut fields)?,
            "usage" => fields.usage = read_usage(value)?,
            "error" => fields.error = read_error(value)?,
            "object" => error_object = value.as_str() == Some("error"),
            "message" => message = value.as_str(),
            _ => {}
        }
    }
    if error_object && fields.error.is_none() {
        fields.error = Some(Cow::Borrowed(message.unwrap_or(ERROR_WITHOUT_MESSAGE)));
    }
    Ok(fields)
}

/// `choices`: only the first element is read.
fn read_choices<'a>(
    api: ChunkShape,
    value: Json<'_, 'a>,
    fields: &mut ChunkFields<'a>,
) -> Result<(), ChunkError> {
    if value.is_null() {
        return Ok(());
    }
    let (len, first) = value.first_element().ok_or(ChunkError::BadField {
        field: "choices",
        expected: "an array or null",
    })?;
    fields.has_choices = len > 0;
    let Some(first) = first else {
        return Ok(());
    };
    let members = first.members().ok_or(ChunkError::BadField {
        field: "choices[0]",
        expected: "an object",
    })?;
    for (key, value) in members {
        match (key, api) {
            ("text", ChunkShape::Completions) => {
                fields.text = opt_str(value, "choices[0].text")?;
            }
            ("delta", ChunkShape::Chat | ChunkShape::Audio) => read_delta(value, fields)?,
            ("finish_reason", _) => {
                fields.finish_reason = opt_str(value, "choices[0].finish_reason")?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// Chat `choices[0].delta` (absent or `null` is tolerated: no content).
fn read_delta<'a>(value: Json<'_, 'a>, fields: &mut ChunkFields<'a>) -> Result<(), ChunkError> {
    let Some(members) = value.object_or_null("choices[0].delta")? else {
        return Ok(());
    };
    let (mut reasoning, mut reasoning_content) = (None, None);
    for (key, value) in members {
        match key {
            "content" => fields.text = opt_str(value, "choices[0].delta.content")?,
            "reasoning" => reasoning = opt_str(value, "choices[0].delta.reasoning")?,
            "reasoning_content" => {
                reasoning_content = opt_str(value, "choices[0].delta.reasoning_content")?;
            }
            "tool_calls" if !value.is_null() => {
                let (len, _) = value.first_element().ok_or(ChunkError::BadField {
                    field: "choices[0].delta.tool_calls",
                    expected: "an array or null",
                })?;
                fields.has_tool_calls = len > 0;
            }
            _ => {}
        }
    }
    fields.reasoning = match reasoning {
        Some(r) if !r.is_empty() => Some(r),
        _ => reasoning_content.or(reasoning),
    };
    Ok(())
}

/// The top-level `usage` object, or `None` for `null`.
fn read_usage(value: Json<'_, '_>) -> Result<Option<Usage>, ChunkError> {
    let Some(members) = value.object_or_null("usage")? else {
        return Ok(None);
    };
    let mut usage = Usage::default();
    for (key, value) in members {
        match key {
            "prompt_tokens" => usage.prompt_tokens = token_count(value, "usage.prompt_tokens")?,
            "completion_tokens" => {
                usage.completion_tokens = token_count(value, "usage.completion_tokens")?;
            }
            "completion_tokens_details" => {
                usage.reasoning_tokens =
                    reasoning_tokens(value, "usage.completion_tokens_details")?;
            }
            "prompt_tokens_details" => usage.cached_tokens = cached_tokens(value)?,
            _ => {}
        }
    }
    Ok(Some(usage))
}

/// `error`: a string, an object with `message` (or `type`), or `null`.
fn read_error<'a>(value: Json<'_, 'a>) -> Result<Option<Cow<'a, str>>, ChunkError> {
    match value.head() {
        Some(Node::Static(StaticNode::Null)) => Ok(None),
        Some(Node::String(s)) => Ok((!s.is_empty()).then_some(Cow::Borrowed(s))),
        Some(Node::Object { .. }) => {
            let (mut message, mut kind) = (None, None);
            for (key, value) in value.members().into_iter().flatten() {
                match key {
                    "message" => message = value.as_str().filter(|m| !m.is_empty()),
                    "type" => kind = value.as_str().filter(|t| !t.is_empty()),
                    _ => {}
                }
            }
            Ok(Some(Cow::Borrowed(
                message.or(kind).unwrap_or(ERROR_WITHOUT_MESSAGE),
            )))
        }
        _ => Err(ChunkError::BadField {
            field: "error",
            expected: "a string, an object or null",
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decode<'a>(dec: &mut ChunkDecoder, api: ChunkShape, data: &'a mut [u8]) -> ChunkFields<'a> {
        dec.decode(api, data).expect("valid chunk")
    }

    fn owned(text: Option<Cow<'_, str>>) -> Option<Cow<'static, str>> {
        text.map(|t| Cow::Owned(t.into_owned()))
    }

    /// Decode `json` with a fresh decoder; the fields are copied out of the payload buffer.
    fn fields(api: ChunkShape, json: &str) -> ChunkFields<'static> {
        let mut data = json.as_bytes().to_vec();
        let f = decode(&mut ChunkDecoder::new(), api, &mut data);
        ChunkFields {
            text: owned(f.text),
            reasoning: owned(f.reasoning),
            finish_reason: owned(f.finish_reason),
            error: owned(f.error),
            ..f
        }
    }

    #[test]
    fn strings_borrow_the_payload() {
        let mut data = VLLM_CHAT_LAST.as_bytes().to_vec();
        let range = data.as_ptr_range();
        let f = decode(&mut ChunkDecoder::new(), ChunkShape::Chat, &mut data);
        for text in [&f.text, &f.finish_reason] {
            let Some(Cow::Borrowed(text)) = text else {
                panic!("not borrowed: {text:?}");
            };
            assert!(range.contains(&text.as_ptr()));
        }
    }

    fn s(text: &str) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(text))
    }

    const VLLM_COMPLETION: &str = r#"{"id":"cmpl-nginx-sse","object":"text_completion","created":1700000000,"model":"nginx-sse","choices":[{"index":0,"text":" Shall","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}"#;
    const VLLM_USAGE: &str = r#"{"id":"cmpl-nginx-sse","object":"text_completion","created":1700000000,"model":"nginx-sse","choices":[],"usage":{"prompt_tokens":10,"total_tokens":26,"completion_tokens":16}}"#;
    const VLLM_CHAT_ROLE: &str = r#"{"id":"chatcmpl-nginx-sse","object":"chat.completion.chunk","created":1700000000,"model":"nginx-sse","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}"#;
    const VLLM_CHAT_LAST: &str = r#"{"id":"chatcmpl-nginx-sse","object":"chat.completion.chunk","created":1700000000,"model":"nginx-sse","choices":[{"index":0,"delta":{"content":" Rough"},"logprobs":null,"finish_reason":"length","stop_reason":null}]}"#;

    #[test]
    fn vllm_completions_chunks() {
        let f = fields(ChunkShape::Completions, VLLM_COMPLETION);
        assert_eq!(
            f,
            ChunkFields {
                has_choices: true,
                text: s(" Shall"),
                ..Default::default()
            }
        );
        assert!(f.is_token(ChunkShape::Completions));
        let u = fields(ChunkShape::Completions, VLLM_USAGE);
        assert!(!u.has_choices && !u.is_token(ChunkShape::Completions));
        assert_eq!(
            u.usage,
            Some(Usage {
                prompt_tokens: Some(10),
                completion_tokens: Some(16),
                ..Usage::default()
            })
        );
    }

    #[test]
    fn vllm_chat_chunks() {
        let role = fields(ChunkShape::Chat, VLLM_CHAT_ROLE);
        assert!(role.has_choices);
        assert_eq!(role.text, s(""));
        assert!(
            !role.is_token(ChunkShape::Chat),
            "the role chunk is not a token"
        );
        let last = fields(ChunkShape::Chat, VLLM_CHAT_LAST);
        assert_eq!(
            (last.text.clone(), last.finish_reason.clone()),
            (s(" Rough"), s("length"))
        );
        assert!(last.is_token(ChunkShape::Chat));
        let usage = fields(ChunkShape::Chat, VLLM_USAGE);
        assert!(!usage.is_token(ChunkShape::Chat));
        assert_eq!(usage.usage.and_then(|u| u.completion_tokens), Some(16));
        // The chat api ignores completions' `text`, and vice versa.
        assert_eq!(fields(ChunkShape::Chat, VLLM_COMPLETION).text, None);
        assert_eq!(fields(ChunkShape::Completions, VLLM_CHAT_LAST).text, None);
    }

    #[test]
    fn llama_cpp_chunks() {
        let text = r#"{"choices":[{"text":"\n","index":0,"logprobs":null,"finish_reason":null}],"created":1796028928,"model":"smollm2","system_fingerprint":"b1-0c1e570","object":"text_completion","id":"chatcmpl-s21T"}"#;
        assert_eq!(fields(ChunkShape::Completions, text).text, s("\n"));
        // The last completions chunk has choices *and* usage (and timings).
        let last = r#"{"choices":[{"text":"","index":0,"logprobs":null,"finish_reason":"length"}],"created":1796028928,"model":"smollm2","system_fingerprint":"b1-0c1e570","object":"text_completion","usage":{"completion_tokens":8,"prompt_tokens":11,"total_tokens":19,"prompt_tokens_details":{"cached_tokens":0}},"id":"chatcmpl-s21T","timings":{"cache_n":0,"prompt_n":11,"prompt_ms":35.1,"prompt_per_token_ms":3.19,"predicted_n":8,"predicted_ms":120.5}}"#;
        let f = fields(ChunkShape::Completions, last);
        assert!(
            f.is_token(ChunkShape::Completions),
            "Python counts it: choices non-empty"
        );
        assert_eq!(
            (f.text.clone(), f.finish_reason.clone()),
            (s(""), s("length"))
        );
        assert_eq!(
            f.usage,
            Some(Usage {
                prompt_tokens: Some(11),
                completion_tokens: Some(8),
                cached_tokens: Some(0),
                ..Usage::default()
            })
        );
        let role = r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],"created":1,"id":"x","model":"smollm2","system_fingerprint":"b1","object":"chat.completion.chunk"}"#;
        let role = fields(ChunkShape::Chat, role);
        assert_eq!(role.text, None);
        assert!(!role.is_token(ChunkShape::Chat));
        let finish = r#"{"choices":[{"finish_reason":"length","index":0,"delta":{}}],"created":1,"id":"x","model":"smollm2","object":"chat.completion.chunk","timings":{"predicted_n":8}}"#;
        let finish = fields(ChunkShape::Chat, finish);
        assert!(finish.has_choices && !finish.is_token(ChunkShape::Chat));
        assert_eq!(finish.finish_reason, s("length"));
    }

    #[test]
    fn openai_role_chunk_and_missing_or_null_delta() {
        let role = r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}"#;
        assert!(!fields(ChunkShape::Chat, role).is_token(ChunkShape::Chat));
        for chunk in [
            r#"{"choices":[{"index":0,"finish_reason":"stop"}]}"#,
            r#"{"choices":[{"index":0,"delta":null,"finish_reason":"stop"}]}"#,
        ] {
            let f = fields(ChunkShape::Chat, chunk);
            assert!(f.has_choices && !f.is_token(ChunkShape::Chat), "{chunk}");
            assert_eq!(f.finish_reason, s("stop"));
        }
    }

    #[test]
    fn reasoning_and_tool_calls() {
        let f = fields(
            ChunkShape::Chat,
            r#"{"choices":[{"delta":{"reasoning_content":"Let me think"}}]}"#,
        );
        assert_eq!(
            (f.text.clone(), f.reasoning.clone()),
            (None, s("Let me think"))
        );
        assert!(f.is_token(ChunkShape::Chat));
        let f = fields(
            ChunkShape::Chat,
            r#"{"choices":[{"delta":{"content":null,"reasoning":"hmm","reasoning_content":"other"}}]}"#,
        );
        assert_eq!(f.reasoning, s("hmm"));
        let f = fields(
            ChunkShape::Chat,
            r#"{"choices":[{"delta":{"reasoning":"","reasoning_content":"rc"}}]}"#,
        );
        assert_eq!(f.reasoning, s("rc"));
        let f = fields(
            ChunkShape::Chat,
            r#"{"choices":[{"delta":{"reasoning":""}}]}"#,
        );
        assert!(!f.is_token(ChunkShape::Chat));
        let tool = r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}"#;
        let f = fields(ChunkShape::Chat, tool);
        assert!(f.has_tool_calls && f.is_token(ChunkShape::Chat));
        for empty in [
            r#"{"choices":[{"delta":{"tool_calls":[]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":null}}]}"#,
        ] {
            assert!(
                !fields(ChunkShape::Chat, empty).is_token(ChunkShape::Chat),
                "{empty}"
            );
        }
    }

    #[test]
    fn only_the_first_choice_counts() {
        let f = fields(
            ChunkShape::Completions,
            r#"{"choices":[{"text":"a","finish_reason":null},{"text":"b","finish_reason":"stop"}],"usage":null}"#,
        );
        assert_eq!((f.text.clone(), f.finish_reason.clone()), (s("a"), None));
        let f = fields(ChunkShape::Completions, r#"{"choices":null,"usage":null}"#);
        assert!(!f.has_choices);
        let f = fields(ChunkShape::Completions, r#"{"choices":[{"text":null}]}"#);
        assert!(f.has_choices && f.text.is_none() && f.is_token(ChunkShape::Completions));
    }

    #[test]
    fn in_stream_errors() {
        let cases = [
            (
                r#"{"error":{"message":"boom","type":"InternalServerError","code":500}}"#,
                "boom",
            ),
            (
                r#"{"error":{"object":"error","message":"too long","type":"BadRequestError","param":null,"code":400}}"#,
                "too long",
            ),
            (r#"{"error":"plain"}"#, "plain"),
            (r#"{"error":{"type":"overloaded"}}"#, "overloaded"),
            (r#"{"error":{}}"#, ERROR_WITHOUT_MESSAGE),
            (
                r#"{"object":"error","message":"injected error from nginx-sse","type":"InternalServerError","param":null,"code":500}"#,
                "injected error from nginx-sse",
            ),
        ];
        for (chunk, message) in cases {
            let f = fields(ChunkShape::Chat, chunk);
            assert_eq!(f.error, s(message), "{chunk}");
            assert!(!f.is_token(ChunkShape::Chat));
        }
        assert_eq!(
            fields(ChunkShape::Chat, r#"{"error":null,"choices":[]}"#).error,
            None
        );
        assert_eq!(
            fields(
                ChunkShape::Chat,
                r#"{"object":"chat.completion.chunk","message":"x"}"#
            )
            .error,
            None
        );
    }

    #[test]
    fn escaped_text_is_unescaped_in_place() {
        let f = fields(
            ChunkShape::Completions,
            r#"{"choices":[{"text":"caf\u00e9 \ud83d\ude00 \"q\" \\ \n\t\/ é"}]}"#,
        );
        assert_eq!(
            f.text.as_deref(),
            Some("caf\u{e9} \u{1f600} \"q\" \\ \n\t/ \u{e9}")
        );
    }

    #[test]
    fn token_counts_tolerate_integral_floats() {
        let f = fields(
            ChunkShape::Chat,
            r#"{"choices":[],"usage":{"prompt_tokens":11.0,"completion_tokens":null}}"#,
        );
        // vLLM with --enable-prompt-tokens-details: the prefix cache's share of the prompt.
        let cached = fields(
            ChunkShape::Chat,
            r#"{"choices":[],"usage":{"prompt_tokens":11,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":5,"audio_tokens":null}}}"#,
        );
        assert_eq!(cached.usage.and_then(|u| u.cached_tokens), Some(5));
        let none = fields(
            ChunkShape::Chat,
            r#"{"choices":[],"usage":{"prompt_tokens":11,"prompt_tokens_details":null}}"#,
        );
        assert_eq!(none.usage.and_then(|u| u.cached_tokens), None);
        assert_eq!(
            f.usage,
            Some(Usage {
                prompt_tokens: Some(11),
                completion_tokens: None,
                ..Usage::default()
            })
        );
        assert_eq!(
            fields(ChunkShape::Chat, r#"{"usage":{}}"#).usage,
            Some(Usage::default())
        );
    }

    #[test]
    fn bad_chunks_are_errors() {
        let cases: &[(&[u8], &str)] = &[
            (b"{\"choices\":[{\"text\":\"a\"}]", "chunk_invalid_json"),
            (
                b"{\"choices\":[{\"text\":\"a\xff\"}]}",
                "chunk_invalid_json",
            ),
            (b"[DONE]", "chunk_invalid_json"),
            (b"", "chunk_invalid_json"),
            (b"[1,2]", "chunk_not_an_object"),
            (b"\"text\"", "chunk_not_an_object"),
            (br#"{"choices":{"text":"a"}}"#, "chunk_bad_field"),
            (br#"{"choices":["a"]}"#, "chunk_bad_field"),
            (br#"{"choices":[{"finish_reason":5}]}"#, "chunk_bad_field"),
            (
                br#"{"choices":[{"delta":{"content":5}}]}"#,
                "chunk_bad_field",
            ),
            (br#"{"choices":[{"delta":"x"}]}"#, "chunk_bad_field"),
            (
                br#"{"choices":[{"delta":{"tool_calls":{}}}]}"#,
                "chunk_bad_field",
            ),
            (br#"{"usage":{"completion_tokens":7.5}}"#, "chunk_bad_field"),
            (br#"{"usage":{"completion_tokens":-1}}"#, "chunk_bad_field"),
            (br#"{"usage":{"completion_tokens":"7"}}"#, "chunk_bad_field"),
            (br#"{"usage":[]}"#, "chunk_bad_field"),
            (br#"{"error":5}"#, "chunk_bad_field"),
        ];
        let mut dec = ChunkDecoder::new();
        let mut data = br#"{"choices":[{"text":5}]}"#.to_vec();
        let err = dec.decode(ChunkShape::Completions, &mut data).unwrap_err();
        assert_eq!(
            err,
            ChunkError::BadField {
                field: "choices[0].text",
                expected: "a string or null"
            }
        );
        assert_eq!(
            err.to_string(),
            "stream chunk field `choices[0].text` is not a string or null; \
             the server's stream is not OpenAI-compatible"
        );
        for (chunk, kind) in cases {
            let mut data = chunk.to_vec();
            let err = dec
                .decode(ChunkShape::Chat, &mut data)
                .expect_err(&String::from_utf8_lossy(chunk));
            assert_eq!(
                err.kind(),
                *kind,
                "{}: {err}",
                String::from_utf8_lossy(chunk)
            );
        }
        // The decoder stays usable after errors.
        let mut data = VLLM_CHAT_LAST.as_bytes().to_vec();
        assert!(decode(&mut dec, ChunkShape::Chat, &mut data).is_token(ChunkShape::Chat));
    }

    #[test]
    fn one_decoder_many_chunks() {
        let mut dec = ChunkDecoder::new();
        let chunks = [VLLM_CHAT_ROLE, VLLM_CHAT_LAST, VLLM_USAGE, VLLM_CHAT_LAST];
        let tokens: Vec<bool> = chunks
            .iter()
            .map(|c| {
                let mut data = c.as_bytes().to_vec();
                decode(&mut dec, ChunkShape::Chat, &mut data).is_token(ChunkShape::Chat)
            })
            .collect();
        assert_eq!(tokens, [false, true, false, true]);
    }

    proptest! {
        #[test]
        fn any_text_round_trips(text in any::<String>(), chat in any::<bool>(), big in any::<bool>()) {
            let (api, json) = if chat {
                (ChunkShape::Chat, serde_json::json!({"choices":[{"index":0,"delta":{"content":text}}]}))
            } else {
                (ChunkShape::Completions, serde_json::json!({"choices":[{"text":text,"logprobs":null}]}))
            };
            let mut json = json;
            if big {
                // Large unused subtrees after the fields that are read.
                json["timings"] = serde_json::json!({"a":[1,2,{"b":[3,4,5]}],"c":"d"});
                json["logprobs"] = serde_json::json!({"tokens":["x","y"],"top":[{"x":-1.5}]});
            }
            let mut data = serde_json::to_vec(&json).expect("serializes");
            let mut dec = ChunkDecoder::new();
            let f = dec.decode(api, &mut data).expect("valid chunk");
            prop_assert_eq!(f.text.as_deref(), Some(text.as_str()));
            prop_assert!(f.has_choices);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let mut data = bytes;
            let _ = ChunkDecoder::new().decode(ChunkShape::Chat, &mut data);
        }
    }

    /// The fields of a decode, or its error, as owned values for comparing.
    fn outcome(r: Result<ChunkFields<'_>, ChunkError>) -> Result<ChunkFields<'static>, String> {
        r.map(|f| ChunkFields {
            text: owned(f.text),
            reasoning: owned(f.reasoning),
            finish_reason: owned(f.finish_reason),
            error: owned(f.error),
            ..f
        })
        .map_err(|e| e.to_string())
    }

    /// Decodes `chunks` in order as one stream (template path) and each alone (full parse),
    /// asserts both agree on every chunk, and returns how many the template matched.
    fn stream_agrees(api: ChunkShape, chunks: &[Vec<u8>]) -> usize {
        let mut dec = ChunkDecoder::new();
        let mut template = ChunkTemplate::default();
        let mut matched = 0;
        for chunk in chunks {
            matched += usize::from(template.matched(chunk).is_some());
            let mut a = chunk.clone();
            let mut b = chunk.clone();
            let streamed = outcome(dec.decode_stream(api, &mut a, &mut template));
            let alone = outcome(ChunkDecoder::new().decode(api, &mut b));
            assert_eq!(streamed, alone, "{}", String::from_utf8_lossy(chunk));
        }
        matched
    }

    fn completion(id: &str, text: &str, finish: &str) -> Vec<u8> {
        format!(
            r#"{{"id":"{id}","object":"text_completion","created":1,"model":"m","choices":[{{"index":0,"text":"{text}","logprobs":null,"finish_reason":{finish}}}]}}"#
        )
        .into_bytes()
    }

    #[test]
    fn token_chunks_after_the_first_are_matched_and_read_as_parsed() {
        let mut chunks: Vec<Vec<u8>> = [" a", " bb", "", " ccc", "é中🙂", " d"]
            .iter()
            .map(|t| completion("c1", t, "null"))
            .collect();
        chunks.push(completion("c1", " e", r#""length""#));
        chunks.push(VLLM_USAGE.as_bytes().to_vec());
        // Only the first parses whole; the finish and usage chunks differ outside the text.
        assert_eq!(stream_agrees(ChunkShape::Completions, &chunks), 5);

        let chat: Vec<Vec<u8>> = [VLLM_CHAT_ROLE, VLLM_CHAT_LAST]
            .iter()
            .map(|c| c.as_bytes().to_vec())
            .chain([" x", " y", ""].iter().map(|t| {
                format!(
                    r#"{{"id":"k","choices":[{{"index":0,"delta":{{"content":"{t}"}},"finish_reason":null}}]}}"#
                )
                .into_bytes()
            }))
            .collect();
        assert_eq!(stream_agrees(ChunkShape::Chat, &chat), 2);
    }

    #[test]
    fn anything_but_a_plain_text_in_the_same_place_is_parsed() {
        let base = completion("c1", " a", "null");
        let cases: Vec<Vec<u8>> = vec![
            completion("c1", r#"a\"b"#, "null"),
            completion("c1", r"a\\b", "null"),
            completion("c1", r"\u00e9", "null"),
            completion("c1", r"\ud800", "null"),
            completion("c1", "tab\there", "null"),
            completion("c2", " a", "null"),
            // Invalid UTF-8 in the text: an error, as the full parse says.
            completion("c1", "@@", "null")
                .iter()
                .map(|&b| if b == b'@' { 0xff } else { b })
                .collect(),
            // A quote in the text makes it a different document (here, invalid JSON).
            completion("c1", r#"a","x":"b"#, "null"),
            completion("c1", r#"a"#, "null")[..40].to_vec(),
        ];
        for case in cases {
            let mut template = ChunkTemplate::default();
            let mut first = base.clone();
            ChunkDecoder::new()
                .decode_stream(ChunkShape::Completions, &mut first, &mut template)
                .unwrap();
            assert!(template.matched(&base).is_some());
            assert!(
                template.matched(&case).is_none(),
                "{}",
                String::from_utf8_lossy(&case)
            );
            stream_agrees(ChunkShape::Completions, &[base.clone(), case, base.clone()]);
        }
    }

    #[test]
    fn a_template_is_only_the_chunk_text_and_never_another_string() {
        // `text` inside logprobs comes first; the template's text is the choice's own.
        let chunk = |inner: &str, text: &str| {
            format!(
                r#"{{"choices":[{{"logprobs":{{"text":"{inner}"}},"text":"{text}","finish_reason":null}}]}}"#
            )
            .into_bytes()
        };
        let chunks = [
            chunk("a", "a"),
            chunk("b", "a"),
            chunk("b", "b"),
            chunk("a", "c"),
        ];
        // Only the third: the first two differ in the inner string, the last in it too.
        assert_eq!(stream_agrees(ChunkShape::Completions, &chunks), 1);
        // Repeated keys: the last one is the text, for the parse and for the template.
        let dup = |first: &str, last: &str| {
            format!(r#"{{"choices":[{{"text":"{first}","text":"{last}"}}]}}"#).into_bytes()
        };
        let chunks = [dup("a", "b"), dup("a", "c"), dup("x", "c")];
        assert_eq!(stream_agrees(ChunkShape::Completions, &chunks), 1);
        // Chunks with reasoning, tool calls or an error never become templates.
        let reasoning = br#"{"choices":[{"delta":{"reasoning":"r","content":"x"}}]}"#.to_vec();
        let tools =
            br#"{"choices":[{"delta":{"tool_calls":[{"id":"t"}],"content":"x"}}]}"#.to_vec();
        let error =
            br#"{"object":"error","message":"m","choices":[{"delta":{"content":"x"}}]}"#.to_vec();
        for c in [reasoning, tools, error] {
            assert_eq!(
                stream_agrees(ChunkShape::Chat, &[c.clone(), c.clone(), c]),
                0
            );
        }
    }

    #[test]
    fn a_known_event_is_the_token_the_reader_would_have_read() {
        fn chat(t: &str) -> Vec<u8> {
            format!(r#"{{"id":"k","choices":[{{"index":0,"delta":{{"content":"{t}"}}}}]}}"#)
                .into_bytes()
        }
        let completions = |t: &str| completion("c1", t, "null");
        type Chunk<'f> = &'f dyn Fn(&str) -> Vec<u8>;
        let shapes: [(ChunkShape, Chunk); 2] = [
            (ChunkShape::Completions, &completions),
            (ChunkShape::Chat, &chat),
        ];
        for (shape, chunk) in shapes {
            let reader = ChunkReader(shape);
            let mut json = ChunkDecoder::new();
            let mut template = ChunkTemplate::default();
            let mut first = chunk(" a");
            let mut facts = StreamFacts::default();
            let mut scratch = Scratch {
                json: &mut json,
                template: &mut template,
            };
            reader.event(&mut first, &mut scratch, &mut facts).unwrap();
            for text in [" bb", "", "é中🙂"] {
                let data = chunk(text);
                let known = reader
                    .known_event(&data, scratch.template)
                    .map(|t| t.map(owned_token));
                let mut copy = data.clone();
                let read = reader.event(&mut copy, &mut scratch, &mut facts).unwrap();
                assert_eq!(known, Some(read.map(owned_token)), "{text:?}");
            }
            // A finish chunk differs outside the text: not known, it goes to `event`.
            let last = completion("c1", " z", r#""length""#);
            assert_eq!(reader.known_event(&last, scratch.template), None);
        }
    }

    #[test]
    fn a_chunk_with_a_line_break_never_becomes_a_template() {
        // The data of a multi-line SSE event is joined with `\n`: valid JSON whitespace,
        // but a template made of it would let a known event hold a line break.
        let reader = ChunkReader(ChunkShape::Completions);
        for joined in ["\n", "\r"] {
            let chunk = |t: &str| {
                format!(r#"{{"id":"c1",{joined}"choices":[{{"index":0,"text":"{t}","finish_reason":null}}]}}"#)
                    .into_bytes()
            };
            let mut json = ChunkDecoder::new();
            let mut template = ChunkTemplate::default();
            let mut scratch = Scratch {
                json: &mut json,
                template: &mut template,
            };
            let mut first = chunk(" a");
            let token = reader
                .event(&mut first, &mut scratch, &mut StreamFacts::default())
                .unwrap();
            assert!(token.is_some());
            assert_eq!(reader.known_event(&chunk(" a"), scratch.template), None);
            assert_eq!(
                stream_agrees(ChunkShape::Completions, &[chunk(" a"), chunk(" b")]),
                0
            );
        }
    }

    fn owned_token(t: Token<'_>) -> Token<'static> {
        Token {
            output: t.output,
            text: owned(t.text),
        }
    }

    proptest! {
        #[test]
        fn any_stream_decodes_as_each_chunk_alone(
            texts in proptest::collection::vec(
                proptest::string::string_regex(r#"([ -~]|é|中|\\n|\\"|\\u00e9){0,6}"#).unwrap(),
                1..12,
            ),
            ids in proptest::collection::vec(0u8..3, 12),
            finishes in proptest::collection::vec(0u8..6, 12),
        ) {
            let chunks: Vec<Vec<u8>> = texts
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let finish = if finishes[i] == 0 { r#""stop""# } else { "null" };
                    completion(&format!("c{}", ids[i]), t, finish)
                })
                .collect();
            stream_agrees(ChunkShape::Completions, &chunks);
        }
    }
}
