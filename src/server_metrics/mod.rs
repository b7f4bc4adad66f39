//! The server's side of a run: its Prometheus `/metrics` (vLLM's, and any other endpoint
//! named with `--server-metrics-url`) scraped before, during and after the measured
//! window, and this run's share of it: counter deltas, gauge spreads, histogram deltas
//! with bucket-interpolated percentiles, the prefix-cache hit rate.
//!
//! [`exposition`] reads the text format, [`window`] works out the figures, [`scrape`] runs
//! the scrape threads. Rendering is `output::server_metrics`'.

pub mod exposition;
pub mod scrape;
pub mod window;

pub use scrape::{
    EndpointMetrics, HttpSource, Options, ScrapeError, Scraper, ServerMetrics, Source, SourceError,
};
pub use window::{Figures, GaugeStats, HistogramDelta, Series, WentDown};

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
