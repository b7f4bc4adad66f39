//! The Berkeley Function Calling Leaderboard set (`gorilla-llm/Berkeley-Function-Calling-
//! Leaderboard`) as Python 0.33's `BFCLDataset` reads it: one JSON-lines file per category
//! at the repo's root (`BFCL_v3_<category>.json`, `--bfcl-categories`, default simple,
//! live_simple, multiple), rows interleaved category by category; each row's first turn is
//! sent as the request's own chat messages with its functions as OpenAI `tools` (BFCL's
//! schema dialect translated) and `tool_choice: auto`, for the openai-chat backend.

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::super::error::DatasetError;
use super::super::hub_file::{dataset_file, HubAccess};
use super::rows::{jsonl_rows, Row};

/// The Hub ID Python matches.
pub const ID: &str = "gorilla-llm/Berkeley-Function-Calling-Leaderboard";

/// Python's default categories.
pub const DEFAULT_CATEGORIES: [&str; 3] = ["simple", "live_simple", "multiple"];

/// Python's default output length.
pub const DEFAULT_OUTPUT_LEN: usize = 512;

/// The rows of `categories` (a local directory holding the files, or the Hub repo through
/// the cache), interleaved round-robin as Python does.
pub fn rows(
    dataset_path: &str,
    categories: &[String],
    access: &HubAccess,
) -> Result<(PathBuf, Vec<Row>), DatasetError> {
    let mut per_category = Vec::with_capacity(categories.len());
    let mut first = None;
    for c in categories {
        let file = format!("BFCL_v3_{c}.json");
        let local = Path::new(dataset_path);
        let path = if local.is_dir() {
            let p = local.join(&file);
            if !p.is_file() {
                return Err(DatasetError::Unusable(format!(
                    "BFCL category '{c}' not found: {} does not exist; check --bfcl-categories \
                     (defaults: {})",
                    p.display(),
                    DEFAULT_CATEGORIES.join(", ")
                )));
            }
            p
        } else {
            dataset_file(
                access,
                ID,
                &file,
                "pass --dataset-path DIR holding the BFCL_v3_*.json files",
            )?
        };
        let text = std::fs::read_to_string(&path).map_err(|e| DatasetError::file(&path, e))?;
        per_category.push(jsonl_rows(&path, &text)?);
        first.get_or_insert(path);
    }
    let longest = per_category.iter().map(Vec::len).max().unwrap_or(0);
    let mut iters: Vec<_> = per_category.into_iter().map(Vec::into_iter).collect();
    let mut all = Vec::new();
    for _ in 0..longest {
        all.extend(iters.iter_mut().filter_map(Iterator::next));
    }
    Ok((first.unwrap_or_default(), all))
}

/// BFCL's schema dialect as JSON Schema (`dict` → `object`, `float` → `number`, `tuple` →
/// `array`, `any` → `string`), recursively.
fn translate(node: &Value) -> Value {
    match node {
        Value::Object(m) => {
            let mut out: Map<String, Value> =
                m.iter().map(|(k, v)| (k.clone(), translate(v))).collect();
            if let Some(Value::String(t)) = out.get("type") {
                let mapped = match t.as_str() {
                    "dict" => Some("object"),
                    "float" => Some("number"),
                    "tuple" => Some("array"),
                    "any" => Some("string"),
                    _ => None,
                };
                if let Some(m) = mapped {
                    out.insert("type".into(), Value::String(m.into()));
                }
            }
            Value::Object(out)
        }
        Value::Array(v) => Value::Array(v.iter().map(translate).collect()),
        other => other.clone(),
    }
}

/// Python's truthiness of a JSON value (`not x`).
fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Number(n) => n.as_f64() == Some(0.0),
    }
}

/// A row's first turn and its tools, or `None` for a row Python skips.
pub struct Request {
    pub messages: Value,
    pub tools: Value,
}

impl Request {
    pub fn of(row: &Row) -> Option<Request> {
        let question = row.get("question").filter(|q| !is_empty(q))?;
        let functions = row.get("function").filter(|f| !is_empty(f))?;
        let first = question.as_array()?.first()?.as_array()?;
        if first.is_empty() {
            return None;
        }
        let functions = match functions {
            Value::Array(list) => list.clone(),
            one => vec![one.clone()],
        };
        let tools = functions
            .iter()
            .map(|f| json!({"type": "function", "function": translate(f)}))
            .collect();
        Some(Request {
            messages: Value::Array(first.clone()),
            tools: Value::Array(tools),
        })
    }

    /// The body fields of the request besides its messages.
    pub fn overrides(&self) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("tools".into(), self.tools.clone());
        m.insert("tool_choice".into(), Value::String("auto".into()));
        m
    }

    /// The messages' contents, one per line (Python's length fallback).
    pub fn plain_text(&self) -> String {
        self.contents().collect::<Vec<_>>().join("\n")
    }

    /// The last message's content (Python's display prompt).
    pub fn last_content(&self) -> String {
        self.contents().last().unwrap_or_default().to_string()
    }

    fn contents(&self) -> impl Iterator<Item = &str> {
        self.messages
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| m.get("content").and_then(Value::as_str).unwrap_or(""))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_become_python_tool_requests() {
        let row: Row = serde_json::from_value(json!({
            "id": "simple_0",
            "question": [[{"role": "user", "content": "Area of a triangle, base 10?"}]],
            "function": {"name": "area", "parameters": {"type": "dict", "properties": {
                "base": {"type": "float"}, "dims": {"type": "tuple", "items": {"type": "any"}}}}}
        }))
        .unwrap();
        let r = Request::of(&row).expect("a request");
        assert_eq!(r.messages[0]["content"], "Area of a triangle, base 10?");
        let f = &r.tools[0]["function"];
        assert_eq!(r.tools[0]["type"], "function");
        assert_eq!(f["parameters"]["type"], "object");
        assert_eq!(f["parameters"]["properties"]["base"]["type"], "number");
        assert_eq!(
            f["parameters"]["properties"]["dims"]["items"]["type"],
            "string"
        );
        assert_eq!(r.overrides()["tool_choice"], "auto");
        let skipped: Row = serde_json::from_value(json!({"question": [], "function": []})).unwrap();
        assert!(Request::of(&skipped).is_none());
    }
}
