//! When a run gets steady-state metrics, and the records they are computed from: the one
//! call the benchmark makes after the engine returns (the computation itself is the pure
//! `metrics::steady_state`).
//!
//! They apply to a closed loop only (`--max-concurrency` with an infinite `--request-rate`,
//! no ramp-up, no trace timing): with timed arrivals the number in flight follows the
//! arrivals, and a plateau of it says nothing about what the server sustains. Pooling
//! backends have no TTFT or TPOT, so they are left out too, and so are multi-turn runs, whose
//! think time and growing prompts make the number in flight a property of the conversations
//! (they get per-turn blocks instead).

use std::time::Duration;

use crate::config::Config;
use crate::metrics::report::{BenchmarkReport, TaskMetrics};
use crate::metrics::steady_state::{
    compute, Span, SteadyStateOutcome, SteadyStateParams, SteadyStateSettings,
};
use crate::metrics::RequestOutput;

/// The steady-state settings of a run at `max_concurrency` and `request_rate` (its point's:
/// a sweep varies them); `None` when the figures do not apply (see the module doc) or
/// `--no-steady-state` was given.
pub fn params(
    config: &Config,
    max_concurrency: Option<usize>,
    request_rate: f64,
) -> Option<SteadyStateParams> {
    let closed = config.rate.is_closed_loop_at(max_concurrency, request_rate);
    if !config.steady_state.enabled || !closed || config.multi_turn.is_some() {
        return None;
    }
    Some(SteadyStateParams {
        threshold: config.steady_state.threshold,
        max_concurrency: max_concurrency? as u64,
        min_window_s: config.steady_state.min_window_sec,
    })
}

/// The steady-state figures of finished requests: `outputs` and `spans` (send and end, ns
/// since the run's epoch) index for index, `report` computed over the same outputs.
pub fn measure(
    params: Option<SteadyStateParams>,
    outputs: &[RequestOutput],
    spans: impl Iterator<Item = (u64, u64)>,
    report: &BenchmarkReport,
    percentiles: &[f64],
) -> Option<SteadyStateOutcome> {
    let params = params?;
    let TaskMetrics::Generation {
        actual_output_lens, ..
    } = &report.metrics
    else {
        return None;
    };
    // The spans know when each request released its slot, failures included.
    let spans: Vec<Span> = spans
        .map(|(start, end)| Span {
            start: secs(start),
            end: secs(end),
        })
        .collect();
    let settings = SteadyStateSettings {
        threshold: params.threshold,
        max_concurrency: params.max_concurrency,
        min_window_s: params.min_window_s,
        duration_s: report.duration_s,
        ttft_percentiles: percentiles.to_vec(),
        ttfo: report.shows_ttfo(),
    };
    Some(compute(outputs, actual_output_lens, &spans, &settings))
}

/// Seconds exactly as the engine converts `start_time`, so a window bound equals the
/// `start_times` entry of the request that opened it.
fn secs(ns: u64) -> f64 {
    Duration::from_nanos(ns).as_secs_f64()
}
