//! The facts of one run: everything its result is computed from, however they were
//! obtained. The live run builds them from the engine's recorders (`modes::point`); a
//! shard's result file is them saved (`modes::saved_facts::save` into
//! `output::shard_file`'s section: per request, the outcome, its span, its turn, adapter,
//! audio length and replica; for the run, its settings, probes, ramp-up, the engine's and
//! client's facts and the server's scrape); `merge` reads N such files and unions them
//! (`modes::merged_facts`).
//!
//! [`RunFacts::result`] is the one place a [`RunResult`] is computed: Python's metrics, the
//! RTFx, the per-turn blocks, the LoRA adapters, the steady state and the sections after
//! ours (start, replicas, server), in that order. A run and the merge of its shards differ
//! only in how they got their facts, so they cannot report differently, and a new report
//! section is written once, here.

use crate::metrics::agentic::AgenticFacts;
use crate::metrics::calculator::{output_length, CountTokens};
use crate::metrics::goodput::GoodputConfig;
use crate::metrics::metric_stats::MetricKind;
use crate::metrics::probe::ProbeStats;
use crate::metrics::report::{BenchmarkReport, ReportSettings, TaskKind, TaskMetrics};
use crate::metrics::steady_state::SteadyStateParams;
use crate::metrics::RequestOutput;
use crate::output::facts::{EngineFacts, Lag, PartHealth, PrefixCache};
use crate::output::json::{RpsChangeEvent, RunInfo};
use crate::output::request_export::{Outcome, RequestRow};
use crate::output::run_result::{Adapters, Cancelled, RunResult, Section, Shards, Turns};
use crate::server_metrics::{Series, ServerMetrics};

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
    /// Each request's index in the run (the plan's order); empty when not recorded.
    pub index: Vec<u32>,
    /// `--shard` or a merge: the shard that sent each request.
    pub shard: Option<Vec<u16>>,
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
    /// `--probe-request-rate`: each probe's end-to-end latency, seconds (`None`: failed).
    pub probes: Vec<Option<f64>>,
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
    /// `--gpu-telemetry`: each DCGM exporter's URL and scrapes over the run (empty without;
    /// a merge's: one series per exporter, `merged_facts::one_per_exporter`). Its figures
    /// need the run's output tokens, so they are computed with the result.
    pub gpu: Vec<(&'a str, &'a Series)>,
    /// The wall-clock time of the spans' zero, ns since the Unix epoch: one value for a run,
    /// or for a merge one per shard K (each shard's clock started at `--start-at` plus its
    /// own lateness, and its spans count from there); empty when unknown. The per-request
    /// export's epoch times are it plus the spans.
    pub epoch_ns: Vec<u64>,
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

    /// Each request's output length as the calculator counts it (usage, else the
    /// tokenizer's count, one token a text without a tokenizer; 0 when it failed): what a
    /// shard saves, so that its merge, which has no tokenizer, counts the same.
    pub fn output_lens(&self) -> Vec<u64> {
        match self.task {
            TaskKind::Generation => crate::metrics::calculator::output_lengths(
                self.outputs,
                crate::metrics::report::counter(self.count_tokens),
            ),
            TaskKind::Pooling => self.outputs.iter().map(|o| o.output_tokens).collect(),
        }
    }

    /// The run's result: every figure it reports, computed from these facts alone.
    pub fn result(self) -> RunResult<'a> {
        let settings = self.report_settings();
        let outputs = self.outputs;
        let mut report = BenchmarkReport::compute(outputs, &settings);
        report.probe = ProbeStats::of_latencies(&self.probes);
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
        // One server has no replica section: its figures would read every gap for nothing.
        let replicas = if self.replica_urls.len() < 2 {
            Section::default()
        } else {
            crate::output::replicas::section(&crate::output::replicas::of(
                &self.replica_urls,
                outputs,
                (0..outputs.len()).map(|i| self.requests.replica.get(i).copied().unwrap_or(0)),
            ))
        };
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
        let output_tokens = match &report.metrics {
            TaskMetrics::Generation { metrics, .. } => metrics.total_output,
            _ => 0,
        };
        let gpu = crate::server_metrics::GpuTelemetry::of(self.gpu.iter().copied(), output_tokens);
        let gpu_section = crate::output::gpu_telemetry::section(gpu.as_ref());
        let mut sections = vec![self.start, replicas, server, gpu_section];
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
            gpu,
        }
    }
}

