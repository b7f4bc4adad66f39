//! What a response means, as each API's reader says: the interface the engine's exchange
//! calls for every SSE event and at the end of every response, the facts the events
//! establish ([`StreamFacts`]), and the verdicts' failures ([`ApiFailure`]).
//!
//! The exchange owns the I/O, the clock and the per-response bounds; a reader owns the JSON
//! and what it means (which event is a token, which is reasoning, where the usage and the
//! finish reason are, what a finished stream must have had). The reader of a run is picked
//! from the registry ([`super::ResponseMode`]) before the clock starts; the exchange never
//! names an API.

use std::borrow::Cow;

use super::chunk_template::ChunkTemplate;
use super::tape::{ChunkDecoder, ChunkError, Usage};

/// How a response ended, as the server said (`choices[0].finish_reason`, the Responses
/// status, Anthropic's `stop_reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    /// `stop`: the model ended its answer.
    Stop,
    /// `length`: the output-token limit ended it.
    Length,
    /// Anything else (`tool_calls`, `abort`, ...).
    Other,
}

impl FinishReason {
    /// The reason named by a chunk (empty = none).
    pub fn parse(reason: &str) -> Option<FinishReason> {
        match reason {
            "" => None,
            "stop" => Some(FinishReason::Stop),
            "length" => Some(FinishReason::Length),
            _ => Some(FinishReason::Other),
        }
    }
}

/// What a response's events said, beyond its tokens: the counts, how it ended, an error.
#[derive(Debug, Default)]
pub struct StreamFacts {
    pub usage_prompt_tokens: Option<u64>,
    pub usage_completion_tokens: Option<u64>,
    /// Of the completion tokens, the reasoning ones, when the server counts them apart.
    pub usage_reasoning_tokens: Option<u64>,
    /// Of the prompt tokens, those the server's prefix cache held
    /// (`usage.prompt_tokens_details.cached_tokens`), when it says.
    pub usage_cached_tokens: Option<u64>,
    /// Usage seen on a chunk that also carried choices (llama.cpp); used only when no
    /// usage-only chunk arrives.
    pub(super) fallback_usage: Option<Usage>,
    /// `[DONE]` seen.
    pub done: bool,
    /// The last finish reason the stream named.
    pub finish_reason: Option<FinishReason>,
    /// Typed-event APIs: a terminal event arrived (Responses `response.completed` /
    /// `incomplete`, Anthropic `message_stop`).
    pub(super) terminal: bool,
    /// Typed-event APIs: the last error event's text (Python's `stream_error`).
    pub(super) stream_error: Option<String>,
}

/// One token event: the first sets TTFT, each later one adds an inter-token gap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token<'a> {
    /// An answer token, not reasoning: the first sets TTFO.
    pub output: bool,
    /// The generated text this token adds to the answer (reasoning is not kept).
    pub text: Option<Cow<'a, str>>,
}

/// Why a finished response is not a success, in Python's words (`error`) and ours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiFailure {
    /// Stable short kind for counting (`no_token`, `stream_error`, `malformed_body`, ...).
    pub kind: &'static str,
    /// Python-compatible error text.
    pub error: String,
    /// What the stream lacked or said.
    pub detail: String,
}

impl ApiFailure {
    #[cold]
    pub(super) fn new(kind: &'static str, error: impl Into<String>, detail: &str) -> ApiFailure {
        ApiFailure {
            kind,
            error: error.into(),
            detail: detail.into(),
        }
    }
}

/// One event of a typed-event stream (Responses, Anthropic Messages) as its API's decoder
/// reads it: the kind (each API's own `K`), and what the client needs of it. Strings borrow
/// the payload buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypedEvent<'a, K> {
    pub kind: K,
    /// The delta's text of a delta event (Responses: output text only).
    pub delta: Option<Cow<'a, str>>,
    /// The event's usage (input counts as the prompt count, output as the completion
    /// count); a count the event leaves out is `None`.
    pub usage: Option<Usage>,
    /// How the response ended, in the API's words: Responses `response.status`
    /// (`completed`, `incomplete`), Anthropic `delta.stop_reason` (`end_turn`, …).
    pub reason: Option<Cow<'a, str>>,
    /// The error text of an error event.
    pub error: Option<String>,
}

impl<K> TypedEvent<'_, K> {
    /// An event of `kind` that says nothing more (yet).
    pub(super) fn new(kind: K) -> Self {
        TypedEvent {
            kind,
            delta: None,
            usage: None,
            reason: None,
            error: None,
        }
    }
}

