//! Golden parity with Python `vllm bench serve` 0.33 (`tests/fixtures/golden/python-0.33/*`).
//!
//! For every recorded scenario the per-request data of `result.json` is turned back into
//! `RequestOutput`s (the golden README's table), run through our calculator with the
//! scenario's flags, and compared with what Python produced:
//! - every metric of `recomputed.json` (vLLM's own `calculate_metrics*` on the same data),
//!   bit for bit, plus the inline client-queue statistics;
//! - the console block against `console.txt`, and the whole stdout tail (preamble, notices,
//!   block) against `stdout_tail.txt`, byte for byte;
//! - our result JSON, built from the same outcomes and the run facts of `result.json`,
//!   against `result.json` byte for byte (key order, types, float text, escaping).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use clap::ValueEnum;
use serde_json::Value;
use vllm_bench::cli::Backend;
use vllm_bench::metrics::goodput::GoodputConfig;
use vllm_bench::metrics::metric_stats::{MetricKind, MetricStats};
use vllm_bench::metrics::report::{BenchmarkReport, ReportSettings, TaskKind, TaskMetrics};
use vllm_bench::metrics::RequestOutput;
use vllm_bench::output::console::{render_block, render_notices, render_preamble, Preamble};
use vllm_bench::output::json::{build_result, Json, RunInfo};

/// The golden folder, `tests/fixtures/golden/python-0.33`.
fn golden_root() -> PathBuf {
    crate::util::fixture("golden/python-0.33")
}

fn scenario_dirs() -> Vec<PathBuf> {
    let root = golden_root();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", root.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("result.json").is_file())
        .collect();
    dirs.sort();
    assert_eq!(
        dirs.len(),
        6,
        "expected six golden scenarios in {}",
        root.display()
    );
    dirs
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&read(path))
        .unwrap_or_else(|e| panic!("bad JSON in {}: {e}", path.display()))
}

/// `command.txt`: the `key: value` lines, and the flags of the `command` line
/// (a flag collects the tokens up to the next `--flag`).
struct Command {
    keys: HashMap<String, String>,
    flags: HashMap<String, Vec<String>>,
}

impl Command {
    fn load(dir: &Path) -> Self {
        let text = read(&dir.join("command.txt"));
        let keys: HashMap<String, String> = text
            .lines()
            .filter_map(|l| l.split_once(": "))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut flags: HashMap<String, Vec<String>> = HashMap::new();
        let mut current: Option<String> = None;
        for token in keys["command"].split_whitespace() {
            if token.starts_with("--") {
                flags.entry(token.to_string()).or_default();
                current = Some(token.to_string());
            } else if let Some(flag) = &current {
                flags
                    .get_mut(flag)
                    .expect("flag just inserted")
                    .push(token.to_string());
            }
        }
        Command { keys, flags }
    }

    fn one(&self, flag: &str) -> Option<&str> {
        self.flags
            .get(flag)
            .and_then(|v| v.first())
            .map(String::as_str)
    }

    fn float(&self, flag: &str, default: f64) -> f64 {
        self.one(flag)
            .map_or(default, |v| v.parse().expect("numeric flag value"))
    }
}

/// The scenario's run as Python saw it.
struct Scenario {
    name: String,
    dir: PathBuf,
    cmd: Command,
    result: Value,
    task: TaskKind,
}

impl Scenario {
    fn load(dir: &Path) -> Self {
        let cmd = Command::load(dir);
        let name = cmd.one("--backend").unwrap_or("openai");
        let backend = Backend::from_str(name, false).expect("a known --backend");
        Scenario {
            name: dir.file_name().unwrap().to_string_lossy().into_owned(),
            dir: dir.to_path_buf(),
            task: TaskKind::for_backend(backend),
            result: read_json(&dir.join("result.json")),
            cmd,
        }
    }

    fn list(&self, key: &str) -> Option<&Vec<Value>> {
        self.result.get(key).and_then(Value::as_array)
    }

