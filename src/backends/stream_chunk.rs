//! Decoding of streamed JSON chunks (completions / chat) with simd-json, in place.
//!
//! One SSE `data:` payload of an OpenAI-compatible stream becomes a [`ChunkFields`]: whether
//! the chunk carries a choice, its text / reasoning / tool-call delta, the finish reason, the
//! usage counts and an in-stream error. Everything else (`id`, `model`, `logprobs`,
//! llama.cpp's `timings`, …) is skipped without being materialised, and only the first choice
//! is looked at.
//!
//! Why a tape walk and not serde structs: simd-json 0.15's serde `Deserializer` allocates a
//! fresh tape `Vec` for every document and skips an unused field by visiting every node of
//! it. Filling a reused [`simd_json::Tape`] with [`simd_json::fill_tape`] (and reused
//! [`simd_json::Buffers`]) makes a decode allocation-free once warm, and the tape's node
//! counts let us jump over an unused subtree in one step. Strings are unescaped by simd-json
//! into the payload buffer itself, so every returned string borrows the payload.
//!
//! What counts as a token event follows Python `vllm bench serve` 0.33 (the golden README is
//! authoritative): see [`ChunkFields::is_token`].

use std::borrow::Cow;

use simd_json::{Buffers, Node, StaticNode, Tape};

/// Message used when a server reports an error without saying what it was.
const ERROR_WITHOUT_MESSAGE: &str = "error object without a message";

/// Which response shape a stream has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamApi {
    /// `/v1/completions`: text in `choices[0].text`.
    Completions,
    /// `/v1/chat/completions`: text in `choices[0].delta.content`.
    Chat,
    /// `/v1/responses`: events typed by their `type` (see [`super::responses_event`]).
    Responses,
    /// `/v1/messages`: Anthropic's typed events (see [`super::anthropic_event`]).
    Anthropic,
    /// `/v1/audio/transcriptions`: chat-shaped chunks (`choices[0].delta.content`), and
    /// Python counts every chunk with choices as a token.
    Audio,
}

/// Token counts of a `usage` object; a missing or `null` count is `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// `usage.prompt_tokens`.
    pub prompt_tokens: Option<u64>,
    /// `usage.completion_tokens`.
    pub completion_tokens: Option<u64>,
    /// Of the completion tokens, the reasoning ones: chat
    /// `usage.completion_tokens_details.reasoning_tokens`, Responses
    /// `usage.output_tokens_details.reasoning_tokens` (servers that do not count them apart
    /// leave it out).
    pub reasoning_tokens: Option<u64>,
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

impl ChunkFields<'_> {
    /// Whether Python 0.33 counts this chunk as a token event (first one sets TTFT, each
    /// later one adds an ITL entry).
    ///
    /// Completions and audio: any chunk with non-empty `choices`, even with empty or `null`
    /// text (the audio role chunk too).
    /// Chat: non-empty `choices` whose delta has non-empty content or reasoning, or tool
    /// calls; the opening `{"role":"assistant","content":""}` chunk and an empty finish delta
    /// are not tokens.
    pub fn is_token(&self, api: StreamApi) -> bool {
        if !self.has_choices {
            return false;
        }
        match api {
            StreamApi::Completions | StreamApi::Audio => true,
            StreamApi::Responses | StreamApi::Anthropic => false,
            StreamApi::Chat => {
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
    pub fn is_output(&self, api: StreamApi) -> bool {
        if !self.is_token(api) {
            return false;
        }
        match api {
            StreamApi::Chat => {
                self.text.as_deref().is_some_and(|s| !s.is_empty()) || self.has_tool_calls
            }
            _ => true,
        }
    }
}

/// Why a chunk could not be decoded.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum ChunkError {
    /// simd-json rejected the payload (syntax, truncation, invalid UTF-8).
    #[error("stream chunk is not valid JSON ({0}); the server sent a malformed SSE data payload")]
    Json(simd_json::Error),
    /// The payload is valid JSON but not an object.
    #[error("stream chunk is not a JSON object; the server's stream is not OpenAI-compatible")]
    NotAnObject,
    /// A field the client reads has an unexpected type.
    #[error(
        "stream chunk field `{field}` is not {expected}; \
         the server's stream is not OpenAI-compatible"
    )]
    BadField {
        /// JSON path of the field, e.g. `choices[0].text`.
        field: &'static str,
        /// What was expected there.
        expected: &'static str,
    },
}

