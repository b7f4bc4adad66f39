//! Mooncake and Bailian JSON-lines records.
//!
//! Field names of the four core fields are configurable, as with Python's
//! `--timed-trace-label-*` flags. Values follow Python's tolerance where it is harmless
//! (`timestamp` may be a number or a numeric string, as `float(value)` accepts; a missing
//! `hash_ids` means "no prefix blocks") and are strict elsewhere: lengths must be
//! non-negative integers, hash ids integers.

use serde_json::{Map, Value};

use super::record::{ChatLink, Row, RowData};

/// Why a JSONL record does not parse. The reader adds the file and line; each message names
/// the field at fault (and, for a missing one, the flag that renames it).
#[derive(Debug, thiserror::Error)]
pub enum JsonLineError {
    #[error("not a JSON object: {0}")]
    NotObject(serde_json::Error),
    #[error(
        "field {label:?} is missing (fields present: {present}); name the right field with \
         --timed-trace-label-{flag}"
    )]
    Missing {
        label: String,
        present: String,
        flag: &'static str,
    },
    #[error("{label:?} is not a finite number (got {got})")]
    NotFinite { label: String, got: Value },
    #[error("{label:?} is not a non-negative integer below 2^32 (got {got})")]
    NotCount { label: String, got: Value },
    #[error("{label:?} is not an array of integers (got {got})")]
    NotArray { label: String, got: Value },
    #[error("{label}[{index}] is not an integer (got {got})")]
    NotHashId {
        label: String,
        index: usize,
        got: Value,
    },
    #[error("\"{field}\" is not an integer (got {got})")]
    NotChatId { field: &'static str, got: Value },
}

/// JSON field names of the core fields (Python: `--timed-trace-label-*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonLabels {
    /// `--timed-trace-label-timestamp` (default `timestamp`).
    pub timestamp: String,
    /// `--timed-trace-label-input-length` (default `input_length`).
    pub input_length: String,
    /// `--timed-trace-label-output-length` (default `output_length`).
    pub output_length: String,
    /// `--timed-trace-label-hash-ids` (default `hash_ids`).
    pub hash_ids: String,
}

impl Default for JsonLabels {
    fn default() -> Self {
        Self {
            timestamp: "timestamp".into(),
            input_length: "input_length".into(),
            output_length: "output_length".into(),
            hash_ids: "hash_ids".into(),
        }
    }
}

/// Parses one JSONL record; `bailian` also reads the conversation fields.
pub(crate) fn parse_line(
    line: &str,
    labels: &JsonLabels,
    bailian: bool,
) -> Result<Row, JsonLineError> {
    let obj: Map<String, Value> = serde_json::from_str(line).map_err(JsonLineError::NotObject)?;
    let timestamp = timestamp(&obj, &labels.timestamp)?;
    let input_len = count(
        required(&obj, &labels.input_length, "input-length")?,
        &labels.input_length,
    )?;
    let output_len = count(
        required(&obj, &labels.output_length, "output-length")?,
        &labels.output_length,
    )?;
    let hash_ids = hash_ids(obj.get(&labels.hash_ids), &labels.hash_ids)?;
    let chat = if bailian { chat_link(&obj)? } else { None };
    Ok(Row::Keep(RowData {
        timestamp,
        input_len,
        output_len,
        hash_ids,
        chat,
    }))
}

/// The value of a required field, or an error that lists the fields present and the flag
/// that renames it.
fn required<'a>(
    obj: &'a Map<String, Value>,
    label: &str,
    flag: &'static str,
) -> Result<&'a Value, JsonLineError> {
    obj.get(label)
        .filter(|v| !v.is_null())
        .ok_or_else(|| JsonLineError::Missing {
            label: label.to_string(),
            present: obj
                .keys()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join(", "),
            flag,
        })
}

fn timestamp(obj: &Map<String, Value>, label: &str) -> Result<f64, JsonLineError> {
    let v = required(obj, label, "timestamp")?;
    let t = match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    };
    t.filter(|t| t.is_finite())
        .ok_or_else(|| JsonLineError::NotFinite {
            label: label.to_string(),
            got: v.clone(),
        })
}

/// A token count: a non-negative integer (an integral float such as `12.0` is accepted).
pub(crate) fn count(v: &Value, label: &str) -> Result<u32, JsonLineError> {
    let n = match v {
        Value::Number(n) => n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0)
                .map(|f| f as u64)
        }),
        _ => None,
    };
    n.and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| JsonLineError::NotCount {
            label: label.to_string(),
            got: v.clone(),
        })
}

