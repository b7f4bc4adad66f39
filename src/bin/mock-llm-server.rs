//! `mock-llm-server`: the deterministic OpenAI-compatible mock as a standalone process.
//! Flags → `MockConfig` → run until SIGINT/SIGTERM → optional request log and timing
//! report → exit.

use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use vllm_bench::mock::{AfterCrash, Crash, FaultConfig, MockConfig, MockServer, TimingReport};
use vllm_bench::runtime::DriverChoice;
use vllm_bench::tokenizer::Tokenizer;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Deterministic, thread-per-core, OpenAI-compatible mock LLM server (vLLM-shaped streams).
///
/// Serves /v1/completions, /v1/chat/completions, /v1/responses (SSE or JSON), /v1/embeddings
/// (and Infinity's /embeddings), /pooling, /rerank, /tokenize, /detokenize, /metrics, /v1/models and /health on loopback by default.
/// A stream sends ceil(n/k) content chunks of " tok" tokens: the first after
/// --first-token-delay-ms, then one every --token-interval-ms.
#[derive(Debug, Parser)]
#[command(name = "mock-llm-server", version, max_term_width = 100)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// Port to listen on (0 = pick a free one; the listening line shows it).
    #[arg(long, default_value_t = 8000)]
    port: u16,
    /// Worker threads, each with its own runtime and SO_REUSEPORT listener.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    workers: u16,
    /// Pin worker i to core i (or to the i-th of --core-ids).
    #[arg(long)]
    pin: bool,
    /// Cores to pin the workers to, e.g. 2,3 (implies --pin).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    core_ids: Option<Vec<usize>>,
    /// Model name reported in responses and /v1/models.
    #[arg(long, default_value = "mock-model")]
    model: String,
    /// Delay from a request's arrival to its first content chunk, in ms (fractions allowed).
    #[arg(long, value_name = "MS", default_value = "0", value_parser = millis)]
    first_token_delay_ms: Duration,
    /// Delay between content chunks, in ms (fractions allowed).
    #[arg(long, value_name = "MS", default_value = "0", value_parser = millis)]
    token_interval_ms: Duration,
    /// Model requests served at once; more wait for a free slot, then get
    /// --first-token-delay-ms and --token-interval-ms from when they got it [default: no limit]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    slots: Option<u64>,
    /// Output tokens when a request sets no max_tokens / max_completion_tokens.
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..))]
    num_tokens: u64,
    /// Tokens carried by each content chunk.
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    tokens_per_chunk: u64,
    /// Chat, Responses and Anthropic streams send their first N output tokens as reasoning
    /// (delta.reasoning, response.reasoning_text.delta, a thinking block) before the answer;
    /// the usage counts them as reasoning_tokens.
    #[arg(long, value_name = "N", default_value_t = 0)]
    reasoning_tokens: u64,
    /// With --reasoning-tokens: a pause after the last reasoning chunk, before the first
    /// answer chunk, in ms (fractions allowed).
    #[arg(long, value_name = "MS", default_value = "0", value_parser = millis)]
    thinking_ms: Duration,
    /// Uniform ± jitter added to every delay, in ms (seeded by --seed).
    #[arg(long, value_name = "MS", default_value = "0", value_parser = millis)]
    jitter_ms: Duration,
    /// Never send usage (no usage chunk even when stream_options.include_usage asks).
    #[arg(long)]
    no_usage: bool,
    /// Close the connection after every streamed response, unannounced (like llama.cpp).
    #[arg(long)]
    close_after_response: bool,
    /// All delays zero: stream as fast as the client reads.
    #[arg(long, conflicts_with_all = ["first_token_delay_ms", "token_interval_ms", "jitter_ms", "thinking_ms"])]
    firehose: bool,
    /// Fraction of model requests answered 500 Internal Server Error.
    #[arg(long = "fail-500", value_name = "FRACTION", default_value = "0", value_parser = fraction)]
    fail_500: f64,
    /// Fraction of model requests answered 429 Too Many Requests.
    #[arg(long = "fail-429", value_name = "FRACTION", default_value = "0", value_parser = fraction)]
    fail_429: f64,
    /// Fraction of streams whose socket is closed after a few content chunks.
    #[arg(long, value_name = "FRACTION", default_value = "0", value_parser = fraction)]
    fail_disconnect: f64,
    /// Fraction of streams that stall after the first content chunk (see --stall-ms).
    #[arg(long, value_name = "FRACTION", default_value = "0", value_parser = fraction)]
    fail_stall: f64,
    /// Fraction of streams with one event whose data is not valid JSON.
    #[arg(long, value_name = "FRACTION", default_value = "0", value_parser = fraction)]
    fail_malformed: f64,
    /// Fraction of model requests whose 200 head is sent, then the socket closes (no body).
    #[arg(long, value_name = "FRACTION", default_value = "0", value_parser = fraction)]
    fail_close_after_head: f64,
    /// Fraction of model requests whose response never ends (endless content events, or an
    /// endless non-streaming body) until the client closes the connection.
    #[arg(long, value_name = "FRACTION", default_value = "0", value_parser = fraction)]
    fail_endless: f64,
    /// Fraction of Responses / Anthropic Messages streams that send an `error` event
    /// halfway and end (other APIs answer 500 instead).
    #[arg(long, value_name = "FRACTION", default_value = "0", value_parser = fraction)]
    fail_stream_error: f64,
    /// How long a stalled stream stays silent before the socket closes, in ms.
    #[arg(long, value_name = "MS", default_value = "10000", value_parser = millis)]
    stall_ms: Duration,
    /// Add a "padding" member of N filler bytes to every generation event and model
    /// response body (large events without changing their text or token counts).
    #[arg(long, value_name = "N", default_value_t = 0)]
    padding_bytes: usize,
    /// Extra header line on every 200 model response, e.g. 'content-encoding: gzip' (the
    /// body stays uncompressed); repeatable.
    #[arg(long, value_name = "'NAME: VALUE'", value_parser = header_line)]
    response_header: Vec<(String, String)>,
    /// Crash at model request N (0 = the first): every open connection is closed at once,
    /// that request's included (see --crash-then).
    #[arg(long, value_name = "N")]
    crash_at: Option<u64>,
    /// After --crash-at: stay down (later connections are refused) or come back at once on
    /// the same port.
    #[arg(long, value_enum, default_value_t = CrashThen::Restart, requires = "crash_at")]
    crash_then: CrashThen,
    /// Seed of faults, jitter, response ids and embedding values.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Write every request as a JSON line to FILE at shutdown.
    #[arg(long, value_name = "FILE")]
    request_log: Option<PathBuf>,
    /// Record when each streamed content chunk was handed to the kernel and write, at
    /// shutdown, the emitted timeline's summary as JSON to FILE: {"streams", "chunks",
    /// "ttft_ms": {mean, median, p99}, "itl_ms": {mean, median, p50, p99}, "lateness_ms":
    /// {mean, p50, p99, max}}. Server TTFT = first content chunk's hand-off - request
    /// arrival; ITL = gap between content chunks' hand-offs; lateness = hand-off - the
    /// chunk's scheduled time. Only streams completed without a fault count.
    #[arg(long, value_name = "FILE")]
    timing_report: Option<PathBuf>,
    /// Serve HTTPS: a self-signed certificate for localhost and --host is made at start
    /// (nothing on disk); clients connect with https:// and --insecure.
    #[arg(long)]
    tls: bool,
    /// I/O driver: io_uring when available (auto), io_uring only, or epoll.
    #[arg(long, value_enum, default_value_t = DriverChoice::Auto)]
    io_driver: DriverChoice,
    /// max_model_len reported by /v1/models and /tokenize; larger max_tokens get a 400.
    #[arg(long, value_name = "N", default_value_t = 32_768)]
    max_model_len: usize,
    /// Answer /tokenize and /detokenize with 404 (like the mock of the golden runs).
    #[arg(long)]
    no_tokenize: bool,
    /// Answer /metrics with 404 (like the mock of the golden runs).
    #[arg(long)]
    no_metrics: bool,
    /// Also serve an NVIDIA DCGM exporter's metrics for N GPUs on /metrics (power, a known
    /// energy counter: 50 mJ per generated token per GPU, utilisation, memory), for
    /// --gpu-telemetry
    #[arg(long, value_name = "N", default_value_t = 0)]
    dcgm: usize,
    /// Count prompt tokens (usage.prompt_tokens) and serve /tokenize and /detokenize with
    /// this Hugging Face tokenizer (a tokenizer.json, or a directory holding one), e.g. the
    /// client's --tokenizer, so its input-token totals are the ones it planned. Without it:
    /// a toy tokenizer (one token per whitespace-separated word). Neither adds special
    /// tokens or applies a chat template: a chat message counts its text.
    #[arg(long, value_name = "PATH")]
    tokenizer: Option<PathBuf>,
}