    fn f64s(&self, key: &str) -> Option<Vec<f64>> {
        self.list(key)
            .map(|v| v.iter().map(|x| x.as_f64().expect("float")).collect())
    }

    /// `RequestOutput`s from result.json, per the golden README's table.
    fn outputs(&self) -> Vec<RequestOutput> {
        let usage = self.cmd.keys.get("mock_usage").map(String::as_str) != Some("off");
        let errors: Vec<String> = self
            .list("errors")
            .expect("errors list")
            .iter()
            .map(|e| e.as_str().expect("error string").to_string())
            .collect();
        let n = errors.len();
        let floats = |key: &str| self.f64s(key).unwrap_or_else(|| vec![0.0; n]);
        let ints = |key: &str| -> Vec<u64> {
            self.list(key).map_or(vec![0; n], |v| {
                v.iter().map(|x| x.as_u64().expect("int")).collect()
            })
        };
        let (ttfts, latencies, starts, queues) = (
            floats("ttfts"),
            floats("latencies"),
            floats("start_times"),
            floats("queue_times"),
        );
        let (input_lens, output_lens) = (ints("input_lens"), ints("output_lens"));
        let itls: Vec<Vec<f64>> = self.list("itls").map_or(vec![Vec::new(); n], |v| {
            v.iter()
                .map(|l| {
                    l.as_array()
                        .expect("itl list")
                        .iter()
                        .map(|x| x.as_f64().unwrap())
                        .collect()
                })
                .collect()
        });
        let texts: Vec<String> = self
            .list("generated_texts")
            .map_or(vec![String::new(); n], |v| {
                v.iter()
                    .map(|t| t.as_str().expect("text").to_string())
                    .collect()
            });
        (0..n)
            .map(|i| RequestOutput {
                generated_text: texts[i].clone(),
                success: errors[i].is_empty(),
                latency: latencies[i],
                output_tokens: if usage { output_lens[i] } else { 0 },
                ttft: ttfts[i],
                itl: itls[i].clone().into(),
                prompt_len: input_lens[i],
                error: errors[i].clone(),
                start_time: starts[i],
                client_queue_time: queues[i],
                input_sequences: 1,
                ..RequestOutput::default()
            })
            .collect()
    }

    fn max_concurrency(&self) -> Option<u64> {
        self.cmd
            .one("--max-concurrency")
            .map(|v| v.parse().expect("integer concurrency"))
    }

    fn settings<'a>(&self, count: &'a (dyn Fn(&str) -> usize + Sync)) -> ReportSettings<'a> {
        let metrics = self
            .cmd
            .one("--percentile-metrics")
            .unwrap_or(self.task.default_percentile_metrics());
        let percentiles = self.cmd.one("--metric-percentiles").unwrap_or("99");
        let goodput = self.cmd.flags.get("--goodput").cloned().unwrap_or_default();
        ReportSettings {
            duration_s: self.result["duration"].as_f64().expect("duration"),
            task: self.task,
            count_tokens: Some(count),
            percentiles: percentiles
                .split(',')
                .map(|p| p.parse().expect("percentile"))
                .collect(),
            percentile_metrics: MetricKind::parse_list(metrics),
            goodput: GoodputConfig::parse(&goodput).expect("valid --goodput"),
            max_concurrency: self.max_concurrency(),
            request_rate: self.cmd.float("--request-rate", f64::INFINITY),
        }
    }

    fn run_info(&self) -> RunInfo {
        let r = &self.result;
        let s = |k: &str| r[k].as_str().map(str::to_string);
        RunInfo {
            date: s("date").expect("date"),
            backend: s("backend").expect("backend"),
            label: s("label"),
            model_id: s("model_id").expect("model_id"),
            tokenizer_id: s("tokenizer_id"),
            num_prompts: r["num_prompts"].as_u64().expect("num_prompts"),
            metadata: Vec::new(),
            request_rate: r["request_rate"].as_f64().unwrap_or(f64::INFINITY),
            burstiness: r["burstiness"].as_f64().expect("burstiness"),
            max_concurrency: r["max_concurrency"].as_u64(),
            ramp_up: None,
        }
    }
}