impl<'a> RunFacts<'a> {
    /// Every request of the run as a row of the per-request export (`--export-requests`):
    /// the measured ones in the outputs' order, then one row per request cancelled on
    /// purpose and per request never sent (the run keeps no per-request facts of those, so
    /// their columns but the outcome are null): as many rows as the run planned requests.
    /// The one reader of the per-request facts for the export.
    pub fn request_rows(&self) -> impl Iterator<Item = RequestRow<'_>> + '_ {
        let r = &self.requests;
        let one = |_: &str| 1usize;
        let epochs = &self.epoch_ns;
        let secs_ns = |s: f64| (s * 1e9).round() as i64;
        let generation = self.task == TaskKind::Generation;
        let measured = self.outputs.iter().enumerate().map(move |(i, o)| {
            let shard = r.shard.as_ref().and_then(|s| s.get(i)).copied();
            let epoch = match epochs.len() {
                1 => epochs.first(),
                _ => shard.and_then(|k| epochs.get(usize::from(k))),
            };
            let at = |offset_ns: Option<i64>| Some(*epoch? as i64 + offset_ns?);
            let span = r.spans.get(i).map(|&(s, e)| (s as i64, e as i64));
            let sent = span.map(|s| s.0);
            let ok = o.success;
            let output_len =
                generation.then(|| output_length(o, self.count_tokens.unwrap_or(&one)));
            let itl_max = o
                .itl
                .iter()
                .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
            RequestRow {
                id: r.index.get(i).map(|&x| u64::from(x)),
                conversation: r
                    .turns
                    .as_ref()
                    .and_then(|t| t.0.get(i))
                    .map(String::as_str),
                turn: r.turns.as_ref().and_then(|t| t.1.get(i)).copied(),
                tree: None,
                stream: None,
                // Named with several servers only (as a shard file names them).
                replica: (self.replica_urls.len() > 1)
                    .then(|| self.replica_urls.get(r.replica.get(i).copied()? as usize))
                    .flatten()
                    .map(String::as_str),
                shard: r
                    .shard
                    .as_ref()
                    .and_then(|s| s.get(i))
                    .map(|&k| u64::from(k)),
                lora: r
                    .adapter
                    .as_ref()
                    .and_then(|a| a.get(i))
                    .and_then(|&a| self.adapter_names.get(a as usize))
                    .map(String::as_str),
                scheduled_ns: at(sent.map(|s| s - secs_ns(o.client_queue_time))),
                sent_ns: at(sent),
                first_token_ns: at(sent.filter(|_| ok).map(|s| s + secs_ns(o.ttft))),
                first_output_token_ns: at(sent
                    .filter(|_| ok)
                    .and_then(|s| Some(s + secs_ns(o.ttfo?)))),
                end_ns: at(span.map(|s| s.1)),
                ttft_s: ok.then_some(o.ttft),
                tpot_s: output_len
                    .filter(|&n| ok && n > 1)
                    .map(|n| (o.latency - o.ttft) / (n - 1) as f64),
                e2el_s: ok.then_some(o.latency),
                itl_count: Some(o.itl.len() as u64),
                itl_mean_s: (!o.itl.is_empty())
                    .then(|| o.itl.iter().sum::<f64>() / o.itl.len() as f64),
                itl_max_s: itl_max,
                prompt_tokens: Some(o.prompt_len),
                output_tokens: output_len,
                outcome: Some(if ok {
                    Outcome::Completed
                } else {
                    Outcome::Failed
                }),
                failure_reason: (!ok).then_some(o.error.as_str()),
                client_queue_s: Some(o.client_queue_time),
            }
        });
        let unmeasured = |n: usize, outcome| {
            std::iter::repeat_n(
                RequestRow {
                    outcome: Some(outcome),
                    ..RequestRow::default()
                },
                n,
            )
        };
        let cancelled = self.cancelled.map_or(0, |c| c.requests);
        measured
            .chain(unmeasured(cancelled, Outcome::Cancelled))
            .chain(unmeasured(self.not_sent, Outcome::NotSent))
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
