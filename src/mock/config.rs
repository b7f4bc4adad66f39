//! What the mock server is told to do: [`MockConfig`] with its fault mix ([`FaultConfig`],
//! defined beside the fault kinds in `faults`) and the I/O driver choice (the engine's
//! [`DriverChoice`], resolved by the same code as the client's), plus the validation that
//! turns a bad value into one clear error before any thread starts.

use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use super::faults::FaultConfig;
use crate::runtime::DriverChoice;
use crate::tokenizer::Tokenizer;

/// Everything the mock server does, fixed at start.
#[derive(Debug, Clone)]
pub struct MockConfig {
    /// Address to bind (default 127.0.0.1).
    pub host: IpAddr,
    /// Port to bind; 0 picks an ephemeral port (read it back with `MockServer::addr`).
    pub port: u16,
    /// Worker threads, each its own monoio runtime and `SO_REUSEPORT` listener.
    pub workers: usize,
    /// Pin each worker thread to a core (see `core_ids`).
    pub pin: bool,
    /// Cores to pin to, worker `i` on `core_ids[i % len]`; `None` means cores `0..workers`.
    /// Used when the mock is embedded so it and the client get different cores.
    pub core_ids: Option<Vec<usize>>,
    /// Model name reported in responses and `/v1/models`.
    pub model: String,
    /// Delay from a request's arrival to its first content chunk (TTFT).
    pub first_token_delay: Duration,
    /// Delay between content chunks (ITL).
    pub token_interval: Duration,
    /// Tokens to generate when the request gives no `max_tokens`/`max_completion_tokens`.
    pub num_tokens: usize,
    /// Tokens carried by each content chunk (>= 1).
    pub tokens_per_chunk: usize,
    /// The first output tokens of every chat, Responses and Anthropic stream that are
    /// reasoning (at most all of them): chat `delta.reasoning`, Responses
    /// `response.reasoning_text.delta`, an Anthropic `thinking` block; the usage counts them
    /// (`completion_tokens_details` / `output_tokens_details.reasoning_tokens`). 0: none.
    /// Completions and transcriptions have no reasoning field and ignore it.
    pub reasoning_tokens: usize,
    /// With reasoning: an extra pause after the last reasoning chunk, before the first answer
    /// chunk (a model thinking without streaming its thoughts).
    pub thinking_delay: Duration,
    /// Each delay gets a seeded uniform offset in `[-jitter, +jitter]` (never below zero).
    pub jitter: Duration,
    /// Send the usage chunk when the request asks for `stream_options.include_usage`
    /// (and a `usage` object in non-streaming responses).
    pub usage: bool,
    /// Report this many completion tokens in every completions/chat usage, whatever was
    /// generated: a server whose usage is wrong (a count no response can hold, say).
    /// `None`: the tokens generated.
    pub usage_completion_tokens: Option<u64>,
    /// Close the connection after each streamed response, without announcing it with
    /// `Connection: close` (as llama.cpp's server does), so clients must reconnect.
    pub close_after_response: bool,
    /// Fault mix.
    pub faults: FaultConfig,
    /// How long a stalled stream stays silent before the socket is closed.
    pub stall_for: Duration,
    /// Seed of every random decision (faults, jitter, ids, embedding values).
    pub seed: u64,
    /// Keep a [`LoggedRequest`](super::LoggedRequest) per request (read with
    /// `MockServer::request_log`).
    pub request_log: bool,
    /// With `request_log`: keep each request's body too (tests that check what a client
    /// sent, e.g. a conversation's history; memory grows with every body).
    pub request_log_bodies: bool,
    /// Record when every streamed content chunk was handed to the kernel (read with
    /// `MockServer::timing_report`); off, streams pay nothing for it.
    pub timing_report: bool,
    /// Serve HTTPS with a self-signed certificate made at start (clients pass `--insecure`).
    pub tls: bool,
    /// I/O driver of the worker runtimes.
    pub driver: DriverChoice,
    /// `max_model_len` reported by `/v1/models` and `/tokenize`.
    pub max_model_len: usize,
    /// Refuse a generation request whose prompt tokens plus output limit exceed
    /// `max_model_len`, with vLLM's `400` ("This model's maximum context length is ..."):
    /// what an agentic replay counts as a context overflow. Off by default: the mock
    /// answers any prompt, whatever its length.
    pub refuse_past_context: bool,
    /// Largest request body accepted; larger ones get `413 Payload Too Large`.
    pub max_body_bytes: usize,
    /// Serve `/tokenize` and `/detokenize` (off → 404, like the golden-run mock).
    pub tokenize_endpoints: bool,
    /// Serve `/metrics` (off → 404, like the golden-run mock).
    pub metrics_endpoint: bool,
    /// `--dcgm N`: `/metrics` also serves a DCGM exporter's families for N GPUs (`dcgm`).
    pub dcgm_gpus: usize,
    /// Filler bytes in every generation event and model response body, as a `"padding"`
    /// string member: events or bodies of any size (an SSE event over a megabyte) without
    /// changing their text or token counts. 0: none.
    pub padding: usize,
    /// Extra header lines on every `200` model response, written as given: e.g.
    /// `content-encoding: gzip` (the body stays uncompressed: it tests that a client refuses
    /// what it cannot decode) or one oversized value (a head over a client's limit).
    pub response_headers: Vec<(String, String)>,
    /// Crash the whole server at one model request (see [`Crash`]); `None`: never.
    pub crash: Option<Crash>,
    /// Count prompt tokens and serve `/tokenize` / `/detokenize` with this tokenizer (the
    /// client's, so a run's input tokens are the ones it planned); `None`: the toy tokenizer.
    pub tokenizer: Option<Arc<Tokenizer>>,
    /// Model requests served at once; one more waits for a free slot, and its first-token
    /// delay and token interval start when it gets one. `None`: no limit.
    pub slots: Option<usize>,
}