impl ChunkError {
    /// A stable short name for counting failures by cause.
    pub fn kind(&self) -> &'static str {
        match self {
            ChunkError::Json(_) => "chunk_invalid_json",
            ChunkError::NotAnObject => "chunk_not_an_object",
            ChunkError::BadField { .. } => "chunk_bad_field",
        }
    }
}

/// Reusable decoder state (simd-json scratch buffers and tape); one per connection or core.
pub struct ChunkDecoder {
    buffers: Buffers,
    /// Always empty between calls; kept for its capacity.
    tape: Tape<'static>,
}

impl Default for ChunkDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for ChunkDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkDecoder").finish_non_exhaustive()
    }
}

impl ChunkDecoder {
    /// A decoder with scratch space sized for typical chunks (it grows as needed).
    pub fn new() -> Self {
        ChunkDecoder {
            buffers: Buffers::new(1024),
            tape: Tape(Vec::new()),
        }
    }

    /// Decode one payload in place (simd-json rewrites `data`; the strings returned point
    /// into it).
    pub fn decode<'a>(
        &mut self,
        api: StreamApi,
        data: &'a mut [u8],
    ) -> Result<ChunkFields<'a>, ChunkError> {
        self.decode_with(data, |root| read_chunk(api, root))
    }

    /// [`ChunkDecoder::decode`] for one stream's chunks: a plain token chunk that matches
    /// the stream's `template` is read without parsing, any other is parsed (and may become
    /// the template).
    pub fn decode_stream<'a>(
        &mut self,
        api: StreamApi,
        data: &'a mut [u8],
        template: &mut ChunkTemplate,
    ) -> Result<ChunkFields<'a>, ChunkError> {
        if let Some(range) = template.matched(data) {
            let data: &'a [u8] = data;
            let text = std::str::from_utf8(&data[range]).expect("checked by the match");
            return Ok(ChunkFields {
                has_choices: true,
                text: Some(Cow::Borrowed(text)),
                ..ChunkFields::default()
            });
        }
        template.stage(data);
        let base = data.as_ptr();
        let fields = self.decode(api, data)?;
        template.arm(base, &fields);
        Ok(fields)
    }

    /// Decode one payload in place and hand its root value to `read` (the one place the
    /// reused tape and buffers are managed; each response shape brings its own reader).
    pub(super) fn decode_with<'a, T>(
        &mut self,
        data: &'a mut [u8],
        read: impl FnOnce(Json<'_, 'a>) -> Result<T, ChunkError>,
    ) -> Result<T, ChunkError> {
        let mut tape: Tape<'a> = std::mem::replace(&mut self.tape, Tape(Vec::new())).reset();
        let fields = match simd_json::fill_tape(data, &mut self.buffers, &mut tape) {
            Ok(()) => read(Json(&tape.0)),
            Err(e) => Err(ChunkError::Json(e)),
        };
        self.tape = tape.reset();
        fields
    }
}

/// Longest chunk a [`ChunkTemplate`] keeps (an OpenAI-style token chunk is ~200 bytes).
const TEMPLATE_MAX: usize = 1024;
/// Room a template takes beyond a chunk that outgrows it.
const TEMPLATE_SLACK: usize = 24;
/// A template's first room, reserved with the stream's other buffers before its first
/// request, so that a typical chunk (~200 bytes) is kept without allocating mid-response.
const TEMPLATE_INITIAL: usize = 256;

