//! Integration tests: timed-trace replay wired into the program (`--dataset-name
//! timed_trace`): the seed's command line, the schedule and the shared prompt blocks seen by
//! the mock, a real replay of the Mooncake trace's first 300 records, and llama.cpp.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use vllm_bench::backends::Api;
use vllm_bench::cli::{self, Backend};
use vllm_bench::config::{Config, DatasetParams};
use vllm_bench::datasets::timed_trace::{OnMalformed, TraceFormat};
use vllm_bench::engine::{self, Workload};
use vllm_bench::http::request::{HeadTemplate, Method};
use vllm_bench::http::url::BaseUrl;
use vllm_bench::mock::{MockConfig, MockServer};
use vllm_bench::modes::trace::TraceReplay;
use vllm_bench::tokenizer::Tokenizer;

use crate::util::{auto_driver, endpoint, fixture, options, start_tool_server, MOONCAKE};

const SEED: &str = "seeds/000_4d298e7c2df881de.txt";

/// `tests/data/traces/<name>` as an argument.
fn trace_file(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/traces")
        .join(name)
        .display()
        .to_string()
}

fn config(args: &[&str]) -> Result<Config, String> {
    let cli = cli::parse_from(std::iter::once("vllm-bench").chain(args.iter().copied()))
        .map_err(|e| e.to_string())?;
    Config::from_cli(cli).map_err(|e| e.to_string())
}

/// The seed's `vllm bench serve ...` arguments (a shell line continued with `\`).
fn seed_args() -> Vec<String> {
    let text = std::fs::read_to_string(fixture(SEED)).expect("the seed file");
    let start = text
        .find("vllm bench serve")
        .expect("a command in the seed");
    let mut words = Vec::new();
    for line in text[start..].lines() {
        let continued = line.trim_end().ends_with('\\');
        words.extend(
            line.trim_end()
                .trim_end_matches('\\')
                .split_whitespace()
                .map(str::to_string),
        );
        if !continued {
            break;
        }
    }
    assert_eq!(&words[..3], ["vllm", "bench", "serve"]);
    words.split_off(3)
}

/// Replaces the value of `--flag VALUE` or `--flag=VALUE` in `args`.
fn set(args: &mut Vec<String>, flag: &str, value: &str) {
    let eq = format!("{flag}=");
    if let Some(i) = args.iter().position(|a| a == flag) {
        args[i + 1] = value.to_string();
    } else if let Some(i) = args.iter().position(|a| a.starts_with(&eq)) {
        args[i] = format!("{eq}{value}");
    } else {
        args.extend([flag.to_string(), value.to_string()]);
    }
}

fn remove(args: &mut Vec<String>, flag: &str) {
    if let Some(i) = args.iter().position(|a| a == flag) {
        args.drain(i..i + 2);
    }
}

/// Runs the program (in process); returns its stdout (panics with stderr on failure).
fn run_program(args: &[String]) -> String {
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = crate::util::run_in_process(&argv);
    assert!(
        out.code == 0,
        "{args:?}\nstdout:\n{}\nstderr:\n{}",
        out.stdout,
        out.stderr
    );
    out.stdout
}

fn result_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("vllm-bench-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn read_result(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join("r.json")).expect("the result file");
    let _ = std::fs::remove_dir_all(dir);
    serde_json::from_str(&text).expect("result JSON")
}

#[test]
fn seed_command_line_resolves_to_a_self_timed_mooncake_replay() {
    let args = seed_args();
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let cfg = config(&refs).unwrap();
    let DatasetParams::TimedTrace(p) = &cfg.dataset.params else {
        panic!("not a trace replay: {:?}", cfg.dataset.params);
    };
    assert_eq!(p.chunk_hash_size, 512);
    assert_eq!(p.read.sec_multiplier, 0.001);
    assert_eq!(
        (
            p.read.labels.timestamp.as_str(),
            p.read.labels.hash_ids.as_str()
        ),
        ("timestamp", "hash_ids")
    );
    assert_eq!(p.read.format, None);
    assert!(!p.prompt_text);
    assert!(cfg.rate.self_timed && cfg.request.ignore_eos);
    assert_eq!(cfg.dataset.num_prompts, 50);
}

