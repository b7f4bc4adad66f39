//! The client's own `/metrics` page (`--metrics-listen`): the live counters of every run of
//! the process ([`crate::engine::live`]) in Prometheus' text format (0.0.4), one series per
//! run with `run`, `point` and `shard` labels so a sweep, a repeated run or the shards of a
//! run are one dashboard. Names and the PromQL that reads them: docs/live.md.
//!
//! Histograms are cumulative with buckets fit for LLM latencies (1 ms to 80 s); each bound
//! is one of the live histograms' bucket bounds, so the counts are exact.

use std::fmt::Write;

use crate::engine::live::{Latency, Snapshot};

/// The `le` bounds (seconds) of the latency histograms: sub-10 ms for inter-token gaps, up
/// to tens of seconds for long generations.
pub const BOUNDS_S: [f64; 22] = [
    0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75,
    1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0,
];

/// The labels that tell a run's series apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunLabels {
    /// `--label`, else the model.
    pub run: String,
    /// The measured run's number in this process (0 for a plain run; a sweep's points and
    /// `--num-runs`' repetitions count up).
    pub point: String,
    /// `i/n` with `--shard`, else empty.
    pub shard: String,
}

impl RunLabels {
    fn render(&self) -> String {
        format!(
            "run=\"{}\",point=\"{}\",shard=\"{}\"",
            escape(&self.run),
            escape(&self.point),
            escape(&self.shard)
        )
    }
}

/// A label value in the text format: backslash, quote and newline escaped.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Metric families: name, type, help.
const FAMILIES: [(&str, &str, &str); 10] = [
    (
        "vllm_bench_requests_planned",
        "gauge",
        "Requests the run plans to send.",
    ),
    (
        "vllm_bench_requests_sent_total",
        "counter",
        "Requests sent.",
    ),
    (
        "vllm_bench_requests_total",
        "counter",
        "Requests finished, by outcome (completed, failed, cancelled).",
    ),
    (
        "vllm_bench_request_failures_total",
        "counter",
        "Failed requests by reason.",
    ),
    (
        "vllm_bench_requests_in_flight",
        "gauge",
        "Requests sent and not finished.",
    ),
    (
        "vllm_bench_prompt_tokens_total",
        "counter",
        "Prompt tokens of completed requests (the server's usage, else the client's count).",
    ),
    (
        "vllm_bench_output_tokens_total",
        "counter",
        "Output tokens of completed requests (the server's usage, else the token events).",
    ),
    (
        "vllm_bench_core_busy_seconds_total",
        "counter",
        "CPU time each engine core's thread used since its run started (updated every 100 ms).",
    ),
    (
        "vllm_bench_up",
        "gauge",
        "1 while the process serves this page.",
    ),
    (
        "vllm_bench_run_active",
        "gauge",
        "1 while the run is going, 0 once it ended.",
    ),
];

/// The histograms: latency, name, help.
const HISTOGRAMS: [(Latency, &str, &str); 5] = [
    (
        Latency::Ttft,
        "vllm_bench_ttft_seconds",
        "Time to first token of completed requests.",
    ),
    (
        Latency::Tpot,
        "vllm_bench_tpot_seconds",
        "Time per output token after the first, per completed request.",
    ),
    (
        Latency::Itl,
        "vllm_bench_itl_seconds",
        "Inter-token latencies of completed requests.",
    ),
    (
        Latency::E2el,
        "vllm_bench_e2el_seconds",
        "End-to-end latency of completed requests.",
    ),
    (
        Latency::DispatchLag,
        "vllm_bench_dispatch_lag_seconds",
        "From a request's scheduled time to its send (the client's own delay).",
    ),
];

/// One run as the page shows it.
pub struct RunView<'a> {
    pub labels: &'a RunLabels,
    pub snapshot: &'a Snapshot,
    pub active: bool,
}

fn secs(ns: u64) -> String {
    crate::pyfmt::float_repr(ns as f64 / 1e9)
}

