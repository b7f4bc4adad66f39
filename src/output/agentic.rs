//! The agentic replay's report ([`AgenticReport`]) printed and saved: a console block after
//! Python's (and ours), and the result document's `vllm_bench_agentic` key, both from the one
//! computed report. Figures are shown no more precisely than their data: seconds to 0.1 s
//! (requests are timed in ns, trees last seconds), shares to 0.1 %, tokens whole.

use std::borrow::Cow;
use std::fmt::Write;

use crate::metrics::agentic::{AgenticReport, Dist};
use crate::output::json::{Json, JsonObject};
use crate::output::run_result::Section;

/// The result document's key.
pub const KEY: &str = "vllm_bench_agentic";

/// The block and the key of `report`.
pub fn section(report: &AgenticReport) -> Section {
    let mut json = JsonObject::new();
    let value = serde_json::to_value(report).unwrap_or(serde_json::Value::Null);
    json.set(KEY, Json::Value(Cow::Owned(value)));
    Section {
        console: render(report),
        json,
    }
}

fn line(out: &mut String, label: &str, value: impl std::fmt::Display) {
    let _ = writeln!(out, "{label:<40} {value}");
}

fn share(x: Option<f64>) -> String {
    x.map_or("n/a".into(), |x| format!("{:.1}%", 100.0 * x))
}

fn dist(d: &Dist, digits: usize) -> String {
    format!(
        "{:.digits$} / {:.digits$} / {:.digits$}",
        d.mean, d.p50, d.p99
    )
}

