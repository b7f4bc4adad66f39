//! Integration tests: input limits (issue 26, reliability round 2). Each symptom once panicked,
//! hung, ate the machine or put the user's bytes on the wire; each is now refused by the
//! binary before anything is allocated or sent: exit code 2, one line on stderr, no panic,
//! and a value that may be a secret is never echoed.

use std::path::Path;

use crate::util::{run_in_process, vllm_bench_env, vllm_bench_via, Run, TempDir};

/// A run that needs no server: the configuration is refused first.
pub(crate) fn base() -> Vec<String> {
    [
        "--model",
        "m",
        "--dataset-name",
        "random",
        "--num-prompts",
        "4",
    ]
    .map(str::to_owned)
    .to_vec()
}

/// The embedded mock with the SmolLM2 tokenizer, for refusals that come after the
/// configuration (a dataset file's content, the OS limits).
pub(crate) fn mock() -> Vec<String> {
    let tokenizer = crate::util::smollm2();
    [
        "--mock-server",
        "--model",
        "mock-model",
        "--tokenizer",
        tokenizer.to_str().expect("utf-8 path"),
        "--disable-tqdm",
    ]
    .map(str::to_owned)
    .to_vec()
}

pub(crate) fn args<'a>(base: &'a [String], extra: &[&'a str]) -> Vec<&'a str> {
    base.iter()
        .map(String::as_str)
        .chain(extra.iter().copied())
        .collect()
}

/// Exit code 2 and exactly one line on stderr, without a panic; the line.
pub(crate) fn one_line_refusal(run: Run, what: &str) -> String {
    assert_eq!(run.code, 2, "{what}: {}\n{}", run.stdout, run.stderr);
    assert!(!run.stderr.contains("panicked"), "{what}: {}", run.stderr);
    let lines: Vec<&str> = run.stderr.trim_end().lines().collect();
    assert_eq!(lines.len(), 1, "{what}: one line expected:\n{}", run.stderr);
    lines[0].to_owned()
}

/// `extra` after [`base`] is refused by the configuration (in process: nothing else ran);
/// the line.
pub(crate) fn refused(extra: &[&str]) -> String {
    let b = base();
    one_line_refusal(run_in_process(&args(&b, extra)), &format!("{extra:?}"))
}

// ---------------------------------------------------------------------------------------------
// Times: one checked conversion, whatever the door.

#[test]
fn request_rate_1e_minus_300_is_refused_not_a_panic() {
    let e = refused(&["--request-rate", "1e-300"]);
    assert!(e.contains("--request-rate 1e-300:"), "{e}");
    assert!(
        e.contains("31536000 s (365 days)"),
        "the limit is said: {e}"
    );
}

#[test]
fn start_at_1e20_is_refused_not_a_panic() {
    let e = refused(&["--start-at", "1e20"]);
    assert!(
        e.contains("--start-at 1e+20:") && e.contains("365 days"),
        "{e}"
    );
}

#[test]
fn probe_request_rate_1e_minus_300_is_refused_not_a_panic() {
    let e = refused(&["--probe-request-rate", "1e-300"]);
    assert!(e.contains("--probe-request-rate 1e-300:"), "{e}");
}

#[test]
fn sweep_request_rate_1e_minus_300_is_refused_not_a_panic() {
    let e = refused(&["--sweep-request-rate", "1e-300,inf"]);
    assert!(e.contains("--sweep-request-rate 1e-300:"), "{e}");
}

#[test]
fn profile_duration_1e300_is_refused_not_a_panic() {
    let e = refused(&[
        "--profile",
        "--profile-batch-threshold",
        "2",
        "--profile-duration",
        "1e300",
    ]);
    assert!(e.contains("--profile-duration 1e+300:"), "{e}");
}

#[test]
fn timed_trace_sec_multiplier_1e300_is_refused_not_a_panic() {
    let e = refused(&[
        "--dataset-name",
        "timed_trace",
        "--dataset-path",
        "t.jsonl",
        "--timed-trace-sec-multiplier",
        "1e300",
    ]);
    assert!(e.contains("--timed-trace-sec-multiplier 1e+300:"), "{e}");
}

/// A two-line Mooncake trace whose second line is `row`, replayed against the mock.
fn replay_trace_row(row: &str) -> String {
    let dir = TempDir::new("trace-row");
    let file = dir.path().join("t.jsonl");
    let text = format!(
        "{{\"timestamp\": 0, \"input_length\": 4, \"output_length\": 1, \"hash_ids\": [0]}}\n\
         {row}\n"
    );
    std::fs::write(&file, text).expect("write the trace");
    let m = mock();
    let path = file.to_str().expect("utf-8 path");
    let a = args(
        &m,
        &[
            "--backend",
            "vllm",
            "--dataset-name",
            "timed_trace",
            "--dataset-path",
            path,
        ],
    );
    let e = one_line_refusal(run_in_process(&a), row);
    assert!(e.contains("t.jsonl:2:"), "file:line named: {e}");
    e
}

#[test]
fn timed_trace_row_timestamp_1e308_is_refused_with_its_line_not_a_panic() {
    let e = replay_trace_row(r#"{"timestamp": 1e308, "input_length": 4, "output_length": 1}"#);
    assert!(e.contains("365 days"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// Sizes: checked before anything is allocated (these runs would take gigabytes otherwise).

#[test]
fn timed_trace_row_input_length_4e9_is_refused_with_its_line() {
    let e = replay_trace_row(r#"{"timestamp": 1, "input_length": 4000000000, "output_length": 1}"#);
    assert!(e.contains("input length: 4000000000 tokens"), "{e}");
    assert!(e.contains("1048576"), "the limit is said: {e}");
}

#[test]
fn random_input_len_4e9_is_refused_before_allocating() {
    let e = refused(&["--random-input-len", "4000000000"]);
    assert!(
        e.starts_with("error: --random-input-len 4000000000: 4000000000 tokens"),
        "{e}"
    );
    assert!(
        e.contains("1048576") && e.contains("--max-model-len"),
        "{e}"
    );
}

#[test]
fn random_family_lengths_share_one_size_check() {
    for (extra, flag) in [
        (
            &["--random-prefix-len", "2000000"][..],
            "--random-prefix-len",
        ),
        (
            &[
                "--random-input-len",
                "1000000",
                "--random-range-ratio",
                "0.5",
            ],
            "--random-input-len",
        ),
        (&["--random-output-len", "5000000"], "--random-output-len"),
        (
            &[
                "--dataset-name",
                "prefix_repetition",
                "--prefix-repetition-prefix-len",
                "900000",
                "--prefix-repetition-suffix-len",
                "900000",
            ],
            "--prefix-repetition-suffix-len",
        ),
        (
            &["--dataset-name", "sonnet", "--sonnet-input-len", "9000000"],
            "--sonnet-input-len",
        ),
    ] {
        let e = refused(extra);
        assert!(e.starts_with(&format!("error: {flag} ")), "{extra:?}: {e}");
        assert!(e.contains("tokens in one request"), "{extra:?}: {e}");
    }
    // --max-model-len raises the ceiling for a model with a longer context.
    let b = base();
    let a = args(
        &b,
        &[
            "--random-input-len",
            "2000000",
            "--max-model-len",
            "1500000",
        ],
    );
    let e = one_line_refusal(run_in_process(&a), "over --max-model-len");
    assert!(e.contains("more than --max-model-len 1500000"), "{e}");
}

#[test]
fn num_warmups_1e11_is_refused_before_preparing() {
    let e = refused(&["--num-warmups", "100000000000"]);
    assert!(
        e.contains("--num-warmups 100000000000:") && e.contains("10000000"),
        "{e}"
    );
}

#[test]
fn num_prompts_u64_max_is_refused_before_preparing() {
    let e = refused(&["--num-prompts", "18446744073709551615"]);
    assert!(e.contains("--num-prompts 18446744073709551615:"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// CR/LF: nothing from input reaches a request head, and nothing secret is echoed.

const INJECTED: &str = "k\r\nX-Evil: 1";

fn assert_not_echoed(e: &str) {
    assert!(!e.contains("X-Evil") && !e.contains('\r'), "echoed: {e:?}");
}

#[test]
fn request_id_prefix_with_crlf_is_refused_and_not_echoed() {
    let e = refused(&["--request-id-prefix", INJECTED]);
    assert!(
        e.contains("--request-id-prefix: contains a control character (CR)"),
        "{e}"
    );
    assert_not_echoed(&e);
}

#[test]
fn openai_api_key_with_crlf_is_refused_and_not_echoed() {
    let dir = TempDir::new("api-key");
    let b = base();
    let run = vllm_bench_env(
        &args(&b, &[]),
        dir.path(),
        &[("OPENAI_API_KEY", Path::new(INJECTED))],
    );
    let e = one_line_refusal(run, "OPENAI_API_KEY");
    assert!(
        e.contains("OPENAI_API_KEY: contains a control character"),
        "{e}"
    );
    assert_not_echoed(&e);
}

#[test]
fn names_sent_with_requests_refuse_crlf_without_echo() {
    for flag in ["--model", "--served-model-name", "--lora-modules"] {
        let e = refused(&[flag, INJECTED]);
        assert!(
            e.contains(&format!("{flag}: contains a control character")),
            "{e}"
        );
        assert_not_echoed(&e);
    }
    let e = refused(&["--header", &format!("X-A={INJECTED}")]);
    assert!(
        e.contains("--header X-A: contains a control character"),
        "{e}"
    );
    assert_not_echoed(&e);
}

#[test]
fn malformed_header_error_names_no_value() {
    let e = refused(&["--header", "Authorization Bearer sk-hidden-1"]);
    assert!(e.contains("--header: expected KEY=VALUE"), "{e}");
    assert!(!e.contains("sk-hidden-1"), "echoed: {e}");
}

// ---------------------------------------------------------------------------------------------
// Smaller ones: result names, non-regular dataset files, the open-file limit.

#[test]
fn empty_result_filename_is_refused_before_the_run() {
    let e = refused(&["--save-result", "--result-filename", ""]);
    assert!(e.contains("--result-filename '': cannot be empty"), "{e}");
}

#[test]
fn result_filename_of_300_chars_is_refused_before_the_run() {
    let name = format!("{}.json", "a".repeat(295));
    let e = refused(&["--save-result", "--result-filename", &name]);
    assert!(
        e.contains("--result-filename: the file name is 300 bytes"),
        "{e}"
    );
    assert!(e.contains("255"), "{e}");
}

#[test]
fn sweep_derived_result_filename_over_name_max_is_refused() {
    // 240 bytes fit alone, not with "-max_concurrency1000" before the extension.
    let name = format!("{}.json", "a".repeat(235));
    let e = refused(&[
        "--save-result",
        "--result-filename",
        &name,
        "--sweep-max-concurrency",
        "1,1000",
    ]);
    assert!(
        e.contains("the longest name derived from it here is"),
        "{e}"
    );
}

#[test]
fn slo_search_derived_result_filename_over_name_max_is_refused() {
    // 220 bytes fit alone, not with a probe's "-request_rate{rate}-run{k}" before the
    // extension, which would only fail when that probe's result is saved.
    let name = format!("{}.json", "a".repeat(215));
    let e = refused(&[
        "--save-result",
        "--result-filename",
        &name,
        "--slo-search",
        "request-rate",
        "--slo",
        "ttft:p99=500",
    ]);
    assert!(
        e.contains("the longest name derived from it here is"),
        "{e}"
    );
}

#[test]
fn fifo_dataset_path_is_refused_not_a_hang() {
    let dir = TempDir::new("fifo");
    let fifo = dir.path().join("data.json");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("run mkfifo");
    assert!(made.success(), "mkfifo");
    let path = fifo.to_str().expect("utf-8 path");
    // Out of process, under the run timeout: a regression here hangs.
    let b = base();
    let a = args(&b, &["--dataset-name", "sharegpt", "--dataset-path", path]);
    let e = one_line_refusal(run_in_process(&a), "a FIFO as --dataset-path");
    assert!(e.contains("is not a regular file"), "{e}");
    // A directory is refused for a dataset that reads one file.
    let e = refused(&["--dataset-name", "sharegpt", "--dataset-path", dir.arg()]);
    assert!(
        e.contains("is a directory; the sharegpt dataset reads one file"),
        "{e}"
    );
}

#[test]
fn open_file_limit_refusal_exits_2() {
    let dir = TempDir::new("nofile");
    let m = mock();
    let a = args(
        &m,
        &[
            "--dataset-name",
            "random",
            "--random-input-len",
            "8",
            "--random-output-len",
            "2",
            "--num-prompts",
            "300",
            "--max-concurrency",
            "300",
        ],
    );
    // Soft and hard limit 128: 300 connections cannot fit, whatever the engine raises.
    let wrapper = ["sh", "-c", "ulimit -n 128 && exec \"$0\" \"$@\""];
    let run = vllm_bench_via(&wrapper, &a, dir.path(), &[]);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("RLIMIT_NOFILE"), "{}", run.stderr);
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
}

#[test]
fn random_mm_image_of_65535_squared_is_refused_before_drawing() {
    let e = refused(&[
        "--mock-server",
        "--backend",
        "openai-chat",
        "--dataset-name",
        "random-mm",
        "--random-mm-bucket-config",
        "{(65535, 65535, 1): 1.0}",
    ]);
    assert!(e.contains("4096 x 4096 pixels"), "{e}");
}

#[test]
fn random_mm_items_per_request_are_bounded() {
    let e = refused(&[
        "--mock-server",
        "--backend",
        "openai-chat",
        "--dataset-name",
        "random-mm",
        "--random-mm-base-items-per-request",
        "100000",
    ]);
    assert!(e.contains("--random-mm-base-items-per-request"), "{e}");
}