/// The golden tokenizer, counting tokens without special tokens.
fn golden_tokenizer() -> tokenizers::Tokenizer {
    let path = golden_root().join("tok/tokenizer.json");
    tokenizers::Tokenizer::from_file(&path)
        .unwrap_or_else(|e| panic!("cannot load {}: {e}", path.display()))
}

/// A number as Python produced it: an int, or a float to compare bit for bit.
#[derive(Debug, PartialEq)]
enum Num {
    Int(u64),
    Float(u64),
}

fn num(v: &Value) -> Num {
    match v.as_u64() {
        Some(i) if !v.is_f64() => Num::Int(i),
        _ => Num::Float(v.as_f64().expect("number").to_bits()),
    }
}

fn float(x: f64) -> Num {
    Num::Float(x.to_bits())
}

/// Our values under recomputed.json's names (dataclass field names).
fn our_fields(report: &BenchmarkReport) -> Vec<(String, Num)> {
    let mut f: Vec<(String, Num)> = Vec::new();
    let stats = |name: &str, s: &MetricStats, f: &mut Vec<(String, Num)>| {
        f.push((format!("mean_{name}_ms"), float(s.mean_ms)));
        f.push((format!("median_{name}_ms"), float(s.median_ms)));
        f.push((format!("std_{name}_ms"), float(s.std_ms)));
        for (i, &(p, v)) in s.percentiles_ms.iter().enumerate() {
            f.push((format!("percentiles_{name}_ms[{i}]"), float(p)));
            f.push((format!("percentiles_{name}_ms[{i}].value"), float(v)));
        }
    };
    match &report.metrics {
        TaskMetrics::Generation { metrics: m, .. } => {
            f.push(("completed".into(), Num::Int(m.completed)));
            f.push(("failed".into(), Num::Int(m.failed)));
            f.push(("total_input".into(), Num::Int(m.total_input)));
            f.push(("total_output".into(), Num::Int(m.total_output)));
            f.push(("request_throughput".into(), float(m.request_throughput)));
            f.push(("request_goodput".into(), float(m.request_goodput)));
            f.push(("output_throughput".into(), float(m.output_throughput)));
            f.push((
                "total_token_throughput".into(),
                float(m.total_token_throughput),
            ));
            stats("ttft", &m.ttft, &mut f);
            stats("tpot", &m.tpot, &mut f);
            stats("itl", &m.itl, &mut f);
            stats("e2el", &m.e2el, &mut f);
            f.push((
                "max_output_tokens_per_s".into(),
                float(m.max_output_tokens_per_s),
            ));
            f.push((
                "max_concurrent_requests".into(),
                Num::Int(m.max_concurrent_requests),
            ));
            f.push(("rtfx".into(), float(m.rtfx)));
        }
        TaskMetrics::Pooling(m) => {
            f.push(("completed".into(), Num::Int(m.completed)));
            f.push(("failed".into(), Num::Int(m.failed)));
            f.push(("total_input".into(), Num::Int(m.total_input)));
            f.push((
                "total_input_sequences".into(),
                Num::Int(m.total_input_sequences),
            ));
            f.push(("request_throughput".into(), float(m.request_throughput)));
            f.push((
                "input_sequence_throughput".into(),
                float(m.input_sequence_throughput),
            ));
            f.push((
                "total_token_throughput".into(),
                float(m.total_token_throughput),
            ));
            stats("e2el", &m.e2el, &mut f);
        }
    }
    f
}

/// recomputed.json's dataclass fields, flattened like `our_fields`.
fn python_fields(recomputed: &Value) -> Vec<(String, Num)> {
    let mut f = Vec::new();
    for (k, v) in recomputed.as_object().expect("object") {
        if k.starts_with('_') || k == "actual_output_lens" {
            continue;
        }
        match v.as_array() {
            Some(pairs) => {
                for (i, pair) in pairs.iter().enumerate() {
                    f.push((format!("{k}[{i}]"), num(&pair[0])));
                    f.push((format!("{k}[{i}].value"), num(&pair[1])));
                }
            }
            None => f.push((k.clone(), num(v))),
        }
    }
    f
}

