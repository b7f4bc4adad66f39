//! The flags themselves: one clap `Args` struct per `--help` group, with Python's names,
//! defaults and value forms (`vllm/benchmarks/serve.py` `add_cli_args` and the dataset
//! parser), the vllm-bench reference's additions, and our engine flags.
//!
//! Values are kept close to what was typed: numbers are parsed here (with Python's number
//! rules), but structured values (JSON, `KEY=VALUE`, comma lists, Python literals) stay strings
//! and are checked by `config`, which owns every rule that needs more than one flag.

use clap::Args;

use super::choices::{SpeedBenchSubset, TraceFormatChoice};
use super::pyvalue::{parse_float, parse_int, parse_port};
use crate::metrics::metric_stats::SLO_METRICS;
use crate::runtime::DriverChoice;
use crate::types::{Backend, DatasetName, LoraAssignment, RampUpStrategy, ReplicaAffinity};

/// Server connection.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Server connection")]
pub struct ServerArgs {
    /// Backend (API) to benchmark
    #[arg(long, value_enum, default_value = "openai")]
    pub backend: Backend,
    /// Server base URL, e.g. https://host:8443/prefix (overrides --host/--port); repeat it, or give @FILE (one URL a line), for several replicas of one model
    #[arg(long, value_name = "URL")]
    pub base_url: Vec<String>,
    /// With several --base-url: round-robin (session i on replica i mod N) or session (sessions whose first requests start alike share a replica)
    #[arg(long, value_enum, default_value = "round-robin", value_name = "MODE")]
    pub replica_affinity: ReplicaAffinity,
    /// Server host
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Server port
    #[arg(long, default_value = "8000", value_parser = parse_port)]
    pub port: u16,
    /// API endpoint path [default: per backend: /v1/completions, /v1/chat/completions, /v1/embeddings, /pooling, /rerank, ...]
    #[arg(long, value_name = "PATH")]
    pub endpoint: Option<String>,
    /// Disable TLS certificate verification (self-signed servers)
    #[arg(long)]
    pub insecure: bool,
    /// Run against an embedded deterministic mock server on loopback (no --host/--base-url)
    #[arg(long)]
    pub mock_server: bool,
    /// With --mock-server: requests the mock serves at once; more wait for a free slot (a
    /// server of known capacity, e.g. for --slo-search) [default: no limit]
    #[arg(long, value_parser = parse_int::<usize>, value_name = "N")]
    pub mock_slots: Option<usize>,
    /// With --mock-server: the mock's chat, Responses and Anthropic streams send their first N
    /// output tokens as reasoning before the answer (to try TTFO: --percentile-metrics ttfo)
    #[arg(long, value_parser = parse_int::<u64>, value_name = "N")]
    pub mock_reasoning_tokens: Option<u64>,
    /// With --mock-reasoning-tokens: the mock pauses this long after its reasoning, before
    /// the answer's first token
    #[arg(long, value_parser = parse_float, value_name = "MS")]
    pub mock_thinking_ms: Option<f64>,
}

/// Model & tokenizer.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Model & tokenizer")]
pub struct ModelArgs {
    /// Model name [default: the first model of the server's /v1/models]
    #[arg(long)]
    pub model: Option<String>,
    /// Model name sent in API requests [default: --model]
    #[arg(long, value_name = "NAME")]
    pub served_model_name: Option<String>,
    /// Tokenizer name or path (HF tokenizer.json, tiktoken, or server-side) [default: --model]
    #[arg(long)]
    pub tokenizer: Option<String>,
    /// Tokenizer mode (auto, hf, slow, mistral, ...)
    #[arg(long, value_name = "MODE", default_value = "auto")]
    pub tokenizer_mode: String,
    /// Accepted for compatibility; no remote code is ever run
    #[arg(long)]
    pub trust_remote_code: bool,
    /// Do not load a tokenizer
    #[arg(long)]
    pub skip_tokenizer_init: bool,
}

/// Dataset: the options every dataset shares, then one group per dataset.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Dataset")]
pub struct DatasetArgs {
    /// Dataset (both '_' and '-' spellings are accepted)
    #[arg(long, value_enum, default_value = "random", value_name = "NAME")]
    pub dataset_name: DatasetName,
    /// Dataset file, directory or HF dataset id
    #[arg(long, value_name = "PATH")]
    pub dataset_path: Option<String>,
    /// Number of prompts (conversations with --multi-turn)
    #[arg(long, default_value = "1000", value_parser = parse_int::<usize>, value_name = "N")]
    pub num_prompts: usize,
    /// Random seed
    #[arg(long, default_value = "0", value_parser = parse_int::<u64>)]
    pub seed: u64,
    /// Input length for any dataset (maps to --random-input-len, ...)
    #[arg(long, value_parser = parse_int::<usize>, value_name = "TOKENS")]
    pub input_len: Option<usize>,
    /// Output length for any dataset (maps to --random-output-len, --hf-output-len, ...)
    #[arg(long, value_parser = parse_int::<usize>, value_name = "TOKENS")]
    pub output_len: Option<usize>,
    /// Drop requests whose prompt_len + output_len exceeds this context length
    #[arg(long, value_parser = parse_int::<usize>, value_name = "TOKENS")]
    pub max_model_len: Option<usize>,
    /// Do not oversample when the dataset has fewer samples than --num-prompts
    #[arg(long)]
    pub no_oversample: bool,
    /// Keep the dataset's order
    #[arg(long)]
    pub disable_shuffle: bool,
    /// Do not load the dataset in streaming mode (Python: Hugging Face datasets only; no
    /// effect on the requests, which always stream)
    #[arg(long)]
    pub no_stream: bool,
    /// Do not apply the chat template for datasets that support it
    #[arg(long)]
    pub skip_chat_template: bool,
    /// Enable the multimodal chat transformation for datasets that support it
    #[arg(long)]
    pub enable_multimodal_chat: bool,
    /// JSON object of kwargs for apply_chat_template when prompts are rendered client-side
    #[arg(long, value_name = "JSON")]
    pub chat_template_kwargs: Option<String>,
    /// Plot prompt/output token distributions
    #[arg(long)]
    pub plot_dataset_stats: bool,

