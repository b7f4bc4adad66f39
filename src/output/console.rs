//! The console text of a run, byte for byte as Python `vllm bench serve` prints it.
//!
//! Three pieces, in the order they appear on stdout after "Starting main benchmark run...":
//! - `render_preamble`: the traffic lines (rate or ramp-up, burstiness, concurrency), or the
//!   self-timed notice;
//! - `render_notices`: what Python's `calculate_metrics` prints (the first ten errors and the
//!   plotting tip), generation tasks only;
//! - `render_block`: the result block from `=== Serving Benchmark Result ===` to the closing
//!   rule.
//!
//! Each returns a `String` (every line ends with `\n`); the caller prints. Format rules, from
//! Python: a label left-aligned in 40 columns, a space, then the value left-aligned in 10
//! (`{:<10}` for integers, `{:<10.2f}` for floats); values are never cut; headers are centred
//! in 50 columns (`{:-^50}`: the extra fill character goes right). The line helpers are
//! shared with the blocks we print after Python's (`steady_state`), so those read the same.

use std::fmt::Write;

use crate::metrics::calculator::{BenchmarkMetrics, EmbedBenchmarkMetrics};
use crate::metrics::metric_stats::{percentile_word, MetricKind, MetricStats};
use crate::metrics::probe::ProbeStats;
use crate::metrics::report::{BenchmarkReport, TaskKind, TaskMetrics};
use crate::metrics::RequestOutput;
use crate::pyfmt::{fixed2, float_repr};
use crate::safe_text::Escaped;
use crate::types::RampUp;

/// Width of the block's rules and headers.
pub(super) const WIDTH: usize = 50;
/// Python shows at most this many errors of failed requests.
const MAX_ERRORS_SHOWN: usize = 10;

/// The run facts printed before the requests are sent.
#[derive(Debug, Clone, PartialEq)]
pub struct Preamble<'a> {
    /// Arrival times come from the trace (`timed_trace`): no rate lines are printed.
    pub self_timed: bool,
    pub ramp_up: Option<&'a RampUp>,
    pub request_rate: f64,
    pub burstiness: f64,
    pub max_concurrency: Option<u64>,
}

/// The traffic lines Python prints just before the measured run starts.
pub fn render_preamble(p: &Preamble<'_>) -> String {
    let mut out = String::new();
    if p.self_timed {
        out.push_str("Self timing is set, using the timestamps from the trace file.\n");
        return out;
    }
    match p.ramp_up {
        Some(r) => {
            let _ = writeln!(out, "Traffic ramp-up strategy: {}.", r.strategy.name());
            let _ = writeln!(
                out,
                "Will increase RPS from {} to {} RPS over the duration of the benchmark.",
                r.start_rps, r.end_rps
            );
        }
        None => {
            let _ = writeln!(out, "Traffic request rate: {}", float_repr(p.request_rate));
        }
    }
    let distribution = if p.burstiness == 1.0 {
        "Poisson process"
    } else {
        "Gamma distribution"
    };
    let _ = writeln!(
        out,
        "Burstiness factor: {} ({distribution})",
        float_repr(p.burstiness)
    );
    let _ = match p.max_concurrency {
        Some(n) => writeln!(out, "Maximum request concurrency: {n}"),
        None => writeln!(out, "Maximum request concurrency: None"),
    };
    out
}

/// What Python's `calculate_metrics` prints for generation tasks: up to ten errors of failed
/// requests. Python's "tip: install termplotlib and gnuplot" line is not printed: it means
/// nothing for this binary, which draws its own chart ([`super::terminal_chart`]). Pooling
/// tasks print nothing here.
pub fn render_notices(outputs: &[RequestOutput], task: TaskKind) -> String {
    let mut out = String::new();
    if task == TaskKind::Pooling {
        return out;
    }
    let mut failed = outputs.iter().filter(|o| !o.success).peekable();
    if failed.peek().is_some() {
        out.push_str("Failed requests during benchmark run detected (capping to 10):\n");
        for (i, o) in failed.take(MAX_ERRORS_SHOWN).enumerate() {
            // Server text: one line each, nothing the terminal acts on.
            let _ = writeln!(out, "Error {i}: {}", Escaped(&o.error));
        }
    }
    out
}

