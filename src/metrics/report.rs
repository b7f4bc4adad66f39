//! A finished run's metrics bundled with the run facts the printers need.
//!
//! `BenchmarkReport::compute` is the single entry point the run calls after the engine
//! returns: it picks the generation or pooling calculator, adds the client-queue sections,
//! and records which sections Python would show. The console block and the result JSON only
//! read a report, so "which lines/keys appear when" is decided here once (`sections`).

use super::calculator::{
    calculate_metrics, calculate_metrics_for_embeddings, client_queue_stats, BenchmarkMetrics,
    ClientQueueStats, CountTokens, EmbedBenchmarkMetrics,
};
use super::goodput::GoodputConfig;
use super::metric_stats::{MetricKind, MetricStats};
use super::RequestOutput;
use crate::types::Backend;

/// Python's `TaskType`: generation (streamed tokens) or pooling (one response per request).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskKind {
    Generation,
    Pooling,
}

impl TaskKind {
    /// The task a `--backend` runs (Python's `POOLING_BACKENDS` are pooling tasks).
    pub fn for_backend(backend: Backend) -> Self {
        if backend.is_pooling() {
            TaskKind::Pooling
        } else {
            TaskKind::Generation
        }
    }

    /// The `--percentile-metrics` default: `ttft,tpot,itl` for generation, `e2el` for pooling.
    pub fn default_percentile_metrics(self) -> &'static str {
        match self {
            TaskKind::Generation => "ttft,tpot,itl",
            TaskKind::Pooling => "e2el",
        }
    }
}

/// The calculator's result for the run's task.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskMetrics {
    Generation {
        /// Boxed: far larger than the pooling figures.
        metrics: Box<BenchmarkMetrics>,
        /// Per request, in request order (Python's `actual_output_lens`).
        actual_output_lens: Vec<u64>,
    },
    Pooling(EmbedBenchmarkMetrics),
}

/// Everything `BenchmarkReport::compute` needs besides the outcomes.
#[derive(Clone)]
pub struct ReportSettings<'a> {
    /// Measured run duration, seconds (Python's `benchmark_duration`).
    pub duration_s: f64,
    pub task: TaskKind,
    /// Counts tokens of generated text; `None` with `--skip-tokenizer-init` (Python then
    /// assumes 1 output token and hides the token-based lines and sections).
    pub count_tokens: Option<CountTokens<'a>>,
    /// `--metric-percentiles`, in order.
    pub percentiles: Vec<f64>,
    /// `--percentile-metrics` (unknown names already dropped; see `MetricKind::parse_list`).
    pub percentile_metrics: Vec<MetricKind>,
    pub goodput: GoodputConfig,
    pub max_concurrency: Option<u64>,
    /// Requests per second; `f64::INFINITY` when unset.
    pub request_rate: f64,
}

/// A run's metrics plus the facts that decide what is shown.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchmarkReport {
    pub duration_s: f64,
    pub max_concurrency: Option<u64>,
    pub request_rate: f64,
    /// `--goodput` was given: print the goodput line and save a number, not `null`.
    pub goodput_enabled: bool,
    /// A tokenizer was loaded (not `--skip-tokenizer-init`).
    pub has_tokenizer: bool,
    pub percentile_metrics: Vec<MetricKind>,
    pub metrics: TaskMetrics,
    pub queue: ClientQueueStats,
    /// `--probe-request-rate`'s statistics (set by the caller from the probe lane).
    pub probe: Option<super::probe::ProbeStats>,
}

