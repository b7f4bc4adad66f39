//! The result JSON: Python's schema, key order, value types and `json.dump` text.
//!
//! What Python writes with `--save-result` (`vllm/benchmarks/serve.py`, 0.33), in order:
//! 1. run facts: `date, endpoint_type, backend, label, model_id, tokenizer_id, num_prompts`,
//!    then `--metadata` pairs, then `request_rate` (`"inf"` when infinite), `burstiness`,
//!    `max_concurrency` (`null` when unset) and, with ramp-up, `ramp_up_strategy,
//!    ramp_up_start_rps, ramp_up_end_rps`;
//! 2. the benchmark result: totals and throughputs (`request_goodput` is `null` without
//!    `--goodput`), per-request lists, peaks, `rtfx` (generation) or the pooling key set
//!    (no `failed` key), then `rps_change_events` when ramping up;
//! 3. per reported metric (`BenchmarkReport::sections`): `mean_X_ms, median_X_ms,
//!    std_X_ms`, then `pP_X_ms` per percentile.
//!
//! With `--percentile-metrics ...,ttfo` (ours) the document is no longer Python's: the
//! `ttfo` keys come beside `ttft`'s, and `total_reasoning_tokens` (null when the server
//! counted none) and `no_output_token_requests` follow `total_output_tokens`.
//!
//! The document is built with Python dict semantics (`JsonObject::set` replaces an existing
//! key in place, so a `--metadata` key named like a later key keeps its position and takes
//! the later value). Without `--save-detailed` Python deletes `input_lens, output_lens,
//! start_times, ttfts, itls, generated_texts, errors` (but keeps `latencies` and
//! `queue_times`). Keys we add beyond Python's go after all of these (`append_extras`).
//!
//! Serialization follows `json.dump` defaults: `", "` and `": "` separators, no indent, no
//! trailing newline, `ensure_ascii` escaping, floats as Python `repr`, integers as integers.
//! serde_json's float text differs from Python's, hence our one writer, `pyfmt::json` (also
//! used for the error texts Python builds with `json.dumps`).
//!
//! One deliberate difference: every document we write is strict JSON. Python's `json.dump`
//! writes `NaN`, `Infinity` and `-Infinity` for non-finite floats (a throughput over a
//! zero-length run, the figures of a run interrupted before it sent anything), which no
//! strict parser reads (`merge`, `--compare`, `jq`). We write `null` for every non-finite
//! float, in any key or list; `null` is what Python's schema already uses for "no value"
//! (`request_goodput` without `--goodput`). The infinite request rate keeps Python's
//! string `"inf"` (set by `run_facts`, not by this writer).

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::metrics::metric_stats::{percentile_word, MetricStats};
use crate::metrics::report::{BenchmarkReport, TaskMetrics};
use crate::metrics::RequestOutput;
use crate::pyfmt::float_repr;
pub use crate::pyfmt::json::{Json, JsonObject};
use crate::types::RampUp;

/// Per-request keys Python removes unless `--save-detailed` is given.
const DETAILED_KEYS: [&str; 7] = [
    "input_lens",
    "output_lens",
    "start_times",
    "ttfts",
    "itls",
    "generated_texts",
    "errors",
];

/// The run facts saved ahead of the metrics (everything Python takes from its arguments).
/// Serde (a shard's result carries them for the merge) writes an infinite rate as `null`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunInfo {
    /// `%Y%m%d-%H%M%S` local time (`LocalDateTime::result_date`).
    pub date: String,
    /// `--backend` (saved as both `endpoint_type` and `backend`).
    pub backend: String,
    pub label: Option<String>,
    pub model_id: String,
    /// `None` with `--skip-tokenizer-init`.
    pub tokenizer_id: Option<String>,
    pub num_prompts: u64,
    /// `--metadata KEY=VALUE` pairs, in order (see `parse_metadata`).
    pub metadata: Vec<(String, String)>,
    /// `f64::INFINITY` when unset (saved as the string `"inf"`).
    #[serde(with = "infinite_as_null")]
    pub request_rate: f64,
    #[serde(with = "infinite_as_null")]
    pub burstiness: f64,
    pub max_concurrency: Option<u64>,
    pub ramp_up: Option<RampUp>,
}

