//! Reading a saved result file back: ours or one written by Python `vllm bench serve`
//! (`--save-result`), for `--compare`.
//!
//! A result is one JSON object with Python's result keys; we require the three every run has,
//! generation or pooling: `duration`, `completed` and `request_throughput`, each a number or
//! `null` (a run interrupted before it sent anything has no throughput: we write `null`,
//! Python `NaN`; it still compares, its cells showing `-`). Of the rest,
//! the run facts (`backend`, `model_id`, `num_prompts`, `request_rate`, ...) describe the run,
//! and every other number is a metric, including our `vllm_bench_*` additions; a nested
//! object's numbers (`steady_state`, `vllm_bench_failures_by_reason`) become
//! dotted keys. Per-request lists, strings and booleans are not compared.
//!
//! A `--num-runs` result file (`{"num_runs": N, "runs": [...], "aggregate": {...}}`) is read
//! as the mean of each aggregated figure, with its first run's facts and `num_runs`: "did the
//! change move the mean of five runs?" is the question it answers.
//!
//! `json.dump` writes `NaN`, `Infinity` and `-Infinity` for non-finite floats, which JSON
//! parsers refuse; they are read as `null` (no value) so such a file still compares.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::metrics::comparison::Num;

/// The keys every result has.
const REQUIRED: [&str; 3] = ["duration", "completed", "request_throughput"];

/// The keys that describe the run rather than measure it, in the order they are shown.
pub const FACTS: [&str; 12] = [
    "backend",
    "model_id",
    "tokenizer_id",
    "label",
    "num_prompts",
    "request_rate",
    "burstiness",
    "max_concurrency",
    "ramp_up_strategy",
    "ramp_up_start_rps",
    "ramp_up_end_rps",
    "date",
];

/// The largest result file read: a `--save-detailed` result of a million requests with
/// their texts fits, `/dev/zero` or a wrong file does not take the memory.
pub const MAX_BYTES: u64 = 2 << 30;

/// Why a file is not a result we can compare. Each names the file.
#[derive(Debug, thiserror::Error)]
pub enum ResultFileError {
    #[error(transparent)]
    Read(#[from] crate::whole_file::WholeFileError),
    #[error("{}: not JSON ({error})", path.display())]
    NotJson {
        path: PathBuf,
        error: serde_json::Error,
    },
    #[error(
        "{}: holds {count} JSON documents (JSON lines from --append-result?); --compare takes \
         one result per file",
        path.display()
    )]
    Several { path: PathBuf, count: usize },
    #[error(
        "{}: not a benchmark result (no numeric `{missing}` key; expected a file written by \
         --save-result)",
        path.display()
    )]
    NotAResult {
        path: PathBuf,
        missing: &'static str,
    },
}

/// A result file, read.
#[derive(Debug, Clone, PartialEq)]
pub struct SavedResult {
    pub path: PathBuf,
    /// The [`FACTS`] the file has, in that order, as text (`inf`, `16`, `null`).
    pub facts: Vec<(String, String)>,
    /// Every other number, in file order; `None` for `null` (Python's `request_goodput`
    /// without `--goodput`).
    pub metrics: Vec<(String, Option<Num>)>,
}

/// Reads and checks the result file at `path`.
pub fn load(path: &Path) -> Result<SavedResult, ResultFileError> {
    let bytes = crate::whole_file::read(path, MAX_BYTES)?;
    parse(path, &bytes)
}

/// Checks and splits the text of a result file (`path` only names it in errors).
pub fn parse(path: &Path, bytes: &[u8]) -> Result<SavedResult, ResultFileError> {
    let text = null_non_finite(bytes);
    let mut docs = serde_json::Deserializer::from_slice(&text).into_iter::<Value>();
    let doc = match docs.next() {
        Some(Ok(doc)) => doc,
        Some(Err(error)) => return Err(not_json(path, error)),
        None => {
            let error = serde_json::from_slice::<Value>(b"").unwrap_err();
            return Err(not_json(path, error));
        }
    };
    match docs.next() {
        None => {}
        Some(Ok(_)) => {
            return Err(ResultFileError::Several {
                path: path.to_path_buf(),
                count: 2 + docs.filter(Result::is_ok).count(),
            })
        }
        Some(Err(error)) => return Err(not_json(path, error)),
    }
    let not_a_result = |missing| ResultFileError::NotAResult {
        path: path.to_path_buf(),
        missing,
    };
    let Value::Object(map) = doc else {
        return Err(not_a_result(REQUIRED[0]));
    };
    if let Some(result) = repeated_runs(path, &map) {
        return match REQUIRED.into_iter().find(|k| !has_metric(&result, k)) {
            Some(missing) => Err(not_a_result(missing)),
            None => Ok(result),
        };
    }
    let present = |k: &str| matches!(map.get(k), Some(Value::Number(_) | Value::Null));
    if let Some(missing) = REQUIRED.into_iter().find(|k| !present(k)) {
        return Err(not_a_result(missing));
    }
    let mut metrics = Vec::new();
    for (key, value) in &map {
        if FACTS.contains(&key.as_str()) {
            continue;
        }
        match value {
            Value::Object(inner) => {
                for (k, v) in inner {
                    if let Some(n) = metric(v) {
                        metrics.push((format!("{key}.{k}"), n));
                    }
                }
            }
            v => {
                if let Some(n) = metric(v) {
                    metrics.push((key.clone(), n));
                }
            }
        }
    }
    Ok(SavedResult {
        path: path.to_path_buf(),
        facts: facts(&map),
        metrics,
    })
}

