//! Several measured runs of one plan through the real binary against an in-process mock:
//! sweeps over concurrency and rate (one result file per point, a summary with the best
//! point, one prefix-cache reset per point, exactly each point's requests) and `--num-runs`
//! (every run's requests sent, statistics equal to a hand computation).

use std::path::Path;

use serde_json::{Map, Value};
use vllm_bench::mock::MockServer;

use crate::e2e::mock;
use crate::util::{run_in_process, TempDir};

fn run(server: &MockServer, dir: &TempDir, extra: &[&str]) -> String {
    crate::util::run_against_mock(&server.base_url(), dir, extra)
}

fn json(path: &Path) -> Map<String, Value> {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The result files of a directory by name, without the summary.
fn results(dir: &TempDir) -> Vec<(String, Map<String, Value>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.to_string_lossy().contains("summary"))
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                json(&p),
            )
        })
        .collect();
    files.sort_by(|a, b| a.0.cmp(&b.0));
    files
}

#[test]
fn a_concurrency_sweep_runs_each_point_on_one_plan() {
    // Answers of ~300 ms, so the requests of a point overlap even on a busy machine.
    let server = mock(|c| {
        c.first_token_delay = std::time::Duration::from_millis(300);
        c.token_interval = std::time::Duration::from_millis(3);
    });
    let dir = TempDir::new("sweep-c");
    let stdout = run(
        &server,
        &dir,
        &[
            "--sweep-max-concurrency",
            "1,3",
            "--sweep-num-prompts-factor",
            "4",
            "--reset-prefix-cache",
            "--result-filename",
            "s.json",
        ],
    );
    assert!(
        stdout.contains("Sweep point 2/2: max_concurrency = 3"),
        "{stdout}"
    );
    assert!(stdout.contains("Best point: max_concurrency"), "{stdout}");
    // Each point sent exactly its requests, after its own prefix-cache reset, and had
    // exactly its concurrency in flight at its peak.
    let log = server.request_log();
    let mut segments: Vec<Vec<(f64, f64)>> = Vec::new();
    for r in &log {
        match r.path.as_str() {
            "/reset_prefix_cache" => segments.push(Vec::new()),
            "/v1/completions" if !segments.is_empty() => {
                let span = (r.arrival.as_secs_f64(), r.served.as_secs_f64());
                segments.last_mut().unwrap().push(span);
            }
            _ => {}
        }
    }
    let sizes: Vec<usize> = segments.iter().map(Vec::len).collect();
    assert_eq!(sizes, [4, 12], "one reset per point, then its requests");
    let peak = |spans: &[(f64, f64)]| {
        spans
            .iter()
            .map(|&(at, _)| spans.iter().filter(|&&(a, s)| a <= at && at < s).count())
            .max()
            .unwrap_or(0)
    };
    let peaks: Vec<usize> = segments.iter().map(|s| peak(s)).collect();
    assert_eq!(
        peaks,
        [1, 3],
        "each point's peak in flight is its concurrency"
    );
    // One engine for the whole sweep: point 2 reuses point 1's connection (a fresh engine
    // per point would have opened 1 + 3).
    let connections: std::collections::HashSet<u64> = log
        .iter()
        .filter(|r| r.path == "/v1/completions")
        .map(|r| r.connection)
        .collect();
    assert_eq!(
        connections.len(),
        3,
        "kept-alive connections serve every point"
    );
    let files = results(&dir);
    let names: Vec<&str> = files.iter().map(|f| f.0.as_str()).collect();
    assert_eq!(
        names,
        ["s-max_concurrency1.json", "s-max_concurrency3.json"]
    );
    for ((_, doc), (c, n)) in files.iter().zip([(1, 4), (3, 12)]) {
        assert_eq!(doc["max_concurrency"], c);
        assert_eq!(doc["num_prompts"], n);
        assert_eq!(doc["completed"], n);
    }
    let summary = json(&dir.path().join("s-sweep-summary.json"));
    let points = summary["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    assert_eq!(points[1]["max_concurrency"], "3");
    assert_eq!(points[1]["completed"], 12.0);
    assert!(summary["best_max_concurrency"].is_string());
}

#[test]
fn a_rate_sweep_gives_each_point_its_rate() {
    let server = mock(|_| {});
    let dir = TempDir::new("sweep-r");
    run(
        &server,
        &dir,
        &["--num-prompts", "6", "--sweep-request-rate", "50,inf"],
    );
    let files = results(&dir);
    assert_eq!(files.len(), 2, "Python names each point's file by its rate");
    let rates: Vec<String> = files
        .iter()
        .map(|(_, d)| d["request_rate"].to_string())
        .collect();
    assert!(
        rates.contains(&"50.0".to_string()) && rates.contains(&"\"inf\"".to_string()),
        "{rates:?}"
    );
    assert_eq!(server.stats().by_path["/v1/completions"], 12);
}

#[test]
fn repeated_runs_report_their_spread() {
    let server = mock(|_| {});
    let dir = TempDir::new("runs");
    let stdout = run(
        &server,
        &dir,
        &[
            "--num-prompts",
            "5",
            "--max-concurrency",
            "2",
            "--num-runs",
            "3",
            "--result-filename",
            "r.json",
        ],
    );
    assert!(stdout.contains("Run 3/3:"), "{stdout}");
    assert!(stdout.contains("Multi-Run Summary (3 runs)"), "{stdout}");
    assert_eq!(
        server.stats().by_path["/v1/completions"],
        15,
        "three runs' requests"
    );
    let doc = json(&dir.path().join("r.json"));
    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    let xs: Vec<f64> = runs
        .iter()
        .map(|r| r["request_throughput"].as_f64().unwrap())
        .collect();
    let mean = xs.iter().sum::<f64>() / 3.0;
    let std = (xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / 3.0).sqrt();
    let agg = &doc["aggregate"]["request_throughput"];
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
    assert!(close(agg["mean"].as_f64().unwrap(), mean), "{agg}");
    assert!(close(agg["std"].as_f64().unwrap(), std), "{agg}");
    assert!(close(agg["cv"].as_f64().unwrap(), std / mean), "{agg}");
    let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
    assert!(close(agg["min"].as_f64().unwrap(), min));
}

#[test]
fn num_runs_and_a_sweep_do_not_mix() {
    crate::e2e::assert_refused(
        &[
            "--mock-server",
            "--num-runs",
            "2",
            "--sweep-max-concurrency",
            "1,2",
        ],
        "--num-runs: cannot be combined with a sweep",
    );
}

/// The seed README's sweep, multi-run, comparison and profiling examples, scaled down (fewer
/// prompts, short prompts) against the mock: each runs and shows what it promises.
#[test]
fn seed_run_mode_examples_run_against_the_mock() {
    let server = mock(|c| {
        c.first_token_delay = std::time::Duration::from_millis(2);
        c.token_interval = std::time::Duration::from_millis(1);
        c.request_log = false;
    });
    let dir = TempDir::new("seed-runs");
    let with = |flags: &[&str]| -> Vec<String> {
        ["--backend", "vllm", "--num-prompts", "12"]
            .iter()
            .chain(flags)
            .map(|s| s.to_string())
            .collect()
    };
    let examples: Vec<(Vec<String>, &str)> = vec![
        (with(&["--sweep-max-concurrency", "1,2,4"]), "Sweep Summary"),
        (
            with(&["--sweep-request-rate", "10,50,inf"]),
            "Best point: request_rate",
        ),
        (
            with(&[
                "--sweep-max-concurrency",
                "1,2",
                "--sweep-num-prompts-factor",
                "3",
                "--reset-prefix-cache",
            ]),
            "Sweep point 2/2",
        ),
        (
            with(&["--max-concurrency", "4", "--num-runs", "3"]),
            "Multi-Run Summary (3 runs)",
        ),
        (with(&["--profile"]), "Profiler stopped"),
        (
            // Requests of 0.7 s each keep one running at every moment of the run, so the
            // profiler's poll (every 500 ms, from before the first request) sees one;
            // 4-token requests ended before its second poll.
            with(&[
                "--max-concurrency",
                "4",
                "--random-output-len",
                "700",
                "--profile",
                "--profile-batch-threshold",
                "1",
                "--profile-duration",
                "0.1",
            ]),
            "Profiler started",
        ),
    ];
    for (args, shows) in &examples {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run(&server, &dir, &args);
        assert!(out.contains(shows), "{args:?} should show {shows}:\n{out}");
    }
    // The comparison example, on two results of this test.
    for (name, extra) in [("baseline.json", "1"), ("optimized.json", "4")] {
        let args = with(&["--max-concurrency", extra, "--result-filename", name]);
        run(
            &server,
            &dir,
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
        );
    }
    let (baseline, optimized) = (
        dir.path().join("baseline.json"),
        dir.path().join("optimized.json"),
    );
    let cmp = run_in_process(&[
        "--compare",
        baseline.to_str().expect("utf-8 path"),
        optimized.to_str().expect("utf-8 path"),
    ]);
    assert_eq!(cmp.code, 0, "{}", cmp.stderr);
    assert!(cmp.stdout.contains("request_throughput"), "{}", cmp.stdout);
}

#[test]
fn an_interrupted_repetition_is_excluded_from_the_spread() {
    // Each run sends 30 requests one at a time, ~50 ms each: over a second per run, so the
    // signal sent once run 1's line is out lands in run 2 (or before it starts: run 2 is
    // then interrupted at once, the same case).
    let server = mock(|c| c.first_token_delay = std::time::Duration::from_millis(50));
    let dir = TempDir::new("runs-interrupted");
    let flags = [
        "--num-prompts",
        "30",
        "--max-concurrency",
        "1",
        "--num-runs",
        "3",
    ];
    let mut child = crate::interrupt::spawn(&server, dir.path(), &flags, "0", &[]);
    let (seen_tx, seen_rx) = std::sync::mpsc::channel();
    let out = crate::interrupt::collect_lines(child.stdout.take().unwrap(), "Run 1/3:", seen_tx);
    let (unused_tx, _) = std::sync::mpsc::channel();
    let err = crate::interrupt::collect_lines(child.stderr.take().unwrap(), "\u{0}", unused_tx);
    let timeout = crate::interrupt::STEP_TIMEOUT;
    if seen_rx.recv_timeout(timeout).is_ok() {
        // SAFETY: plain kill(2) on our own child's pid.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    }
    let code = crate::interrupt::wait_exit(&mut child, timeout);
    let (stdout, stderr) = (out.join().unwrap(), err.join().unwrap());
    assert_eq!(code, Some(130), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("(interrupted: left out of the statistics)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("Multi-Run Summary (1 of 2 runs)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("Interrupted run 2 left out of mean/std/min/max/CV"),
        "{stdout}"
    );
    let doc = json(&dir.path().join("r.json"));
    assert_eq!(doc["num_runs"], 2);
    assert_eq!(doc["interrupted"], true);
    assert_eq!(doc["interrupted_runs"], serde_json::json!([2]));
    assert_eq!(doc["aggregated_runs"], 1);
    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(runs[1]["vllm_bench_interrupted"], true);
    // The statistics are run 1's alone: no spread.
    let agg = &doc["aggregate"]["request_throughput"];
    assert_eq!(agg["mean"], runs[0]["request_throughput"], "{agg}");
    assert_eq!(agg["std"], 0.0, "{agg}");
    assert_eq!(doc["aggregate"]["completed"]["min"], 30.0);
}

/// The server's prefix-cache hit rate over each result file's run, in file-name order.
fn hit_rates(dir: &TempDir) -> Vec<f64> {
    results(dir)
        .iter()
        .map(|(name, doc)| {
            doc["vllm_bench_server_metrics"]["prefix_cache_hit_rate"]
                .as_f64()
                .unwrap_or_else(|| panic!("{name}: no prefix_cache_hit_rate"))
        })
        .collect()
}

/// Issue 36: every sweep point re-sent the first point's prompts, so from the second on the
/// server's prefix cache answered them (252/512, 504/1024, 1008/2048 prompt tokens cached)
/// and the later points measured the cache. Against the mock's prefix cache: by default no
/// point finds an earlier one's prompts cached; `--same-prompts` re-sends them, the cache
/// answers nearly all, and one warning says so with the evidence and the fix.
#[test]
fn sweep_points_do_not_measure_the_prefix_cache_of_earlier_points() {
    let sweep = |dir: &TempDir, extra: &[&str]| {
        let server = mock(|_| {});
        let mut base = crate::util::mock_random_args(&server.base_url());
        // SmolLM2's random tokens are mostly whole words, and the mock's cache counts
        // words: 160 of them fill ten cache blocks, so a re-sent prompt is found nearly
        // whole (the small tokenizer's 160 tokens are fewer words, and the partial last
        // block weighs more).
        let tokenizer = base
            .iter()
            .position(|a| a == "--tokenizer")
            .expect("a tokenizer");
        base[tokenizer + 1] = crate::util::smollm2_arg();
        let mut args: Vec<&str> = base.iter().map(String::as_str).collect();
        // Prompts of 160 tokens: several of the mock's 16-token cache blocks each.
        args.extend([
            "--random-input-len",
            "160",
            "--num-prompts",
            "6",
            "--sweep-max-concurrency",
            "1,2,3",
            "--disable-tqdm",
            "--save-result",
            "--result-dir",
            dir.arg(),
            "--result-filename",
            "s.json",
        ]);
        args.extend(extra);
        let out = run_in_process(&args);
        assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
        (hit_rates(dir), out.stderr)
    };
    let fresh = TempDir::new("sweep-fresh-prompts");
    let (rates, stderr) = sweep(&fresh, &[]);
    assert_eq!(rates.len(), 3);
    assert!(
        rates.iter().all(|&r| r < 0.05),
        "a point found earlier prompts cached: {rates:?}"
    );
    assert!(!stderr.contains("prefix cache"), "{stderr}");

    let same = TempDir::new("sweep-same-prompts");
    let (rates, stderr) = sweep(&same, &["--same-prompts"]);
    assert!(rates[0] < 0.05, "the first point is cold: {rates:?}");
    assert!(
        rates[1..].iter().all(|&r| r > 0.9),
        "--same-prompts re-sends the first point's prompts: {rates:?}"
    );
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("from its prefix cache"))
        .collect();
    assert_eq!(warnings.len(), 1, "said once: {stderr}");
    assert!(
        warnings[0].starts_with(
            "warning: sweep point 2 (max_concurrency = 2): 6 of its 6 requests were sent by an \
             earlier run, and the server answered"
        ),
        "{stderr}"
    );
    assert!(warnings[0].contains("drop it"), "{stderr}");
}

/// `--num-runs` repetitions send prompts of their own too.
#[test]
fn repetitions_do_not_measure_the_prefix_cache_of_earlier_runs() {
    let server = mock(|_| {});
    let dir = TempDir::new("runs-fresh-prompts");
    run(
        &server,
        &dir,
        &[
            "--random-input-len",
            "160",
            "--num-prompts",
            "4",
            "--num-runs",
            "2",
            "--result-filename",
            "r.json",
        ],
    );
    let doc = json(&dir.path().join("r.json"));
    let rates: Vec<f64> = doc["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r["vllm_bench_server_metrics"]["prefix_cache_hit_rate"]
                .as_f64()
                .unwrap()
        })
        .collect();
    assert_eq!(rates.len(), 2);
    assert!(rates.iter().all(|&r| r < 0.05), "{rates:?}");
}

#[test]
fn same_prompts_without_several_runs_is_refused() {
    crate::e2e::assert_refused(
        &["--mock-server", "--same-prompts"],
        "--same-prompts: needs a sweep, --num-runs 2 or more, or --slo-search",
    );
}