/// Panics with the first differing line when two texts differ.
fn assert_text_eq(what: &str, ours: &str, python: &str) {
    if ours == python {
        return;
    }
    let (a, b): (Vec<_>, Vec<_>) = (
        ours.split_inclusive('\n').collect(),
        python.split_inclusive('\n').collect(),
    );
    let i = a
        .iter()
        .zip(&b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()));
    panic!(
        "{what} differs at line {}:\n  ours:   {:?}\n  python: {:?}\n({} vs {} lines)",
        i + 1,
        a.get(i),
        b.get(i),
        a.len(),
        b.len()
    );
}

/// Runs `check` for every scenario, reporting all failures together.
fn for_each_scenario(check: impl Fn(&Scenario, &BenchmarkReport, &[RequestOutput])) {
    let tok = golden_tokenizer();
    let count = move |text: &str| -> usize {
        tok.encode(text, false)
            .expect("tokenizable text")
            .get_ids()
            .len()
    };
    let mut failures = Vec::new();
    for dir in scenario_dirs() {
        let sc = Scenario::load(&dir);
        let outputs = sc.outputs();
        let report = BenchmarkReport::compute(&outputs, &sc.settings(&count));
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            check(&sc, &report, &outputs)
        }));
        if let Err(e) = outcome {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            failures.push(format!("[{}] {msg}", sc.name));
        }
    }
    assert!(
        failures.is_empty(),
        "{} scenario(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn metrics_match_python_bit_for_bit() {
    for_each_scenario(|sc, report, _| {
        let recomputed = read_json(&sc.dir.join("recomputed.json"));
        let ours = our_fields(report);
        let python = python_fields(&recomputed);
        let ours_map: HashMap<&str, &Num> = ours.iter().map(|(k, v)| (k.as_str(), v)).collect();
        for (k, v) in &python {
            let mine = ours_map
                .get(k.as_str())
                .unwrap_or_else(|| panic!("we lack {k}"));
            if *mine != v {
                let show = |n: &Num| match n {
                    Num::Int(i) => i.to_string(),
                    Num::Float(b) => format!("{:?}", f64::from_bits(*b)),
                };
                panic!("{k}: ours {} python {}", show(mine), show(v));
            }
        }
        assert_eq!(ours.len(), python.len(), "field count");
        if let TaskMetrics::Generation {
            actual_output_lens, ..
        } = &report.metrics
        {
            let py: Vec<u64> = recomputed["actual_output_lens"]
                .as_array()
                .expect("actual_output_lens")
                .iter()
                .map(|x| x.as_u64().unwrap())
                .collect();
            assert_eq!(actual_output_lens, &py, "actual_output_lens");
        }
        // The inline client-queue statistics, where Python computed them.
        let inline = recomputed["_inline_queue_stats"]
            .as_object()
            .expect("inline stats");
        let mut ours_inline: Vec<(String, u64)> = Vec::new();
        for (kind, stats) in report.sections() {
            if matches!(
                kind,
                MetricKind::ClientQueueTime | MetricKind::E2elIncludingClientQueue
            ) {
                let name = kind.name();
                ours_inline.push((format!("mean_{name}_ms"), stats.mean_ms.to_bits()));
                ours_inline.push((format!("median_{name}_ms"), stats.median_ms.to_bits()));
                ours_inline.push((format!("std_{name}_ms"), stats.std_ms.to_bits()));
                for &(p, v) in &stats.percentiles_ms {
                    let word = vllm_bench::metrics::metric_stats::percentile_word(p);
                    ours_inline.push((format!("p{word}_{name}_ms"), v.to_bits()));
                }
            }
        }
        let py_inline: Vec<(String, u64)> = inline
            .iter()
            .map(|(k, v)| (k.clone(), v.as_f64().expect("float").to_bits()))
            .collect();
        assert_eq!(ours_inline, py_inline, "inline client-queue statistics");
    });
}

