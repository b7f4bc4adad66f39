//! Agentic trace replay, the data side (SPEC: AIPerf `AGENTIC_REPLAY` over Weka's
//! Claude-Code traces): the strict trace reader ([`format`]), each trace's tree of streams
//! with its spawn/join links and barriers ([`streams`]), and every request's prompt rebuilt
//! from its hash ids ([`prompt`]). All of it before the clock starts.

pub mod dag;
pub mod format;
pub mod input;
pub mod prompt;
pub mod record;
pub mod schedule;
pub mod streams;
pub mod synthesize;

pub use format::{load, Entry, Request, Subagent, WekaTrace};
pub use input::{read, Corpus};
pub use prompt::{layouts, marker, Piece, PromptError, Role, Seeds, Segment};
pub use record::{Phase, ReplayOutcome, ReplayRecord};
pub use streams::{derive, Branch, StartSampling, Stream, StreamKind, Tree, TurnRef};