/// The reusable decoding state an event is read with: the core's tape decoder and the
/// stream's chunk template (used by the OpenAI chunk APIs only).
pub struct Scratch<'s> {
    pub json: &'s mut ChunkDecoder,
    pub template: &'s mut ChunkTemplate,
}

/// One streaming API's reading of its responses.
pub trait StreamReader: Sync {
    /// Reads one SSE event's data in place (not `[DONE]`): the token it is, if any; the
    /// rest of what it says goes into `facts`.
    fn event<'a>(
        &self,
        data: &'a mut [u8],
        scratch: &mut Scratch<'_>,
        facts: &mut StreamFacts,
    ) -> Result<Option<Token<'a>>, ChunkError>;

    /// Reads one whole SSE event's data without parsing it, when the reader knows its shape
    /// (OpenAI's chunk template): `Some` with the token it is, if any. `Some` is a promise
    /// that `data` holds no line break (`\n`, `\r`), so that the SSE layer may take the
    /// event's bytes as one `data:` line without searching them; a reader that cannot
    /// promise that returns `None` (the default), and the event goes to [`Self::event`].
    /// A known event says nothing for the facts.
    fn known_event<'a>(
        &self,
        _data: &'a [u8],
        _template: &ChunkTemplate,
    ) -> Option<Option<Token<'a>>> {
        None
    }

    /// The stream ended: settles what its events said (a fallback usage) and fails it when
    /// it reported an error.
    fn settle(&self, facts: &mut StreamFacts) -> Result<(), ApiFailure>;

    /// The stream ended and settled: fails it when it lacked what a complete answer has (a
    /// token, for the typed-event APIs a terminal event).
    fn verdict(&self, facts: &StreamFacts, got_token: bool) -> Result<(), ApiFailure>;
}

/// A typed-event API (Responses, Anthropic Messages): how it decodes an event, which token
/// an event is, and what the rest of an event says. The reading around it is shared (the
/// [`StreamReader`] of every `TypedEvents`): an empty payload is skipped (Python's `if not
/// chunk`), an error event fails the finished stream first, then no token delta, then no
/// terminal event, in Python's order for the Responses API.
pub trait TypedEvents: Sync {
    type Kind;
    /// The verdict's detail when no token delta came, in the API's event names.
    const NO_TOKEN: &'static str;
    /// The verdict's detail when no terminal event came.
    const NO_TERMINAL: &'static str;

    fn decode<'a>(
        json: &mut ChunkDecoder,
        data: &'a mut [u8],
    ) -> Result<TypedEvent<'a, Self::Kind>, ChunkError>;

    /// The token `event` is, taking its text; `None` for an event that is not a token.
    fn token<'a>(event: &mut TypedEvent<'a, Self::Kind>) -> Option<Token<'a>>;

    /// What a non-token event says: counts, the finish reason, the end, an error.
    fn apply(event: TypedEvent<'_, Self::Kind>, facts: &mut StreamFacts);
}

impl<T: TypedEvents> StreamReader for T {
    fn event<'a>(
        &self,
        data: &'a mut [u8],
        scratch: &mut Scratch<'_>,
        facts: &mut StreamFacts,
    ) -> Result<Option<Token<'a>>, ChunkError> {
        if data.is_empty() {
            return Ok(None);
        }
        let mut event = T::decode(scratch.json, data)?;
        let token = T::token(&mut event);
        if token.is_none() {
            T::apply(event, facts);
        }
        Ok(token)
    }

    fn settle(&self, facts: &mut StreamFacts) -> Result<(), ApiFailure> {
        match facts.stream_error.take() {
            None => Ok(()),
            Some(error) => {
                let detail = format!("the stream reported an error: {error}");
                Err(ApiFailure::new("stream_error", error, &detail))
            }
        }
    }

    fn verdict(&self, facts: &StreamFacts, got_token: bool) -> Result<(), ApiFailure> {
        if !got_token {
            return Err(ApiFailure::new(
                "no_token",
                "Never received a token delta to calculate TTFT.This response will be marked as failed!",
                T::NO_TOKEN,
            ));
        }
        if !facts.terminal {
            return Err(ApiFailure::new(
                "no_terminal_event",
                "Stream ended without a terminal event.This response will be marked as failed!",
                T::NO_TERMINAL,
            ));
        }
        Ok(())
    }
}
