//! The sonnet dataset (`--dataset-name sonnet`, from vLLM 0.11; 0.33 dropped it), with 0.11's
//! semantics: the file's lines (`readlines()`, newlines kept); the base prompt
//! `"Pick as many lines as you can from these poem lines:\n"`; a shared prefix of the first
//! `round((prefix_len - base_offset) / avg_line_len)` lines and `round((input_len -
//! base_offset) / avg_line_len)` lines in all, the rest drawn with `random.choices` after
//! `random.seed(seed)`; lengths are counted **after** rendering the chat template with the
//! generation prompt (`base_offset` too), and a draw longer than `--sonnet-input-len` is
//! drawn again. Completions backends get the rendered prompt, `openai-chat` the raw one (the
//! server renders it). `--skip-chat-template` counts and sends raw text (a vllm-bench
//! extension for tokenizers without a template).
//!
//! Without `--dataset-path` the repository's `sonnet.txt` (vLLM's file, byte for byte) is
//! built into the binary.

use std::path::Path;
use std::sync::Arc;

use rayon::prelude::*;

use super::chat_format::ChatFormat;
use super::error::DatasetError;
use super::pyrandom::PyRandom;
use super::sampling::Sampling;
use super::{Prompt, SampleRequest};
use crate::tokenizer::Tokenizer;

/// vLLM's `benchmarks/sonnet.txt`.
pub const BUILTIN: &str = include_str!("../../sonnet.txt");

const BASE_PROMPT: &str = "Pick as many lines as you can from these poem lines:\n";

/// Consecutive over-long draws after which the lengths are taken to be impossible (Python
/// loops forever).
const MAX_REJECTED_IN_A_ROW: usize = 10_000;

/// `--sonnet-input-len`, `--sonnet-output-len`, `--sonnet-prefix-len`, and whether the
/// rendered prompt is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SonnetOptions {
    pub input_len: usize,
    pub output_len: usize,
    pub prefix_len: usize,
    /// Send the chat-rendered prompt (completions backends); else the raw one.
    pub send_rendered: bool,
}

/// The poem lines.
pub struct Sonnet {
    lines: Vec<String>,
}

impl Sonnet {
    /// The built-in file.
    pub fn builtin() -> Self {
        Self::from_text(BUILTIN)
    }

    pub fn load(path: &Path) -> Result<Self, DatasetError> {
        let text = std::fs::read_to_string(path).map_err(|e| DatasetError::file(path, e))?;
        if text.is_empty() {
            return Err(DatasetError::file(
                path,
                "is empty; the sonnet dataset needs lines of text",
            ));
        }
        Ok(Self::from_text(&text))
    }

    /// Python's `readlines()`: each line keeps its `\n`; a last line without one is kept.
    pub fn from_text(text: &str) -> Self {
        Self {
            lines: text.split_inclusive('\n').map(str::to_owned).collect(),
        }
    }

    /// vLLM 0.11's `SonnetDataset.sample`.
    pub fn sample(
        &self,
        s: &Sampling,
        opts: SonnetOptions,
        format: &ChatFormat,
        tok: &Tokenizer,
    ) -> Result<Vec<SampleRequest>, DatasetError> {
        let count = |text: &str| -> Result<usize, DatasetError> {
            Ok(tok
                .encode(text, true)
                .map_err(DatasetError::Tokenize)?
                .len())
        };
        let line_lens = self
            .lines
            .par_iter()
            .map(|l| count(l))
            .collect::<Result<Vec<_>, _>>()?;
        let avg_len = line_lens.iter().sum::<usize>() as f64 / line_lens.len() as f64;
        let base_offset = count(&format.apply(BASE_PROMPT)?)?;
        if opts.input_len <= base_offset {
            return Err(DatasetError::Unusable(format!(
                "--sonnet-input-len {} must be higher than the base prompt length \
                 ({base_offset} tokens)",
                opts.input_len
            )));
        }
        let lines_for = |len: usize| py_round((len as f64 - base_offset as f64) / avg_len);
        let num_input_lines = lines_for(opts.input_len);
        let num_prefix_lines = lines_for(opts.prefix_len).max(0);
        let prefix: String =
            self.lines[..(num_prefix_lines as usize).min(self.lines.len())].concat();
        let draws = usize::try_from(num_input_lines - num_prefix_lines).unwrap_or(0);
        let mut rng = PyRandom::new(s.seed);
        let mut samples = Vec::with_capacity(s.num_requests);
        let mut rejected = 0;
        while samples.len() < s.num_requests {
            let batch = (s.num_requests - samples.len()).max(64);
            let prompts: Vec<String> = (0..batch)
                .map(|_| {
                    let mut p = String::from(BASE_PROMPT);
                    p.push_str(&prefix);
                    for _ in 0..draws {
                        p.push_str(&self.lines[rng.choices_index(self.lines.len())]);
                    }
                    p
                })
                .collect();
            let counted = prompts
                .into_par_iter()
                .map(|raw| {
                    let rendered = format.apply(&raw)?;
                    let len = count(&rendered)?;
                    Ok((raw, rendered, len))
                })
                .collect::<Result<Vec<_>, DatasetError>>()?;
            for (raw, rendered, prompt_len) in counted {
                if samples.len() >= s.num_requests {
                    break;
                }
                if prompt_len > opts.input_len {
                    rejected += 1;
                    if rejected >= MAX_REJECTED_IN_A_ROW {
                        return Err(DatasetError::Unusable(format!(
                            "sonnet: {rejected} prompts in a row were longer than \
                             --sonnet-input-len {}; raise it or lower --sonnet-prefix-len",
                            opts.input_len
                        )));
                    }
                    continue;
                }
                rejected = 0;
                let text = if opts.send_rendered { rendered } else { raw };
                samples.push(SampleRequest {
                    prompt: Prompt::Text(Arc::from(text)),
                    prompt_len,
                    expected_output_len: opts.output_len,
                    request_id: Some(s.request_id(samples.len())),
                });
            }
        }
        Ok(samples)
    }
}

/// Python's `round()` of a float to an int: halves to even.
fn py_round(x: f64) -> i64 {
    x.round_ties_even() as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_pythons_readlines() {
        let s = Sonnet::from_text("a\nb\nc");
        assert_eq!(s.lines, ["a\n", "b\n", "c"]);
        let builtin = Sonnet::builtin();
        assert_eq!(builtin.lines.len(), 518);
        assert_eq!(
            builtin.lines[0],
            "FROM fairest creatures we desire increase,\n"
        );
    }

    #[test]
    fn rounding_is_pythons() {
        assert_eq!(py_round(2.5), 2);
        assert_eq!(py_round(3.5), 4);
        assert_eq!(py_round(-0.5), 0);
        assert_eq!(py_round(-1.6), -2);
    }
}
