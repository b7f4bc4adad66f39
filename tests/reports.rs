//! Issue 15's reports in a real browser: every HTML plot is opened by headless Chromium with
//! the network disabled; its screenshot must not be blank and its DOM must hold one row per
//! request (the timeline's canvas reports `data-rows`) or the documented aggregate, and the
//! legend. The pages are also checked to reference nothing outside themselves.
//!
//! Chromium is Debian's `chromium` (installed by `.ci/run`); without it the browser tests
//! print `SKIP:` — or fail when `VLLM_BENCH_REQUIRE_REAL_SERVERS=1`. With
//! `VLLM_BENCH_WRITE_SCREENSHOTS=1` the screenshots are written to `docs/img/` (the README's).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use vllm_bench::metrics::RequestOutput;
use vllm_bench::output::plot;

use crate::e2e::mock;
use crate::util::{run_against_mock, TempDir};

/// Chromium's own limit: a page that does not load in this time fails the test.
const BROWSER_TIMEOUT: Duration = Duration::from_secs(90);

/// The browser, or `None` (after `SKIP:`) when it is not installed and not required.
fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    if path.exists() {
        return Some(path);
    }
    crate::util::skip_or_fail(
        "chromium",
        &format!(
            "{} does not exist (apt-get install -y chromium)",
            path.display()
        ),
    );
    None
}

/// Runs headless Chromium on `page` with `args` (network off, fresh profile) until it exits;
/// its stdout. Waits for the process, bounded by [`BROWSER_TIMEOUT`].
fn browse(browser: &Path, page: &Path, args: &[String]) -> String {
    let profile = TempDir::new("chromium-profile");
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            &format!("--user-data-dir={}", profile.arg()),
        ])
        .args(args)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromium");
    let mut stdout = child.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut s);
        s
    });
    let deadline = Instant::now() + BROWSER_TIMEOUT;
    loop {
        if let Some(status) = child.try_wait().expect("wait for chromium") {
            assert!(
                status.success(),
                "chromium failed on {}: {status}",
                page.display()
            );
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "chromium did not finish {} within {BROWSER_TIMEOUT:?}",
                page.display()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    reader.join().expect("stdout reader")
}

/// The page's DOM after its scripts ran.
fn dom(browser: &Path, page: &Path) -> String {
    browse(browser, page, &["--dump-dom".to_string()])
}

/// Takes a `width`×`height` screenshot of `page` into `png`, checks it is not blank, and
/// copies it to `docs/img/<name>` when asked to.
fn screenshot(browser: &Path, page: &Path, (width, height): (u32, u32), name: &str) {
    let dir = TempDir::new("shot");
    let png = dir.path().join(name);
    browse(
        browser,
        page,
        &[
            format!("--screenshot={}", png.display()),
            format!("--window-size={width},{height}"),
            "--hide-scrollbars".to_string(),
        ],
    );
    assert_not_blank(&png);
    if std::env::var("VLLM_BENCH_WRITE_SCREENSHOTS").is_ok_and(|v| v == "1") {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/img");
        std::fs::create_dir_all(&docs).expect("create docs/img");
        std::fs::copy(&png, docs.join(name)).expect("copy the screenshot");
    }
}

/// Decodes the PNG and requires real content: many colours and a spread of brightness.
fn assert_not_blank(png: &Path) {
    let file = std::fs::File::open(png).expect("screenshot written");
    let decoder = png::Decoder::new(std::io::BufReader::new(file));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("a PNG frame");
    let channels = info.color_type.samples();
    let pixels = &buf[..info.buffer_size()];
    let mut colours = std::collections::HashSet::new();
    let (mut sum, mut sum_sq, mut n) = (0f64, 0f64, 0f64);
    for px in pixels.chunks(channels) {
        colours.insert(px[..3.min(channels)].to_vec());
        let luma = px[..3.min(channels)].iter().map(|&c| c as f64).sum::<f64>() / 3.0;
        sum += luma;
        sum_sq += luma * luma;
        n += 1.0;
    }
    let variance = sum_sq / n - (sum / n).powi(2);
    assert!(
        colours.len() >= 8 && variance > 50.0,
        "{} looks blank: {} colours, luminance variance {variance:.1}",
        png.display(),
        colours.len()
    );
}

/// A page must not reach outside itself when it is viewed.
fn assert_self_contained(html: &str) {
    for needle in [
        "http://",
        "https://",
        "src=\"//",
        "href=\"//",
        "fetch(",
        "XMLHttpRequest",
        "<link",
        "@import",
    ] {
        assert!(!html.contains(needle), "the page contains {needle:?}");
    }
}

/// The value of `attr="..."` on the first element that has it.
fn attr<'a>(dom: &'a str, attr: &str) -> Option<&'a str> {
    let key = format!("{attr}=\"");
    let start = dom.find(&key)? + key.len();
    dom[start..].split('"').next()
}

