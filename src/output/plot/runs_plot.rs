//! Sweep and repeated-run plots (`--plot`, `--plot-summary FILE`), from the figures the
//! summaries hold (the keys of the result JSON: `output_throughput`, `p99_ttft_ms`, ...):
//!
//! - a sweep: output throughput against the p99 TTFT, TPOT and E2EL of each point, with the
//!   Pareto front (no other point has both lower latency and higher throughput) joined and
//!   marked; then throughput and those latencies against the swept value;
//! - `--num-runs`: each figure's runs as dots on one line, with their min–max range and mean.
//!
//! The data comes either from the finished reports (right after the runs) or from a saved
//! summary file ([`Summary::from_json`]), so a summary can be plotted again later.

use std::fmt::Write;

use super::page;
use super::svg::{escape, Axes};

/// The figures of one run or sweep point, by result key.
pub type Figures = Vec<(String, f64)>;

/// What a summary plot draws.
#[derive(Debug, Clone, PartialEq)]
pub enum Summary {
    /// A sweep over `axis` (`max_concurrency`, `request_rate`): each point's value and
    /// figures.
    Sweep {
        axis: String,
        points: Vec<(String, Figures)>,
    },
    /// Repeated runs of one point.
    Runs { runs: Vec<Figures> },
    /// An SLO capacity search: its probes in ascending value, each term's figure key and
    /// bound (ms, drawn as a line), the answer's index among the points, and each point's
    /// verdict (met every term or not; drawn in its colour).
    Search {
        axis: String,
        points: Vec<(String, Figures)>,
        bounds: Vec<(String, f64)>,
        best: Option<usize>,
        meets: Vec<bool>,
    },
}

/// Why a saved summary cannot be plotted.
#[derive(Debug, thiserror::Error)]
pub enum SummaryError {
    #[error("not JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error(
        "neither a sweep summary (\"axis\" and \"points\"), an SLO search summary \
         (\"vllm_bench_slo_search\") nor a --num-runs result (\"runs\")"
    )]
    Shape,
}

const W: f64 = 560.0;
const H: f64 = 360.0;
const POINT_COLOUR: &str = "#1f77b4";
const FRONT_COLOUR: &str = "#D62728";

/// The latency figures plotted against throughput.
const LATENCIES: [(&str, &str); 3] = [
    ("p99_ttft_ms", "P99 TTFT (ms)"),
    ("p99_tpot_ms", "P99 TPOT (ms)"),
    ("p99_e2el_ms", "P99 E2EL (ms)"),
];

/// The figures a repeated-run plot shows, when present.
const RUN_FIGURES: [(&str, &str); 9] = [
    ("request_throughput", "Request throughput (req/s)"),
    ("output_throughput", "Output token throughput (tok/s)"),
    ("total_token_throughput", "Total token throughput (tok/s)"),
    ("mean_ttft_ms", "Mean TTFT (ms)"),
    ("p99_ttft_ms", "P99 TTFT (ms)"),
    ("mean_tpot_ms", "Mean TPOT (ms)"),
    ("p99_tpot_ms", "P99 TPOT (ms)"),
    ("mean_e2el_ms", "Mean E2EL (ms)"),
    ("p99_e2el_ms", "P99 E2EL (ms)"),
];

fn get(figures: &Figures, key: &str) -> Option<f64> {
    figures
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| *v)
        .filter(|v| v.is_finite())
}

/// The throughput a point is judged by: output tokens/s, else requests/s (pooling).
fn throughput(figures: &Figures) -> Option<(f64, &'static str)> {
    get(figures, "output_throughput")
        .map(|v| (v, "Output token throughput (tok/s)"))
        .or_else(|| get(figures, "request_throughput").map(|v| (v, "Request throughput (req/s)")))
}

/// The numeric top-level entries of a JSON object.
fn numbers(o: &serde_json::Map<String, serde_json::Value>) -> Figures {
    o.iter()
        .filter_map(|(k, v)| v.as_f64().map(|f| (k.clone(), f)))
        .collect()
}

