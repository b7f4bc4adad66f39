//! The steady-state block (printed after Python's block, in its style: labels in 40
//! columns, the TTFT and TPOT sections with Python's headers) and the
//! `steady_state` result key.
//!
//! The key follows the convention of every key we add to Python's schema (the `vllm_bench_`
//! prefix, after Python's keys; see `json::append_extras`), so a tool that reads Python's
//! result files, or diffs their key sets, is not disturbed. Its value is `null` when nothing
//! was computed (not a closed loop, `--no-steady-state`, a pooling backend, or a plateau that
//! was never reached), else an object whose figure names are Python's own where the meaning
//! is the same (`request_throughput`, `mean_ttft_ms`, `p99_tpot_ms`, ...), so `--compare`
//! reads it with the same rules.
//!
//! A metric without a sample (no successful request wholly inside the window, or none of
//! them with more than one token for TPOT) prints `N/A` with the reason, and its keys are
//! `null`: a 0.00 ms latency would read as a measurement.

use std::fmt::Write as _;

use super::console::{centred, float_line, int_line, metric_section, WIDTH};
use super::json::{set_stats, Json, JsonObject};
use crate::metrics::metric_stats::{percentile_word, MetricKind, MetricStats};
use crate::metrics::steady_state::{SteadyState, SteadyStateOutcome};

/// The result-JSON key.
pub const KEY: &str = "steady_state";

/// The console block; empty when steady state was not computed at all (`None`).
pub fn render(outcome: Option<&SteadyStateOutcome>) -> String {
    let Some(outcome) = outcome else {
        return String::new();
    };
    let mut out = String::new();
    centred(&mut out, " Steady-State Metrics ", '=');
    match outcome {
        SteadyStateOutcome::NotReached { level, peak } => {
            int_line(&mut out, "In-flight threshold (requests):", *level);
            int_line(&mut out, "Peak requests in flight:", *peak);
            let _ = writeln!(
                out,
                "Not reached: requests in flight never reached the threshold (lower \
                 --steady-state-threshold, or send more prompts than --max-concurrency)"
            );
        }
        SteadyStateOutcome::Computed(s) => computed(&mut out, s),
    }
    out.push_str(&"=".repeat(WIDTH));
    out.push('\n');
    out
}

fn computed(out: &mut String, s: &SteadyState) {
    int_line(out, "In-flight threshold (requests):", s.level);
    seconds_line(out, "Window start (s):", s.window.start);
    seconds_line(out, "Window end (s):", s.window.end);
    seconds_line(out, "Window duration (s):", s.window.duration());
    float_line(out, "Requests served in window:", s.requests_in_window);
    int_line(out, "Requests inside window:", s.requests_inside);
    float_line(out, "Request throughput (req/s):", s.request_throughput);
    float_line(out, "Input token throughput (tok/s):", s.input_throughput);
    float_line(out, "Output token throughput (tok/s):", s.output_throughput);
    float_line(
        out,
        "Total token throughput (tok/s):",
        s.total_token_throughput,
    );
    section(
        out,
        MetricKind::Ttft,
        &s.ttft,
        s.requests_inside,
        "no successful request started and ended inside the window",
    );
    if let Some((samples, ttfo)) = s.ttfo.as_deref() {
        section(
            out,
            MetricKind::Ttfo,
            ttfo,
            *samples,
            "no request inside the window sent an output token",
        );
    }
    section(
        out,
        MetricKind::Tpot,
        &s.tpot,
        s.tpot_samples,
        "no request inside the window had more than one output token",
    );
    if s.warns_short() {
        let _ = writeln!(
            out,
            "Warning: the window ({:.3} s) is shorter than the minimum ({:.3} s, \
             --steady-state-min-window); these figures rest on little data",
            s.window.duration(),
            s.min_window_s
        );
    }
}

