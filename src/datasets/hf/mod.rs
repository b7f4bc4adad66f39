//! `--dataset-name hf`: a Hugging Face dataset, from the Hub (through the local HF cache) or
//! a local file or directory in the same layout, with the prompt and output length of each
//! row taken as Python 0.33's loader for that dataset takes them.
//!
//! The dataset IDs Python knows map to their loaders ([`Loader::for_id`]): ShareGPT-style
//! `conversations`, InstructCoder, MT-Bench, HumanEval, GSM8K, the AIMO/NuminaMath sets,
//! Zeta (next-edit prediction), BlazEdit (`--blazedit-min/max-distance`) and the MLPerf
//! sets; LongBench (context and question, which
//! Python refuses) too. Any other dataset is read by column (`--hf-text-column`, else the
//! first of `conversations`, `messages`, `conversation`, `prompt`, `text`, `question`,
//! `instruction`, `problem` it has), where Python refuses it. The multimodal and
//! audio sets of Python's list are refused until images and audio are supported.
//!
//! Rows are shuffled with CPython's `random` seeded by `--seed` (not with
//! `--disable-shuffle`); the `datasets` library's own shuffle is not reproduced, so the rows
//! picked differ from Python's for the same seed. Then, as in Python, rows are taken in order
//! until `--num-prompts` pass the loader's filter, and oversampled if too few did.

pub mod files;
pub mod rows;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{json, Value};

use super::chat_format::ChatFormat;
use super::error::DatasetError;
use super::hub_file::HubAccess;
use super::pyrandom::PyRandom;
use super::sampling::{is_valid_sequence_within, maybe_oversample, take_in_order, Sampling};
use super::{Prompt, SampleRequest};
use crate::tokenizer::Tokenizer;
use rows::Row;

/// `--hf-*` options.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HfOptions {
    pub subset: Option<String>,
    pub split: Option<String>,
    /// `--hf-name`: the Hub ID that decides the loader when `--dataset-path` is local.
    pub name: Option<String>,
    /// `--hf-output-len` (or `--output-len`).
    pub output_len: Option<usize>,
    pub text_column: Option<String>,
    /// `--blazedit-min-distance`, `--blazedit-max-distance`.
    pub blazedit_distance: (f64, f64),
}

/// How a dataset's rows become prompts: one per dataset family Python knows, and by column.
#[derive(Debug, Clone, PartialEq)]
pub enum Loader {
    /// `conversations: [{from, value}, ...]`: turn 0 is the prompt, turn 1 the completion.
    Conversations,
    /// `messages` or `conversation` (`[{role, content}, ...]`, WildChat, LMSYS-Chat-1M):
    /// the first user message and the assistant's answer after it.
    Messages(&'static str),
    /// THUDM/LongBench: `context`, then `input`, as one user message.
    LongBench,
    InstructCoder,
    /// `turns[0]`.
    MtBench,
    /// `prompt`.
    HumanEval,
    /// `question`.
    Gsm8k,
    /// `problem` and `solution`.
    Aimo,
    /// Zed's Zeta: `events`, `input`, `output`.
    NextEdit,
    /// `system_prompt`, `question`, `output`.
    MlPerf,
    /// `code`, `change_request`, `norm_distance` (BlazEdit), rows kept within the distance
    /// bounds.
    Blazedit {
        min: f64,
        max: f64,
    },
    /// One text column, sent as a user message.
    Column(String),
}

/// Python's multimodal, audio and tool-call sets: refused, with what they need.
const NOT_YET: [(&str, &str); 13] = [
    ("lmarena-ai/VisionArena-Chat", "images"),
    ("lmarena-ai/vision-arena-bench-v0.1", "images"),
    ("yale-nlp/MMVU", "images and videos"),
    ("Lin-Chen/MMStar", "images"),
    ("lmms-lab/LLaVA-OneVision-Data", "images"),
    ("Aeala/ShareGPT_Vicuna_unfiltered_multimodal", "images"),
    ("openslr/librispeech_asr", "audio"),
    ("facebook/voxpopuli", "audio"),
    ("LIUM/tedlium", "audio"),
    ("edinburghcstr/ami", "audio"),
    ("speechcolab/gigaspeech", "audio"),
    ("kensho/spgispeech", "audio"),
    (
        "gorilla-llm/Berkeley-Function-Calling-Leaderboard",
        "tool schemas",
    ),
];

impl Loader {
    /// The loader Python uses for `id`, with its default split and subset.
    pub fn for_id(id: &str) -> Option<(Loader, &'static str, Option<&'static str>)> {
        Some(match id {
            "Aeala/ShareGPT_Vicuna_unfiltered" => (Loader::Conversations, "train", None),
            "likaixin/InstructCoder" => (Loader::InstructCoder, "train", None),
            "philschmid/mt-bench" => (Loader::MtBench, "train", None),
            "openai/openai_humaneval" => (Loader::HumanEval, "test", None),
            "openai/gsm8k" => (Loader::Gsm8k, "test", Some("main")),
            "AI-MO/aimo-validation-aime" | "AI-MO/NuminaMath-1.5" | "AI-MO/NuminaMath-CoT" => {
                (Loader::Aimo, "train", None)
            }
            "zed-industries/zeta" => (Loader::NextEdit, "train", None),
            "THUDM/LongBench" => (Loader::LongBench, "test", None),
            "mgoin/mlperf-inference-llama2-data" | "mgoin/mlperf-inference-llama3.1-data" => {
                (Loader::MlPerf, "train", None)
            }
            _ => return None,
        })
    }