/// The console block.
pub fn render(r: &AgenticReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{:-^50}", "Agentic replay");
    let p = &r.phases;
    line(
        &mut out,
        "Requests (primer/warm-up/profiling):",
        format!("{} / {} / {}", p.primer, p.warmup, p.profiling),
    );
    let o = &r.profiling;
    line(
        &mut out,
        "Profiling: completed/failed/cancelled:",
        format!("{} / {} / {}", o.completed, o.failed, o.cancelled),
    );
    let kinds: Vec<String> = r
        .requests_per_kind
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    line(
        &mut out,
        "Requests per stream kind:",
        if kinds.is_empty() {
            "none".into()
        } else {
            kinds.join(", ")
        },
    );
    line(
        &mut out,
        "Context overflows (apart from Python's):",
        format!(
            "{} ({})",
            o.context_overflow,
            share(r.context_overflow_rate)
        ),
    );
    line(&mut out, "Failure ratio:", share(r.failure_rate));
    line(
        &mut out,
        "Trees started/completed:",
        format!("{} / {}", r.trees.started, r.trees.completed),
    );
    line(
        &mut out,
        "Streams started/completed:",
        format!("{} / {}", r.streams.started, r.streams.completed),
    );
    match &r.per_tree {
        Some(t) => {
            line(&mut out, "Trees measured (run from turn 0):", t.trees);
            let _ = writeln!(out, "Per tree, mean / p50 / p99:");
            line(&mut out, "  Time per tree (s):", dist(&t.time_s, 1));
            line(&mut out, "  Server time (s):", dist(&t.server_s, 1));
            line(&mut out, "  Idle time (s):", dist(&t.idle_s, 1));
            line(&mut out, "  Prompt tokens:", dist(&t.prompt_tokens, 0));
            line(&mut out, "  Output tokens:", dist(&t.output_tokens, 0));
            line(&mut out, "  Subagent fan-out:", dist(&t.fan_out, 1));
        }
        None => line(
            &mut out,
            "Per tree:",
            "n/a (no tree ran from turn 0 to its end)",
        ),
    }
    let b = &r.branches;
    line(
        &mut out,
        "Children spawned/completed:",
        format!("{} / {}", b.children_spawned, b.children_completed),
    );
    line(
        &mut out,
        "Children errored/truncated/cancelled:",
        format!(
            "{} / {} / {}",
            b.children_errored, b.children_truncated, b.children_cancelled
        ),
    );
    line(&mut out, "Joins (parent waited):", b.joins);
    line(
        &mut out,
        "Prefix cache hit, theoretical:",
        share(r.prefix_cache.theoretical),
    );
    line(
        &mut out,
        "Prefix cache hit, usage (client side):",
        match r.prefix_cache.usage {
            Some(x) => format!(
                "{} (cached_tokens of {} requests)",
                share(Some(x)),
                r.prefix_cache.usage_reported
            ),
            None => "n/a (no usage carried cached_tokens)".into(),
        },
    );
    line(
        &mut out,
        "Prefix cache hit, server metrics:",
        match r.prefix_cache.server_metrics {
            Some(x) => share(Some(x)),
            None => "n/a (no /metrics prefix-cache counters)".into(),
        },
    );
    line(
        &mut out,
        "Coverage of duration (TTFT / ITL):",
        format!(
            "{} / {}",
            share(r.coverage.ttft_ratio),
            share(r.coverage.itl_ratio)
        ),
    );
    line(&mut out, "AgentX verdict:", &r.verdict);
    for reason in &r.verdict.reasons {
        let _ = writeln!(out, "  {}: {}", reason.code, reason.detail);
    }
    let _ = writeln!(out, "{}", "=".repeat(50));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasets::agentic::{
        derive, Phase, ReplayOutcome, ReplayRecord, StreamKind, WekaTrace,
    };
    use crate::metrics::agentic::{AgenticSettings, TreeShape};

    const TRACE_A: &str = include_str!("../../tests/fixtures/agentic/traces/trace-a.json");

    /// trace-a replayed once along SPEC TC1's timeline, in a 60 s run.
    pub(super) fn sample() -> AgenticReport {
        report()
    }

    fn report() -> AgenticReport {
        let shapes = [TreeShape::of(&derive(&WekaTrace::parse(TRACE_A).unwrap()))];
        let ns = |s: f64| (s * 1e9).round() as i64;
        let rec = |stream: u32, turn: u32, sent: f64, end: f64, (p, o): (u64, u64)| ReplayRecord {
            tree: 0,
            pass: 0,
            lane: 0,
            stream,
            kind: if stream == 0 {
                StreamKind::Root
            } else {
                StreamKind::Subagent
            },
            turn,
            phase: Phase::Profiling,
            sent_ns: ns(sent),
            first_token_ns: Some(ns(sent + 0.1)),
            end_ns: ns(end),
            itl_intervals: 1,
            prompt_tokens: p,
            output_tokens: o,
            cached_tokens: None,
            outcome: ReplayOutcome::Completed,
        };
        let records = [
            rec(0, 0, 0.0, 0.5, (200, 50)),
            rec(1, 0, 0.5, 1.0, (150, 40)),
            rec(1, 1, 1.5, 2.0, (260, 30)),
            rec(0, 1, 3.5, 4.0, (400, 60)),
            rec(0, 2, 5.3, 5.8, (500, 80)),
        ];
        let settings = AgenticSettings {
            duration_s: Some(60.0),
            streaming: true,
            ignore_eos: true,
            cache_bust: true,
            system_idle_cap_s: Some(10.0),
            forbidden: Vec::new(),
            cancelled: false,
            threshold_crossed: None,
            server_prefix_cache_hit: None,
        };
        AgenticReport::compute(&records, &shapes, &settings)
    }

    #[test]
    fn the_block_shows_every_figure_with_the_verdict_reasons() {
        let text = render(&report());
        for want in [
            "Requests (primer/warm-up/profiling):     0 / 0 / 5",
            "Requests per stream kind:                root 3, subagent 2",
            "Context overflows (apart from Python's): 0 (0.0%)",
            "Trees started/completed:                 1 / 1",
            "  Time per tree (s):                     5.8 / 5.8 / 5.8",
            "  Server time (s):                       2.5 / 2.5 / 2.5",
            "  Idle time (s):                         3.3 / 3.3 / 3.3",
            "  Prompt tokens:                         1510 / 1510 / 1510",
            "  Subagent fan-out:                      1.0 / 1.0 / 1.0",
            "Joins (parent waited):                   1",
            "Prefix cache hit, theoretical:           54.5%",
            "Prefix cache hit, usage (client side):   n/a (no usage carried cached_tokens)",
            "Prefix cache hit, server metrics:        n/a (no /metrics prefix-cache counters)",
            "AgentX verdict:                          invalid (duration_too_short)",
            "  duration_too_short: --duration 60 s is below AgentX's 900 s",
        ] {
            assert!(text.contains(want), "{want:?} in\n{text}");
        }
    }

    #[test]
    fn the_key_holds_the_report() {
        let s = section(&report());
        let doc = s.json.to_json_string();
        let v: serde_json::Value = serde_json::from_str(&doc).unwrap();
        let a = &v[KEY];
        assert_eq!(a["trees"]["completed"], 1);
        assert_eq!(a["profiling"]["context_overflow"], 0);
        assert_eq!(a["requests_per_kind"]["subagent"], 2);
        assert_eq!(a["per_tree"]["time_s"]["p50"], 5.8);
        assert_eq!(a["verdict"]["valid"], false);
        assert_eq!(a["verdict"]["reasons"][0]["code"], "duration_too_short");
        assert!(a["prefix_cache"]["usage"].is_null());
        assert!(a["prefix_cache"]["server_metrics"].is_null());
    }
}

#[cfg(test)]
mod doc_sample {
    /// docs/agentic.md shows this block as printed: trace-a's tree replayed once (SPEC TC1's
    /// timeline) in a 60 s run.
    #[test]
    fn the_docs_show_the_block_as_printed() {
        let text = super::render(&super::tests::sample());
        let doc = include_str!("../../docs/agentic.md");
        assert!(doc.contains(&text), "docs/agentic.md should show:\n{text}");
    }
}
