//! Special-token metadata from `tokenizer_config.json` and `special_tokens_map.json`.
//!
//! `tokenizer.json` marks added tokens as special, but what Python reports as
//! `all_special_ids` (and whether a BOS is added) comes from these two sibling files, read the
//! way `transformers` reads them: `tokenizer_config.json` wins over `special_tokens_map.json`
//! for a key both set, and a token value is either a string or an `AddedToken` object
//! (`{"content": ...}`).

use std::path::Path;

use super::{Result, TokenizerError};
use serde_json::Value;

/// `transformers`' `SPECIAL_TOKENS_ATTRIBUTES` (minus `additional_special_tokens`), in the
/// order `all_special_tokens` lists them.
const NAMED_ATTRIBUTES: [&str; 7] = [
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
];

/// What the sibling config files say about special tokens.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SpecialTokensConfig {
    /// Named special tokens (`bos_token` …) in attribute order, as (attribute, content).
    pub named: Vec<(&'static str, String)>,
    /// `additional_special_tokens`, in file order.
    pub additional: Vec<String>,
    /// `add_bos_token` / `add_eos_token`, when the config sets them.
    pub add_bos_token: Option<bool>,
    pub add_eos_token: Option<bool>,
    /// `clean_up_tokenization_spaces` (default false, as in current `transformers`).
    pub clean_up_tokenization_spaces: bool,
    /// True when neither file exists (then `tokenizer.json`'s own special flags are used).
    pub missing: bool,
}

impl SpecialTokensConfig {
    /// Reads `tokenizer_config.json` and `special_tokens_map.json` from `dir` (either may be
    /// absent; a present but unreadable/invalid one is an error naming the file).
    pub fn from_dir(dir: &Path) -> Result<Self> {
        let config = read_json_object(&dir.join("tokenizer_config.json"))?;
        let map = read_json_object(&dir.join("special_tokens_map.json"))?;
        let missing = config.is_none() && map.is_none();
        let config = config.unwrap_or_default();
        let map = map.unwrap_or_default();
        // tokenizer_config.json wins where it sets a non-empty value (transformers' rule).
        let lookup = |key: &str| -> Option<&Value> {
            config
                .get(key)
                .filter(|v| is_set(v))
                .or_else(|| map.get(key).filter(|v| is_set(v)))
        };
        let named = NAMED_ATTRIBUTES
            .iter()
            .filter_map(|&attr| lookup(attr).and_then(token_content).map(|c| (attr, c)))
            .collect();
        let additional = lookup("additional_special_tokens")
            .and_then(Value::as_array)
            .map(|items| items.iter().filter_map(token_content).collect())
            .unwrap_or_default();
        Ok(Self {
            named,
            additional,
            add_bos_token: config.get("add_bos_token").and_then(Value::as_bool),
            add_eos_token: config.get("add_eos_token").and_then(Value::as_bool),
            clean_up_tokenization_spaces: config
                .get("clean_up_tokenization_spaces")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            missing,
        })
    }

    /// The content of a named special token (`"bos_token"` …), if set.
    pub fn named(&self, attr: &str) -> Option<&str> {
        self.named
            .iter()
            .find(|(a, _)| *a == attr)
            .map(|(_, c)| c.as_str())
    }

    /// Special-token contents in `all_special_tokens` order, without duplicates.
    pub fn all_special_tokens(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for content in self
            .named
            .iter()
            .map(|(_, c)| c.as_str())
            .chain(self.additional.iter().map(String::as_str))
        {
            if !out.contains(&content) {
                out.push(content);
            }
        }
        out
    }
}

fn is_set(v: &Value) -> bool {
    !v.is_null() && v.as_str() != Some("")
}

/// A token value: a plain string or an `AddedToken` object with `content`.
fn token_content(v: &Value) -> Option<String> {
    match v {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Object(o) => o.get("content").and_then(Value::as_str).map(str::to_owned),
        _ => None,
    }
}

fn read_json_object(path: &Path) -> Result<Option<serde_json::Map<String, Value>>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(TokenizerError::Read {
                path: path.to_owned(),
                source,
            })
        }
    };
    let value: Value =
        serde_json::from_str(&text).map_err(|source| TokenizerError::InvalidJson {
            path: path.to_owned(),
            source,
        })?;
    match value {
        Value::Object(map) => Ok(Some(map)),
        _ => Err(TokenizerError::NotJsonObject {
            path: path.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) {
        std::fs::write(dir.join(name), text).unwrap();
    }

    fn tempdir(tag: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("vb-special-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn config_wins_over_map_and_objects_are_read() {
        let dir = tempdir("wins");
        write(
            &dir,
            "tokenizer_config.json",
            r#"{"eos_token": {"content": "<e>", "__type": "AddedToken"}, "pad_token": null,
                "add_bos_token": true, "additional_special_tokens": ["<a>", "<e>"]}"#,
        );
        write(
            &dir,
            "special_tokens_map.json",
            r#"{"eos_token": "<x>", "pad_token": "<p>", "bos_token": "<b>"}"#,
        );
        let cfg = SpecialTokensConfig::from_dir(&dir).unwrap();
        assert_eq!(cfg.named("eos_token"), Some("<e>"));
        assert_eq!(cfg.named("pad_token"), Some("<p>"));
        assert_eq!(cfg.named("bos_token"), Some("<b>"));
        assert_eq!(cfg.add_bos_token, Some(true));
        assert_eq!(cfg.all_special_tokens(), vec!["<b>", "<e>", "<p>", "<a>"]);
        assert!(!cfg.missing);
    }

    #[test]
    fn absent_files_are_not_an_error_but_bad_json_is() {
        let dir = tempdir("absent");
        let cfg = SpecialTokensConfig::from_dir(&dir).unwrap();
        assert!(cfg.missing);
        write(&dir, "tokenizer_config.json", "{not json");
        let err = format!("{:#}", SpecialTokensConfig::from_dir(&dir).unwrap_err());
        assert!(
            err.contains("tokenizer_config.json is not valid JSON"),
            "{err}"
        );
    }
}
