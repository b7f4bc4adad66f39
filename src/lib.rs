//! vllm-bench: a thread-per-core benchmark client for vLLM and OpenAI-compatible servers.
//!
//! The binaries (`vllm-bench`, `mock-llm-server`) and the integration tests are thin layers
//! over this library. A run flows through the modules in this order (see `docs/`, e.g.
//! `docs/architecture.md`):
//!
//! `cli` → `config` → `datasets` (+ `tokenizer`) → `backends` (request bytes) → `engine`
//! (pinned monoio runtimes, `http`, `sse`) → `metrics` → `output`.
//!
//! Imports point down floors (`types` at the bottom, `app` at the top; only `config` and
//! `app` read `cli`): docs/architecture.md.

pub mod allocator;
pub mod app;
pub mod backends;
pub mod cli;
pub mod config;
pub mod control_plane;
pub mod datasets;
pub mod engine;
pub mod http;
pub mod metrics;
pub mod mix;
pub mod mock;
pub mod modes;
pub mod output;
pub mod pyfmt;
pub mod runtime;
pub mod safe_text;
pub mod server_metrics;
pub mod sse;
pub mod tokenizer;
pub mod types;
pub mod whole_file;
