//! Small value forms several flags share: JSON objects, comma-separated lists and `KEY=VALUE`
//! pairs, each failing with the flag's one-line error.

use serde_json::{Map, Value};

use super::ConfigError;

/// A JSON object (`--extra-body`, `--chat-template-kwargs`, …).
pub(super) fn json_object(flag: &str, text: &str) -> Result<Map<String, Value>, ConfigError> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ConfigError::value(flag, text, "must be a JSON object")),
        Err(e) => Err(ConfigError::value(flag, text, format!("invalid JSON: {e}"))),
    }
}

/// A comma-separated list; items are trimmed and each is parsed by `item`, whose error is the
/// reason for that item.
pub(super) fn comma_list<T>(
    flag: &str,
    text: &str,
    item: impl Fn(&str) -> Result<T, String>,
) -> Result<Vec<T>, ConfigError> {
    text.split(',')
        .map(|raw| {
            let s = raw.trim();
            if s.is_empty() {
                return Err(ConfigError::value(flag, text, "empty item in the list"));
            }
            item(s).map_err(|why| ConfigError::value(flag, text, format!("'{s}': {why}")))
        })
        .collect()
}

/// `KEY=VALUE` split at the first `=`, both sides trimmed (Python's `--header`/`--metadata`).
pub(super) fn key_value(flag: &str, item: &str) -> Result<(String, String), ConfigError> {
    match item.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.trim().to_owned())),
        _ => Err(ConfigError::value(flag, item, "expected KEY=VALUE")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_forms() {
        assert!(json_object("--x", r#"{"a": 1}"#).is_ok());
        assert_eq!(
            json_object("--x", "[1]").unwrap_err().to_string(),
            "--x '[1]': must be a JSON object"
        );
        assert!(json_object("--x", "{a")
            .unwrap_err()
            .to_string()
            .starts_with("--x '{a': invalid JSON: "));
        assert_eq!(
            comma_list("--l", "1, 2", |s| s
                .parse::<u8>()
                .map_err(|e| e.to_string()))
            .unwrap(),
            [1, 2]
        );
        assert_eq!(
            comma_list("--l", "1,,2", |s| Ok(s.to_owned()))
                .unwrap_err()
                .to_string(),
            "--l 1,,2: empty item in the list"
        );
        assert_eq!(
            key_value("--header", " a = b=c ").unwrap(),
            ("a".to_owned(), "b=c".to_owned())
        );
        assert_eq!(
            key_value("--metadata", "novalue").unwrap_err().to_string(),
            "--metadata novalue: expected KEY=VALUE"
        );
    }
}
