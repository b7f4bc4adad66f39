//! Every input format of `--dataset-name agentic_trace`, read into Weka traces (SPEC §1.1–1.4),
//! so the streams, prompts and the scheduler never know which format a corpus came in:
//!
//! - a directory of Weka `*.json` files, or one such file ([`super::format::load`]);
//! - a JSONL or Parquet export of the Hugging Face corpus (`semianalysisai/cc-traces-weka-*`,
//!   SPEC §1.2): one row per trace, each row exactly a Weka trace, read as strictly. A Parquet
//!   row's `null`s are absent keys (a column of a struct that the row's entry kind has not);
//! - the Mooncake JSONL `aiperf synthesize agentic-code` writes (SPEC §1.4): one row per turn,
//!   the rows of a session contiguous, each session a trace of one root stream.
//!
//! A directory is Weka files; a file is told by its extension (`.parquet`; `.jsonl`: by its
//! first row's keys, `session_id` for Mooncake) or else read as one Weka trace. Every error
//! is one line naming the file and the line (or row, or trace) and the field.
//! `dag_jsonl` (SPEC §1.3, a `.jsonl` whose first row has `session_id` and `turns`) carries
//! literal messages rather than hash ids: it is read into trees of its own ([`super::dag`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::dag::{self, DagFile};
use super::format::{self, Entry, Request, WekaTrace};
use super::streams::StartSampling;
use crate::datasets::DatasetError;

/// Tokens per Mooncake hash id (AIPerf's mooncake loader).
pub const MOONCAKE_BLOCK: u64 = 512;
/// The replay's block size (SPEC §1.1: AIPerf replays every corpus with 64).
const WEKA_BLOCK: u64 = 64;

/// A corpus read from any format: each trace with where it came from, and how the replay
/// picks its start point.
pub struct Corpus {
    pub traces: Vec<(PathBuf, WekaTrace)>,
    pub start: StartSampling,
    /// A `dag_jsonl` file (then `traces` is empty).
    pub dag: Option<DagFile>,
}

/// Reads `path` in whichever format it is (module doc).
pub fn read(path: &Path) -> Result<Corpus, DatasetError> {
    let timed = |traces| Corpus {
        traces,
        start: StartSampling::ByTime,
        dag: None,
    };
    if path.is_dir() {
        return format::load(path).map(timed);
    }
    let name = path.to_string_lossy().to_ascii_lowercase();
    if name.ends_with(".parquet") {
        return parquet_rows(path).map(timed);
    }
    if name.ends_with(".jsonl") {
        let text = std::fs::read_to_string(path).map_err(|e| DatasetError::file(path, e))?;
        let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        let keys = serde_json::from_str::<serde_json::Map<String, Value>>(first).ok();
        return match keys {
            Some(k) if dag::is_dag(&k) => Ok(Corpus {
                traces: Vec::new(),
                start: StartSampling::ByTurn,
                dag: Some(dag::read(path, &text)?),
            }),
            Some(k) if k.contains_key("session_id") => Ok(Corpus {
                traces: mooncake(path, &text)?,
                // Mooncake rows carry no timeline (every session's bounds are [0, 0] in
                // AIPerf): every lane starts at turn 0.
                start: StartSampling::AtTurnZero,
                dag: None,
            }),
            _ => jsonl_rows(path, &text).map(timed),
        };
    }
    format::load(path).map(timed)
}

/// Trace ids must be unique across a file's rows.
fn unique(
    path: &Path,
    seen: &mut HashMap<String, String>,
    id: &str,
    at: String,
) -> Result<(), DatasetError> {
    match seen.insert(id.to_string(), at.clone()) {
        Some(first) => Err(DatasetError::file(
            path,
            format!("{at}: trace {id:?}: duplicate `id`, also {first}; trace ids must be unique"),
        )),
        None => Ok(()),
    }
}

/// One Weka trace per line.
fn jsonl_rows(path: &Path, text: &str) -> Result<Vec<(PathBuf, WekaTrace)>, DatasetError> {
    let mut out = Vec::new();
    let mut seen = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let trace = WekaTrace::parse(line).map_err(|why| DatasetError::line(path, i + 1, why))?;
        unique(path, &mut seen, &trace.id, format!("line {}", i + 1))?;
        out.push((path.to_path_buf(), trace));
    }
    if out.is_empty() {
        return Err(DatasetError::file(path, "no trace in this file"));
    }
    Ok(out)
}