/// `--tokenizer PATH`: a `tokenizer.json`, or a directory holding one.
fn load_tokenizer(path: &Path) -> Result<Tokenizer, String> {
    let file = if path.is_dir() {
        path.join("tokenizer.json")
    } else {
        path.to_path_buf()
    };
    if !file.is_file() {
        return Err(format!(
            "--tokenizer {}: no such file; give a tokenizer.json or a directory holding one",
            file.display()
        ));
    }
    Tokenizer::from_hf_file(&path.to_string_lossy(), &file)
        .map_err(|e| format!("--tokenizer {}: {e:#}", file.display()))
}

/// Milliseconds (fractions allowed) as a `Duration`.
fn millis(s: &str) -> Result<Duration, String> {
    let ms: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number of milliseconds"))?;
    if !ms.is_finite() || !(0.0..=86_400_000.0).contains(&ms) {
        return Err(format!("{s} ms is out of range: give 0 to 86400000"));
    }
    Ok(Duration::from_secs_f64(ms / 1000.0))
}

/// `NAME: VALUE` (the value may be empty).
fn header_line(s: &str) -> Result<(String, String), String> {
    let (name, value) = s
        .split_once(':')
        .ok_or_else(|| format!("'{s}' is not 'NAME: VALUE'"))?;
    Ok((name.trim().to_string(), value.trim().to_string()))
}

