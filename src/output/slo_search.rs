//! The SLO capacity search's report, rendered from one value ([`SearchReport`], built by
//! `modes::slo_search`): a line per probe as it finishes, the closing block (the capacity,
//! its figures, the tightest term, the next value that failed and why), the summary
//! document (`{"vllm_bench_slo_search": {...}}`) and the points of its plot.

use std::fmt::Write;

use crate::output::json::{Json, JsonObject};
use crate::output::plot::runs_plot::Figures;
use crate::output::runs_summary::Figure;
use crate::pyfmt::float_repr;

/// One SLO term's figure in one probe.
#[derive(Debug, Clone, PartialEq)]
pub struct TermFigure {
    /// `ttft:p99`.
    pub name: String,
    /// The result key of the figure (`p99_ttft_ms`).
    pub key: String,
    pub bound_ms: f64,
    /// `None`: the run did not report it (no successful request).
    pub value_ms: Option<f64>,
}

impl TermFigure {
    pub fn meets(&self) -> bool {
        self.value_ms.is_some_and(|v| v <= self.bound_ms)
    }

    /// The figure as a share of its bound (1.0 = at the bound); infinite when missing.
    pub fn load(&self) -> f64 {
        self.value_ms.map_or(f64::INFINITY, |v| v / self.bound_ms)
    }
}

/// One probe: one measured run at one value.
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    pub value: f64,
    /// Which run of this value it was (1 = the first).
    pub run: usize,
    pub terms: Vec<TermFigure>,
    /// `--slo-goodput`: (the share of requests that met every `--goodput` threshold, the
    /// share required).
    pub goodput: Option<(f64, f64)>,
    pub failed: u64,
    /// Every term met, the goodput share reached, no request failed, not interrupted.
    pub meets: bool,
    /// Missed with latencies growing through the run (over-saturated).
    pub saturated: bool,
    /// Stopped early as over-saturated (`modes::slo_search::saturation`): seconds into
    /// the run, and its requests not sent.
    pub stopped_early: Option<(f64, usize)>,
    pub interrupted: bool,
    pub figures: Vec<Figure>,
    pub result_file: Option<String>,
}

impl Probe {
    /// Why it missed, in words (empty when it met).
    pub fn why_not(&self) -> String {
        let mut why: Vec<String> = self
            .terms
            .iter()
            .filter(|t| !t.meets())
            .map(|t| match t.value_ms {
                Some(v) => format!("{} {} > {} ms", t.name, ms(v), ms(t.bound_ms)),
                None => format!("{} not measured", t.name),
            })
            .collect();
        if let Some((share, need)) = self.goodput.filter(|(s, n)| s < n) {
            why.push(format!(
                "goodput share {:.1} % < {:.1} %",
                share * 100.0,
                need * 100.0
            ));
        }
        if self.failed > 0 {
            why.push(format!("{} request(s) failed", self.failed));
        }
        if self.interrupted {
            why.push("interrupted".to_owned());
        }
        why.join(", ")
    }

    fn figure(&self, key: &str) -> Option<f64> {
        self.figures.iter().find(|f| f.key == key).map(|f| f.value)
    }
}

/// The whole search.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchReport {
    /// `max_concurrency` or `request_rate`.
    pub variable: &'static str,
    /// The terms as given (`ttft:p99=500`).
    pub slo: Vec<String>,
    pub goodput_share: Option<f64>,
    pub probes: Vec<Probe>,
    /// The capacity found: the index of its last run in `probes`.
    pub best: Option<usize>,
    /// The next value that failed above it: the index of its last run.
    pub failed: Option<usize>,
    /// Why the search stopped, in words.
    pub stopped_because: String,
    /// Time from the end of one probe's measured run to the start of the next's (ms).
    pub overhead_ms: Vec<f64>,
}

fn ms(v: f64) -> String {
    format!("{v:.2}")
}

/// A value as shown: `4`, `12.5`, `inf`.
pub fn value_text(v: f64) -> String {
    if v.is_infinite() {
        "inf".to_owned()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        float_repr(v)
    }
}

fn value_json(v: f64) -> Json<'static> {
    if v.is_infinite() {
        Json::str("inf")
    } else if v.fract() == 0.0 && (0.0..1e15).contains(&v) {
        Json::UInt(v as u64)
    } else {
        Json::Float(v)
    }
}