fn hash_ids(v: Option<&Value>, label: &str) -> Result<Box<[u64]>, JsonLineError> {
    let items = match v {
        None | Some(Value::Null) => return Ok(Box::default()),
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(JsonLineError::NotArray {
                label: label.to_string(),
                got: other.clone(),
            })
        }
    };
    items
        .iter()
        .enumerate()
        .map(|(i, h)| {
            // Negative ids keep their two's-complement bits: only equality matters.
            h.as_u64()
                .or_else(|| h.as_i64().map(|x| x as u64))
                .ok_or_else(|| JsonLineError::NotHashId {
                    label: label.to_string(),
                    index: i,
                    got: h.clone(),
                })
        })
        .collect()
}

fn chat_link(obj: &Map<String, Value>) -> Result<Option<ChatLink>, JsonLineError> {
    let Some(chat_id) = obj.get("chat_id").filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let chat_id = chat_id.as_i64().ok_or_else(|| JsonLineError::NotChatId {
        field: "chat_id",
        got: chat_id.clone(),
    })?;
    let parent_chat_id = match obj.get("parent_chat_id") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_i64() {
            Some(-1) => None,
            Some(p) => Some(p),
            None => {
                return Err(JsonLineError::NotChatId {
                    field: "parent_chat_id",
                    got: v.clone(),
                })
            }
        },
    };
    let turn = match obj.get("turn") {
        None | Some(Value::Null) => None,
        Some(v) => Some(count(v, "turn")?),
    };
    Ok(Some(ChatLink {
        chat_id,
        parent_chat_id,
        turn,
        parent: None,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keep(row: Row) -> RowData {
        match row {
            Row::Keep(d) => d,
            Row::Drop(r) => panic!("dropped: {r:?}"),
        }
    }

    #[test]
    fn mooncake_line() {
        let l = JsonLabels::default();
        let d = keep(
            parse_line(
                r#"{"timestamp": 27, "input_length": 9, "output_length": 2, "hash_ids": [4, -1]}"#,
                &l,
                false,
            )
            .unwrap(),
        );
        assert_eq!(d.timestamp, 27.0);
        assert_eq!((d.input_len, d.output_len), (9, 2));
        assert_eq!(&*d.hash_ids, &[4, u64::MAX]);
        assert_eq!(d.chat, None);
    }

    #[test]
    fn timestamp_may_be_a_numeric_string_and_hash_ids_may_be_absent() {
        let l = JsonLabels::default();
        let d = keep(
            parse_line(
                r#"{"timestamp": "1.25", "input_length": 3.0, "output_length": 1}"#,
                &l,
                false,
            )
            .unwrap(),
        );
        assert_eq!(d.timestamp, 1.25);
        assert_eq!(d.input_len, 3);
        assert!(d.hash_ids.is_empty());
    }

    #[test]
    fn errors_name_the_field() {
        let l = JsonLabels::default();
        let e = parse_line(
            r#"{"ts": 1, "input_length": 3, "output_length": 1}"#,
            &l,
            false,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("\"timestamp\" is missing (fields present: ts, input_length"),
            "{e}"
        );
        assert!(e.contains("--timed-trace-label-timestamp"), "{e}");
        let e = parse_line(
            r#"{"timestamp": 1, "input_length": -3, "output_length": 1}"#,
            &l,
            false,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("\"input_length\" is not a non-negative integer"),
            "{e}"
        );
        let e = parse_line(
            r#"{"timestamp": 1, "input_length": 3, "output_length": 1, "hash_ids": [1, "x"]}"#,
            &l,
            false,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("hash_ids[1] is not an integer"), "{e}");
        let e = parse_line("[1, 2]", &l, false).unwrap_err().to_string();
        assert!(e.starts_with("not a JSON object"), "{e}");
    }

    #[test]
    fn bailian_links() {
        let l = JsonLabels::default();
        let root = keep(
            parse_line(
                r#"{"chat_id": 5, "parent_chat_id": -1, "timestamp": 0.5, "input_length": 4, "output_length": 1, "turn": 1}"#,
                &l,
                true,
            )
            .unwrap(),
        );
        assert_eq!(
            root.chat,
            Some(ChatLink {
                chat_id: 5,
                parent_chat_id: None,
                turn: Some(1),
                parent: None
            })
        );
        let child = keep(
            parse_line(
                r#"{"chat_id": 6, "parent_chat_id": 5, "timestamp": 2, "input_length": 4, "output_length": 1}"#,
                &l,
                true,
            )
            .unwrap(),
        );
        assert_eq!(child.chat.unwrap().parent_chat_id, Some(5));
    }
}
