//! Summaries over several measured runs of one plan: a sweep's table of points with the best
//! one, and the run-to-run statistics of `--num-runs` (mean, standard deviation, min, max,
//! coefficient of variation). Both read the same figures of each run's [`BenchmarkReport`],
//! named by their result-JSON keys.

use std::fmt::Write;

use crate::metrics::report::{BenchmarkReport, TaskMetrics};
use crate::metrics::steady_state::SteadyState;
use crate::metrics::summary::percentile_word;
use crate::output::json::{Json, JsonObject};

/// One figure of a run: its result key, its label, its value.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    pub key: String,
    pub label: String,
    pub value: f64,
}

fn figure(key: impl Into<String>, label: impl Into<String>, value: f64) -> Figure {
    Figure {
        key: key.into(),
        label: label.into(),
        value,
    }
}

/// The figures summaries compare, in display order: counts, throughput, then mean, median
/// and every computed percentile of each reported latency metric.
pub fn figures(r: &BenchmarkReport) -> Vec<Figure> {
    // (completed, failed, request/s, output tok/s (generation only), total tok/s)
    let (completed, failed, rps, output, total) = match &r.metrics {
        TaskMetrics::Generation { metrics: m, .. } => (
            m.completed,
            m.failed,
            m.request_throughput,
            Some(m.output_throughput),
            m.total_token_throughput,
        ),
        TaskMetrics::Pooling(m) => (
            m.completed,
            m.failed,
            m.request_throughput,
            None,
            m.total_token_throughput,
        ),
    };
    let mut out = vec![
        figure("completed", "Successful requests", completed as f64),
        figure("failed", "Failed requests", failed as f64),
        figure("duration", "Duration (s)", r.duration_s),
        figure("request_throughput", "Request throughput (req/s)", rps),
    ];
    if let Some(o) = output {
        out.push(figure(
            "output_throughput",
            "Output token throughput (tok/s)",
            o,
        ));
    }
    out.push(figure(
        "total_token_throughput",
        "Total token throughput (tok/s)",
        total,
    ));
    for (kind, stats) in r.sections() {
        let (name, label) = (kind.name(), kind.label());
        out.push(figure(
            format!("mean_{name}_ms"),
            format!("Mean {label} (ms)"),
            stats.mean_ms,
        ));
        out.push(figure(
            format!("median_{name}_ms"),
            format!("Median {label} (ms)"),
            stats.median_ms,
        ));
        for &(p, v) in &stats.percentiles_ms {
            let w = percentile_word(p);
            out.push(figure(
                format!("p{w}_{name}_ms"),
                format!("P{w} {label} (ms)"),
                v,
            ));
        }
    }
    out
}

fn value(figures: &[Figure], key: &str) -> Option<f64> {
    figures.iter().find(|f| f.key == key).map(|f| f.value)
}

/// The point with the highest output token throughput (request throughput for pooling).
pub fn best_point(reports: &[BenchmarkReport]) -> Option<usize> {
    let score = |r: &BenchmarkReport| match &r.metrics {
        TaskMetrics::Generation { metrics, .. } => metrics.output_throughput,
        TaskMetrics::Pooling(m) => m.request_throughput,
    };
    (0..reports.len()).max_by(|&a, &b| score(&reports[a]).total_cmp(&score(&reports[b])))
}

/// Columns of the sweep table: throughput, then the latency figures the runs computed
/// (mean and percentiles; medians are left to the per-point blocks).
fn sweep_columns(figures: &[Figure]) -> Vec<&Figure> {
    figures
        .iter()
        .filter(|f| {
            matches!(
                f.key.as_str(),
                "request_throughput" | "output_throughput" | "total_token_throughput"
            ) || f.key.starts_with("ss_")
                || (f.key.ends_with("_ms") && !f.key.starts_with("median_"))
        })
        .collect()
}

/// Short column headers: `req/s`, `out tok/s`, `P99 TTFT`, ...
fn short(label: &str) -> String {
    label
        .replace("Request throughput (req/s)", "req/s")
        .replace("Output token throughput (tok/s)", "out tok/s")
        .replace("Total token throughput (tok/s)", "total tok/s")
        .replace(" (ms)", "")
}