fn only_file(dir: &Path, suffix: &str) -> PathBuf {
    let found: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read the result dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one {suffix} in {}: {found:?}",
        dir.display()
    );
    found.into_iter().next().expect("one file")
}

/// A run with jitter (so all three ITL classes appear) writes both plots beside its result.
fn run_with_plots(dir: &TempDir, prompts: &str) {
    let server = mock(|c| {
        c.first_token_delay = Duration::from_millis(20);
        c.token_interval = Duration::from_millis(4);
        c.jitter = Duration::from_millis(6);
    });
    let stdout = run_against_mock(
        &server.base_url(),
        dir,
        &[
            "--num-prompts",
            prompts,
            "--request-rate",
            "100",
            "--random-output-len",
            "24",
            "--random-range-ratio",
            "0.5",
            "--plot-timeline",
            "--timeline-itl-thresholds",
            "4,7",
            "--plot-dataset-stats",
        ],
    );
    assert!(stdout.contains("Timeline plot saved to: "), "{stdout}");
    assert!(
        stdout.contains("Dataset statistics plot saved to: "),
        "{stdout}"
    );
}

#[test]
fn the_timeline_opens_offline_with_one_row_per_request_and_the_legend() {
    let dir = TempDir::new("timeline");
    run_with_plots(&dir, "60");
    let result = only_file(dir.path(), ".json");
    let page = only_file(dir.path(), ".timeline.html");
    // Python's name: the result file's with `.timeline.html` for `.json`.
    assert_eq!(page, result.with_extension("timeline.html"));
    let html = std::fs::read_to_string(&page).expect("read the timeline");
    assert_self_contained(&html);
    let Some(browser) = chromium() else { return };
    let dom = dom(&browser, &page);
    assert_eq!(attr(&dom, "data-ready"), Some("1"), "the script ran");
    assert_eq!(attr(&dom, "data-rows"), Some("60"), "one row per request");
    // The mock serves /metrics: its scrapes (one before the run, one after it at least) are
    // drawn under the rows.
    let samples: usize = attr(&dom, "data-server-samples")
        .expect("the server strip was drawn")
        .parse()
        .expect("a count");
    assert!(samples >= 2, "{samples} server samples");
    for label in [
        "Server running requests",
        "Server KV-cache usage %",
        "TTFT",
        "ITL &lt; 4ms",
        "4ms ≤ ITL &lt; 7ms",
        "ITL ≥ 7ms",
        "Client queue",
    ] {
        assert!(dom.contains(label), "legend {label:?}");
    }
    screenshot(&browser, &page, (1200, 700), "timeline.png");
}

#[test]
fn the_dataset_stats_open_offline_with_every_request_counted() {
    let dir = TempDir::new("dataset-stats");
    run_with_plots(&dir, "40");
    let page = only_file(dir.path(), ".dataset_stats.html");
    let html = std::fs::read_to_string(&page).expect("read the stats");
    assert_self_contained(&html);
    let Some(browser) = chromium() else { return };
    let dom = dom(&browser, &page);
    // Three histograms of 30 bins, one stacked bar per request.
    assert_eq!(dom.matches("class=\"bin\"").count(), 90);
    assert_eq!(dom.matches("class=\"bar\"").count(), 40);
    for legend in [
        "Prompt Tokens",
        "Output Tokens",
        "Total Tokens Distribution",
    ] {
        assert!(dom.contains(legend), "{legend:?}");
    }
    screenshot(&browser, &page, (1200, 820), "dataset_stats.png");
}

