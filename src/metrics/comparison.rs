//! Comparing saved results: which way is better for each metric, and the exact change from a
//! baseline (`--compare A.json B.json ...`).
//!
//! Pure functions over `(key, number)` lists, so the deltas can be checked by hand: a delta is
//! `candidate - baseline` in the numbers' own arithmetic (integers stay integers, floats are
//! one IEEE subtraction), and the % change is `delta / |baseline| × 100`. Nothing is rounded
//! here; rounding is the printer's.
//!
//! Direction comes from the key's name, with Python's naming conventions: latencies end in
//! `_ms` (TTFT, TPOT, ITL, E2EL, queue times, our dispatch lag: lower is better), throughputs
//! and goodput are per second (higher is better); `completed` is higher-better and `failed`,
//! failures by reason and requests not sent are lower-better; `duration` is lower-better (the
//! same work done sooner). Counts that describe the workload (tokens, peak concurrency, the
//! steady-state window) have no better direction. Nested keys (`steady_state.
//! request_throughput`) are judged by their last part, except the failure counts.

/// A number as a result file holds it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Num {
    Int(i64),
    Float(f64),
}

impl Num {
    pub fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
}

/// Which way a metric improves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Higher,
    Lower,
    /// A fact about the workload, not a quality (token totals, peak concurrency, ...).
    Neither,
}

impl Direction {
    /// `higher`, `lower` or empty, as the table shows it.
    pub fn word(self) -> &'static str {
        match self {
            Direction::Higher => "higher",
            Direction::Lower => "lower",
            Direction::Neither => "",
        }
    }
}

/// Keys whose whole name decides (checked before the suffix rules).
const EXACT: [(&str, Direction); 5] = [
    ("completed", Direction::Higher),
    ("failed", Direction::Lower),
    ("duration", Direction::Lower),
    ("vllm_bench_not_sent", Direction::Lower),
    ("vllm_bench_server_prefix_hit_ratio", Direction::Higher),
];

/// Prefixes of nested keys that are all one direction.
const PREFIXES: [(&str, Direction); 1] = [("vllm_bench_failures_by_reason.", Direction::Lower)];

/// Which way `key` (a top-level or dotted nested result key) is better.
pub fn direction(key: &str) -> Direction {
    if let Some(&(_, d)) = EXACT.iter().find(|(k, _)| *k == key) {
        return d;
    }
    if let Some(&(_, d)) = PREFIXES.iter().find(|(p, _)| key.starts_with(p)) {
        return d;
    }
    let leaf = key.rsplit('.').next().unwrap_or(key);
    if leaf.ends_with("_ms") {
        Direction::Lower
    } else if leaf.contains("throughput")
        || leaf.contains("goodput")
        || leaf == "max_output_tokens_per_s"
        || leaf == "rtfx"
    {
        Direction::Higher
    } else {
        Direction::Neither
    }
}

/// How a candidate's value compares with the baseline's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Better,
    Worse,
    Same,
    /// Different by less than [`NOISE_PERCENT`] of the baseline: too small to call either
    /// way (two runs of one setup differ by that much).
    Within,
    /// No better direction (even when equal), or a value that is not a number (NaN).
    Unranked,
}

impl Verdict {
    /// `better`, `worse`, `same` or empty, as the table shows it.
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Better => "better",
            Verdict::Worse => "worse",
            Verdict::Same => "same",
            Verdict::Within => "within 1%",
            Verdict::Unranked => "",
        }
    }
}

/// A change smaller than this share of the baseline (percent) is neither better nor worse.
/// Not a significance test: repeated runs (`--num-runs`) give the spread to judge against.
pub const NOISE_PERCENT: f64 = 1.0;

/// One candidate value against the baseline's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Change {
    /// `candidate - baseline`.
    pub delta: Num,
    /// `delta / |baseline| × 100`; `None` when the baseline is 0 and the candidate is not.
    pub percent: Option<f64>,
    pub verdict: Verdict,
}