/// `--crash-then`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum CrashThen {
    Down,
    Restart,
}

/// A fraction in `[0, 1]`.
fn fraction(s: &str) -> Result<f64, String> {
    let f: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number"))?;
    if !(0.0..=1.0).contains(&f) {
        return Err(format!("{s} is not a fraction between 0 and 1"));
    }
    Ok(f)
}

impl Args {
    fn into_config(self, tokenizer: Option<Tokenizer>) -> MockConfig {
        let zero_if_firehose = |d: Duration| if self.firehose { Duration::ZERO } else { d };
        MockConfig {
            host: self.host,
            port: self.port,
            workers: usize::from(self.workers),
            pin: self.pin || self.core_ids.is_some(),
            first_token_delay: zero_if_firehose(self.first_token_delay_ms),
            token_interval: zero_if_firehose(self.token_interval_ms),
            jitter: zero_if_firehose(self.jitter_ms),
            num_tokens: usize::try_from(self.num_tokens).unwrap_or(usize::MAX),
            tokens_per_chunk: usize::try_from(self.tokens_per_chunk).unwrap_or(usize::MAX),
            reasoning_tokens: usize::try_from(self.reasoning_tokens).unwrap_or(usize::MAX),
            thinking_delay: zero_if_firehose(self.thinking_ms),
            usage: !self.no_usage,
            close_after_response: self.close_after_response,
            faults: FaultConfig {
                error_500: self.fail_500,
                error_429: self.fail_429,
                disconnect: self.fail_disconnect,
                stall: self.fail_stall,
                malformed: self.fail_malformed,
                close_after_head: self.fail_close_after_head,
                endless: self.fail_endless,
                stream_error: self.fail_stream_error,
            },
            stall_for: self.stall_ms,
            seed: self.seed,
            request_log: self.request_log.is_some(),
            timing_report: self.timing_report.is_some(),
            tls: self.tls,
            driver: self.io_driver,
            max_model_len: self.max_model_len,
            tokenize_endpoints: !self.no_tokenize,
            metrics_endpoint: !self.no_metrics,
            dcgm_gpus: self.dcgm,
            padding: self.padding_bytes,
            response_headers: self.response_header,
            crash: self.crash_at.map(|at_request| Crash {
                at_request,
                then: match self.crash_then {
                    CrashThen::Down => AfterCrash::Down,
                    CrashThen::Restart => AfterCrash::Restart,
                },
            }),
            model: self.model,
            core_ids: self.core_ids,
            tokenizer: tokenizer.map(Arc::new),
            slots: self.slots.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
            ..MockConfig::default()
        }
    }
}

