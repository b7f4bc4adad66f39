//! `--compare`: exact deltas on Python's golden result files and on two of ours
//! (`tests/data/compare/`, saved by vllm-bench against the embedded mock), the table and the
//! exit codes through the binary, and files that are not results: one line naming the file,
//! exit 2.

use std::path::{Path, PathBuf};
use std::process::Command;

use vllm_bench::metrics::comparison::{rows, Change, ComparedMetric, Direction, Num, Verdict};
use vllm_bench::output::result_file::{load, SavedResult};

use crate::util::fixture;
use crate::util::run_in_process;
use crate::util::TempDir;

fn golden(scenario: &str) -> PathBuf {
    fixture("golden/python-0.33")
        .join(scenario)
        .join("result.json")
}

fn ours(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/compare")
        .join(name)
}

const GOLDEN_01: &str = "01-random-c16-p50-90-99-99.9";
const GOLDEN_02: &str = "02-random-rate40-burst0.5-goodput";

fn compared(paths: &[PathBuf]) -> (Vec<SavedResult>, Vec<ComparedMetric>) {
    let results: Vec<SavedResult> = paths
        .iter()
        .map(|p| load(p).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let metrics: Vec<&[(String, Option<Num>)]> =
        results.iter().map(|r| r.metrics.as_slice()).collect();
    let rows = rows(&metrics);
    (results, rows)
}

fn row<'a>(rows: &'a [ComparedMetric], key: &str) -> &'a ComparedMetric {
    rows.iter()
        .find(|r| r.key == key)
        .unwrap_or_else(|| panic!("no row {key}"))
}

fn first_change(rows: &[ComparedMetric], key: &str) -> Change {
    row(rows, key).changes[0].unwrap_or_else(|| panic!("{key}: no change"))
}

/// The values Python wrote, and `b - a`, `(b - a) / |a| * 100` as Python computes them.
#[test]
fn deltas_on_pythons_golden_results_are_exact() {
    let (results, rows) = compared(&[golden(GOLDEN_01), golden(GOLDEN_02)]);
    assert_eq!(results[0].facts[0], ("backend".into(), "vllm".into()));
    let cases: [(&str, Num, Num, Num, f64, Verdict); 7] = [
        (
            "duration",
            Num::Float(2.6520138539999607),
            Num::Float(3.9189246289997755),
            Num::Float(1.2669107749998147),
            47.77164995156294,
            Verdict::Worse,
        ),
        (
            "completed",
            Num::Int(200),
            Num::Int(150),
            Num::Int(-50),
            -25.0,
            Verdict::Worse,
        ),
        (
            "request_throughput",
            Num::Float(75.41438733374089),
            Num::Float(38.27580629900616),
            Num::Float(-37.13858103473473),
            -49.24601571100835,
            Verdict::Worse,
        ),
        (
            "mean_ttft_ms",
            Num::Float(25.606243625013576),
            Num::Float(24.919173606661694),
            Num::Float(-0.6870700183518821),
            -2.683212846107246,
            Verdict::Better,
        ),
        (
            "median_itl_ms",
            Num::Float(5.695437999975184),
            Num::Float(5.828080499895805),
            Num::Float(0.13264249992062105),
            2.3289253595807557,
            Verdict::Worse,
        ),
        (
            "max_output_tokens_per_s",
            Num::Float(2522.0),
            Num::Float(1080.0),
            Num::Float(-1442.0),
            -57.176843774781915,
            Verdict::Worse,
        ),
        (
            "total_input_tokens",
            Num::Int(7659),
            Num::Int(3206),
            Num::Int(-4453),
            -58.14074944509727,
            Verdict::Unranked,
        ),
    ];
    for (key, a, b, delta, percent, verdict) in cases {
        let r = row(&rows, key);
        assert_eq!(r.values, [Some(a), Some(b)], "{key}");
        let c = first_change(&rows, key);
        assert_eq!(c.delta, delta, "{key}");
        assert_eq!(c.percent, Some(percent), "{key}");
        assert_eq!(c.verdict, verdict, "{key}");
    }
    // Golden 01 has E2EL, 02 does not; 02 has a goodput, 01 `null`.
    assert_eq!(row(&rows, "mean_e2el_ms").changes, [None]);
    assert_eq!(row(&rows, "request_goodput").values[0], None);
    assert_eq!(
        row(&rows, "request_goodput").values[1],
        Some(Num::Float(35.979257921065795))
    );
    // Facts are not rows; lists are not compared.
    for key in [
        "num_prompts",
        "request_rate",
        "max_concurrency",
        "ttfts",
        "date",
    ] {
        assert!(
            rows.iter().all(|r| r.key != key),
            "{key} is not a metric row"
        );
    }
}

