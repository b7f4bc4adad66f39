//! Metrics: per-request outcomes (the engine's output) and the Python-exact calculator.
//!
//! `stats` (numpy-exact statistics) → `summary` (one metric's mean/median/std/percentiles)
//! → `calculator` (Python's `calculate_metrics*`, with `goodput` and `peaks`) → `report`
//! (the run's metrics plus what the printers show). Our additions: `steady_state` (the
//! plateau of a closed-loop run) and `comparison` (saved results against a baseline).

pub mod agentic;
pub mod calculator;
pub mod comparison;
pub mod goodput;
pub mod itl;
pub mod metric_stats;
pub mod peaks;
pub mod probe;
pub mod report;
pub mod stats;
pub mod steady_state;

/// The outcome of one request, field for field Python's `RequestFuncOutput`.
///
/// Times are seconds (`f64`) because that is what Python's arithmetic runs on, and exact
/// parity with `vllm bench serve` needs the same inputs in the same representation.
/// `start_time` is seconds since the run's monotonic epoch (Python: raw `perf_counter()`).
#[derive(Debug, Clone, PartialEq)]
pub struct RequestOutput {
    pub generated_text: String,
    pub success: bool,
    pub latency: f64,
    /// `usage.completion_tokens`; 0 when the server sent none (the calculator re-tokenizes).
    pub output_tokens: u64,
    pub ttft: f64,
    /// The inter-token gaps, seconds (a live run's: a range of its worker's arena).
    pub itl: itl::Itl,
    pub prompt_len: u64,
    pub error: String,
    pub start_time: f64,
    /// Time from the request's arrival (its scheduled release) to its send, seconds.
    pub client_queue_time: f64,
    /// Inputs the request carried (Python's `num_input_sequences`: the texts of a batched
    /// pooling request, the documents of a rerank request; 1 otherwise).
    pub input_sequences: u64,
    /// Ours, not Python's: time to first output token, seconds, the first token that is not
    /// reasoning (equal to `ttft` for a server that sends no reasoning). `None` for a failed
    /// request and for one whose tokens were all reasoning.
    pub ttfo: Option<f64>,
    /// Ours: the server's count of reasoning tokens among `output_tokens`, when it gives one.
    pub reasoning_tokens: Option<u64>,
}

impl Default for RequestOutput {
    fn default() -> Self {
        RequestOutput {
            generated_text: String::new(),
            success: false,
            latency: 0.0,
            output_tokens: 0,
            ttft: 0.0,
            itl: itl::Itl::default(),
            prompt_len: 0,
            error: String::new(),
            start_time: 0.0,
            client_queue_time: 0.0,
            input_sequences: 1,
            ttfo: None,
            reasoning_tokens: None,
        }
    }
}