/// `f64::INFINITY` as JSON `null` and back (JSON has no infinity).
mod infinite_as_null {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        match v.is_finite() {
            true => s.serialize_f64(*v),
            false => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::INFINITY))
    }
}

/// One entry of `rps_change_events`: the ramp-up reached `rps` at `timestamp`
/// (`LocalDateTime::isoformat`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RpsChangeEvent {
    pub rps: u64,
    pub timestamp: String,
}

/// Parses `--metadata KEY=VALUE` items as Python does (split at the first `=`, both sides
/// stripped).
pub fn parse_metadata<S: AsRef<str>>(items: &[S]) -> anyhow::Result<Vec<(String, String)>> {
    items
        .iter()
        .map(|item| {
            let item = item.as_ref();
            let (k, v) = item.split_once('=').with_context(|| {
                format!(
                    "--metadata {item:?}: Invalid metadata format. Please use KEY=VALUE format."
                )
            })?;
            Ok((k.trim().to_string(), v.trim().to_string()))
        })
        .collect()
}

/// Builds the result document Python would save for this run.
///
/// `outputs` are the per-request outcomes in dispatch order (the same ones the report was
/// computed from); `save_detailed` keeps the per-request lists.
pub fn build_result<'a>(
    run: &'a RunInfo,
    report: &'a BenchmarkReport,
    outputs: &'a [RequestOutput],
    rps_change_events: &'a [RpsChangeEvent],
    save_detailed: bool,
) -> JsonObject<'a> {
    let mut doc = JsonObject::new();
    run_facts(&mut doc, run);
    match &report.metrics {
        TaskMetrics::Generation {
            metrics: m,
            actual_output_lens,
        } => {
            doc.set("duration", Json::Float(report.duration_s));
            doc.set("completed", Json::UInt(m.completed));
            doc.set("failed", Json::UInt(m.failed));
            doc.set("total_input_tokens", Json::UInt(m.total_input));
            doc.set("total_output_tokens", Json::UInt(m.total_output));
            if report.shows_ttfo() {
                // Ours, with TTFO (see `BenchmarkReport::shows_ttfo`).
                doc.set(
                    "total_reasoning_tokens",
                    Json::opt(m.total_reasoning, Json::UInt),
                );
                doc.set("no_output_token_requests", Json::UInt(m.no_output_token));
            }
            doc.set("request_throughput", Json::Float(m.request_throughput));
            let goodput = report.goodput_enabled.then_some(m.request_goodput);
            doc.set("request_goodput", Json::opt(goodput, Json::Float));
            doc.set("output_throughput", Json::Float(m.output_throughput));
            doc.set(
                "total_token_throughput",
                Json::Float(m.total_token_throughput),
            );
            doc.set("input_lens", prompt_lens(outputs));
            doc.set(
                "output_lens",
                Json::UInts(Cow::Borrowed(actual_output_lens)),
            );
            doc.set("ttfts", floats(outputs, |o| o.ttft));
            let itls = outputs
                .iter()
                .map(|o| Json::Floats(Cow::Owned(o.itl.to_vec())))
                .collect();
            doc.set("itls", Json::List(itls));
            doc.set("latencies", floats(outputs, |o| o.latency));
            doc.set("start_times", floats(outputs, |o| o.start_time));
            doc.set("queue_times", floats(outputs, |o| o.client_queue_time));
            doc.set("generated_texts", strings(outputs, |o| &o.generated_text));
            doc.set("errors", strings(outputs, |o| &o.error));
            doc.set(
                "max_output_tokens_per_s",
                Json::Float(m.max_output_tokens_per_s),
            );
            doc.set(
                "max_concurrent_requests",
                Json::UInt(m.max_concurrent_requests),
            );
            doc.set("rtfx", Json::Float(m.rtfx));
        }
        TaskMetrics::Pooling(m) => {
            doc.set("duration", Json::Float(report.duration_s));
            doc.set("completed", Json::UInt(m.completed));
            doc.set("total_input_tokens", Json::UInt(m.total_input));
            doc.set("total_input_sequences", Json::UInt(m.total_input_sequences));
            doc.set("request_throughput", Json::Float(m.request_throughput));
            doc.set(
                "input_sequence_throughput",
                Json::Float(m.input_sequence_throughput),
            );
            doc.set(
                "total_token_throughput",
                Json::Float(m.total_token_throughput),
            );
            doc.set("input_lens", prompt_lens(outputs));
            doc.set("latencies", floats(outputs, |o| o.latency));
            doc.set("queue_times", floats(outputs, |o| o.client_queue_time));
            doc.set("errors", strings(outputs, |o| &o.error));
        }
    }
    if let Some(p) = &report.probe {
        // Python: `result.update(probe_stats)` before the ramp-up events.
        doc.set("probe_completed", Json::UInt(p.completed));
        doc.set("probe_failed", Json::UInt(p.failed));
        doc.set("probe_median_e2el_ms", Json::Float(p.median_e2el_ms));
        doc.set("probe_p99_e2el_ms", Json::Float(p.p99_e2el_ms));
        doc.set("probe_max_e2el_ms", Json::Float(p.max_e2el_ms));
    }
    if !rps_change_events.is_empty() {
        doc.set("rps_change_events", rps_events(rps_change_events));
    }
    metric_keys(&mut doc, report);
    if !save_detailed {
        for key in DETAILED_KEYS {
            doc.remove(key);
        }
    }
    doc
}

