//! Small value forms several flags share: JSON objects, comma-separated lists and `KEY=VALUE`
//! pairs, each failing with the flag's one-line error.

use serde_json::{Map, Value};

use super::ConfigError;

/// A JSON object (`--extra-body`, `--chat-template-kwargs`, …). The error says where the
/// text stops being JSON (line and column) or what it is instead, never the text itself: a
/// request body can carry a secret (`{"api_key": "sk-..."}`), and one missing quote would
/// print it.
pub(super) fn json_object(flag: &str, text: &str) -> Result<Map<String, Value>, ConfigError> {
    const HIDDEN: &str = "(the value is not shown: it may hold a secret)";
    let what = |v: &Value| match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(v) => Err(ConfigError::flag(
            flag,
            format!(
                "must be a JSON object ({{\"key\": value}}), not {} {HIDDEN}",
                what(&v)
            ),
        )),
        Err(e) => Err(ConfigError::flag(
            flag,
            // serde_json's syntax errors name the position, not the text.
            format!("invalid JSON: {e} {HIDDEN}"),
        )),
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

/// The one rule for a value written into a request head (a header value, the request-id
/// prefix, the API key) or into names sent with every request (model, served model, LoRA
/// adapters): no control character (CR and LF would end the header line and start one of
/// the user's making on the wire; NUL, TAB, DEL and the rest have no business there either).
/// The error names `what` and the position, never the value: it may be a secret.
pub(super) fn no_control(what: &str, value: &str) -> Result<(), ConfigError> {
    match value.char_indices().find(|(_, c)| c.is_control()) {
        None => Ok(()),
        Some((at, c)) => Err(ConfigError::flag(
            what,
            format!(
                "contains a control character ({}) at byte {at}, which would corrupt the \
                 requests; remove it (the value is not shown: it may be a secret)",
                control_name(c)
            ),
        )),
    }
}

/// `CR`, `LF`, `NUL`, `TAB`, else `U+XXXX`.
fn control_name(c: char) -> String {
    match c {
        '\r' => "CR".to_owned(),
        '\n' => "LF".to_owned(),
        '\0' => "NUL".to_owned(),
        '\t' => "TAB".to_owned(),
        c => format!("U+{:04X}", u32::from(c)),
    }
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
    fn a_malformed_extra_body_never_echoes_its_secret() {
        for text in [
            r#"{"api_key": "sk-live-SECRET"#,
            r#"{"api_key": "sk-live-SECRET",}"#,
            r#"["sk-live-SECRET"]"#,
            r#""sk-live-SECRET""#,
            "{'api_key': 'sk-live-SECRET'}",
        ] {
            let e = json_object("--extra-body", text).unwrap_err().to_string();
            assert!(!e.contains("SECRET"), "{e}");
            assert!(e.starts_with("--extra-body: "), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn shared_forms() {
        assert!(json_object("--x", r#"{"a": 1}"#).is_ok());
        assert_eq!(
            json_object("--x", "[1]").unwrap_err().to_string(),
            "--x: must be a JSON object ({\"key\": value}), not an array (the value is not \
             shown: it may hold a secret)"
        );
        assert!(json_object("--x", "{a")
            .unwrap_err()
            .to_string()
            .starts_with("--x: invalid JSON: key must be a string at line 1 column 2"));
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

    #[test]
    fn control_characters_are_refused_without_echoing_the_value() {
        assert!(no_control("--x", "bench-1 ok: é").is_ok());
        let e = no_control("OPENAI_API_KEY", "sk-hidden\r\nX-Evil: 1")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("OPENAI_API_KEY: contains a control character (CR) at byte 9"));
        assert!(!e.contains("hidden") && !e.contains("Evil"), "{e}");
        let e = no_control("--x", "a\u{7f}").unwrap_err().to_string();
        assert!(e.contains("(U+007F) at byte 1"), "{e}");
    }
}
