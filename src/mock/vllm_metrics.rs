//! The mock's `/metrics` as vLLM 0.33 spells it (`vllm/v1/metrics/loggers.py`), so the
//! server-metrics scrape is tested without a GPU: token and request counters, the
//! running / waiting / KV-cache gauges, and the request-phase histograms with vLLM's bucket
//! bounds (`vllm/v1/metrics/buckets.py`).
//!
//! Counters count since the server started (a `reset_stats` does not zero them, as a real
//! server's survive every benchmark run); a crash that restarts the mock
//! (`MockConfig::crash` with `AfterCrash::Restart`) zeroes them, as a new process starts
//! from zero. Each worker writes its own [`WorkerMetrics`]
//! (inside its cache-line aligned counters); `/metrics` sums them.
//!
//! What the mock's requests stand for: a generation request that ends without an injected
//! fault is one `vllm:request_success{finished_reason="length"}` (the mock always generates
//! `max_tokens`), with its prompt tokens, cached prompt tokens (the toy prefix cache's hits)
//! and generated tokens; its time to first token is its first chunk's deadline, all of it
//! prefill (the mock has no queue: queue time 0, `vllm:num_requests_waiting` 0); its decode
//! time runs to the last chunk, spread evenly over `tokens - 1` inter-token latencies. The
//! KV cache fills with the load: [`KV_SEQS`] running requests fill it.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// `vllm:time_to_first_token_seconds`' bounds.
const TTFT_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];
/// `vllm:inter_token_latency_seconds`' bounds.
const ITL_BUCKETS: &[f64] = &[
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
];
/// The request-phase histograms' bounds (e2e, queue, prefill, decode).
const LATENCY_BUCKETS: &[f64] = &[
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
];

/// Running requests that fill the toy KV cache.
pub const KV_SEQS: u64 = 256;

/// The histograms, in [`HISTOGRAMS`]' order.
const TTFT: usize = 0;
const QUEUE: usize = 1;
const PREFILL: usize = 2;
const DECODE: usize = 3;
const E2E: usize = 4;
const ITL: usize = 5;

/// Name, help and bounds of each histogram.
const HISTOGRAMS: [(&str, &str, &[f64]); 6] = [
    (
        "vllm:time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        TTFT_BUCKETS,
    ),
    (
        "vllm:request_queue_time_seconds",
        "Histogram of time spent in WAITING phase for request.",
        LATENCY_BUCKETS,
    ),
    (
        "vllm:request_prefill_time_seconds",
        "Histogram of time spent in PREFILL phase for request.",
        LATENCY_BUCKETS,
    ),
    (
        "vllm:request_decode_time_seconds",
        "Histogram of time spent in DECODE phase for request.",
        LATENCY_BUCKETS,
    ),
    (
        "vllm:e2e_request_latency_seconds",
        "Histogram of e2e request latency in seconds.",
        LATENCY_BUCKETS,
    ),
    (
        "vllm:inter_token_latency_seconds",
        "Histogram of inter-token latency in seconds.",
        ITL_BUCKETS,
    ),
];

/// One histogram's per-bucket (not cumulative) counts, the last for `+Inf`.
#[derive(Debug)]
struct Hist {
    counts: Box<[AtomicU64]>,
    sum_ns: AtomicU64,
}

impl Hist {
    fn new(bounds: &[f64]) -> Hist {
        Hist {
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_ns: AtomicU64::new(0),
        }
    }

    /// `n` observations of `d`.
    fn observe(&self, bounds: &[f64], d: Duration, n: u64) {
        let s = d.as_secs_f64();
        let i = bounds.iter().position(|&b| s <= b).unwrap_or(bounds.len());
        self.counts[i].fetch_add(n, Relaxed);
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.sum_ns.fetch_add(ns.saturating_mul(n), Relaxed);
    }
}

/// One worker's share of the counters and histograms.
#[derive(Debug)]
pub struct WorkerMetrics {
    prompt_tokens: AtomicU64,
    prompt_tokens_cached: AtomicU64,
    generation_tokens: AtomicU64,
    success_length: AtomicU64,
    hists: [Hist; 6],
}