/// The last plain token chunk of one stream, to recognise the next ones without parsing.
///
/// Why: a server streams a response as chunks that differ only in their text (the `id`,
/// `created`, `model` and every other field repeat), and parsing each one whole was about
/// half of the client's user time per event. A chunk that is byte for byte the template
/// outside the text string, with a text free of quotes, backslashes and control bytes and
/// valid UTF-8, is that same JSON document with another string in that one place: it is
/// valid, and decodes to the template's fields with that text. Only templates whose other
/// fields are empty are kept (no finish reason, usage, error, reasoning or tool calls), so a
/// match is a plain token chunk. Anything else (the first and last chunks, a text with an
/// escape) is parsed, and a plain token chunk parsed becomes the next template.
#[derive(Debug)]
pub struct ChunkTemplate {
    /// The template chunk as received (before simd-json unescaped it in place).
    bytes: Vec<u8>,
    /// The text string's content is `bytes[prefix..bytes.len() - suffix]`.
    prefix: usize,
    suffix: usize,
    armed: bool,
}

impl Default for ChunkTemplate {
    fn default() -> Self {
        ChunkTemplate {
            bytes: Vec::with_capacity(TEMPLATE_INITIAL),
            prefix: 0,
            suffix: 0,
            armed: false,
        }
    }
}

impl ChunkTemplate {
    /// The range of `data`'s text when `data` is the template with a plain text.
    fn matched(&self, data: &[u8]) -> Option<std::ops::Range<usize>> {
        let (t, p, s) = (&self.bytes, self.prefix, self.suffix);
        if !self.armed || data.len() < p + s || data[..p] != t[..p] {
            return None;
        }
        let end = data.len() - s;
        if data[end..] != t[t.len() - s..] {
            return None;
        }
        let text = &data[p..end];
        let plain = text.iter().all(|&b| b >= 0x20 && b != b'"' && b != b'\\');
        (plain && std::str::from_utf8(text).is_ok()).then_some(p..end)
    }

    /// Keeps a copy of `data` before it is parsed (parsing rewrites it), disarmed until
    /// [`ChunkTemplate::arm`] finds it a plain token chunk.
    fn stage(&mut self, data: &[u8]) {
        self.armed = false;
        self.bytes.clear();
        if data.len() <= TEMPLATE_MAX {
            // Grown to the chunks seen, not doubled: at 10,000 streams each spare byte is
            // 10 kB (the slack covers the text's length varying between chunks).
            if self.bytes.capacity() < data.len() {
                self.bytes.reserve_exact(data.len() + TEMPLATE_SLACK);
            }
            self.bytes.extend_from_slice(data);
        }
    }

    /// Arms the staged chunk as the template if its parsed `fields` are a plain token's and
    /// its text borrows the payload that started at `base`.
    fn arm(&mut self, base: *const u8, fields: &ChunkFields<'_>) {
        let plain = fields.has_choices
            && fields.reasoning.is_none()
            && !fields.has_tool_calls
            && fields.finish_reason.is_none()
            && fields.usage.is_none()
            && fields.error.is_none();
        let Some(Cow::Borrowed(text)) = &fields.text else {
            return;
        };
        if !plain || self.bytes.is_empty() {
            return;
        }
        // simd-json leaves (or unescapes) a string right after its opening quote.
        let start = (text.as_ptr() as usize).wrapping_sub(base as usize);
        if start == 0 || start >= self.bytes.len() || self.bytes[start - 1] != b'"' {
            return;
        }
        let Some(end) = string_end(&self.bytes, start) else {
            return;
        };
        self.prefix = start;
        self.suffix = self.bytes.len() - end;
        self.armed = true;
    }
}

