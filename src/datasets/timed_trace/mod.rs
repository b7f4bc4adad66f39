//! Timed-trace replay datasets: Mooncake, Alibaba Bailian, Azure LLM inference and BurstGPT
//! traces replayed with their original timing and shared prefixes (Python `timed_trace`,
//! `vllm bench serve --dataset-name timed_trace`), the data side.
//!
//! - [`TimedTrace::load`] streams a trace file (format auto-detected or chosen), applies the
//!   malformed-line policy, the replay window and `num_prompts`, and gives every record its
//!   arrival time (`timestamp × sec_multiplier`, Python semantics).
//! - [`PromptBuilder`] rebuilds prompts of exactly `input_len` tokens from hash ids:
//!   deterministic ids per block (no per-process salt, unlike Python), either materialized
//!   ([`PromptBuilder::prompt_ids`]) or as shared JSON parts
//!   ([`PromptBuilder::prompt_json_parts`]) so memory grows with distinct blocks, not with
//!   requests.
//! - [`TextPrompter`] decodes prompts to text through a caller-supplied decode function.
//! - [`TraceStats`] summarises a replay (rate peaks, tokens, ideal prefix-cache hit ratio).
//!
//! Where we differ from Python on purpose: prompts are identical on every run; the last
//! block of a prompt is a prefix of the full block (Python generated a different partial
//! block, breaking prefix sharing); a trace with too few hash ids still gets `input_len`
//! tokens (a unique tail; Python sent a shorter prompt); malformed lines are reported with
//! file and line.

mod cache;
pub(crate) mod csv;
mod format;
mod jsonl;
mod prompt;
mod reader;
mod record;
mod stats;
mod text;
mod tokens;

pub use cache::CacheStats;
pub use csv::CsvError;
pub use format::{DetectError, TraceFormat, UnknownFormatName};
pub use jsonl::{JsonLabels, JsonLineError};
pub use prompt::PromptBuilder;
pub use reader::{LineError, OnMalformed, ReadReport, ReplayWindow, TimedTrace, TraceOptions};
pub use record::{ChatLink, TraceRecord};
pub use stats::TraceStats;
pub use text::TextPrompter;
pub use tokens::TokenSpace;

/// Why a trace could not be read or replayed. Every message names the file (and line) and
/// says how to fix it.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The file could not be opened or read.
    /// (The OS error is part of the message, not a `source`: it would be printed twice.)
    #[error("cannot read trace {name}: {error}")]
    Io { name: String, error: std::io::Error },
    /// Auto-detection failed.
    #[error(
        "{name}: {reason}; choose the trace format explicitly (mooncake, bailian, azure, burstgpt)"
    )]
    UnknownFormat { name: String, reason: DetectError },
    /// A line does not parse (under [`OnMalformed::Error`]).
    #[error("{name}:{line}: {reason}; fix the line, or skip malformed lines (they are counted and reported)")]
    Malformed {
        name: String,
        line: u64,
        /// Boxed: a parser's reason is larger than the other variants.
        reason: Box<LineError>,
    },
    /// Nothing is left to replay.
    #[error("{name}: no request to replay ({detail})")]
    NoRecords { name: String, detail: String },
    /// An option value is unusable.
    #[error("{0}")]
    Option(String),
    /// A record arrives later than any time vllm-bench can wait for.
    #[error(
        "{name}:{line}: its arrival, {arrival_s} s after the replay's start, {why}; check \
         --timed-trace-sec-multiplier (0.001 for millisecond timestamps) and the timestamps"
    )]
    Arrival {
        name: String,
        line: u64,
        arrival_s: f64,
        why: crate::datasets::limits::SecondsError,
    },
}
