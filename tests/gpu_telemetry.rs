//! `--gpu-telemetry URL`: a DCGM-shaped mock (`mock-llm-server --dcgm N`: each GPU's energy
//! counter grows 50 mJ per generated token) gives the exact energy and energy per output
//! token, per GPU and in total, in the block, the result key and the timeline's strip.

use std::time::Duration;

use crate::e2e::mock;
use crate::util::{mock_random_args, run_in_process, TempDir};

/// A mock that also speaks as a DCGM exporter for `gpus` GPUs (50 mJ per generated token
/// each), streaming a token every 5 ms.
pub(crate) fn dcgm_mock(gpus: usize) -> vllm_bench::mock::MockServer {
    mock(|c| {
        c.dcgm_gpus = gpus;
        c.token_interval = Duration::from_millis(5);
    })
}

/// The workload of these tests against `url` (12 requests of 20 output tokens, 4 at a time,
/// scraped every 50 ms), with `--gpu-telemetry exporter`, saving its result.
pub(crate) fn dcgm_args(url: &str, exporter: &str) -> Vec<String> {
    let mut args = mock_random_args(url);
    args.extend(
        [
            "--num-prompts",
            "12",
            "--random-output-len",
            "20",
            "--max-concurrency",
            "4",
            "--server-metrics-interval",
            "0.05",
            "--gpu-telemetry",
            exporter,
            "--disable-tqdm",
            "--save-result",
        ]
        .map(String::from),
    );
    args
}

/// The energy in `t` (a `vllm_bench_gpu_telemetry` value) is `joules`, J, and per output
/// token `joules / tokens`, exactly but for the last bits of the division.
pub(crate) fn assert_energy(t: &serde_json::Value, joules: f64, tokens: u64) {
    assert!(
        (t["energy_j"].as_f64().unwrap() - joules).abs() < 1e-9,
        "{t}"
    );
    assert_eq!(t["output_tokens"].as_u64(), Some(tokens), "{t}");
    let per_token = t["energy_per_output_token_j"].as_f64().unwrap();
    assert!((per_token - joules / tokens as f64).abs() < 1e-12, "{t}");
}

#[test]
fn a_dcgm_exporter_gives_the_exact_energy_per_output_token() {
    let server = dcgm_mock(2);
    let dir = TempDir::new("gpu-telemetry");
    let url = server.base_url();
    let exporter = format!("{url}/metrics");
    let base = dcgm_args(&url, &exporter);
    let mut args: Vec<&str> = base.iter().map(String::as_str).collect();
    args.extend([
        "--result-dir",
        dir.arg(),
        "--result-filename",
        "r.json",
        "--plot-timeline",
    ]);
    let run = run_in_process(&args);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let doc = crate::shards::read_json(&dir.path().join("r.json"));
    let tokens = doc["total_output_tokens"].as_u64().unwrap();
    assert_eq!(tokens, 12 * 20, "{doc}");
    let t = &doc["vllm_bench_gpu_telemetry"];
    assert_eq!(t["gpus"], 2);
    // Two GPUs, 50 mJ per token each.
    let joules = 2.0 * 0.05 * tokens as f64;
    assert_energy(t, joules, tokens);
    assert_eq!(t["energy_source"], "energy_counter");
    assert_eq!(t["power_mean_w"].as_f64(), Some(210.0));
    assert_eq!(t["power_max_w"].as_f64(), Some(210.0));
    assert_eq!(t["util_mean_percent"].as_f64(), Some(50.5));
    assert_eq!(t["memory_peak_mib"].as_f64(), Some(2001.0));
    let gpu1 = &t["per_gpu"][1];
    assert_eq!(gpu1["gpu"], "1");
    assert_eq!(gpu1["hostname"], "mock-gpu-host");
    assert!((gpu1["energy_j"].as_f64().unwrap() - joules / 2.0).abs() < 1e-9);
    assert_eq!(gpu1["memory_total_mib"].as_f64(), Some(81920.0));
    // The block, after the server's.
    let out = &run.stdout;
    let block = out.find("GPU Telemetry").expect("the block");
    assert!(
        out.find("Server Metrics").is_some_and(|s| s < block),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "{:<40} 0.1000",
            "Energy per output token (J/token):"
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "Energy (J):                              {joules:.1}"
        )),
        "{out}"
    );
    // The exporter is not shown as a server endpoint.
    assert_eq!(out.matches("Server Metrics").count(), 1, "{out}");
    // The timeline's strip draws each GPU's utilisation.
    let page = std::fs::read_to_string(dir.path().join("r.timeline.html")).unwrap();
    assert!(
        page.contains("GPU 1 (mock-gpu-host) utilisation %"),
        "the legend"
    );
}

#[test]
fn gpu_telemetry_needs_the_scrape_and_a_url() {
    let server = mock(|_| {});
    let base = mock_random_args(&server.base_url());
    for (extra, says) in [
        (
            &[
                "--gpu-telemetry",
                "http://127.0.0.1:9400/metrics",
                "--no-server-metrics",
            ][..],
            "--gpu-telemetry: is scraped with the server's metrics",
        ),
        (
            &["--gpu-telemetry", "ftp://x"][..],
            "--gpu-telemetry ftp://x: only http",
        ),
    ] {
        let mut args: Vec<&str> = base.iter().map(String::as_str).collect();
        args.extend(["--num-prompts", "2", "--disable-tqdm"]);
        args.extend(extra);
        let run = run_in_process(&args);
        assert_eq!(run.code, 2, "{}", run.stderr);
        assert!(run.stderr.contains(says), "{}", run.stderr);
    }
}

/// An exporter that does not answer is one note naming it as GPU telemetry, and the run
/// goes on without a GPU section.
#[test]
fn an_unreachable_exporter_is_one_note_and_no_gpu_section() {
    let server = mock(|_| {});
    let dir = TempDir::new("gpu-telemetry-unreachable");
    let exporter = format!("http://127.0.0.1:{}/metrics", crate::util::free_port());
    let base = dcgm_args(&server.base_url(), &exporter);
    let mut args: Vec<&str> = base.iter().map(String::as_str).collect();
    args.extend(["--result-dir", dir.arg(), "--result-filename", "r.json"]);
    let run = run_in_process(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let note = format!("gpu telemetry: {exporter}: ");
    assert_eq!(run.stderr.matches(&note).count(), 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("this run has no GPU figures from it"),
        "{}",
        run.stderr
    );
    assert!(!run.stdout.contains("GPU Telemetry"), "{}", run.stdout);
    let doc = crate::shards::read_json(&dir.path().join("r.json"));
    assert!(doc.get("vllm_bench_gpu_telemetry").is_none(), "{doc}");
}