/// `mean_X_ms`, `median_X_ms`, `std_X_ms` and `pNN_X_ms` of every reported metric.
fn metric_keys(doc: &mut JsonObject<'_>, report: &BenchmarkReport) {
    for (kind, stats) in report.sections() {
        set_stats(doc, kind.name(), stats);
    }
}

/// One turn's entry of `per_turn_metrics` (multi-turn runs): the turn (1-based), its
/// counts, tokens and throughput over its own span, and the metric keys of the run's.
pub fn turn_metrics(turn: usize, report: &BenchmarkReport) -> JsonObject<'static> {
    let mut doc = JsonObject::new();
    doc.set("turn", Json::UInt(turn as u64));
    if let TaskMetrics::Generation { metrics: m, .. } = &report.metrics {
        doc.set("completed", Json::UInt(m.completed));
        doc.set("failed", Json::UInt(m.failed));
        doc.set("duration", Json::Float(report.duration_s));
        doc.set("total_input_tokens", Json::UInt(m.total_input));
        doc.set("total_output_tokens", Json::UInt(m.total_output));
        doc.set("request_throughput", Json::Float(m.request_throughput));
        doc.set("output_throughput", Json::Float(m.output_throughput));
    }
    metric_keys(&mut doc, report);
    doc
}

/// One metric's keys, Python's names: `mean_X_ms, median_X_ms, std_X_ms`, then `pP_X_ms` per
/// percentile (`X` is the `--percentile-metrics` name).
pub(super) fn set_stats(doc: &mut JsonObject<'_>, name: &str, stats: &MetricStats) {
    doc.set(format!("mean_{name}_ms"), Json::Float(stats.mean_ms));
    doc.set(format!("median_{name}_ms"), Json::Float(stats.median_ms));
    doc.set(format!("std_{name}_ms"), Json::Float(stats.std_ms));
    for &(p, value) in &stats.percentiles_ms {
        doc.set(
            format!("p{}_{name}_ms", percentile_word(p)),
            Json::Float(value),
        );
    }
}

/// Adds keys beyond Python's schema after all of Python's keys. Extras should use new key
/// names: an existing name is replaced in place (Python dict semantics), not moved.
pub fn append_extras<'a>(doc: &mut JsonObject<'a>, extras: JsonObject<'a>) {
    for (k, v) in extras.into_entries() {
        doc.set(k, v);
    }
}