    /// The loader for a dataset Python does not know: `--hf-text-column`, else the first
    /// known column of `row`.
    fn by_column(row: &Row, text_column: Option<&str>) -> Result<Loader, String> {
        if let Some(c) = text_column {
            return match row.get(c) {
                Some(Value::String(_)) => Ok(Loader::Column(c.to_string())),
                Some(_) => Err(format!("column {c:?} is not text")),
                None => Err(format!("no column {c:?} (columns: {})", column_list(row))),
            };
        }
        match row {
            r if r.get("conversations").is_some_and(Value::is_array) => Ok(Loader::Conversations),
            r if r.get("messages").is_some_and(Value::is_array) => Ok(Loader::Messages("messages")),
            r if r.get("conversation").is_some_and(Value::is_array) => {
                Ok(Loader::Messages("conversation"))
            }
            r => ["prompt", "text", "question", "instruction", "problem"]
                .iter()
                .find(|c| r.get(**c).is_some_and(Value::is_string))
                .map(|c| Loader::Column(c.to_string()))
                .ok_or_else(|| {
                    format!(
                        "no prompt column found (columns: {}); name one with --hf-text-column",
                        column_list(r)
                    )
                }),
        }
    }

    /// Python's default output length of the loaders that have one.
    fn default_output_len(&self) -> Option<usize> {
        match self {
            Loader::InstructCoder => Some(200),
            Loader::Blazedit { .. } => Some(4000),
            Loader::MtBench
            | Loader::HumanEval
            | Loader::Gsm8k
            | Loader::LongBench
            | Loader::Column(_) => Some(256),
            _ => None,
        }
    }
}

fn column_list(row: &Row) -> String {
    row.keys().cloned().collect::<Vec<_>>().join(", ")
}

/// A loaded dataset: its rows and how they become prompts.
pub struct HfData {
    /// What the errors call it (the Hub ID or the path).
    what: String,
    first_file: PathBuf,
    rows: Vec<Row>,
    loader: Loader,
}

/// Loads `dataset_path` (a Hub ID, or a local file or directory) for `opts`.
pub fn load(
    dataset_path: &str,
    opts: &HfOptions,
    access: &HubAccess,
) -> Result<HfData, DatasetError> {
    let id = opts.name.as_deref().unwrap_or(dataset_path);
    if let Some((_, needs)) = NOT_YET.iter().find(|(d, _)| *d == id) {
        return Err(DatasetError::Unusable(format!(
            "--dataset-path {id}: this dataset needs {needs}, which the hf dataset does not \
             support yet; pick a text dataset"
        )));
    }
    let known = match id {
        "vdaita/edit_5k_char" | "vdaita/edit_10k_char" => {
            let (min, max) = opts.blazedit_distance;
            Some((Loader::Blazedit { min, max }, "train", None))
        }
        _ => Loader::for_id(id),
    };
    let split = opts
        .split
        .as_deref()
        .or(known.as_ref().map(|k| k.1))
        .unwrap_or("train");
    let subset = opts.subset.as_deref().or(known.as_ref().and_then(|k| k.2));
    let local = Path::new(dataset_path);
    let data = match files::local(local) {
        Some(d) if d.files.len() == 1 && local.is_file() => d,
        Some(d) => files::DataFiles {
            files: files::select(&d.files, subset, split, dataset_path)?,
            ..d
        },
        None => files::hub(access, dataset_path, subset, split)?,
    };
    let mut all = Vec::new();
    for f in &data.files {
        all.extend(rows::read(&data.root.join(f))?);
    }
    let first_file = data.root.join(&data.files[0]);
    let loader = match known {
        Some((l, ..)) => l,
        None => match all.first() {
            Some(row) => Loader::by_column(row, opts.text_column.as_deref())
                .map_err(|why| DatasetError::file(&first_file, why))?,
            None => return Err(DatasetError::file(&first_file, "the split has no rows")),
        },
    };
    Ok(HfData {
        what: id.to_string(),
        first_file,
        rows: all,
        loader,
    })
}

/// `zeta_prompt` of Python's next-edit loader.
fn zeta_prompt(events: &str, input: &str) -> String {
    format!(
        "### Instruction:\nYou are a code completion assistant and your task is to analyze \
         user edits and then rewrite an excerpt that the user provides, suggesting the \
         appropriate edits within the excerpt, taking into account the cursor location.\n\n\
         ### User Edits:\n\n{events}\n\n### User Excerpt:\n\n{input}\n\n### Response:\n\n"
    )
}

/// BlazEdit's prompt (Python's template, from the BlazEdit repo).
fn blazedit_prompt(code: &str, change_request: &str) -> String {
    format!(
        "Given a code file, please apply the change requests and generate the new file.\n\n\
         Original file:\n```python\n{code}\n```\n\nChange request:\n{change_request}\n\n\
         Please generate the new code file in the \"New file\" section below."
    )
}

/// One row's prompt and lengths, or `None` when the loader's filter drops it.
struct Candidate {
    prompt: String,
    prompt_len: usize,
    output_len: usize,
}

impl HfData {
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The loader in use.
    pub fn loader(&self) -> &Loader {
        &self.loader
    }