/// The page: every family once, with a series per run.
pub fn render(runs: &[RunView<'_>]) -> String {
    let mut out = String::new();
    let labels: Vec<String> = runs.iter().map(|r| r.labels.render()).collect();
    for (name, kind, help) in FAMILIES {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        if name == "vllm_bench_up" {
            let _ = writeln!(out, "{name} 1");
            continue;
        }
        for (r, l) in runs.iter().zip(&labels) {
            let s = r.snapshot;
            match name {
                "vllm_bench_requests_planned" => {
                    let _ = writeln!(out, "{name}{{{l}}} {}", s.planned);
                }
                "vllm_bench_requests_sent_total" => {
                    let _ = writeln!(out, "{name}{{{l}}} {}", s.sent);
                }
                "vllm_bench_requests_total" => {
                    for (outcome, n) in [
                        ("completed", s.completed),
                        ("failed", s.failed),
                        ("cancelled", s.cancelled),
                    ] {
                        let _ = writeln!(out, "{name}{{{l},outcome=\"{outcome}\"}} {n}");
                    }
                }
                "vllm_bench_request_failures_total" => {
                    for (reason, n) in &s.reasons {
                        let reason = escape(reason);
                        let _ = writeln!(out, "{name}{{{l},reason=\"{reason}\"}} {n}");
                    }
                }
                "vllm_bench_requests_in_flight" => {
                    let _ = writeln!(out, "{name}{{{l}}} {}", s.in_flight());
                }
                "vllm_bench_prompt_tokens_total" => {
                    let _ = writeln!(out, "{name}{{{l}}} {}", s.tokens_in);
                }
                "vllm_bench_output_tokens_total" => {
                    let _ = writeln!(out, "{name}{{{l}}} {}", s.tokens_out);
                }
                "vllm_bench_core_busy_seconds_total" => {
                    for (core, ns) in s.busy_ns.iter().enumerate() {
                        let _ = writeln!(out, "{name}{{{l},core=\"{core}\"}} {}", secs(*ns));
                    }
                }
                "vllm_bench_run_active" => {
                    let _ = writeln!(out, "{name}{{{l}}} {}", u8::from(r.active));
                }
                _ => {}
            }
        }
    }
    for (latency, name, help) in HISTOGRAMS {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        for (r, l) in runs.iter().zip(&labels) {
            let d = r.snapshot.latency(latency);
            for le in BOUNDS_S {
                let le_ns = (le * 1e9).round() as u64;
                let n = d.at_or_below(le_ns);
                let le = crate::pyfmt::float_repr(le);
                let _ = writeln!(out, "{name}_bucket{{{l},le=\"{le}\"}} {n}");
            }
            let _ = writeln!(out, "{name}_bucket{{{l},le=\"+Inf\"}} {}", d.count);
            let _ = writeln!(out, "{name}_sum{{{l}}} {}", secs(d.sum_ns));
            let _ = writeln!(out, "{name}_count{{{l}}} {}", d.count);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::live::{Finished, LiveRun};

    #[test]
    fn the_page_parses_as_prometheus_text_with_exact_buckets() {
        let run = LiveRun::new(1, 4);
        let core = run.core(run.claim());
        for _ in 0..3 {
            core.sent();
        }
        core.completed(Finished {
            prompt_tokens: 7,
            output_tokens: 2,
            ttft_ns: Some(12_000_000),
            tpot_ns: Some(5_000_000),
            e2el_ns: 17_000_000,
            gaps: [5_000_000u64].into_iter(),
        });
        core.failed("http_500");
        let labels = RunLabels {
            run: "a \"b\"".into(),
            point: "0".into(),
            shard: String::new(),
        };
        let snap = run.snapshot();
        let page = render(&[RunView {
            labels: &labels,
            snapshot: &snap,
            active: true,
        }]);
        let scrape = crate::server_metrics::exposition::parse(&page).expect("valid text format");
        let l = r#"run="a \"b\"",point="0",shard="""#;
        for line in [
            format!("vllm_bench_requests_total{{{l},outcome=\"completed\"}} 1"),
            format!("vllm_bench_request_failures_total{{{l},reason=\"http_500\"}} 1"),
            format!("vllm_bench_requests_in_flight{{{l}}} 1"),
            format!("vllm_bench_ttft_seconds_bucket{{{l},le=\"0.01\"}} 0"),
            format!("vllm_bench_ttft_seconds_bucket{{{l},le=\"0.015\"}} 1"),
            format!("vllm_bench_itl_seconds_bucket{{{l},le=\"0.005\"}} 1"),
            format!("vllm_bench_e2el_seconds_count{{{l}}} 1"),
            format!("vllm_bench_e2el_seconds_sum{{{l}}} 0.017"),
        ] {
            assert!(page.lines().any(|x| x == line), "{line} in\n{page}");
        }
        assert_eq!(scrape.counters.get("vllm_bench_requests"), Some(&2.0));
        let ttft = &scrape.histograms["vllm_bench_ttft_seconds"];
        assert_eq!((ttft.count, ttft.buckets.len()), (1.0, BOUNDS_S.len() + 1));
    }
}
