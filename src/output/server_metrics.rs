//! The "Server Metrics" block (after ours, in Python's style) and the
//! `vllm_bench_server_metrics` result key: this run's share of the server's Prometheus
//! metrics (see `crate::server_metrics` and docs/server-metrics.md).
//!
//! The block shows only what the server reported (a figure whose metric is missing is left
//! out, not printed as zero) and nothing at all when no endpoint answered. Histogram
//! percentiles are interpolated inside the server's buckets where that agrees with the
//! server's exact mean, else shown as the bucket they fall in (`<= 300`, `300-500`): never
//! finer than the buckets. Gauges are shown from enough samples during the run, else the
//! row says there were too few.
//!
//! [`from_json`] reads the key back: a shard's result file carries its scrape there, and
//! `vllm-bench merge` shows one shard's (see `modes::merge`), so the key is its own format
//! and has one writer and one reader, here.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::Value;

use super::console::{centred, float_line, WIDTH};
use super::json::{Json, JsonObject};
use crate::metrics::metric_stats::{MetricKind, MetricStats};
use crate::metrics::report::BenchmarkReport;
use crate::server_metrics::window::MIN_GAUGE_SAMPLES;
use crate::server_metrics::{
    self as sm, llamacpp, vllm, EndpointMetrics, Figures, GaugeStats, HistogramDelta, Quantile,
    Series, ServerMetrics, WentDown,
};

/// The result-JSON key.
pub const KEY: &str = "vllm_bench_server_metrics";

/// The console block; empty when no endpoint gave figures.
pub fn render(metrics: &ServerMetrics, report: &BenchmarkReport) -> String {
    render_from(metrics, report, None)
}

/// [`render`] of a merged run's figures, which are shard `shard`'s scrapes (`K/N`).
pub fn render_from(
    metrics: &ServerMetrics,
    report: &BenchmarkReport,
    shard: Option<&str>,
) -> String {
    let mut out = String::new();
    for (i, e) in metrics.endpoints.iter().enumerate() {
        let ttft = (i == 0).then(|| client_ttft(report)).flatten();
        block(&mut out, e, ttft, shard);
    }
    out
}

fn line(out: &mut String, label: &str, value: impl std::fmt::Display) {
    let _ = writeln!(out, "{label:<40} {value:<10}");
}