    #[command(flatten)]
    pub random: RandomArgs,
    #[command(flatten)]
    pub random_mm: RandomMmArgs,
    #[command(flatten)]
    pub sharegpt: ShareGptArgs,
    #[command(flatten)]
    pub sonnet: SonnetArgs,
    #[command(flatten)]
    pub speed_bench: SpeedBenchArgs,
    #[command(flatten)]
    pub spec_bench: SpecBenchArgs,
    #[command(flatten)]
    pub hf: HfArgs,
    #[command(flatten)]
    pub custom: CustomArgs,
    #[command(flatten)]
    pub prefix_repetition: PrefixRepetitionArgs,
    #[command(flatten)]
    pub timed_trace: TimedTraceArgs,
    #[command(flatten)]
    pub agentic: AgenticArgs,
}

/// Agentic trace replay (AIPerf's `AGENTIC_REPLAY` timing).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Dataset: agentic_trace")]
pub struct AgenticArgs {
    /// Each lane starts its first tree at a point sampled by time between these fractions of
    /// the tree's span (MIN,MAX; AgentX 0.25,0.75; 0,0 starts every tree at its turn 0)
    #[arg(long, default_value = "0.25,0.75", value_name = "MIN,MAX")]
    pub agentic_start_ratio: String,
    /// Cache-pressure warm-up after the primers: this many zero-delay one-token requests per
    /// lane before profiling starts (AgentX 10)
    #[arg(long, default_value = "0", value_parser = parse_int::<usize>, value_name = "K")]
    pub agentic_warmup_per_lane: usize,
    /// A tree with nothing in flight this long (from its last response) sends its next
    /// request at once (AgentX 300; off by default)
    #[arg(long, value_parser = parse_float, value_name = "SEC")]
    pub agentic_trace_idle_cap: Option<f64>,
    /// Stop the run once at least max(--max-concurrency, 10) profiling requests were answered
    /// and more than this share of them failed (context overflows and cancellations are
    /// neither; AgentX: 0.10; 1 never stops)
    #[arg(long, default_value = "0.1", value_parser = parse_float, value_name = "RATIO")]
    pub agentic_failed_request_threshold: f64,
}

/// The random dataset (also the base of random-mm and random-rerank).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Dataset: random")]
pub struct RandomArgs {
    /// Input tokens per request
    #[arg(long, default_value = "1024", value_parser = parse_int::<usize>, value_name = "TOKENS")]
    pub random_input_len: usize,
    /// Output tokens per request
    #[arg(long, default_value = "128", value_parser = parse_int::<usize>, value_name = "TOKENS")]
    pub random_output_len: usize,
    /// Shared prefix tokens before the random part
    #[arg(long, default_value = "0", value_parser = parse_int::<usize>, value_name = "TOKENS")]
    pub random_prefix_len: usize,
    /// Length jitter in [0, 1): a number, or JSON {"input": R, "output": R}
    #[arg(long, default_value = "0.0", value_name = "RATIO")]
    pub random_range_ratio: String,
    /// Prompts per request (embeddings only)
    #[arg(long, default_value = "1", value_parser = parse_int::<usize>, value_name = "N")]
    pub random_batch_size: usize,
    /// Send prompts as token-id arrays (exact lengths, no server tokenization)
    #[arg(long)]
    pub prompt_token_ids: bool,
    /// random-rerank: the model does not support reranking natively
    #[arg(long)]
    pub no_reranker: bool,
}

/// The random multimodal dataset.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Dataset: random-mm")]
pub struct RandomMmArgs {
    /// Base number of multimodal items per request
    #[arg(long, default_value = "1", value_parser = parse_int::<usize>, value_name = "N")]
    pub random_mm_base_items_per_request: usize,
    /// Range ratio in [0, 1] for the number of items per request
    #[arg(long, default_value = "0.0", value_parser = parse_float, value_name = "RATIO")]
    pub random_mm_num_mm_items_range_ratio: f64,
    /// Per-modality item caps (JSON)
    #[arg(
        long,
        default_value = r#"{"image": 255, "video": 1}"#,
        value_name = "JSON"
    )]
    pub random_mm_limit_mm_per_prompt: String,
    /// (height, width, frames) -> probability, Python literal syntax
    #[arg(
        long,
        default_value = "{(256, 256, 1): 0.5, (720, 1280, 1): 0.5, (720, 1280, 16): 0.0}",
        value_name = "DICT"
    )]
    pub random_mm_bucket_config: String,
}