/// A value with its `null` members dropped, at every level (Parquet's absent struct fields).
fn without_nulls(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, without_nulls(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(without_nulls).collect()),
        v => v,
    }
}

/// One Weka trace per Parquet row.
fn parquet_rows(path: &Path) -> Result<Vec<(PathBuf, WekaTrace)>, DatasetError> {
    let rows = crate::datasets::hf::rows::read(path)?;
    let mut out = Vec::with_capacity(rows.len());
    let mut seen = HashMap::new();
    for (i, row) in rows.into_iter().enumerate() {
        let text = without_nulls(Value::Object(row)).to_string();
        let trace = WekaTrace::parse(&text)
            .map_err(|why| DatasetError::entry(path, i, format!("row {i}: {why}")))?;
        unique(path, &mut seen, &trace.id, format!("row {i}"))?;
        out.push((path.to_path_buf(), trace));
    }
    if out.is_empty() {
        return Err(DatasetError::file(path, "no trace in this file"));
    }
    Ok(out)
}

/// One Mooncake row (SPEC §1.4), every key known.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MooncakeRow {
    session_id: String,
    input_length: u64,
    output_length: u64,
    hash_ids: Vec<u64>,
    timestamp: Option<f64>,
    group_id: Option<u64>,
    is_restart: Option<bool>,
    /// ms from the previous response's end (turns ≥ 1).
    delay: Option<f64>,
}

