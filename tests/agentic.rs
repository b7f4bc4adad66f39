//! `--dataset-name agentic_trace` through the binary: the shipped sample traces
//! (`tests/fixtures/agentic/`) described by `--dry-run`, and bad trace files refused with one
//! line naming the file, the trace and the field before anything is sent.

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::util::{run_in_process, TempDir};

fn samples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agentic/traces")
}

fn sample(name: &str) -> String {
    std::fs::read_to_string(samples().join(name)).expect("sample trace")
}

#[test]
fn dry_run_describes_the_sample_trees() {
    let path = samples();
    let out = run_in_process(&[
        "--mock-server",
        "--backend",
        "openai-chat",
        "--dataset-name",
        "agentic_trace",
        "--dataset-path",
        path.to_str().unwrap(),
        "--dry-run",
    ]);
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
    let path = dir.path().join(path);
    let out = run_in_process(&[
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
        path.to_str().expect("utf-8 path"),
    ]);
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
