//! Steady-state metrics: throughput and latency over the plateau of a closed-loop run, with
//! the ramp-up and the drain cut off (vllm-bench's addition; Python has no equivalent).
//!
//! Why: at high `--max-concurrency` the first requests all prefill at once and the last ones
//! run on an emptying server, so whole-run figures move from run to run with the length of
//! those two phases. The plateau between them is what a deployment sustains.
//!
//! Definitions (pure functions of the per-request records, so they can be checked by hand):
//! - **In flight** at time `t`: the requests with `start <= t < end` (sent, not yet finished;
//!   failed requests count, they held a slot). Events at the same instant are applied together,
//!   so a worker that sends its next request the moment the previous one ends keeps the count.
//! - **Level**: `ceil(threshold × max_concurrency)`, at least 1 (requests are whole).
//! - **Window**: from the first instant the count reaches the level to the last instant it
//!   falls below it. Dips in between stay inside: in a closed loop the count only drops while
//!   a worker turns from one response to its next request, which is part of the plateau.
//! - **Served in window**: each successful request counts for the share of its time in flight
//!   that lies inside the window (1 wholly inside, 0.5 half inside), and so do its prompt and
//!   output tokens. Throughputs are these sums divided by the window's duration. Why shares and
//!   not completions: the window opens as the first requests are sent, and no request can end
//!   before one latency has passed, so completions per second over the window would come out
//!   low by about one latency over the window's length; by Little's law the shares sum to the
//!   sustained rate times the window (in flight / latency), with nothing lost at either end.
//! - **Inside the window**: successful requests that started at or after the window opened
//!   and ended at or before it closed. TTFT and TPOT are computed over these only, so no
//!   latency measured during the ramp-up burst or the drain enters. TPOT follows Python's
//!   rule (`(latency - ttft) / (output_len - 1)`, requests with more than one token).
//! - **TTFO** (with `--percentile-metrics ...,ttfo`): over the requests inside that sent an
//!   output token (not only reasoning), with `--metric-percentiles`.
//! - **No latency sample**: when no successful request lies wholly inside the window (a
//!   window shorter than one request), TTFT has no sample, and TPOT none when no request
//!   inside had more than one token; the figures are then absent (`N/A` in the block, `null`
//!   in the JSON), not the zeros Python's `values or 0` rule would give.
//! - **Minimum window**: `--steady-state-min-window`, else `max(10 s, 10 % of the run)`. A
//!   shorter window is still reported, flagged as short.

use super::metric_stats::MetricStats;
use super::RequestOutput;

/// The TPOT percentiles the steady-state block reports (TTFT uses `--metric-percentiles`).
pub const TPOT_PERCENTILES: [f64; 2] = [90.0, 99.0];

/// The default minimum window, seconds, before the 10 % of the run is considered.
pub const DEFAULT_MIN_WINDOW_S: f64 = 10.0;

/// When one request was in flight: seconds since the run's epoch, `start <= end`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span {
    pub start: f64,
    pub end: f64,
}

/// The steady-state window, seconds since the run's epoch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    pub start: f64,
    pub end: f64,
}

impl Window {
    pub fn duration(&self) -> f64 {
        self.end - self.start
    }
}

/// What a scan of the in-flight curve found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InFlightScan {
    /// The largest number of requests in flight at once.
    pub peak: u64,
    /// `None` when the count never reached the level.
    pub window: Option<Window>,
}

/// The smallest in-flight count inside the window: `ceil(threshold × max_concurrency)`, at
/// least 1. A hair below the product is allowed so that `0.7 × 10`, which is
/// `7.000000000000001` in binary floating point, gives 7 and not 8.
pub fn in_flight_level(threshold: f64, max_concurrency: u64) -> u64 {
    let exact = threshold * max_concurrency as f64;
    ((exact - 1e-9 * exact.max(1.0)).ceil() as u64).max(1)
}

