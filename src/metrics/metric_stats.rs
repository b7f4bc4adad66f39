//! One latency metric's summary (mean, median, std, percentiles in ms) and the catalogue of
//! metrics Python can report (`--percentile-metrics` names, console labels and headers).
//!
//! Both the console block and the result JSON walk the same list of `MetricKind`s, so the
//! names live here once rather than in each printer.

use super::stats;

/// `mean / median / std / percentiles` of one metric, in milliseconds, as Python's
/// `BenchmarkMetrics` holds them (`mean_ttft_ms`, ..., `percentiles_ttft_ms`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetricStats {
    pub mean_ms: f64,
    pub median_ms: f64,
    pub std_ms: f64,
    /// `(p, value_ms)` in the order the percentiles were requested.
    pub percentiles_ms: Vec<(f64, f64)>,
}

impl MetricStats {
    /// Summarises samples given in seconds, in their recorded order (the order matters for
    /// numpy's pairwise sums). Each statistic is computed on seconds and then multiplied by
    /// 1000, as Python does. An empty list gives all zeros (Python's `values or 0`).
    pub fn from_seconds(samples: Vec<f64>, percentiles: &[f64]) -> Self {
        Self::from_values(samples.len(), || samples.iter().copied(), percentiles)
    }

    /// As [`MetricStats::from_seconds`], of the `n` values `values()` yields, read a few
    /// times and never collected (a run's inter-token gaps, read from their arenas): the
    /// mean and std as numpy sums them, the median and percentiles from a selection of the
    /// positions they read (`stats::select`), exact as a sort of every value would be.
    pub fn from_values<I: Iterator<Item = f64>>(
        n: usize,
        values: impl Fn() -> I,
        percentiles: &[f64],
    ) -> Self {
        let (mean, std) = stats::mean_std_of(n, &values);
        let picks: Vec<stats::Pick> = std::iter::once(stats::Pick::median(n))
            .chain(percentiles.iter().map(|&p| stats::Pick::percentile(n, p)))
            .collect();
        let found = stats::picked(values, &picks);
        MetricStats {
            mean_ms: mean * 1000.0,
            median_ms: found[0] * 1000.0,
            std_ms: std * 1000.0,
            percentiles_ms: percentiles
                .iter()
                .zip(&found[1..])
                .map(|(&p, v)| (p, v * 1000.0))
                .collect(),
        }
    }
}

/// The metrics an `--slo` term may name, in the order they are listed: adding a metric to
/// the search is one line here (its figures come from the run's report; the `--slo` help
/// and the term parser read this list).
pub const SLO_METRICS: &[MetricKind] = &[
    MetricKind::Ttft,
    MetricKind::Ttfo,
    MetricKind::Tpot,
    MetricKind::Itl,
    MetricKind::E2el,
    MetricKind::ClientQueueTime,
];

/// A metric `--percentile-metrics` can select, in Python's reporting order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetricKind {
    Ttft,
    /// Ours, not Python's: time to first output token (the first token that is not
    /// reasoning). Reported only when selected, so a default run prints Python's block.
    Ttfo,
    Tpot,
    Itl,
    E2el,
    ClientQueueTime,
    E2elIncludingClientQueue,
}

impl MetricKind {
    /// Every metric, in the order Python prints and saves them (TTFO, ours, beside TTFT).
    pub const ALL: [MetricKind; 7] = [
        MetricKind::Ttft,
        MetricKind::Ttfo,
        MetricKind::Tpot,
        MetricKind::Itl,
        MetricKind::E2el,
        MetricKind::ClientQueueTime,
        MetricKind::E2elIncludingClientQueue,
    ];

    /// The `--percentile-metrics` name, also the middle of the JSON keys (`mean_ttft_ms`).
    pub fn name(self) -> &'static str {
        match self {
            MetricKind::Ttft => "ttft",
            MetricKind::Ttfo => "ttfo",
            MetricKind::Tpot => "tpot",
            MetricKind::Itl => "itl",
            MetricKind::E2el => "e2el",
            MetricKind::ClientQueueTime => "client_queue_time",
            MetricKind::E2elIncludingClientQueue => "e2el_including_client_queue",
        }
    }

    /// The label used in console lines (`Mean TTFT (ms):`).
    pub fn label(self) -> &'static str {
        match self {
            MetricKind::Ttft => "TTFT",
            MetricKind::Ttfo => "TTFO",
            MetricKind::Tpot => "TPOT",
            MetricKind::Itl => "ITL",
            MetricKind::E2el => "E2EL",
            MetricKind::ClientQueueTime => "Client Queue Time",
            MetricKind::E2elIncludingClientQueue => "E2EL incl. Client Queue",
        }
    }

    /// The console section header, centred in a 50-column rule.
    pub fn header(self) -> &'static str {
        match self {
            MetricKind::Ttft => "Time to First Token",
            MetricKind::Ttfo => "Time to First Output Token",
            MetricKind::Tpot => "Time per Output Token (excl. 1st token)",
            MetricKind::Itl => "Inter-token Latency",
            MetricKind::E2el => "End-to-end Latency",
            MetricKind::ClientQueueTime => "Client-side Queueing",
            MetricKind::E2elIncludingClientQueue => "Queue-inclusive End-to-end Latency",
        }
    }

    /// The metric called `name`, if it is one Python knows.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Parses a comma-separated `--percentile-metrics` value. Unknown names are skipped,
    /// exactly as Python skips them (it only ever asks "is this name in the list?").
    pub fn parse_list(value: &str) -> Vec<Self> {
        let mut kinds = Vec::new();
        for kind in value.split(',').filter_map(Self::from_name) {
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
        kinds
    }
}

/// Python's key word for a percentile: `99` for 99.0, `99.9` for 99.9
/// (`str(int(p)) if int(p) == p else str(p)`).
pub fn percentile_word(p: f64) -> String {
    if p.is_finite() && p.trunc() == p && p.abs() < 1e18 {
        format!("{}", p as i64)
    } else {
        crate::pyfmt::float_repr(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_are_in_ms_and_empty_is_zero() {
        let s = MetricStats::from_seconds(vec![0.003, 0.001, 0.002], &[50.0, 100.0]);
        assert_eq!(s.mean_ms, 2.0);
        assert_eq!(s.median_ms, 2.0);
        assert_eq!(s.percentiles_ms, vec![(50.0, 2.0), (100.0, 3.0)]);
        let e = MetricStats::from_seconds(Vec::new(), &[99.0]);
        assert_eq!(
            e,
            MetricStats {
                percentiles_ms: vec![(99.0, 0.0)],
                ..Default::default()
            }
        );
    }

    #[test]
    fn names_round_trip_and_unknown_names_are_ignored() {
        for k in MetricKind::ALL {
            assert_eq!(MetricKind::from_name(k.name()), Some(k));
        }
        assert_eq!(
            MetricKind::parse_list("e2el,bogus,ttft,e2el"),
            vec![MetricKind::E2el, MetricKind::Ttft]
        );
        assert!(MetricKind::parse_list("").is_empty());
    }

    #[test]
    fn percentile_words() {
        assert_eq!(percentile_word(99.0), "99");
        assert_eq!(percentile_word(99.9), "99.9");
        assert_eq!(percentile_word(0.0), "0");
        assert_eq!(percentile_word(0.001), "0.001");
        assert_eq!(percentile_word(1e-05), "1e-05");
    }
}
