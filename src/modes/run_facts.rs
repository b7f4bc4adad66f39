//! The facts of one run: everything its result is computed from, however they were
//! obtained. The live run builds them from the engine's recorders (`modes::point`); a shard
//! result saves them (`output::shard_file`: per request, the outcome, its span, its turn,
//! adapter, audio length and replica; for the run, its settings and the engine's and
//! client's facts); `merge` reads N such files and unions them (`modes::merge`).
//!
//! [`RunFacts::result`] is the one place a [`RunResult`] is computed: Python's metrics, the
//! RTFx, the per-turn blocks, the LoRA adapters, the steady state and the sections after
//! ours (start, replicas, server), in that order. A run and the merge of its shards differ
//! only in how they got their facts, so they cannot report differently, and a new report
//! section is written once, here.

use crate::metrics::agentic::AgenticFacts;
use crate::metrics::calculator::CountTokens;
use crate::metrics::goodput::GoodputConfig;
use crate::metrics::metric_stats::MetricKind;
use crate::metrics::probe::ProbeStats;
use crate::metrics::report::{BenchmarkReport, ReportSettings, TaskKind, TaskMetrics};
use crate::metrics::steady_state::SteadyStateParams;
use crate::metrics::RequestOutput;
use crate::output::facts::{EngineFacts, Lag, PartHealth, PrefixCache};
use crate::output::json::{RpsChangeEvent, RunInfo};
use crate::output::run_result::{Adapters, Cancelled, RunResult, Section, Shards, Turns};
use crate::server_metrics::ServerMetrics;

use super::multi_turn::{per_turn, TurnRequest};

/// How the metrics are computed and shown: the flags a shard saves with its requests.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricSettings {
    pub percentiles: Vec<f64>,
    pub percentile_metrics: Vec<MetricKind>,
    pub goodput: GoodputConfig,
    /// `--save-detailed`: keep Python's per-request lists.
    pub save_detailed: bool,
    /// The steady-state settings, when the figures apply to this run.
    pub steady_state: Option<SteadyStateParams>,
}

/// Per request, in the order of Python's lists (the outputs'): what the report needs
/// beside the outcome. Optional columns are `None` when the run has no such feature.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestFacts {
    /// Send and end, ns since the run's start.
    pub spans: Vec<(u64, u64)>,
    /// `--multi-turn`: each request's conversation and turn (1-based).
    pub turns: Option<(Vec<String>, Vec<u64>)>,
    /// `--lora-modules`: each request's adapter, an index into [`RunFacts::adapter_names`].
    pub adapter: Option<Vec<u32>>,
    /// Audio datasets: each request's audio length, seconds (for Python's `rtfx`).
    pub audio_s: Option<Vec<f64>>,
    /// With several replicas, each request's, an index into [`RunFacts::replica_urls`].
    pub replica: Vec<u16>,
}

/// The server's `/metrics` as this run shows them: the scrape, and for a merge the shard
/// whose scrape it is (`K`, `K/N`).
#[derive(Debug, Clone)]
pub struct ServerView<'a> {
    /// `None`: no scrape (off, unanswered, or no shard had one).
    pub metrics: Option<&'a ServerMetrics>,
    pub from_shard: Option<(usize, String)>,
}

/// Everything a run's result is computed from; see the module doc.
pub struct RunFacts<'a> {
    /// The run as this process reports it (a shard: its own share of the concurrency).
    pub info: RunInfo,
    pub task: TaskKind,
    /// From the start to the end of the last response, seconds.
    pub duration_s: f64,
    pub settings: MetricSettings,
    /// Counts the tokens of a generated text (`None` without a tokenizer). A merge counts
    /// none: the shards saved the lengths their calculators used.
    pub count_tokens: Option<CountTokens<'a>>,
    pub outputs: &'a [RequestOutput],
    pub requests: RequestFacts,
    /// `--lora-modules`, in order.
    pub adapter_names: Vec<String>,
    /// `--base-url` repeated (one with one server).
    pub replica_urls: Vec<String>,
    pub probe: Option<ProbeStats>,
    pub rps_events: Vec<RpsChangeEvent>,
    pub engine: Option<EngineFacts>,
    pub dispatch_lag: Option<Lag>,
    pub health: Vec<PartHealth>,
    pub failures: Vec<(String, usize, String)>,
    pub not_sent: usize,
    pub not_sent_session_ended: usize,
    pub cancelled: Option<Cancelled>,
    pub interrupted: bool,
    pub prefix_cache: Option<PrefixCache>,
    /// How the run started on `--start-at`'s axis (empty without it).
    pub start: Section,
    pub server: ServerView<'a>,
    pub shards: Shards,
    /// `--dataset-name agentic_trace`: the replay's records, tree shapes and settings, whose
    /// report is printed and saved after the sections above (`None` for other datasets).
    pub agentic: Option<AgenticFacts>,
}

