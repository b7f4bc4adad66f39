//! The engine against the mock server (timing, accounting, concurrency, faults, drivers) and
//! against real servers nobody here wrote (nginx SSE, llama.cpp).

use std::time::Duration;

use vllm_bench::cli::Backend;
use vllm_bench::engine::{Engine, RunReport};
use vllm_bench::http::url::BaseUrl;
use vllm_bench::mock::{FaultConfig, MockConfig, MockServer};
use vllm_bench::runtime::ResolvedDriver;

use crate::util::{auto_driver, endpoint, options, run, start_tool_server, workload};

fn mock(cfg: MockConfig) -> (MockServer, BaseUrl) {
    let server = MockServer::start(cfg).expect("start mock");
    let url = BaseUrl::parse(&server.base_url()).unwrap();
    (server, url)
}

fn timed_mock(ttft_ms: u64, itl_ms: u64) -> MockConfig {
    MockConfig {
        first_token_delay: Duration::from_millis(ttft_ms),
        token_interval: Duration::from_millis(itl_ms),
        ..MockConfig::default()
    }
}

/// A delay no correct run comes near, even on a busy machine; bounds in these tests say "it
/// waited for nothing else", never how fast it was.
const LATE_BOUND: f64 = 2.0;

fn completed(r: &RunReport) -> usize {
    r.merged.outputs.iter().filter(|o| o.success).count()
}

