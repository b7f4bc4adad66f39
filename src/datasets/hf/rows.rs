//! The rows of a dataset's data files as JSON objects, whatever the format: parquet (the
//! Hub's own; through the `parquet` crate's record API), JSON Lines, a JSON list of objects,
//! or CSV with a header (every field a string).

use std::path::Path;

use serde_json::{Map, Value};

use super::super::error::DatasetError;

/// One row: column name to value.
pub type Row = Map<String, Value>;

/// Every row of `path`, in file order.
pub fn read(path: &Path) -> Result<Vec<Row>, DatasetError> {
    let name = path.to_string_lossy().to_ascii_lowercase();
    if name.ends_with(".parquet") {
        parquet_rows(path)
    } else if name.ends_with(".jsonl") {
        jsonl_rows(path, &text(path)?)
    } else if name.ends_with(".json") {
        json_rows(path, &text(path)?)
    } else if name.ends_with(".csv") {
        csv_rows(path, &text(path)?)
    } else {
        Err(DatasetError::file(
            path,
            "not a parquet, jsonl, json or csv file",
        ))
    }
}

fn text(path: &Path) -> Result<String, DatasetError> {
    std::fs::read_to_string(path).map_err(|e| DatasetError::file(path, e))
}

fn parquet_rows(path: &Path) -> Result<Vec<Row>, DatasetError> {
    use parquet::file::reader::{FileReader, SerializedFileReader};

    let file = std::fs::File::open(path).map_err(|e| DatasetError::file(path, e))?;
    let reader = SerializedFileReader::new(file)
        .map_err(|e| DatasetError::file(path, format!("not a readable parquet file: {e}")))?;
    let rows = reader
        .get_row_iter(None)
        .map_err(|e| DatasetError::file(path, e))?;
    rows.enumerate()
        .map(|(i, row)| {
            let row = row.map_err(|e| DatasetError::entry(path, i, e.to_string()))?;
            match row.to_json_value() {
                Value::Object(m) => Ok(m),
                _ => Err(DatasetError::entry(path, i, "not a record")),
            }
        })
        .collect()
}

fn object(v: Value) -> Option<Row> {
    match v {
        Value::Object(m) => Some(m),
        _ => None,
    }
}

fn jsonl_rows(path: &Path, text: &str) -> Result<Vec<Row>, DatasetError> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            let v: Value = serde_json::from_str(l)
                .map_err(|e| DatasetError::line(path, i + 1, e.to_string()))?;
            object(v).ok_or_else(|| DatasetError::line(path, i + 1, "not a JSON object"))
        })
        .collect()
}

fn json_rows(path: &Path, text: &str) -> Result<Vec<Row>, DatasetError> {
    let v: Value = serde_json::from_str(text).map_err(|e| DatasetError::file(path, e))?;
    // A list of records, or (as the `datasets` json loader allows) {"data": [...]}.
    let list = match v {
        Value::Array(list) => list,
        Value::Object(mut m) => match m.remove("data") {
            Some(Value::Array(list)) => list,
            _ => {
                return Err(DatasetError::file(
                    path,
                    "expected a JSON list of objects (or {\"data\": [...]})",
                ))
            }
        },
        _ => return Err(DatasetError::file(path, "expected a JSON list of objects")),
    };
    list.into_iter()
        .enumerate()
        .map(|(i, v)| object(v).ok_or_else(|| DatasetError::entry(path, i, "not a JSON object")))
        .collect()
}

fn csv_rows(path: &Path, text: &str) -> Result<Vec<Row>, DatasetError> {
    use crate::datasets::timed_trace::csv::split;

    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((_, header)) = lines.next() else {
        return Ok(Vec::new());
    };
    let names: Vec<String> = split(header)
        .map_err(|e| DatasetError::line(path, 1, e.to_string()))?
        .into_iter()
        .map(|c| c.into_owned())
        .collect();
    lines
        .map(|(i, l)| {
            let fields = split(l).map_err(|e| DatasetError::line(path, i + 1, e.to_string()))?;
            if fields.len() != names.len() {
                return Err(DatasetError::line(
                    path,
                    i + 1,
                    format!("{} fields, the header has {}", fields.len(), names.len()),
                ));
            }
            Ok(names
                .iter()
                .cloned()
                .zip(fields.into_iter().map(|f| Value::String(f.into_owned())))
                .collect())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_formats_become_rows() {
        let p = Path::new("x");
        let rows = jsonl_rows(p, "{\"a\": 1}\n\n{\"a\": 2}\n").unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1]["a"], 2);
        let e = jsonl_rows(p, "{\"a\": 1}\n[1]\n").unwrap_err().to_string();
        assert!(e.contains("x:2: not a JSON object"), "{e}");
        assert_eq!(
            json_rows(p, "{\"data\": [{\"q\": \"w\"}]}").unwrap()[0]["q"],
            "w"
        );
        let rows = csv_rows(p, "q,n\n\"a, b\",3\n").unwrap();
        assert_eq!(
            (rows[0]["q"].as_str(), rows[0]["n"].as_str()),
            (Some("a, b"), Some("3"))
        );
        assert!(csv_rows(p, "q,n\n1\n")
            .unwrap_err()
            .to_string()
            .contains("x:2: 1 fields"));
    }
}