/// The line printed as a probe finishes.
pub fn render_probe_line(variable: &str, index: usize, p: &Probe) -> String {
    let mut line = format!(
        "SLO probe {}: {variable} = {}",
        index + 1,
        value_text(p.value)
    );
    if p.run > 1 {
        let _ = write!(line, " (run {})", p.run);
    }
    let terms: Vec<String> = p
        .terms
        .iter()
        .map(|t| {
            let v = t.value_ms.map_or_else(|| "n/a".to_owned(), ms);
            let ok = if t.meets() { "ok" } else { "MISS" };
            format!("{} {v}/{} ms {ok}", t.name, ms(t.bound_ms))
        })
        .collect();
    if !terms.is_empty() {
        let _ = write!(line, ": {}", terms.join(", "));
    }
    if let Some((share, need)) = p.goodput {
        let ok = if share >= need { "ok" } else { "MISS" };
        let _ = write!(
            line,
            "; goodput share {:.1}/{:.1} % {ok}",
            share * 100.0,
            need * 100.0
        );
    }
    if p.failed > 0 {
        let _ = write!(line, "; {} failed", p.failed);
    }
    if p.interrupted {
        // Its figures cover the part it ran: neither a meet nor a miss.
        line.push_str(
            " -> not judged: interrupted (Ctrl-C or SIGTERM) before its end, its figures \
             cover part of the run",
        );
        return line;
    }
    let _ = write!(
        line,
        " -> {}",
        if p.meets { "meets" } else { "does not meet" }
    );
    match p.stopped_early {
        Some((at, not_sent)) => line.push_str(&format!(
            " (over-saturated: stopped after {at:.1} s, completions falling behind \
             arrivals; {not_sent} not sent)"
        )),
        None if p.saturated => line.push_str(" (over-saturated: latency grew through the run)"),
        None => {}
    }
    line
}

/// The block after the last probe.
pub fn render_block(r: &SearchReport) -> String {
    const W: usize = 50;
    let mut out = String::new();
    let _ = writeln!(out, "{:=^W$}", " SLO Capacity Search ");
    let row = |out: &mut String, k: &str, v: &str| {
        let _ = writeln!(out, "{:<40} {v}", format!("{k}:"));
    };
    row(&mut out, "Variable", r.variable);
    let mut slo = r.slo.join(", ");
    if let Some(s) = r.goodput_share {
        if !slo.is_empty() {
            slo.push_str(", ");
        }
        let _ = write!(slo, "goodput share >= {}", float_repr(s));
    }
    row(&mut out, "SLO", &slo);
    match r.best.map(|i| &r.probes[i]) {
        Some(b) => {
            row(
                &mut out,
                &format!("Capacity ({})", r.variable),
                &value_text(b.value),
            );
            for (key, label) in [
                ("request_throughput", "Request throughput (req/s)"),
                ("output_throughput", "Output token throughput (tok/s)"),
                ("request_goodput", "Request goodput (req/s)"),
            ] {
                if let Some(v) = b.figure(key) {
                    row(&mut out, &format!("  {label}"), &format!("{v:.2}"));
                }
            }
            for t in &b.terms {
                let v = t.value_ms.map_or_else(|| "n/a".to_owned(), ms);
                row(
                    &mut out,
                    &format!("  {} (ms)", t.name),
                    &format!("{v} of {}", ms(t.bound_ms)),
                );
            }
            if let Some(t) = b.terms.iter().max_by(|a, c| a.load().total_cmp(&c.load())) {
                row(
                    &mut out,
                    "Tightest term",
                    &format!("{} ({:.0} % of its bound)", t.name, t.load() * 100.0),
                );
            }
        }
        None => row(
            &mut out,
            &format!("Capacity ({})", r.variable),
            "none found",
        ),
    }
    if let Some(f) = r.failed.map(|i| &r.probes[i]) {
        row(
            &mut out,
            "Next value that failed",
            &format!("{} ({})", value_text(f.value), f.why_not()),
        );
    }
    row(&mut out, "Probes", &r.probes.len().to_string());
    if let Some((mean, max)) = overhead(&r.overhead_ms) {
        row(
            &mut out,
            "Overhead between probes (ms)",
            &format!("mean {mean:.1}, max {max:.1}"),
        );
    }
    row(&mut out, "Stopped because", &r.stopped_because);
    let _ = writeln!(out, "{}", "=".repeat(W));
    out
}

fn overhead(ms: &[f64]) -> Option<(f64, f64)> {
    (!ms.is_empty()).then(|| {
        let mean = ms.iter().sum::<f64>() / ms.len() as f64;
        (mean, ms.iter().copied().fold(0.0, f64::max))
    })
}

fn probe_json(variable: &str, p: &Probe) -> JsonObject<'static> {
    let mut o = JsonObject::new();
    o.set(variable.to_string(), value_json(p.value));
    o.set("run", Json::UInt(p.run as u64));
    o.set("meets", Json::Bool(p.meets));
    o.set("saturated", Json::Bool(p.saturated));
    if let Some((at, not_sent)) = p.stopped_early {
        let mut stop = JsonObject::new();
        stop.set("after_s", Json::Float(at));
        stop.set("not_sent", Json::UInt(not_sent as u64));
        o.set("stopped_early", Json::Object(stop));
    }
    o.set("interrupted", Json::Bool(p.interrupted));
    let mut terms = JsonObject::new();
    for t in &p.terms {
        let mut j = JsonObject::new();
        j.set("key", Json::str(t.key.clone()));
        j.set("value_ms", Json::opt(t.value_ms, Json::Float));
        j.set("bound_ms", Json::Float(t.bound_ms));
        j.set("meets", Json::Bool(t.meets()));
        terms.set(t.name.clone(), Json::Object(j));
    }
    o.set("slo", Json::Object(terms));
    o.set(
        "goodput_share",
        Json::opt(p.goodput.map(|g| g.0), Json::Float),
    );
    if !p.meets {
        o.set("why_not", Json::str(p.why_not()));
    }
    for f in &p.figures {
        o.set(f.key.clone(), Json::Float(f.value));
    }
    o.set("result_file", Json::opt(p.result_file.clone(), Json::str));
    o
}