/// The change from `base` to `other` for a metric that improves in `direction`.
pub fn change(base: Num, other: Num, direction: Direction) -> Change {
    let delta = match (base, other) {
        (Num::Int(a), Num::Int(b)) => b
            .checked_sub(a)
            .map_or_else(|| Num::Float(b as f64 - a as f64), Num::Int),
        _ => Num::Float(other.as_f64() - base.as_f64()),
    };
    let (a, d) = (base.as_f64(), delta.as_f64());
    let percent = if a != 0.0 {
        Some(d / a.abs() * 100.0)
    } else if d == 0.0 {
        Some(0.0)
    } else {
        None
    };
    let verdict = if d.is_nan() || direction == Direction::Neither {
        Verdict::Unranked
    } else if d == 0.0 {
        Verdict::Same
    } else if percent.is_some_and(|p| p.abs() < NOISE_PERCENT) {
        Verdict::Within
    } else {
        match (direction, d > 0.0) {
            (Direction::Higher, true) | (Direction::Lower, false) => Verdict::Better,
            _ => Verdict::Worse,
        }
    };
    Change {
        delta,
        percent,
        verdict,
    }
}

/// One metric across the compared results.
#[derive(Debug, Clone, PartialEq)]
pub struct ComparedMetric {
    pub key: String,
    pub direction: Direction,
    /// One per result, in order; `None` where a result lacks the key or holds `null`.
    pub values: Vec<Option<Num>>,
    /// One per candidate (every result after the first); `None` where either value is
    /// missing.
    pub changes: Vec<Option<Change>>,
}