#[test]
fn seed_command_line_runs_against_the_embedded_mock() {
    let mut args = seed_args();
    remove(&mut args, "--host");
    remove(&mut args, "--port");
    args.push("--mock-server".into());
    // A small trace: the first 6 records span 1.6 s at the seed's multiplier 0.001.
    set(
        &mut args,
        "--dataset-path",
        &trace_file("mooncake_small.jsonl"),
    );
    set(&mut args, "--num-prompts", "6");
    let dir = result_dir("seed");
    args.extend(
        [
            "--disable-tqdm",
            "--save-result",
            "--result-filename",
            "r.json",
            "--result-dir",
        ]
        .map(String::from),
    );
    args.push(dir.display().to_string());
    let stdout = run_program(&args);
    assert!(
        stdout.contains("Self timing is set, using the timestamps from the trace file."),
        "{stdout}"
    );
    assert!(
        stdout.contains("Ideal prefix-cache hit ratio (tokens):"),
        "{stdout}"
    );
    let doc = read_result(&dir);
    assert_eq!(doc["completed"], 6);
    // Input lengths of the first six records: 10+12+7+14+9+16.
    assert_eq!(doc["total_input_tokens"], 68);
    assert!(
        doc["vllm_bench_trace_ideal_prefix_hit_ratio"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    assert!(
        doc["vllm_bench_server_prefix_hit_ratio"].is_number(),
        "the mock has counters"
    );
}

#[test]
fn dry_run_prints_the_trace_summary() {
    let stdout = run_program(
        &[
            "--mock-server",
            "--model",
            "m",
            "--dataset-name",
            "timed_trace",
            "--dataset-path",
            &trace_file("mooncake_small.jsonl"),
            "--timed-trace-chunk-hash-size",
            "4",
            "--timed-trace-format",
            "mooncake",
            "--dry-run",
        ]
        .map(String::from),
    );
    assert!(stdout.contains("Trace Summary"), "{stdout}");
    assert!(
        stdout.contains("Ideal prefix cache hit (tokens, %):"),
        "{stdout}"
    );
    assert!(!stdout.contains("Starting main benchmark run"), "{stdout}");
}

#[test]
fn trace_flags_resolve_and_are_checked() {
    let path = trace_file("mooncake_small.jsonl");
    let base = ["--dataset-name", "timed_trace", "--dataset-path", &path];
    let with = |extra: &[&str]| {
        let mut a = base.to_vec();
        a.extend_from_slice(extra);
        config(&a)
    };
    let cfg = with(&[
        "--timed-trace-format",
        "bailian",
        "--timed-trace-start-sec",
        "2.5",
        "--timed-trace-duration-sec",
        "10",
        "--timed-trace-rebase",
        "--timed-trace-skip-malformed",
        "--backend",
        "openai-chat",
        "--endpoint",
        "/v1/chat/completions",
    ])
    .unwrap();
    let DatasetParams::TimedTrace(p) = &cfg.dataset.params else {
        panic!("not a trace replay");
    };
    assert_eq!(p.read.format, Some(TraceFormat::Bailian));
    assert_eq!(
        (
            p.read.window.start_s,
            p.read.window.duration_s,
            p.read.window.rebase
        ),
        (2.5, Some(10.0), true)
    );
    assert_eq!(p.read.on_malformed, OnMalformed::Skip);
    assert!(p.prompt_text, "chat always sends text");
    assert!(!with(&["--no-self-timed"]).unwrap().rate.self_timed);
    for (args, flag) in [
        (
            &["--timed-trace-duration-sec", "0"][..],
            "--timed-trace-duration-sec",
        ),
        (
            &["--timed-trace-start-sec", "-1"][..],
            "--timed-trace-start-sec",
        ),
        (
            &["--backend", "openai-embeddings"][..],
            "--dataset-name timed_trace",
        ),
    ] {
        let e = with(args).unwrap_err();
        assert!(e.starts_with(flag), "{e}");
    }
    let e = config(&["--dataset-name", "timed_trace"]).unwrap_err();
    assert!(e.starts_with("--dataset-path"), "{e}");
    let e = config(&["--self-timed"]).unwrap_err();
    assert!(
        e.contains("only valid with --dataset-name timed_trace"),
        "{e}"
    );
}

/// Replays the small fixture in-process against the mock: arrivals follow the trace, the
/// mock receives each record's exact prompt length, and records sharing leading hash ids
/// share the very same block buffers.
#[test]
fn in_process_replay_follows_the_trace_and_shares_blocks() {
    let server = MockServer::start(MockConfig {
        request_log: true,
        ..MockConfig::default()
    })
    .expect("mock starts");
    let url = BaseUrl::parse(&server.base_url()).unwrap();
    let path = trace_file("mooncake_small.jsonl");
    let cfg = config(&[
        "--base-url",
        &server.base_url(),
        "--model",
        "mock-model",
        "--dataset-name",
        "timed_trace",
        "--dataset-path",
        &path,
        "--num-prompts",
        "6",
        "--timed-trace-chunk-hash-size",
        "4",
        "--timed-trace-sec-multiplier",
        "0.0005",
    ])
    .unwrap();
    let DatasetParams::TimedTrace(p) = &cfg.dataset.params else {
        panic!("not a trace replay");
    };
    let replay =
        TraceReplay::load(&cfg, p, &vllm_bench::output::stdio::Console::capture().0).unwrap();
    let tok =
        Tokenizer::from_hf_file("smollm2", crate::util::smollm2().join("tokenizer.json")).unwrap();
    let api = Api::for_backend(Backend::Vllm).unwrap();
    let head = HeadTemplate::new(
        Method::Post,
        &url.request_path("/v1/completions"),
        &url.host_header(),
        &[],
    );
    let opts = vllm_bench::backends::BodyOptions {
        model: "mock-model".into(),
        ignore_eos: true,
        ..Default::default()
    };
    // One thread: with several, two records may build a block at the same moment and keep
    // equal copies (bounded by the threads; see the block cache), which would make the
    // identity checks below racy.
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let requests = pool
        .install(|| replay.prepare(api, &head, &|_| &opts, "trace-", Some(&tok)))
        .unwrap();
    assert_eq!(requests.len(), 6);

    // Records 0 and 1 share hash ids [0, 1]: their first two block parts (after the head,
    // the body head and `[`) are the same buffers, not equal copies.
    let block = |r: usize, b: usize| requests[r].parts[3 + b].as_ptr();
    assert_eq!(block(0, 1), block(1, 1));
    assert_ne!(block(0, 2), block(1, 2), "hash ids 2 and 3 differ");
    // Record 3 (hash ids [0]) starts with record 0's first block, cut to 4 tokens.
    assert_eq!(block(3, 0), block(0, 0));

    let offsets = replay.arrival_offsets();
    let workload = Workload {
        client_prompt_lens: replay.prompt_lens().into(),
        arrivals: Some(
            offsets
                .iter()
                .map(|&s| Duration::from_secs_f64(s))
                .collect(),
        ),
        max_concurrency: None,
        mode: api.response_mode(),
        sessions: None,
        probe: None,
        replica_of: None,
        cancel: None,
        time_bound: None,
        expected_tokens: 8,
        requests: requests.clone().into(),
    };
    let report = engine::run(endpoint(&url), workload, options(1, auto_driver()), |_| {})
        .expect("engine run");
    assert!(report.merged.outputs.iter().all(|o| o.success));

    let log: HashMap<String, _> = server
        .request_log()
        .into_iter()
        .filter_map(|l| l.request_id.clone().map(|id| (id, l)))
        .collect();
    let inputs = replay.prompt_lens();
    for (i, req) in requests.iter().enumerate() {
        let l = &log[&format!("trace-{i}")];
        assert_eq!(l.prompt_tokens, Some(u64::from(inputs[i])), "record {i}");
        let wire = req.to_vec();
        let body_at = memchr::memmem::find(&wire, b"\r\n\r\n").unwrap() + 4;
        assert_eq!(l.body_len, wire.len() - body_at, "record {i}");
        // Sent when the trace says (scaled 0.0005: 0, 0, 125, 250, 750, 800 ms): never
        // early, and waiting for nothing else (how close is bench-overhead's to measure).
        let sent = report.merged.outputs[i].start_time;
        assert!(
            sent >= offsets[i] - 1e-6 && sent < offsets[i] + 2.0,
            "record {i}: sent at {sent:.3} s, trace says {:.3} s",
            offsets[i]
        );
    }
    // Whole bodies parse, and the shared leading blocks are equal token for token.
    let prompt = |i: usize| -> Vec<u64> {
        let wire = requests[i].to_vec();
        let at = memchr::memmem::find(&wire, b"\r\n\r\n").unwrap() + 4;
        let v: Value = serde_json::from_slice(&wire[at..]).unwrap();
        v["prompt"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect()
    };
    let (a, b) = (prompt(0), prompt(1));
    assert_eq!(a[..8], b[..8], "two shared blocks of 4 tokens");
    assert_ne!(a[8..10], b[8..10]);
    assert_eq!(prompt(3)[..4], a[..4]);
}

/// Python's golden run 04 (first 40 Mooncake records, chunk 512, multiplier 0.0001) through
/// our binary against the embedded mock: the same requests, input and output token totals.
#[test]
fn golden_timed_trace_run_has_pythons_token_totals() {
    let golden = fixture("golden/python-0.33/04-timed-trace-conversation40");
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(golden.join("result.json")).unwrap())
            .unwrap();
    let trace = fixture(MOONCAKE);
    let dir = result_dir("golden04");
    let args: Vec<String> = [
        "--mock-server",
        "--model",
        "mock-model",
        "--backend",
        "vllm",
        "--dataset-name",
        "timed_trace",
        "--dataset-path",
        &trace.display().to_string(),
        "--num-prompts",
        "40",
        "--timed-trace-chunk-hash-size",
        "512",
        "--timed-trace-sec-multiplier",
        "0.0001",
        "--disable-tqdm",
        "--save-result",
        "--result-filename",
        "r.json",
        "--result-dir",
        &dir.display().to_string(),
    ]
    .map(String::from)
    .to_vec();
    run_program(&args);
    let doc = read_result(&dir);
    for key in ["completed", "total_input_tokens", "total_output_tokens"] {
        assert_eq!(doc[key], expected[key], "{key}");
    }
}

/// `MOONCAKE_300`: the first 300 records of the published conversation trace, replayed 20,000×
/// faster than recorded against the embedded mock.
#[test]
fn first_300_mooncake_records_replay_against_the_mock() {
    let trace = fixture(MOONCAKE);
    assert!(trace.exists(), "{} is missing", trace.display());
    let dir = result_dir("mooncake300");
    let args: Vec<String> = [
        "--mock-server",
        "--dataset-name",
        "timed_trace",
        "--dataset-path",
        &trace.display().to_string(),
        "--num-prompts",
        "300",
        "--timed-trace-chunk-hash-size",
        "512",
        "--timed-trace-sec-multiplier",
        "0.00005",
        "--disable-tqdm",
        "--save-result",
        "--result-filename",
        "r.json",
        "--result-dir",
        &dir.display().to_string(),
    ]
    .map(String::from)
    .to_vec();
    run_program(&args);
    let doc = read_result(&dir);
    assert_eq!(doc["completed"], 300);
    assert_eq!(doc["failed"], 0);
    let ideal = doc["vllm_bench_trace_ideal_prefix_hit_ratio"]
        .as_f64()
        .unwrap();
    assert!(ideal > 0.0 && ideal < 1.0, "{ideal}");
}

/// llama.cpp (SmolLM2, 1024 tokens per slot) accepts token-id prompts: a short trace with
/// 16-token blocks, once as token ids and once as decoded text.
#[test]
fn short_trace_replays_against_llama_cpp() {
    let Some(llama) = start_tool_server("llama-server.sh", &[], &[]) else {
        return;
    };
    let tokenizer = crate::util::smollm2().join("tokenizer.json");
    for text in [false, true] {
        let dir = result_dir(if text { "llama-text" } else { "llama-ids" });
        let mut args: Vec<String> = [
            "--base-url",
            &llama.url,
            "--model",
            &llama.model,
            "--tokenizer",
            &tokenizer.display().to_string(),
            "--dataset-name",
            "timed_trace",
            "--dataset-path",
            &trace_file("llama_short.jsonl"),
            "--timed-trace-chunk-hash-size",
            "16",
            "--timed-trace-sec-multiplier",
            "0.001",
            "--disable-tqdm",
            "--save-result",
            "--result-filename",
            "r.json",
            "--result-dir",
            &dir.display().to_string(),
        ]
        .map(String::from)
        .to_vec();
        if text {
            // Two records suffice (CPU inference is slow on a shared machine).
            args.extend(["--timed-trace-prompt-text", "--num-prompts", "2"].map(String::from));
        }
        run_program(&args);
        let doc = read_result(&dir);
        assert_eq!(
            doc["completed"],
            if text { 2 } else { 4 },
            "text={text}: {doc}"
        );
        if !text {
            // Token ids are exact: 40 + 72 + 33 + 120.
            assert_eq!(doc["total_input_tokens"], 265);
        }
    }
}

/// Peak resident memory of this process (`VmHWM`), in MiB.
fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Memory of building every request of the full Mooncake trace (12,031 records, chunk 512)
/// before the clock: the distinct blocks' fragments plus a few pointers per block use.
/// `VLLM_BENCH_FULL_TRACE=conversation_trace.jsonl cargo test --test tests
/// trace_replay::full_trace_requests -- --ignored --nocapture` (docs/datasets.md has the
/// download line; without it, the repository's first 1,000 records).
#[test]
#[ignore = "a measurement (minutes in debug, about a GB of memory), not a check"]
fn full_trace_requests_build_from_shared_blocks() {
    let trace = crate::util::full_mooncake_trace();
    let path = trace.display().to_string();
    let cfg = config(&[
        "--base-url",
        "http://127.0.0.1:9",
        "--model",
        "m",
        "--dataset-name",
        "timed_trace",
        "--dataset-path",
        &path,
        "--num-prompts",
        "100000",
        "--timed-trace-chunk-hash-size",
        "512",
        "--timed-trace-sec-multiplier",
        "0.001",
    ])
    .unwrap();
    let DatasetParams::TimedTrace(p) = &cfg.dataset.params else {
        panic!("not a trace replay");
    };
    let started = std::time::Instant::now();
    let replay =
        TraceReplay::load(&cfg, p, &vllm_bench::output::stdio::Console::capture().0).unwrap();
    let tok =
        Tokenizer::from_hf_file("smollm2", crate::util::smollm2().join("tokenizer.json")).unwrap();
    let head = HeadTemplate::new(Method::Post, "/v1/completions", "127.0.0.1:9", &[]);
    let opts = vllm_bench::backends::BodyOptions {
        model: "m".into(),
        ignore_eos: true,
        ..Default::default()
    };
    let before = peak_rss_mib();
    let requests = replay
        .prepare(Api::Completions, &head, &|_| &opts, "r-", Some(&tok))
        .unwrap();
    let wire: usize = requests.iter().map(|r| r.len()).sum();
    let parts: usize = requests.iter().map(|r| r.parts.len()).sum();
    println!(
        "{} requests, {parts} parts, {:.0} MiB on the wire if joined; peak RSS {:.0} MiB \
         (after loading the trace {before:.0} MiB); {:.1} s",
        requests.len(),
        wire as f64 / (1 << 20) as f64,
        peak_rss_mib(),
        started.elapsed().as_secs_f64()
    );
    assert_eq!(requests.len(), 12_031);
}

/// `--timed-trace-wait-parent`: a Bailian child turn leaves only after its parent finished;
/// without it, the child leaves at its own (earlier) timestamp.
#[test]
fn bailian_child_turns_wait_for_their_parent() {
    let run = |wait: bool| -> Value {
        let dir = result_dir(if wait {
            "wait-parent"
        } else {
            "no-wait-parent"
        });
        let mut args: Vec<String> = [
            "--mock-server",
            "--dataset-name",
            "timed_trace",
            "--timed-trace-rebase",
            // Parent and child turns 14 ms apart; a 12-token reply takes ~75 ms on the mock.
            "--timed-trace-sec-multiplier",
            "0.01",
            "--num-prompts",
            "5",
            "--disable-tqdm",
            "--save-result",
            "--save-detailed",
            "--result-filename",
            "r.json",
        ]
        .map(String::from)
        .to_vec();
        args.extend(["--dataset-path".into(), trace_file("bailian_small.jsonl")]);
        args.extend(["--result-dir".into(), dir.display().to_string()]);
        if wait {
            args.push("--timed-trace-wait-parent".into());
        }
        run_program(&args);
        read_result(&dir)
    };
    let finished = |doc: &Value, i: usize| {
        doc["start_times"][i].as_f64().unwrap() + doc["latencies"][i].as_f64().unwrap()
    };
    let start = |doc: &Value, i: usize| doc["start_times"][i].as_f64().unwrap();
    // Record 2 (chat 102) is the child of record 0 (chat 100); record 4 of record 2.
    let waited = run(true);
    assert_eq!(waited["completed"], 5);
    assert!(start(&waited, 2) >= finished(&waited, 0), "{waited}");
    assert!(start(&waited, 4) >= finished(&waited, 2), "{waited}");
    let free = run(false);
    assert_eq!(free["completed"], 5);
    assert!(
        start(&free, 2) < finished(&free, 0),
        "without the flag the child does not wait"
    );
}