/// The steady-state figures a sweep shows beside each point's (closed-loop points).
pub fn steady_figures(s: &SteadyState) -> Vec<Figure> {
    vec![
        figure("ss_request_throughput", "SS req/s", s.request_throughput),
        figure("ss_output_throughput", "SS out tok/s", s.output_throughput),
        figure("ss_mean_ttft_ms", "SS Mean TTFT (ms)", s.ttft.mean_ms),
        figure("ss_mean_tpot_ms", "SS Mean TPOT (ms)", s.tpot.mean_ms),
    ]
}

/// Every point's figures, with its steady-state ones when some point has them.
fn point_figures(reports: &[BenchmarkReport], steady: &[Option<&SteadyState>]) -> Vec<Vec<Figure>> {
    let any = steady.iter().any(Option::is_some);
    reports
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut f = figures(r);
            if any {
                match steady.get(i).copied().flatten() {
                    Some(s) => f.extend(steady_figures(s)),
                    None => f.extend(steady_figures_missing()),
                }
            }
            f
        })
        .collect()
}

/// A point without a steady state: its columns show NaN.
fn steady_figures_missing() -> Vec<Figure> {
    let keys = [
        ("ss_request_throughput", "SS req/s"),
        ("ss_output_throughput", "SS out tok/s"),
        ("ss_mean_ttft_ms", "SS Mean TTFT (ms)"),
        ("ss_mean_tpot_ms", "SS Mean TPOT (ms)"),
    ];
    keys.iter().map(|(k, l)| figure(*k, *l, f64::NAN)).collect()
}

/// The sweep's summary table (one row per point, `axis` naming the varied value; the
/// steady-state window's figures when a point computed one), then the best point.
pub fn render_sweep(
    axis: &str,
    values: &[String],
    reports: &[BenchmarkReport],
    steady: &[Option<&SteadyState>],
) -> String {
    let mut out = String::new();
    let all = point_figures(reports, steady);
    let Some(first) = all.first() else {
        return out;
    };
    let columns = sweep_columns(first);
    let width = 14 + columns.len() * 13;
    let _ = writeln!(out, "{:=^width$}", " Sweep Summary (latencies in ms) ");
    let _ = write!(out, "{axis:<14}");
    for c in &columns {
        let _ = write!(out, "{:>13}", short(&c.label));
    }
    out.push('\n');
    for (v, figs) in values.iter().zip(&all) {
        let _ = write!(out, "{v:<14}");
        for c in &columns {
            let _ = write!(out, "{:>13.2}", value(figs, &c.key).unwrap_or(f64::NAN));
        }
        out.push('\n');
    }
    if let Some(best) = best_point(reports) {
        let figs = &all[best];
        let _ = writeln!(
            out,
            "Best point: {axis} {} ({:.2} req/s, {:.2} output tok/s)",
            values[best],
            value(figs, "request_throughput").unwrap_or(0.0),
            value(figs, "output_throughput").unwrap_or(0.0),
        );
    }
    let _ = writeln!(out, "{}", "=".repeat(width));
    out
}

/// The sweep summary document: the axis, every point's figures and result file, the best.
pub fn sweep_json(
    axis: &str,
    values: &[String],
    reports: &[BenchmarkReport],
    steady: &[Option<&SteadyState>],
    files: &[Option<String>],
) -> String {
    let all = point_figures(reports, steady);
    let mut doc = JsonObject::new();
    doc.set("axis", Json::str(axis.to_string()));
    let points = values
        .iter()
        .zip(&all)
        .zip(files)
        .map(|((v, figs), file)| {
            let mut p = JsonObject::new();
            p.set(axis.to_string(), Json::str(v.clone()));
            for f in figs {
                let value = if f.value.is_nan() {
                    Json::Null
                } else {
                    Json::Float(f.value)
                };
                p.set(f.key.clone(), value);
            }
            p.set("result_file", Json::opt(file.clone(), Json::str));
            Json::Object(p)
        })
        .collect();
    doc.set("points", Json::List(points));
    let best = best_point(reports).map(|b| values[b].clone());
    doc.set(format!("best_{axis}"), Json::opt(best, Json::str));
    doc.to_json_string()
}

