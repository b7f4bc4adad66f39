//! The "Server Metrics" block (after ours, in Python's style) and the
//! `vllm_bench_server_metrics` result key: this run's share of the server's Prometheus
//! metrics (see `crate::server_metrics` and docs/server-metrics.md).
//!
//! The block shows only what the server reported (a figure whose metric is missing is left
//! out, not printed as zero) and nothing at all when no endpoint answered. Histogram
//! percentiles are interpolated inside the server's buckets, and the block says so.

use std::fmt::Write as _;

use super::console::{centred, float_line, WIDTH};
use super::json::{Json, JsonObject};
use crate::metrics::report::BenchmarkReport;
use crate::metrics::summary::{MetricKind, MetricStats};
use crate::server_metrics::{vllm, EndpointMetrics, Figures, HistogramDelta, ServerMetrics};

/// The result-JSON key.
pub const KEY: &str = "vllm_bench_server_metrics";

/// The console block; empty when no endpoint gave figures.
pub fn render(metrics: &ServerMetrics, report: &BenchmarkReport) -> String {
    let mut out = String::new();
    for (i, e) in metrics.endpoints.iter().enumerate() {
        block(&mut out, e, (i == 0).then(|| client_ttft(report)).flatten());
    }
    out
}

fn line(out: &mut String, label: &str, value: impl std::fmt::Display) {
    let _ = writeln!(out, "{label:<40} {value:<10}");
}

fn block(out: &mut String, e: &EndpointMetrics, client_ttft: Option<&MetricStats>) {
    let f = &e.figures;
    centred(out, " Server Metrics ", '=');
    line(out, "Source:", &e.url);
    let failed = if e.failed > 0 {
        format!(", {} failed", e.failed)
    } else {
        String::new()
    };
    line(out, "Scrapes:", format!("{}{failed}", e.scrapes));
    let counters = [
        ("Successful requests:", vllm::REQUEST_SUCCESS),
        ("Prompt tokens:", vllm::PROMPT_TOKENS),
        ("Cached prompt tokens:", vllm::PROMPT_TOKENS_CACHED),
        ("Generation tokens:", vllm::GENERATION_TOKENS),
        ("Preemptions:", vllm::NUM_PREEMPTIONS),
    ];
    for (label, name) in counters {
        if let Some(v) = f.counters.get(name) {
            line(out, label, integer(*v));
        }
    }
    if let Some(rate) = f.prefix_cache_hit_rate {
        float_line(out, "Prefix cache hit rate (%):", rate * 100.0);
    }
    let gauges = [
        ("Running requests (peak / mean):", vllm::RUNNING, 1.0),
        ("Waiting requests (peak / mean):", vllm::WAITING, 1.0),
        (
            "KV-cache usage % (peak / mean):",
            vllm::KV_CACHE_USAGE,
            100.0,
        ),
    ];
    for (label, name, scale) in gauges {
        if let Some(g) = f.gauges.get(name) {
            line(
                out,
                label,
                format!("{:.2} / {:.2}", g.max * scale, g.mean * scale),
            );
        }
    }
    for (name, w) in &f.went_down {
        let _ = writeln!(
            out,
            "{name} went down ({} -> {}): the server restarted in the run; no delta",
            w.from, w.to
        );
    }
    let latency = [
        ("Server TTFT", vllm::TTFT),
        ("Server queue time", vllm::QUEUE_TIME),
        ("Server prefill time", vllm::PREFILL_TIME),
    ];
    if latency.iter().any(|(_, n)| f.histograms.contains_key(*n)) {
        centred(out, " Server latency (bucket-interpolated) ", '-');
        for (label, name) in latency {
            if let Some(h) = f.histograms.get(name) {
                line(
                    out,
                    &format!("{label} mean/p50/p99 (ms):"),
                    format!("{} / {} / {}", ms(h.mean()), ms(h.p50), ms(h.p99)),
                );
            }
        }
    }
    if let Some(split) = client_ttft.and_then(|c| TtftSplit::of(c, f)) {
        split.render(out);
    }
    let _ = writeln!(out, "{}", "=".repeat(WIDTH));
}

fn integer(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v:.2}")
    }
}

fn ms(s: Option<f64>) -> String {
    s.map_or_else(|| "N/A".to_string(), |s| format!("{:.2}", s * 1000.0))
}

/// The client's TTFT statistics, when this run has them.
fn client_ttft(report: &BenchmarkReport) -> Option<&MetricStats> {
    report
        .sections()
        .into_iter()
        .find(|(k, _)| *k == MetricKind::Ttft)
        .map(|(_, s)| s)
}