/// The rows of a comparison: every key any result has, in the baseline's order, then the
/// keys only later results have, in their order. `results[0]` is the baseline.
pub fn rows(results: &[&[(String, Option<Num>)]]) -> Vec<ComparedMetric> {
    let mut keys: Vec<&str> = Vec::new();
    for result in results {
        for (k, _) in result.iter() {
            if !keys.contains(&k.as_str()) {
                keys.push(k);
            }
        }
    }
    keys.into_iter()
        .map(|key| {
            let values: Vec<Option<Num>> = results
                .iter()
                .map(|r| r.iter().find(|(k, _)| k == key).and_then(|(_, v)| *v))
                .collect();
            let direction = direction(key);
            let changes = values
                .iter()
                .skip(1)
                .map(|v| Some(change(values[0]?, (*v)?, direction)))
                .collect();
            ComparedMetric {
                key: key.to_string(),
                direction,
                values,
                changes,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directions_follow_the_key_names() {
        for key in [
            "request_throughput",
            "output_throughput",
            "total_token_throughput",
            "input_sequence_throughput",
            "request_goodput",
            "max_output_tokens_per_s",
            "rtfx",
            "completed",
            "steady_state.output_throughput",
            "steady_state.input_throughput",
            "vllm_bench_server_prefix_hit_ratio",
        ] {
            assert_eq!(direction(key), Direction::Higher, "{key}");
        }
        for key in [
            "mean_ttft_ms",
            "p99.9_itl_ms",
            "std_tpot_ms",
            "median_e2el_including_client_queue_ms",
            "p50_client_queue_time_ms",
            "vllm_bench_dispatch_lag_p99_ms",
            "steady_state.p90_tpot_ms",
            "failed",
            "duration",
            "vllm_bench_not_sent",
            "vllm_bench_failures_by_reason.http_500",
        ] {
            assert_eq!(direction(key), Direction::Lower, "{key}");
        }
        for key in [
            "total_input_tokens",
            "total_output_tokens",
            "max_concurrent_requests",
            "vllm_bench_workers",
            "steady_state.completed_in_window",
            "steady_state.window_start_s",
            "vllm_bench_trace_ideal_prefix_hit_ratio",
        ] {
            assert_eq!(direction(key), Direction::Neither, "{key}");
        }
    }

    #[test]
    fn a_change_under_one_percent_is_neither_better_nor_worse() {
        let c = change(Num::Float(100.0), Num::Float(100.02), Direction::Lower);
        assert_eq!(c.verdict, Verdict::Within);
        assert_eq!(c.verdict.word(), "within 1%");
        let c = change(Num::Float(100.0), Num::Float(101.0), Direction::Lower);
        assert_eq!(c.verdict, Verdict::Worse);
    }

    #[test]
    fn integer_deltas_stay_integers() {
        let c = change(Num::Int(200), Num::Int(150), Direction::Higher);
        assert_eq!(c.delta, Num::Int(-50));
        assert_eq!(c.percent, Some(-25.0));
        assert_eq!(c.verdict, Verdict::Worse);
        let c = change(Num::Int(3), Num::Int(0), Direction::Lower);
        assert_eq!((c.delta, c.verdict), (Num::Int(-3), Verdict::Better));
        assert_eq!(c.percent, Some(-100.0));
        // No overflow: the difference of extremes is computed in floating point.
        let c = change(Num::Int(i64::MIN), Num::Int(i64::MAX), Direction::Neither);
        assert_eq!(c.delta, Num::Float(2f64.powi(64)));
    }

    #[test]
    fn float_deltas_are_one_subtraction() {
        // 0.5 → 0.75 ms: +0.25, +50 %, a latency that grew.
        let c = change(Num::Float(0.5), Num::Float(0.75), Direction::Lower);
        assert_eq!(c.delta, Num::Float(0.25));
        assert_eq!(c.percent, Some(50.0));
        assert_eq!(c.verdict, Verdict::Worse);
        // Mixed: an int baseline, a float candidate.
        let c = change(Num::Int(2), Num::Float(2.5), Direction::Higher);
        assert_eq!(c.delta, Num::Float(0.5));
        assert_eq!(c.percent, Some(25.0));
        assert_eq!(c.verdict, Verdict::Better);
        // A negative baseline: the sign of the % change is the sign of the delta.
        let c = change(Num::Float(-4.0), Num::Float(-2.0), Direction::Neither);
        assert_eq!(c.percent, Some(50.0));
        assert_eq!(c.verdict, Verdict::Unranked);
    }

    #[test]
    fn zero_baselines_and_equal_values() {
        let c = change(Num::Float(0.0), Num::Float(1.5), Direction::Higher);
        assert_eq!((c.percent, c.verdict), (None, Verdict::Better));
        let c = change(Num::Int(0), Num::Int(0), Direction::Lower);
        assert_eq!((c.percent, c.verdict), (Some(0.0), Verdict::Same));
        let c = change(Num::Float(f64::NAN), Num::Float(1.0), Direction::Lower);
        assert_eq!(c.verdict, Verdict::Unranked);
    }

    #[test]
    fn rows_take_every_key_baseline_order_first() {
        let key = |k: &str, v: Option<Num>| (k.to_string(), v);
        let a = vec![
            key("completed", Some(Num::Int(10))),
            key("mean_ttft_ms", Some(Num::Float(2.0))),
            key("request_goodput", None),
        ];
        let b = vec![
            key("mean_ttft_ms", Some(Num::Float(1.5))),
            key("completed", Some(Num::Int(10))),
            key("p99_ttft_ms", Some(Num::Float(4.0))),
        ];
        let c = vec![key("request_goodput", Some(Num::Float(3.0)))];
        let rows = rows(&[&a, &b, &c]);
        let keys: Vec<&str> = rows.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "completed",
                "mean_ttft_ms",
                "request_goodput",
                "p99_ttft_ms"
            ]
        );
        assert_eq!(rows[0].changes[0].unwrap().verdict, Verdict::Same);
        assert_eq!(rows[0].changes[1], None, "C has no `completed`");
        let ttft = rows[1].changes[0].unwrap();
        assert_eq!(ttft.delta, Num::Float(-0.5));
        assert_eq!(ttft.percent, Some(-25.0));
        assert_eq!(ttft.verdict, Verdict::Better);
        assert_eq!(rows[2].values, [None, None, Some(Num::Float(3.0))]);
        assert_eq!(rows[2].changes, [None, None], "null baseline: no change");
        assert_eq!(rows[3].values, [None, Some(Num::Float(4.0)), None]);
    }
}
