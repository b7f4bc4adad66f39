//! One request of a trace, as every format reads into it.

/// A parent link of a Bailian multi-turn conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatLink {
    /// This request's `chat_id`.
    pub chat_id: i64,
    /// The previous turn's `chat_id` (`None` for a first turn: `-1` or absent in the file).
    pub parent_chat_id: Option<i64>,
    /// The turn number in its conversation, when the trace gives it.
    pub turn: Option<u32>,
    /// Position in [`TimedTrace::records`](super::TimedTrace::records) of the parent when
    /// the parent is replayed too and comes earlier in the file; the engine may then send
    /// this turn only after that one finished. `None`: send on the timestamp alone.
    pub parent: Option<usize>,
}

/// One replayed request.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceRecord {
    /// 0-based index of the record's data line in the file (header and blank lines not
    /// counted; skipped malformed lines counted), independent of the window and of
    /// `num_prompts`. Python's `request_id` suffix, and the seed of the record's unique
    /// tail tokens.
    pub index: u64,
    /// 1-based line number in the file, for messages.
    pub line: u64,
    /// The timestamp as written, in trace units (Azure: seconds after the first row).
    pub timestamp: f64,
    /// `timestamp × sec_multiplier`: seconds on the (scaled) trace clock.
    pub trace_time_s: f64,
    /// When to send, in seconds after the start of the run (see
    /// [`ReplayWindow`](super::ReplayWindow)).
    pub arrival_s: f64,
    /// Prompt length in tokens; the rebuilt prompt has exactly this many.
    pub input_len: u32,
    /// Tokens to generate (`max_tokens`).
    pub output_len: u32,
    /// Prefix-block hash ids, one per `chunk` tokens (empty when the format has none).
    pub hash_ids: Box<[u64]>,
    /// Conversation link (Bailian only).
    pub chat: Option<ChatLink>,
}

/// What a format parser makes of one data line.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Row {
    /// A request.
    Keep(RowData),
    /// A line the format itself says to leave out.
    Drop(DropReason),
}

/// Why a well-formed line is not replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DropReason {
    /// BurstGPT failure: 0 response tokens.
    Failed,
    /// BurstGPT row of another model than the one asked for.
    OtherModel,
}

/// The fields of a request as parsed from its line.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RowData {
    pub timestamp: f64,
    pub input_len: u32,
    pub output_len: u32,
    pub hash_ids: Box<[u64]>,
    pub chat: Option<ChatLink>,
}