/// A crash of the whole server, triggered by one model request: every connection open at
/// that moment is closed at once (streams cut mid-way, queued requests unanswered), the
/// triggering request included. What a client sees of a server process that dies, and of
/// one that is restarted, at a point of the run fixed by the request count, not by a timer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Crash {
    /// Sequence number of the model request that triggers the crash (0 = the first).
    pub at_request: u64,
    /// What the server does after crashing.
    pub then: AfterCrash,
}

/// The server after a [`Crash`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterCrash {
    /// It stays down: the listeners close as well, so later connections are refused (a
    /// killed server). `MockServer::shutdown` only joins the stopped threads.
    Down,
    /// It is back at once on the same listeners and serves every later request normally (a
    /// restarted server as its clients see it; connections waiting in the listen backlog
    /// survive, as they do when a supervisor hands the socket to the new process).
    Restart,
}

impl Default for MockConfig {
    fn default() -> Self {
        MockConfig {
            host: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 0,
            workers: 1,
            pin: false,
            core_ids: None,
            model: "mock-model".to_string(),
            first_token_delay: Duration::ZERO,
            token_interval: Duration::ZERO,
            num_tokens: 16,
            tokens_per_chunk: 1,
            reasoning_tokens: 0,
            thinking_delay: Duration::ZERO,
            jitter: Duration::ZERO,
            usage: true,
            usage_completion_tokens: None,
            close_after_response: false,
            faults: FaultConfig::default(),
            stall_for: Duration::from_secs(10),
            seed: 0,
            request_log: false,
            request_log_bodies: false,
            timing_report: false,
            tls: false,
            driver: DriverChoice::Auto,
            max_model_len: 32_768,
            refuse_past_context: false,
            max_body_bytes: 64 << 20,
            tokenize_endpoints: true,
            metrics_endpoint: true,
            dcgm_gpus: 0,
            padding: 0,
            response_headers: Vec::new(),
            crash: None,
            tokenizer: None,
            slots: None,
        }
    }
}

/// Upper bound on worker threads: far beyond any core count, low enough to catch typos.
const MAX_WORKERS: usize = 1024;