/// The [`FACTS`] of a result object, as text.
fn facts(map: &Map<String, Value>) -> Vec<(String, String)> {
    FACTS
        .iter()
        .filter_map(|&k| map.get(k).map(|v| (k.to_string(), fact_text(v))))
        .collect()
}

/// A `--num-runs` document as one result: `num_runs` and the first run's facts, the mean of
/// every aggregated figure. `None` when `map` is not one.
fn repeated_runs(path: &Path, map: &Map<String, Value>) -> Option<SavedResult> {
    let (Some(Value::Array(runs)), Some(Value::Object(aggregate))) =
        (map.get("runs"), map.get("aggregate"))
    else {
        return None;
    };
    let mut facts = vec![("num_runs".to_string(), runs.len().to_string())];
    if let Some(Value::Object(first)) = runs.first() {
        facts.extend(self::facts(first));
    }
    let metrics = aggregate
        .iter()
        .filter_map(|(k, v)| {
            let mean = v.get("mean")?.as_f64()?;
            Some((k.clone(), Some(Num::Float(mean))))
        })
        .collect();
    Some(SavedResult {
        path: path.to_path_buf(),
        facts,
        metrics,
    })
}

fn has_metric(result: &SavedResult, key: &str) -> bool {
    result.metrics.iter().any(|(k, v)| k == key && v.is_some())
}

fn not_json(path: &Path, error: serde_json::Error) -> ResultFileError {
    ResultFileError::NotJson {
        path: path.to_path_buf(),
        error,
    }
}

/// A JSON number as an integer when it is one, else a float.
fn number(v: Option<&Value>) -> Option<Num> {
    let v = v?;
    v.as_i64()
        .map(Num::Int)
        .or_else(|| v.as_f64().map(Num::Float))
}

/// A metric value: `Some(None)` for `null`, `None` for what is not compared.
fn metric(v: &Value) -> Option<Option<Num>> {
    match v {
        Value::Null => Some(None),
        Value::Number(_) => Some(number(Some(v))),
        _ => None,
    }
}