/// Two results of ours (a closed loop at concurrency 4 and 16), with our extras and the
/// steady-state object; the numbers below are the files' own.
#[test]
fn deltas_on_our_results_are_exact() {
    let (_, rows) = compared(&[ours("c4.json"), ours("c16.json")]);
    let c = first_change(&rows, "completed");
    assert_eq!((c.delta, c.verdict), (Num::Int(0), Verdict::Same));
    // (key, A, B, B - A, % change): the files' numbers, the last two as Python computes
    // `b - a` and `(b - a) / abs(a) * 100`.
    let cases: [(&str, Num, Num, Num, f64); 9] = [
        (
            "duration",
            Num::Float(1.418509037),
            Num::Float(0.402524416),
            Num::Float(-1.0159846209999999),
            -71.62341546647474,
        ),
        (
            "request_throughput",
            Num::Float(70.49655475688027),
            Num::Float(248.4321348596156),
            Num::Float(177.93558010273532),
            252.40322837956742,
        ),
        (
            "mean_ttft_ms",
            Num::Float(21.053090020000003),
            Num::Float(21.64732936),
            Num::Float(0.5942393399999979),
            2.822575400739192,
        ),
        (
            "p99_tpot_ms",
            Num::Float(5.701920558571428),
            Num::Float(5.595938942857143),
            Num::Float(-0.10598161571428477),
            -1.8587003208062522,
        ),
        (
            "max_concurrent_requests",
            Num::Int(72),
            Num::Int(100),
            Num::Int(28),
            38.88888888888889,
        ),
        (
            "vllm_bench_workers",
            Num::Int(4),
            Num::Int(16),
            Num::Int(12),
            300.0,
        ),
        (
            "steady_state.request_throughput",
            Num::Float(71.01685469669509),
            Num::Float(276.810728570274),
            Num::Float(205.79387387357895),
            289.7817352690445,
        ),
        (
            "steady_state.p90_tpot_ms",
            Num::Float(5.388535257142857),
            Num::Float(5.573028785714287),
            Num::Float(0.18449352857142998),
            3.423815930811099,
        ),
        (
            "steady_state.requests_inside",
            Num::Int(94),
            Num::Int(70),
            Num::Int(-24),
            -25.53191489361702,
        ),
    ];
    for (key, a, b, delta, percent) in cases {
        let r = row(&rows, key);
        assert_eq!(r.values, [Some(a), Some(b)], "{key}");
        let c = first_change(&rows, key);
        assert_eq!(c.delta, delta, "{key}");
        assert_eq!(c.percent, Some(percent), "{key}");
    }
    let steady = row(&rows, "steady_state.request_throughput");
    assert_eq!(steady.direction, Direction::Higher);
    assert_eq!(
        row(&rows, "steady_state.p90_tpot_ms").direction,
        Direction::Lower
    );
}

/// `--compare` on `args`, in process: it reads files and prints, nothing process-wide.
fn run_compare(args: &[&str]) -> crate::util::Run {
    let mut all = vec!["--compare"];
    all.extend_from_slice(args);
    run_in_process(&all)
}