fn block(
    out: &mut String,
    e: &EndpointMetrics,
    client_ttft: Option<&MetricStats>,
    shard: Option<&str>,
) {
    let f = &e.figures;
    centred(out, " Server Metrics ", '=');
    line(out, "Source:", &e.url);
    if let Some(k) = shard {
        line(out, "Scraped by shard:", k);
    }
    let failed = if e.failed > 0 {
        format!(", {} failed", e.failed)
    } else {
        String::new()
    };
    line(out, "Scrapes:", format!("{}{failed}", e.scrapes));
    // Each row's vLLM counter, else the sum of its llama.cpp counters (all of them present).
    let counters: [(&str, &str, &[&str]); 5] = [
        ("Successful requests:", vllm::REQUEST_SUCCESS, &[]),
        (
            "Prompt tokens:",
            vllm::PROMPT_TOKENS,
            &[llamacpp::PROMPT_TOKENS, llamacpp::PROMPT_TOKENS_CACHED],
        ),
        (
            "Cached prompt tokens:",
            vllm::PROMPT_TOKENS_CACHED,
            &[llamacpp::PROMPT_TOKENS_CACHED],
        ),
        (
            "Generation tokens:",
            vllm::GENERATION_TOKENS,
            &[llamacpp::TOKENS_PREDICTED],
        ),
        ("Preemptions:", vllm::NUM_PREEMPTIONS, &[]),
    ];
    for (label, name, llama) in counters {
        if let Some(v) = counter(f, name, llama) {
            line(out, label, integer(v));
        }
    }
    if let Some(rate) = f.prefix_cache_hit_rate {
        float_line(out, "Prefix cache hit rate (%):", rate * 100.0);
    }
    // llama.cpp's time counters. Prompt time is the wall time of each prompt-processing batch,
    // counted once for all the requests batched in it (`metrics_flush_prompt` in its server), so
    // prompt tokens over it are the server's prefill throughput: one request's speed only when
    // requests were prefilled alone (concurrency 1). Generation time is each slot's own
    // (`t_gen_us`, summed over slots), so that quotient is one request's decode speed.
    let speeds = [
        (
            "Prefill throughput, batched (tok/s):",
            llamacpp::PROMPT_TOKENS,
            llamacpp::PROMPT_SECONDS,
        ),
        (
            "Decode speed per request (tok/s):",
            llamacpp::TOKENS_PREDICTED,
            llamacpp::TOKENS_PREDICTED_SECONDS,
        ),
    ];
    for (label, tokens, seconds) in speeds {
        if let (Some(t), Some(&s)) = (f.counters.get(tokens), f.counters.get(seconds)) {
            if s > 0.0 {
                float_line(out, label, t / s);
            }
        }
    }
    let gauges = [
        ("Running requests (peak / mean):", sm::RUNNING, 1.0),
        ("Waiting requests (peak / mean):", sm::WAITING, 1.0),
        ("KV-cache usage % (peak / mean):", sm::KV_CACHE_USAGE, 100.0),
    ];
    for (label, names, scale) in gauges {
        if let Some(g) = f.gauge(names) {
            let value = if g.is_enough() {
                format!("{:.2} / {:.2}", g.max * scale, g.mean * scale)
            } else {
                // One or two samples may all fall between the requests: a level read from
                // them (0 with 50 requests in flight) would mislead.
                format!(
                    "too few samples ({} during the run, {MIN_GAUGE_SAMPLES} needed; \
                     lower --server-metrics-interval)",
                    g.samples
                )
            };
            line(out, label, value);
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
        let mut ranges = false;
        for (label, name) in latency {
            if let Some(h) = f.histograms.get(name) {
                ranges |= [h.p50, h.p99]
                    .iter()
                    .any(|q| q.is_some_and(|q| q.value.is_none()));
                line(
                    out,
                    &format!("{label} mean/p50/p99 (ms):"),
                    format!(
                        "{} / {} / {}",
                        ms(h.mean()),
                        quantile_ms(h.p50),
                        quantile_ms(h.p99)
                    ),
                );
            }
        }
        if ranges {
            let _ = writeln!(
                out,
                "(a range is the server's histogram bucket: interpolating inside it would \
                 contradict the server's mean)"
            );
        }
    }
    if let Some(split) = client_ttft.and_then(|c| TtftSplit::of(c, f)) {
        split.render(out);
    }
    let _ = writeln!(out, "{}", "=".repeat(WIDTH));
}

/// The counter `name`, else the sum of `alternatives` when every one is there.
fn counter(f: &Figures, name: &str, alternatives: &[&str]) -> Option<f64> {
    if let Some(v) = f.counters.get(name) {
        return Some(*v);
    }
    if alternatives.is_empty() {
        return None;
    }
    alternatives.iter().map(|n| f.counters.get(*n)).sum()
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

/// A percentile in ms: its interpolated value, else the bucket it falls in, never a number
/// finer than the buckets.
fn quantile_ms(q: Option<Quantile>) -> String {
    match q {
        Some(Quantile { value: Some(v), .. }) => format!("{:.2}", v * 1000.0),
        Some(Quantile {
            bucket: Some((lower, upper)),
            ..
        }) => bucket_ms(lower, upper),
        _ => "N/A".to_string(),
    }
}

/// A bucket `(lower, upper]` in seconds as ms: `<= 300`, `300-500`, `> 10000`.
fn bucket_ms(lower: f64, upper: f64) -> String {
    // Bounds are the server's round numbers: no trailing zeros, no float noise.
    let bound = |s: f64| format!("{}", (s * 1e6).round() / 1e3);
    if upper.is_infinite() {
        format!("> {}", bound(lower))
    } else if lower <= 0.0 {
        format!("<= {}", bound(upper))
    } else {
        format!("{}-{}", bound(lower), bound(upper))
    }
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
                    quantile_ms(self.server.p99),
                    quantile_ms(self.queue.p99)
                ),
            );
        }
    }
}

