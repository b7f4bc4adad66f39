//! The per-replica block (`--base-url` repeated): how many requests each replica got, how
//! many failed, and its TTFT and ITL p50/p99, so a slow or failing replica is seen instead of
//! being averaged away; printed after our block and saved under `vllm_bench_replicas`.

use std::fmt::Write as _;

use super::console::centred;
use super::json::{Json, JsonObject};
use super::run_result::Section;
use crate::metrics::stats::{picked, Pick};
use crate::metrics::RequestOutput;

/// The result document's key.
pub const KEY: &str = "vllm_bench_replicas";

/// One replica's share of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplicaStats {
    pub url: String,
    pub requests: usize,
    pub failed: usize,
    /// Over its successful requests, in ms; `None` without any (a dead replica has no
    /// latency, not a latency of 0).
    pub ttft_p50_ms: Option<f64>,
    pub ttft_p99_ms: Option<f64>,
    pub itl_p50_ms: Option<f64>,
    pub itl_p99_ms: Option<f64>,
}

/// Each replica's figures: `urls[r]` is replica `r`; `outputs[i]` went to replica
/// `replicas[i]` (a live run's records, or a merge's shard columns).
pub fn of(
    urls: &[String],
    outputs: &[RequestOutput],
    replicas: impl IntoIterator<Item = u16>,
) -> Vec<ReplicaStats> {
    // Each replica's requests, in order: its gaps are read in place, per replica, never
    // copied out (they are most of what a run holds; `metrics::itl`).
    let replicas: Vec<u16> = replicas.into_iter().take(outputs.len()).collect();
    let mut order: Vec<u32> = (0..replicas.len() as u32).collect();
    order.sort_by_key(|&i| replicas[i as usize]);
    let mut rest = order.as_slice();
    urls.iter()
        .enumerate()
        .map(|(r, url)| {
            let n = rest.partition_point(|&i| usize::from(replicas[i as usize]) <= r);
            let (mine, after) = rest.split_at(n);
            rest = after;
            let ok = || {
                mine.iter()
                    .map(|&i| &outputs[i as usize])
                    .filter(|o| o.success)
            };
            let successful = ok().count();
            let ttft = p50_p99(successful, || ok().map(|o| o.ttft * 1000.0));
            let gaps = ok().map(|o| o.itl.len()).sum();
            let itl = p50_p99(gaps, || ok().flat_map(|o| o.itl.iter().map(|s| s * 1000.0)));
            ReplicaStats {
                url: url.clone(),
                requests: mine.len(),
                failed: mine.len() - successful,
                ttft_p50_ms: ttft.map(|p| p[0]),
                ttft_p99_ms: ttft.map(|p| p[1]),
                itl_p50_ms: itl.map(|p| p[0]),
                itl_p99_ms: itl.map(|p| p[1]),
            }
        })
        .collect()
}

/// The 50th and 99th percentiles of `n` values; `None` without any.
fn p50_p99<I: Iterator<Item = f64>>(n: usize, values: impl Fn() -> I) -> Option<[f64; 2]> {
    (n > 0).then(|| {
        let found = picked(
            values,
            &[Pick::percentile(n, 50.0), Pick::percentile(n, 99.0)],
        );
        [found[0], found[1]]
    })
}

/// The console block and the JSON key; an empty section with one server.
pub fn section(stats: &[ReplicaStats]) -> Section {
    if stats.len() < 2 {
        return Section::default();
    }
    let mut out = String::new();
    centred(&mut out, " Replicas ", '=');
    let _ = writeln!(
        out,
        "{:<4}{:>9}{:>8}{:>10}{:>10}{:>9}{:>9}  URL",
        "#", "Requests", "Failed", "TTFT p50", "TTFT p99", "ITL p50", "ITL p99"
    );
    // `-` where a replica answered no request successfully (or streamed one token only).
    let ms = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.2}"));
    for (r, s) in stats.iter().enumerate() {
        let _ = writeln!(
            out,
            "{:<4}{:>9}{:>8}{:>10}{:>10}{:>9}{:>9}  {}",
            r,
            s.requests,
            s.failed,
            ms(s.ttft_p50_ms),
            ms(s.ttft_p99_ms),
            ms(s.itl_p50_ms),
            ms(s.itl_p99_ms),
            s.url
        );
    }
    let _ = writeln!(
        out,
        "(TTFT and ITL in ms, over each replica's successful requests)"
    );
    let list = stats
        .iter()
        .map(|s| {
            let mut o = JsonObject::new();
            o.set("url", Json::str(s.url.clone()));
            o.set("requests", Json::UInt(s.requests as u64));
            o.set("failed", Json::UInt(s.failed as u64));
            // `null` without a successful request.
            o.set("p50_ttft_ms", Json::opt(s.ttft_p50_ms, Json::Float));
            o.set("p99_ttft_ms", Json::opt(s.ttft_p99_ms, Json::Float));
            o.set("p50_itl_ms", Json::opt(s.itl_p50_ms, Json::Float));
            o.set("p99_itl_ms", Json::opt(s.itl_p99_ms, Json::Float));
            Json::Object(o)
        })
        .collect();
    let mut json = JsonObject::new();
    json.set(KEY, Json::List(list));
    Section { console: out, json }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output(success: bool, ttft: f64, itl: &[f64]) -> RequestOutput {
        RequestOutput {
            success,
            ttft,
            itl: itl.to_vec().into(),
            ..RequestOutput::default()
        }
    }

    #[test]
    fn each_replica_counts_its_own_requests_failures_and_latencies() {
        let urls = ["http://a:1".to_string(), "http://b:2".to_string()];
        let outputs = [
            output(true, 0.010, &[0.001, 0.003]),
            output(false, 0.0, &[]),
            output(true, 0.030, &[0.002]),
        ];
        let s = of(&urls, &outputs, [0, 1, 0]);
        assert_eq!((s[0].requests, s[0].failed), (2, 0));
        assert_eq!((s[1].requests, s[1].failed), (1, 1));
        assert!((s[0].ttft_p50_ms.unwrap() - 20.0).abs() < 1e-9);
        assert!((s[0].itl_p50_ms.unwrap() - 2.0).abs() < 1e-9);
        let block = section(&s);
        assert!(block.console.contains("http://b:2"), "{}", block.console);
        assert!(section(&s[..1]).console.is_empty(), "one server: no block");
    }

    #[test]
    fn a_dead_replicas_row_shows_a_dash_not_ttft_p50_0() {
        // Issue 36: replica 1 answered nothing; its row read `TTFT p50 0.00`.
        let urls = ["http://a:1".to_string(), "http://dead:2".to_string()];
        let outputs = [output(true, 0.010, &[0.001]), output(false, 0.0, &[])];
        let s = of(&urls, &outputs, [0, 1]);
        assert_eq!(s[1].ttft_p50_ms, None);
        let block = section(&s);
        let row = block
            .console
            .lines()
            .find(|l| l.ends_with("http://dead:2"))
            .unwrap();
        assert_eq!(
            row.split_whitespace().collect::<Vec<_>>(),
            ["1", "1", "1", "-", "-", "-", "-", "http://dead:2"]
        );
        let json = block.json.to_json_string();
        assert!(json.contains("\"p50_ttft_ms\": null"), "{json}");
    }
}