impl Summary {
    /// Reads a sweep summary (`sweep-summary-*.json`), an SLO search summary
    /// (`slo-search-summary-*.json`) or a `--num-runs` result file.
    pub fn from_json(text: &str) -> Result<Summary, SummaryError> {
        let doc: serde_json::Value = serde_json::from_str(text)?;
        if let Some(search) = doc.get("vllm_bench_slo_search") {
            return Summary::search_from_json(search).ok_or(SummaryError::Shape);
        }
        if let (Some(axis), Some(points)) = (
            doc.get("axis").and_then(|a| a.as_str()),
            doc.get("points").and_then(|p| p.as_array()),
        ) {
            let points = points
                .iter()
                .filter_map(|p| p.as_object())
                .map(|p| {
                    let value = match p.get(axis) {
                        Some(serde_json::Value::String(s)) => s.clone(),
                        Some(v) => v.to_string(),
                        None => String::new(),
                    };
                    (value, numbers(p))
                })
                .collect();
            return Ok(Summary::Sweep {
                axis: axis.to_string(),
                points,
            });
        }
        if let Some(runs) = doc.get("runs").and_then(|r| r.as_array()) {
            let runs = runs
                .iter()
                .filter_map(|r| r.as_object())
                .map(numbers)
                .collect();
            return Ok(Summary::Runs { runs });
        }
        Err(SummaryError::Shape)
    }
}

