//! The simd-json tape walker every response parser reads with: one reused tape and scratch
//! buffers per core ([`ChunkDecoder`]), a JSON value as a slice of the tape ([`Json`]), and
//! the readers of the values every API shares (strings, token counts, `usage` counts).
//!
//! Why a tape walk and not serde structs: simd-json 0.15's serde `Deserializer` allocates a
//! fresh tape `Vec` for every document and skips an unused field by visiting every node of
//! it. Filling a reused [`simd_json::Tape`] with [`simd_json::fill_tape`] (and reused
//! [`simd_json::Buffers`]) makes a decode allocation-free once warm, and the tape's node
//! counts let us jump over an unused subtree in one step. Strings are unescaped by simd-json
//! into the payload buffer itself, so every returned string borrows the payload.

use std::borrow::Cow;

use serde_json::{Map, Value};
use simd_json::{Buffers, Node, StaticNode, Tape};

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
    /// Of the prompt tokens, those the server's prefix cache held:
    /// `usage.prompt_tokens_details.cached_tokens` (vLLM with
    /// `--enable-prompt-tokens-details`, OpenAI, llama.cpp); the agentic replay's client-side
    /// prefix-cache hit.
    pub cached_tokens: Option<u64>,
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
    pub(super) fn first_element(self) -> Option<(usize, Option<Json<'t, 'a>>)> {
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

/// `cached_tokens` of `usage.prompt_tokens_details`; `null` or absent is `None`. Walked on
/// the tape like the rest of the usage (a few nodes, no allocation).
pub(super) fn cached_tokens(value: Json<'_, '_>) -> Result<Option<u64>, ChunkError> {
    let Some(members) = value.object_or_null("usage.prompt_tokens_details")? else {
        return Ok(None);
    };
    let mut count = None;
    for (key, value) in members {
        if key == "cached_tokens" {
            count = token_count(value, "usage.prompt_tokens_details.cached_tokens")?;
        }
    }
    Ok(count)
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

/// Python's truthiness of a JSON value.
pub(super) fn truthy(value: Json<'_, '_>) -> bool {
    match value.head() {
        None | Some(Node::Static(StaticNode::Null | StaticNode::Bool(false))) => false,
        Some(Node::Static(StaticNode::I64(n))) => n != 0,
        Some(Node::Static(StaticNode::U64(n))) => n != 0,
        Some(Node::Static(StaticNode::F64(f))) => f != 0.0,
        Some(Node::String(s)) => !s.is_empty(),
        Some(Node::Object { len, .. } | Node::Array { len, .. }) => len > 0,
        Some(Node::Static(StaticNode::Bool(true))) => true,
    }
}

/// The JSON value on the tape, materialized (error path only).
pub(super) fn to_value(value: Json<'_, '_>) -> Value {
    match value.head() {
        None | Some(Node::Static(StaticNode::Null)) => Value::Null,
        Some(Node::Static(StaticNode::Bool(b))) => Value::Bool(b),
        Some(Node::Static(StaticNode::I64(n))) => Value::from(n),
        Some(Node::Static(StaticNode::U64(n))) => Value::from(n),
        Some(Node::Static(StaticNode::F64(f))) => Value::from(f),
        Some(Node::String(s)) => Value::String(s.to_string()),
        Some(Node::Object { .. }) => Value::Object(
            value
                .members()
                .into_iter()
                .flatten()
                .map(|(k, v)| (k.to_string(), to_value(v)))
                .collect::<Map<_, _>>(),
        ),
        Some(Node::Array { .. }) => Value::Array(value.elements().map(to_value).collect()),
    }
}