impl<'a> RunFacts<'a> {
    /// The calculator's settings of this run (or of one turn, one adapter: same settings,
    /// other requests).
    fn report_settings(&self) -> ReportSettings<'a> {
        ReportSettings {
            duration_s: self.duration_s,
            task: self.task,
            count_tokens: self.count_tokens,
            percentiles: self.settings.percentiles.clone(),
            percentile_metrics: self.settings.percentile_metrics.clone(),
            goodput: self.settings.goodput.clone(),
            max_concurrency: self.info.max_concurrency,
            request_rate: self.info.request_rate,
        }
    }

    /// The run's result: every figure it reports, computed from these facts alone.
    pub fn result(self) -> RunResult<'a> {
        let settings = self.report_settings();
        let outputs = self.outputs;
        let mut report = BenchmarkReport::compute(outputs, &settings);
        report.probe = self.probe.clone();
        if let (Some(audio), TaskMetrics::Generation { metrics, .. }) =
            (&self.requests.audio_s, &mut report.metrics)
        {
            metrics.rtfx = rtfx(outputs, audio, self.duration_s);
        }
        let spans = &self.requests.spans;
        let turns = self.requests.turns.clone().map(|(conversations, numbers)| {
            let requests = outputs.iter().zip(&numbers).zip(spans).map(
                |((output, &n), &(start_ns, end_ns))| TurnRequest {
                    output,
                    turn: n.saturating_sub(1) as u32,
                    start_ns,
                    end_ns,
                },
            );
            Turns {
                reports: per_turn(requests, &settings),
                conversations,
                numbers,
            }
        });
        let adapters = self.requests.adapter.as_ref().map(|of| Adapters {
            summaries: super::lora::summaries(&self.adapter_names, of, outputs, &settings),
            per_request: of
                .iter()
                .map(|&a| {
                    self.adapter_names
                        .get(a as usize)
                        .cloned()
                        .unwrap_or_default()
                })
                .collect(),
        });
        let steady_state = super::steady_state_gate::measure(
            self.settings.steady_state,
            outputs,
            spans.iter().copied(),
            &report,
            &self.settings.percentiles,
        );
        let replicas = crate::output::replicas::section(&crate::output::replicas::of(
            &self.replica_urls,
            outputs,
            (0..outputs.len()).map(|i| self.requests.replica.get(i).copied().unwrap_or(0)),
        ));
        use crate::output::server_metrics as sm;
        let none = ServerMetrics::default();
        let metrics = self.server.metrics.unwrap_or(&none);
        let server = match &self.server.from_shard {
            Some((k, name)) => Section {
                console: sm::render_from(metrics, &report, Some(name)),
                json: sm::to_json_from(metrics, Some(*k)),
            },
            None => Section {
                console: sm::render(metrics, &report),
                json: sm::to_json(metrics),
            },
        };
        let mut sections = vec![self.start, replicas, server];
        if let Some(a) = &self.agentic {
            sections.push(crate::output::agentic::section(&a.report()));
        }
        RunResult {
            info: self.info,
            task: self.task,
            report,
            outputs,
            rps_events: self.rps_events,
            save_detailed: self.settings.save_detailed,
            turns,
            adapters,
            steady_state,
            engine: self.engine,
            dispatch_lag: self.dispatch_lag,
            health: self.health,
            failures: self.failures,
            not_sent: self.not_sent,
            not_sent_session_ended: self.not_sent_session_ended,
            cancelled: self.cancelled,
            interrupted: self.interrupted,
            prefix_cache: self.prefix_cache,
            sections,
            shards: self.shards,
        }
    }
}

/// Python's `rtfx`: the audio seconds of the successful requests per second of the run.
fn rtfx(outputs: &[RequestOutput], audio_s: &[f64], duration_s: f64) -> f64 {
    let secs: f64 = outputs
        .iter()
        .zip(audio_s)
        .filter(|(o, _)| o.success)
        .map(|(_, s)| s)
        .sum();
    secs / duration_s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rtfx_counts_the_audio_of_the_successful_requests() {
        let outputs: Vec<RequestOutput> = [true, false, true]
            .into_iter()
            .map(|success| RequestOutput {
                success,
                ..RequestOutput::default()
            })
            .collect();
        // (7 + 3) s of audio in 2 s.
        assert_eq!(rtfx(&outputs, &[7.0, 5.0, 3.0], 2.0), 5.0);
    }
}