#[test]
fn the_binary_prints_the_table_without_a_server() {
    let a = golden(GOLDEN_01);
    let b = golden(GOLDEN_02);
    let c = ours("c4.json");
    let run = run_compare(&[
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        c.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // The three runs are of different workloads (200, 150 and 100 prompts): said, each once.
    let warnings: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(warnings.len(), 2, "{}", run.stderr);
    assert!(
        warnings[0].starts_with(
            "warning: B ran a different workload than A (the baseline): num_prompts 150 vs 200"
        ),
        "{}",
        run.stderr
    );
    assert!(
        warnings[1].starts_with("warning: C ran a different workload than A (the baseline)"),
        "{}",
        run.stderr
    );
    let out = &run.stdout;
    assert!(
        out.starts_with(&format!("A (baseline): {}\n", a.display())),
        "{out}"
    );
    assert!(out.contains(&format!("\nB: {}\n", b.display())), "{out}");
    assert!(out.contains("    backend vllm, model_id mock-model, tokenizer_id tok, label null, num_prompts 200, request_rate inf, burstiness 1.0, max_concurrency 16, date 20261130-084051\n"), "{out}");
    let header = out
        .lines()
        .find(|l| l.starts_with("Metric"))
        .expect("a header");
    let cells: Vec<&str> = header.split_whitespace().collect();
    assert_eq!(
        cells,
        ["Metric", "Better", "A", "B", "B-A", "B", "vs", "A", "C", "C-A", "C", "vs", "A"]
    );
    let completed = out
        .lines()
        .find(|l| l.starts_with("completed "))
        .expect("a completed row");
    let cells: Vec<&str> = completed.split_whitespace().collect();
    assert_eq!(
        cells[..7],
        [
            "completed",
            "higher",
            "200",
            "150",
            "-50",
            "-25.00%",
            "worse"
        ]
    );
    let ttft = out
        .lines()
        .find(|l| l.starts_with("mean_ttft_ms "))
        .expect("a TTFT row");
    let cells: Vec<&str> = ttft.split_whitespace().collect();
    assert_eq!(
        cells[..7],
        [
            "mean_ttft_ms",
            "lower",
            "25.61",
            "24.92",
            "-0.69",
            "-2.68%",
            "better"
        ]
    );

    // A flag set from the environment (VLLM_BENCH_CORES) is not refused with --compare.
    let status = Command::new(env!("CARGO_BIN_EXE_vllm-bench"))
        .args(["--compare", a.to_str().unwrap(), b.to_str().unwrap()])
        .env("VLLM_BENCH_CORES", "1")
        .output()
        .expect("run vllm-bench");
    assert!(status.status.success(), "{status:?}");
}

#[test]
fn a_file_that_is_not_a_result_is_one_line_and_exit_2() {
    let dir = TempDir::new("compare");
    let good = golden(GOLDEN_01);
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let missing = dir.path().join("missing.json");
    let not_json = write("notes.txt", "just some notes\n");
    let no_keys = write("config.json", r#"{"model": "m", "port": 8000}"#);
    let lines = write(
        "runs.jsonl",
        "{\"duration\": 1, \"completed\": 1, \"request_throughput\": 1}\n\
         {\"duration\": 2, \"completed\": 1, \"request_throughput\": 0.5}",
    );
    for (bad, reason) in [
        (&missing, "cannot read it: No such file or directory"),
        (&not_json, "not JSON (expected value at line 1 column 1)"),
        (
            &no_keys,
            "not a benchmark result (no numeric `duration` key",
        ),
        (&lines, "holds 2 JSON documents"),
    ] {
        // As baseline or as candidate, the file is named.
        for args in [[&good, bad], [bad, &good]] {
            let run = run_compare(&[args[0].to_str().unwrap(), args[1].to_str().unwrap()]);
            assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
            assert_eq!(run.stdout, "", "nothing printed before the error");
            assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
            assert!(
                run.stderr
                    .starts_with(&format!("error: {}: {reason}", bad.display())),
                "{}",
                run.stderr
            );
        }
    }
    let run = run_compare(&[good.to_str().unwrap()]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("--compare"), "{}", run.stderr);
    let run = run_in_process(&[
        "--compare",
        good.to_str().unwrap(),
        good.to_str().unwrap(),
        "--seed",
        "1",
    ]);
    assert_eq!(run.code, 2);
    assert_eq!(
        run.stderr,
        "error: --compare: compares saved result files and runs no benchmark; --seed has no \
         effect with it\n"
    );
}

#[test]
fn compare_escapes_control_characters_in_model_id() {
    // A server chose this model id; the result file carries it (JSON-escaped, as we write
    // it); the table must show the escape, not send it to the terminal.
    let dir = TempDir::new("compare-escape");
    let write = |name: &str, model: &str| {
        let p = dir.path().join(name);
        let text = format!(
            "{{\"model_id\": \"{model}\", \"duration\": 1.0, \"completed\": 2, \
             \"request_throughput\": 2.0, \"mean_ttft_ms\": 5.0}}"
        );
        std::fs::write(&p, text).unwrap();
        p
    };
    let a = write("a.json", "m\\u001b[2J\\u001b]0;owned\\u0007\\u009b1A");
    let b = write("b.json", "plain");
    let run = run_compare(&[a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        !run.stdout.chars().any(|c| c.is_control() && c != '\n'),
        "a control character reached the terminal: {:?}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("    model_id m\\x1b[2J\\x1b]0;owned\\x07\\x9b1A\n"),
        "{}",
        run.stdout
    );
}