/// The ShareGPT dataset.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Dataset: sharegpt")]
pub struct ShareGptArgs {
    /// Output length for every request (overrides the dataset's)
    #[arg(long, value_parser = parse_int::<usize>, value_name = "TOKENS")]
    pub sharegpt_output_len: Option<usize>,
}

/// The built-in sonnet dataset.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Dataset: sonnet")]
pub struct SonnetArgs {
    /// Input tokens per request
    #[arg(long, default_value = "550", value_parser = parse_int::<usize>, value_name = "TOKENS")]
    pub sonnet_input_len: usize,
    /// Output tokens per request
    #[arg(long, default_value = "150", value_parser = parse_int::<usize>, value_name = "TOKENS")]
    pub sonnet_output_len: usize,
    /// Prefix tokens shared by all requests
    #[arg(long, default_value = "200", value_parser = parse_int::<usize>, value_name = "TOKENS")]
    pub sonnet_prefix_len: usize,
}

/// NVIDIA SPEED-Bench.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Dataset: speed_bench")]
pub struct SpeedBenchArgs {
    /// Split
    #[arg(
        long,
        value_enum,
        default_value = "qualitative",
        visible_alias = "speed-bench-config",
        value_name = "SUBSET"
    )]
    pub speed_bench_dataset_subset: SpeedBenchSubset,
    /// Output tokens per request
    #[arg(long, default_value = "4096", value_parser = parse_int::<usize>, value_name = "TOKENS")]
    pub speed_bench_output_len: usize,
    /// Only this category (e.g. low_entropy, coding) [default: all]
    #[arg(long, value_name = "CATEGORY")]
    pub speed_bench_category: Option<String>,
    /// Truncate prompts to at most this many tokens
    #[arg(long, value_parser = parse_int::<usize>, value_name = "TOKENS")]
    pub speed_bench_max_input_len: Option<usize>,
}

/// Spec-Bench.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Dataset: spec_bench")]
pub struct SpecBenchArgs {
    /// Output tokens per request
    #[arg(long, default_value = "256", value_parser = parse_int::<usize>, value_name = "TOKENS")]
    pub spec_bench_output_len: usize,
    /// Only this category [default: all]
    #[arg(long, value_name = "CATEGORY")]
    pub spec_bench_category: Option<String>,
}

/// HuggingFace datasets (and the HF-hosted blazedit, ASR and BFCL loaders).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Dataset: hf")]
pub struct HfArgs {
    /// Subset (config) name
    #[arg(long, value_name = "NAME")]
    pub hf_subset: Option<String>,
    /// Split (train, test, validation) [default: auto-detected]
    #[arg(long, value_name = "SPLIT")]
    pub hf_split: Option<String>,
    /// Dataset name on the Hub when --dataset-path is a local path
    #[arg(long, value_name = "NAME")]
    pub hf_name: Option<String>,
    /// Output length for every request (overrides the dataset's)
    #[arg(long, value_parser = parse_int::<usize>, value_name = "TOKENS")]
    pub hf_output_len: Option<usize>,
    /// Column holding the prompt text [default: auto-detected]
    #[arg(long, value_name = "COLUMN")]
    pub hf_text_column: Option<String>,
    /// blazedit: minimum edit distance in [0, 1]
    #[arg(long, default_value = "0.0", value_parser = parse_float, value_name = "D")]
    pub blazedit_min_distance: f64,
    /// blazedit: maximum edit distance in [0, 1]
    #[arg(long, default_value = "1.0", value_parser = parse_float, value_name = "D")]
    pub blazedit_max_distance: f64,
    /// ASR: minimum audio length (s)
    #[arg(long, default_value = "0.0", value_parser = parse_float, value_name = "SEC")]
    pub asr_min_audio_len_sec: f64,
    /// ASR: maximum audio length (s)
    #[arg(long, default_value = "inf", value_parser = parse_float, value_name = "SEC")]
    pub asr_max_audio_len_sec: f64,
    /// BFCL: comma-separated categories [default: simple,live_simple,multiple]
    #[arg(long, value_name = "LIST")]
    pub bfcl_categories: Option<String>,
}

/// Custom JSONL datasets (custom, custom_audio, custom_image).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Dataset: custom")]
pub struct CustomArgs {
    /// Output tokens per request (-1 keeps the dataset's)
    #[arg(long, default_value = "256", value_parser = parse_int::<i64>, value_name = "TOKENS")]
    pub custom_output_len: i64,
    /// Send media as client-side data (base64) instead of references
    #[arg(long)]
    pub custom_ensure_client_side_data: bool,
}