/// 10,000 requests of 200 tokens with jittered gaps: the page stays small enough to open and
/// draws every row (figures in bench-overhead/results/HISTORY.md; printed with `--nocapture`).
#[test]
fn a_timeline_of_ten_thousand_requests_stays_usable() {
    let outputs: Vec<RequestOutput> = (0..10_000u64)
        .map(|i| {
            // A deterministic spread of gaps around the 25 ms and 50 ms thresholds.
            let itl: Vec<f64> = (0..199u64)
                .map(|k| 0.010 + ((i * 7919 + k * 104_729) % 60) as f64 / 1000.0)
                .collect();
            RequestOutput {
                success: i % 97 != 0,
                start_time: i as f64 * 0.01,
                client_queue_time: (i % 5) as f64 * 0.002,
                ttft: 0.2,
                latency: 0.2 + itl.iter().sum::<f64>(),
                itl: itl.into(),
                prompt_len: 512,
                output_tokens: 200,
                ..RequestOutput::default()
            }
        })
        .collect();
    // The common case for comparison: steady 10 ms gaps with a 60 ms one every 50 tokens.
    let typical: Vec<RequestOutput> = outputs
        .iter()
        .map(|o| RequestOutput {
            itl: (0..199)
                .map(|k| if k % 50 == 49 { 0.060 } else { 0.010 })
                .collect(),
            ..o.clone()
        })
        .collect();
    let typical_mb =
        plot::timeline::render(&typical, (25.0, 50.0), "typical", &[]).len() as f64 / 1e6;
    let dir = TempDir::new("timeline-10k");
    let page = dir.path().join("big.timeline.html");
    let html = plot::timeline::render(&outputs, (25.0, 50.0), "10,000 requests", &[]);
    std::fs::write(&page, &html).expect("write the page");
    assert_self_contained(&html);
    let size_mb = html.len() as f64 / 1e6;
    assert!(size_mb < 40.0, "{size_mb:.1} MB");
    let Some(browser) = chromium() else { return };
    let started = Instant::now();
    let dom = dom(&browser, &page);
    let wall = started.elapsed();
    assert_eq!(attr(&dom, "data-rows"), Some("10000"));
    println!(
        "timeline of 10,000 requests: {size_mb:.1} MB (steady gaps with spikes: \
         {typical_mb:.2} MB), first draw {} ms, drawn {} ms after navigation start, chromium \
         wall {:.1} s",
        attr(&dom, "data-draw-ms").unwrap_or("?"),
        attr(&dom, "data-load-ms").unwrap_or("?"),
        wall.as_secs_f64()
    );
}