/// The client's mean TTFT split into the server's queue time, the server's own time to the
/// first token after it, and the rest (network, the client): means add up, so the split is
/// of means; the p99 line sets the client's p99 beside the server's (percentiles do not).
struct TtftSplit {
    client_mean_ms: f64,
    queue_mean_ms: f64,
    server_mean_ms: f64,
    client_p99_ms: Option<f64>,
    server: HistogramDelta,
    queue: HistogramDelta,
}

impl TtftSplit {
    fn of(client: &MetricStats, f: &Figures) -> Option<TtftSplit> {
        let server = *f.histograms.get(vllm::TTFT)?;
        let queue = *f.histograms.get(vllm::QUEUE_TIME)?;
        Some(TtftSplit {
            client_mean_ms: client.mean_ms,
            queue_mean_ms: queue.mean()? * 1000.0,
            server_mean_ms: server.mean()? * 1000.0,
            client_p99_ms: client
                .percentiles_ms
                .iter()
                .find(|(p, _)| *p == 99.0)
                .map(|p| p.1),
            server,
            queue,
        })
    }

    fn render(&self, out: &mut String) {
        centred(out, " Client TTFT split ", '-');
        float_line(out, "Client mean TTFT (ms):", self.client_mean_ms);
        float_line(out, "  Server queue (ms):", self.queue_mean_ms);
        float_line(
            out,
            "  Server prefill, first token (ms):",
            (self.server_mean_ms - self.queue_mean_ms).max(0.0),
        );
        float_line(
            out,
            "  Network and client (ms):",
            self.client_mean_ms - self.server_mean_ms,
        );
        if let Some(p99) = self.client_p99_ms {
            line(
                out,
                "P99 TTFT client / server / queue (ms):",
                format!(
                    "{p99:.2} / {} / {}",
                    ms(self.server.p99),
                    ms(self.queue.p99)
                ),
            );
        }
    }
}

/// The result key: the first endpoint's figures, the others under `other_endpoints`;
/// `null` when no endpoint gave figures.
pub fn to_json(metrics: &ServerMetrics) -> JsonObject<'static> {
    let mut doc = JsonObject::new();
    let value = match metrics.endpoints.split_first() {
        None => Json::Null,
        Some((first, rest)) => {
            let mut o = endpoint(first);
            if !rest.is_empty() {
                o.set(
                    "other_endpoints",
                    Json::List(rest.iter().map(|e| Json::Object(endpoint(e))).collect()),
                );
            }
            Json::Object(o)
        }
    };
    doc.set(KEY, value);
    doc
}

fn endpoint(e: &EndpointMetrics) -> JsonObject<'static> {
    let f = &e.figures;
    let mut o = JsonObject::new();
    o.set("url", Json::str(e.url.clone()));
    o.set("scrapes", Json::UInt(e.scrapes as u64));
    o.set("failed_scrapes", Json::UInt(e.failed as u64));
    let mut counters = JsonObject::new();
    for (k, v) in &f.counters {
        counters.set(k.clone(), Json::Float(*v));
    }
    o.set("counters", Json::Object(counters));
    let mut down = JsonObject::new();
    for (k, w) in &f.went_down {
        let mut d = JsonObject::new();
        d.set("from", Json::Float(w.from));
        d.set("to", Json::Float(w.to));
        down.set(k.clone(), Json::Object(d));
    }
    o.set("went_down", Json::Object(down));
    let mut gauges = JsonObject::new();
    for (k, g) in &f.gauges {
        let mut s = JsonObject::new();
        s.set("min", Json::Float(g.min));
        s.set("mean", Json::Float(g.mean));
        s.set("max", Json::Float(g.max));
        gauges.set(k.clone(), Json::Object(s));
    }
    o.set("gauges", Json::Object(gauges));
    let mut hists = JsonObject::new();
    for (k, h) in &f.histograms {
        let mut s = JsonObject::new();
        s.set("count", Json::Float(h.count));
        s.set("sum", Json::Float(h.sum));
        s.set("mean", Json::opt(h.mean(), Json::Float));
        s.set("p50", Json::opt(h.p50, Json::Float));
        s.set("p90", Json::opt(h.p90, Json::Float));
        s.set("p99", Json::opt(h.p99, Json::Float));
        s.set("percentiles", Json::str("bucket-interpolated"));
        hists.set(k.clone(), Json::Object(s));
    }
    o.set("histograms", Json::Object(hists));
    o.set(
        "prefix_cache_hit_rate",
        Json::opt(f.prefix_cache_hit_rate, Json::Float),
    );
    let mut series = JsonObject::new();
    series.set("t_s", Json::Floats(f.series.t.clone().into()));
    let mut gauges = JsonObject::new();
    for (k, values) in &f.series.gauges {
        let list = values.iter().map(|v| Json::opt(*v, Json::Float)).collect();
        gauges.set(k.clone(), Json::List(list));
    }
    series.set("gauges", Json::Object(gauges));
    o.set("series", Json::Object(series));
    o
}