/// The prefix-repetition dataset.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Dataset: prefix_repetition")]
pub struct PrefixRepetitionArgs {
    /// Prefix tokens per request
    #[arg(long, default_value = "256", value_parser = parse_int::<usize>, value_name = "TOKENS")]
    pub prefix_repetition_prefix_len: usize,
    /// Suffix tokens per request
    #[arg(long, default_value = "256", value_parser = parse_int::<usize>, value_name = "TOKENS")]
    pub prefix_repetition_suffix_len: usize,
    /// Number of distinct prefixes
    #[arg(long, default_value = "10", value_parser = parse_int::<usize>, value_name = "N")]
    pub prefix_repetition_num_prefixes: usize,
    /// Output tokens per request
    #[arg(long, default_value = "128", value_parser = parse_int::<usize>, value_name = "TOKENS")]
    pub prefix_repetition_output_len: usize,
}

/// Trace replay (Mooncake, Alibaba, ...).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Dataset: timed_trace")]
pub struct TimedTraceArgs {
    /// Tokens per hash id (Mooncake 512, Qwen/Alibaba 16)
    #[arg(long, default_value = "16", value_parser = parse_int::<usize>, value_name = "TOKENS")]
    pub timed_trace_chunk_hash_size: usize,
    /// Multiplier from trace timestamps to seconds (0.001 for ms)
    #[arg(long, default_value = "1", value_parser = parse_float, value_name = "X")]
    pub timed_trace_sec_multiplier: f64,
    /// JSON field of the timestamp
    #[arg(long, default_value = "timestamp", value_name = "FIELD")]
    pub timed_trace_label_timestamp: String,
    /// JSON field of the input length
    #[arg(long, default_value = "input_length", value_name = "FIELD")]
    pub timed_trace_label_input_length: String,
    /// JSON field of the output length
    #[arg(long, default_value = "output_length", value_name = "FIELD")]
    pub timed_trace_label_output_length: String,
    /// JSON field of the prompt's hash ids
    #[arg(long, default_value = "hash_ids", value_name = "FIELD")]
    pub timed_trace_label_hash_ids: String,
    /// Trace layout (auto: recognised from the file's first line)
    #[arg(long, value_enum, default_value = "auto")]
    pub timed_trace_format: TraceFormatChoice,
    /// Replay from this trace time (s, after --timed-trace-sec-multiplier)
    #[arg(long, default_value = "0", value_parser = parse_float, value_name = "SECONDS")]
    pub timed_trace_start_sec: f64,
    /// Replay only this many seconds of the trace (from --timed-trace-start-sec)
    #[arg(long, value_parser = parse_float, value_name = "SECONDS")]
    pub timed_trace_duration_sec: Option<f64>,
    /// Send the first replayed request at t = 0 (shift the whole schedule)
    #[arg(long)]
    pub timed_trace_rebase: bool,
    /// Skip (and count) malformed trace lines instead of stopping at the first
    #[arg(long)]
    pub timed_trace_skip_malformed: bool,
    /// Send prompts as decoded text instead of token ids (always on for chat backends)
    #[arg(long)]
    pub timed_trace_prompt_text: bool,
    /// Bailian traces: send a child turn only after its parent turn finished (and not before
    /// its own timestamp)
    #[arg(long)]
    pub timed_trace_wait_parent: bool,
    /// Send at the trace's timestamps (default for timed_trace only)
    #[arg(long, overrides_with = "no_self_timed")]
    pub self_timed: bool,
    /// Use --request-rate instead of the trace's timestamps
    #[arg(long, overrides_with = "self_timed")]
    pub no_self_timed: bool,
}

/// Rate control.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Rate control")]
pub struct RateArgs {
    /// Requests per second (inf = all at once)
    #[arg(long, default_value = "inf", value_parser = parse_float, value_name = "RPS")]
    pub request_rate: f64,
    /// Burstiness factor (1.0 = Poisson, <1 burstier, >1 more uniform)
    #[arg(long, default_value = "1.0", value_parser = parse_float, value_name = "FACTOR")]
    pub burstiness: f64,
    /// Maximum concurrent requests [default: unlimited]
    #[arg(long, value_parser = parse_int::<usize>, value_name = "N")]
    pub max_concurrency: Option<usize>,
    /// Ramp the request rate from --ramp-up-start-rps to --ramp-up-end-rps
    #[arg(long, value_enum, value_name = "STRATEGY")]
    pub ramp_up_strategy: Option<RampUpStrategy>,
    /// Starting request rate of the ramp-up
    #[arg(long, value_parser = parse_int::<i64>, value_name = "RPS")]
    pub ramp_up_start_rps: Option<i64>,
    /// Final request rate of the ramp-up
    #[arg(long, value_parser = parse_int::<i64>, value_name = "RPS")]
    pub ramp_up_end_rps: Option<i64>,
    /// Rate of single-token probe requests sent beside the workload (0 = none)
    #[arg(long, default_value = "0.0", value_parser = parse_float, value_name = "RPS")]
    pub probe_request_rate: f64,
    /// Percent of requests (0-100, chosen by --seed) that the client cancels: it closes the
    /// connection --request-cancellation-delay seconds after the request was sent; counted
    /// as cancelled, not failed, and left out of the latency metrics
    #[arg(long, value_parser = parse_float, value_name = "PCT")]
    pub request_cancellation_rate: Option<f64>,
    /// Seconds after a cancelled request was fully sent before its connection is closed
    /// (a response that ends first is a normal completion) [default: 0]
    #[arg(long, value_parser = parse_float, value_name = "SEC")]
    pub request_cancellation_delay: Option<f64>,
}

