//! The server's side of a run: its Prometheus `/metrics` (vLLM's, and any other endpoint
//! named with `--server-metrics-url`) scraped before, during and after the measured
//! window, and this run's share of it: counter deltas, gauge spreads, histogram deltas
//! with percentiles no finer than the buckets, the prefix-cache hit rate.
//!
//! [`exposition`] reads the text format, [`window`] works out the figures, [`scrape`] runs
//! the scrape threads. Rendering is `output::server_metrics`'.
//!
//! Every metric a server exposes is kept; the figures shown by name are vLLM's, and where
//! llama.cpp (`llama-server --metrics`) has the same figure under its own name, that one
//! (the `llamacpp` names and the [`RUNNING`]-style lists below).

pub mod exposition;
pub mod gpu;
pub mod scrape;
pub mod window;

pub use gpu::GpuTelemetry;
pub use scrape::{
    EndpointMetrics, HttpSource, LatestScrape, Options, ScrapeError, Scraper, ServerMetrics,
    Source, SourceError,
};
pub use window::{Figures, GaugeStats, HistogramDelta, Quantile, Series, WentDown};

/// vLLM 0.33's names of the figures the console shows.
pub mod vllm {
    pub const REQUEST_SUCCESS: &str = "vllm:request_success";
    pub const PROMPT_TOKENS: &str = "vllm:prompt_tokens";
    pub const GENERATION_TOKENS: &str = "vllm:generation_tokens";
    pub const PROMPT_TOKENS_CACHED: &str = "vllm:prompt_tokens_cached";
    pub const PREFIX_CACHE_QUERIES: &str = super::window::PREFIX_CACHE_QUERIES;
    pub const PREFIX_CACHE_HITS: &str = super::window::PREFIX_CACHE_HITS;
    pub const NUM_PREEMPTIONS: &str = "vllm:num_preemptions";
    pub const RUNNING: &str = "vllm:num_requests_running";
    pub const WAITING: &str = "vllm:num_requests_waiting";
    pub const KV_CACHE_USAGE: &str = "vllm:kv_cache_usage_perc";
    pub const TTFT: &str = "vllm:time_to_first_token_seconds";
    pub const QUEUE_TIME: &str = "vllm:request_queue_time_seconds";
    pub const PREFILL_TIME: &str = "vllm:request_prefill_time_seconds";
    pub const DECODE_TIME: &str = "vllm:request_decode_time_seconds";
    pub const E2E_LATENCY: &str = "vllm:e2e_request_latency_seconds";
    pub const INTER_TOKEN_LATENCY: &str = "vllm:inter_token_latency_seconds";
}

/// llama.cpp's names (`llama-server --metrics`, build b1-0c1e570 of llama-cpp-python
/// 0.3.36): counters and gauges only, no histograms, no request counter.
pub mod llamacpp {
    /// Prompt tokens evaluated, the cached ones excluded (vLLM's `prompt_tokens` counts all).
    pub const PROMPT_TOKENS: &str = "llamacpp:prompt_tokens";
    pub const PROMPT_TOKENS_CACHED: &str = "llamacpp:prompt_tokens_cached";
    /// Seconds spent on prompts, summed over the slots.
    pub const PROMPT_SECONDS: &str = "llamacpp:prompt_seconds";
    pub const TOKENS_PREDICTED: &str = "llamacpp:tokens_predicted";
    /// Seconds spent generating, summed over the slots.
    pub const TOKENS_PREDICTED_SECONDS: &str = "llamacpp:tokens_predicted_seconds";
    pub const REQUESTS_PROCESSING: &str = "llamacpp:requests_processing";
    pub const REQUESTS_DEFERRED: &str = "llamacpp:requests_deferred";
    /// Older builds only.
    pub const KV_CACHE_USAGE_RATIO: &str = "llamacpp:kv_cache_usage_ratio";
}

/// The running-requests gauge by its names on the servers we know, vLLM's first (the
/// console block and the timeline show the first the server has).
pub const RUNNING: &[&str] = &[vllm::RUNNING, llamacpp::REQUESTS_PROCESSING];
/// The waiting-requests gauge (llama.cpp: requests deferred for want of a free slot).
pub const WAITING: &[&str] = &[vllm::WAITING, llamacpp::REQUESTS_DEFERRED];
/// The KV-cache usage gauge, a fraction of 1.
pub const KV_CACHE_USAGE: &[&str] = &[vllm::KV_CACHE_USAGE, llamacpp::KV_CACHE_USAGE_RATIO];
