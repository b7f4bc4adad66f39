//! `vllm-bench merge SHARD.json...`: the results of the shards of one run (`--shard K/N
//! --save-result`) as the result one process sending every request would have written.
//!
//! Exact, not an approximation: every shard saved each of its requests' figures with times
//! from the shared start (`--start-at`), so the merge puts the requests back in the
//! one-process run's order and computes every metric with the same calculator over their
//! union; the duration is the latest shard's (all shards started at the same instant), and
//! the steady state is computed over every request's span. Here only the steps: each file
//! is read and checked with the shard file (`output::shard_file`), their union is the run's
//! facts (`modes::merged_facts`), and those become the result by the one computation a live
//! run's facts go through (`RunFacts::result`), printed and saved by the same code, so
//! merging the one shard of `--shard 0/1` gives that run's sections and keys back. The shards' own engine,
//! client health and figures are kept side by side (the client judged once over all of
//! them, worst cause first), and their per-core histograms (HdrHistogram V2) are added for
//! the run's dispatch lag.
//!
//! An interrupted shard (Ctrl-C or SIGTERM, even before `--start-at`) is merged, not
//! refused: its requests that ran are figures like any other and those it never sent are
//! counted in `vllm_bench_not_sent`. The merged result is then marked
//! `vllm_bench_interrupted: true`, our section says which shards were, and
//! [`Merged::warning`] names them in one line for stderr, so a partial run is never taken
//! for a whole one.
//!
//! The server's metrics: every shard scraped the one server they share over its own window
//! (its result file carries the scrape under `vllm_bench_server_metrics`), so each saw every
//! shard's traffic and adding them would count it N times. The merge shows one shard's,
//! chosen by `merged_facts::server_metrics_shard`: the shard whose window misses the least of the merged
//! window (from the shared start to the end of the last response), then the one with the
//! least time outside it, then the lowest shard number.

use std::path::PathBuf;

use crate::config::MergeConfig;
use crate::metrics::RequestOutput;
use crate::output::json::result_path;
use crate::output::result_files::{check_file, check_not_input, ResultFiles, TargetError};
use crate::output::shard_file::{check_set, union_rows, ShardFile, ShardFileError};
use crate::output::stdio::Console;

use super::merged_facts::merged_facts;

/// Why shard results cannot be merged. Every one is the user's input (exit status 2) but
/// [`MergeError::Save`].
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error(transparent)]
    Shard(#[from] ShardFileError),
    #[error(transparent)]
    Target(#[from] TargetError),
    #[error("cannot write the merged result: {0:#}")]
    Save(anyhow::Error),
    /// `--export-requests` names a file that cannot be written (the user's input).
    #[error("{0:#}")]
    ExportTarget(anyhow::Error),
}

/// What a merge wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct Merged {
    pub path: PathBuf,
    /// The interrupted shards, as `K/N (file)`.
    pub interrupted: Vec<String>,
}

impl Merged {
    /// The warning for stderr naming the interrupted shards, if any (the save has said
    /// where the merged result went).
    pub fn warning(&self) -> Option<String> {
        (!self.interrupted.is_empty()).then(|| {
            format!(
                "warning: interrupted shard(s) {}: the merged result is marked interrupted \
                 and covers only what ran",
                self.interrupted.join(", ")
            )
        })
    }
}

/// The interrupted shards of a merge, as `K/N (file)`.
fn interrupted_shards(shards: &[ShardFile]) -> Vec<String> {
    shards
        .iter()
        .filter(|r| r.section.interrupted)
        .map(|r| format!("{}/{} ({})", r.section.shard, r.section.shards, r.path))
        .collect()
}

/// A shard's name in the merged blocks: `K/N`, or none when it is the only one (the merge of
/// `--shard 0/1` shows the run's blocks as the run showed them).
fn name_of(r: &ShardFile, shards: &[ShardFile]) -> String {
    if shards.len() > 1 {
        r.name()
    } else {
        String::new()
    }
}

