//! Summaries over several measured runs of one plan: a sweep's table of points with the best
//! one, and the run-to-run statistics of `--num-runs` (mean, standard deviation, min, max,
//! coefficient of variation). Both read the same figures of each run's [`BenchmarkReport`],
//! named by their result-JSON keys.
//!
//! An interrupted run (Ctrl-C or SIGTERM) measured part of what it planned, so its figures
//! are not comparable with the others': a sweep marks its point (`"interrupted": true`,
//! `*` in the table) and never picks it as the best; `--num-runs` marks it and leaves it out
//! of mean, standard deviation, min, max and CV, saying so under the table and in the
//! document (`interrupted_runs`, `aggregated_runs`).

use std::fmt::Write;

use crate::metrics::metric_stats::percentile_word;
use crate::metrics::report::{BenchmarkReport, TaskMetrics};
use crate::metrics::steady_state::SteadyState;
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
        // Ascending (P90 before P99), whatever order the flags listed them in.
        let mut percentiles = stats.percentiles_ms.clone();
        percentiles.sort_by(|a, b| a.0.total_cmp(&b.0));
        for &(p, v) in &percentiles {
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

/// The point with the highest output token throughput (request throughput for pooling),
/// among the points that were not interrupted (`interrupted[i]`; missing means not): a
/// partial point's figures cover part of its run. `None` when every point was.
pub fn best_point(reports: &[BenchmarkReport], interrupted: &[bool]) -> Option<usize> {
    let score = |r: &BenchmarkReport| match &r.metrics {
        TaskMetrics::Generation { metrics, .. } => metrics.output_throughput,
        TaskMetrics::Pooling(m) => m.request_throughput,
    };
    (0..reports.len())
        .filter(|&i| !was_interrupted(interrupted, i))
        .max_by(|&a, &b| score(&reports[a]).total_cmp(&score(&reports[b])))
}

fn was_interrupted(interrupted: &[bool], i: usize) -> bool {
    interrupted.get(i).copied().unwrap_or(false)
}

/// Rows of the sweep table: the counts, throughput, then the latency figures the runs
/// computed (mean and percentiles, ascending; medians are left to the per-point blocks),
/// then the steady-state window's.
fn sweep_rows(figures: &[Figure]) -> Vec<&Figure> {
    figures
        .iter()
        .filter(|f| {
            matches!(
                f.key.as_str(),
                "completed"
                    | "failed"
                    | "request_throughput"
                    | "output_throughput"
                    | "total_token_throughput"
            ) || f.key.starts_with("ss_")
                || (f.key.ends_with("_ms") && !f.key.starts_with("median_"))
        })
        .collect()
}

/// The steady-state figures a sweep shows beside each point's (closed-loop points); a
/// latency without a sample in the window is NaN (`NaN` in the table, `null` in the JSON),
/// not 0.
pub fn steady_figures(s: &SteadyState) -> Vec<Figure> {
    let sampled = |n: u64, v: f64| if n > 0 { v } else { f64::NAN };
    let values = [
        s.request_throughput,
        s.output_throughput,
        sampled(s.requests_inside, s.ttft.mean_ms),
        sampled(s.tpot_samples, s.tpot.mean_ms),
    ];
    STEADY
        .iter()
        .zip(values)
        .map(|((k, l), v)| figure(*k, *l, v))
        .collect()
}

/// The steady-state figures' keys and labels.
const STEADY: [(&str, &str); 4] = [
    (
        "ss_request_throughput",
        "Steady-state request throughput (req/s)",
    ),
    (
        "ss_output_throughput",
        "Steady-state output throughput (tok/s)",
    ),
    ("ss_mean_ttft_ms", "Steady-state mean TTFT (ms)"),
    ("ss_mean_tpot_ms", "Steady-state mean TPOT (ms)"),
];

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

/// A point without a steady state: its cells show NaN.
fn steady_figures_missing() -> Vec<Figure> {
    STEADY
        .iter()
        .map(|(k, l)| figure(*k, *l, f64::NAN))
        .collect()
}

/// Least width of a point's column; columns are two spaces apart, so no header or value
/// runs into its neighbour whatever its length.
const SWEEP_COLUMN_WIDTH: usize = 10;
const SWEEP_GAP: &str = "  ";

/// A cell of the sweep table: counts whole, the rest with two decimals.
fn cell(key: &str, v: f64) -> String {
    if matches!(key, "completed" | "failed") && v.is_finite() {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// The sweep's summary table: one row per figure, one column per point (`axis` naming the
/// varied value, `*` after an interrupted point's; the steady-state window's figures when a
/// point computed one), then the best point. Points are columns so that any number of
/// figures (percentiles, steady state) stays one table a reader scans down, with every
/// header over its own column.
pub fn render_sweep(
    axis: &str,
    values: &[String],
    reports: &[BenchmarkReport],
    steady: &[Option<&SteadyState>],
    interrupted: &[bool],
) -> String {
    let mut out = String::new();
    let all = point_figures(reports, steady);
    let Some(first) = all.first() else {
        return out;
    };
    let rows = sweep_rows(first);
    let heads: Vec<String> = values
        .iter()
        .take(all.len())
        .enumerate()
        .map(|(i, v)| {
            let mark = if was_interrupted(interrupted, i) {
                "*"
            } else {
                ""
            };
            format!("{v}{mark}")
        })
        .collect();
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            all.iter()
                .map(|figs| cell(&r.key, value(figs, &r.key).unwrap_or(f64::NAN)))
                .collect()
        })
        .collect();
    let label_width = rows
        .iter()
        .map(|r| r.label.chars().count())
        .chain([axis.chars().count()])
        .max()
        .unwrap_or(0);
    let widths: Vec<usize> = (0..heads.len())
        .map(|c| {
            cells
                .iter()
                .map(|row| row[c].chars().count())
                .chain([heads[c].chars().count(), SWEEP_COLUMN_WIDTH])
                .max()
                .unwrap_or(SWEEP_COLUMN_WIDTH)
        })
        .collect();
    let width = label_width + widths.iter().map(|w| w + SWEEP_GAP.len()).sum::<usize>();
    let _ = writeln!(out, "{:=^width$}", " Sweep Summary ");
    let line = |out: &mut String, label: &str, cells: &[String]| {
        let _ = write!(out, "{label:<label_width$}");
        for (c, w) in cells.iter().zip(&widths) {
            let _ = write!(out, "{SWEEP_GAP}{c:>w$}");
        }
        out.push('\n');
    };
    line(&mut out, axis, &heads);
    for (r, row) in rows.iter().zip(&cells) {
        line(&mut out, &r.label, row);
    }
    let any_interrupted = (0..all.len()).any(|i| was_interrupted(interrupted, i));
    if any_interrupted {
        let _ = writeln!(
            out,
            "* interrupted: partial figures, never chosen as the best point"
        );
    }
    let best = best_point(reports, interrupted);
    if best.is_none() && any_interrupted {
        let _ = writeln!(out, "Best point: none (no point ran to its end)");
    }
    if let Some(best) = best {
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

/// The sweep summary document: the axis, every point's figures, whether it was
/// interrupted and its result file, then the best point (`null` when every point was
/// interrupted).
pub fn sweep_json(
    axis: &str,
    values: &[String],
    reports: &[BenchmarkReport],
    steady: &[Option<&SteadyState>],
    interrupted: &[bool],
    files: &[Option<String>],
) -> String {
    let all = point_figures(reports, steady);
    let mut doc = JsonObject::new();
    doc.set("axis", Json::str(axis.to_string()));
    let points = values
        .iter()
        .zip(&all)
        .zip(files)
        .enumerate()
        .map(|(i, ((v, figs), file))| {
            let mut p = JsonObject::new();
            p.set(axis.to_string(), Json::str(v.clone()));
            for f in figs {
                // A missing figure (NaN) is written as `null` by the JSON writer.
                p.set(f.key.clone(), Json::Float(f.value));
            }
            p.set("interrupted", Json::Bool(was_interrupted(interrupted, i)));
            p.set("result_file", Json::opt(file.clone(), Json::str));
            Json::Object(p)
        })
        .collect();
    doc.set("points", Json::List(points));
    let best = best_point(reports, interrupted).map(|b| values[b].clone());
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
/// first counted run has, over the runs that were not interrupted (`interrupted[i]`;
/// missing means not). Empty when every run was.
pub fn spreads(reports: &[BenchmarkReport], interrupted: &[bool]) -> Vec<Spread> {
    let all: Vec<Vec<Figure>> = reports
        .iter()
        .enumerate()
        .filter(|&(i, _)| !was_interrupted(interrupted, i))
        .map(|(_, r)| figures(r))
        .collect();
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

/// One compact line per repeated run; an interrupted one says it is left out of the
/// statistics.
pub fn render_run_line(run: usize, of: usize, r: &BenchmarkReport, interrupted: bool) -> String {
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
    line.push_str(" ms");
    if interrupted {
        line.push_str(" (interrupted: left out of the statistics)");
    }
    line.push('\n');
    line
}

/// The table of run-to-run statistics over `runs` runs, `interrupted` saying which runs
/// (by index) were interrupted and left out of it.
pub fn render_spreads(spreads: &[Spread], runs: usize, interrupted: &[bool]) -> String {
    let left_out = interrupted_runs(interrupted);
    let counted = runs - left_out.len().min(runs);
    let mut out = String::new();
    let title = if left_out.is_empty() {
        format!(" Multi-Run Summary ({runs} runs) ")
    } else {
        format!(" Multi-Run Summary ({counted} of {runs} runs) ")
    };
    let _ = writeln!(out, "{title:=^90}");
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
    if !left_out.is_empty() {
        let which: Vec<String> = left_out.iter().map(u64::to_string).collect();
        let _ = writeln!(
            out,
            "Interrupted run {} left out of mean/std/min/max/CV (its figures cover part of a \
             run){}",
            which.join(", "),
            if counted == 0 {
                "; no complete run, no statistics"
            } else {
                ""
            }
        );
    }
    let _ = writeln!(out, "{}", "=".repeat(90));
    out
}

/// The interrupted runs, numbered from 1.
fn interrupted_runs(interrupted: &[bool]) -> Vec<u64> {
    (0..interrupted.len())
        .filter(|&i| interrupted[i])
        .map(|i| i as u64 + 1)
        .collect()
}

/// The `--num-runs` result document: every run's result (each with its own
/// `vllm_bench_interrupted`), whether any run was interrupted, which ones (numbered from 1)
/// and how many runs the statistics cover, then the statistics.
pub fn runs_json(
    run_documents: Vec<JsonObject<'static>>,
    interrupted: &[bool],
    spreads: &[Spread],
) -> JsonObject<'static> {
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
    let runs = run_documents.len();
    let left_out = interrupted_runs(interrupted);
    let mut doc = JsonObject::new();
    doc.set("num_runs", Json::UInt(runs as u64));
    let runs_list = run_documents.into_iter().map(Json::Object).collect();
    doc.set("runs", Json::List(runs_list));
    doc.set("interrupted", Json::Bool(!left_out.is_empty()));
    let counted = runs.saturating_sub(left_out.len());
    doc.set("interrupted_runs", Json::UInts(left_out.into()));
    doc.set("aggregated_runs", Json::UInt(counted as u64));
    doc.set("aggregate", Json::Object(aggregate));
    doc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::goodput::GoodputConfig;
    use crate::metrics::metric_stats::MetricKind;
    use crate::metrics::report::{ReportSettings, TaskKind};
    use crate::metrics::RequestOutput;

    /// A run of `n` one-token requests of 0.1 s over `duration_s` seconds (so
    /// `n / duration_s` requests per second and as many output tokens).
    fn report(n: usize, duration_s: f64) -> BenchmarkReport {
        report_with(n, duration_s, vec![99.0])
    }

    /// [`report`] with these percentiles computed, in this order.
    fn report_with(n: usize, duration_s: f64, percentiles: Vec<f64>) -> BenchmarkReport {
        let outputs: Vec<RequestOutput> = (0..n)
            .map(|i| RequestOutput {
                success: true,
                latency: 0.1,
                ttft: 0.05,
                output_tokens: 1,
                prompt_len: 4,
                start_time: i as f64 * 0.01,
                ..RequestOutput::default()
            })
            .collect();
        let settings = ReportSettings {
            duration_s,
            task: TaskKind::Generation,
            count_tokens: None,
            percentiles,
            percentile_metrics: MetricKind::parse_list("ttft,e2el"),
            goodput: GoodputConfig::default(),
            max_concurrency: Some(2),
            request_rate: f64::INFINITY,
        };
        BenchmarkReport::compute(&outputs, &settings)
    }

    #[test]
    fn sweep_headers_never_run_together_and_p90_comes_before_p99() {
        // Percentiles asked in the order 99, 90: the table had its columns as
        // `SS req/sSS out tok/s...`, wrapped into sub-tables of 7, P99 before P90.
        let reports: Vec<BenchmarkReport> = [10, 20, 40]
            .iter()
            .map(|&n| report_with(n, 1.0, vec![99.0, 90.0]))
            .collect();
        let values = ["1".to_string(), "16".into(), "1024".into()];
        let table = render_sweep(
            "max_concurrency",
            &values,
            &reports,
            &[None, None, None],
            &[],
        );
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(
            table.matches("Sweep Summary").count(),
            1,
            "one table:\n{table}"
        );
        assert_eq!(
            lines[1].split_whitespace().collect::<Vec<_>>(),
            ["max_concurrency", "1", "16", "1024"],
            "every header over its own column:\n{table}"
        );
        // Every row: its label, then one cell per point, at least two spaces apart.
        for row in &lines[2..lines.len() - 2] {
            assert_eq!(
                row.split("  ").filter(|c| !c.trim().is_empty()).count(),
                4,
                "a row whose cells run together: {row:?}\n{table}"
            );
        }
        let at = |label: &str| {
            lines
                .iter()
                .position(|l| l.starts_with(label))
                .unwrap_or_else(|| panic!("no {label} row:\n{table}"))
        };
        assert!(at("P90 E2EL (ms)") < at("P99 E2EL (ms)"), "{table}");
        assert!(
            lines[at("Successful requests")].ends_with("  40"),
            "{table}"
        );
    }

    fn spread<'a>(stats: &'a [Spread], key: &str) -> &'a Spread {
        stats.iter().find(|s| s.key == key).expect(key)
    }

    #[test]
    fn spreads_leave_out_interrupted_runs_and_say_so() {
        // Runs 1 and 2 at 10 and 20 req/s; run 3 was interrupted after 0.5 s with 1 request
        // (2 req/s). Averaged in, it would pull the mean to 10.67 and the CV to 0.73.
        let reports = [report(10, 1.0), report(20, 1.0), report(1, 0.5)];
        let interrupted = [false, false, true];
        let stats = spreads(&reports, &interrupted);
        let rps = spread(&stats, "request_throughput");
        assert_eq!(
            (rps.mean, rps.std, rps.min, rps.max),
            (15.0, 5.0, 10.0, 20.0)
        );
        assert_eq!(rps.cv, 5.0 / 15.0);
        assert_eq!(spread(&stats, "completed").min, 10.0);

        let table = render_spreads(&stats, 3, &interrupted);
        assert!(
            table.contains(" Multi-Run Summary (2 of 3 runs) "),
            "{table}"
        );
        assert!(
            table.contains("Interrupted run 3 left out of mean/std/min/max/CV"),
            "{table}"
        );
        let line = render_run_line(3, 3, &reports[2], true);
        assert!(
            line.ends_with(" ms (interrupted: left out of the statistics)\n"),
            "{line}"
        );

        let docs: Vec<JsonObject<'static>> = (1..=3)
            .map(|r| {
                let mut o = JsonObject::new();
                o.set("r", Json::UInt(r));
                o
            })
            .collect();
        let text = runs_json(docs.clone(), &interrupted, &stats).to_json_string();
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(doc["runs"][2]["r"], 3);
        assert_eq!(doc["num_runs"], 3);
        assert_eq!(doc["runs"].as_array().map(Vec::len), Some(3));
        assert_eq!(doc["interrupted"], true);
        assert_eq!(doc["interrupted_runs"], serde_json::json!([3]));
        assert_eq!(doc["aggregated_runs"], 2);
        assert_eq!(doc["aggregate"]["request_throughput"]["mean"], 15.0);

        // Without an interrupted run the document says so, and every run counts.
        let all = spreads(&reports[..2], &[]);
        let doc: serde_json::Value = serde_json::from_str(
            &runs_json(docs[..2].to_vec(), &[false, false], &all).to_json_string(),
        )
        .unwrap();
        assert_eq!(doc["interrupted"], false);
        assert_eq!(doc["interrupted_runs"], serde_json::json!([]));
        assert_eq!(doc["aggregated_runs"], 2);
        assert!(render_spreads(&all, 2, &[false, false]).contains(" Multi-Run Summary (2 runs) "));
    }

    #[test]
    fn only_interrupted_runs_give_no_statistics_and_strict_json() {
        let reports = [report(0, 0.0)];
        let stats = spreads(&reports, &[true]);
        assert!(stats.is_empty());
        let table = render_spreads(&stats, 1, &[true]);
        assert!(table.contains("no complete run, no statistics"), "{table}");
        let text = runs_json(vec![JsonObject::new()], &[true], &stats).to_json_string();
        let doc: serde_json::Value = serde_json::from_str(&text).expect("strict JSON");
        assert_eq!(doc["aggregated_runs"], 0);
    }

    #[test]
    fn a_sweep_never_picks_an_interrupted_point_as_best() {
        // The third point has the highest throughput over the part it ran, but was
        // interrupted: the best is the second.
        let reports = [report(10, 1.0), report(20, 1.0), report(5, 0.1)];
        let interrupted = [false, false, true];
        assert_eq!(best_point(&reports, &[]), Some(2));
        assert_eq!(best_point(&reports, &interrupted), Some(1));
        let values = ["1".to_string(), "2".into(), "4".into()];
        let steady = [None, None, None];
        let table = render_sweep("max_concurrency", &values, &reports, &steady, &interrupted);
        let head = table.lines().nth(1).unwrap_or("");
        assert!(head.ends_with("  4*"), "{table}");
        assert!(table.contains("Best point: max_concurrency 2 "), "{table}");
        assert!(table.contains("* interrupted: partial figures"), "{table}");
        let files = [None, None, None];
        let text = sweep_json(
            "max_concurrency",
            &values,
            &reports,
            &steady,
            &interrupted,
            &files,
        );
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(doc["best_max_concurrency"], "2");
        let flags: Vec<&serde_json::Value> = doc["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| &p["interrupted"])
            .collect();
        assert_eq!(flags, [false, false, true]);

        // Only an interrupted point: no best at all.
        let one = &reports[2..];
        assert_eq!(best_point(one, &[true]), None);
        let table = render_sweep("max_concurrency", &values[2..], one, &steady[2..], &[true]);
        assert!(table.contains("Best point: none"), "{table}");
        let text = sweep_json(
            "max_concurrency",
            &values[2..],
            one,
            &steady[2..],
            &[true],
            &files[2..],
        );
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(doc["best_max_concurrency"], serde_json::Value::Null);
    }
}
