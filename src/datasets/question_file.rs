//! JSONL question files with a category per row (Spec-Bench's `question.jsonl`, SPEED-Bench's
//! `<subset>.jsonl`): rows of one category (all when none is asked for), each row's first
//! prompt, as a custom dataset ([`super::custom`]) with a fixed output length.

use std::path::Path;

use serde_json::Value;

use super::custom::Custom;
use super::error::DatasetError;

/// How one file format names its parts.
pub struct QuestionFormat {
    /// The first prompt of a row, if it has one.
    pub first_prompt: fn(&Value) -> Option<&str>,
    /// What a row must look like, for the error when it does not.
    pub expected: &'static str,
    /// The category flag, for the error when nothing is left.
    pub category_flag: &'static str,
}

/// Reads `path`, keeping the rows of `category` (Python: `row["category"] == category`).
pub fn load(
    path: &Path,
    category: Option<&str>,
    format: &QuestionFormat,
) -> Result<Custom, DatasetError> {
    let text = std::fs::read_to_string(path).map_err(|e| DatasetError::file(path, e))?;
    parse(path, &text, category, format)
}

/// Parses JSONL text (`path` names it in errors).
pub fn parse(
    path: &Path,
    text: &str,
    category: Option<&str>,
    format: &QuestionFormat,
) -> Result<Custom, DatasetError> {
    let category = category.filter(|c| !c.is_empty());
    let mut prompts = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = |why: String| DatasetError::line(path, i + 1, why);
        let row: Value = serde_json::from_str(line).map_err(|e| at(format!("not JSON: {e}")))?;
        if let Some(want) = category {
            if row.get("category").and_then(Value::as_str) != Some(want) {
                continue;
            }
        }
        let prompt = (format.first_prompt)(&row).ok_or_else(|| at(format.expected.into()))?;
        prompts.push((i + 1, prompt.to_owned()));
    }
    if prompts.is_empty() {
        let which = category.map_or(String::new(), |c| {
            format!(" of {} {c}", format.category_flag)
        });
        return Err(DatasetError::file(path, format!("has no question{which}")));
    }
    Ok(Custom::from_prompts(path, prompts))
}