fn mean(xs: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = xs.collect();
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

#[test]
fn every_request_is_accounted_for_and_timed_like_the_server() {
    let _serial = crate::util::serial();
    let (server, url) = mock(timed_mock(30, 5));
    let mut w = workload(&url, Backend::Vllm, "mock-model", 120, 16);
    w.max_concurrency = Some(24);
    let r = run(&url, w, options(2, auto_driver()));
    assert_eq!(r.merged.outputs.len(), 120, "completed + failed = sent");
    assert_eq!(
        completed(&r),
        120,
        "failures: {:?}",
        r.merged.failures_by_kind
    );
    for o in &r.merged.outputs {
        assert_eq!(
            o.output_tokens, 16,
            "usage.completion_tokens is taken from the usage chunk"
        );
        assert_eq!(
            o.itl.len(),
            15,
            "one ITL entry per token event after the first"
        );
        // Never earlier than the server's delay; the upper bound only says the request
        // waited for nothing else (accuracy is bench-overhead's, not a test's: a busy
        // machine deschedules threads for far longer than the client's error).
        assert!(
            o.ttft >= 0.030 && o.ttft < 0.030 + LATE_BOUND,
            "ttft {}",
            o.ttft
        );
        assert!(o.latency >= o.ttft);
        assert!(o.generated_text.starts_with(" tok"));
    }
    let itl = mean(r.merged.outputs.iter().flat_map(|o| o.itl.iter()));
    assert!((0.004..LATE_BOUND).contains(&itl), "mean ITL {itl}");
    assert!(server.stats().peak_in_flight <= 24);
}

#[test]
fn max_concurrency_is_exact_across_cores() {
    let _serial = crate::util::serial();
    let (server, url) = mock(timed_mock(20, 2));
    let mut w = workload(&url, Backend::Vllm, "mock-model", 60, 8);
    w.max_concurrency = Some(7);
    let r = run(&url, w, options(2, auto_driver()));
    assert_eq!(completed(&r), 60);
    let peak = server.stats().peak_in_flight;
    assert!(
        peak <= 7,
        "the mock saw {peak} requests in flight with --max-concurrency 7"
    );
    assert!(peak >= 6, "the limit should be reached, got {peak}");
    assert_eq!(r.workers, 7);
}

#[test]
fn open_loop_arrivals_follow_the_schedule() {
    let _serial = crate::util::serial();
    let (_server, url) = mock(timed_mock(5, 1));
    let mut w = workload(&url, Backend::Vllm, "mock-model", 40, 4);
    let offsets: Vec<Duration> = (0..40).map(|i| Duration::from_millis(10 * i)).collect();
    w.arrivals = Some(offsets.clone().into());
    let r = run(&url, w, options(2, auto_driver()));
    assert_eq!(completed(&r), 40);
    for (o, want) in r.merged.outputs.iter().zip(&offsets) {
        // Never early; the dispatch lag itself is measured by bench-overhead.
        let lag = o.start_time - want.as_secs_f64();
        assert!(
            (0.0..LATE_BOUND).contains(&lag),
            "sent {lag:.4}s after its arrival time"
        );
        assert!(o.client_queue_time < LATE_BOUND);
    }
    assert!(!r.merged.histograms.dispatch_lag.is_empty());
}

#[test]
fn open_and_closed_loop_together_queue_behind_the_limit() {
    let _serial = crate::util::serial();
    let (server, url) = mock(timed_mock(40, 1));
    let mut w = workload(&url, Backend::Vllm, "mock-model", 12, 2);
    w.arrivals = Some(vec![Duration::ZERO; 12].into());
    w.max_concurrency = Some(3);
    let r = run(&url, w, options(2, auto_driver()));
    assert_eq!(completed(&r), 12);
    assert!(server.stats().peak_in_flight <= 3);
    let queued = r
        .merged
        .outputs
        .iter()
        .filter(|o| o.client_queue_time > 0.030)
        .count();
    assert!(
        queued >= 6,
        "requests beyond the limit wait in the client queue ({queued})"
    );
}

#[test]
fn faults_become_failed_requests_with_reasons_never_hangs() {
    let _serial = crate::util::serial();
    let cfg = MockConfig {
        faults: FaultConfig {
            error_500: 0.15,
            error_429: 0.1,
            disconnect: 0.1,
            stall: 0.05,
            malformed: 0.1,
            ..FaultConfig::default()
        },
        stall_for: Duration::from_secs(60),
        num_tokens: 12,
        token_interval: Duration::from_millis(1),
        seed: 7,
        ..MockConfig::default()
    };
    let (server, url) = mock(cfg);
    let mut w = workload(&url, Backend::Vllm, "mock-model", 100, 12);
    w.max_concurrency = Some(20);
    let mut o = options(2, auto_driver());
    o.request_timeout = Duration::from_secs(2);
    let started = std::time::Instant::now();
    let r = run(&url, w, o);
    assert!(
        started.elapsed() < Duration::from_secs(45),
        "stalls are cut by the request timeout"
    );
    assert_eq!(r.merged.outputs.len(), 100, "completed + failed = sent");
    let failed = r.merged.outputs.iter().filter(|o| !o.success).count();
    let kinds = &r.merged.failures_by_kind;
    assert_eq!(failed, kinds.values().sum::<usize>());
    assert!(kinds.get("http_500").copied().unwrap_or(0) > 0, "{kinds:?}");
    assert!(kinds.get("http_429").copied().unwrap_or(0) > 0, "{kinds:?}");
    assert!(kinds.get("timeout").copied().unwrap_or(0) > 0, "{kinds:?}");
    assert!(
        kinds.get("malformed_event").copied().unwrap_or(0) > 0,
        "{kinds:?}"
    );
    assert!(
        kinds.get("disconnected").copied().unwrap_or(0) > 0,
        "{kinds:?}"
    );
    let e500 = r
        .merged
        .outputs
        .iter()
        .find(|o| o.error == "Internal Server Error");
    assert!(e500.is_some(), "a 500 carries Python's reason phrase");
    assert!(r
        .merged
        .outputs
        .iter()
        .any(|o| o.error == "Too Many Requests"));
    let injected = server.stats().faults.total();
    assert_eq!(
        failed as u64, injected,
        "every injected fault is one failed request, nothing else fails"
    );
}

#[test]
fn reconnects_transparently_when_the_server_closes_after_each_response() {
    let cfg = MockConfig {
        close_after_response: true,
        num_tokens: 4,
        ..MockConfig::default()
    };
    let (server, url) = mock(cfg);
    let mut w = workload(&url, Backend::Vllm, "mock-model", 30, 4);
    w.max_concurrency = Some(2);
    let mut o = options(1, auto_driver());
    o.preconnect = true;
    let r = run(&url, w, o);
    assert_eq!(completed(&r), 30, "{:?}", r.merged.failures_by_kind);
    assert!(server.stats().connections_accepted >= 30);
}

#[test]
fn epoll_driver_runs_the_same_workload() {
    let _serial = crate::util::serial();
    let (_server, url) = mock(timed_mock(10, 2));
    let w = workload(&url, Backend::OpenaiChat, "mock-model", 20, 6);
    let r = run(&url, w, options(2, ResolvedDriver::Epoll));
    assert_eq!(completed(&r), 20);
    for o in &r.merged.outputs {
        assert_eq!(
            o.itl.len(),
            5,
            "the opening role chunk of chat is not a token"
        );
        assert_eq!(o.output_tokens, 6);
    }
}

#[test]
fn embeddings_are_whole_responses() {
    let _serial = crate::util::serial();
    let (_server, url) = mock(timed_mock(15, 0));
    let w = workload(&url, Backend::OpenaiEmbeddings, "mock-model", 10, 1);
    let r = run(&url, w, options(1, auto_driver()));
    assert_eq!(completed(&r), 10);
    for o in &r.merged.outputs {
        assert!(o.latency >= 0.015, "latency {}", o.latency);
        assert_eq!(o.prompt_len, 6, "prompt_len comes from usage.prompt_tokens");
    }
}

/// A 200 whose body is not JSON (cut in half here) is a failure, as in Python, whose
/// `await response.json()` raises: it used to count as a success.
#[test]
fn a_whole_body_that_is_not_json_fails_its_request() {
    let (_server, url) = mock(MockConfig {
        faults: FaultConfig {
            malformed: 1.0,
            ..FaultConfig::default()
        },
        ..MockConfig::default()
    });
    let w = workload(&url, Backend::OpenaiEmbeddings, "mock-model", 3, 1);
    let r = run(&url, w, options(1, auto_driver()));
    assert_eq!(completed(&r), 0);
    assert_eq!(r.merged.failures_by_kind.get("malformed_body"), Some(&3));
}

#[test]
fn unreachable_server_fails_every_request_cleanly() {
    let port = crate::util::free_port();
    let url = BaseUrl::http("127.0.0.1", port);
    let w = workload(&url, Backend::Vllm, "m", 5, 4);
    let r = run(&url, w, options(1, auto_driver()));
    assert_eq!(r.merged.outputs.len(), 5);
    assert!(r
        .merged
        .outputs
        .iter()
        .all(|o| !o.success && !o.error.is_empty()));
    assert_eq!(r.merged.failures_by_kind.get("connect"), Some(&5));
}

/// nginx streaming scripted SSE: chunked keep-alive, `\r\n\r\n` framing, events split across
/// HTTP chunks, and a 500 route.
#[test]
fn nginx_sse_real_server() {
    let _serial = crate::util::serial();
    let Some(nginx) = start_tool_server("nginx-sse.sh", &[], &[]) else {
        return;
    };
    for prefix in ["", "/crlf", "/split"] {
        for backend in [Backend::Vllm, Backend::OpenaiChat] {
            let url = BaseUrl::parse(&format!("{}{prefix}", nginx.url)).unwrap();
            let mut w = workload(&url, backend, &nginx.model, 8, 16);
            w.max_concurrency = Some(4);
            let r = run(&url, w, options(2, auto_driver()));
            assert_eq!(
                completed(&r),
                8,
                "{prefix} {backend:?}: {:?}",
                r.merged.failures_by_kind
            );
            for o in &r.merged.outputs {
                assert_eq!(o.output_tokens, 16);
                assert_eq!(o.prompt_len, 10, "usage.prompt_tokens from nginx");
                assert_eq!(o.itl.len(), 15, "{prefix} {backend:?}");
                assert!(o.ttft >= 0.045, "ttft {}", o.ttft);
                assert!(
                    o.generated_text.starts_with(" Shall I compare thee"),
                    "{:?}",
                    o.generated_text
                );
            }
        }
    }
    let url = BaseUrl::parse(&format!("{}/error", nginx.url)).unwrap();
    let r = run(
        &url,
        workload(&url, Backend::Vllm, "m", 3, 4),
        options(1, auto_driver()),
    );
    assert!(r
        .merged
        .outputs
        .iter()
        .all(|o| o.error == "Internal Server Error"));
}

/// llama.cpp serving SmolLM2 on CPU: closes the connection after each stream, sends usage on
/// the final choices chunk (completions) or a separate chunk (chat).
#[test]
fn llama_cpp_real_server() {
    let _serial = crate::util::serial();
    let Some(llama) = start_tool_server("llama-server.sh", &[], &[]) else {
        return;
    };
    let url = BaseUrl::parse(&llama.url).unwrap();
    for backend in [Backend::Vllm, Backend::OpenaiChat] {
        let mut w = workload(&url, backend, &llama.model, 6, 12);
        w.max_concurrency = Some(3);
        let r = run(&url, w, options(1, auto_driver()));
        assert_eq!(
            completed(&r),
            6,
            "{backend:?}: {:?}",
            r.merged.failures_by_kind
        );
        for o in &r.merged.outputs {
            assert!(
                o.output_tokens >= 1 && o.output_tokens <= 12,
                "{backend:?} usage {}",
                o.output_tokens
            );
            assert!(o.prompt_len > 1, "prompt tokens from the server's usage");
            assert!(o.ttft > 0.0 && o.latency >= o.ttft);
        }
    }
}

/// The client over TLS: a self-signed certificate for 127.0.0.1 (made with the `openssl`
/// CLI at test time), served by a tiny monoio-rustls server in a thread of the test.
mod https {
    use std::net::SocketAddr;
    use std::path::{Path, PathBuf};
    use std::process::Command;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{mpsc, Arc};
    use std::thread::JoinHandle;
    use std::time::{Duration, Instant};

    use bytes::Bytes;
    use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
    use monoio::net::{TcpListener, TcpStream};
    use monoio_rustls::TlsAcceptor;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use vllm_bench::cli::Backend;
    use vllm_bench::engine::{self, RunReport};
    use vllm_bench::http::conn::{tls_setup, Endpoint};
    use vllm_bench::http::url::BaseUrl;
    use vllm_bench::runtime::{build_runtime, ResolvedDriver};

    use crate::util::{options, workload};

    /// The server gives up on its own after this long, whatever the test does.
    const SERVER_LIFETIME: Duration = Duration::from_secs(30);
    /// Requests answered per connection at most (keep-alive), so every loop is bounded.
    const MAX_REQUESTS_PER_CONN: usize = 64;
    /// Largest request accepted (head and body).
    const MAX_REQUEST_BYTES: usize = 64 << 10;

    /// A temporary directory holding `cert.pem` and `key.pem`, removed on drop.
    struct CertDir(PathBuf);

    impl Drop for CertDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// A self-signed P-256 certificate for IP 127.0.0.1, or why there is none.
    fn self_signed_cert(tag: &str) -> Result<CertDir, String> {
        let dir = std::env::temp_dir().join(format!("vllm-bench-tls-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {dir:?}: {e}"))?;
        let dir = CertDir(dir);
        let out = Command::new("openssl")
            .args(["req", "-x509", "-nodes", "-days", "1", "-newkey", "ec"])
            .args(["-pkeyopt", "ec_paramgen_curve:prime256v1"])
            .args([
                "-subj",
                "/CN=127.0.0.1",
                "-addext",
                "subjectAltName=IP:127.0.0.1",
            ])
            .arg("-keyout")
            .arg(dir.0.join("key.pem"))
            .arg("-out")
            .arg(dir.0.join("cert.pem"))
            .output()
            .map_err(|e| format!("the openssl CLI is not available ({e})"))?;
        if !out.status.success() {
            return Err(format!(
                "openssl req failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(dir)
    }

    fn acceptor(dir: &Path) -> TlsAcceptor {
        let certs = CertificateDer::pem_file_iter(dir.join("cert.pem"))
            .expect("cert.pem readable")
            .collect::<Result<Vec<_>, _>>()
            .expect("cert.pem parses");
        let key = PrivateKeyDer::from_pem_file(dir.join("key.pem")).expect("key.pem parses");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .expect("certificate and key match");
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        TlsAcceptor::from(config)
    }

    /// One streamed completion of three tokens with usage, framed by `Content-Length`.
    fn sse_response() -> Vec<u8> {
        let mut body = String::new();
        for tok in [" one", " two", " three"] {
            body.push_str(&format!(
                "data: {{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":0,\
                 \"model\":\"m\",\"choices\":[{{\"index\":0,\"text\":\"{tok}\",\
                 \"logprobs\":null,\"finish_reason\":null}}]}}\n\n"
            ));
        }
        body.push_str(
            "data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":0,\
             \"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":5,\
             \"completion_tokens\":3,\"total_tokens\":8}}\n\ndata: [DONE]\n\n",
        );
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    }

    /// Position just past the head's blank line, if the head is complete.
    fn head_end(buf: &[u8]) -> Option<usize> {
        buf.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4)
    }

    /// The request's `Content-Length` (0 when absent).
    fn content_length(head: &[u8]) -> usize {
        String::from_utf8_lossy(head)
            .lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Reads one whole request into `buf` (dropping it afterwards); false at EOF or error.
    async fn read_request<S: AsyncReadRent>(s: &mut S, buf: &mut Vec<u8>) -> bool {
        loop {
            if let Some(end) = head_end(buf) {
                let total = end + content_length(&buf[..end]);
                if buf.len() >= total {
                    buf.drain(..total);
                    return true;
                }
            }
            if buf.len() > MAX_REQUEST_BYTES {
                return false;
            }
            let (res, chunk) = s.read(Vec::with_capacity(8192)).await;
            match res {
                Ok(n) if n > 0 => buf.extend_from_slice(&chunk),
                _ => return false,
            }
        }
    }

    async fn serve_conn(acceptor: TlsAcceptor, tcp: TcpStream, response: Bytes) {
        // A client that rejects our certificate aborts the handshake: nothing to serve.
        let Ok(mut tls) = acceptor.accept(tcp).await else {
            return;
        };
        let mut buf = Vec::new();
        for _ in 0..MAX_REQUESTS_PER_CONN {
            if !read_request(&mut tls, &mut buf).await {
                return;
            }
            let (res, _) = tls.write_all(response.clone()).await;
            if res.is_err() {
                return;
            }
        }
    }

    /// The HTTPS server: its address, a stop flag, and its thread.
    struct Server {
        addr: SocketAddr,
        stop: Arc<AtomicBool>,
        thread: Option<JoinHandle<()>>,
    }

    impl Drop for Server {
        fn drop(&mut self) {
            self.stop.store(true, Ordering::Relaxed);
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        }
    }

    fn start_server(acceptor: TlsAcceptor) -> Server {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel();
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut rt = build_runtime(ResolvedDriver::Epoll).expect("server runtime");
            rt.block_on(async move {
                let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
                tx.send(listener.local_addr().expect("local addr")).unwrap();
                let response = Bytes::from(sse_response());
                let accept = async {
                    loop {
                        if let Ok((tcp, _)) = listener.accept().await {
                            monoio::spawn(serve_conn(acceptor.clone(), tcp, response.clone()));
                        }
                    }
                };
                let deadline = Instant::now() + SERVER_LIFETIME;
                let until_stop = async {
                    while !flag.load(Ordering::Relaxed) && Instant::now() < deadline {
                        monoio::time::sleep(Duration::from_millis(10)).await;
                    }
                };
                monoio::select! {
                    () = accept => {},
                    () = until_stop => {},
                }
            });
        });
        let addr = rx.recv().expect("server reports its address");
        Server {
            addr,
            stop,
            thread: Some(thread),
        }
    }

    /// Runs `n` streamed completions against the server over TLS.
    fn run_tls(server: &Server, insecure: bool, n: usize) -> RunReport {
        let url = BaseUrl::parse(&format!("https://{}", server.addr)).unwrap();
        let w = workload(&url, Backend::Vllm, "m", n, 3);
        let endpoint = Endpoint {
            addr: server.addr,
            tls: Some(tls_setup("127.0.0.1", insecure).expect("tls setup")),
            connect_timeout: Duration::from_secs(5),
            source: Default::default(),
        };
        let mut o = options(1, crate::util::auto_driver());
        o.request_timeout = Duration::from_secs(10);
        engine::run(endpoint, w, o, |_| {}).expect("engine run")
    }

    #[test]
    fn streams_over_tls_with_insecure_and_rejects_the_self_signed_cert_without() {
        let dir = match self_signed_cert("engine") {
            Ok(d) => d,
            Err(why) => {
                crate::util::skip_or_fail("a self-signed certificate (openssl)", &why);
                return;
            }
        };
        let server = start_server(acceptor(&dir.0));

        let r = run_tls(&server, true, 8);
        assert_eq!(r.merged.outputs.len(), 8);
        for o in &r.merged.outputs {
            assert!(o.success, "{}", o.error);
            assert_eq!(o.output_tokens, 3, "usage read from the decrypted stream");
            assert_eq!(o.generated_text, " one two three");
        }

        let r = run_tls(&server, false, 2);
        assert_eq!(r.merged.failures_by_kind.get("connect"), Some(&2));
        for o in &r.merged.outputs {
            assert!(!o.success);
            assert!(
                o.error.contains("invalid peer certificate") && !o.error.contains('\n'),
                "one clear certificate reason: {}",
                o.error
            );
        }
    }
}

/// The persistent engine: several runs on one engine give what separate engines give, on the
/// same kept-alive connections (a monoio connection cannot leave its thread's runtime, so the
/// mock accepting only the first run's connections shows the threads and rings lived on).
#[test]
fn one_engine_runs_many_workloads_on_its_kept_alive_connections() {
    let (server, url) = mock(timed_mock(2, 1));
    let mut opts = options(2, auto_driver());
    opts.preconnect = true;
    let make = || {
        let mut w = workload(&url, Backend::Vllm, "mock-model", 30, 6);
        w.max_concurrency = Some(4);
        w
    };
    let engine = Engine::start(endpoint(&url), opts.clone()).expect("engine starts");
    let threads = engine.thread_ids();
    assert_eq!(threads.len(), 2);
    let runs: Vec<RunReport> = (0..3)
        .map(|_| engine.run(make(), |_| {}).expect("run"))
        .collect();
    assert_eq!(engine.thread_ids(), threads);
    assert_eq!(
        server.stats().connections_accepted,
        4,
        "the 4 workers' connections are opened once and kept for every run"
    );
    let separate = run(&url, make(), opts);
    let shape = |r: &RunReport| -> Vec<(bool, u64, String)> {
        r.merged
            .outputs
            .iter()
            .map(|o| (o.success, o.output_tokens, o.generated_text.clone()))
            .collect()
    };
    for r in &runs {
        assert_eq!(completed(r), 30, "{:?}", r.merged.failures_by_kind);
        assert_eq!(shape(r), shape(&separate));
    }
    engine.shutdown();
}

/// A stopped run leaves nothing behind: the next run on the same engine runs in full.
#[test]
fn a_run_after_a_stopped_run_is_complete() {
    let (_server, url) = mock(timed_mock(2, 1));
    let engine = Engine::start(endpoint(&url), options(2, auto_driver())).expect("engine");
    let mut w = workload(&url, Backend::Vllm, "mock-model", 40, 4);
    // Arrivals a minute apart: every worker waits, so only the stop can end the run.
    w.arrivals = Some((0..40).map(|i| Duration::from_secs(60 * i)).collect());
    let stopped = engine.run(w, |p| p.stop()).expect("stopped run");
    assert_eq!(
        stopped.merged.outputs.len() + stopped.not_sent,
        40,
        "every request accounted for"
    );
    assert!(stopped.not_sent >= 39, "not sent: {}", stopped.not_sent);
    let full = engine
        .run(workload(&url, Backend::Vllm, "mock-model", 20, 4), |_| {})
        .expect("next run");
    assert_eq!((completed(&full), full.not_sent), (20, 0));
}

/// Sessions: each session's requests run in order, each sent only after the previous one
/// ended plus its delay, on one connection; the source sees every reply's text; the workers
/// (the concurrency limit) hold across sessions.
mod sessions {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use vllm_bench::engine::session::{FollowUps, NextRequest, Reply, SessionSource};
    use vllm_bench::engine::Workload;
    use vllm_bench::http::request::PreparedRequest;
    use vllm_bench::mock::MockConfig;

    use super::*;

    const SESSIONS: usize = 6;
    const TURNS: usize = 3;
    const THINK: Duration = Duration::from_millis(30);

    /// Turn `t` of session `s` is the flat workload's request `s * TURNS + t`.
    struct Source {
        requests: Arc<[PreparedRequest]>,
        replies: Mutex<Vec<(usize, String)>>,
    }

    impl SessionSource for Source {
        fn total(&self) -> usize {
            SESSIONS * TURNS
        }
        fn turns(&self, _session: usize) -> usize {
            TURNS
        }
        fn record(&self, session: usize, turn: usize) -> usize {
            session * TURNS + turn
        }
        fn follow(&self, session: usize) -> Box<dyn FollowUps + '_> {
            Box::new(Follow {
                source: self,
                session,
                turn: 0,
            })
        }
    }

    struct Follow<'a> {
        source: &'a Source,
        session: usize,
        turn: usize,
    }

    impl FollowUps for Follow<'_> {
        fn next(&mut self, reply: &Reply<'_>) -> Option<NextRequest> {
            let done = self.session * TURNS + self.turn;
            self.source
                .replies
                .lock()
                .unwrap()
                .push((done, reply.text.to_string()));
            self.turn += 1;
            Some(NextRequest {
                request: self.source.requests[done + 1].clone(),
                client_prompt_len: 5,
                delay: THINK,
                not_before: Duration::ZERO,
            })
        }
    }

    /// SESSIONS sessions of TURNS requests of `output_len` tokens, from one [`Source`].
    fn sessions_workload(url: &BaseUrl, output_len: usize) -> (Workload, Arc<Source>) {
        let flat = workload(
            url,
            Backend::Vllm,
            "mock-model",
            SESSIONS * TURNS,
            output_len,
        );
        let source = Arc::new(Source {
            requests: flat.requests.clone(),
            replies: Mutex::new(Vec::new()),
        });
        let mut w = flat.clone();
        w.requests = (0..SESSIONS)
            .map(|s| flat.requests[s * TURNS].clone())
            .collect();
        w.client_prompt_lens = vec![5; SESSIONS].into();
        w.sessions = Some(source.clone());
        (w, source)
    }

    #[test]
    fn turns_run_in_order_after_their_think_time_on_one_connection() {
        let (server, url) = mock(MockConfig {
            request_log: true,
            ..timed_mock(5, 1)
        });
        let (mut w, source) = sessions_workload(&url, 4);
        w.max_concurrency = Some(2);
        let report = run(&url, w, options(2, auto_driver()));
        assert_eq!(completed(&report), SESSIONS * TURNS);
        assert_eq!((report.not_sent, report.workers), (0, 2));
        let records = &report.merged.records;
        for s in 0..SESSIONS {
            for t in 1..TURNS {
                let (prev, this) = (&records[s * TURNS + t - 1], &records[s * TURNS + t]);
                assert!(
                    this.start_ns >= prev.end_ns + THINK.as_nanos() as u64,
                    "session {s} turn {t} sent {} ns after the previous end",
                    this.start_ns as i64 - prev.end_ns as i64
                );
            }
        }
        let outputs = &report.merged.outputs;
        let replies = source.replies.lock().unwrap();
        assert_eq!(replies.len(), SESSIONS * (TURNS - 1));
        for (done, text) in replies.iter() {
            assert_eq!(text, &outputs[*done].generated_text);
            assert!(!text.is_empty());
        }
        let log = server.request_log();
        assert!(server.stats().peak_in_flight <= 2);
        for s in 0..SESSIONS {
            let ids: Vec<String> = (0..TURNS)
                .map(|t| format!("test-{}", s * TURNS + t))
                .collect();
            let turns: Vec<_> = log
                .iter()
                .filter(|r| r.request_id.as_ref().is_some_and(|id| ids.contains(id)))
                .collect();
            let order: Vec<_> = turns
                .iter()
                .map(|r| r.request_id.clone().unwrap())
                .collect();
            assert_eq!(order, ids, "session {s} arrives in order");
            assert!(
                turns.iter().all(|r| r.connection == turns[0].connection),
                "session {s} stays on one connection"
            );
        }
    }

    /// A session whose request fails ends there: its later requests are not sent, and the
    /// report says why.
    #[test]
    fn a_failed_turn_ends_its_session() {
        let (_server, url) = mock(MockConfig {
            faults: FaultConfig {
                error_500: 0.5,
                ..FaultConfig::default()
            },
            ..timed_mock(1, 1)
        });
        let (mut w, _) = sessions_workload(&url, 2);
        w.max_concurrency = Some(1);
        let report = run(&url, w, options(1, auto_driver()));
        let sent = report.merged.outputs.len();
        let failed = report.merged.outputs.iter().filter(|o| !o.success).count();
        assert!(failed > 0);
        assert_eq!(sent + report.not_sent, SESSIONS * TURNS);
        assert_eq!(report.not_sent, report.not_sent_session_ended);
        assert!(report.not_sent > 0);
        // Per session, the requests sent are its first turns, and only the last may fail.
        let records = &report.merged.records;
        for s in 0..SESSIONS {
            let sent: Vec<_> = records
                .iter()
                .filter(|r| r.index as usize / TURNS == s)
                .collect();
            let turns: Vec<usize> = sent.iter().map(|r| r.index as usize % TURNS).collect();
            assert_eq!(turns, (0..sent.len()).collect::<Vec<_>>(), "session {s}");
            let failed_before_last = sent[..sent.len() - 1].iter().any(|r| r.failure.is_some());
            assert!(!failed_before_last, "session {s} went on after a failure");
            let ended_early = sent.len() < TURNS;
            assert_eq!(ended_early, sent.last().unwrap().failure.is_some());
        }
    }
}