/// Keys 1 of the schema: the run facts, metadata, traffic settings.
fn run_facts<'a>(doc: &mut JsonObject<'a>, run: &'a RunInfo) {
    doc.set("date", Json::str(run.date.as_str()));
    doc.set("endpoint_type", Json::str(run.backend.as_str()));
    doc.set("backend", Json::str(run.backend.as_str()));
    doc.set("label", Json::opt(run.label.as_deref(), Json::str));
    doc.set("model_id", Json::str(run.model_id.as_str()));
    doc.set(
        "tokenizer_id",
        Json::opt(run.tokenizer_id.as_deref(), Json::str),
    );
    doc.set("num_prompts", Json::UInt(run.num_prompts));
    for (k, v) in &run.metadata {
        doc.set(k.as_str(), Json::str(v.as_str()));
    }
    // Python: `rate if rate < inf else "inf"`.
    let rate = if run.request_rate < f64::INFINITY {
        Json::Float(run.request_rate)
    } else {
        Json::str("inf")
    };
    doc.set("request_rate", rate);
    doc.set("burstiness", Json::Float(run.burstiness));
    doc.set(
        "max_concurrency",
        Json::opt(run.max_concurrency, Json::UInt),
    );
    if let Some(r) = &run.ramp_up {
        doc.set("ramp_up_strategy", Json::str(r.strategy.name()));
        doc.set("ramp_up_start_rps", Json::UInt(r.start_rps));
        doc.set("ramp_up_end_rps", Json::UInt(r.end_rps));
    }
}

fn prompt_lens(outputs: &[RequestOutput]) -> Json<'static> {
    Json::UInts(Cow::Owned(outputs.iter().map(|o| o.prompt_len).collect()))
}

fn floats(outputs: &[RequestOutput], f: impl Fn(&RequestOutput) -> f64) -> Json<'static> {
    Json::Floats(Cow::Owned(outputs.iter().map(f).collect()))
}

fn strings<'a>(
    outputs: &'a [RequestOutput],
    f: impl Fn(&'a RequestOutput) -> &'a String,
) -> Json<'a> {
    Json::List(outputs.iter().map(|o| Json::str(f(o).as_str())).collect())
}

fn rps_events(events: &[RpsChangeEvent]) -> Json<'_> {
    let items = events
        .iter()
        .map(|e| {
            let mut o = JsonObject::new();
            o.set("rps", Json::UInt(e.rps));
            o.set("timestamp", Json::str(e.timestamp.as_str()));
            Json::Object(o)
        })
        .collect();
    Json::List(items)
}

/// Where the result goes, from `--result-dir` / `--result-filename` and the run facts.
///
/// Python's default name is `{label}-{rate}qps[-concurrency{n}]-{model}-{date}.json`, or
/// `{label}-ramp-up-{strategy}-{start}qps-{end}qps[-concurrency{n}]-{model}-{date}.json`
/// with ramp-up; `label` defaults to the backend, `model` is the last `/` part of the model
/// id and `rate` is Python's `str(float)` (`inf`, `40.0`). `--result-filename` replaces the
/// name; `--result-dir` is joined in front (an absolute file name wins, as `os.path.join`).
pub fn result_path(
    run: &RunInfo,
    result_filename: Option<&str>,
    result_dir: Option<&Path>,
) -> PathBuf {
    let name = match result_filename {
        Some(name) => name.to_string(),
        None => default_result_filename(run),
    };
    in_result_dir(&name, result_dir)
}

/// Where a result file named `name` goes: inside `--result-dir`, else where it says (an
/// absolute name wins, as `os.path.join`).
pub fn in_result_dir(name: &str, result_dir: Option<&Path>) -> PathBuf {
    match result_dir {
        Some(dir) => dir.join(name),
        None => PathBuf::from(name),
    }
}