/// The result key: the first endpoint's figures, the others under `other_endpoints`;
/// `null` when no endpoint gave figures.
pub fn to_json(metrics: &ServerMetrics) -> JsonObject<'static> {
    to_json_from(metrics, None)
}

/// [`to_json`] of a merged run's figures, scraped by shard number `shard` (saved as
/// `from_shard`).
pub fn to_json_from(metrics: &ServerMetrics, shard: Option<usize>) -> JsonObject<'static> {
    let mut doc = JsonObject::new();
    let value = match metrics.endpoints.split_first() {
        None => Json::Null,
        Some((first, rest)) => {
            let mut o = endpoint(first);
            if let Some(k) = shard {
                o.set("from_shard", Json::UInt(k as u64));
            }
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
        s.set("samples", Json::UInt(g.samples as u64));
        gauges.set(k.clone(), Json::Object(s));
    }
    o.set("gauges", Json::Object(gauges));
    let mut hists = JsonObject::new();
    for (k, h) in &f.histograms {
        let mut s = JsonObject::new();
        s.set("count", Json::Float(h.count));
        s.set("sum", Json::Float(h.sum));
        s.set("mean", Json::opt(h.mean(), Json::Float));
        for (key, q) in [("p50", h.p50), ("p90", h.p90), ("p99", h.p99)] {
            s.set(key, Json::opt(q.and_then(|q| q.value), Json::Float));
            let bucket = q.and_then(|q| q.bucket).map(|(lower, upper)| {
                // `null` for the overflow bucket's infinite bound.
                Json::List(vec![Json::Float(lower), Json::Float(upper)])
            });
            s.set(format!("{key}_bucket"), bucket.unwrap_or(Json::Null));
        }
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

/// Why a saved `vllm_bench_server_metrics` value cannot be read back.
#[derive(Debug, thiserror::Error)]
#[error("{KEY}: {at}: {what}; it is written by vllm-bench, so the file was edited or cut")]
pub struct ReadError {
    /// Where in the value (`counters`, `other_endpoints[1].series`, ...).
    at: String,
    what: &'static str,
}

fn bad(at: impl Into<String>, what: &'static str) -> ReadError {
    ReadError {
        at: at.into(),
        what,
    }
}

/// Reads back what [`to_json`] wrote (`value`: the key's value): `None` for `null`. A
/// figure saved as `null` (it was not a finite number) reads as NaN.
pub fn from_json(value: &Value) -> Result<Option<ServerMetrics>, ReadError> {
    let o = match value {
        Value::Null => return Ok(None),
        Value::Object(o) => o,
        _ => return Err(bad("(the value)", "not an object")),
    };
    let mut endpoints = vec![endpoint_from(o, "")?];
    if let Some(others) = o.get("other_endpoints") {
        let list = others
            .as_array()
            .ok_or_else(|| bad("other_endpoints", "not a list"))?;
        for (i, e) in list.iter().enumerate() {
            let at = format!("other_endpoints[{i}].");
            let e = e
                .as_object()
                .ok_or_else(|| bad(at.clone(), "not an object"))?;
            endpoints.push(endpoint_from(e, &at)?);
        }
    }
    Ok(Some(ServerMetrics {
        endpoints,
        notes: Vec::new(),
    }))
}

type Object = serde_json::Map<String, Value>;

/// A number, or NaN for `null` (how the writer saves a non-finite one).
fn number(v: &Value, at: impl FnOnce() -> String) -> Result<f64, ReadError> {
    match v {
        Value::Null => Ok(f64::NAN),
        v => v.as_f64().ok_or_else(|| bad(at(), "not a number")),
    }
}

fn optional(v: Option<&Value>, at: impl FnOnce() -> String) -> Result<Option<f64>, ReadError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(v) => number(v, at).map(Some),
    }
}