impl Summary {
    /// The page of a saved SLO search (`vllm_bench_slo_search`), as the search drew it: the
    /// probes in ascending value (a value's runs in their order), each term's bound from the
    /// probes' `slo` figures, and the answer (`best`, the same value and run) marked.
    fn search_from_json(search: &serde_json::Value) -> Option<Summary> {
        use serde_json::Value;
        let axis = search.get("variable")?.as_str()?;
        let value_of = |p: &serde_json::Map<String, Value>| match p.get(axis) {
            Some(Value::String(s)) if s == "inf" => f64::INFINITY,
            Some(v) => v.as_f64().unwrap_or(f64::NAN),
            None => f64::NAN,
        };
        let mut probes: Vec<&serde_json::Map<String, Value>> = search
            .get("points")?
            .as_array()?
            .iter()
            .filter_map(Value::as_object)
            .collect();
        // Stable: a value's runs stay in the order they ran.
        probes.sort_by(|a, b| value_of(a).total_cmp(&value_of(b)));
        let bounds = probes
            .first()
            .and_then(|p| p.get("slo")?.as_object())
            .map(|terms| {
                terms
                    .values()
                    .filter_map(|t| {
                        let key = t.get("key")?.as_str()?.to_string();
                        Some((key, t.get("bound_ms")?.as_f64()?))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let best = search.get("best").and_then(Value::as_object).and_then(|b| {
            probes
                .iter()
                .position(|p| p.get(axis) == b.get(axis) && p.get("run") == b.get("run"))
        });
        let points = probes
            .iter()
            .map(|p| {
                let value = match p.get(axis) {
                    Some(Value::String(s)) => s.clone(),
                    Some(v) => v.to_string(),
                    None => String::new(),
                };
                (value, numbers(p))
            })
            .collect();
        let meets = probes
            .iter()
            .map(|p| p.get("meets").and_then(Value::as_bool).unwrap_or(false))
            .collect();
        Some(Summary::Search {
            axis: axis.to_string(),
            points,
            bounds,
            best,
            meets,
        })
    }
}

/// For points `(latency, throughput)`: whether each is on the Pareto front (no other point
/// has a latency at most as high and a throughput at least as high, one of them strictly).
pub fn pareto_front(points: &[(f64, f64)]) -> Vec<bool> {
    points
        .iter()
        .map(|&(l, t)| {
            !points
                .iter()
                .any(|&(l2, t2)| l2 <= l && t2 >= t && (l2 < l || t2 > t))
        })
        .collect()
}

/// The page for `summary`.
pub fn render(summary: &Summary, title: &str) -> String {
    let mut body = String::new();
    match summary {
        Summary::Sweep { axis, points } => sweep(&mut body, axis, points),
        Summary::Runs { runs } => repeated(&mut body, runs),
        Summary::Search {
            axis,
            points,
            bounds,
            best,
            meets,
        } => search(&mut body, axis, points, bounds, *best, meets),
    }
    page(title, &body, None)
}

fn sweep(out: &mut String, axis: &str, points: &[(String, Figures)]) {
    let _ = write!(
        out,
        "<p class=\"note\">{} points of a sweep over {}; hover a point for its figures.</p>\
         <ul class=\"legend\"><li><span class=\"swatch\" style=\"background:{POINT_COLOUR}\">\
         </span>sweep point</li><li><span class=\"swatch\" style=\"background:{FRONT_COLOUR}\">\
         </span>Pareto front (lower latency, higher throughput)</li></ul>\n<div class=\"grid\">",
        points.len(),
        escape(&axis_title(axis))
    );
    for (key, label) in LATENCIES {
        against_throughput(out, axis, points, key, label);
    }
    let mut metrics: Vec<(&str, &str)> =
        vec![("output_throughput", "Output token throughput (tok/s)")];
    metrics.extend(LATENCIES);
    for (key, label) in metrics {
        against_axis(out, axis, points, key, label);
    }
    out.push_str("</div>\n");
}

const MEETS_COLOUR: &str = "#2ca02c";
const MISSES_COLOUR: &str = "#d62728";
const LINE_COLOUR: &str = "#555";

/// The swept or searched variable as an axis title: `Request rate (req/s)`.
pub fn axis_title(axis: &str) -> String {
    match axis {
        "request_rate" => "Request rate (req/s)".to_owned(),
        "max_concurrency" => "Max concurrency (requests in flight)".to_owned(),
        other => other.replace('_', " "),
    }
}

/// A figure's result key as a title: the throughputs by their [`RUN_FIGURES`] titles,
/// `p99_ttft_ms` → `P99 TTFT (ms)`, `mean_client_queue_time_ms` → `Mean Client Queue Time
/// (ms)`; other keys as they are.
pub fn figure_title(key: &str) -> String {
    if let Some((_, title)) = RUN_FIGURES.iter().find(|(k, _)| *k == key) {
        return (*title).to_owned();
    }
    let Some(body) = key.strip_suffix("_ms") else {
        return key.to_owned();
    };
    let Some((stat, metric)) = body.split_once('_') else {
        return key.to_owned();
    };
    let Some(kind) = crate::metrics::metric_stats::MetricKind::from_name(metric) else {
        return key.to_owned();
    };
    let stat = match stat {
        "mean" => "Mean".to_owned(),
        "median" => "Median".to_owned(),
        "std" => "Std".to_owned(),
        p if p.starts_with('p') => format!("P{}", &p[1..]),
        _ => return key.to_owned(),
    };
    format!("{stat} {} (ms)", kind.label())
}

fn search(
    out: &mut String,
    axis: &str,
    points: &[(String, Figures)],
    bounds: &[(String, f64)],
    best: Option<usize>,
    meets: &[bool],
) {
    let answer = best.map_or_else(
        || "no value met every term".to_owned(),
        |b| format!("the answer, {}, ringed", escape(&points[b].0)),
    );
    let swatch = |colour: &str, what: &str| {
        format!("<li><span class=\"swatch\" style=\"background:{colour}\"></span>{what}</li>")
    };
    let _ = write!(
        out,
        "<p class=\"note\">{} probes of an SLO capacity search over {}; {answer}; hover a \
         point for its figures.</p><ul class=\"legend\">{}{}{}</ul>\n<div class=\"grid\">",
        points.len(),
        escape(&axis_title(axis)),
        swatch(MEETS_COLOUR, "meets every term"),
        swatch(MISSES_COLOUR, "does not meet"),
        swatch(LINE_COLOUR, "SLO bound (dashed)"),
    );
    let verdicts = SearchMarks { best, meets };
    for (key, bound) in bounds {
        search_chart(out, axis, points, key, Some(*bound), &verdicts);
    }
    for key in ["request_throughput", "output_throughput"] {
        search_chart(out, axis, points, key, None, &verdicts);
    }
    out.push_str("</div>\n");
}

/// What a search chart marks: the answer, and each point's verdict.
struct SearchMarks<'a> {
    best: Option<usize>,
    meets: &'a [bool],
}

/// A probe's value on the x axis (`inf` as infinity).
fn probe_value(text: &str) -> Option<f64> {
    match text {
        "inf" => Some(f64::INFINITY),
        t => t.parse().ok().filter(|v: &f64| v.is_finite()),
    }
}

/// One figure of the search's probes against the searched value, on a numeric x axis (a
/// value probed twice is one x with two points; `inf` gets a slot of its own beyond the
/// largest finite value), each point in its verdict's colour, the bound a dashed line.
fn search_chart(
    out: &mut String,
    axis: &str,
    points: &[(String, Figures)],
    key: &str,
    bound: Option<f64>,
    marks: &SearchMarks<'_>,
) {
    let data: Vec<(usize, &str, f64, f64)> = points
        .iter()
        .enumerate()
        .filter_map(|(i, (v, f))| Some((i, v.as_str(), probe_value(v)?, get(f, key)?)))
        .collect();
    if data.is_empty() {
        return;
    }
    let finite = data.iter().map(|d| d.2).filter(|x| x.is_finite());
    let (lo, hi) = finite.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
        (a.min(x), b.max(x))
    });
    let (lo, hi) = if lo.is_finite() {
        (lo.min(0.0), hi)
    } else {
        (0.0, 1.0)
    };
    let numbers = super::svg::ticks(lo, hi, 5);
    let step = match numbers[..] {
        [a, b, ..] => b - a,
        _ => hi.max(1.0),
    };
    // `inf` one and a half tick steps beyond the largest value, clear of its labels.
    let has_inf = data.iter().any(|d| d.2.is_infinite());
    let inf_at = hi + 1.5 * step;
    let x_of = |x: f64| if x.is_infinite() { inf_at } else { x };
    let mut x_ticks: Vec<(f64, String)> = numbers
        .iter()
        .map(|&t| (t, super::svg::label(t, step)))
        .collect();
    if has_inf {
        x_ticks.push((inf_at, "inf".to_owned()));
    }
    let (ylo, yhi) = data
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), d| {
            (a.min(d.3), b.max(d.3))
        });
    let yhi = bound.map_or(yhi, |b| yhi.max(b));
    let right = if has_inf { inf_at } else { hi };
    let axes = Axes::fit((lo, right), (ylo.min(0.0), yhi), W, H);
    let label = figure_title(key);
    let title = format!("{label} vs {}", axis_title(axis));
    axes.open_with_x_ticks(out, &title, &axis_title(axis), &label, &x_ticks);
    if let Some(b) = bound {
        let y = axes.py(b);
        let _ = write!(
            out,
            "<line class=\"bound\" x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" \
             stroke=\"{LINE_COLOUR}\" stroke-dasharray=\"6 3\"><title>SLO bound {b} ms</title>\
             </line>",
            axes.px(axes.x.0),
            axes.px(axes.x.1),
        );
    }
    for &(i, v, x, y) in &data {
        let meets = marks.meets.get(i).copied().unwrap_or(false);
        let (class, colour, verdict) = if meets {
            ("point meets", MEETS_COLOUR, "meets")
        } else {
            ("point misses", MISSES_COLOUR, "does not meet")
        };
        let (px, py) = (axes.px(x_of(x)), axes.py(y));
        let _ = write!(
            out,
            "<g class=\"{class}\"><title>{}={}: {} {y:.2} ({verdict})</title><circle \
             cx=\"{px:.1}\" cy=\"{py:.1}\" r=\"4.5\" fill=\"{colour}\" fill-opacity=\"0.85\"/></g>",
            escape(axis),
            escape(v),
            escape(&label),
        );
        if marks.best == Some(i) {
            let _ = write!(
                out,
                "<circle class=\"answer\" cx=\"{px:.1}\" cy=\"{py:.1}\" r=\"9\" fill=\"none\" \
                 stroke=\"{LINE_COLOUR}\" stroke-width=\"2\"><title>the answer</title></circle>"
            );
        }
    }
    out.push_str("</svg>");
}