/// Index of the quote closing the JSON string whose content starts at `start`.
fn string_end(json: &[u8], start: usize) -> Option<usize> {
    let mut i = start;
    while i < json.len() {
        match json[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// One JSON value on the tape: its head node followed by the nodes of its subtree.
#[derive(Clone, Copy)]
pub(super) struct Json<'t, 'a>(pub(super) &'t [Node<'a>]);

impl<'t, 'a> Json<'t, 'a> {
    pub(super) fn head(self) -> Option<Node<'a>> {
        self.0.first().copied()
    }

    pub(super) fn is_null(self) -> bool {
        matches!(self.head(), Some(Node::Static(StaticNode::Null)))
    }

    pub(super) fn as_str(self) -> Option<&'a str> {
        match self.head() {
            Some(Node::String(s)) => Some(s),
            _ => None,
        }
    }

    /// `(key, value)` pairs of an object; `None` if this is not an object.
    pub(super) fn members(self) -> Option<Members<'t, 'a>> {
        match self.head() {
            Some(Node::Object { len, .. }) => Some(Members {
                rest: self.0.get(1..).unwrap_or(&[]),
                left: len,
            }),
            _ => None,
        }
    }

    /// The members of an object where the APIs allow `null` too: `None` for `null` (or
    /// absent), a [`ChunkError::BadField`] naming `field` for anything but an object.
    pub(super) fn object_or_null(
        self,
        field: &'static str,
    ) -> Result<Option<Members<'t, 'a>>, ChunkError> {
        if self.is_null() {
            return Ok(None);
        }
        self.members().map(Some).ok_or(ChunkError::BadField {
            field,
            expected: "an object or null",
        })
    }

    /// The elements of an array (none if this is not an array).
    pub(super) fn elements(self) -> impl Iterator<Item = Json<'t, 'a>> {
        let (mut rest, len) = match self.head() {
            Some(Node::Array { len, .. }) => (self.0.get(1..).unwrap_or(&[]), len),
            _ => (&[][..], 0),
        };
        (0..len).map_while(move |_| {
            let (value, after) = take_value(rest);
            rest = after;
            value
        })
    }

    /// Number of elements and the first one, if this is an array; `None` otherwise.
    fn first_element(self) -> Option<(usize, Option<Json<'t, 'a>>)> {
        match self.head() {
            Some(Node::Array { len, .. }) => {
                let rest = self.0.get(1..).unwrap_or(&[]);
                Some((len, (len > 0).then(|| take_value(rest).0).flatten()))
            }
            _ => None,
        }
    }
}

/// Split the value at the start of `nodes` from what follows it.
fn take_value<'t, 'a>(nodes: &'t [Node<'a>]) -> (Option<Json<'t, 'a>>, &'t [Node<'a>]) {
    let span = match nodes.first() {
        Some(Node::Object { count, .. } | Node::Array { count, .. }) => count + 1,
        Some(_) => 1,
        None => return (None, nodes),
    };
    match (nodes.get(..span), nodes.get(span..)) {
        (Some(value), Some(rest)) => (Some(Json(value)), rest),
        _ => (None, &[]),
    }
}

/// Iterator over an object's members, jumping over each value's subtree.
pub(super) struct Members<'t, 'a> {
    rest: &'t [Node<'a>],
    left: usize,
}

impl<'t, 'a> Iterator for Members<'t, 'a> {
    type Item = (&'a str, Json<'t, 'a>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let Some((Node::String(key), after_key)) = self.rest.split_first() else {
            self.left = 0;
            return None;
        };
        let (value, rest) = take_value(after_key);
        self.rest = rest;
        value.map(|value| (*key, value))
    }
}

/// Read the top-level object.
fn read_chunk<'a>(api: StreamApi, root: Json<'_, 'a>) -> Result<ChunkFields<'a>, ChunkError> {
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
    api: StreamApi,
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
            ("text", StreamApi::Completions) => {
                fields.text = opt_str(value, "choices[0].text")?;
            }
            ("delta", StreamApi::Chat | StreamApi::Audio) => read_delta(value, fields)?,
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

/// A string or `null`.
pub(super) fn opt_str<'a>(
    value: Json<'_, 'a>,
    field: &'static str,
) -> Result<Option<Cow<'a, str>>, ChunkError> {
    match value.head() {
        Some(Node::String(s)) => Ok(Some(Cow::Borrowed(s))),
        Some(Node::Static(StaticNode::Null)) => Ok(None),
        _ => Err(ChunkError::BadField {
            field,
            expected: "a string or null",
        }),
    }
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
            _ => {}
        }
    }
    Ok(Some(usage))
}

/// `reasoning_tokens` of a usage details object (`completion_tokens_details`,
/// `output_tokens_details`); `null` or absent is `None`.
pub(super) fn reasoning_tokens(
    value: Json<'_, '_>,
    field: &'static str,
) -> Result<Option<u64>, ChunkError> {
    let Some(members) = value.object_or_null(field)? else {
        return Ok(None);
    };
    let mut count = None;
    for (key, value) in members {
        if key == "reasoning_tokens" {
            count = token_count(value, "usage.*_tokens_details.reasoning_tokens")?;
        }
    }
    Ok(count)
}