/// Sampling parameters (merged into the request body; generation backends only).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Sampling parameters")]
pub struct SamplingArgs {
    /// Temperature [default: the server's]
    #[arg(long, value_parser = parse_float, value_name = "T")]
    pub temperature: Option<f64>,
    /// Top-p (nucleus) sampling
    #[arg(long, value_parser = parse_float, value_name = "P")]
    pub top_p: Option<f64>,
    /// Top-k sampling
    #[arg(long, value_parser = parse_int::<i64>, value_name = "K")]
    pub top_k: Option<i64>,
    /// Min-p sampling
    #[arg(long, value_parser = parse_float, value_name = "P")]
    pub min_p: Option<f64>,
    /// Frequency penalty
    #[arg(long, value_parser = parse_float, value_name = "X")]
    pub frequency_penalty: Option<f64>,
    /// Presence penalty
    #[arg(long, value_parser = parse_float, value_name = "X")]
    pub presence_penalty: Option<f64>,
    /// Repetition penalty
    #[arg(long, value_parser = parse_float, value_name = "X")]
    pub repetition_penalty: Option<f64>,
}

/// Output & results.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Output & results")]
pub struct OutputArgs {
    /// Save the results to a JSON file
    #[arg(long)]
    pub save_result: bool,
    /// Include per-request data (lengths, ITLs, texts, errors) in the JSON
    #[arg(long)]
    pub save_detailed: bool,
    /// Append to the result file (JSON lines)
    #[arg(long)]
    pub append_result: bool,
    /// Directory for result files [default: current directory]
    #[arg(long, value_name = "DIR")]
    pub result_dir: Option<String>,
    /// Result file name [default: {label}-{rate}qps[-concurrency{N}]-{model}-{date}.json]
    #[arg(long, value_name = "FILE")]
    pub result_filename: Option<String>,
    /// Metrics with percentiles: ttft,tpot,itl,e2el,client_queue_time,e2el_including_client_queue [default: ttft,tpot,itl; e2el for pooling]
    #[arg(long, value_name = "LIST")]
    pub percentile_metrics: Option<String>,
    /// Percentiles to report, comma-separated
    #[arg(long, default_value = "99", value_name = "LIST")]
    pub metric_percentiles: String,
    /// Goodput SLOs in ms, e.g. ttft:100 tpot:50 e2el:500
    #[arg(long, num_args = 1.., value_name = "KEY:VALUE")]
    pub goodput: Vec<String>,
    /// Extra TTFT/TPOT/E2EL percentile columns in the sweep summary
    #[arg(long, value_name = "LIST")]
    pub sweep_summary_percentiles: Option<String>,
    /// Disable the progress bar
    #[arg(long)]
    pub disable_tqdm: bool,
    /// Draw output tokens/s and requests in flight per second under the result block even
    /// when stdout is not a terminal (on a terminal it is always drawn)
    #[arg(long)]
    pub terminal_chart: bool,
    /// What shows the run as it goes: dashboard (a live terminal view; the default when
    /// stdout is a terminal and --disable-tqdm is not given), bar (the progress bar), none
    #[arg(long, value_name = "MODE", value_parser = ["dashboard", "bar", "none"])]
    pub ui: Option<String>,
    /// Serve the client's own Prometheus metrics at http://ADDR:PORT/metrics while the run
    /// goes and until the process exits
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics_listen: Option<String>,
    /// Label (result file prefix) [default: --backend]
    #[arg(long)]
    pub label: Option<String>,
    /// Metadata saved in the result JSON (repeatable)
    #[arg(long, num_args = 0.., value_name = "KEY=VALUE")]
    pub metadata: Vec<String>,
    /// Write an HTML timeline of the requests beside the result file
    #[arg(long)]
    pub plot_timeline: bool,
    /// Two ITL thresholds (ms) colouring the timeline
    #[arg(long, default_value = "25,50", value_name = "LOW,HIGH")]
    pub timeline_itl_thresholds: String,
    /// Write one row per request to FILE after the run, the format from its extension
    /// (.parquet, .csv, .jsonl); schema in docs/export.md
    #[arg(long, value_name = "FILE")]
    pub export_requests: Option<std::path::PathBuf>,
    /// Plot a sweep's or --num-runs' summary as HTML (throughput vs latency with the Pareto
    /// front, metrics vs the swept value, run-to-run spread)
    #[arg(long)]
    pub plot: bool,
    /// Plot a saved sweep summary or --num-runs result file as HTML beside it; no benchmark
    /// is run
    #[arg(long, value_name = "FILE")]
    pub plot_summary: Option<String>,
}

