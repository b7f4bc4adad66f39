//! The custom dataset (`--dataset-name custom`): a JSONL file of `{"prompt": ...,
//! "output_tokens": ...}`, with Python 0.33's `CustomDataset` semantics: `random.seed(seed)`
//! and `random.shuffle` of the rows (not with `--disable-shuffle`); every row is used in that
//! order until `--num-prompts`; the prompt is rendered with the chat template unless
//! `--skip-chat-template`, and that rendered text is what is counted (with special tokens)
//! and sent; the output length is `--custom-output-len`, or the row's `output_tokens` with
//! `--custom-output-len -1`; too few rows are oversampled (not with `--no-oversample`).
//! Without a tokenizer (`--skip-tokenizer-init`) both lengths are 1, as in Python.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayon::prelude::*;
use serde_json::Value;

use super::chat_format::ChatFormat;
use super::error::DatasetError;
use super::pyrandom::PyRandom;
use super::sampling::{maybe_oversample, oversample_pairs, Sampling};
use super::{Prompt, SampleRequest};
use crate::tokenizer::Tokenizer;

/// One row of the file.
#[derive(Debug, Clone, PartialEq)]
struct Row {
    /// 1-based line number, for errors.
    line: usize,
    prompt: String,
    output_tokens: Option<Value>,
    /// `custom_audio`: the row's `audio` file path.
    audio: Option<String>,
}

/// The text of a custom-style dataset file: JSONL only (a file ending in `.jsonl`), as
/// Python reads the custom datasets.
pub(super) fn jsonl_text(path: &Path, dataset: &str) -> Result<String, DatasetError> {
    if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
        return Err(DatasetError::file(
            path,
            format!(
                "the {dataset} dataset reads JSONL only (a file ending in .jsonl, one \
                 {{\"prompt\": ...}} object per line)"
            ),
        ));
    }
    std::fs::read_to_string(path).map_err(|e| DatasetError::file(path, e))
}

/// Each non-blank line of a JSONL `text` through `parse_row(path, line number, line)`
/// (numbers count blank lines too, so errors name the line an editor shows).
pub(super) fn jsonl_rows<T>(
    path: &Path,
    text: &str,
    parse_row: impl Fn(&Path, usize, &str) -> Result<T, DatasetError>,
) -> Result<Vec<T>, DatasetError> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| parse_row(path, i + 1, l))
        .collect()
}

/// The loaded JSONL file.
pub struct Custom {
    path: PathBuf,
    rows: Vec<Row>,
}

/// `--custom-output-len`: `None` takes each row's `output_tokens`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CustomOptions {
    pub output_len: Option<usize>,
}

impl Custom {
    /// Reads `path`; only `.jsonl` files, as Python.
    pub fn load(path: &Path) -> Result<Self, DatasetError> {
        Self::parse(path, &jsonl_text(path, "custom")?)
    }

    /// Parses JSONL text (`path` names it in errors).
    pub fn parse(path: &Path, text: &str) -> Result<Self, DatasetError> {
        Ok(Self {
            path: path.to_owned(),
            rows: jsonl_rows(path, text, parse_row)?,
        })
    }

    /// Prompts given as `(1-based line, prompt)` by another loader (spec_bench), with no
    /// per-row output length.
    pub(super) fn from_prompts(path: &Path, prompts: Vec<(usize, String)>) -> Self {
        Self {
            path: path.to_owned(),
            rows: prompts
                .into_iter()
                .map(|(line, prompt)| Row {
                    line,
                    prompt,
                    output_tokens: None,
                    audio: None,
                })
                .collect(),
        }
    }