/// A server that closes its first connection at once (a keep-alive timeout that passed while
/// a pre-opened connection idled) and answers one streamed completion on the next.
fn close_first_then_answer() -> (std::thread::JoinHandle<usize>, BaseUrl) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = BaseUrl::parse(&format!("http://{}", listener.local_addr().unwrap())).unwrap();
    listener.set_nonblocking(true).unwrap();
    let server = std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let mut accepted = 0;
        while accepted < 2 && std::time::Instant::now() < deadline {
            let Ok((mut s, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            };
            accepted += 1;
            if accepted == 1 {
                drop(s);
                continue;
            }
            s.set_nonblocking(false).unwrap();
            let mut req = Vec::new();
            let mut buf = [0u8; 4096];
            while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = s.read(&mut buf).unwrap_or(0);
                if n == 0 {
                    return accepted;
                }
                req.extend_from_slice(&buf[..n]);
            }
            let body = "data: {\"choices\":[{\"index\":0,\"text\":\" a\"}]}\n\n\
                        data: {\"choices\":[{\"index\":0,\"text\":\" b\",\"finish_reason\":\"length\"}],\
                        \"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2}}\n\n\
                        data: [DONE]\n\n";
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            let _ = s.write_all(head.as_bytes());
            let _ = s.write_all(body.as_bytes());
        }
        accepted
    });
    (server, url)
}

