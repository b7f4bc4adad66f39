//! One run's result, however its facts were obtained: a live run (`modes::point`) or the
//! shards of a run merged (`modes::merge`). Both turn their facts into a [`RunResult`] by
//! one computation (`modes::run_facts::RunFacts::result`); the console block
//! ([`RunResult::render`]) and the result document ([`RunResult::document`]) are written
//! from it alone (in `output::report`), so the two can never report differently.
//!
//! What it holds, in the order it is printed and saved: Python's metrics (the
//! `BenchmarkReport`, with the run facts and per-request outputs its JSON lists), the
//! per-turn reports of a multi-turn run, the LoRA adapters, the steady state, then our own
//! block (engine facts, dispatch lag, client health per part, failures by reason with an
//! example, requests not sent, the interrupted flag, a trace's prefix cache), the sections
//! of later features ([`Section`]: server metrics, SLO search), and the shard bookkeeping.

use crate::metrics::report::{BenchmarkReport, TaskKind};
use crate::metrics::steady_state::SteadyStateOutcome;
use crate::metrics::RequestOutput;
pub use crate::output::facts::Cancelled;
use crate::output::facts::{EngineFacts, Lag, PartHealth, PrefixCache};
use crate::output::json::{JsonObject, RpsChangeEvent, RunInfo};
use crate::output::lora::AdapterSummary;
use crate::output::shard_file::ShardSection;

/// `--multi-turn`: each turn's figures, and every request's conversation and turn.
#[derive(Debug, Clone)]
pub struct Turns {
    /// Per turn (1-based), Python's metrics over its requests.
    pub reports: Vec<(usize, BenchmarkReport)>,
    /// Per request, in the order of Python's lists.
    pub conversations: Vec<String>,
    /// Per request, its turn (1-based).
    pub numbers: Vec<u64>,
}

/// `--lora-modules`: every request's adapter and each adapter's summary.
#[derive(Debug, Clone)]
pub struct Adapters {
    pub per_request: Vec<String>,
    pub summaries: Vec<AdapterSummary>,
}

/// A block printed and keys saved by a later feature (server metrics, SLO search), after
/// ours and in the order added.
#[derive(Debug, Clone, Default)]
pub struct Section {
    pub console: String,
    pub json: JsonObject<'static>,
}

/// One shard of a merged run.
#[derive(Debug, Clone)]
pub struct MergedPart {
    /// `K/N`.
    pub name: String,
    /// The file it was read from.
    pub file: String,
    pub requests: usize,
    pub interrupted: bool,
    pub engine: Option<EngineFacts>,
    pub dispatch_lag: Option<Lag>,
    /// The shard's own `completed`, `failed` and `vllm_bench_*` keys, as it saved them.
    pub figures: serde_json::Map<String, serde_json::Value>,
}

/// The shards a merged result was made of.
#[derive(Debug, Clone)]
pub struct MergedShards {
    pub fingerprint: String,
    pub start_at: Option<f64>,
    pub parts: Vec<MergedPart>,
}

/// Where the run stands among shards.
#[derive(Debug, Clone, Default)]
pub enum Shards {
    /// A run of one process.
    #[default]
    Whole,
    /// This run is one shard (`--shard K/N`): what its result carries for the merge.
    Part(Box<ShardSection>),
    /// Merged from the shards' results.
    Merged(MergedShards),
}

/// A run's result; see the module doc.
#[derive(Debug, Clone)]
pub struct RunResult<'a> {
    pub info: RunInfo,
    pub task: TaskKind,
    pub report: BenchmarkReport,
    /// The per-request outcomes the report was computed from, in Python's list order.
    pub outputs: &'a [RequestOutput],
    pub rps_events: Vec<RpsChangeEvent>,
    /// `--save-detailed`: keep Python's per-request lists.
    pub save_detailed: bool,
    pub turns: Option<Turns>,
    pub adapters: Option<Adapters>,
    pub steady_state: Option<SteadyStateOutcome>,
    /// `None` only for a merge of shard files that did not record it.
    pub engine: Option<EngineFacts>,
    pub dispatch_lag: Option<Lag>,
    /// The client's health: one part for a run, one per shard merged.
    pub health: Vec<PartHealth>,
    /// Failures by reason, with one example each.
    pub failures: Vec<(String, usize, String)>,
    pub not_sent: usize,
    /// Of `not_sent`: requests whose session (conversation) ended at an earlier failure.
    pub not_sent_session_ended: usize,
    /// `None` unless the run cancels requests on purpose (`--request-cancellation-rate`).
    pub cancelled: Option<Cancelled>,
    /// Ctrl-C or SIGTERM stopped the run (a shard of it, merged).
    pub interrupted: bool,
    pub prefix_cache: Option<PrefixCache>,
    pub sections: Vec<Section>,
    pub shards: Shards,
    /// `--gpu-telemetry`: the GPUs' figures (also a section), for the timeline's strip and
    /// for readers such as a dashboard.
    pub gpu: Option<crate::server_metrics::GpuTelemetry>,
}
