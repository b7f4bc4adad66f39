//! `mock-llm-server`: a deterministic, thread-per-core, OpenAI-compatible mock of a vLLM
//! server, used by the engine tests, by `vllm-bench --mock-server` (embedded in-process on
//! its own cores) and by the client-overhead benchmarks. It must never be the bottleneck
//! and must be exactly as timed as configured.
//!
//! - Each worker thread runs its own monoio runtime (io_uring, or the legacy epoll driver)
//!   with its own `SO_REUSEPORT` listener; workers share only counters (`server`).
//! - HTTP/1.1 is hand-written: httparse for heads, `Content-Length` and chunked request
//!   bodies, keep-alive and pipelining (`request`, `conn`, `response`).
//! - Streams are shaped like vLLM's and the golden mock's (`generation`; the Responses and
//!   Anthropic Messages events in `responses` and `anthropic`); delays are
//!   absolute deadlines from the request's arrival (`timing`); faults are seeded per
//!   request (`faults`).
//! - Delays end on a per-worker timerfd rather than monoio's millisecond wheel
//!   ([`crate::runtime::timer`], shared with the client engine),
//!   and shutdown closes every live connection, even one parked in a long sleep
//!   (`lifecycle`).
//! - Prompts are counted and hashed in one pass over the JSON (`body`), with a toy
//!   tokenizer ([`toy_tokenizer`], public: tests may want its ids) or the client's own
//!   ([`MockConfig::tokenizer`], `prompt_tokenizer`), and a toy prefix cache
//!   (`prefix_cache`); `/metrics` speaks vLLM's names (`vllm_metrics`).
//! - Optionally, a fixed number of model slots (`slots`): requests wait for a free one, so
//!   the server's capacity is known exactly.
//! - Optionally, the timeline actually emitted (when each content chunk was handed to the
//!   kernel) is recorded for a [`TimingReport`] (`emission`): the ground truth a client's
//!   measurements are compared with.
//!
//! ```no_run
//! use vllm_bench::mock::{MockConfig, MockServer};
//! let server = MockServer::start(MockConfig::default()).expect("mock starts");
//! println!("{}", server.base_url());
//! server.shutdown();
//! ```

mod anthropic;
mod body;
mod config;
mod conn;
mod ctx;
pub mod dcgm;
mod emission;
mod endpoints;
mod exchange;
mod faults;
mod form;
mod generation;
mod hash;
mod io;
mod lifecycle;
mod model;
mod prefix_cache;
mod prompt_tokenizer;
mod request;
mod response;
mod responses;
mod routes;
mod server;
mod slots;
mod stats;
mod timing;
mod tls;
pub mod toy_tokenizer;
mod vllm_metrics;

pub use config::{AfterCrash, Crash, MockConfig};
pub use emission::{ItlSummary, LatenessSummary, TimingReport, TtftSummary};
pub use faults::{FaultConfig, FaultCounts, FaultKind};
pub use server::MockServer;
pub use stats::{LoggedRequest, MockStats};
