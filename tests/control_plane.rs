//! The control plane before and after a run (issue 36): waits that stay within the request
//! timeout and overlap, a dry run that asks no server, and errors that point the right way
//! (`https://` to a plain-HTTP server, a `/v1` base URL, a model the server does not list).

use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use vllm_bench::mock::{MockConfig, MockServer};

use crate::util::{run_in_process, Run};

/// A server that accepts connections and never answers, until dropped.
struct Silent {
    addr: String,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Silent {
    fn start() -> Silent {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("addr").to_string();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut held = Vec::new();
            // Bounded: the test ends well before, and stops it.
            let deadline = Instant::now() + Duration::from_secs(120);
            while !stopped.load(Ordering::Relaxed) && Instant::now() < deadline {
                match listener.accept() {
                    Ok((s, _)) => held.push(s),
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        Silent {
            addr,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Silent {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn tokenizer() -> String {
    let t = crate::util::smollm2();
    t.to_str().expect("utf-8 path").to_string()
}

/// The binary against `base_url` with a small random run and `extra` flags.
fn bench(base_url: &str, model: &str, extra: &[&str]) -> Run {
    let tok = tokenizer();
    let mut args = vec![
        "--base-url",
        base_url,
        "--model",
        model,
        "--tokenizer",
        &tok,
        "--random-input-len",
        "16",
        "--random-output-len",
        "4",
        "--num-prompts",
        "5",
        "--disable-tqdm",
    ];
    args.extend_from_slice(extra);
    run_in_process(&args)
}

#[test]
fn a_server_that_never_answers_costs_the_request_timeout_not_15_s() {
    // Issue 36: `--request-timeout-sec 3 --num-prompts 5` took 15.3 s: a 10 s /tokenize
    // wait although --tokenizer was given, then a 2 s /metrics wait. The control-plane waits
    // are now bounded by the request timeout and overlap: about 3 s of them and the run's
    // 3 s. The bound leaves room for a loaded machine and a debug build.
    let silent = Silent::start();
    let url = format!("http://{}", silent.addr);
    let started = Instant::now();
    let out = bench(&url, "m", &["--request-timeout-sec", "3"]);
    let took = started.elapsed();
    assert!(out.stderr.contains("giving up after 3s"), "{}", out.stderr);
    assert!(!out.stderr.contains("10s"), "{}", out.stderr);
    assert!(out.stdout.contains("Failed requests:"), "{}", out.stdout);
    assert!(took < Duration::from_secs(12), "{took:?}\n{}", out.stderr);
}

#[test]
fn a_dry_run_does_not_warn_tokenize_unavailable() {
    // Issue 36: `--dry-run` warned `/tokenize unavailable` although a dry run asks no
    // server. Nothing listens here.
    let out = bench("http://127.0.0.1:9", "m", &["--dry-run"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stderr.contains("/tokenize"), "{}", out.stderr);
}

#[test]
fn an_https_url_to_a_plain_http_server_says_use_http_at_once() {
    // Issue 36: waited 32 s for the TLS handshake's timeout, with no hint.
    let server = MockServer::start(MockConfig::default()).expect("mock");
    let addr = server.addr();
    let started = Instant::now();
    let out = bench(&format!("https://{addr}"), "mock-model", &[]);
    assert_ne!(out.code, 0, "{}", out.stdout);
    assert!(
        out.stderr.contains("the server speaks HTTP, not HTTPS")
            && out.stderr.contains(&format!("(--base-url http://{addr})")),
        "{}",
        out.stderr
    );
    assert!(started.elapsed() < Duration::from_secs(15));
    server.shutdown();
}

#[test]
fn a_base_url_ending_in_v1_says_what_to_drop() {
    // Issue 36: the OpenAI SDK's habit said "pass --tokenizer", then 404'd every request.
    let out = bench("http://127.0.0.1:9/v1", "m", &[]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains(
            "requests would go to http://127.0.0.1:9/v1/v1/completions; drop the /v1 \
             (--base-url http://127.0.0.1:9)"
        ),
        "{}",
        out.stderr
    );
}

#[test]
fn a_model_the_server_does_not_list_warns_naming_what_it_serves() {
    // Issue 36: ran anyway under the wrong name, silently.
    let server = MockServer::start(MockConfig::default()).expect("mock");
    let url = server.base_url();
    let out = bench(&url, "llama-3", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let warned: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("does not list the model llama-3"))
        .collect();
    assert_eq!(warned.len(), 1, "{}", out.stderr);
    assert!(
        warned[0].contains("(it serves mock-model)"),
        "{}",
        warned[0]
    );
    // The name it serves: no warning.
    let out = bench(&url, "mock-model", &[]);
    assert!(!out.stderr.contains("does not list"), "{}", out.stderr);
    server.shutdown();
}
