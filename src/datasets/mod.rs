//! Datasets: everything that turns flags (and files) into [`SampleRequest`]s before the clock
//! starts. Generation is parallel (rayon) and deterministic for a given `--seed`.
//!
//! One module per dataset (random, sharegpt, sonnet, custom, prefix_repetition, burstgpt,
//! spec_bench, speed_bench, timed_trace), each taking its own small options and returning the
//! same [`SampleRequest`]s; `modes::dataset` (above this layer) maps the validated configuration onto
//! them. Python's selection is reproduced with CPython's `random` ([`pyrandom`]) and numpy's
//! `RandomState` ([`np_random`]); the shared rules of Python's `BenchmarkDataset` are in
//! [`sampling`]; errors are [`DatasetError`], one line naming the file and entry.

use std::sync::Arc;

pub mod agentic;
pub mod align;
pub mod batched;
pub mod burstgpt;
pub mod chat_format;
pub mod conversations;
pub mod custom;
pub mod custom_image;
pub mod error;
pub mod hf;
pub mod hub_file;
pub mod limits;
pub mod max_model_len;
pub mod media;
pub mod np_random;
pub mod prefix_repetition;
pub mod pyrandom;
pub mod question_file;
pub mod random;
pub mod random_mm;
pub mod sampling;
pub mod sharegpt;
pub mod sonnet;
pub mod spec_bench;
pub mod speed_bench;
pub mod stats;
pub mod synthetic_image;
pub mod timed_trace;
pub mod token_fit;
pub mod walk_corpus;
pub mod wav;

pub use error::DatasetError;
pub use sampling::Sampling;
pub use stats::DatasetStats;

/// What a request asks the model: text, or token ids sent verbatim (`--prompt-token-ids`).
///
/// Prompts are shared (`Arc`), never cloned per request: at 100k requests of 8k tokens a copy
/// per request would cost gigabytes.
#[derive(Debug, Clone, PartialEq)]
pub enum Prompt {
    Text(Arc<str>),
    TokenIds(Arc<[u32]>),
    /// Several inputs in one request: `--random-batch-size` for pooling backends, and the
    /// reranking datasets' query followed by its documents.
    Texts(Arc<[Arc<str>]>),
    /// A chat request given whole (the hf BFCL set): its messages and body fields of its own.
    Chat(Arc<ChatPrompt>),
}

/// A request's own chat messages and the body fields that go with them (Python's
/// `chat_messages` and `request_overrides`: BFCL's `tools` and `tool_choice`).
#[derive(Debug, Clone, PartialEq)]
pub struct ChatPrompt {
    /// `[{"role", "content"}, ...]`, sent as they are.
    pub messages: serde_json::Value,
    /// Merged over `--extra-body` (the request's own win, as in Python).
    pub overrides: serde_json::Map<String, serde_json::Value>,
}

/// One request of the benchmark, as Python's `SampleRequest`.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleRequest {
    pub prompt: Prompt,
    /// Prompt length in tokens as the client counted it (replaced by the server's
    /// `usage.prompt_tokens` when the server reports it).
    pub prompt_len: usize,
    /// `max_tokens` / `max_completion_tokens` of the request.
    pub expected_output_len: usize,
    /// Optional request id (Python: `request_id`), used for the `x-request-id` header.
    pub request_id: Option<String>,
}