/// The result block, from the `Serving Benchmark Result` header to the closing rule.
pub fn render_block(report: &BenchmarkReport) -> String {
    let mut out = String::with_capacity(4096);
    centred(&mut out, " Serving Benchmark Result ", '=');
    match &report.metrics {
        TaskMetrics::Generation { metrics, .. } => generation_summary(&mut out, report, metrics),
        TaskMetrics::Pooling(metrics) => pooling_summary(&mut out, report, metrics),
    }
    if let Some(p) = &report.probe {
        probe_section(&mut out, p);
    }
    for (kind, stats) in report.sections() {
        metric_section(&mut out, kind, stats);
    }
    out.push_str(&"=".repeat(WIDTH));
    out.push('\n');
    out
}

/// Python's "Probe Requests" section (after the summary lines, before the metrics).
fn probe_section(out: &mut String, p: &ProbeStats) {
    centred(out, "Probe Requests", '-');
    int_line(out, "Probe requests completed:", p.completed);
    int_line(out, "Probe requests failed:", p.failed);
    float_line(out, "Median probe E2EL (ms):", p.median_e2el_ms);
    float_line(out, "P99 probe E2EL (ms):", p.p99_e2el_ms);
    float_line(out, "Max probe E2EL (ms):", p.max_e2el_ms);
}

/// One turn's block of a multi-turn run (after Python's block over all requests): the
/// turn's requests, tokens and throughput over its own span, then the selected metrics.
pub fn render_turn_block(turn: usize, report: &BenchmarkReport) -> String {
    let mut out = String::with_capacity(1024);
    centred(&mut out, &format!(" Turn {turn} "), '=');
    if let TaskMetrics::Generation { metrics: m, .. } = &report.metrics {
        int_line(&mut out, "Successful requests:", m.completed);
        int_line(&mut out, "Failed requests:", m.failed);
        float_line(&mut out, "Turn duration (s):", report.duration_s);
        int_line(&mut out, "Total input tokens:", m.total_input);
        if report.has_tokenizer {
            int_line(&mut out, "Total generated tokens:", m.total_output);
        }
        float_line(
            &mut out,
            "Request throughput (req/s):",
            m.request_throughput,
        );
        if report.has_tokenizer {
            float_line(
                &mut out,
                "Output token throughput (tok/s):",
                m.output_throughput,
            );
        }
    }
    for (kind, stats) in report.sections() {
        metric_section(&mut out, kind, stats);
    }
    out.push_str(&"=".repeat(WIDTH));
    out.push('\n');
    out
}

/// Summary lines of a generation run.
fn generation_summary(out: &mut String, r: &BenchmarkReport, m: &BenchmarkMetrics) {
    run_lines(out, r, m.completed, m.failed, m.total_input);
    if r.has_tokenizer {
        int_line(out, "Total generated tokens:", m.total_output);
    }
    if r.shows_ttfo() {
        reasoning_lines(out, m);
    }
    float_line(out, "Request throughput (req/s):", m.request_throughput);
    if r.goodput_enabled {
        float_line(out, "Request goodput (req/s):", m.request_goodput);
    }
    if r.has_tokenizer {
        float_line(out, "Output token throughput (tok/s):", m.output_throughput);
        float_line(
            out,
            "Peak output token throughput (tok/s):",
            m.max_output_tokens_per_s,
        );
    }
    float_line(
        out,
        "Peak concurrent requests:",
        m.max_concurrent_requests as f64,
    );
    if m.rtfx > 0.0 {
        float_line(out, "RTFx (Inverse Real-Time Factor):", m.rtfx);
    }
    if r.has_tokenizer {
        float_line(
            out,
            "Total token throughput (tok/s):",
            m.total_token_throughput,
        );
    }
}