/// A metric's section, or its lines with `N/A` and `why` when it has no sample.
fn section(out: &mut String, kind: MetricKind, stats: &MetricStats, samples: u64, why: &str) {
    if samples > 0 {
        metric_section(out, kind, stats);
        return;
    }
    centred(out, kind.header(), '-');
    let name = kind.label();
    let na = |out: &mut String, label: String| {
        let _ = writeln!(out, "{label:<40} {:<10}", "N/A");
    };
    na(out, format!("Mean {name} (ms):"));
    na(out, format!("Median {name} (ms):"));
    for &(p, _) in &stats.percentiles_ms {
        na(out, format!("P{} {name} (ms):", percentile_word(p)));
    }
    let _ = writeln!(out, "N/A: {why}");
}

/// Window bounds to the millisecond: a plateau of a short run is a fraction of a second.
fn seconds_line(out: &mut String, label: &str, value: f64) {
    let _ = writeln!(out, "{label:<40} {:<10}", format!("{value:.3}"));
}

/// `{"steady_state": null | {...}}`, for `json::append_extras`.
pub fn to_json(outcome: Option<&SteadyStateOutcome>) -> JsonObject<'static> {
    let value = match outcome {
        Some(SteadyStateOutcome::Computed(s)) => Json::Object(figures(s)),
        _ => Json::Null,
    };
    let mut doc = JsonObject::new();
    doc.set(KEY, value);
    doc
}

fn figures(s: &SteadyState) -> JsonObject<'static> {
    let mut o = JsonObject::new();
    o.set("threshold", Json::Float(s.threshold));
    o.set("in_flight_threshold", Json::UInt(s.level));
    o.set("window_start_s", Json::Float(s.window.start));
    o.set("window_end_s", Json::Float(s.window.end));
    o.set("window_duration_s", Json::Float(s.window.duration()));
    o.set("min_window_s", Json::Float(s.min_window_s));
    o.set("short_window", Json::Bool(s.is_short()));
    o.set("requests_in_window", Json::Float(s.requests_in_window));
    o.set("requests_inside", Json::UInt(s.requests_inside));
    o.set("tpot_samples", Json::UInt(s.tpot_samples));
    o.set("request_throughput", Json::Float(s.request_throughput));
    o.set("input_throughput", Json::Float(s.input_throughput));
    o.set("output_throughput", Json::Float(s.output_throughput));
    o.set(
        "total_token_throughput",
        Json::Float(s.total_token_throughput),
    );
    stats_or_null(&mut o, MetricKind::Ttft, &s.ttft, s.requests_inside);
    if let Some((samples, ttfo)) = s.ttfo.as_deref() {
        stats_or_null(&mut o, MetricKind::Ttfo, ttfo, *samples);
    }
    stats_or_null(&mut o, MetricKind::Tpot, &s.tpot, s.tpot_samples);
    o
}