fn default_result_filename(run: &RunInfo) -> String {
    let model = run.model_id.rsplit('/').next().unwrap_or(&run.model_id);
    let label = match run.label.as_deref() {
        Some(l) if !l.is_empty() => l,
        _ => run.backend.as_str(),
    };
    let concurrency = run
        .max_concurrency
        .map(|n| format!("-concurrency{n}"))
        .unwrap_or_default();
    match &run.ramp_up {
        Some(r) => format!(
            "{label}-ramp-up-{}-{}qps-{}qps{concurrency}-{model}-{}.json",
            r.strategy.name(),
            r.start_rps,
            r.end_rps,
            run.date
        ),
        None => format!(
            "{label}-{}qps{concurrency}-{model}-{}.json",
            float_repr(run.request_rate),
            run.date
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run() -> RunInfo {
        RunInfo {
            date: "20261130-084051".into(),
            backend: "vllm".into(),
            label: None,
            model_id: "org/mock-model".into(),
            tokenizer_id: Some("tok".into()),
            num_prompts: 3,
            metadata: vec![],
            request_rate: f64::INFINITY,
            burstiness: 1.0,
            max_concurrency: None,
            ramp_up: None,
        }
    }

    #[test]
    fn scalars_and_strings_like_json_dump() {
        let mut o = JsonObject::new();
        o.set("a", Json::Float(1e-05));
        o.set(
            "b",
            Json::Floats(Cow::Owned(vec![2522.0, f64::NAN, f64::NEG_INFINITY])),
        );
        o.set("c", Json::str("q\"\\\n\t\u{1}\u{7f}é😀 ok"));
        o.set("d", Json::List(vec![]));
        o.set("e", Json::Null);
        o.set("f", Json::Int(-3));
        assert_eq!(
            o.to_json_string(),
            r#"{"a": 1e-05, "b": [2522.0, null, null], "c": "q\"\\\n\t\u0001\u007f\u00e9\ud83d\ude00 ok", "d": [], "e": null, "f": -3}"#
        );
    }

    #[test]
    fn set_replaces_in_place_like_a_python_dict() {
        let mut o = JsonObject::new();
        o.set("x", Json::UInt(1));
        o.set("y", Json::UInt(2));
        o.set("x", Json::UInt(3));
        assert_eq!(o.to_json_string(), r#"{"x": 3, "y": 2}"#);
        assert_eq!(o.remove("x"), Some(Json::UInt(3)));
        assert_eq!(o.remove("x"), None);
        assert_eq!(o.keys().collect::<Vec<_>>(), vec!["y"]);
    }

    #[test]
    fn metadata_parsing() {
        let m = parse_metadata(&[" version = 0.3.3", "tp=1=2"]).unwrap();
        assert_eq!(
            m,
            vec![
                ("version".into(), "0.3.3".into()),
                ("tp".into(), "1=2".into())
            ]
        );
        let err = parse_metadata(&["novalue"]).unwrap_err().to_string();
        assert!(
            err.contains("Invalid metadata format. Please use KEY=VALUE format."),
            "{err}"
        );
    }

    #[test]
    fn metadata_keeps_python_positions() {
        let mut r = run();
        r.metadata = vec![
            ("request_rate".into(), "x".into()),
            ("team".into(), "a".into()),
        ];
        let mut doc = JsonObject::new();
        run_facts(&mut doc, &r);
        let keys: Vec<_> = doc.keys().collect();
        assert_eq!(&keys[7..10], &["request_rate", "team", "burstiness"]);
        assert_eq!(doc.get("request_rate"), Some(&Json::str("inf")));
    }

    #[test]
    fn file_names_follow_python() {
        let mut r = run();
        assert_eq!(
            result_path(&r, None, None),
            PathBuf::from("vllm-infqps-mock-model-20261130-084051.json")
        );
        r.request_rate = 40.0;
        r.max_concurrency = Some(8);
        r.label = Some("mine".into());
        assert_eq!(
            result_path(&r, None, Some(Path::new("out"))),
            PathBuf::from("out/mine-40.0qps-concurrency8-mock-model-20261130-084051.json")
        );
        r.ramp_up = Some(RampUp {
            strategy: crate::types::RampUpStrategy::Linear,
            start_rps: 1,
            end_rps: 9,
        });
        assert_eq!(
            result_path(&r, None, None),
            PathBuf::from(
                "mine-ramp-up-linear-1qps-9qps-concurrency8-mock-model-20261130-084051.json"
            )
        );
        assert_eq!(
            result_path(&r, Some("x.json"), Some(Path::new("d"))),
            PathBuf::from("d/x.json")
        );
        assert_eq!(
            result_path(&r, Some("/abs/x.json"), Some(Path::new("d"))),
            PathBuf::from("/abs/x.json")
        );
    }
}