/// Which flag would have computed a missing `pNN_METRIC_ms` figure: the metric itself
/// (`--percentile-metrics`, when no point has any figure of it; E2EL is not in Python's
/// default list) or the percentile (`--metric-percentiles`).
fn missing_hint(points: &[(String, Figures)], key: &str) -> String {
    let metric = key
        .strip_suffix("_ms")
        .and_then(|k| k.split_once('_'))
        .map_or(key, |(_, m)| m);
    let computed = points.iter().any(|(_, f)| {
        f.iter().any(|(k, _)| {
            k.strip_suffix("_ms")
                .and_then(|k| k.split_once('_'))
                .map(|(_, m)| m)
                == Some(metric)
        })
    });
    if computed {
        "run with --metric-percentiles including 99".to_owned()
    } else {
        format!("run with --percentile-metrics including {metric}")
    }
}

/// Throughput against one latency figure, the front joined.
fn against_throughput(
    out: &mut String,
    axis: &str,
    points: &[(String, Figures)],
    key: &str,
    label: &str,
) {
    let data: Vec<(&str, f64, f64, &str)> = points
        .iter()
        .filter_map(|(v, f)| {
            let (t, t_label) = throughput(f)?;
            Some((v.as_str(), get(f, key)?, t, t_label))
        })
        .collect();
    let title = format!("Throughput vs {label}");
    if data.is_empty() {
        let _ = write!(
            out,
            "<p class=\"note\">{}: no {key} in this summary ({}).</p>",
            escape(&title),
            escape(&missing_hint(points, key))
        );
        return;
    }
    let lat: Vec<(f64, f64)> = data.iter().map(|d| (d.1, d.2)).collect();
    let front = pareto_front(&lat);
    let range = |f: &dyn Fn(&(f64, f64)) -> f64| {
        lat.iter()
            .map(f)
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
                (a.min(v), b.max(v))
            })
    };
    let axes = Axes::fit(range(&|p| p.0), range(&|p| p.1), W, H);
    axes.open(out, &title, label, data[0].3);
    let mut on_front: Vec<(f64, f64)> = lat
        .iter()
        .zip(&front)
        .filter(|(_, f)| **f)
        .map(|(p, _)| *p)
        .collect();
    on_front.sort_by(|a, b| a.0.total_cmp(&b.0));
    let line: Vec<String> = on_front
        .iter()
        .map(|&(l, t)| format!("{:.1},{:.1}", axes.px(l), axes.py(t)))
        .collect();
    let _ = write!(
        out,
        "<polyline class=\"pareto\" points=\"{}\" fill=\"none\" stroke=\"{FRONT_COLOUR}\" \
         stroke-width=\"1.5\" stroke-dasharray=\"4 3\"/>",
        line.join(" ")
    );
    for (&(value, l, t, _), f) in data.iter().zip(&front) {
        let (x, y) = (axes.px(l), axes.py(t));
        let (class, colour) = if *f {
            ("point front", FRONT_COLOUR)
        } else {
            ("point", POINT_COLOUR)
        };
        let _ = write!(
            out,
            "<g class=\"{class}\"><title>{axis}={value}: throughput {t:.2}, {label} {l:.2}{}\
             </title><circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"5\" fill=\"{colour}\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\">{value}</text></g>",
            if *f { " (Pareto front)" } else { "" },
            x + 7.0,
            y - 6.0,
            axis = escape(axis),
            value = escape(value),
            label = escape(label),
        );
    }
    out.push_str("</svg>");
}