/// Request options.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Request options")]
pub struct RequestArgs {
    /// Ask the server to ignore EOS (always on for random datasets with generation backends)
    #[arg(long)]
    pub ignore_eos: bool,
    /// Logprobs per token to request
    #[arg(long, value_parser = parse_int::<u32>, value_name = "N")]
    pub logprobs: Option<u32>,
    /// Warmup requests before the measured run
    #[arg(long, default_value = "0", value_parser = parse_int::<usize>, value_name = "N")]
    pub num_warmups: usize,
    /// Wait up to this long for the endpoint to answer (0 = skip the check)
    #[arg(long, default_value = "0", value_parser = parse_int::<u64>, value_name = "SEC")]
    pub ready_check_timeout_sec: u64,
    /// Prefix of request ids [default: bench-<8 random hex digits>-]
    #[arg(long, value_name = "PREFIX")]
    pub request_id_prefix: Option<String>,
    /// Extra HTTP headers (repeatable)
    #[arg(long, num_args = 0.., value_name = "KEY=VALUE")]
    pub header: Vec<String>,
    /// Extra JSON body fields; --extra-body.KEY VALUE sets one field
    #[arg(long, value_name = "JSON")]
    pub extra_body: Option<String>,
    /// Accepted for compatibility: Python's serve parses it and sends nothing for it
    #[arg(long)]
    pub use_beam_search: bool,
    /// Generate the dataset and print its statistics; send nothing
    #[arg(long)]
    pub dry_run: bool,
}

/// Steady-state metrics (computed for closed loops: --max-concurrency, --request-rate inf).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Steady-state")]
pub struct SteadyStateArgs {
    /// Fraction of --max-concurrency in flight that opens the steady-state window, in (0, 1]
    #[arg(long, default_value = "0.95", value_parser = parse_float, value_name = "FRACTION")]
    pub steady_state_threshold: f64,
    /// Minimum window (s) below which a warning is attached [default: max(10, 0.1 x duration)]
    #[arg(long, value_parser = parse_float, value_name = "SEC")]
    pub steady_state_min_window: Option<f64>,
    /// Do not compute steady-state metrics (closed loops get them after Python's block)
    #[arg(long)]
    pub no_steady_state: bool,
}

/// Server-side profiling.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Profiling")]
pub struct ProfilingArgs {
    /// Call /start_profile before and /stop_profile after the run
    #[arg(long)]
    pub profile: bool,
    /// Start profiling once /metrics reports this many running requests (needs --profile)
    #[arg(long, value_parser = parse_int::<usize>, value_name = "N")]
    pub profile_batch_threshold: Option<usize>,
    /// Seconds to capture after the threshold (needs --profile-batch-threshold)
    #[arg(long, default_value = "5.0", value_parser = parse_float, value_name = "SEC")]
    pub profile_duration: f64,
}

/// The server's Prometheus metrics, scraped over the run (docs/server-metrics.md).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Server metrics")]
pub struct ServerMetricsArgs {
    /// Do not scrape the server's /metrics (scraped by default; a server without it is one note)
    #[arg(long)]
    pub no_server_metrics: bool,
    /// Seconds between two scrapes during the run (plus one before and one after it)
    #[arg(long, default_value = "1.0", value_parser = parse_float, value_name = "SEC")]
    pub server_metrics_interval: f64,
    /// Another Prometheus endpoint to scrape, e.g. http://gpu-node:9400/metrics for a DCGM exporter (repeatable)
    #[arg(long, value_name = "URL")]
    pub server_metrics_url: Vec<String>,
    /// An NVIDIA DCGM exporter to scrape for GPU power, energy, utilisation and memory, e.g.
    /// http://gpu-node:9400/metrics (repeatable)
    #[arg(long, value_name = "URL")]
    pub gpu_telemetry: Vec<String>,
}

/// Sweeps over concurrency or rate.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Sweep")]
pub struct SweepArgs {
    /// Concurrency values to sweep, e.g. 1,10,50,100
    #[arg(long, value_name = "LIST")]
    pub sweep_max_concurrency: Option<String>,
    /// Request rates to sweep, e.g. 1,10,100,inf
    #[arg(long, value_name = "LIST")]
    pub sweep_request_rate: Option<String>,
    /// num_prompts = concurrency x FACTOR at each concurrency point
    #[arg(long, value_parser = parse_int::<usize>, value_name = "FACTOR")]
    pub sweep_num_prompts_factor: Option<usize>,
    /// Reset the server's prefix cache before each point (server needs VLLM_SERVER_DEV_MODE=1)
    #[arg(long)]
    pub reset_prefix_cache: bool,
}

/// The `--slo` help, naming every metric of [`SLO_METRICS`], the one list the terms are
/// parsed from.
fn slo_help() -> String {
    let names: Vec<&str> = SLO_METRICS.iter().map(|m| m.name()).collect();
    format!(
        "SLO terms METRIC:STAT=MS, comma-separated or repeated, e.g. ttft:p99=500,tpot:p99=50 \
         (metrics {}; stats mean, median, pNN[.N])",
        names.join(", ")
    )
}