    /// True when the loader renders prompts with the chat template (Python's loaders for
    /// conversations, AIMO and Zeta send the raw text).
    pub fn is_templated(&self) -> bool {
        !matches!(
            self.loader,
            Loader::Conversations | Loader::Messages(_) | Loader::Aimo | Loader::NextEdit
        )
    }

    /// Python's selection: shuffled rows (unless `--disable-shuffle`), each through the
    /// loader, until `--num-prompts` pass; oversampled when too few did.
    pub fn sample(
        &self,
        s: &Sampling,
        output_len: Option<usize>,
        format: &ChatFormat,
        tok: &Tokenizer,
    ) -> Result<Vec<SampleRequest>, DatasetError> {
        let mut order: Vec<usize> = (0..self.rows.len()).collect();
        if s.shuffle {
            PyRandom::new(s.seed).shuffle(&mut order);
        }
        let mut samples = take_in_order(&order, s, |&i| {
            let c = self.candidate(i, output_len, format, tok)?;
            Ok(c.map(|c| SampleRequest {
                prompt: Prompt::Text(Arc::from(c.prompt)),
                prompt_len: c.prompt_len,
                expected_output_len: c.output_len,
                request_id: None,
            }))
        })?;
        maybe_oversample(&mut samples, s, &self.what)?;
        Ok(samples)
    }