/// A non-negative integer count; an integral float (`12.0`) is accepted, as some servers
/// send counts as floats.
pub(super) fn token_count(
    value: Json<'_, '_>,
    field: &'static str,
) -> Result<Option<u64>, ChunkError> {
    let bad = ChunkError::BadField {
        field,
        expected: "a non-negative integer or null",
    };
    match value.head() {
        Some(Node::Static(StaticNode::U64(n))) => Ok(Some(n)),
        Some(Node::Static(StaticNode::I64(n))) => u64::try_from(n).map(Some).map_err(|_| bad),
        Some(Node::Static(StaticNode::F64(f))) => {
            // 2^64 as f64 is exact; every integral f64 below it converts without loss.
            if f.is_finite() && f >= 0.0 && f.fract() == 0.0 && f < 18_446_744_073_709_551_616.0 {
                Ok(Some(f as u64))
            } else {
                Err(bad)
            }
        }
        Some(Node::Static(StaticNode::Null)) => Ok(None),
        _ => Err(bad),
    }
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

    fn decode<'a>(dec: &mut ChunkDecoder, api: StreamApi, data: &'a mut [u8]) -> ChunkFields<'a> {
        dec.decode(api, data).expect("valid chunk")
    }

    fn owned(text: Option<Cow<'_, str>>) -> Option<Cow<'static, str>> {
        text.map(|t| Cow::Owned(t.into_owned()))
    }

    /// Decode `json` with a fresh decoder; the fields are copied out of the payload buffer.
    fn fields(api: StreamApi, json: &str) -> ChunkFields<'static> {
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
        let f = decode(&mut ChunkDecoder::new(), StreamApi::Chat, &mut data);
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
        let f = fields(StreamApi::Completions, VLLM_COMPLETION);
        assert_eq!(
            f,
            ChunkFields {
                has_choices: true,
                text: s(" Shall"),
                ..Default::default()
            }
        );
        assert!(f.is_token(StreamApi::Completions));
        let u = fields(StreamApi::Completions, VLLM_USAGE);
        assert!(!u.has_choices && !u.is_token(StreamApi::Completions));
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
        let role = fields(StreamApi::Chat, VLLM_CHAT_ROLE);
        assert!(role.has_choices);
        assert_eq!(role.text, s(""));
        assert!(
            !role.is_token(StreamApi::Chat),
            "the role chunk is not a token"
        );
        let last = fields(StreamApi::Chat, VLLM_CHAT_LAST);
        assert_eq!(
            (last.text.clone(), last.finish_reason.clone()),
            (s(" Rough"), s("length"))
        );
        assert!(last.is_token(StreamApi::Chat));
        let usage = fields(StreamApi::Chat, VLLM_USAGE);
        assert!(!usage.is_token(StreamApi::Chat));
        assert_eq!(usage.usage.and_then(|u| u.completion_tokens), Some(16));
        // The chat api ignores completions' `text`, and vice versa.
        assert_eq!(fields(StreamApi::Chat, VLLM_COMPLETION).text, None);
        assert_eq!(fields(StreamApi::Completions, VLLM_CHAT_LAST).text, None);
    }

    #[test]
    fn llama_cpp_chunks() {
        let text = r#"{"choices":[{"text":"\n","index":0,"logprobs":null,"finish_reason":null}],"created":1796028928,"model":"smollm2","system_fingerprint":"b1-0c1e570","object":"text_completion","id":"chatcmpl-s21T"}"#;
        assert_eq!(fields(StreamApi::Completions, text).text, s("\n"));
        // The last completions chunk has choices *and* usage (and timings).
        let last = r#"{"choices":[{"text":"","index":0,"logprobs":null,"finish_reason":"length"}],"created":1796028928,"model":"smollm2","system_fingerprint":"b1-0c1e570","object":"text_completion","usage":{"completion_tokens":8,"prompt_tokens":11,"total_tokens":19,"prompt_tokens_details":{"cached_tokens":0}},"id":"chatcmpl-s21T","timings":{"cache_n":0,"prompt_n":11,"prompt_ms":35.1,"prompt_per_token_ms":3.19,"predicted_n":8,"predicted_ms":120.5}}"#;
        let f = fields(StreamApi::Completions, last);
        assert!(
            f.is_token(StreamApi::Completions),
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
                ..Usage::default()
            })
        );
        let role = r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],"created":1,"id":"x","model":"smollm2","system_fingerprint":"b1","object":"chat.completion.chunk"}"#;
        let role = fields(StreamApi::Chat, role);
        assert_eq!(role.text, None);
        assert!(!role.is_token(StreamApi::Chat));
        let finish = r#"{"choices":[{"finish_reason":"length","index":0,"delta":{}}],"created":1,"id":"x","model":"smollm2","object":"chat.completion.chunk","timings":{"predicted_n":8}}"#;
        let finish = fields(StreamApi::Chat, finish);
        assert!(finish.has_choices && !finish.is_token(StreamApi::Chat));
        assert_eq!(finish.finish_reason, s("length"));
    }

    #[test]
    fn openai_role_chunk_and_missing_or_null_delta() {
        let role = r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}"#;
        assert!(!fields(StreamApi::Chat, role).is_token(StreamApi::Chat));
        for chunk in [
            r#"{"choices":[{"index":0,"finish_reason":"stop"}]}"#,
            r#"{"choices":[{"index":0,"delta":null,"finish_reason":"stop"}]}"#,
        ] {
            let f = fields(StreamApi::Chat, chunk);
            assert!(f.has_choices && !f.is_token(StreamApi::Chat), "{chunk}");
            assert_eq!(f.finish_reason, s("stop"));
        }
    }

    #[test]
    fn reasoning_and_tool_calls() {
        let f = fields(
            StreamApi::Chat,
            r#"{"choices":[{"delta":{"reasoning_content":"Let me think"}}]}"#,
        );
        assert_eq!(
            (f.text.clone(), f.reasoning.clone()),
            (None, s("Let me think"))
        );
        assert!(f.is_token(StreamApi::Chat));
        let f = fields(
            StreamApi::Chat,
            r#"{"choices":[{"delta":{"content":null,"reasoning":"hmm","reasoning_content":"other"}}]}"#,
        );
        assert_eq!(f.reasoning, s("hmm"));
        let f = fields(
            StreamApi::Chat,
            r#"{"choices":[{"delta":{"reasoning":"","reasoning_content":"rc"}}]}"#,
        );
        assert_eq!(f.reasoning, s("rc"));
        let f = fields(
            StreamApi::Chat,
            r#"{"choices":[{"delta":{"reasoning":""}}]}"#,
        );
        assert!(!f.is_token(StreamApi::Chat));
        let tool = r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}"#;
        let f = fields(StreamApi::Chat, tool);
        assert!(f.has_tool_calls && f.is_token(StreamApi::Chat));
        for empty in [
            r#"{"choices":[{"delta":{"tool_calls":[]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":null}}]}"#,
        ] {
            assert!(
                !fields(StreamApi::Chat, empty).is_token(StreamApi::Chat),
                "{empty}"
            );
        }
    }

    #[test]
    fn only_the_first_choice_counts() {
        let f = fields(
            StreamApi::Completions,
            r#"{"choices":[{"text":"a","finish_reason":null},{"text":"b","finish_reason":"stop"}],"usage":null}"#,
        );
        assert_eq!((f.text.clone(), f.finish_reason.clone()), (s("a"), None));
        let f = fields(StreamApi::Completions, r#"{"choices":null,"usage":null}"#);
        assert!(!f.has_choices);
        let f = fields(StreamApi::Completions, r#"{"choices":[{"text":null}]}"#);
        assert!(f.has_choices && f.text.is_none() && f.is_token(StreamApi::Completions));
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
            let f = fields(StreamApi::Chat, chunk);
            assert_eq!(f.error, s(message), "{chunk}");
            assert!(!f.is_token(StreamApi::Chat));
        }
        assert_eq!(
            fields(StreamApi::Chat, r#"{"error":null,"choices":[]}"#).error,
            None
        );
        assert_eq!(
            fields(
                StreamApi::Chat,
                r#"{"object":"chat.completion.chunk","message":"x"}"#
            )
            .error,
            None
        );
    }

    #[test]
    fn escaped_text_is_unescaped_in_place() {
        let f = fields(
            StreamApi::Completions,
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
            StreamApi::Chat,
            r#"{"choices":[],"usage":{"prompt_tokens":11.0,"completion_tokens":null}}"#,
        );
        assert_eq!(
            f.usage,
            Some(Usage {
                prompt_tokens: Some(11),
                completion_tokens: None,
                ..Usage::default()
            })
        );
        assert_eq!(
            fields(StreamApi::Chat, r#"{"usage":{}}"#).usage,
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
        let err = dec.decode(StreamApi::Completions, &mut data).unwrap_err();
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
                .decode(StreamApi::Chat, &mut data)
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
        assert!(decode(&mut dec, StreamApi::Chat, &mut data).is_token(StreamApi::Chat));
    }

    #[test]
    fn one_decoder_many_chunks() {
        let mut dec = ChunkDecoder::new();
        let chunks = [VLLM_CHAT_ROLE, VLLM_CHAT_LAST, VLLM_USAGE, VLLM_CHAT_LAST];
        let tokens: Vec<bool> = chunks
            .iter()
            .map(|c| {
                let mut data = c.as_bytes().to_vec();
                decode(&mut dec, StreamApi::Chat, &mut data).is_token(StreamApi::Chat)
            })
            .collect();
        assert_eq!(tokens, [false, true, false, true]);
    }

    proptest! {
        #[test]
        fn any_text_round_trips(text in any::<String>(), chat in any::<bool>(), big in any::<bool>()) {
            let (api, json) = if chat {
                (StreamApi::Chat, serde_json::json!({"choices":[{"index":0,"delta":{"content":text}}]}))
            } else {
                (StreamApi::Completions, serde_json::json!({"choices":[{"text":text,"logprobs":null}]}))
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
            let _ = ChunkDecoder::new().decode(StreamApi::Chat, &mut data);
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
    fn stream_agrees(api: StreamApi, chunks: &[Vec<u8>]) -> usize {
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
        assert_eq!(stream_agrees(StreamApi::Completions, &chunks), 5);

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
        assert_eq!(stream_agrees(StreamApi::Chat, &chat), 2);
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
                .decode_stream(StreamApi::Completions, &mut first, &mut template)
                .unwrap();
            assert!(template.matched(&base).is_some());
            assert!(
                template.matched(&case).is_none(),
                "{}",
                String::from_utf8_lossy(&case)
            );
            stream_agrees(StreamApi::Completions, &[base.clone(), case, base.clone()]);
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
        assert_eq!(stream_agrees(StreamApi::Completions, &chunks), 1);
        // Repeated keys: the last one is the text, for the parse and for the template.
        let dup = |first: &str, last: &str| {
            format!(r#"{{"choices":[{{"text":"{first}","text":"{last}"}}]}}"#).into_bytes()
        };
        let chunks = [dup("a", "b"), dup("a", "c"), dup("x", "c")];
        assert_eq!(stream_agrees(StreamApi::Completions, &chunks), 1);
        // Chunks with reasoning, tool calls or an error never become templates.
        let reasoning = br#"{"choices":[{"delta":{"reasoning":"r","content":"x"}}]}"#.to_vec();
        let tools =
            br#"{"choices":[{"delta":{"tool_calls":[{"id":"t"}],"content":"x"}}]}"#.to_vec();
        let error =
            br#"{"object":"error","message":"m","choices":[{"delta":{"content":"x"}}]}"#.to_vec();
        for c in [reasoning, tools, error] {
            assert_eq!(
                stream_agrees(StreamApi::Chat, &[c.clone(), c.clone(), c]),
                0
            );
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
            stream_agrees(StreamApi::Completions, &chunks);
        }
    }
}