/// Scans the in-flight curve of `spans` for the window at `level` (see the module doc).
/// Spans with a non-finite time are ignored; an end before its start counts as the start.
pub fn scan_in_flight(spans: &[Span], level: u64) -> InFlightScan {
    let mut events: Vec<(f64, i64)> = spans
        .iter()
        .filter(|s| s.start.is_finite() && s.end.is_finite())
        .flat_map(|s| [(s.start, 1), (s.end.max(s.start), -1)])
        .collect();
    events.sort_by(|a, b| a.0.total_cmp(&b.0));
    let level = level.max(1) as i64;
    let (mut count, mut peak) = (0i64, 0i64);
    let (mut open, mut close) = (None, None);
    let mut i = 0;
    while i < events.len() {
        let t = events[i].0;
        let before = count;
        while i < events.len() && events[i].0 == t {
            count += events[i].1;
            i += 1;
        }
        peak = peak.max(count);
        if open.is_none() && before < level && count >= level {
            open = Some(t);
        }
        if before >= level && count < level {
            close = Some(t);
        }
    }
    let window = match (open, close) {
        (Some(start), Some(end)) if end > start => Some(Window { start, end }),
        _ => None,
    };
    InFlightScan {
        peak: peak as u64,
        window,
    }
}

/// The user's steady-state settings of a run to which they apply (a shard's result carries
/// them, so the merge computes the figures of the union as the one-process run would).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SteadyStateParams {
    /// `--steady-state-threshold`.
    pub threshold: f64,
    /// `--max-concurrency` of the whole run.
    pub max_concurrency: u64,
    /// `--steady-state-min-window`.
    pub min_window_s: Option<f64>,
}

/// What the computation needs besides the per-request records.
#[derive(Debug, Clone, PartialEq)]
pub struct SteadyStateSettings {
    /// `--steady-state-threshold`, in (0, 1].
    pub threshold: f64,
    /// `--max-concurrency`.
    pub max_concurrency: u64,
    /// `--steady-state-min-window`; `None`: `max(10 s, 10 % of duration_s)`.
    pub min_window_s: Option<f64>,
    /// The whole run's duration, seconds (Python's `benchmark_duration`).
    pub duration_s: f64,
    /// `--metric-percentiles`, for TTFT (and TTFO).
    pub ttft_percentiles: Vec<f64>,
    /// TTFO is reported (`BenchmarkReport::shows_ttfo`): compute it over the window too.
    pub ttfo: bool,
}

/// The figures over a found window.
#[derive(Debug, Clone, PartialEq)]
pub struct SteadyState {
    pub threshold: f64,
    /// Requests in flight that open the window (`in_flight_level`).
    pub level: u64,
    pub window: Window,
    /// Below this duration the window is flagged as short.
    pub min_window_s: f64,
    /// `--steady-state-min-window` was given (the minimum is the user's, not the default).
    pub min_window_given: bool,
    /// The whole run's duration, seconds.
    pub run_s: f64,
    /// Successful requests, each counted for the share of its time in flight inside the
    /// window.
    pub requests_in_window: f64,
    /// Successful requests that started and ended inside the window (the TTFT samples).
    pub requests_inside: u64,
    /// Of those, the ones with more than one output token (the TPOT samples).
    pub tpot_samples: u64,
    pub request_throughput: f64,
    pub input_throughput: f64,
    pub output_throughput: f64,
    pub total_token_throughput: f64,
    /// Over the requests inside, with `--metric-percentiles` (zeros when there are none:
    /// see `requests_inside`).
    pub ttft: MetricStats,
    /// Over the requests inside, with [`TPOT_PERCENTILES`] (zeros when there are none: see
    /// `tpot_samples`).
    pub tpot: MetricStats,
    /// With TTFO reported: over the requests inside that sent an output token (their count,
    /// and the figures, zeros when there are none), with `--metric-percentiles`.
    /// Boxed: the outcome's other variant is two counts.
    pub ttfo: Option<Box<(u64, MetricStats)>>,
}

impl SteadyState {
    /// The window is shorter than the minimum: its figures rest on little data.
    pub fn is_short(&self) -> bool {
        self.window.duration() < self.min_window_s
    }

    /// A short window is worth a warning when the user set the minimum, or when the run
    /// was long enough to hold a window of the minimum length and its plateau was shorter
    /// (the load never settled). A run shorter than the minimum (the default is 10 s: a
    /// demo, a smoke test) cannot have such a window, and warning on every one of them
    /// taught users to ignore the warning.
    pub fn warns_short(&self) -> bool {
        self.is_short() && (self.min_window_given || self.run_s >= self.min_window_s)
    }
}