/// Statistics of one figure over repeated runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Spread {
    pub key: String,
    pub label: String,
    pub mean: f64,
    /// Population standard deviation (numpy's default, `ddof=0`).
    pub std: f64,
    pub min: f64,
    pub max: f64,
    /// `std / mean` (0 when the mean is 0).
    pub cv: f64,
}

/// Mean, standard deviation, min, max and coefficient of variation of every figure the
/// first run has, over all runs.
pub fn spreads(reports: &[BenchmarkReport]) -> Vec<Spread> {
    let all: Vec<Vec<Figure>> = reports.iter().map(figures).collect();
    let Some(first) = all.first() else {
        return Vec::new();
    };
    first
        .iter()
        .map(|f| {
            let xs: Vec<f64> = all.iter().filter_map(|figs| value(figs, &f.key)).collect();
            let n = xs.len() as f64;
            let mean = xs.iter().sum::<f64>() / n;
            let std = (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt();
            Spread {
                key: f.key.clone(),
                label: f.label.clone(),
                mean,
                std,
                min: xs.iter().copied().fold(f64::INFINITY, f64::min),
                max: xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                cv: if mean == 0.0 { 0.0 } else { std / mean },
            }
        })
        .collect()
}

/// One compact line per repeated run.
pub fn render_run_line(run: usize, of: usize, r: &BenchmarkReport) -> String {
    let figs = figures(r);
    let get = |k: &str| value(&figs, k).unwrap_or(0.0);
    let mut line = format!(
        "Run {run}/{of}: {} ok, {} failed, {:.2} s, {:.2} req/s, {:.2} output tok/s",
        get("completed"),
        get("failed"),
        get("duration"),
        get("request_throughput"),
        get("output_throughput"),
    );
    for key in ["mean_ttft_ms", "mean_tpot_ms", "mean_e2el_ms"] {
        if let Some(f) = figs.iter().find(|f| f.key == key) {
            let _ = write!(line, ", {} {:.2}", f.label.replace(" (ms)", ""), f.value);
        }
    }
    line.push_str(" ms\n");
    line
}

/// The table of run-to-run statistics.
pub fn render_spreads(spreads: &[Spread], runs: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{:=^90}", format!(" Multi-Run Summary ({runs} runs) "));
    let _ = writeln!(
        out,
        "{:<40}{:>10}{:>10}{:>10}{:>10}{:>10}",
        "Metric", "Mean", "Std", "Min", "Max", "CV"
    );
    for s in spreads {
        let _ = writeln!(
            out,
            "{:<40}{:>10.2}{:>10.2}{:>10.2}{:>10.2}{:>9.1}%",
            s.label,
            s.mean,
            s.std,
            s.min,
            s.max,
            s.cv * 100.0
        );
    }
    let _ = writeln!(out, "{}", "=".repeat(90));
    out
}

/// The `--num-runs` result document: every run's result, then the statistics.
pub fn runs_json(run_documents: &[String], spreads: &[Spread]) -> String {
    let mut aggregate = JsonObject::new();
    for s in spreads {
        let mut o = JsonObject::new();
        o.set("mean", Json::Float(s.mean));
        o.set("std", Json::Float(s.std));
        o.set("min", Json::Float(s.min));
        o.set("max", Json::Float(s.max));
        o.set("cv", Json::Float(s.cv));
        aggregate.set(s.key.clone(), Json::Object(o));
    }
    let mut out = format!("{{\"num_runs\": {}, \"runs\": [", run_documents.len());
    for (i, d) in run_documents.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(d);
    }
    out.push_str("], \"aggregate\": ");
    aggregate.write_to(&mut out);
    out.push('}');
    out
}