impl MockConfig {
    /// Checks every value; the error names the field, the value and the fix.
    pub fn validate(&self) -> io::Result<()> {
        if self.workers == 0 || self.workers > MAX_WORKERS {
            return Err(invalid(format!(
                "mock workers {}: must be between 1 and {MAX_WORKERS}",
                self.workers
            )));
        }
        if matches!(&self.core_ids, Some(ids) if ids.is_empty()) {
            return Err(invalid(
                "mock core_ids: empty list; give at least one core or None".into(),
            ));
        }
        if self.model.is_empty() {
            return Err(invalid("mock model: empty name; give a model name".into()));
        }
        if self.num_tokens == 0 {
            return Err(invalid("mock num_tokens 0: must be at least 1".into()));
        }
        if self.tokens_per_chunk == 0 {
            return Err(invalid(
                "mock tokens_per_chunk 0: must be at least 1".into(),
            ));
        }
        if self.slots == Some(0) {
            return Err(invalid("mock slots 0: must be at least 1 (or None)".into()));
        }
        if self.max_body_bytes == 0 {
            return Err(invalid("mock max_body_bytes 0: must be at least 1".into()));
        }
        for (name, value) in &self.response_headers {
            let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
            if name.is_empty() || !name.bytes().all(token) {
                return Err(invalid(format!(
                    "mock response header {name:?}: not a valid header name"
                )));
            }
            if value.bytes().any(|b| matches!(b, b'\r' | b'\n' | 0)) {
                return Err(invalid(format!(
                    "mock response header {name}: the value cannot contain line breaks"
                )));
            }
        }
        let mut sum = 0.0;
        for (name, f) in self.faults.named() {
            if !(0.0..=1.0).contains(&f) {
                return Err(invalid(format!(
                    "mock fault {name} {f}: must be a fraction between 0 and 1"
                )));
            }
            sum += f;
        }
        if sum > 1.0 + 1e-9 {
            return Err(invalid(format!(
                "mock faults sum to {sum}: the fractions must add up to at most 1"
            )));
        }
        Ok(())
    }
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid() {
        MockConfig::default().validate().expect("default config");
    }

    #[test]
    fn bad_values_are_rejected_with_the_field_name() {
        let cases: Vec<(MockConfig, &str)> = vec![
            (
                MockConfig {
                    workers: 0,
                    ..Default::default()
                },
                "workers",
            ),
            (
                MockConfig {
                    tokens_per_chunk: 0,
                    ..Default::default()
                },
                "tokens_per_chunk",
            ),
            (
                MockConfig {
                    num_tokens: 0,
                    ..Default::default()
                },
                "num_tokens",
            ),
            (
                MockConfig {
                    model: String::new(),
                    ..Default::default()
                },
                "model",
            ),
            (
                MockConfig {
                    core_ids: Some(vec![]),
                    ..Default::default()
                },
                "core_ids",
            ),
            (
                MockConfig {
                    faults: FaultConfig {
                        stall: 1.5,
                        ..Default::default()
                    },
                    ..Default::default()
                },
                "stall",
            ),
            (
                MockConfig {
                    faults: FaultConfig {
                        error_500: f64::NAN,
                        ..Default::default()
                    },
                    ..Default::default()
                },
                "error_500",
            ),
            (
                MockConfig {
                    faults: FaultConfig {
                        error_500: 0.6,
                        disconnect: 0.6,
                        ..Default::default()
                    },
                    ..Default::default()
                },
                "sum",
            ),
            (
                MockConfig {
                    response_headers: vec![("bad name".into(), "v".into())],
                    ..Default::default()
                },
                "header name",
            ),
            (
                MockConfig {
                    response_headers: vec![("x-a".into(), "v\r\nx-b: w".into())],
                    ..Default::default()
                },
                "line breaks",
            ),
        ];
        for (cfg, needle) in cases {
            let err = cfg.validate().expect_err(needle);
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
            assert!(
                err.to_string().contains(needle),
                "{err} should mention {needle}"
            );
        }
    }
}