#[test]
fn sweep_and_repeated_run_plots_open_offline_with_every_point() {
    let server = mock(|c| {
        c.first_token_delay = Duration::from_millis(5);
        c.token_interval = Duration::from_millis(1);
    });
    let dir = TempDir::new("summary-plots");
    let percentiles = ["--percentile-metrics", "ttft,tpot,itl,e2el"];
    let mut sweep = vec![
        "--num-prompts",
        "12",
        "--sweep-max-concurrency",
        "1,2,4",
        "--plot",
    ];
    sweep.extend(percentiles);
    run_against_mock(&server.base_url(), &dir, &sweep);
    let sweep_page = only_file(dir.path(), ".html");
    let html = std::fs::read_to_string(&sweep_page).expect("read the sweep plot");
    assert_self_contained(&html);
    let runs_dir = TempDir::new("runs-plot");
    let mut runs = vec![
        "--num-prompts",
        "8",
        "--max-concurrency",
        "2",
        "--num-runs",
        "3",
        "--plot",
        "--result-filename",
        "runs.json",
    ];
    runs.extend(percentiles);
    run_against_mock(&server.base_url(), &runs_dir, &runs);
    let runs_page = runs_dir.path().join("runs.html");
    assert_self_contained(&std::fs::read_to_string(&runs_page).expect("read the runs plot"));
    // The saved summary plots again, without a benchmark.
    let again = crate::util::run_in_process(&[
        "--plot-summary",
        runs_dir.path().join("runs.json").to_str().expect("utf-8"),
    ]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(
        again.stdout.contains("Summary plot saved to: "),
        "{}",
        again.stdout
    );
    crate::e2e::assert_refused(
        &["--plot-summary", "s.json", "--num-prompts", "5"],
        "--plot-summary: plots a saved summary and runs no benchmark; --num-prompts",
    );
    crate::e2e::assert_refused(
        &["--plot-summary", "missing.json"],
        "--plot-summary missing.json",
    );
    let Some(browser) = chromium() else { return };
    let dom = dom(&browser, &sweep_page);
    // Three points in each of three throughput-vs-latency and four metric-vs-value charts.
    let points = dom.matches("<g class=\"point").count();
    assert_eq!(points, 3 * 7, "{dom}");
    assert_eq!(dom.matches("class=\"pareto\"").count(), 3);
    assert!(dom.contains("Pareto front (lower latency, higher throughput)"));
    screenshot(&browser, &sweep_page, (1200, 1200), "sweep.png");
    let dom = crate::reports::dom(&browser, &runs_page);
    // Nine figures, three runs each.
    assert_eq!(dom.matches("<g class=\"run\">").count(), 27);
    screenshot(&browser, &runs_page, (1200, 1000), "runs.png");
}

/// Every result says whether the client stayed out of the way: the figures in the block, the
/// verdict after it, `vllm_bench_client_health` in the JSON. The chart comes with
/// `--terminal-chart` (stdout here is a pipe, so not without it), and the progress bar stays
/// off stderr when stderr is not a terminal.
#[test]
fn every_result_has_client_health_and_the_chart_follows_its_flag() {
    let server = mock(|_| {});
    let dir = TempDir::new("health");
    let url = server.base_url();
    let base = crate::util::mock_random_args(&url);
    let mut args: Vec<&str> = base.iter().map(String::as_str).collect();
    args.extend([
        "--num-prompts",
        "30",
        "--request-rate",
        "200",
        "--save-result",
        "--result-dir",
        dir.arg(),
        "--result-filename",
        "r.json",
    ]);
    let run = crate::util::run_in_process(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        !run.stderr.contains("in flight"),
        "no bar off a terminal: {}",
        run.stderr
    );
    assert!(!run.stdout.contains("termplotlib"));
    assert!(
        !run.stdout.contains("Output tokens per second"),
        "no chart into a pipe"
    );
    for line in [
        "Client core busy (%):",
        "Longest event-loop stall (ms):",
        "Arrivals sent >1 ms late:",
    ] {
        assert!(run.stdout.contains(line), "{line}\n{}", run.stdout);
    }
    let verdict = run
        .stdout
        .lines()
        .find(|l| l.starts_with("client: "))
        .expect("a verdict line");
    assert!(
        verdict == "client: not a bottleneck" || verdict.starts_with("client: WARNING: "),
        "{verdict}"
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).expect("result"))
            .expect("JSON");
    let health = &doc["vllm_bench_client_health"];
    assert_eq!(health["arrivals"].as_u64().map(|a| a <= 30), Some(true));
    assert_eq!(health["verdict"].as_str(), Some(verdict));
    let cores = health["cores"].as_array().expect("cores");
    // One per engine core: every core this process may run on (no --num-cores).
    assert_eq!(cores.len(), vllm_bench::runtime::available_cores().len());
    let busy_line = run
        .stdout
        .lines()
        .find(|l| l.starts_with("Client core busy (%):"))
        .expect("the busy line");
    for core in cores {
        // A thread's CPU time within the window, over the window: it did work (30
        // requests), and cannot have used more CPU than the time that passed.
        let busy = core["busy_fraction"].as_f64().expect("busy_fraction");
        assert!(busy > 0.0 && busy <= 1.0, "{busy}");
        // The block shows the JSON's figure, one decimal, per core.
        let shown = format!("{:.1} (core {})", busy * 100.0, core["core"]);
        assert!(busy_line.contains(&shown), "{shown} in {busy_line}");
    }

    let mut with_chart = args.to_vec();
    with_chart.push("--terminal-chart");
    let run = crate::util::run_in_process(&with_chart);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let block_end = run.stdout.find("P99 ITL (ms):").expect("the block");
    let chart = run
        .stdout
        .find("Output tokens per second (peak ")
        .expect("the chart");
    assert!(chart > block_end, "the chart comes under the block");
    assert!(run.stdout.contains("Requests in flight per second (peak "));
}