#[test]
fn console_block_matches_python_byte_for_byte() {
    for_each_scenario(|sc, report, outputs| {
        let block = render_block(report);
        assert_text_eq("console block", &block, &read(&sc.dir.join("console.txt")));

        let ramp = None;
        let preamble = Preamble {
            self_timed: sc.cmd.one("--dataset-name") == Some("timed_trace"),
            ramp_up: ramp,
            request_rate: sc.cmd.float("--request-rate", f64::INFINITY),
            burstiness: sc.cmd.float("--burstiness", 1.0),
            max_concurrency: sc.max_concurrency(),
        };
        let tail = format!(
            "Starting main benchmark run...\n{}{}{}",
            render_preamble(&preamble),
            render_notices(outputs, sc.task),
            block
        );
        // Python's "tip: install termplotlib" line is the one deliberate difference: it means
        // nothing for this binary, which draws its own chart (issue 15).
        let python = read(&sc.dir.join("stdout_tail.txt")).replace(
            "tip: install termplotlib and gnuplot to plot the metrics\n",
            "",
        );
        assert_text_eq("stdout tail", &tail, &python);
    });
}

#[test]
fn result_json_matches_python_byte_for_byte() {
    for_each_scenario(|sc, report, outputs| {
        let run = sc.run_info();
        let doc = build_result(&run, report, outputs, &[], true);
        let ours = doc.to_json_string();
        let python = read(&sc.dir.join("result.json"));
        if ours != python {
            // Key order first (the likeliest slip), then the first differing byte in context.
            let ours_v: serde_json::Map<String, Value> =
                serde_json::from_str(&ours).expect("our JSON parses");
            let py_keys: Vec<&String> = sc.result.as_object().expect("object").keys().collect();
            assert_eq!(ours_v.keys().collect::<Vec<_>>(), py_keys, "key order");
            let at = ours
                .bytes()
                .zip(python.bytes())
                .position(|(a, b)| a != b)
                .unwrap_or(ours.len().min(python.len()));
            let lo = at.saturating_sub(80);
            panic!(
                "result JSON differs at byte {at}:\n  ours:   {:?}\n  python: {:?}",
                &ours[lo..(at + 80).min(ours.len())],
                &python[lo..(at + 80).min(python.len())]
            );
        }
        // Without --save-detailed Python drops the per-request lists but keeps latencies
        // and queue_times.
        let brief = build_result(&run, report, outputs, &[], false);
        let keys: Vec<&str> = brief.keys().collect();
        for gone in [
            "input_lens",
            "output_lens",
            "start_times",
            "ttfts",
            "itls",
            "generated_texts",
            "errors",
        ] {
            assert!(!keys.contains(&gone), "{gone} kept without --save-detailed");
        }
        assert!(keys.contains(&"latencies") && keys.contains(&"queue_times"));
        let expected_goodput = sc.cmd.flags.contains_key("--goodput");
        if sc.task == TaskKind::Generation {
            assert_eq!(
                !matches!(brief.get("request_goodput"), Some(Json::Null)),
                expected_goodput
            );
        }
    });
}

/// The terminal chart of each recorded Python run equals its committed rendering
/// (`tests/data/terminal_chart/<scenario>.txt`; `VLLM_BENCH_WRITE_EXPECTED=1` rewrites them).
#[test]
fn terminal_chart_of_recorded_runs_matches_the_committed_rendering() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/terminal_chart");
    for_each_scenario(|sc, _, outputs| {
        let chart = vllm_bench::output::terminal_chart::render(
            vllm_bench::metrics::peaks::per_second(outputs).as_ref(),
        );
        let path = dir.join(format!("{}.txt", sc.name));
        if std::env::var("VLLM_BENCH_WRITE_EXPECTED").is_ok_and(|v| v == "1") {
            std::fs::create_dir_all(&dir).expect("create tests/data/terminal_chart");
            std::fs::write(&path, &chart).expect("write the expected chart");
        }
        assert_text_eq("terminal chart", &chart, &read(&path));
    });
}