/// One figure against the swept value (in sweep order, evenly spaced: `inf` is a value too).
fn against_axis(
    out: &mut String,
    axis: &str,
    points: &[(String, Figures)],
    key: &str,
    label: &str,
) {
    let data: Vec<(usize, &str, f64)> = points
        .iter()
        .enumerate()
        .filter_map(|(i, (v, f))| Some((i, v.as_str(), get(f, key)?)))
        .collect();
    if data.is_empty() {
        return;
    }
    let (lo, hi) = data
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), d| {
            (a.min(d.2), b.max(d.2))
        });
    let axes = Axes {
        x: (-0.5, points.len() as f64 - 0.5),
        ..Axes::fit((0.0, 1.0), (lo.min(0.0), hi), W, H)
    };
    let title = format!("{label} vs {}", axis_title(axis));
    // The x ticks are the swept values (the user's list, each once), not numbers.
    axes.open_categorical(out, &title, &axis_title(axis), label);
    for (i, v, _) in &data {
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            axes.px(*i as f64),
            H - 28.0,
            escape(v)
        );
    }
    let line: Vec<String> = data
        .iter()
        .map(|(i, _, y)| format!("{:.1},{:.1}", axes.px(*i as f64), axes.py(*y)))
        .collect();
    let _ = write!(
        out,
        "<polyline points=\"{}\" fill=\"none\" stroke=\"{POINT_COLOUR}\" stroke-width=\"1.5\"/>",
        line.join(" ")
    );
    for (i, v, y) in &data {
        let _ = write!(
            out,
            "<g class=\"point\"><title>{}={}: {} {y:.2}</title><circle cx=\"{:.1}\" \
             cy=\"{:.1}\" r=\"4\" fill=\"{POINT_COLOUR}\"/></g>",
            escape(axis),
            escape(v),
            escape(label),
            axes.px(*i as f64),
            axes.py(*y)
        );
    }
    out.push_str("</svg>");
}