    fn text<'a>(&self, i: usize, row: &'a Row, key: &str) -> Result<&'a str, DatasetError> {
        row.get(key)
            .and_then(Value::as_str)
            .ok_or_else(|| DatasetError::entry(&self.first_file, i, format!("has no text {key:?}")))
    }

    /// The `n`th turn's text of a ShareGPT-style or OpenAI-style conversation.
    fn turn<'a>(
        &self,
        i: usize,
        turns: &'a [Value],
        n: usize,
        key: &str,
    ) -> Result<&'a str, DatasetError> {
        turns
            .get(n)
            .and_then(|t| t.get(key))
            .and_then(Value::as_str)
            .ok_or_else(|| {
                DatasetError::entry(&self.first_file, i, format!("turn {n} has no text {key:?}"))
            })
    }

    fn candidate(
        &self,
        i: usize,
        fixed: Option<usize>,
        format: &ChatFormat,
        tok: &Tokenizer,
    ) -> Result<Option<Candidate>, DatasetError> {
        let row = &self.rows[i];
        let len = |text: &str, special: bool| {
            tok.encode(text, special)
                .map(|ids| ids.len())
                .map_err(DatasetError::Tokenize)
        };
        let templated = |prompt: &str| -> Result<Candidate, DatasetError> {
            let prompt = format.apply(prompt)?;
            let output_len = fixed.or(self.loader.default_output_len()).unwrap_or(256);
            Ok(Candidate {
                prompt_len: len(&prompt, true)?,
                prompt,
                output_len,
            })
        };
        // A prompt and a reference completion: the completion's length unless fixed, and
        // the length filter when it is not.
        let paired = |prompt: &str, completion: &str, max: (usize, usize)| {
            let prompt_len = len(prompt, true)?;
            let completion_len = len(completion, true)?;
            let dynamic = fixed.is_none();
            let output_len = fixed.unwrap_or(completion_len);
            if dynamic && !is_valid_sequence_within(prompt_len, completion_len, false, max) {
                return Ok(None);
            }
            Ok(Some(Candidate {
                prompt: prompt.to_string(),
                prompt_len,
                output_len,
            }))
        };
        match &self.loader {
            Loader::Conversations => {
                let turns = row
                    .get("conversations")
                    .and_then(Value::as_array)
                    .map_or(&[][..], |v| v);
                if turns.len() < 2 {
                    return Ok(None);
                }
                let prompt = self.turn(i, turns, 0, "value")?;
                let completion = self.turn(i, turns, 1, "value")?;
                paired(prompt, completion, (1024, 2048))
            }
            Loader::Messages(key) => {
                let turns = row
                    .get(*key)
                    .and_then(Value::as_array)
                    .map_or(&[][..], |v| v);
                let role = |t: &Value, r: &str| t.get("role").and_then(Value::as_str) == Some(r);
                let Some(u) = turns.iter().position(|t| role(t, "user")) else {
                    return Ok(None);
                };
                if !turns.get(u + 1).is_some_and(|t| role(t, "assistant")) {
                    return Ok(None);
                }
                let prompt = self.turn(i, turns, u, "content")?;
                let completion = self.turn(i, turns, u + 1, "content")?;
                paired(prompt, completion, (1024, 2048))
            }
            Loader::LongBench => {
                let prompt = format!(
                    "{}\n\n{}",
                    self.text(i, row, "context")?,
                    self.text(i, row, "input")?
                );
                templated(&prompt).map(Some)
            }
            Loader::Aimo => {
                let (p, c) = (
                    self.text(i, row, "problem")?,
                    self.text(i, row, "solution")?,
                );
                paired(p, c, (2048, 32000))
            }
            Loader::InstructCoder => {
                let prompt = format!(
                    "{}\n\n{} Just output the code, do not include any explanation.",
                    self.text(i, row, "input")?,
                    self.text(i, row, "instruction")?
                );
                templated(&prompt).map(Some)
            }
            Loader::MtBench => {
                let turns = row
                    .get("turns")
                    .and_then(Value::as_array)
                    .map_or(&[][..], |v| v);
                let first = turns.first().and_then(Value::as_str).ok_or_else(|| {
                    DatasetError::entry(&self.first_file, i, "has no text turns[0]")
                })?;
                templated(first).map(Some)
            }
            Loader::HumanEval => templated(self.text(i, row, "prompt")?).map(Some),
            Loader::Blazedit { min, max } => {
                let distance = match row.get("norm_distance") {
                    Some(Value::Number(n)) => n.as_f64(),
                    Some(Value::String(s)) => s.trim().parse().ok(),
                    _ => None,
                }
                .ok_or_else(|| {
                    DatasetError::entry(&self.first_file, i, "has no number \"norm_distance\"")
                })?;
                if distance < *min || distance > *max {
                    return Ok(None);
                }
                let prompt = blazedit_prompt(
                    self.text(i, row, "code")?,
                    self.text(i, row, "change_request")?,
                );
                templated(&prompt).map(Some)
            }
            Loader::Gsm8k => templated(self.text(i, row, "question")?).map(Some),
            Loader::Column(c) => templated(self.text(i, row, c)?).map(Some),
            Loader::NextEdit => {
                let output = self.text(i, row, "output")?;
                let start = output.find("<|editable_region_start|>").unwrap_or(0);
                let prompt = zeta_prompt(self.text(i, row, "events")?, self.text(i, row, "input")?);
                Ok(Some(Candidate {
                    prompt_len: len(&prompt, true)?,
                    output_len: len(&output[start..], true)?,
                    prompt,
                }))
            }
            Loader::MlPerf => {
                let messages = json!([
                    {"role": "system", "content": self.text(i, row, "system_prompt")?},
                    {"role": "user", "content": self.text(i, row, "question")?},
                ]);
                let prompt = format.apply_messages(&messages)?;
                let prompt_len = len(&prompt, true)?;
                let output_len = match fixed {
                    Some(n) => n,
                    None => len(self.text(i, row, "output")?, false)?,
                };
                if !is_valid_sequence_within(prompt_len, output_len, false, (1024, 2048)) {
                    return Ok(None);
                }
                Ok(Some(Candidate {
                    prompt,
                    prompt_len,
                    output_len,
                }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(v: Value) -> Row {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    #[test]
    fn unknown_datasets_are_read_by_column() {
        let conv = row(json!({"conversations": [], "id": 1}));
        assert_eq!(Loader::by_column(&conv, None), Ok(Loader::Conversations));
        let text = row(json!({"id": 1, "text": "hi", "prompt": 3}));
        assert_eq!(
            Loader::by_column(&text, None),
            Ok(Loader::Column("text".into()))
        );
        assert_eq!(
            Loader::by_column(&text, Some("text")),
            Ok(Loader::Column("text".into()))
        );
        let e = Loader::by_column(&text, Some("body")).unwrap_err();
        assert!(
            e.contains("no column \"body\" (columns: id, text, prompt)"),
            "{e}"
        );
        let e = Loader::by_column(&row(json!({"x": 1})), None).unwrap_err();
        assert!(e.contains("--hf-text-column"), "{e}");
    }

    #[test]
    fn known_ids_take_python_defaults() {
        let (l, split, subset) = Loader::for_id("openai/gsm8k").unwrap();
        assert_eq!((l, split, subset), (Loader::Gsm8k, "test", Some("main")));
        assert_eq!(Loader::InstructCoder.default_output_len(), Some(200));
        assert!(
            zeta_prompt("E", "I").contains("### User Edits:\n\nE\n\n### User Excerpt:\n\nI\n\n")
        );
    }
}