/// How the calculator counts a text-only response's tokens: with the tokenizer, else one
/// token each (as Python does without a tokenizer).
pub fn counter(count_tokens: Option<CountTokens<'_>>) -> CountTokens<'_> {
    fn one(_: &str) -> usize {
        1
    }
    count_tokens.unwrap_or(&one)
}

impl BenchmarkReport {
    /// Runs the calculator for the task and the client-queue statistics.
    pub fn compute(outputs: &[RequestOutput], settings: &ReportSettings<'_>) -> Self {
        let metrics = match settings.task {
            TaskKind::Generation => {
                let (metrics, actual_output_lens) = calculate_metrics(
                    outputs,
                    settings.duration_s,
                    counter(settings.count_tokens),
                    &settings.percentiles,
                    &settings.goodput,
                );
                TaskMetrics::Generation {
                    metrics: Box::new(metrics),
                    actual_output_lens,
                }
            }
            TaskKind::Pooling => TaskMetrics::Pooling(calculate_metrics_for_embeddings(
                outputs,
                settings.duration_s,
                &settings.percentiles,
            )),
        };
        let wants_queue = settings.percentile_metrics.iter().any(|k| {
            matches!(
                k,
                MetricKind::ClientQueueTime | MetricKind::E2elIncludingClientQueue
            )
        });
        let queue = if wants_queue {
            client_queue_stats(
                outputs,
                settings.max_concurrency,
                settings.request_rate,
                &settings.percentiles,
            )
        } else {
            ClientQueueStats::default()
        };
        BenchmarkReport {
            duration_s: settings.duration_s,
            max_concurrency: settings.max_concurrency,
            request_rate: settings.request_rate,
            goodput_enabled: !settings.goodput.is_empty(),
            has_tokenizer: settings.count_tokens.is_some(),
            percentile_metrics: settings.percentile_metrics.clone(),
            metrics,
            queue,
            probe: None,
        }
    }

    /// The task this report is for.
    pub fn task(&self) -> TaskKind {
        match self.metrics {
            TaskMetrics::Generation { .. } => TaskKind::Generation,
            TaskMetrics::Pooling(_) => TaskKind::Pooling,
        }
    }

    /// The metric sections Python prints and saves, in its order: TTFT, TPOT and ITL for
    /// generation with a tokenizer, E2EL, then the client-queue sections when they apply;
    /// each only if selected with `--percentile-metrics`.
    pub fn sections(&self) -> Vec<(MetricKind, &MetricStats)> {
        MetricKind::ALL
            .into_iter()
            .filter(|k| self.percentile_metrics.contains(k))
            .filter_map(|k| self.stats(k).map(|s| (k, s)))
            .collect()
    }

    /// Whether TTFO (ours) is reported: selected with `--percentile-metrics` on a generation
    /// run with a tokenizer. Its companion figures (requests with no output token, the
    /// reasoning-token total) show with it, so a run that does not ask prints Python's block.
    pub fn shows_ttfo(&self) -> bool {
        self.percentile_metrics.contains(&MetricKind::Ttfo)
            && self.stats(MetricKind::Ttfo).is_some()
    }

    /// The statistics of one metric, when this run reports it.
    fn stats(&self, kind: MetricKind) -> Option<&MetricStats> {
        match (&self.metrics, kind) {
            (TaskMetrics::Generation { metrics, .. }, k) if self.has_tokenizer => match k {
                MetricKind::Ttft => Some(&metrics.ttft),
                MetricKind::Ttfo => Some(&metrics.ttfo),
                MetricKind::Tpot => Some(&metrics.tpot),
                MetricKind::Itl => Some(&metrics.itl),
                MetricKind::E2el => Some(&metrics.e2el),
                _ => self.queue_stats(k),
            },
            (TaskMetrics::Generation { metrics, .. }, MetricKind::E2el) => Some(&metrics.e2el),
            (TaskMetrics::Pooling(m), MetricKind::E2el) => Some(&m.e2el),
            (_, k) => self.queue_stats(k),
        }
    }

    fn queue_stats(&self, kind: MetricKind) -> Option<&MetricStats> {
        match kind {
            MetricKind::ClientQueueTime => self.queue.client_queue_time.as_ref(),
            MetricKind::E2elIncludingClientQueue => self.queue.e2el_including_client_queue.as_ref(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome() -> RequestOutput {
        RequestOutput {
            success: true,
            output_tokens: 3,
            ttft: 0.1,
            itl: vec![0.01, 0.01].into(),
            latency: 0.12,
            client_queue_time: 0.05,
            ..Default::default()
        }
    }

    fn settings<'a>(
        task: TaskKind,
        metrics: &str,
        tok: Option<CountTokens<'a>>,
    ) -> ReportSettings<'a> {
        ReportSettings {
            duration_s: 1.0,
            task,
            count_tokens: tok,
            percentiles: vec![99.0],
            percentile_metrics: MetricKind::parse_list(metrics),
            goodput: GoodputConfig::default(),
            max_concurrency: Some(2),
            request_rate: 5.0,
        }
    }

    fn kinds(r: &BenchmarkReport) -> Vec<MetricKind> {
        r.sections().into_iter().map(|(k, _)| k).collect()
    }

    #[test]
    fn backends_map_to_tasks() {
        assert_eq!(
            TaskKind::for_backend(Backend::OpenaiEmbeddings),
            TaskKind::Pooling
        );
        assert_eq!(
            TaskKind::for_backend(Backend::VllmRerank),
            TaskKind::Pooling
        );
        assert_eq!(
            TaskKind::for_backend(Backend::OpenaiChat),
            TaskKind::Generation
        );
    }

    #[test]
    fn sections_follow_python_order_not_selection_order() {
        let count = |s: &str| s.len();
        let all = "e2el_including_client_queue,client_queue_time,e2el,itl,tpot,ttfo,ttft";
        let r = BenchmarkReport::compute(
            &[outcome()],
            &settings(TaskKind::Generation, all, Some(&count)),
        );
        assert_eq!(kinds(&r), MetricKind::ALL.to_vec());
    }

    #[test]
    fn pooling_and_tokenizerless_runs_hide_token_sections() {
        let all = "ttft,tpot,itl,e2el,client_queue_time";
        let r = BenchmarkReport::compute(&[outcome()], &settings(TaskKind::Pooling, all, None));
        assert_eq!(
            kinds(&r),
            vec![MetricKind::E2el, MetricKind::ClientQueueTime]
        );
        let r = BenchmarkReport::compute(&[outcome()], &settings(TaskKind::Generation, all, None));
        assert_eq!(
            kinds(&r),
            vec![MetricKind::E2el, MetricKind::ClientQueueTime]
        );
    }

    #[test]
    fn queue_sections_need_concurrency_and_finite_rate() {
        let count = |s: &str| s.len();
        let q = "client_queue_time,e2el_including_client_queue";
        let mut s = settings(TaskKind::Generation, q, Some(&count));
        s.request_rate = f64::INFINITY;
        let r = BenchmarkReport::compute(&[outcome()], &s);
        assert_eq!(kinds(&r), vec![MetricKind::ClientQueueTime]);
        s.max_concurrency = None;
        let r = BenchmarkReport::compute(&[outcome()], &s);
        assert!(kinds(&r).is_empty());
    }
}