fn repeated(out: &mut String, runs: &[Figures]) {
    let _ = write!(
        out,
        "<p class=\"note\">{} runs of one point: each dot is a run, the bar its min–max \
         range, the tick the mean. Hover a dot for its value.</p>\n<div class=\"grid\">",
        runs.len()
    );
    for (key, label) in RUN_FIGURES {
        let values: Vec<(usize, f64)> = runs
            .iter()
            .enumerate()
            .filter_map(|(i, f)| Some((i + 1, get(f, key)?)))
            .collect();
        if values.is_empty() {
            continue;
        }
        spread_svg(out, label, &values);
    }
    out.push_str("</div>\n");
}

/// One figure's runs on one line.
fn spread_svg(out: &mut String, label: &str, values: &[(usize, f64)]) {
    let (lo, hi) = values
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v.1), b.max(v.1))
        });
    let mean = values.iter().map(|v| v.1).sum::<f64>() / values.len() as f64;
    let spread = if mean != 0.0 {
        (hi - lo) / mean * 100.0
    } else {
        0.0
    };
    let axes = Axes::fit((lo, hi), (0.0, 1.0), W, 150.0);
    let title = format!("{label}: mean {mean:.2}, range {spread:.1}% of the mean");
    axes.open_strip(out, &title, label);
    let y = axes.py(0.5);
    let _ = write!(
        out,
        "<line class=\"range\" x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" \
         stroke=\"#999\" stroke-width=\"6\" stroke-linecap=\"round\"/>\
         <line class=\"mean\" x1=\"{m:.1}\" x2=\"{m:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" \
         stroke=\"{FRONT_COLOUR}\" stroke-width=\"2\"><title>mean {mean:.2}</title></line>",
        axes.px(lo),
        axes.px(hi),
        y - 16.0,
        y + 16.0,
        m = axes.px(mean),
    );
    for &(run, v) in values {
        let _ = write!(
            out,
            "<g class=\"run\"><title>run {run}: {v:.2}</title><circle cx=\"{:.1}\" cy=\"{y:.1}\" \
             r=\"5\" fill=\"{POINT_COLOUR}\" fill-opacity=\"0.8\"/></g>",
            axes.px(v)
        );
    }
    out.push_str("</svg>");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figs(pairs: &[(&str, f64)]) -> Figures {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn the_front_keeps_the_undominated_points() {
        // (latency, throughput): b dominates d; a, b, c trade off.
        let pts = [(10.0, 100.0), (20.0, 300.0), (40.0, 400.0), (30.0, 250.0)];
        assert_eq!(pareto_front(&pts), [true, true, true, false]);
        // Equal points are both on the front.
        assert_eq!(pareto_front(&[(1.0, 1.0), (1.0, 1.0)]), [true, true]);
    }

    #[test]
    fn a_saved_sweep_summary_reads_back() {
        let text = r#"{"axis": "max_concurrency", "points": [
            {"max_concurrency": "1", "output_throughput": 100.0, "p99_ttft_ms": 10.0},
            {"max_concurrency": "4", "output_throughput": 350.5, "p99_ttft_ms": null}],
            "best_max_concurrency": "4"}"#;
        let s = Summary::from_json(text).unwrap();
        let Summary::Sweep { axis, points } = &s else {
            panic!("a sweep: {s:?}")
        };
        assert_eq!(axis, "max_concurrency");
        assert_eq!(points[1].0, "4");
        assert_eq!(get(&points[1].1, "output_throughput"), Some(350.5));
        assert_eq!(get(&points[1].1, "p99_ttft_ms"), None);
        let html = render(&s, "sweep");
        assert_eq!(html.matches("<g class=\"point front\">").count(), 1);
        assert!(html.contains("class=\"pareto\""));
        assert!(matches!(
            Summary::from_json("{\"x\": 1}"),
            Err(SummaryError::Shape)
        ));
    }

    #[test]
    fn a_saved_slo_search_summary_reads_back_with_its_bounds_and_answer() {
        let text = r#"{"vllm_bench_slo_search": {"variable": "max_concurrency",
            "slo": ["ttft:p99=300"], "best": {"max_concurrency": 2, "run": 2},
            "points": [
              {"max_concurrency": 1, "run": 1, "meets": true, "p99_ttft_ms": 20.0,
               "request_throughput": 10.0,
               "slo": {"ttft:p99": {"key": "p99_ttft_ms", "value_ms": 20.0, "bound_ms": 300.0}}},
              {"max_concurrency": 4, "run": 1, "meets": false, "p99_ttft_ms": 400.0,
               "request_throughput": 30.0},
              {"max_concurrency": 2, "run": 1, "meets": true, "p99_ttft_ms": 250.0,
               "request_throughput": 19.0},
              {"max_concurrency": 2, "run": 2, "meets": true, "p99_ttft_ms": 260.0,
               "request_throughput": 20.0}]}}"#;
        let s = Summary::from_json(text).unwrap();
        let Summary::Search {
            axis,
            points,
            bounds,
            best,
            meets,
        } = &s
        else {
            panic!("a search: {s:?}")
        };
        assert_eq!(meets, &[true, true, true, false]);
        assert_eq!(axis, "max_concurrency");
        let values: Vec<&str> = points.iter().map(|(v, _)| v.as_str()).collect();
        assert_eq!(
            values,
            ["1", "2", "2", "4"],
            "ascending, a value's runs in order"
        );
        assert_eq!(bounds, &[("p99_ttft_ms".to_string(), 300.0)]);
        assert_eq!(*best, Some(2), "the answer is the value's second run");
        assert_eq!(get(&points[2].1, "p99_ttft_ms"), Some(260.0));
    }

    #[test]
    fn the_slo_page_has_a_numeric_axis_readable_titles_and_verdict_colours() {
        // Rates probed close together, one twice, and `inf`: the categorical axis repeated
        // 1.266 and ran the labels into `1.0131.2661.393...`, titled `p99_ttft_ms`.
        let rates = ["inf", "1.013", "1.266", "1.266", "1.393", "1.52", "2.5"];
        let meets = vec![false, true, true, false, true, false, false];
        let points: Vec<(String, Figures)> = rates
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let f = figs(&[
                    ("p99_ttft_ms", 10.0 * i as f64),
                    ("request_throughput", 1.0),
                ]);
                (r.to_string(), f)
            })
            .collect();
        let summary = Summary::Search {
            axis: "request_rate".into(),
            points,
            bounds: vec![("p99_ttft_ms".into(), 35.0)],
            best: Some(4),
            meets,
        };
        let html = render(&summary, "search");
        let chart = html
            .split("<svg")
            .find(|c| c.contains("P99 TTFT (ms) vs Request rate (req/s)"))
            .unwrap_or_else(|| panic!("no titled TTFT chart: {html}"));
        let ticks: Vec<&str> = chart
            .split("<text class=\"tick\"")
            .skip(1)
            .filter_map(|t| t.split('>').nth(1)?.split('<').next())
            .collect();
        assert!(!ticks.contains(&"1.266"), "no tick per probe: {ticks:?}");
        assert_eq!(ticks.last(), Some(&"inf"), "{ticks:?}");
        let numeric: Vec<f64> = ticks.iter().filter_map(|t| t.parse().ok()).collect();
        assert!(numeric.len() >= 2, "{ticks:?}");
        assert!(
            numeric.windows(2).all(|w| w[0] < w[1]),
            "ascending: {ticks:?}"
        );
        // The x of each tick: far enough apart that no two labels overlap.
        let xs: Vec<f64> = chart
            .split("<text class=\"tick\" x=\"")
            .skip(1)
            .filter_map(|t| t.split('"').next()?.parse().ok())
            .collect();
        assert!(xs.windows(2).all(|w| w[1] - w[0] > 40.0), "{xs:?}");
        assert_eq!(chart.matches("<g class=\"point meets\">").count(), 3);
        assert_eq!(chart.matches("<g class=\"point misses\">").count(), 4);
        assert!(chart.contains(&format!("fill=\"{MEETS_COLOUR}\"")));
        assert!(chart.contains(&format!("fill=\"{MISSES_COLOUR}\"")));
        assert!(chart.contains("class=\"answer\""));
        for raw in [">p99_ttft_ms<", ">request_throughput<", ">request_rate<"] {
            assert!(!html.contains(raw), "a raw key as a title: {raw}");
        }
        assert!(html.contains(">Request throughput (req/s)<"));
    }

    #[test]
    fn the_e2el_hint_names_the_flag_that_computes_e2el() {
        // No point computed E2EL at all: the missing flag is --percentile-metrics.
        let points = vec![(
            "1".to_string(),
            figs(&[("output_throughput", 10.0), ("p99_ttft_ms", 5.0)]),
        )];
        let html = render(
            &Summary::Sweep {
                axis: "max_concurrency".into(),
                points: points.clone(),
            },
            "sweep",
        );
        assert!(
            html.contains(
                "no p99_e2el_ms in this summary (run with --percentile-metrics including e2el)"
            ),
            "{html}"
        );
        // E2EL computed, its 99th percentile not: --metric-percentiles.
        assert_eq!(
            missing_hint(
                &[("1".into(), figs(&[("mean_e2el_ms", 3.0)]))],
                "p99_e2el_ms"
            ),
            "run with --metric-percentiles including 99"
        );
    }

    #[test]
    fn repeated_runs_draw_one_dot_per_run_and_figure() {
        let runs = vec![
            figs(&[("request_throughput", 10.0), ("p99_ttft_ms", 5.0)]),
            figs(&[("request_throughput", 12.0), ("p99_ttft_ms", 6.0)]),
            figs(&[("request_throughput", 11.0), ("p99_ttft_ms", 4.0)]),
        ];
        let html = render(&Summary::Runs { runs }, "runs");
        assert_eq!(html.matches("<g class=\"run\">").count(), 6);
        assert!(html.contains("mean 11.00, range 18.2% of the mean"));
    }
}