/// The result for a closed-loop run.
#[derive(Debug, Clone, PartialEq)]
pub enum SteadyStateOutcome {
    Computed(SteadyState),
    /// Requests in flight never reached `level` (peaked at `peak`).
    NotReached {
        level: u64,
        peak: u64,
    },
}

/// Computes the steady-state figures. `outputs`, `output_lens` (Python's
/// `actual_output_lens`) and `spans` describe the same requests, index for index.
pub fn compute(
    outputs: &[RequestOutput],
    output_lens: &[u64],
    spans: &[Span],
    settings: &SteadyStateSettings,
) -> SteadyStateOutcome {
    debug_assert!(outputs.len() == output_lens.len() && outputs.len() == spans.len());
    let level = in_flight_level(settings.threshold, settings.max_concurrency);
    let scan = scan_in_flight(spans, level);
    let Some(window) = scan.window else {
        return SteadyStateOutcome::NotReached {
            level,
            peak: scan.peak,
        };
    };
    let requests = || {
        outputs
            .iter()
            .zip(output_lens)
            .zip(spans)
            .filter(|((o, _), _)| o.success)
            .map(|((o, &len), s)| (o, len, s))
    };
    let (mut served, mut input, mut output) = (0.0, 0.0, 0.0);
    for (o, len, s) in requests() {
        let share = share_inside(s, &window);
        served += share;
        input += o.prompt_len as f64 * share;
        output += len as f64 * share;
    }
    let (mut ttfts, mut tpots, mut ttfos) = (Vec::new(), Vec::new(), Vec::new());
    for (o, len, _) in requests().filter(|(_, _, s)| window.start <= s.start && s.end <= window.end)
    {
        ttfts.push(o.ttft);
        ttfos.extend(o.ttfo);
        if len > 1 {
            tpots.push((o.latency - o.ttft) / (len - 1) as f64);
        }
    }
    let w = window.duration();
    SteadyStateOutcome::Computed(SteadyState {
        threshold: settings.threshold,
        level,
        window,
        min_window_s: settings
            .min_window_s
            .unwrap_or_else(|| DEFAULT_MIN_WINDOW_S.max(0.1 * settings.duration_s)),
        min_window_given: settings.min_window_s.is_some(),
        run_s: settings.duration_s,
        requests_in_window: served,
        requests_inside: ttfts.len() as u64,
        tpot_samples: tpots.len() as u64,
        request_throughput: served / w,
        input_throughput: input / w,
        output_throughput: output / w,
        total_token_throughput: (input + output) / w,
        ttft: MetricStats::from_seconds(ttfts, &settings.ttft_percentiles),
        tpot: MetricStats::from_seconds(tpots, &TPOT_PERCENTILES),
        ttfo: settings.ttfo.then(|| {
            let n = ttfos.len() as u64;
            let stats = MetricStats::from_seconds(ttfos, &settings.ttft_percentiles);
            Box::new((n, stats))
        }),
    })
}