/// A metric's keys; all `null` when it has no sample (the keys stay, so the set of keys
/// does not depend on the run).
fn stats_or_null(o: &mut JsonObject<'static>, kind: MetricKind, stats: &MetricStats, samples: u64) {
    if samples > 0 {
        set_stats(o, kind.name(), stats);
        return;
    }
    let none = MetricStats {
        mean_ms: f64::NAN,
        median_ms: f64::NAN,
        std_ms: f64::NAN,
        percentiles_ms: stats
            .percentiles_ms
            .iter()
            .map(|&(p, _)| (p, f64::NAN))
            .collect(),
    };
    // The JSON writer writes a non-finite float as `null`.
    set_stats(o, kind.name(), &none);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::steady_state::{Window, TPOT_PERCENTILES};

    fn state(short: bool) -> SteadyState {
        SteadyState {
            threshold: 0.75,
            level: 3,
            window: Window {
                start: 1.0,
                end: 6.5,
            },
            min_window_s: if short { 10.0 } else { 5.0 },
            min_window_given: false,
            run_s: 12.0,
            requests_in_window: 5.75,
            requests_inside: 4,
            tpot_samples: 3,
            request_throughput: 5.75 / 5.5,
            input_throughput: 280.0 / 5.5,
            output_throughput: 16.25 / 5.5,
            total_token_throughput: 296.25 / 5.5,
            ttft: MetricStats::from_seconds(vec![0.125, 0.25, 0.5, 0.375], &[99.0]),
            tpot: MetricStats::from_seconds(vec![2.0, 0.8125, 1.4375], &TPOT_PERCENTILES),
            ttfo: None,
        }
    }

    fn line(label: &str, value: &str) -> String {
        format!("{label:<40} {value:<10}\n")
    }

    #[test]
    fn block_lines_in_order() {
        let text = render(Some(&SteadyStateOutcome::Computed(state(false))));
        let expected = [
            "============== Steady-State Metrics ==============\n".to_string(),
            line("In-flight threshold (requests):", "3"),
            line("Window start (s):", "1.000"),
            line("Window end (s):", "6.500"),
            line("Window duration (s):", "5.500"),
            line("Requests served in window:", "5.75"),
            line("Requests inside window:", "4"),
            line("Request throughput (req/s):", "1.05"),
            line("Input token throughput (tok/s):", "50.91"),
            line("Output token throughput (tok/s):", "2.95"),
            line("Total token throughput (tok/s):", "53.86"),
            "---------------Time to First Token----------------\n".to_string(),
            line("Mean TTFT (ms):", "312.50"),
            line("Median TTFT (ms):", "312.50"),
            line("P99 TTFT (ms):", "496.25"),
            "-----Time per Output Token (excl. 1st token)------\n".to_string(),
            line("Mean TPOT (ms):", "1416.67"),
            line("Median TPOT (ms):", "1437.50"),
            line("P90 TPOT (ms):", "1887.50"),
            line("P99 TPOT (ms):", "1988.75"),
            format!("{}\n", "=".repeat(50)),
        ]
        .concat();
        assert_eq!(text, expected);
    }

    #[test]
    fn ttfo_shows_beside_ttft_only_when_reported_and_null_without_a_sample() {
        let mut s = state(false);
        let plain = render(Some(&SteadyStateOutcome::Computed(s.clone())));
        assert!(!plain.contains("TTFO"), "{plain}");
        s.ttfo = Some(Box::new((
            2,
            MetricStats::from_seconds(vec![0.5, 0.75], &[99.0]),
        )));
        let text = render(Some(&SteadyStateOutcome::Computed(s.clone())));
        let at = |needle: &str| {
            text.find(needle)
                .unwrap_or_else(|| panic!("{needle}: {text}"))
        };
        assert!(at("Mean TTFT (ms):") < at("Mean TTFO (ms):"));
        assert!(at("Mean TTFO (ms):") < at("Mean TPOT (ms):"));
        assert!(text.contains(&line("Mean TTFO (ms):", "625.00")), "{text}");
        let doc = to_json(Some(&SteadyStateOutcome::Computed(s.clone()))).to_json_string();
        assert!(doc.contains("\"mean_ttfo_ms\": 625.0"), "{doc}");
        s.ttfo = Some(Box::new((0, MetricStats::from_seconds(vec![], &[99.0]))));
        let text = render(Some(&SteadyStateOutcome::Computed(s.clone())));
        assert!(text.contains(&line("Mean TTFO (ms):", "N/A")), "{text}");
        let doc = to_json(Some(&SteadyStateOutcome::Computed(s))).to_json_string();
        assert!(doc.contains("\"mean_ttfo_ms\": null"), "{doc}");
    }

    #[test]
    fn a_short_window_is_flagged_in_the_block_and_the_json() {
        let s = state(true);
        let text = render(Some(&SteadyStateOutcome::Computed(s.clone())));
        assert!(
            text.contains(
                "Warning: the window (5.500 s) is shorter than the minimum (10.000 s, \
                 --steady-state-min-window)"
            ),
            "{text}"
        );
        let doc = to_json(Some(&SteadyStateOutcome::Computed(s))).to_json_string();
        assert!(doc.contains("\"short_window\": true"), "{doc}");
    }

    #[test]
    fn a_run_shorter_than_the_minimum_window_gets_no_short_window_warning() {
        // A 3 s demo run cannot hold the default 10 s window: no warning (the JSON still
        // says the window is short); with the minimum set by the user, it warns.
        let s = SteadyState {
            run_s: 3.0,
            ..state(true)
        };
        let text = render(Some(&SteadyStateOutcome::Computed(s.clone())));
        assert!(!text.contains("Warning"), "{text}");
        let doc = to_json(Some(&SteadyStateOutcome::Computed(s.clone()))).to_json_string();
        assert!(doc.contains("\"short_window\": true"), "{doc}");
        let asked = SteadyState {
            min_window_given: true,
            ..s
        };
        let text = render(Some(&SteadyStateOutcome::Computed(asked)));
        assert!(text.contains("Warning: the window"), "{text}");
    }

    #[test]
    fn nothing_computed_is_no_block_and_null() {
        assert_eq!(render(None), "");
        assert_eq!(to_json(None).to_json_string(), "{\"steady_state\": null}");
        let not_reached = SteadyStateOutcome::NotReached { level: 16, peak: 5 };
        assert_eq!(
            to_json(Some(&not_reached)).to_json_string(),
            "{\"steady_state\": null}"
        );
        let text = render(Some(&not_reached));
        assert!(
            text.contains(&line("Peak requests in flight:", "5")),
            "{text}"
        );
        assert!(text.contains("Not reached"), "{text}");
    }

    #[test]
    fn json_uses_pythons_metric_names() {
        let doc = to_json(Some(&SteadyStateOutcome::Computed(state(false))));
        let Some(Json::Object(o)) = doc.get(KEY) else {
            panic!("an object");
        };
        let keys: Vec<&str> = o.keys().collect();
        assert_eq!(
            keys,
            [
                "threshold",
                "in_flight_threshold",
                "window_start_s",
                "window_end_s",
                "window_duration_s",
                "min_window_s",
                "short_window",
                "requests_in_window",
                "requests_inside",
                "tpot_samples",
                "request_throughput",
                "input_throughput",
                "output_throughput",
                "total_token_throughput",
                "mean_ttft_ms",
                "median_ttft_ms",
                "std_ttft_ms",
                "p99_ttft_ms",
                "mean_tpot_ms",
                "median_tpot_ms",
                "std_tpot_ms",
                "p90_tpot_ms",
                "p99_tpot_ms",
            ]
        );
        assert_eq!(o.get("mean_ttft_ms"), Some(&Json::Float(312.5)));
        assert_eq!(o.get("requests_inside"), Some(&Json::UInt(4)));
    }

    #[test]
    fn steady_state_with_no_request_in_window_prints_na_not_zero() {
        let mut s = state(false);
        s.requests_inside = 0;
        s.tpot_samples = 0;
        s.ttft = MetricStats::from_seconds(Vec::new(), &[99.0]);
        s.tpot = MetricStats::from_seconds(Vec::new(), &TPOT_PERCENTILES);
        let outcome = SteadyStateOutcome::Computed(s);
        let text = render(Some(&outcome));
        assert!(text.contains(&line("Mean TTFT (ms):", "N/A")), "{text}");
        assert!(text.contains(&line("P99 TTFT (ms):", "N/A")), "{text}");
        assert!(text.contains(&line("P90 TPOT (ms):", "N/A")), "{text}");
        assert!(
            text.contains("N/A: no successful request started and ended inside the window"),
            "{text}"
        );
        assert!(!text.contains("0.00 "), "no zero latency: {text}");
        let doc = to_json(Some(&outcome)).to_json_string();
        let v: serde_json::Value = serde_json::from_str(&doc).expect("strict JSON");
        for key in [
            "mean_ttft_ms",
            "median_ttft_ms",
            "std_ttft_ms",
            "p99_ttft_ms",
            "p90_tpot_ms",
        ] {
            assert!(v[KEY][key].is_null(), "{key}: {doc}");
        }
        assert_eq!(v[KEY]["requests_inside"], 0);

        // Requests inside, but none with a second token: TTFT is shown, TPOT is not.
        let mut s = state(false);
        s.tpot_samples = 0;
        s.tpot = MetricStats::from_seconds(Vec::new(), &TPOT_PERCENTILES);
        let text = render(Some(&SteadyStateOutcome::Computed(s)));
        assert!(text.contains(&line("Mean TTFT (ms):", "312.50")), "{text}");
        assert!(text.contains(&line("Mean TPOT (ms):", "N/A")), "{text}");
        assert!(text.contains("N/A: no request inside the window had more than one"));
    }
}