/// SLO capacity search (docs/slo-search.md).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "SLO search")]
pub struct SloArgs {
    #[arg(long, value_name = "TERMS", help = slo_help())]
    pub slo: Vec<String>,
    /// Least share of requests that must meet every --goodput threshold, in (0, 1], e.g. 0.95
    #[arg(long, value_parser = parse_float, value_name = "SHARE")]
    pub slo_goodput: Option<f64>,
    /// Find the largest value that meets every SLO term: max-concurrency or request-rate
    #[arg(long, value_name = "VARIABLE")]
    pub slo_search: Option<String>,
    /// Where to search [default: concurrency 1,--num-prompts; rate: bracketed from a run at inf]
    #[arg(long, value_name = "LO,HI")]
    pub slo_search_range: Option<String>,
    /// Relative tolerance of a rate search, from 0.001 to 0.5: stop when the next failing
    /// rate is within this fraction of the best
    #[arg(long, default_value = "0.05", value_parser = parse_float, value_name = "FRACTION")]
    pub slo_search_tolerance: f64,
    /// Stop the search after this many seconds (no probe starts after it) and report what was
    /// reached
    #[arg(long, value_parser = parse_float, value_name = "SEC")]
    pub slo_search_max_time: Option<f64>,
    /// Stop the search before a probe would take the requests sent past N, and report what
    /// was reached
    #[arg(long, value_parser = parse_int::<u64>, value_name = "N")]
    pub slo_search_max_requests: Option<u64>,
}

/// Multi-turn conversations.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Multi-turn")]
pub struct MultiTurnArgs {
    /// Benchmark conversations (needs --backend openai-chat or anthropic-messages)
    #[arg(long)]
    pub multi_turn: bool,
    /// Turns per conversation (synthetic)
    #[arg(long, default_value = "3", value_parser = parse_int::<usize>, value_name = "N")]
    pub multi_turn_num_turns: usize,
    /// Minimum turns per conversation (0 = --multi-turn-num-turns)
    #[arg(long, default_value = "0", value_parser = parse_int::<usize>, value_name = "N")]
    pub multi_turn_min_turns: usize,
    /// Maximum turns per conversation (0 = --multi-turn-num-turns / uncapped for ShareGPT)
    #[arg(long, default_value = "0", value_parser = parse_int::<usize>, value_name = "N")]
    pub multi_turn_max_turns: usize,
    /// Concurrent conversations [default: --max-concurrency or --num-prompts]
    #[arg(long, value_parser = parse_int::<usize>, value_name = "N")]
    pub multi_turn_concurrency: Option<usize>,
    /// Think time between turns (ms)
    #[arg(long, default_value = "0", value_parser = parse_int::<u64>, value_name = "MS")]
    pub multi_turn_delay_ms: u64,
    /// Input tokens of turns after the first (0 = --random-input-len)
    #[arg(long, default_value = "0", value_parser = parse_int::<usize>, value_name = "TOKENS")]
    pub per_turn_input_len: usize,
    /// Fraction of each turn's input shared by all conversations
    #[arg(long, default_value = "0.0", value_parser = parse_float, value_name = "RATIO")]
    pub multi_turn_prefix_global_ratio: f64,
    /// Fraction of each turn's input shared within a conversation
    #[arg(long, default_value = "0.0", value_parser = parse_float, value_name = "RATIO")]
    pub multi_turn_prefix_conversation_ratio: f64,
}

/// LoRA adapters.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "LoRA")]
pub struct LoraArgs {
    /// Adapter names registered on the server; each request's model is one of them
    #[arg(long, num_args = 1.., value_name = "NAME")]
    pub lora_modules: Vec<String>,
    /// How requests are assigned to adapters: random (seeded by --seed) or round-robin (i % N)
    #[arg(long, value_enum, default_value = "random", value_name = "HOW")]
    pub lora_assignment: LoraAssignment,
}

/// Multi-run statistics and result comparison.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Multi-run & comparison")]
pub struct MultiRunArgs {
    /// Run the benchmark N times; report mean/std/min/max and CV
    #[arg(long, default_value = "1", value_parser = parse_int::<usize>, value_name = "N")]
    pub num_runs: usize,
    /// Send the same prompts at every sweep point, --num-runs repetition and --slo-search
    /// probe (by default each gets fresh prompts from its own seed derived from --seed, so no
    /// point measures the server's prefix cache of an earlier one)
    #[arg(long)]
    pub same_prompts: bool,
    /// Compare saved result files (ours or Python's) with the first; no benchmark is run
    #[arg(long, num_args = 2.., value_names = ["BASELINE", "CANDIDATE"])]
    pub compare: Vec<String>,
}

/// Sharded runs: one benchmark split over several processes or machines (vllm-bench only).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Sharded runs")]
pub struct ShardArgs {
    /// Run shard K of N (0 <= K < N): the requests i = K mod N of the one-process run, or
    /// `auto` (K and N from SLURM_PROCID/SLURM_NTASKS, or JOB_COMPLETION_INDEX and
    /// VLLM_BENCH_SHARDS); merge the results with `vllm-bench merge`
    #[arg(long, value_name = "K/N|auto")]
    pub shard: Option<String>,
    /// Start the measured run at this Unix time (seconds, fractions allowed), so every
    /// shard shares one time axis; the ready check and warm-ups happen before it
    #[arg(long, value_parser = parse_float, value_name = "UNIX_TIME")]
    pub start_at: Option<f64>,
}