impl Default for WorkerMetrics {
    fn default() -> Self {
        WorkerMetrics {
            prompt_tokens: AtomicU64::new(0),
            prompt_tokens_cached: AtomicU64::new(0),
            generation_tokens: AtomicU64::new(0),
            success_length: AtomicU64::new(0),
            hists: HISTOGRAMS.map(|(_, _, b)| Hist::new(b)),
        }
    }
}

impl WorkerMetrics {
    /// Tokens this worker generated so far.
    pub fn generated_tokens(&self) -> u64 {
        self.generation_tokens.load(Relaxed)
    }
}

/// A generation request that ended without a fault.
#[derive(Debug, Clone, Copy)]
pub struct Finished {
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    pub generated_tokens: u64,
    pub arrival: Instant,
    pub first_token: Instant,
    pub end: Instant,
}

impl WorkerMetrics {
    /// Back to zero: the server restarted. Requests finishing on another worker meanwhile
    /// may land before or after, as they would around a real restart.
    pub fn reset(&self) {
        for c in [
            &self.prompt_tokens,
            &self.prompt_tokens_cached,
            &self.generation_tokens,
            &self.success_length,
        ] {
            c.store(0, Relaxed);
        }
        for h in &self.hists {
            h.counts.iter().for_each(|c| c.store(0, Relaxed));
            h.sum_ns.store(0, Relaxed);
        }
    }

    /// Counts a finished generation request.
    pub fn finished(&self, f: &Finished) {
        self.prompt_tokens.fetch_add(f.prompt_tokens, Relaxed);
        self.prompt_tokens_cached
            .fetch_add(f.cached_tokens, Relaxed);
        self.generation_tokens
            .fetch_add(f.generated_tokens, Relaxed);
        self.success_length.fetch_add(1, Relaxed);
        let ttft = f.first_token.saturating_duration_since(f.arrival);
        let decode = f.end.saturating_duration_since(f.first_token);
        let e2e = f.end.saturating_duration_since(f.arrival);
        let obs = [
            (TTFT, ttft),
            (QUEUE, Duration::ZERO),
            (PREFILL, ttft),
            (DECODE, decode),
            (E2E, e2e),
        ];
        for (h, d) in obs {
            self.hists[h].observe(HISTOGRAMS[h].2, d, 1);
        }
        let gaps = f.generated_tokens.saturating_sub(1);
        if gaps > 0 {
            let itl = decode / u32::try_from(gaps).unwrap_or(u32::MAX);
            self.hists[ITL].observe(HISTOGRAMS[ITL].2, itl, gaps);
        }
    }
}

