//! What the replay knows of each request it sent, beside the run's per-request record: the
//! tree, pass, lane and stream it belongs to and the phase it was sent in. The scheduler
//! (engine side) writes one [`ReplayRecord`] per request it sends; the agentic report (per-tree
//! figures, branch statistics, the AgentX validity verdict) is computed from them alone, so a
//! shard file can carry them and a merge can union them.

use serde::{Deserialize, Serialize};

use super::streams::StreamKind;

/// Which stage of the replay sent a request (SPEC §3.3–3.4). Only `Profiling` requests enter
/// the per-request metrics; the warm-up stages are reported apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Phase {
    /// The turn before t* with its full history and max tokens 1 (one per live stream).
    Primer,
    /// The cache-pressure stage: zero-delay one-token requests, K per lane.
    Warmup,
    /// The measured replay, from the start of profiling to `--duration`.
    Profiling,
}

/// How a replayed request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ReplayOutcome {
    Completed,
    /// Any error that is not a context overflow.
    Failed,
    /// An error whose message says the context is too long (SPEC §3.5): ends its stream,
    /// counted apart and left out of every latency figure and the failure ratio.
    ContextOverflow,
    /// Cut by the run's bound (`--duration` + grace) or an interrupt.
    Cancelled,
}

/// One request the replay sent. Times are nanoseconds from the start of profiling (warm-up
/// requests, sent before it, have times that wrap below zero and are therefore signed).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ReplayRecord {
    /// Index of the trace in the corpus (file order), the tree's identity.
    pub tree: u32,
    /// How many times this trace was started before this one (lane recycling): with `tree`,
    /// the identity of one live tree and of its cache-bust marker.
    pub pass: u32,
    /// The lane (0..`--max-concurrency`) that held the tree.
    pub lane: u32,
    /// Index of the stream in the tree's `streams`.
    pub stream: u32,
    pub kind: StreamKind,
    /// Index of the turn in its stream.
    pub turn: u32,
    pub phase: Phase,
    pub sent_ns: i64,
    pub first_token_ns: Option<i64>,
    /// When the response ended (last byte, error or cancellation).
    pub end_ns: i64,
    /// Output events after the first: the request has at least one ITL interval when > 0.
    pub itl_intervals: u32,
    pub prompt_tokens: u64,
    pub output_tokens: u64,
    /// `usage.prompt_tokens_details.cached_tokens` when the server sent it.
    pub cached_tokens: Option<u64>,
    pub outcome: ReplayOutcome,
}