#[test]
fn a_pre_opened_connection_the_server_closed_is_retried_once() {
    let (server, url) = close_first_then_answer();
    let mut opts = options(1, auto_driver());
    opts.preconnect = true;
    let w = workload(&url, Backend::Vllm, "m", 1, 2);
    let r = run(&url, w, opts);
    assert_eq!(completed(&r), 1, "{:?}", r.merged.failures_by_kind);
    assert_eq!(r.merged.outputs[0].output_tokens, 2);
    assert_eq!(server.join().unwrap(), 2, "one closed, one answered");
}

/// A server that answers one streamed completion of `events` tokens with the whole response
/// in a single write, so the client finds far more bytes waiting than a read buffer holds.
fn answer_at_once(events: usize) -> (std::thread::JoinHandle<bool>, BaseUrl) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = BaseUrl::parse(&format!("http://{}", listener.local_addr().unwrap())).unwrap();
    let server = std::thread::spawn(move || {
        let Ok((mut s, _)) = listener.accept() else {
            return false;
        };
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut req = Vec::new();
        let mut buf = [0u8; 4096];
        while !req.windows(4).any(|w| w == b"\r\n\r\n") {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => return false,
                Ok(n) => req.extend_from_slice(&buf[..n]),
            }
        }
        let mut body = String::new();
        for i in 0..events {
            body.push_str(&format!(
                "data: {{\"choices\":[{{\"index\":0,\"text\":\" t{i}\"}}]}}\n\n"
            ));
        }
        body.push_str(&format!(
            "data: {{\"choices\":[],\"usage\":{{\"prompt_tokens\":5,\"completion_tokens\":{events}}}}}\n\n\
             data: [DONE]\n\n"
        ));
        let mut response = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        response.extend_from_slice(body.as_bytes());
        let written = s.write_all(&response).is_ok();
        // Hold the connection until the client is done with it (or the timeout above).
        while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
        written
    });
    (server, url)
}

/// Bytes waiting beyond a read buffer are drained without waiting (several drain rounds and
/// ring reads here: ~110 KB at once), and every event in them is counted, in order.
#[test]
fn a_response_that_arrives_at_once_is_read_whole() {
    const EVENTS: usize = 2000;
    let (server, url) = answer_at_once(EVENTS);
    let w = workload(&url, Backend::Vllm, "m", 1, EVENTS);
    let r = run(&url, w, options(1, auto_driver()));
    assert_eq!(completed(&r), 1, "{:?}", r.merged.failures_by_kind);
    let o = &r.merged.outputs[0];
    assert_eq!(o.output_tokens, EVENTS as u64);
    assert_eq!(o.itl.len(), EVENTS - 1);
    let expected: String = (0..EVENTS).map(|i| format!(" t{i}")).collect();
    assert_eq!(o.generated_text, expected);
    assert!(
        server.join().unwrap(),
        "the server wrote the whole response"
    );
}
