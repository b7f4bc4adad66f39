//! The Weka trace format (AIPerf `weka_trace`, SPEC §1.1): one JSON object per recorded
//! Claude-Code session, read strictly. Every key of every level is known or the file is
//! refused (AIPerf's `extra=forbid`), so a corpus written for another tool, or with a typo,
//! never replays silently wrong.
//!
//! The request and subagent entries share one `requests` list discriminated by `type`; they
//! are read through one raw entry struct (every field optional, unknown keys refused by
//! serde, which names the key with its line and column) and then checked per `type`: a
//! serde internally tagged enum would buffer each entry and lose the line.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::datasets::DatasetError;

/// One recorded session.
#[derive(Debug, Clone, PartialEq)]
pub struct WekaTrace {
    /// The trace id: the root stream's id and the scope of its hash ids.
    pub id: String,
    /// Models the session used (informational).
    pub models: Vec<String>,
    /// Tokens per hash block as declared (AIPerf replays with 64 whatever it says).
    pub block_size: u32,
    /// Size of turn 0's tools+system prefix.
    pub tool_tokens: u64,
    pub system_tokens: u64,
    /// Requests and subagents in list order.
    pub entries: Vec<Entry>,
}

/// An entry of a trace's `requests` list.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    Request(Request),
    Subagent(Subagent),
}

/// A request entry (`type` `n` or `s`).
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Start, s from the trace's start (absolute, also inside a subagent).
    pub t: f64,
    pub model: String,
    /// Total prompt tokens (the full context, not a delta).
    pub input: u64,
    pub output: u64,
    /// One id per full block of the prompt's prefix.
    pub hash_ids: Vec<u64>,
    /// Server time in s (missing counts as 0 in the delays).
    pub api_time: Option<f64>,
    /// Client delay before the request, s.
    pub think_time: Option<f64>,
}

impl Request {
    /// Recorded end: start plus server time.
    pub fn end(&self) -> f64 {
        self.t + self.api_time.unwrap_or(0.0).max(0.0)
    }
}

/// A subagent entry: a child stream spawned at `t`.
#[derive(Debug, Clone, PartialEq)]
pub struct Subagent {
    pub t: f64,
    pub agent_id: String,
    pub duration_ms: Option<u64>,
    pub tool_tokens: u64,
    pub system_tokens: u64,
    pub requests: Vec<Request>,
}

/// Every key the format knows, at every level (an entry's keys by `type` are checked after).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTrace {
    id: String,
    models: Vec<String>,
    block_size: u32,
    hash_id_scope: String,
    #[serde(default)]
    tool_tokens: u64,
    #[serde(default)]
    system_tokens: u64,
    requests: Vec<RawEntry>,
    /// Opaque.
    #[serde(default)]
    #[allow(dead_code)]
    totals: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    #[serde(rename = "type")]
    kind: String,
    t: f64,
    // request fields
    model: Option<String>,
    #[serde(rename = "in")]
    input: Option<u64>,
    out: Option<u64>,
    hash_ids: Option<Vec<u64>>,
    input_types: Option<Vec<String>>,
    output_types: Option<Vec<String>>,
    stop: Option<String>,
    #[serde(default, deserialize_with = "null_or")]
    api_time: Option<f64>,
    #[serde(default, deserialize_with = "null_or")]
    think_time: Option<f64>,
    #[serde(default, deserialize_with = "null_or")]
    ttft: Option<f64>,
    // subagent fields
    agent_id: Option<String>,
    subagent_type: Option<String>,
    #[serde(default, deserialize_with = "null_or")]
    duration_ms: Option<u64>,
    #[serde(default, deserialize_with = "null_or")]
    total_tokens: Option<u64>,
    #[serde(default, deserialize_with = "null_or")]
    tool_use_count: Option<u64>,
    status: Option<String>,
    models: Option<Vec<String>>,
    tool_tokens: Option<u64>,
    system_tokens: Option<u64>,
    requests: Option<Vec<RawEntry>>,
}

/// A field that may be given as `null` (same as absent).
fn null_or<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d)
}

/// The keys of a request entry and of a subagent entry, for the per-`type` check.
const REQUEST_ONLY: [&str; 10] = [
    "model",
    "in",
    "out",
    "hash_ids",
    "input_types",
    "output_types",
    "stop",
    "api_time",
    "think_time",
    "ttft",
];
const SUBAGENT_ONLY: [&str; 10] = [
    "agent_id",
    "subagent_type",
    "duration_ms",
    "total_tokens",
    "tool_use_count",
    "status",
    "models",
    "tool_tokens",
    "system_tokens",
    "requests",
];