fn object<'v>(o: &'v Object, key: &str, at: &str) -> Result<&'v Object, ReadError> {
    o.get(key)
        .and_then(Value::as_object)
        .ok_or_else(|| bad(format!("{at}{key}"), "missing or not an object"))
}

fn field(o: &Object, key: &str, at: &str) -> Result<f64, ReadError> {
    let v = o
        .get(key)
        .ok_or_else(|| bad(format!("{at}{key}"), "missing"))?;
    number(v, || format!("{at}{key}"))
}

/// A percentile saved as its value (`p50`) and its bucket (`p50_bucket`, `[lower, upper]`,
/// `null` for an infinite upper bound); `None` when neither is there.
fn quantile_from(h: &Object, key: &str, at: &str) -> Result<Option<Quantile>, ReadError> {
    let value = optional(h.get(key), || format!("{at}{key}"))?;
    let bucket_key = format!("{key}_bucket");
    let bucket = match h.get(&bucket_key) {
        None | Some(Value::Null) => None,
        Some(v) => {
            let here = || format!("{at}{bucket_key}");
            let pair = v.as_array().filter(|a| a.len() == 2);
            let pair = pair.ok_or_else(|| bad(here(), "not a [lower, upper] pair"))?;
            let lower = number(&pair[0], here)?;
            let upper = match &pair[1] {
                Value::Null => f64::INFINITY,
                v => number(v, here)?,
            };
            Some((lower, upper))
        }
    };
    Ok((value.is_some() || bucket.is_some()).then_some(Quantile { bucket, value }))
}