/// The search's summary document.
pub fn to_json(r: &SearchReport) -> String {
    let mut s = JsonObject::new();
    s.set("variable", Json::str(r.variable));
    s.set(
        "slo",
        Json::List(r.slo.iter().map(|t| Json::str(t.clone())).collect()),
    );
    s.set("goodput_share", Json::opt(r.goodput_share, Json::Float));
    let point = |i: Option<usize>| {
        Json::opt(i.map(|i| &r.probes[i]), |p| {
            Json::Object(probe_json(r.variable, p))
        })
    };
    s.set("best", point(r.best));
    s.set("next_failed", point(r.failed));
    s.set(
        "points",
        Json::List(
            r.probes
                .iter()
                .map(|p| Json::Object(probe_json(r.variable, p)))
                .collect(),
        ),
    );
    s.set("stopped_because", Json::str(r.stopped_because.clone()));
    let mut o = JsonObject::new();
    let (mean, max) = overhead(&r.overhead_ms).unwrap_or((0.0, 0.0));
    o.set("count", Json::UInt(r.overhead_ms.len() as u64));
    o.set("mean", Json::Float(mean));
    o.set("max", Json::Float(max));
    s.set("overhead_between_probes_ms", Json::Object(o));
    let mut doc = JsonObject::new();
    doc.set("vllm_bench_slo_search", Json::Object(s));
    doc.to_json_string()
}

/// The plot's points, in ascending value (a value run twice shows twice), the index of the
/// answer's among them, and each one's verdict.
pub fn plot_points(r: &SearchReport) -> (Vec<(String, Figures)>, Option<usize>, Vec<bool>) {
    let mut order: Vec<usize> = (0..r.probes.len()).collect();
    order.sort_by(|&a, &b| r.probes[a].value.total_cmp(&r.probes[b].value));
    let points = order
        .iter()
        .map(|&i| {
            let p = &r.probes[i];
            let figs = p.figures.iter().map(|f| (f.key.clone(), f.value)).collect();
            (value_text(p.value), figs)
        })
        .collect();
    let best = r.best.and_then(|b| order.iter().position(|&i| i == b));
    let meets = order.iter().map(|&i| r.probes[i].meets).collect();
    (points, best, meets)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(value: f64, ttft: f64, meets: bool) -> Probe {
        Probe {
            value,
            run: 1,
            terms: vec![TermFigure {
                name: "ttft:p99".into(),
                key: "p99_ttft_ms".into(),
                bound_ms: 30.0,
                value_ms: Some(ttft),
            }],
            goodput: None,
            failed: 0,
            meets,
            saturated: false,
            stopped_early: None,
            interrupted: false,
            figures: vec![Figure {
                key: "request_throughput".into(),
                label: "Request throughput (req/s)".into(),
                value: 10.0,
            }],
            result_file: None,
        }
    }

    #[test]
    fn the_block_names_the_capacity_the_tightest_term_and_the_failure() {
        let r = SearchReport {
            variable: "max_concurrency",
            slo: vec!["ttft:p99=30".into()],
            goodput_share: None,
            probes: vec![probe(4.0, 24.0, true), probe(5.0, 45.0, false)],
            best: Some(0),
            failed: Some(1),
            stopped_because: "found".into(),
            overhead_ms: vec![2.0, 4.0],
        };
        let block = render_block(&r);
        assert!(block.contains("Capacity (max_concurrency):"), "{block}");
        assert!(block.contains("ttft:p99 (80 % of its bound)"), "{block}");
        assert!(block.contains("5 (ttft:p99 45.00 > 30.00 ms)"), "{block}");
        assert!(block.contains("mean 3.0, max 4.0"), "{block}");
        let doc: serde_json::Value = serde_json::from_str(&to_json(&r)).unwrap();
        let s = &doc["vllm_bench_slo_search"];
        assert_eq!(s["best"]["max_concurrency"], 4);
        assert_eq!(s["points"].as_array().unwrap().len(), 2);
        assert_eq!(s["points"][1]["meets"], false);
        let line = render_probe_line("max_concurrency", 1, &r.probes[1]);
        assert!(
            line.ends_with("ttft:p99 45.00/30.00 ms MISS -> does not meet"),
            "{line}"
        );
    }

    #[test]
    fn an_interrupted_probe_says_why_instead_of_ok_does_not_meet() {
        let mut p = probe(4.0, 24.0, false);
        p.interrupted = true;
        let line = render_probe_line("max_concurrency", 0, &p);
        assert!(
            line.ends_with(
                "ttft:p99 24.00/30.00 ms ok -> not judged: interrupted (Ctrl-C or SIGTERM) \
                 before its end, its figures cover part of the run"
            ),
            "{line}"
        );
        assert!(!line.contains("does not meet"), "{line}");
    }
}