/// Writes the whole exposition: `running` requests now, `prefix` = the toy prefix cache's
/// `(queries, hits)`, `workers` summed.
pub fn render<'a>(
    out: &mut Vec<u8>,
    model_label: &str,
    running: u64,
    prefix: (u64, u64),
    workers: impl Iterator<Item = &'a WorkerMetrics> + Clone,
) {
    // vLLM adds `engine="N"`; the mock is one engine and keeps the label set it always had.
    let labels = format!("model_name=\"{model_label}\"");
    let kv = (running as f64 / KV_SEQS as f64).min(1.0);
    let gauges: [(&str, &str, f64); 3] = [
        (
            "vllm:num_requests_running",
            "Number of requests in model execution batches.",
            running as f64,
        ),
        (
            "vllm:num_requests_waiting",
            "Number of requests waiting to be processed.",
            0.0,
        ),
        (
            "vllm:kv_cache_usage_perc",
            "KV-cache usage. 1 means 100 percent usage.",
            kv,
        ),
    ];
    for (name, help, v) in gauges {
        let _ = write!(
            out,
            "# HELP {name} {help}\n# TYPE {name} gauge\n{name}{{{labels}}} {v:?}\n"
        );
    }
    let sum = |f: fn(&WorkerMetrics) -> &AtomicU64| {
        workers.clone().map(|w| f(w).load(Relaxed)).sum::<u64>()
    };
    let counters: [(&str, &str, u64); 6] = [
        (
            "vllm:prefix_cache_queries",
            "Prefix cache queries, in terms of number of queried tokens.",
            prefix.0,
        ),
        (
            "vllm:prefix_cache_hits",
            "Prefix cache hits, in terms of number of cached tokens.",
            prefix.1,
        ),
        (
            "vllm:num_preemptions",
            "Cumulative number of preemption from the engine.",
            0,
        ),
        (
            "vllm:prompt_tokens",
            "Number of prefill tokens processed.",
            sum(|w| &w.prompt_tokens),
        ),
        (
            "vllm:prompt_tokens_cached",
            "Number of cached prompt tokens (local + external).",
            sum(|w| &w.prompt_tokens_cached),
        ),
        (
            "vllm:generation_tokens",
            "Number of generation tokens processed.",
            sum(|w| &w.generation_tokens),
        ),
    ];
    for (name, help, v) in counters {
        let _ = write!(
            out,
            "# HELP {name}_total {help}\n# TYPE {name}_total counter\n{name}_total{{{labels}}} {:?}\n",
            v as f64
        );
    }
    let name = "vllm:request_success_total";
    let _ = write!(
        out,
        "# HELP {name} Count of successfully processed requests.\n# TYPE {name} counter\n"
    );
    for (reason, n) in [
        ("stop", 0),
        ("length", sum(|w| &w.success_length)),
        ("abort", 0),
    ] {
        let _ = writeln!(
            out,
            "{name}{{{labels},finished_reason=\"{reason}\"}} {:?}",
            n as f64
        );
    }
    for (h, (name, help, bounds)) in HISTOGRAMS.iter().enumerate() {
        let _ = write!(out, "# HELP {name} {help}\n# TYPE {name} histogram\n");
        let mut cumulative = 0u64;
        for (i, le) in bounds
            .iter()
            .map(|b| format!("{b:?}"))
            .chain(["+Inf".to_string()])
            .enumerate()
        {
            cumulative += workers
                .clone()
                .map(|w| w.hists[h].counts[i].load(Relaxed))
                .sum::<u64>();
            let _ = writeln!(
                out,
                "{name}_bucket{{{labels},le=\"{le}\"}} {:?}",
                cumulative as f64
            );
        }
        let sum_ns: u64 = workers
            .clone()
            .map(|w| w.hists[h].sum_ns.load(Relaxed))
            .sum();
        let _ = write!(
            out,
            "{name}_count{{{labels}}} {:?}\n{name}_sum{{{labels}}} {:?}\n",
            cumulative as f64,
            sum_ns as f64 / 1e9
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finished_request_lands_in_vllm_s_buckets() {
        let w = WorkerMetrics::default();
        let t0 = Instant::now();
        w.finished(&Finished {
            prompt_tokens: 10,
            cached_tokens: 0,
            generated_tokens: 5,
            arrival: t0,
            first_token: t0 + Duration::from_millis(30),
            end: t0 + Duration::from_millis(70),
        });
        let mut out = Vec::new();
        render(&mut out, "m", 2, (10, 0), std::iter::once(&w));
        let text = String::from_utf8(out).unwrap();
        let has = |line: &str| assert!(text.contains(line), "{line}\n{text}");
        has("vllm:prompt_tokens_total{model_name=\"m\"} 10.0\n");
        has("vllm:generation_tokens_total{model_name=\"m\"} 5.0\n");
        has("vllm:request_success_total{model_name=\"m\",finished_reason=\"length\"} 1.0\n");
        has("vllm:time_to_first_token_seconds_bucket{model_name=\"m\",le=\"0.02\"} 0.0\n");
        has("vllm:time_to_first_token_seconds_bucket{model_name=\"m\",le=\"0.04\"} 1.0\n");
        has("vllm:inter_token_latency_seconds_count{model_name=\"m\"} 4.0\n");
        has("vllm:num_requests_running{model_name=\"m\"} 2.0\n");
    }
}