/// Ours, with TTFO: the server's reasoning-token total (when it counted them) and the
/// requests left out of TTFO because they sent no output token (when there are any).
fn reasoning_lines(out: &mut String, m: &BenchmarkMetrics) {
    if let Some(n) = m.total_reasoning {
        int_line(out, "Total reasoning tokens:", n);
    }
    if m.no_output_token > 0 {
        int_line(out, "Requests with no output token:", m.no_output_token);
    }
}

/// Summary lines of a pooling run.
fn pooling_summary(out: &mut String, r: &BenchmarkReport, m: &EmbedBenchmarkMetrics) {
    run_lines(out, r, m.completed, m.failed, m.total_input);
    float_line(out, "Request throughput (req/s):", m.request_throughput);
    float_line(
        out,
        "Input throughput (inputs/s):",
        m.input_sequence_throughput,
    );
    if r.has_tokenizer {
        float_line(
            out,
            "Total token throughput (tok/s):",
            m.total_token_throughput,
        );
    }
}

/// The lines both tasks share, from `Successful requests` to `Total input tokens`.
fn run_lines(out: &mut String, r: &BenchmarkReport, completed: u64, failed: u64, input: u64) {
    int_line(out, "Successful requests:", completed);
    int_line(out, "Failed requests:", failed);
    if let Some(n) = r.max_concurrency {
        int_line(out, "Maximum request concurrency:", n);
    }
    if r.request_rate != f64::INFINITY {
        float_line(out, "Request rate configured (RPS):", r.request_rate);
    }
    float_line(out, "Benchmark duration (s):", r.duration_s);
    int_line(out, "Total input tokens:", input);
}

/// One metric's section: header, mean, median, then one line per percentile.
pub(super) fn metric_section(out: &mut String, kind: MetricKind, s: &MetricStats) {
    centred(out, kind.header(), '-');
    let name = kind.label();
    float_line(out, &format!("Mean {name} (ms):"), s.mean_ms);
    float_line(out, &format!("Median {name} (ms):"), s.median_ms);
    for &(p, value) in &s.percentiles_ms {
        float_line(out, &format!("P{} {name} (ms):", percentile_word(p)), value);
    }
}

/// `"{:<40} {:<10}".format(label, int)`.
pub(super) fn int_line(out: &mut String, label: &str, value: u64) {
    let _ = writeln!(out, "{label:<40} {value:<10}");
}

/// `"{:<40} {:<10.2f}".format(label, float)`.
pub(super) fn float_line(out: &mut String, label: &str, value: f64) {
    let _ = writeln!(out, "{label:<40} {:<10}", fixed2(value));
}