fn endpoint_from(o: &Object, at: &str) -> Result<EndpointMetrics, ReadError> {
    let url = o
        .get("url")
        .and_then(Value::as_str)
        .ok_or_else(|| bad(format!("{at}url"), "missing or not a string"))?;
    let count = |key: &str| {
        o.get(key)
            .and_then(Value::as_u64)
            .ok_or_else(|| bad(format!("{at}{key}"), "missing or not a count"))
    };
    let mut f = Figures::default();
    for (k, v) in object(o, "counters", at)? {
        f.counters
            .insert(k.clone(), number(v, || format!("{at}counters.{k}"))?);
    }
    for (k, v) in object(o, "went_down", at)? {
        let here = format!("{at}went_down.{k}.");
        let w = v
            .as_object()
            .ok_or_else(|| bad(here.clone(), "not an object"))?;
        let (from, to) = (field(w, "from", &here)?, field(w, "to", &here)?);
        f.went_down.insert(k.clone(), WentDown { from, to });
    }
    for (k, v) in object(o, "gauges", at)? {
        let here = format!("{at}gauges.{k}.");
        let g = v
            .as_object()
            .ok_or_else(|| bad(here.clone(), "not an object"))?;
        let samples = match g.get("samples") {
            Some(v) => v
                .as_u64()
                .ok_or_else(|| bad(format!("{here}samples"), "not a count"))?
                as usize,
            // Written before the key existed: counted from the series below.
            None => usize::MAX,
        };
        let stats = GaugeStats {
            min: field(g, "min", &here)?,
            mean: field(g, "mean", &here)?,
            max: field(g, "max", &here)?,
            samples,
        };
        f.gauges.insert(k.clone(), stats);
    }
    for (k, v) in object(o, "histograms", at)? {
        let here = format!("{at}histograms.{k}.");
        let h = v
            .as_object()
            .ok_or_else(|| bad(here.clone(), "not an object"))?;
        let p = |key: &str| quantile_from(h, key, &here);
        let delta = HistogramDelta {
            count: field(h, "count", &here)?,
            sum: field(h, "sum", &here)?,
            p50: p("p50")?,
            p90: p("p90")?,
            p99: p("p99")?,
        };
        f.histograms.insert(k.clone(), delta);
    }
    f.prefix_cache_hit_rate = optional(o.get("prefix_cache_hit_rate"), || {
        format!("{at}prefix_cache_hit_rate")
    })?;
    let series = object(o, "series", at)?;
    let list = |v: Option<&Value>, here: String| -> Result<Vec<Option<f64>>, ReadError> {
        let items = v
            .and_then(Value::as_array)
            .ok_or_else(|| bad(here.clone(), "missing or not a list"))?;
        items
            .iter()
            .map(|x| optional(Some(x), || here.clone()))
            .collect()
    };
    let t = list(series.get("t_s"), format!("{at}series.t_s"))?;
    let mut gauges = BTreeMap::new();
    for (k, v) in object(series, "gauges", &format!("{at}series."))? {
        let values = list(Some(v), format!("{at}series.gauges.{k}"))?;
        if values.len() != t.len() {
            return Err(bad(
                format!("{at}series.gauges.{k}"),
                "not one value per sample",
            ));
        }
        gauges.insert(k.clone(), values);
    }
    for (k, stats) in f.gauges.iter_mut() {
        if stats.samples == usize::MAX {
            // The samples during the run: the series' values but the first and the last.
            let values = gauges.get(k).map_or(&[][..], Vec::as_slice);
            let during = values.get(1..values.len().saturating_sub(1)).unwrap_or(&[]);
            stats.samples = during.iter().flatten().count();
        }
    }
    f.series = Series {
        t: t.into_iter().map(|t| t.unwrap_or(f64::NAN)).collect(),
        gauges,
        ..Series::default()
    };
    Ok(EndpointMetrics {
        url: url.to_string(),
        scrapes: count("scrapes")? as usize,
        failed: count("failed_scrapes")? as usize,
        figures: f,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures() -> Figures {
        let mut f = Figures::default();
        f.counters.insert(vllm::REQUEST_SUCCESS.into(), 24.0);
        f.counters.insert("odd".into(), 0.1 + 0.2);
        f.went_down
            .insert("x".into(), WentDown { from: 9.0, to: 1.0 });
        f.gauges.insert(
            vllm::RUNNING.into(),
            GaugeStats {
                min: 0.0,
                mean: 1.25,
                max: 4.0,
                samples: 4,
            },
        );
        f.histograms.insert(
            vllm::TTFT.into(),
            HistogramDelta {
                count: 24.0,
                sum: 0.7,
                p50: Some(Quantile {
                    bucket: Some((0.02, 0.04)),
                    value: Some(0.03),
                }),
                p90: None,
                p99: Some(Quantile {
                    bucket: Some((0.04, f64::INFINITY)),
                    value: None,
                }),
            },
        );
        f.prefix_cache_hit_rate = Some(0.4);
        f.series = Series {
            t: vec![-0.01, 0.5, 1.0],
            gauges: [(vllm::RUNNING.to_string(), vec![Some(0.0), None, Some(4.0)])].into(),
            ..Series::default()
        };
        f
    }

    #[test]
    fn llama_cpp_s_names_fill_the_rows_vllm_s_would() {
        use crate::server_metrics::exposition::parse;
        use crate::server_metrics::window::Sample;
        let text = |prompt: u64, cached: u64, predicted: u64, processing: u64| {
            format!(
                "# TYPE llamacpp:prompt_tokens_total counter\n\
                 llamacpp:prompt_tokens_total {prompt}\n\
                 # TYPE llamacpp:prompt_tokens_cached_total counter\n\
                 llamacpp:prompt_tokens_cached_total {cached}\n\
                 # TYPE llamacpp:prompt_seconds_total counter\n\
                 llamacpp:prompt_seconds_total {}\n\
                 # TYPE llamacpp:tokens_predicted_total counter\n\
                 llamacpp:tokens_predicted_total {predicted}\n\
                 # TYPE llamacpp:tokens_predicted_seconds_total counter\n\
                 llamacpp:tokens_predicted_seconds_total {}\n\
                 # TYPE llamacpp:requests_processing gauge\n\
                 llamacpp:requests_processing {processing}\n\
                 # TYPE llamacpp:requests_deferred gauge\n\
                 llamacpp:requests_deferred 0\n",
                prompt as f64 / 100.0,
                predicted as f64 / 20.0
            )
        };
        let at = std::time::Instant::now();
        let sample = |t: String| Sample {
            at,
            scrape: parse(&t).unwrap(),
        };
        let samples = [
            sample(text(1000, 50, 400, 0)),
            sample(text(1100, 70, 440, 3)),
            sample(text(1150, 75, 460, 4)),
            sample(text(1200, 78, 480, 2)),
            sample(text(1300, 80, 500, 0)),
        ];
        let e = EndpointMetrics {
            url: "http://llama/metrics".into(),
            scrapes: 5,
            failed: 0,
            figures: Figures::of(&samples, at).unwrap(),
        };
        let mut block_text = String::new();
        block(&mut block_text, &e, None, None);
        let has = |line: &str| assert!(block_text.contains(line), "{line}\n{block_text}");
        has("Prompt tokens:                           330");
        has("Cached prompt tokens:                    30");
        has("Generation tokens:                       100");
        has("Prefill throughput, batched (tok/s):     100.00");
        // Issue 36: 132.9 read as "per request" where each of 4 requests prefilled at 33.3.
        assert!(
            !block_text.contains("Prefill speed per request"),
            "{block_text}"
        );
        has("Decode speed per request (tok/s):        20.00");
        // Of the three samples during the run (before and after it, nothing runs).
        has("Running requests (peak / mean):          4.00 / 3.00");
        has("Waiting requests (peak / mean):          0.00 / 0.00");
        assert!(!block_text.contains("Successful requests"), "{block_text}");
    }

    fn endpoint_of(figures: Figures, scrapes: usize) -> EndpointMetrics {
        EndpointMetrics {
            url: "http://s/metrics".into(),
            scrapes,
            failed: 0,
            figures,
        }
    }

    #[test]
    fn running_requests_0_with_50_in_flight_from_3_scrapes_says_too_few_samples() {
        // Issue 36: a short run scraped 3 times (before, once during, after) printed
        // `Running requests (peak / mean): 0.00 / 0.00` with 50 requests in flight: the one
        // sample during the run fell between its requests' arrivals.
        use crate::server_metrics::exposition::parse;
        use crate::server_metrics::window::Sample;
        let at = std::time::Instant::now();
        let running = |n: u32| Sample {
            at,
            scrape: parse(&format!(
                "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running {n}\n"
            ))
            .unwrap(),
        };
        let three = [running(0), running(0), running(0)];
        let mut text = String::new();
        block(
            &mut text,
            &endpoint_of(Figures::of(&three, at).unwrap(), 3),
            None,
            None,
        );
        assert!(
            text.contains(
                "Running requests (peak / mean):          too few samples (1 during the run, 3 \
                 needed; lower --server-metrics-interval)"
            ),
            "{text}"
        );
        assert!(!text.contains("0.00 / 0.00"), "{text}");
        // Enough samples during the run: the level, without the idle ones around it.
        let six = [0, 50, 50, 40, 10, 0].map(running);
        let mut text = String::new();
        block(
            &mut text,
            &endpoint_of(Figures::of(&six, at).unwrap(), 6),
            None,
            None,
        );
        assert!(
            text.contains("Running requests (peak / mean):          50.00 / 37.50"),
            "{text}"
        );
    }

    #[test]
    fn prefill_percentiles_contradicting_the_mean_print_the_bucket_not_a_number() {
        // Issue 36: `Server prefill time mean/p50/p99 (ms): 20.00 / 150.00 / 297.00` when
        // every prefill took 20 ms and vLLM's first prefill bucket ends at 300 ms.
        use crate::server_metrics::exposition::parse;
        use crate::server_metrics::window::Sample;
        let at = std::time::Instant::now();
        let scrape = |n: u32| {
            let bounds = ["0.3", "0.5", "0.8", "1.0", "+Inf"];
            let mut t = String::from("# TYPE vllm:request_prefill_time_seconds histogram\n");
            for le in bounds {
                t += &format!("vllm:request_prefill_time_seconds_bucket{{le=\"{le}\"}} {n}\n");
            }
            t += &format!("vllm:request_prefill_time_seconds_count {n}\n");
            t += &format!(
                "vllm:request_prefill_time_seconds_sum {}\n",
                n as f64 * 0.02
            );
            Sample {
                at,
                scrape: parse(&t).unwrap(),
            }
        };
        let figures = Figures::of(&[scrape(0), scrape(24)], at).unwrap();
        let e = endpoint_of(figures, 2);
        let mut text = String::new();
        block(&mut text, &e, None, None);
        assert!(
            text.contains("Server prefill time mean/p50/p99 (ms):   20.00 / <= 300 / <= 300"),
            "{text}"
        );
        assert!(
            text.contains("(a range is the server's histogram bucket"),
            "{text}"
        );
        // The result file: no value, the bucket in seconds.
        let doc: Value = serde_json::from_str(
            &to_json(&ServerMetrics {
                endpoints: vec![e],
                notes: Vec::new(),
            })
            .to_json_string(),
        )
        .unwrap();
        let h = &doc[KEY]["histograms"]["vllm:request_prefill_time_seconds"];
        assert_eq!(h["p50"], Value::Null, "{h}");
        assert_eq!(h["p99_bucket"], serde_json::json!([0.0, 0.3]), "{h}");
        assert_eq!(bucket_ms(0.3, 0.5), "300-500");
        assert_eq!(bucket_ms(10.0, f64::INFINITY), "> 10000");
        assert_eq!(bucket_ms(0.0, 0.0025), "<= 2.5");
    }

    #[test]
    fn the_saved_key_reads_back_as_it_was() {
        let e = |url: &str| EndpointMetrics {
            url: url.into(),
            scrapes: 3,
            failed: 1,
            figures: figures(),
        };
        let metrics = ServerMetrics {
            endpoints: vec![e("http://a/metrics"), e("http://b/metrics")],
            notes: Vec::new(),
        };
        let text = to_json(&metrics).to_json_string();
        let doc: Value = serde_json::from_str(&text).unwrap();
        let back = from_json(&doc[KEY]).unwrap().expect("figures");
        assert_eq!(back.endpoints.len(), 2);
        for (a, b) in back.endpoints.iter().zip(&metrics.endpoints) {
            assert_eq!(a.url, b.url);
            assert_eq!((a.scrapes, a.failed), (b.scrapes, b.failed));
            assert_eq!(a.figures, b.figures, "exact, floats included");
        }
        let none = to_json(&ServerMetrics::default()).to_json_string();
        let none: Value = serde_json::from_str(&none).unwrap();
        assert!(from_json(&none[KEY]).unwrap().is_none());
    }

    #[test]
    fn an_edited_key_is_one_error_naming_where() {
        let text = to_json(&ServerMetrics {
            endpoints: vec![EndpointMetrics {
                url: "u".into(),
                scrapes: 2,
                failed: 0,
                figures: figures(),
            }],
            notes: Vec::new(),
        })
        .to_json_string();
        let mut doc: Value = serde_json::from_str(&text).unwrap();
        doc[KEY]["counters"]["odd"] = Value::from("many");
        let e = from_json(&doc[KEY]).unwrap_err().to_string();
        assert!(e.contains("counters.odd: not a number"), "{e}");
        doc[KEY]["series"]["gauges"][vllm::RUNNING] = Value::from(vec![1.0]);
        doc[KEY]["counters"]["odd"] = Value::from(1.0);
        let e = from_json(&doc[KEY]).unwrap_err().to_string();
        assert!(e.contains("not one value per sample"), "{e}");
        assert!(from_json(&Value::from(3)).is_err());
    }
}
