//! `--dataset-name agentic_trace` through the binary: the shipped sample traces
//! (`tests/fixtures/agentic/`) described by `--dry-run`, and bad trace files refused with one
//! line naming the file, the trace and the field before anything is sent.

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::util::{vllm_bench, TempDir};

fn samples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agentic/traces")
}

fn sample(name: &str) -> String {
    std::fs::read_to_string(samples().join(name)).expect("sample trace")
}

#[test]
fn dry_run_describes_the_sample_trees() {
    let dir = TempDir::new("agentic-dry");
    let path = samples();
    let out = vllm_bench(
        &[
            "--mock-server",
            "--backend",
            "openai-chat",
            "--dataset-name",
            "agentic_trace",
            "--dataset-path",
            path.to_str().unwrap(),
            "--dry-run",
        ],
        dir.path(),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .contains("Streams: 5 (root 3, subagent 2, aux 0, wg 0, fa 0)"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("Branches: 1 joined, 1 background"));
}

/// A loopback listener that counts the bytes of the requests sent to it until dropped. A
/// reachability check may connect, and the control plane's `GET`s (`/v1/models`, `/metrics`,
/// asked in the background while the dataset is read) are not the workload's: only a request
/// of another method (the benchmark's `POST`) counts.
struct Capture {
    url: String,
    bytes: Arc<AtomicUsize>,
    done: Arc<AtomicBool>,
}

impl Capture {
    fn start() -> Capture {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let bytes = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let (n, stop) = (bytes.clone(), done.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((mut s, _)) => {
                        let _ = s.set_nonblocking(false);
                        let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
                        let mut head = [0u8; 1024];
                        let got = s.read(&mut head).unwrap_or(0);
                        if !head[..got].starts_with(b"GET ") {
                            n.fetch_add(got, Ordering::Relaxed);
                        }
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Capture { url, bytes, done }
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
    }
}

/// Runs the binary on `files` (name, text) in a fresh directory against a capturing
/// listener; returns stderr, after checking the exit code, the one line and no connection.
fn refused(files: &[(&str, String)], path: &str) -> String {
    let dir = TempDir::new("agentic-bad");
    for (name, text) in files {
        let file = dir.path().join(name);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }
    let capture = Capture::start();
    let out = vllm_bench(
        &[
            "--base-url",
            &capture.url,
            "--model",
            "m",
            "--skip-tokenizer-init",
            "--backend",
            "openai-chat",
            "--dataset-name",
            "agentic_trace",
            "--dataset-path",
            path,
        ],
        dir.path(),
    );
    assert_ne!(out.code, 0, "{}", out.stdout);
    assert_eq!(out.stderr.trim_end().lines().count(), 1, "{}", out.stderr);
    assert_eq!(capture.bytes.load(Ordering::Relaxed), 0, "nothing is sent");
    out.stderr
}

#[test]
fn an_unknown_key_is_one_line_naming_file_trace_and_field_and_nothing_is_sent() {
    let bad = sample("trace-a.json").replacen("\"ttft\": 0.2", "\"ttft\": 0.2, \"cost\": 3", 1);
    let e = refused(&[("bad.json", bad)], "bad.json");
    assert!(
        e.contains("bad.json") && e.contains("trace \"trace-a\"") && e.contains("`cost`"),
        "{e}"
    );
    assert!(e.contains("line 18"), "the line of the key: {e}");
}

#[test]
fn a_directory_names_the_bad_file_among_good_ones() {
    let bad = sample("trace-c.json").replace("\"type\": \"n\"", "\"type\": \"x\"");
    let files = [("dir/a.json", sample("trace-a.json")), ("dir/c.json", bad)];
    let e = refused(&files, "dir");
    assert!(
        e.contains("c.json") && e.contains("requests[0]: `type` \"x\""),
        "{e}"
    );
}

#[test]
fn a_duplicate_trace_id_names_both_files() {
    let files = [
        ("dir/1.json", sample("trace-a.json")),
        ("dir/2.json", sample("trace-a.json")),
    ];
    let e = refused(&files, "dir");
    assert!(
        e.contains("2.json") && e.contains("1.json") && e.contains("duplicate `id`"),
        "{e}"
    );
}

/// One non-streaming chat request to `addr`; returns the answer's `usage`.
fn chat_usage(addr: std::net::SocketAddr, messages: &str) -> serde_json::Value {
    use std::io::Write;
    let body = format!(r#"{{"model":"mock-model","messages":{messages},"max_tokens":1}}"#);
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    let json = answer.split_once("\r\n\r\n").expect("a head").1;
    let v: serde_json::Value = serde_json::from_str(json).expect(json);
    v["usage"].clone()
}

/// Item 7 of issue 40: the mock's prefix cache answers the replay's prompts. Turn 0 and
/// turn 1 of trace-a's root, built by the replay's own prompt code (one word per token, as
/// the mock's toy tokenizer counts), share the marker and hash blocks 1–3: the second is
/// answered with those tokens cached, in its usage and in `/metrics`; the same turn under
/// another tree's marker hits nothing.
#[test]
fn the_mock_prefix_cache_hits_the_shared_blocks_of_a_tree() {
    use vllm_bench::datasets::agentic::{derive, layouts, marker, prompt, Seeds, WekaTrace};
    use vllm_bench::datasets::timed_trace::TokenSpace;
    use vllm_bench::mock::{MockConfig, MockServer};

    let tree = derive(&WekaTrace::parse(&sample("trace-a.json")).unwrap());
    let root = &tree.streams[0];
    let turns = layouts(root, 64).unwrap();
    let space = TokenSpace::new(50_000, &[]).unwrap();
    let seeds = Seeds::new(0, &tree.id, &root.id);
    let words = |ids: &[u32]| ids.iter().map(|i| format!(" t{i}")).collect::<String>();
    let messages = |turn: usize, pass: u32| {
        let m = marker(7, pass, 0, &tree.id);
        prompt::messages_json(&turns[turn], &space, &seeds, 64, &m, &words)
    };
    let server = MockServer::start(MockConfig::default()).unwrap();
    let metric = |name: &str| -> f64 {
        let mut s = std::net::TcpStream::connect(server.addr()).unwrap();
        std::io::Write::write_all(
            &mut s,
            b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        let line = text
            .lines()
            .find(|l| l.starts_with(name) && !l.starts_with('#'))
            .unwrap_or_else(|| panic!("{name} in {text}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    let first = chat_usage(server.addr(), &messages(0, 0));
    // The marker's word and the 200 tokens of turn 0.
    assert_eq!(first["prompt_tokens"], 201);
    assert!(first.get("prompt_tokens_details").is_none(), "{first}");
    let second = chat_usage(server.addr(), &messages(1, 0));
    assert_eq!(second["prompt_tokens"], 401);
    // Shared: the marker and blocks 1–3 (193 words), 12 whole blocks of the mock's 16.
    assert_eq!(
        second["prompt_tokens_details"]["cached_tokens"], 192,
        "{second}"
    );
    assert_eq!(metric("vllm:prefix_cache_hits_total"), 192.0);
    assert_eq!(metric("vllm:prefix_cache_queries_total"), 602.0);
    // Another tree instance (pass 1): another marker, nothing cached.
    let other = chat_usage(server.addr(), &messages(1, 1));
    assert!(other.get("prompt_tokens_details").is_none(), "{other}");
    assert_eq!(metric("vllm:prefix_cache_hits_total"), 192.0);
}

/// `vllm-bench synthesize agentic`: the same seed writes the same files, the corpus reads as
/// the replay's input, and a directory that holds traces is refused with one line.
#[test]
fn synthesize_writes_a_corpus_the_replay_reads() {
    let dir = TempDir::new("agentic-synth");
    let synth = |out: &str| {
        vllm_bench(
            &[
                "synthesize",
                "agentic",
                "--num-sessions",
                "12",
                "--seed",
                "5",
                "--max-isl",
                "120000",
                "--output",
                out,
            ],
            dir.path(),
        )
    };
    let out = synth("a");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.starts_with("Wrote 12 sessions ("),
        "{}",
        out.stdout
    );
    let files = |d: &str| {
        let mut v: Vec<(String, String)> = std::fs::read_dir(dir.path().join(d))
            .unwrap()
            .map(|e| {
                let p = e.unwrap().path();
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                (name, std::fs::read_to_string(&p).unwrap())
            })
            .collect();
        v.sort();
        v
    };
    assert_eq!(files("a").len(), 12);
    assert_eq!(synth("b").code, 0);
    assert_eq!(files("a"), files("b"), "same seed, same corpus");
    let again = synth("a");
    assert_eq!(again.code, 2);
    assert_eq!(
        again.stderr.trim_end().lines().count(),
        1,
        "{}",
        again.stderr
    );
    assert!(
        again.stderr.contains("already holds *.json"),
        "{}",
        again.stderr
    );
    let dry = vllm_bench(
        &[
            "--mock-server",
            "--backend",
            "openai-chat",
            "--dataset-name",
            "agentic_trace",
            "--dataset-path",
            "a",
            "--dry-run",
        ],
        dir.path(),
    );
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    assert!(
        dry.stdout.contains("Agentic traces: 12 trees"),
        "{}",
        dry.stdout
    );
}