/// `"{s:{c}^{n}}".format(s=text, c=fill, n=50)`: centred, the odd fill character on the right.
pub(super) fn centred(out: &mut String, text: &str, fill: char) {
    let len = text.chars().count();
    let pad = WIDTH.saturating_sub(len);
    let left = pad / 2;
    out.extend(std::iter::repeat_n(fill, left));
    out.push_str(text);
    out.extend(std::iter::repeat_n(fill, pad - left));
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::goodput::GoodputConfig;
    use crate::metrics::report::ReportSettings;

    fn line(label: &str, value: &str) -> String {
        format!("{label:<40} {value:<10}\n")
    }

    #[test]
    fn headers_centre_like_python_format() {
        let mut s = String::new();
        centred(&mut s, "Time per Output Token (excl. 1st token)", '-');
        centred(&mut s, " Serving Benchmark Result ", '=');
        assert_eq!(
            s,
            "-----Time per Output Token (excl. 1st token)------\n\
             ============ Serving Benchmark Result ============\n"
        );
        let mut long = String::new();
        centred(&mut long, &"x".repeat(60), '-');
        assert_eq!(long, format!("{}\n", "x".repeat(60)));
    }

    #[test]
    fn values_are_padded_but_never_cut() {
        let mut s = String::new();
        float_line(&mut s, "Total token throughput (tok/s):", 206195.59);
        float_line(&mut s, "Total token throughput (tok/s):", 12345678.9);
        int_line(&mut s, "Total input tokens:", 7659);
        assert_eq!(
            s,
            "Total token throughput (tok/s):          206195.59 \n\
             Total token throughput (tok/s):          12345678.90\n\
             Total input tokens:                      7659      \n"
        );
    }

    #[test]
    fn preamble_variants() {
        let base = Preamble {
            self_timed: false,
            ramp_up: None,
            request_rate: f64::INFINITY,
            burstiness: 1.0,
            max_concurrency: None,
        };
        assert_eq!(
            render_preamble(&base),
            "Traffic request rate: inf\nBurstiness factor: 1.0 (Poisson process)\n\
             Maximum request concurrency: None\n"
        );
        let ramp = RampUp {
            strategy: crate::types::RampUpStrategy::Linear,
            start_rps: 10,
            end_rps: 100,
        };
        let p = Preamble {
            ramp_up: Some(&ramp),
            burstiness: 0.5,
            max_concurrency: Some(8),
            ..base.clone()
        };
        assert_eq!(
            render_preamble(&p),
            "Traffic ramp-up strategy: linear.\n\
             Will increase RPS from 10 to 100 RPS over the duration of the benchmark.\n\
             Burstiness factor: 0.5 (Gamma distribution)\nMaximum request concurrency: 8\n"
        );
        let p = Preamble {
            self_timed: true,
            ..base
        };
        assert_eq!(
            render_preamble(&p),
            "Self timing is set, using the timestamps from the trace file.\n"
        );
    }

    #[test]
    fn notices_cap_errors_at_ten() {
        let mut outs: Vec<RequestOutput> = (0..12)
            .map(|i| RequestOutput {
                error: format!("boom {i}"),
                ..Default::default()
            })
            .collect();
        let text = render_notices(&outs, TaskKind::Generation);
        assert!(text.starts_with(
            "Failed requests during benchmark run detected (capping to 10):\nError 0: boom 0\n"
        ));
        assert!(text.ends_with("Error 9: boom 9\n"));
        outs.push(RequestOutput {
            success: true,
            ..Default::default()
        });
        let text = render_notices(&outs, TaskKind::Generation);
        assert!(
            text.ends_with("Error 9: boom 9\n"),
            "no termplotlib tip: {text}"
        );
        assert_eq!(render_notices(&outs, TaskKind::Pooling), "");
    }

    #[test]
    fn optional_lines_appear_with_their_flags() {
        let outs = vec![RequestOutput {
            success: true,
            output_tokens: 2,
            ttft: 0.01,
            itl: vec![0.01].into(),
            latency: 0.02,
            ..Default::default()
        }];
        let count = |_: &str| 2usize;
        let settings = ReportSettings {
            duration_s: 1.0,
            task: TaskKind::Generation,
            count_tokens: Some(&count),
            percentiles: vec![99.9],
            percentile_metrics: MetricKind::parse_list("e2el"),
            goodput: GoodputConfig::parse(&["e2el:100"]).unwrap(),
            max_concurrency: Some(4),
            request_rate: 2.0,
        };
        let block = render_block(&BenchmarkReport::compute(&outs, &settings));
        assert!(block.contains(&line("Maximum request concurrency:", "4")));
        assert!(block.contains(&line("Request rate configured (RPS):", "2.00")));
        assert!(block.contains(&line("Request goodput (req/s):", "1.00")));
        assert!(block.contains(&line("P99.9 E2EL (ms):", "20.00")));
        assert!(!block.contains("TTFT"));
        // Without a tokenizer the token lines go away.
        let settings = ReportSettings {
            count_tokens: None,
            goodput: GoodputConfig::default(),
            max_concurrency: None,
            request_rate: f64::INFINITY,
            ..settings
        };
        let block = render_block(&BenchmarkReport::compute(&outs, &settings));
        assert!(!block.contains("Total generated tokens"));
        assert!(!block.contains("Total token throughput"));
        assert!(!block.contains("goodput"));
        assert!(!block.contains("Maximum request concurrency"));
        assert!(!block.contains("Request rate configured"));
        assert!(block.contains(&line("Peak concurrent requests:", "1.00")));
    }
}