impl RawEntry {
    /// The keys present, by name, for the per-`type` check.
    fn present(&self) -> [(&'static str, bool); 20] {
        [
            ("model", self.model.is_some()),
            ("in", self.input.is_some()),
            ("out", self.out.is_some()),
            ("hash_ids", self.hash_ids.is_some()),
            ("input_types", self.input_types.is_some()),
            ("output_types", self.output_types.is_some()),
            ("stop", self.stop.is_some()),
            ("api_time", self.api_time.is_some()),
            ("think_time", self.think_time.is_some()),
            ("ttft", self.ttft.is_some()),
            ("agent_id", self.agent_id.is_some()),
            ("subagent_type", self.subagent_type.is_some()),
            ("duration_ms", self.duration_ms.is_some()),
            ("total_tokens", self.total_tokens.is_some()),
            ("tool_use_count", self.tool_use_count.is_some()),
            ("status", self.status.is_some()),
            ("models", self.models.is_some()),
            ("tool_tokens", self.tool_tokens.is_some()),
            ("system_tokens", self.system_tokens.is_some()),
            ("requests", self.requests.is_some()),
        ]
    }

    /// Refuses a key of the other entry kind.
    fn only(&self, allowed: &[&str], kind: &str) -> Result<(), String> {
        match self
            .present()
            .iter()
            .find(|(k, there)| *there && !allowed.contains(k))
        {
            Some((k, _)) => Err(format!(
                "field `{k}` is not allowed on a type \"{kind}\" entry"
            )),
            None => Ok(()),
        }
    }

    fn request(self, at: &str) -> Result<Request, String> {
        self.only(&REQUEST_ONLY, &self.kind)
            .map_err(|e| format!("{at}: {e}"))?;
        if self.kind == "n" && self.ttft.is_some() {
            return Err(format!(
                "{at}: field `ttft` is only allowed on a streaming (type \"s\") request"
            ));
        }
        let missing = |k: &str| format!("{at}: missing field `{k}`");
        let non_negative = |k: &str, v: Option<f64>| match v {
            Some(x) if !x.is_finite() || x < 0.0 => {
                Err(format!("{at}: `{k}` {x} must be a finite number >= 0"))
            }
            _ => Ok(v),
        };
        if !self.t.is_finite() || self.t < 0.0 {
            return Err(format!("{at}: `t` {} must be a finite number >= 0", self.t));
        }
        Ok(Request {
            t: self.t,
            model: self.model.ok_or_else(|| missing("model"))?,
            input: self.input.ok_or_else(|| missing("in"))?,
            output: self.out.ok_or_else(|| missing("out"))?,
            hash_ids: self.hash_ids.ok_or_else(|| missing("hash_ids"))?,
            api_time: non_negative("api_time", self.api_time)?,
            think_time: non_negative("think_time", self.think_time)?,
        })
    }

    fn entry(self, at: &str) -> Result<Entry, String> {
        match self.kind.as_str() {
            "n" | "s" => self.request(at).map(Entry::Request),
            "subagent" => {
                self.only(&SUBAGENT_ONLY, "subagent")
                    .map_err(|e| format!("{at}: {e}"))?;
                let missing = |k: &str| format!("{at}: missing field `{k}`");
                let agent_id = self.agent_id.ok_or_else(|| missing("agent_id"))?;
                let raw = self.requests.ok_or_else(|| missing("requests"))?;
                let mut requests = Vec::with_capacity(raw.len());
                for (i, r) in raw.into_iter().enumerate() {
                    let inner = format!("{at}.requests[{i}]");
                    if r.kind != "n" && r.kind != "s" {
                        return Err(format!(
                            "{inner}: `type` \"{}\": a subagent's requests are type \"n\" or \"s\"",
                            r.kind
                        ));
                    }
                    let mut req = r.request(&inner)?;
                    // An inner time before the spawn is relative to it (AIPerf's rule).
                    if req.t + 1e-6 < self.t {
                        req.t += self.t;
                    }
                    requests.push(req);
                }
                Ok(Entry::Subagent(Subagent {
                    t: self.t,
                    agent_id,
                    duration_ms: self.duration_ms,
                    tool_tokens: self.tool_tokens.unwrap_or(0),
                    system_tokens: self.system_tokens.unwrap_or(0),
                    requests,
                }))
            }
            other => Err(format!(
                "{at}: `type` \"{other}\" is not one of \"n\", \"s\", \"subagent\""
            )),
        }
    }
}

impl WekaTrace {
    /// Parses one trace from `text`; the error is one line (without the file).
    pub fn parse(text: &str) -> Result<WekaTrace, String> {
        let raw: RawTrace = serde_json::from_str(text).map_err(|e| {
            // A wrong value's message names no key (serde's): name the one it was read for.
            let wrong_value = e.classify() == serde_json::error::Category::Data
                && e.to_string().starts_with("invalid ");
            let field = wrong_value
                .then(|| key_before(text, e.line(), e.column()))
                .flatten();
            let e = match field {
                Some(key) => format!("`{key}`: {e}"),
                None => e.to_string(),
            };
            // Name the trace when its id is readable, so a corpus's bad trace is found.
            match lenient_id(text) {
                Some(id) => format!("trace {id:?}: {e}"),
                None => e,
            }
        })?;
        let at_trace = |why: String| format!("trace {:?}: {why}", raw.id);
        if raw.hash_id_scope != "local" {
            return Err(at_trace(format!(
                "`hash_id_scope` {:?}: only \"local\" is known (hash ids namespaced per trace)",
                raw.hash_id_scope
            )));
        }
        if raw.block_size == 0 {
            return Err(at_trace("`block_size` 0: must be at least 1".into()));
        }
        let mut entries = Vec::with_capacity(raw.requests.len());
        let mut agents: HashMap<String, usize> = HashMap::new();
        for (i, e) in raw.requests.into_iter().enumerate() {
            let entry = e.entry(&format!("requests[{i}]")).map_err(at_trace)?;
            if let Entry::Subagent(s) = &entry {
                if let Some(first) = agents.insert(s.agent_id.clone(), i) {
                    return Err(at_trace(format!(
                        "requests[{i}]: `agent_id` {:?} already used by requests[{first}]",
                        s.agent_id
                    )));
                }
            }
            entries.push(entry);
        }
        Ok(WekaTrace {
            id: raw.id,
            models: raw.models,
            block_size: raw.block_size,
            tool_tokens: raw.tool_tokens,
            system_tokens: raw.system_tokens,
            entries,
        })
    }
}

/// The `id` of a trace that failed strict parsing, if the JSON is readable at all.
/// The key whose value ends at `line`:`column` (1-based, as serde_json reports an error):
/// the last `"key":` before it. Best effort: `None` when there is none.
pub(super) fn key_before(text: &str, line: usize, column: usize) -> Option<&str> {
    let start: usize = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum();
    let end = (start + column).min(text.len());
    let before = text.get(..end)?;
    let colon = before.rfind("\":")?;
    let open = before[..colon].rfind('"')?;
    Some(&before[open + 1..colon])
}

fn lenient_id(text: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    v.get("id")?.as_str().map(str::to_owned)
}

/// Reads `path`: one trace file, or a directory whose `*.json` files (sorted by path) each
/// hold one trace. Trace ids must be unique. Every error is one line naming the file. Each
/// trace comes with the file it was read from.
pub fn load(path: &Path) -> Result<Vec<(PathBuf, WekaTrace)>, DatasetError> {
    let files: Vec<PathBuf> = if path.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| DatasetError::file(path, e))?
            .filter_map(|d| d.ok().map(|d| d.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json") && p.is_file())
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(DatasetError::file(
                path,
                "no *.json trace file in this directory (one Weka trace per file)",
            ));
        }
        files
    } else {
        vec![path.to_path_buf()]
    };
    let mut traces = Vec::with_capacity(files.len());
    let mut seen: HashMap<String, PathBuf> = HashMap::new();
    for file in files {
        let text = std::fs::read_to_string(&file).map_err(|e| DatasetError::file(&file, e))?;
        let trace = WekaTrace::parse(&text).map_err(|why| DatasetError::file(&file, why))?;
        if let Some(other) = seen.insert(trace.id.clone(), file.clone()) {
            return Err(DatasetError::file(
                &file,
                format!(
                    "trace {:?}: duplicate `id`, also in {}; trace ids must be unique",
                    trace.id,
                    other.display()
                ),
            ));
        }
        traces.push((file, trace));
    }
    Ok(traces)
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) const TRACE_A: &str =
        include_str!("../../../tests/fixtures/agentic/traces/trace-a.json");
    const TRACE_C: &str = include_str!("../../../tests/fixtures/agentic/traces/trace-c.json");

    /// A value of the wrong type or range is named by its key (serde's message names none).
    #[test]
    fn a_wrong_value_names_its_key() {
        for (from, to, want) in [
            (
                "\"in\": 500",
                "\"in\": -5",
                "trace \"trace-a\": `in`: invalid value: integer `-5`",
            ),
            (
                "\"out\": 80",
                "\"out\": \"80\"",
                "trace \"trace-a\": `out`: invalid type: string",
            ),
            (
                "[1, 101, 102, 103]",
                "[1, 101, 1.5]",
                "trace \"trace-a\": `hash_ids`: invalid type",
            ),
        ] {
            assert_eq!(TRACE_A.matches(from).count(), 1, "{from}");
            let e = WekaTrace::parse(&TRACE_A.replacen(from, to, 1)).unwrap_err();
            assert!(e.starts_with(want), "{e}");
        }
    }

    #[test]
    fn the_sample_trace_reads_with_its_subagent() {
        let t = WekaTrace::parse(TRACE_A).unwrap();
        assert_eq!(t.id, "trace-a");
        assert_eq!(t.block_size, 64);
        assert_eq!(t.entries.len(), 4);
        let Entry::Subagent(s) = &t.entries[1] else {
            panic!("entry 1 is the subagent")
        };
        assert_eq!(s.agent_id, "agent_001");
        assert_eq!(s.duration_ms, Some(2000));
        assert_eq!(s.requests[1].hash_ids, [1, 101, 102, 103]);
        let Entry::Request(r) = &t.entries[3] else {
            panic!("entry 3 is a request")
        };
        assert_eq!((r.input, r.output, r.end()), (500, 80, 7.5));
    }

    #[test]
    fn null_subagent_figures_read_as_absent() {
        let t = WekaTrace::parse(TRACE_C).unwrap();
        let Entry::Subagent(s) = &t.entries[2] else {
            panic!("entry 2 is the background subagent")
        };
        assert_eq!(s.duration_ms, None);
        assert_eq!(s.requests[0].model, "claude-haiku-4-5");
    }

    #[test]
    fn an_inner_time_before_the_spawn_is_relative_to_it() {
        let text = TRACE_A.replace("\"t\": 2.8", "\"t\": 1.3");
        let t = WekaTrace::parse(&text).unwrap();
        let Entry::Subagent(s) = &t.entries[1] else {
            panic!()
        };
        assert!((s.requests[1].t - 2.8).abs() < 1e-9);
    }

    #[test]
    fn unknown_keys_are_refused_at_every_level_naming_the_trace_and_field() {
        let top = TRACE_A.replacen("\"models\"", "\"modelz\": 1, \"models\"", 1);
        let e = WekaTrace::parse(&top).unwrap_err();
        assert!(
            e.contains("trace \"trace-a\"") && e.contains("modelz"),
            "{e}"
        );
        let inner = TRACE_A.replacen("\"ttft\": 0.2", "\"ttft\": 0.2, \"cost\": 3", 1);
        let e = WekaTrace::parse(&inner).unwrap_err();
        assert!(e.contains("`cost`") && e.contains("line"), "{e}");
    }

    #[test]
    fn fields_of_the_other_entry_kind_are_refused_with_their_place() {
        let text = TRACE_A.replacen(
            "\"stop\": \"tool_use\", \"api_time\": 1.0",
            "\"stop\": \"tool_use\", \"api_time\": 1.0, \"agent_id\": \"x\"",
            1,
        );
        let e = WekaTrace::parse(&text).unwrap_err();
        assert_eq!(
            e,
            "trace \"trace-a\": requests[0]: field `agent_id` is not allowed on a type \"s\" entry"
        );
        let text = TRACE_A.replacen("\"type\": \"s\"", "\"type\": \"x\"", 1);
        let e = WekaTrace::parse(&text).unwrap_err();
        assert!(e.contains("requests[0]: `type` \"x\""), "{e}");
    }

    #[test]
    fn bad_values_name_their_field() {
        let e = WekaTrace::parse(&TRACE_A.replace("\"local\"", "\"global\"")).unwrap_err();
        assert!(e.contains("hash_id_scope"), "{e}");
        let e = WekaTrace::parse(&TRACE_A.replace("\"block_size\": 64", "\"block_size\": 0"))
            .unwrap_err();
        assert!(e.contains("block_size"), "{e}");
        let e = WekaTrace::parse(&TRACE_A.replace("\"api_time\": 0.8", "\"api_time\": -1"))
            .unwrap_err();
        assert!(e.contains("requests[1].requests[0]: `api_time`"), "{e}");
        let e =
            WekaTrace::parse(&TRACE_A.replacen("\"hash_ids\": [1, 2, 3], ", "", 1)).unwrap_err();
        assert!(e.contains("requests[0]: missing field `hash_ids`"), "{e}");
    }
}