/// The engine (vllm-bench only).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Engine")]
pub struct EngineArgs {
    /// Cores to run on, one pinned runtime each [default: every core this process may use]
    #[arg(long, env = "VLLM_BENCH_CORES", value_parser = parse_int::<usize>, value_name = "N")]
    pub num_cores: Option<usize>,
    /// I/O driver: auto (io_uring when the kernel allows it, else epoll), uring or epoll
    #[arg(long, value_enum, default_value = "auto", value_name = "DRIVER")]
    pub io_driver: DriverChoice,
    /// TCP (and TLS) connect timeout in seconds
    #[arg(long, default_value = "10", value_parser = parse_float, value_name = "SEC")]
    pub connect_timeout_sec: f64,
    /// Whole-request timeout in seconds (aiohttp's 6 h)
    #[arg(long, default_value = "21600", value_parser = parse_float, value_name = "SEC")]
    pub request_timeout_sec: f64,
    /// Do not open the connections before the clock starts
    #[arg(long)]
    pub no_preconnect: bool,
    /// After Ctrl-C or SIGTERM, seconds that requests in flight may still take before they
    /// are cancelled and counted as failed (reason `interrupted`); 0 cancels them at once
    #[arg(long, default_value = "5", value_parser = parse_float, value_name = "SEC")]
    pub interrupt_grace_sec: f64,
    /// Spread connections over N loopback source addresses 127.0.0.1..N (each has its own
    /// ~28k ephemeral ports; for more than ~28k streams to a loopback server)
    #[arg(long, default_value = "1", value_parser = parse_int::<usize>, value_name = "N")]
    pub local_addrs: usize,
    /// SSE events one response may send; one more fails the request (reason
    /// `response_too_long`) and bounds its memory (gaps, and 16 bytes of text per event)
    #[arg(long, default_value = "1000000", value_parser = parse_int::<u32>, value_name = "N")]
    pub max_response_events: u32,
    /// Bound the measured run in time: no request is sent after SEC seconds (those waiting
    /// are counted as not sent); with --num-prompts, whichever ends first
    #[arg(long, value_parser = parse_float, value_name = "SEC")]
    pub duration: Option<f64>,
    /// With --duration, seconds requests in flight at the bound may still take; then they are
    /// cut and counted as cancelled
    #[arg(long, default_value = "30", value_parser = parse_float, value_name = "SEC")]
    pub duration_grace: f64,
    /// Keep idle CPUs polling instead of sleeping while the engine runs, so no arrival stamp
    /// waits for a sleeping core to wake (a PM QoS request on /dev/cpu_dma_latency; needs
    /// root; machine-wide, costs power)
    #[arg(long)]
    pub keep_cpus_awake: bool,
}

/// `vllm-bench merge`'s flags: the result files of the shards of one run, and where the
/// merged result goes (the run's `--result-dir`/`--result-filename`, which a shard's own run
/// used for its file).
#[derive(Debug, Clone, Args)]
pub struct MergeArgs {
    /// Every shard's result file, in any order
    #[arg(value_name = "SHARD_RESULT", num_args = 1.., required = true)]
    pub files: Vec<std::path::PathBuf>,
    /// Directory of the merged result [default: the current directory]
    #[arg(long, value_name = "DIR")]
    pub result_dir: Option<std::path::PathBuf>,
    /// File name of the merged result [default: Python's naming]
    #[arg(long, value_name = "NAME")]
    pub result_filename: Option<String>,
    /// Write the merged run's requests (the union of the shards'), one row each, to FILE
    /// (.parquet, .csv, .jsonl)
    #[arg(long, value_name = "FILE")]
    pub export_requests: Option<std::path::PathBuf>,
}

/// `vllm-bench synthesize agentic`'s flags: how many sessions, the seed, where to write, and
/// `aiperf synthesize agentic-code`'s two limits.
#[derive(Debug, Clone, Args)]
pub struct SynthesizeArgs {
    /// What to synthesize: `agentic` (an agentic-coding corpus of Weka trace files)
    #[arg(value_name = "KIND", value_parser = ["agentic"])]
    pub kind: String,
    /// Sessions (traces) to write
    #[arg(long, required = true, value_parser = parse_int::<u32>, value_name = "N")]
    pub num_sessions: u32,
    /// Seed of every draw (the same seed writes the same corpus)
    #[arg(long, default_value = "0", value_parser = parse_int::<u64>)]
    pub seed: u64,
    /// Directory to write the traces to (created; must hold no *.json yet)
    #[arg(long, required = true, value_name = "DIR")]
    pub output: std::path::PathBuf,
    /// Prompt limit: a session retires before a turn would reach it
    #[arg(long, default_value = "200000", value_parser = parse_int::<u64>, value_name = "TOKENS")]
    pub max_isl: u64,
    /// Cap on each request's output tokens [default: none]
    #[arg(long, value_parser = parse_int::<u64>, value_name = "TOKENS")]
    pub max_osl: Option<u64>,
}