/// Reads, checks and merges the shard results, prints the run's block and writes the
/// merged result; returns where it was written and which shards were interrupted.
pub fn run(args: &MergeConfig, console: &Console) -> Result<Merged, MergeError> {
    if let Some(name) = args.result_filename.as_deref() {
        let path = crate::output::json::in_result_dir(name, args.result_dir.as_deref());
        check_file(&path)?;
        check_not_input(&path, &args.files)?;
    }
    if let Some(export) = &args.export_requests {
        export.check_target().map_err(MergeError::ExportTarget)?;
        check_not_input(&export.path, &args.files)?;
    }
    let shards = args
        .files
        .iter()
        .map(|p| ShardFile::read(p))
        .collect::<Result<Vec<_>, _>>()?;
    let shards = check_set(shards)?;
    let rows = union_rows(&shards)?;
    let outputs: Vec<RequestOutput> = rows
        .iter()
        .map(|&(s, j)| shards[s].section.requests.output(j))
        .collect();
    // Where each shard's clock started on the shared axis; one shard's own "Start" block,
    // as its run showed it.
    let start = crate::output::start::StartCheck::of(shards.iter().map(|r| &r.section));
    let mut start_section = crate::output::start::merged_start_section(
        shards
            .iter()
            .filter_map(|r| Some((name_of(r, &shards), r.section.start_block.as_ref()?))),
    );
    if shards.len() > 1 {
        // Beside the run's block: how the shards' clocks started against each other.
        start_section.console.push_str(&start.render());
        let check = start.to_json().map_err(|e| MergeError::Save(e.into()))?;
        crate::output::json::append_extras(&mut start_section.json, check);
    }
    // The shards saved the output lengths their calculators used; counting again must give
    // those, so a zero stays zero.
    let zero = |_: &str| 0usize;
    let facts = merged_facts(&shards, &rows, &outputs, &zero, start_section)?;
    // The union's requests, read from the facts before they become the result.
    let exported = args
        .export_requests
        .as_ref()
        .map(|e| e.write(facts.request_rows()).map(|n| (e, n)));
    let result = facts.result();
    console.out(result.render(false));
    start.warnings().iter().for_each(|w| console.err_line(w));
    let path = result_path(
        &result.info,
        args.result_filename.as_deref(),
        args.result_dir.as_deref(),
    );
    check_file(&path)?;
    check_not_input(&path, &args.files)?;
    let doc = result.document().map_err(|e| MergeError::Save(e.into()))?;
    let files = ResultFiles {
        dir: args.result_dir.clone(),
        filename: args.result_filename.clone(),
    };
    files
        .save(
            &path,
            &doc.to_json_string(),
            false,
            "merged result",
            console,
        )
        .map_err(MergeError::Save)?;
    if let Some(exported) = exported {
        let (e, n) = exported.map_err(MergeError::Save)?;
        console.err_line(format_args!(
            "Exported {n} requests to {}",
            e.path.display()
        ));
    }
    Ok(Merged {
        path,
        interrupted: interrupted_shards(&shards),
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::Value;

    use super::*;
    use crate::engine::recorder::Histograms;
    use crate::metrics::goodput::GoodputConfig;
    use crate::metrics::metric_stats::MetricKind;
    use crate::metrics::report::{BenchmarkReport, ReportSettings, TaskKind};
    use crate::modes::merged_facts::server_metrics_shard;
    use crate::output::json::{build_result, RunInfo};
    use crate::output::server_metrics;
    use crate::output::shard_file::{
        self, Requests, Settings, ShardRequest, ShardSection, FORMAT, KEY,
    };
    use crate::server_metrics::ServerMetrics;

    fn output(i: usize) -> RequestOutput {
        let f = i as f64;
        RequestOutput {
            success: i % 7 != 3,
            error: if i % 7 == 3 {
                "HTTP 500".into()
            } else {
                String::new()
            },
            latency: 0.1 + f * 0.013,
            output_tokens: (i % 5) as u64 + 1,
            ttft: 0.02 + f * 0.001,
            itl: (0..(i % 5))
                .map(|k| 0.004 + k as f64 * 0.0007 + f * 1e-5)
                .collect(),
            prompt_len: 10 + i as u64,
            start_time: f * 0.05,
            client_queue_time: 0.0001 * f,
            input_sequences: 1 + (i % 3) as u64,
            // Every fifth request thought first (and one of those never answered).
            ttfo: match (i % 7 == 3, i % 5) {
                (true, _) => None,
                (false, 0) if i.is_multiple_of(10) => None,
                (false, 0) => Some(0.05 + f * 0.001),
                (false, _) => Some(0.02 + f * 0.001),
            },
            reasoning_tokens: i.is_multiple_of(5).then_some(3),
            generated_text: String::new(),
        }
    }

    fn section(shard: usize, shards: usize, outputs: &[RequestOutput]) -> ShardSection {
        let mut requests = Requests::default();
        for (i, o) in outputs
            .iter()
            .enumerate()
            .filter(|(i, _)| i % shards == shard)
        {
            requests.push(ShardRequest {
                index: i as u32,
                hash: Some(i as u64),
                scheduled: o.start_time,
                start_ns: (o.start_time * 1e9) as u64,
                end_ns: ((o.start_time + o.latency) * 1e9) as u64,
                output: o,
                output_len: if o.success { o.output_tokens } else { 0 },
                turn: None,
                replica: None,
                adapter: None,
                audio_s: None,
            });
        }
        ShardSection {
            format: FORMAT,
            shard,
            shards,
            fingerprint: "00000000000000aa".into(),
            start_at: Some(1.5e9),
            planned: requests.len(),
            not_sent: 0,
            not_sent_session_ended: 0,
            cancelled: None,
            duration: 2.0 + shard as f64 * 0.25,
            interrupted: false,
            run: RunInfo {
                date: "20261201-120000".into(),
                backend: "vllm".into(),
                label: None,
                model_id: "m".into(),
                tokenizer_id: Some("t".into()),
                num_prompts: outputs.len() as u64,
                metadata: Vec::new(),
                request_rate: 20.0,
                burstiness: 1.0,
                max_concurrency: Some(8),
                ramp_up: None,
            },
            settings: Settings {
                percentiles: vec![50.0, 99.0],
                percentile_metrics: "ttft,ttfo,tpot,itl,e2el".into(),
                goodput: [Some(30.0), None, None],
                goodput_ttfo: None,
                has_tokenizer: true,
                save_detailed: true,
                steady_state: None,
            },
            failures: vec![("http_500".into(), 1, "HTTP 500".into())],
            requests,
            histograms: vec![shard_file::encode_core(&Histograms::default())],
            start: None,
            start_block: None,
            engine: None,
            health: None,
            prefix_cache: None,
            replicas: Vec::new(),
            adapters: Vec::new(),
            rps_events: Vec::new(),
            probes: Vec::new(),
            server_metrics: None,
            agentic: None,
            gpu_telemetry: Vec::new(),
        }
    }

    /// A shard file: `section`, beside a report of its own the merge does not read.
    fn write(dir: &Path, name: &str, section: &ShardSection) -> PathBuf {
        let mut doc = serde_json::Map::new();
        doc.insert("completed".into(), Value::from(1));
        doc.insert("vllm_bench_workers".into(), Value::from(4));
        doc.insert(KEY.into(), serde_json::to_value(section).unwrap());
        let path = dir.join(name);
        std::fs::write(&path, Value::Object(doc).to_string()).unwrap();
        path
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("vllm-bench-merge-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn the_merge_equals_the_calculator_on_every_request() {
        let outputs: Vec<RequestOutput> = (0..40).map(output).collect();
        let dir = temp_dir("exact");
        let files: Vec<PathBuf> = [2, 0, 1]
            .iter()
            .map(|&k| write(&dir, &format!("s{k}.json"), &section(k, 3, &outputs)))
            .collect();
        let args = MergeConfig {
            files,
            result_dir: Some(dir.clone()),
            result_filename: Some("m.json".into()),
            export_requests: None,
        };
        let path = run(&args, &Console::capture().0).unwrap().path;
        let merged: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let zero = |_: &str| 0usize;
        let s = section(0, 3, &outputs);
        let settings = ReportSettings {
            duration_s: 2.5,
            task: TaskKind::Generation,
            count_tokens: Some(&zero),
            percentiles: s.settings.percentiles.clone(),
            percentile_metrics: MetricKind::parse_list(&s.settings.percentile_metrics),
            goodput: GoodputConfig {
                ttft_ms: Some(30.0),
                ..GoodputConfig::default()
            },
            max_concurrency: Some(8),
            request_rate: 20.0,
        };
        let report = BenchmarkReport::compute(&outputs, &settings);
        let info = s.run.clone();
        let expected = build_result(&info, &report, &outputs, &[], true).to_json_string();
        let expected: serde_json::Map<String, Value> = serde_json::from_str(&expected).unwrap();
        for (k, v) in &expected {
            assert_eq!(&merged[k], v, "{k}");
        }
        assert_eq!(merged["completed"], 34);
        assert_eq!(merged["vllm_bench_failures_by_reason"]["http_500"], 3);
        // Shard 0 holds i = 0, 3, ..., 39; i = 3 and 24 failed. Its own figures, computed
        // from its facts alone.
        assert_eq!(merged["vllm_bench_shards"][0]["completed"], 12);
        assert_eq!(merged["vllm_bench_shards"][0]["failed"], 2);
        let _ = std::fs::remove_dir_all(dir);
    }

    fn merge_files(dir: &Path, files: Vec<PathBuf>, out: &str) -> Result<Merged, String> {
        let args = MergeConfig {
            files,
            result_dir: Some(dir.to_path_buf()),
            result_filename: Some(out.into()),
            export_requests: None,
        };
        run(&args, &Console::capture().0).map_err(|e| e.to_string())
    }

    /// A tampered `shards: 0` passed off half a run as a whole one.
    #[test]
    fn a_shard_of_zero_shards_or_beyond_its_count_is_refused() {
        let outputs: Vec<RequestOutput> = (0..4).map(output).collect();
        let dir = temp_dir("zero-shards");
        let mut zero = section(0, 1, &outputs);
        zero.shards = 0;
        let e = merge_files(&dir, vec![write(&dir, "z.json", &zero)], "m.json").unwrap_err();
        assert!(e.contains("says it is shard 0 of 0"), "{e}");
        let mut beyond = section(0, 2, &outputs);
        beyond.shard = 2;
        let e = merge_files(&dir, vec![write(&dir, "b.json", &beyond)], "m.json").unwrap_err();
        assert!(e.contains("says it is shard 2 of 2"), "{e}");
        assert!(!dir.join("m.json").exists());
        let _ = std::fs::remove_dir_all(dir);
    }

    /// A file of the earlier layout (its probes, ramp-up and scrape outside the section) is
    /// refused by its format, naming the file, before anything is merged.
    #[test]
    fn a_shard_file_of_another_format_is_refused() {
        let outputs: Vec<RequestOutput> = (0..4).map(output).collect();
        let dir = temp_dir("format");
        let mut old = section(0, 1, &outputs);
        old.format = 1;
        let e = merge_files(&dir, vec![write(&dir, "old.json", &old)], "m.json").unwrap_err();
        assert!(
            e.contains("old.json") && e.contains("format 1; this vllm-bench reads format 2"),
            "{e}"
        );
        assert!(!dir.join("m.json").exists());
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_request_held_by_two_shards_is_refused() {
        let outputs: Vec<RequestOutput> = (0..6).map(output).collect();
        let dir = temp_dir("duplicate-request");
        let a = section(0, 2, &outputs);
        let mut b = section(1, 2, &outputs);
        b.requests.index[0] = a.requests.index[1];
        let files = vec![write(&dir, "a.json", &a), write(&dir, "b.json", &b)];
        let e = merge_files(&dir, files, "m.json").unwrap_err();
        assert!(
            e.contains("a.json") && e.contains("b.json") && e.contains("both hold request 2"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn the_merged_result_may_not_overwrite_a_shard_it_reads() {
        let outputs: Vec<RequestOutput> = (0..4).map(output).collect();
        let dir = temp_dir("overwrite");
        let k0 = write(&dir, "k0.json", &section(0, 1, &outputs));
        let before = std::fs::read(&k0).unwrap();
        let e = merge_files(&dir, vec![k0.clone()], "k0.json").unwrap_err();
        assert!(e.contains("it is one of the files read"), "{e}");
        assert_eq!(
            std::fs::read(&k0).unwrap(),
            before,
            "the shard is untouched"
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn lora_adapters_and_rtfx_survive_the_merge() {
        let outputs: Vec<RequestOutput> = (0..12).map(output).collect();
        let dir = temp_dir("lora-audio");
        let files: Vec<PathBuf> = (0..2)
            .map(|k| {
                let mut s = section(k, 2, &outputs);
                s.adapters = vec!["sql".into(), "chat".into()];
                s.requests.adapter = s.requests.index.iter().map(|&i| (i / 2) % 2).collect();
                s.requests.audio_s = s.requests.index.iter().map(|&i| f64::from(i)).collect();
                write(&dir, &format!("s{k}.json"), &s)
            })
            .collect();
        let path = merge_files(&dir, files, "m.json").unwrap().path;
        let merged: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let adapters: Vec<&str> = merged["vllm_bench_lora_adapters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let expected: Vec<&str> = (0..12).map(|i| ["sql", "chat"][(i / 2) % 2]).collect();
        assert_eq!(adapters, expected, "in the one-process run's order");
        assert_eq!(merged["vllm_bench_lora_summary"]["chat"]["requests"], 6);
        // The audio of the successful requests (i % 7 != 3) per second of the longest shard.
        let audio: f64 = (0..12).filter(|i| i % 7 != 3).map(f64::from).sum();
        let rtfx = merged["rtfx"].as_f64().unwrap();
        assert!((rtfx - audio / 2.25).abs() < 1e-9, "{rtfx}");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_shard_with_uneven_columns_is_refused() {
        let outputs: Vec<RequestOutput> = (0..4).map(output).collect();
        let dir = temp_dir("columns");
        let mut bad = section(0, 1, &outputs);
        bad.requests.ttft.pop();
        let args = MergeConfig {
            files: vec![write(&dir, "s.json", &bad)],
            result_dir: Some(dir.clone()),
            result_filename: None,
            export_requests: None,
        };
        let e = run(&args, &Console::capture().0).unwrap_err().to_string();
        assert!(e.contains("columns"), "{e}");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn shards_of_other_replicas_or_unnamed_replicas_are_refused() {
        let outputs: Vec<RequestOutput> = (0..4).map(output).collect();
        let dir = temp_dir("replicas");
        let urls = |ports: &[u16]| -> Vec<String> {
            ports.iter().map(|p| format!("http://h:{p}")).collect()
        };
        let with = |k: usize, ports: &[u16]| {
            let mut s = section(k, 2, &outputs);
            s.replicas = urls(ports);
            s.requests.replica = vec![1; s.requests.len()];
            s
        };
        let merge = |a: &ShardSection, b: &ShardSection| {
            let args = MergeConfig {
                files: vec![write(&dir, "a.json", a), write(&dir, "b.json", b)],
                result_dir: Some(dir.clone()),
                result_filename: None,
                export_requests: None,
            };
            run(&args, &Console::capture().0).map_err(|e| e.to_string())
        };
        let e = merge(&with(0, &[1, 2]), &with(1, &[1, 3])).unwrap_err();
        assert!(e.contains("same --base-url list"), "{e}");
        let mut unnamed = with(1, &[1, 2]);
        unnamed.requests.replica.clear();
        let e = merge(&with(0, &[1, 2]), &unnamed).unwrap_err();
        assert!(e.contains("name replicas outside its list of 2"), "{e}");
        let mut beyond = with(1, &[1, 2]);
        beyond.requests.replica[0] = 2;
        assert!(merge(&with(0, &[1, 2]), &beyond).is_err());
        assert!(merge(&with(0, &[1, 2]), &with(1, &[1, 2])).is_ok());
        let _ = std::fs::remove_dir_all(dir);
    }

    /// A shard file whose saved scrape holds `success` requests over `[first, last]`.
    fn write_with_scrape(
        dir: &Path,
        k: usize,
        section: &ShardSection,
        window: Option<(f64, f64)>,
        success: f64,
    ) -> PathBuf {
        let metrics = window.map(|(first, last)| {
            let mut figures = crate::server_metrics::Figures::default();
            figures
                .counters
                .insert(crate::server_metrics::vllm::REQUEST_SUCCESS.into(), success);
            figures.series.t = vec![first, (first + last) / 2.0, last];
            ServerMetrics {
                endpoints: vec![crate::server_metrics::EndpointMetrics {
                    url: "http://server/metrics".into(),
                    scrapes: 3,
                    failed: 0,
                    figures,
                }],
                notes: Vec::new(),
            }
        });
        let mut section = section.clone();
        section.server_metrics = metrics.map(|m| {
            let text = server_metrics::to_json(&m).to_json_string();
            let doc: Value = serde_json::from_str(&text).unwrap();
            doc[server_metrics::KEY].clone()
        });
        write(dir, &format!("s{k}.json"), &section)
    }

    #[test]
    fn the_merge_shows_the_scrape_of_the_shard_whose_window_covers_the_run_best() {
        let outputs: Vec<RequestOutput> = (0..40).map(output).collect();
        let dir = temp_dir("server-metrics");
        // The merged window is 0..2.5 s (shard 2's duration, the longest). Shard 0 covers
        // it with 5.5 s outside; shard 1 covers it with 0.2 s outside; shard 2 misses its
        // first 0.1 s; shard 3 did not scrape.
        let windows = [Some((-5.0, 3.0)), Some((-0.1, 2.6)), Some((0.1, 2.9)), None];
        let files: Vec<PathBuf> = windows
            .iter()
            .enumerate()
            .map(|(k, w)| {
                let mut s = section(k, 4, &outputs);
                s.duration = if k == 2 { 2.5 } else { 2.0 };
                write_with_scrape(&dir, k, &s, *w, 100.0 + k as f64)
            })
            .collect();
        let args = MergeConfig {
            files,
            result_dir: Some(dir.clone()),
            result_filename: Some("m.json".into()),
            export_requests: None,
        };
        let (console, captured) = Console::capture();
        let path = run(&args, &console).unwrap().path;
        let merged: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let m = &merged[server_metrics::KEY];
        assert_eq!(m["from_shard"], 1, "{m}");
        assert_eq!(m["counters"]["vllm:request_success"], 101.0);
        let stdout = captured.lock().unwrap().stdout.clone();
        assert!(stdout.contains(" Server Metrics "), "{stdout}");
        assert!(stdout.contains("Scraped by shard:"), "{stdout}");
        assert!(stdout.contains("1/4"), "{stdout}");
        let _ = std::fs::remove_dir_all(&dir);

        // No shard scraped: null, as before, and no block.
        let dir = temp_dir("server-metrics-none");
        let files: Vec<PathBuf> = (0..2)
            .map(|k| write_with_scrape(&dir, k, &section(k, 2, &outputs), None, 0.0))
            .collect();
        let args = MergeConfig {
            files,
            result_dir: Some(dir.clone()),
            result_filename: Some("m.json".into()),
            export_requests: None,
        };
        let path = run(&args, &Console::capture().0).unwrap().path;
        let merged: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert_eq!(merged[server_metrics::KEY], Value::Null);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn equal_windows_go_to_the_lowest_shard_and_an_edited_scrape_is_refused() {
        let outputs: Vec<RequestOutput> = (0..20).map(output).collect();
        let dir = temp_dir("server-metrics-tie");
        let files: Vec<PathBuf> = [1, 0]
            .iter()
            .map(|&k| {
                let mut s = section(k, 2, &outputs);
                s.duration = 2.0;
                write_with_scrape(&dir, k, &s, Some((-0.5, 2.5)), k as f64)
            })
            .collect();
        let shards =
            check_set(files.iter().map(|p| ShardFile::read(p).unwrap()).collect()).unwrap();
        assert_eq!(server_metrics_shard(&shards, 2.0), Some(0));
        let mut doc: serde_json::Map<String, Value> =
            serde_json::from_str(&std::fs::read_to_string(&files[0]).unwrap()).unwrap();
        doc[KEY]["server_metrics"]["counters"] = Value::from("edited");
        std::fs::write(&files[0], Value::Object(doc).to_string()).unwrap();
        let e = ShardFile::read(&files[0]).map(drop).unwrap_err();
        assert!(matches!(e, ShardFileError::ServerMetrics { .. }), "{e}");
        let text = e.to_string();
        assert!(
            text.contains("s1.json") && text.contains("counters"),
            "{text}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