/// Set by the SIGINT/SIGTERM handler.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    STOP.store(true, Ordering::SeqCst);
}

fn install_signal_handlers() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: `on_signal` is an `extern "C"` function that only performs an atomic
        // store, which is async-signal-safe; `signal` has no other preconditions.
        unsafe {
            libc::signal(
                sig,
                on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
            );
        }
    }
}

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) if !e.use_stderr() => {
            // --help / --version
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            let msg = e.to_string();
            let line = msg
                .lines()
                .next()
                .unwrap_or("invalid arguments")
                .trim_start_matches("error: ");
            eprintln!("mock-llm-server: {line} (see --help)");
            return ExitCode::from(2);
        }
    };
    let log_path = args.request_log.clone();
    let timing_path = args.timing_report.clone();
    let tokenizer = match args.tokenizer.as_deref().map(load_tokenizer).transpose() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("mock-llm-server: {e}");
            return ExitCode::from(2);
        }
    };
    let cfg = args.into_config(tokenizer);
    if let Err(e) = cfg.validate() {
        eprintln!("mock-llm-server: {e}");
        return ExitCode::from(2);
    }
    install_signal_handlers();
    let server = match MockServer::start(cfg) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("mock-llm-server: {e}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!(
        "listening on {}://{} ({} workers, {})",
        if server.base_url().starts_with("https") {
            "https"
        } else {
            "http"
        },
        server.addr(),
        server.workers(),
        server.driver()
    );
    while !STOP.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = server.request_log();
    let timing = server.timing_report();
    server.shutdown();
    let mut code = ExitCode::SUCCESS;
    if let Some(path) = log_path {
        if let Err(e) = write_log(&path, &log) {
            eprintln!(
                "mock-llm-server: cannot write request log {}: {e}",
                path.display()
            );
            code = ExitCode::FAILURE;
        }
    }
    if let Some(path) = timing_path {
        if let Err(e) = write_timing(&path, &timing) {
            eprintln!(
                "mock-llm-server: cannot write timing report {}: {e}",
                path.display()
            );
            code = ExitCode::FAILURE;
        }
    }
    code
}

fn write_timing(path: &std::path::Path, report: &TimingReport) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    serde_json::to_writer_pretty(&mut out, report)?;
    out.write_all(b"\n")?;
    out.flush()
}

fn write_log(
    path: &std::path::Path,
    log: &[vllm_bench::mock::LoggedRequest],
) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    for entry in log {
        serde_json::to_writer(&mut out, entry)?;
        out.write_all(b"\n")?;
    }
    out.flush()
}