/// Each session of a Mooncake JSONL as a Weka trace of one root stream. Turn k's prompt is
/// the whole context: the previous prompt, the previous reply (`output_length`) and this
/// turn's new tokens (`input_length`), so the replay sends the history AIPerf threads in
/// (recorded replies stand for live ones). Its hash ids name the context's 64-token blocks by
/// position: a block the previous turn held whole is the same block, and the rest is new.
/// `delay` becomes the end-to-start gap exactly (requests carry no server time).
fn mooncake(path: &Path, text: &str) -> Result<Vec<(PathBuf, WekaTrace)>, DatasetError> {
    let mut out: Vec<(PathBuf, WekaTrace)> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    // Per session: (context tokens so far, previous output, time of the last turn).
    let mut state: (u64, u64, f64) = (0, 0, 0.0);
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = |why: String| DatasetError::line(path, i + 1, why);
        let row: MooncakeRow = serde_json::from_str(line).map_err(|e| at(e.to_string()))?;
        let turn0 = match out.last() {
            Some((_, t)) if t.id == row.session_id => false,
            _ => {
                if let Some(&first) = index.get(&row.session_id) {
                    return Err(at(format!(
                        "session {:?}: a session's rows must be contiguous (its first rows \
                         start at line {first})",
                        row.session_id
                    )));
                }
                true
            }
        };
        let need = row.input_length.div_ceil(MOONCAKE_BLOCK) as usize;
        if row.hash_ids.len() != need {
            return Err(at(format!(
                "session {:?}: `hash_ids` has {} ids; `input_length` {} needs {need} blocks of {}",
                row.session_id,
                row.hash_ids.len(),
                row.input_length,
                MOONCAKE_BLOCK
            )));
        }
        let delay_s = match (turn0, row.delay) {
            (true, Some(_)) => {
                return Err(at(format!(
                    "session {:?}: `delay` on the session's first row (turn 0 has none)",
                    row.session_id
                )))
            }
            (false, None) => {
                return Err(at(format!(
                    "session {:?}: missing field `delay` (turns after the first have one)",
                    row.session_id
                )))
            }
            (false, Some(d)) if !d.is_finite() || d < 0.0 => {
                return Err(at(format!(
                    "`delay` {d} must be a finite number of ms >= 0"
                )))
            }
            (_, d) => d.unwrap_or(0.0) / 1000.0,
        };
        if !turn0 && (row.timestamp.is_some() || row.group_id.is_some() || row.is_restart.is_some())
        {
            return Err(at(format!(
                "session {:?}: `timestamp`, `group_id` and `is_restart` belong on its first row",
                row.session_id
            )));
        }
        if turn0 {
            index.insert(row.session_id.clone(), i + 1);
            out.push((
                path.to_path_buf(),
                WekaTrace {
                    id: row.session_id.clone(),
                    models: vec!["mooncake".into()],
                    block_size: WEKA_BLOCK as u32,
                    tool_tokens: 0,
                    system_tokens: 0,
                    entries: Vec::new(),
                },
            ));
            state = (0, 0, 0.0);
        }
        let (context, prev_out, prev_t) = state;
        let input = context + prev_out + row.input_length;
        let t = if turn0 { 0.0 } else { prev_t + delay_s };
        let trace = &mut out.last_mut().expect("a session was opened").1;
        trace.entries.push(Entry::Request(Request {
            t,
            model: "mooncake".into(),
            input,
            output: row.output_length,
            hash_ids: (0..input / WEKA_BLOCK).collect(),
            api_time: None,
            think_time: None,
        }));
        state = (input, row.output_length, t);
    }
    if out.is_empty() {
        return Err(DatasetError::file(path, "no session in this file"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasets::agentic::derive;

    const TRACE_A: &str = include_str!("../../../tests/fixtures/agentic/traces/trace-a.json");
    const TRACE_B: &str = include_str!("../../../tests/fixtures/agentic/traces/trace-b.json");

    /// A scratch directory of this test process.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("agentic-input-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn one_line(json: &str) -> String {
        serde_json::from_str::<Value>(json).unwrap().to_string()
    }

    #[test]
    fn a_jsonl_export_reads_one_trace_per_row() {
        let dir = scratch("rows");
        let file = dir.join("corpus.jsonl");
        let text = format!("{}\n\n{}\n", one_line(TRACE_A), one_line(TRACE_B));
        std::fs::write(&file, &text).unwrap();
        let c = read(&file).unwrap();
        assert_eq!(c.start, StartSampling::ByTime);
        let ids: Vec<&str> = c.traces.iter().map(|(_, t)| t.id.as_str()).collect();
        assert_eq!(ids, ["trace-a", "trace-b"]);
        // The same trace as the file it came from.
        assert_eq!(c.traces[0].1, WekaTrace::parse(TRACE_A).unwrap());
        // A bad row names its line and field; a duplicate id both lines.
        let bad = one_line(TRACE_B).replacen("\"models\"", "\"modelz\":1,\"models\"", 1);
        std::fs::write(&file, format!("{}\n{bad}\n", one_line(TRACE_A))).unwrap();
        let e = read(&file).err().unwrap().to_string();
        assert!(
            e.contains("corpus.jsonl:2: trace \"trace-b\"") && e.contains("`modelz`"),
            "{e}"
        );
        std::fs::write(
            &file,
            format!("{}\n{}\n", one_line(TRACE_A), one_line(TRACE_A)),
        )
        .unwrap();
        let e = read(&file).err().unwrap().to_string();
        assert!(
            e.contains("line 2: trace \"trace-a\": duplicate `id`, also line 1"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn parquet_nulls_are_absent_keys() {
        // A request entry with the subagent columns null, as a struct column holds them.
        let with_nulls = TRACE_A.replacen(
            "\"stop\": \"tool_use\"",
            "\"stop\": \"tool_use\", \"agent_id\": null, \"requests\": null",
            1,
        );
        let v: Value = serde_json::from_str(&with_nulls).unwrap();
        let t = WekaTrace::parse(&without_nulls(v).to_string()).unwrap();
        assert_eq!(t, WekaTrace::parse(TRACE_A).unwrap());
    }

    #[test]
    fn a_parquet_row_that_is_not_a_trace_names_the_row_and_field() {
        use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
        use parquet::file::properties::WriterProperties;
        use parquet::file::writer::SerializedFileWriter;
        use parquet::schema::parser::parse_message_type;
        use std::sync::Arc;

        let dir = scratch("parquet");
        let file = dir.join("train.parquet");
        let schema = Arc::new(
            parse_message_type(
                "message schema { REQUIRED BYTE_ARRAY id (UTF8); REQUIRED INT64 block_size; }",
            )
            .unwrap(),
        );
        let props = Arc::new(WriterProperties::builder().build());
        let mut w = SerializedFileWriter::new(std::fs::File::create(&file).unwrap(), schema, props)
            .unwrap();
        let mut g = w.next_row_group().unwrap();
        let mut col = g.next_column().unwrap().unwrap();
        col.typed::<ByteArrayType>()
            .write_batch(&[ByteArray::from("t0")], None, None)
            .unwrap();
        col.close().unwrap();
        let mut col = g.next_column().unwrap().unwrap();
        col.typed::<Int64Type>()
            .write_batch(&[64], None, None)
            .unwrap();
        col.close().unwrap();
        g.close().unwrap();
        w.close().unwrap();
        let e = read(&file).err().unwrap().to_string();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            e.contains("train.parquet: entry 0: row 0: trace \"t0\": missing field `models`"),
            "{e}"
        );
    }

    const MOONCAKE: &str = r#"{"session_id":"sess-0a1b2c3d4e5f","input_length":2236,"output_length":310,"hash_ids":[0,1,202,200002,200003],"timestamp":0.0,"group_id":1}
{"session_id":"sess-0a1b2c3d4e5f","input_length":900,"output_length":120,"hash_ids":[200004,200005],"delay":1843.2}
{"session_id":"sess-111111111111","input_length":100,"output_length":30,"hash_ids":[7],"timestamp":0.0,"group_id":2,"is_restart":true}
"#;

    fn mooncake_file(name: &str, text: &str) -> (PathBuf, PathBuf) {
        let dir = scratch(name);
        let file = dir.join("dataset.jsonl");
        std::fs::write(&file, text).unwrap();
        (dir, file)
    }

    #[test]
    fn mooncake_sessions_are_root_streams_with_their_whole_context() {
        let (dir, file) = mooncake_file("mooncake", MOONCAKE);
        let c = read(&file).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(c.start, StartSampling::AtTurnZero);
        assert_eq!(c.traces.len(), 2);
        let tree = derive(&c.traces[0].1);
        assert_eq!(tree.id, "sess-0a1b2c3d4e5f");
        assert_eq!(tree.streams.len(), 1);
        let turns = &tree.streams[0].turns;
        // Turn 1: 2236 + the reply's 310 + 900 new tokens.
        assert_eq!(
            turns.iter().map(|r| r.input).collect::<Vec<_>>(),
            [2236, 3446]
        );
        assert_eq!(turns[0].hash_ids, (0..34).collect::<Vec<u64>>());
        assert_eq!(turns[1].hash_ids.len(), 53);
        // The delay is the end-to-start gap.
        let d = tree.streams[0].delays(false);
        assert!((d[1] - 1.8432).abs() < 1e-9, "{d:?}");
        // The replay's prompt is exactly `in` tokens, turn 1 keeping turn 0's whole blocks.
        let l = crate::datasets::agentic::layouts(&tree.streams[0], 64).unwrap();
        assert_eq!(
            crate::datasets::agentic::prompt::prompt_tokens(&l[1], 64),
            3446
        );
    }

    #[test]
    fn bad_mooncake_rows_name_their_line_and_field() {
        let cases = [
            (MOONCAKE.replacen("\"group_id\":1", "\"group_id\":1,\"x\":1", 1), "dataset.jsonl:1: unknown field `x`"),
            (MOONCAKE.replacen("[200004,200005]", "[200004]", 1), "dataset.jsonl:2: session \"sess-0a1b2c3d4e5f\": `hash_ids` has 1 ids; `input_length` 900 needs 2 blocks of 512"),
            (MOONCAKE.replacen(",\"delay\":1843.2", "", 1), "dataset.jsonl:2: session \"sess-0a1b2c3d4e5f\": missing field `delay`"),
            (MOONCAKE.replacen("\"group_id\":1", "\"group_id\":1,\"delay\":5", 1), "dataset.jsonl:1: session \"sess-0a1b2c3d4e5f\": `delay` on the session's first row"),
            (format!("{MOONCAKE}{}", MOONCAKE.lines().nth(1).unwrap()), "dataset.jsonl:4: session \"sess-0a1b2c3d4e5f\": a session's rows must be contiguous (its first rows start at line 1)"),
            (MOONCAKE.replacen("\"delay\":1843.2", "\"delay\":-1", 1), "dataset.jsonl:2: `delay` -1 must be"),
            (r#"{"session_id":"s","turns":[]}"#.to_string(), "dataset.jsonl:1: session \"s\": `turns` is empty"),
        ];
        for (i, (text, want)) in cases.iter().enumerate() {
            let (dir, file) = mooncake_file(&format!("bad{i}"), text);
            let e = read(&file).err().unwrap().to_string();
            std::fs::remove_dir_all(&dir).unwrap();
            assert!(e.contains(want), "case {i}: {e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
    }
}