/// The share of `span` inside `window`, in [0, 1]; an instant (`start == end`) is wholly in
/// or out.
fn share_inside(span: &Span, window: &Window) -> f64 {
    let length = span.end - span.start;
    if length.is_nan() || length <= 0.0 {
        let inside = window.start <= span.start && span.start <= window.end;
        return if inside { 1.0 } else { 0.0 };
    }
    let overlap = span.end.min(window.end) - span.start.max(window.start);
    (overlap / length).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(start: f64, end: f64) -> Span {
        Span { start, end }
    }

    /// Eight requests of a four-worker closed loop, times in seconds (binary fractions, so
    /// every sum below is exact). The in-flight curve, event by event:
    ///
    /// ```text
    /// t      0    .5   1.0  1.5  2.0  3.0  3.125 3.25 3.5  5.0  6.0  6.5  7.5  8.0
    /// count  1    2    3    4    4    3    2     3    4    4    3    2    1    0
    ///                  ^open                                         ^close (level 3)
    /// ```
    ///
    /// At 2.0 and 5.0 a request ends as the next starts (the count holds); at 3.125 it dips
    /// to 2 for 0.125 s and comes back, which stays inside the window.
    /// Request: (start, end, success, prompt, output, ttft).
    const RUN: [(f64, f64, bool, u64, u64, f64); 8] = [
        (0.0, 2.0, true, 10, 4, 0.5),     // A: ramp-up, ends inside
        (0.5, 3.0, false, 20, 0, 0.0),    // B: ramp-up, failed
        (1.0, 3.125, true, 30, 2, 0.125), // C: opens the window, inside
        (1.5, 5.0, true, 40, 5, 0.25),    // D: inside
        (2.0, 6.0, true, 50, 1, 0.5),     // E: inside (one token: no TPOT)
        (3.5, 7.5, true, 60, 3, 0.75),    // F: ends in the drain
        (3.25, 6.5, true, 70, 3, 0.375),  // G: inside, closes the window
        (5.0, 8.0, true, 80, 2, 1.0),     // H: ends in the drain
    ];

    fn run() -> (Vec<RequestOutput>, Vec<u64>, Vec<Span>) {
        let outputs = RUN
            .iter()
            .map(|&(start, end, success, prompt, _, ttft)| RequestOutput {
                success,
                prompt_len: prompt,
                ttft,
                latency: if success { end - start } else { 0.0 },
                start_time: start,
                ..Default::default()
            })
            .collect();
        let lens = RUN.iter().map(|r| r.4).collect();
        let spans = RUN.iter().map(|r| span(r.0, r.1)).collect();
        (outputs, lens, spans)
    }

    fn settings(threshold: f64, min_window_s: Option<f64>) -> SteadyStateSettings {
        SteadyStateSettings {
            threshold,
            max_concurrency: 4,
            min_window_s,
            duration_s: 8.0,
            ttft_percentiles: vec![50.0, 99.0],
            ttfo: false,
        }
    }

    fn computed(outcome: SteadyStateOutcome) -> SteadyState {
        match outcome {
            SteadyStateOutcome::Computed(s) => s,
            other => panic!("expected a window, got {other:?}"),
        }
    }

    #[test]
    fn level_is_the_ceiling_of_the_fraction() {
        assert_eq!(in_flight_level(0.95, 100), 95);
        assert_eq!(in_flight_level(0.95, 16), 16); // 15.2 requests cannot be in flight
        assert_eq!(in_flight_level(0.95, 20), 19);
        assert_eq!(in_flight_level(0.7, 10), 7); // 7.000000000000001 in f64
        assert_eq!(in_flight_level(0.75, 4), 3);
        assert_eq!(in_flight_level(1.0, 7), 7);
        assert_eq!(in_flight_level(0.01, 1), 1);
        assert_eq!(in_flight_level(0.5, 0), 1);
    }

    #[test]
    fn window_opens_at_the_level_and_closes_at_the_last_fall() {
        let (_, _, spans) = run();
        let scan = scan_in_flight(&spans, 3);
        assert_eq!(scan.peak, 4);
        assert_eq!(
            scan.window,
            Some(Window {
                start: 1.0,
                end: 6.5
            })
        );
        // Level 4: reached at 1.5 (D's start), last fall at 6.0 (E's end); the dip to 2 at
        // 3.125 is inside.
        assert_eq!(
            scan_in_flight(&spans, 4).window,
            Some(Window {
                start: 1.5,
                end: 6.0
            })
        );
        assert_eq!(scan_in_flight(&spans, 5).window, None);
        assert_eq!(
            scan_in_flight(&[], 1),
            InFlightScan {
                peak: 0,
                window: None
            }
        );
    }

    #[test]
    fn simultaneous_end_and_start_keep_the_count() {
        // Two workers, each sending its next request the instant the previous one ends: the
        // count never leaves 2 between 1.0 and 3.0.
        let spans = [
            span(0.0, 1.0),
            span(1.0, 2.0),
            span(2.0, 3.0),
            span(0.5, 3.0),
        ];
        let scan = scan_in_flight(&spans, 2);
        assert_eq!(scan.peak, 2);
        assert_eq!(
            scan.window,
            Some(Window {
                start: 0.5,
                end: 3.0
            })
        );
        // Nonsense times neither loop nor count.
        let bad = [
            span(f64::NAN, 1.0),
            span(0.0, f64::INFINITY),
            span(2.0, 1.0),
        ];
        assert_eq!(
            scan_in_flight(&bad, 1),
            InFlightScan {
                peak: 0,
                window: None
            }
        );
    }

    #[test]
    fn figures_over_the_window_are_the_hand_computed_ones() {
        let (outputs, lens, spans) = run();
        let s = computed(compute(&outputs, &lens, &spans, &settings(0.75, None)));
        assert_eq!(s.level, 3);
        assert_eq!(
            s.window,
            Window {
                start: 1.0,
                end: 6.5
            }
        );
        // Shares inside [1.0, 6.5] of the successful requests (B failed): A 1 of its 2 s
        // (0.5), C, D, E, G wholly (1 each), F 3 of its 4 s (0.75), H 1.5 of its 3 s (0.5).
        assert_eq!(s.requests_in_window, 5.75);
        assert_eq!(s.request_throughput, 5.75 / 5.5);
        // Prompt: 10×0.5 + 30 + 40 + 50 + 60×0.75 + 70 + 80×0.5 = 280.
        assert_eq!(s.input_throughput, 280.0 / 5.5);
        // Output: 4×0.5 + 2 + 5 + 1 + 3×0.75 + 3 + 2×0.5 = 16.25.
        assert_eq!(s.output_throughput, 16.25 / 5.5);
        assert_eq!(s.total_token_throughput, 296.25 / 5.5);
        // Inside [1.0, 6.5]: C, D, E, G (A and B started in the ramp-up, F and H end in the
        // drain). TTFT: 0.125, 0.25, 0.5, 0.375 s.
        assert_eq!(s.requests_inside, 4);
        assert_eq!(s.tpot_samples, 3);
        assert_eq!(s.ttft.mean_ms, 312.5);
        assert_eq!(s.ttft.median_ms, 312.5);
        assert_eq!(
            s.ttft,
            MetricStats::from_seconds(vec![0.125, 0.25, 0.5, 0.375], &[50.0, 99.0])
        );
        // TPOT: C (3.125-1-0.125)/1 = 2.0, D (3.5-0.25)/4 = 0.8125, G (3.25-0.375)/2 = 1.4375;
        // E has one token.
        assert_eq!(s.tpot.median_ms, 1437.5);
        assert_eq!(
            s.tpot,
            MetricStats::from_seconds(vec![2.0, 0.8125, 1.4375], &TPOT_PERCENTILES)
        );
        assert_eq!(
            s.tpot
                .percentiles_ms
                .iter()
                .map(|p| p.0)
                .collect::<Vec<_>>(),
            [90.0, 99.0]
        );
    }

    #[test]
    fn shares_of_time_in_flight_inside_the_window() {
        let w = Window {
            start: 1.0,
            end: 3.0,
        };
        assert_eq!(share_inside(&span(0.0, 2.0), &w), 0.5);
        assert_eq!(share_inside(&span(1.0, 3.0), &w), 1.0);
        assert_eq!(share_inside(&span(2.5, 4.5), &w), 0.25);
        assert_eq!(share_inside(&span(0.0, 4.0), &w), 0.5);
        assert_eq!(share_inside(&span(3.0, 4.0), &w), 0.0);
        assert_eq!(share_inside(&span(0.0, 0.5), &w), 0.0);
        assert_eq!(share_inside(&span(2.0, 2.0), &w), 1.0);
        assert_eq!(share_inside(&span(5.0, 5.0), &w), 0.0);
    }

    #[test]
    fn minimum_window_defaults_to_ten_seconds_or_a_tenth_of_the_run() {
        let (outputs, lens, spans) = run();
        let s = computed(compute(&outputs, &lens, &spans, &settings(0.75, None)));
        assert_eq!(s.min_window_s, 10.0);
        assert!(s.is_short(), "5.5 s < 10 s");
        let mut long_run = settings(0.75, None);
        long_run.duration_s = 300.0;
        let s = computed(compute(&outputs, &lens, &spans, &long_run));
        assert_eq!(s.min_window_s, 30.0);
        let s = computed(compute(&outputs, &lens, &spans, &settings(0.75, Some(5.5))));
        assert!(!s.is_short(), "exactly the minimum is long enough");
    }

    #[test]
    fn a_level_never_reached_reports_the_peak() {
        let (outputs, lens, spans) = run();
        let mut s = settings(0.95, None);
        s.max_concurrency = 8; // level 8, peak 4
        assert_eq!(
            compute(&outputs, &lens, &spans, &s),
            SteadyStateOutcome::NotReached { level: 8, peak: 4 }
        );
    }
}