    /// Cuts every prompt longer than `max_tokens` (counted without special tokens) to its
    /// first `max_tokens` tokens, decoded (`--speed-bench-max-input-len`).
    pub fn truncate_prompts(
        &mut self,
        tok: &Tokenizer,
        max_tokens: usize,
    ) -> Result<(), DatasetError> {
        self.rows.par_iter_mut().try_for_each(|row| {
            let ids = tok
                .encode(&row.prompt, false)
                .map_err(DatasetError::Tokenize)?;
            if ids.len() > max_tokens {
                row.prompt = tok
                    .decode(&ids[..max_tokens], false)
                    .map_err(DatasetError::Tokenize)?;
            }
            Ok(())
        })
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Python's `CustomDataset.sample`.
    pub fn sample(
        &self,
        s: &Sampling,
        opts: CustomOptions,
        format: &ChatFormat,
        tokenizer: Option<&Tokenizer>,
    ) -> Result<Vec<SampleRequest>, DatasetError> {
        let order = self.order(s);
        let mut samples = self.requests(&order, s, opts, format, tokenizer)?;
        maybe_oversample(&mut samples, s, "custom")?;
        Ok(samples)
    }

    /// Python's `CustomAudioDataset.sample`: the custom samples, each with its row's `audio`
    /// path (oversampled samples keep theirs).
    pub fn sample_audio(
        &self,
        s: &Sampling,
        opts: CustomOptions,
        format: &ChatFormat,
        tokenizer: Option<&Tokenizer>,
    ) -> Result<Vec<(SampleRequest, String)>, DatasetError> {
        let order = self.order(s);
        let samples = self.requests(&order, s, opts, format, tokenizer)?;
        let paths = order
            .iter()
            .map(|row| {
                row.audio.clone().ok_or_else(|| {
                    DatasetError::line(&self.path, row.line, "no \"audio\" file path")
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut pairs: Vec<_> = samples.into_iter().zip(paths).collect();
        oversample_pairs(&mut pairs, s, "custom_audio")?;
        Ok(pairs)
    }

    /// The rows in Python's order (`random.seed(seed); random.shuffle`), cut to the run.
    fn order(&self, s: &Sampling) -> Vec<&Row> {
        let mut order: Vec<&Row> = self.rows.iter().collect();
        if s.shuffle {
            PyRandom::new(s.seed).shuffle(&mut order);
        }
        order.truncate(s.num_requests);
        order
    }

    fn requests(
        &self,
        order: &[&Row],
        s: &Sampling,
        opts: CustomOptions,
        format: &ChatFormat,
        tokenizer: Option<&Tokenizer>,
    ) -> Result<Vec<SampleRequest>, DatasetError> {
        order
            .par_iter()
            .enumerate()
            .map(|(i, row)| self.request(s, i, row, opts, format, tokenizer))
            .collect()
    }

    fn request(
        &self,
        s: &Sampling,
        i: usize,
        row: &Row,
        opts: CustomOptions,
        format: &ChatFormat,
        tokenizer: Option<&Tokenizer>,
    ) -> Result<SampleRequest, DatasetError> {
        let Some(tok) = tokenizer else {
            return Ok(SampleRequest {
                prompt: Prompt::Text(Arc::from(row.prompt.as_str())),
                prompt_len: 1,
                expected_output_len: 1,
                request_id: Some(s.request_id(i)),
            });
        };
        let output_len = match opts.output_len {
            Some(n) => n,
            None => self.output_tokens(row)?,
        };
        let prompt = format.apply(&row.prompt)?;
        let prompt_len = tok
            .encode(&prompt, true)
            .map_err(DatasetError::Tokenize)?
            .len();
        Ok(SampleRequest {
            prompt: Prompt::Text(Arc::from(prompt)),
            prompt_len,
            expected_output_len: output_len,
            request_id: Some(s.request_id(i)),
        })
    }

    /// The row's `output_tokens` as Python's `int(...)` takes it (an integer, or a float or
    /// string holding one).
    fn output_tokens(&self, row: &Row) -> Result<usize, DatasetError> {
        let bad = |why: String| DatasetError::line(&self.path, row.line, why);
        let v = row.output_tokens.as_ref().ok_or_else(|| {
            bad("no \"output_tokens\"; add it to every line, or pass --custom-output-len N".into())
        })?;
        let n = match v {
            Value::Number(n) => n.as_u64().or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && *f >= 0.0)
                    .map(|f| f as u64)
            }),
            Value::String(s) => s.trim().parse::<u64>().ok(),
            _ => None,
        };
        n.map(|n| n as usize).ok_or_else(|| {
            bad(format!(
                "\"output_tokens\" is {v}, not a non-negative integer"
            ))
        })
    }
}

fn parse_row(path: &Path, line: usize, text: &str) -> Result<Row, DatasetError> {
    let at = |why: String| DatasetError::line(path, line, why);
    let v: Value = serde_json::from_str(text).map_err(|e| at(format!("not JSON: {e}")))?;
    let Value::Object(mut obj) = v else {
        return Err(at("not a JSON object".to_string()));
    };
    let prompt = match obj.remove("prompt") {
        Some(Value::String(p)) => p,
        Some(other) => return Err(at(format!("\"prompt\" must be a string, not {other}"))),
        None => return Err(at("no \"prompt\" key".to_string())),
    };
    let audio = match obj.remove("audio") {
        Some(Value::String(a)) => Some(a),
        None | Some(Value::Null) => None,
        Some(other) => return Err(at(format!("\"audio\" must be a file path, not {other}"))),
    };
    Ok(Row {
        line,
        prompt,
        output_tokens: obj.remove("output_tokens").filter(|v| !v.is_null()),
        audio,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Custom, DatasetError> {
        Custom::parse(Path::new("c.jsonl"), text)
    }

    #[test]
    fn rows_keep_their_line_numbers_and_blank_lines_are_skipped() {
        let c =
            parse("{\"prompt\": \"a\", \"output_tokens\": 3}\n\n{\"prompt\": \"b\"}\n").unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!((c.rows[1].line, c.rows[1].prompt.as_str()), (3, "b"));
        assert_eq!(c.rows[1].output_tokens, None);
    }

    #[test]
    fn bad_lines_name_the_line() {
        for (text, want) in [
            (
                "{\"prompt\": 1}",
                "c.jsonl:1: \"prompt\" must be a string, not 1",
            ),
            ("{\"a\": 1}\n", "c.jsonl:1: no \"prompt\" key"),
            ("{\"prompt\": \"x\"}\n[1]", "c.jsonl:2: not a JSON object"),
            ("{\"prompt\": \"x\"}\n{oops", "c.jsonl:2: not JSON: "),
        ] {
            let e = parse(text).err().unwrap().to_string();
            assert!(e.starts_with("--dataset-path c.jsonl:"), "{e}");
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn output_tokens_as_python_int_reads_them() {
        let c = parse(
            "{\"prompt\": \"a\", \"output_tokens\": 7}\n{\"prompt\": \"a\", \"output_tokens\": 8.0}\n\
             {\"prompt\": \"a\", \"output_tokens\": \"9\"}\n{\"prompt\": \"a\", \"output_tokens\": 1.5}\n\
             {\"prompt\": \"a\"}",
        )
        .unwrap();
        let got: Vec<_> = c.rows.iter().map(|r| c.output_tokens(r).ok()).collect();
        assert_eq!(got, [Some(7), Some(8), Some(9), None, None]);
        let e = c.output_tokens(&c.rows[4]).unwrap_err().to_string();
        assert!(e.ends_with("c.jsonl:5: no \"output_tokens\"; add it to every line, or pass --custom-output-len N"), "{e}");
    }
}