/// A fact as the user would write it: strings unquoted, the rest as JSON.
fn fact_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `bytes` with `NaN`, `Infinity` and `-Infinity` outside strings replaced by `null`.
fn null_non_finite(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let (mut in_string, mut escaped) = (false, false);
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
        } else if b == b'"' {
            in_string = true;
        } else if let Some(token) = [&b"-Infinity"[..], b"Infinity", b"NaN"]
            .into_iter()
            .find(|t| bytes[i..].starts_with(t))
        {
            out.extend_from_slice(b"null");
            i += token.len();
            continue;
        }
        out.push(b);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<SavedResult, ResultFileError> {
        parse(Path::new("r.json"), text.as_bytes())
    }

    fn error(text: &str) -> String {
        read(text).unwrap_err().to_string()
    }

    #[test]
    fn facts_and_metrics_are_split_and_nested_objects_flattened() {
        let r = read(
            r#"{"date": "20261130-084051", "backend": "vllm", "label": null,
                "num_prompts": 200, "request_rate": "inf", "max_concurrency": 16,
                "duration": 2.5, "completed": 200, "request_throughput": 80.0,
                "request_goodput": null, "ttfts": [0.1, 0.2], "mean_ttft_ms": 25.5,
                "vllm_bench_io_driver": "io_uring", "vllm_bench_interrupted": false,
                "vllm_bench_failures_by_reason": {"http_500": 3},
                "steady_state": {"short_window": true, "request_throughput": 90.5}}"#,
        )
        .unwrap();
        assert_eq!(
            r.facts,
            [
                ("backend".to_string(), "vllm".to_string()),
                ("label".into(), "null".into()),
                ("num_prompts".into(), "200".into()),
                ("request_rate".into(), "inf".into()),
                ("max_concurrency".into(), "16".into()),
                ("date".into(), "20261130-084051".into()),
            ]
        );
        let keys: Vec<&str> = r.metrics.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "duration",
                "completed",
                "request_throughput",
                "request_goodput",
                "mean_ttft_ms",
                "vllm_bench_failures_by_reason.http_500",
                "steady_state.request_throughput",
            ]
        );
        assert_eq!(r.metrics[1].1, Some(Num::Int(200)));
        assert_eq!(r.metrics[3].1, None);
        assert_eq!(r.metrics[6].1, Some(Num::Float(90.5)));
    }

    #[test]
    fn json_dump_non_finite_floats_read_as_null() {
        let r = read(
            r#"{"duration": 1.0, "completed": 0, "request_throughput": NaN,
                "note": "NaN and Infinity stay in \"strings\"", "std_ttft_ms": -Infinity,
                "max": Infinity}"#,
        );
        // request_throughput is NaN (a run that measured nothing): no value, still a result.
        let r = r.unwrap();
        assert_eq!(
            r.metrics[2],
            ("request_throughput".to_string(), None),
            "{:?}",
            r.metrics
        );
        let r = read(
            r#"{"duration": 1.0, "completed": 0, "request_throughput": 0.0,
                "note": "NaN, Infinity in \"strings\\\"", "std_ttft_ms": -Infinity}"#,
        )
        .unwrap();
        assert_eq!(r.metrics.last(), Some(&("std_ttft_ms".to_string(), None)));
    }

    #[test]
    fn what_is_not_a_result_is_named_in_one_line() {
        let e = error("just some notes");
        assert!(e.starts_with("r.json: not JSON (expected value"), "{e}");
        assert!(
            error("").starts_with("r.json: not JSON (EOF"),
            "{}",
            error("")
        );
        assert!(
            error(r#"{"duration": 1"#).starts_with("r.json: not JSON (EOF"),
            "{}",
            error(r#"{"duration": 1"#)
        );
        assert_eq!(
            error(r#"{"a": 1}"#),
            "r.json: not a benchmark result (no numeric `duration` key; expected a file \
             written by --save-result)"
        );
        assert!(error(r#"[1, 2]"#).contains("no numeric `duration` key"));
        assert!(error(r#"{"duration": 1, "completed": "3"}"#).contains("`completed`"));
        let two = r#"{"duration": 1, "completed": 1, "request_throughput": 1}"#;
        assert_eq!(
            error(&format!("{two}\n{two}\n{two}")),
            "r.json: holds 3 JSON documents (JSON lines from --append-result?); --compare \
             takes one result per file"
        );
        for e in [error("x"), error(r#"{"a": 1}"#)] {
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn a_num_runs_file_compares_by_its_means() {
        let r = read(
            r#"{"num_runs": 2, "runs": [{"backend": "vllm", "max_concurrency": 4,
                "duration": 1.0, "completed": 10, "request_throughput": 10.0},
                {"backend": "vllm", "max_concurrency": 4, "duration": 3.0, "completed": 10,
                "request_throughput": 3.3}],
                "aggregate": {"duration": {"mean": 2.0, "std": 1.0},
                "completed": {"mean": 10.0}, "request_throughput": {"mean": 6.65},
                "odd": 3}}"#,
        )
        .unwrap();
        assert_eq!(
            r.facts,
            [
                ("num_runs".to_string(), "2".to_string()),
                ("backend".into(), "vllm".into()),
                ("max_concurrency".into(), "4".into()),
            ]
        );
        assert_eq!(
            r.metrics,
            [
                ("duration".to_string(), Some(Num::Float(2.0))),
                ("completed".into(), Some(Num::Float(10.0))),
                ("request_throughput".into(), Some(Num::Float(6.65))),
            ]
        );
        let e = error(r#"{"runs": [], "aggregate": {"duration": {"mean": 1.0}}}"#);
        assert!(e.contains("no numeric `completed` key"), "{e}");
    }

    #[test]
    fn a_missing_file_names_the_os_error() {
        let e = load(Path::new("/nonexistent/r.json"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("/nonexistent/r.json: cannot read it: No such file or directory"),
            "{e}"
        );
    }
}
