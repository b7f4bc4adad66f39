//! The BurstGPT dataset (`--dataset-name burstgpt`, Python 0.33's `BurstGPTDataset`): the
//! BurstGPT CSV's `GPT-4` rows with a positive `Response tokens`, `num_prompts` of them picked
//! as pandas' `sample(n, random_state=seed)` picks them (with replacement when there are
//! fewer, [`super::np_random`]); request `i` asks for the row's response tokens with a prompt
//! of its request-token count, the decode of ids `(i + j) mod vocab_size`. The prompt length
//! is the row's count, not a re-encoding (as Python). Columns 3 and 4 are the counts (Python
//! reads them by position); `Model` and `Response tokens` are found by name.
//!
//! For replaying BurstGPT with its timestamps use `--dataset-name timed_trace`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayon::prelude::*;

use super::error::DatasetError;
use super::np_random::NpRandomState;
use super::sampling::Sampling;
use super::timed_trace::csv::split;
use super::{Prompt, SampleRequest};
use crate::tokenizer::Tokenizer;

/// A GPT-4 row kept for sampling: (request tokens, response tokens).
type Counts = (usize, usize);

/// The kept rows of the CSV, in file order.
pub struct BurstGpt {
    path: PathBuf,
    rows: Vec<Counts>,
}

impl BurstGpt {
    pub fn load(path: &Path) -> Result<Self, DatasetError> {
        let text = std::fs::read_to_string(path).map_err(|e| DatasetError::file(path, e))?;
        Self::parse(path, &text)
    }

    /// Parses CSV text (`path` names it in errors).
    pub fn parse(path: &Path, text: &str) -> Result<Self, DatasetError> {
        let mut lines = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty());
        let (_, header) = lines
            .next()
            .ok_or_else(|| DatasetError::file(path, "is empty; expected a BurstGPT CSV"))?;
        let names = split(header).map_err(|e| DatasetError::line(path, 1, e.to_string()))?;
        let column = |name: &str| {
            names.iter().position(|n| n.trim() == name).ok_or_else(|| {
                DatasetError::line(
                    path,
                    1,
                    format!(
                        "no \"{name}\" column; a BurstGPT CSV has Timestamp, Model, Request \
                         tokens, Response tokens, Total tokens, Log Type"
                    ),
                )
            })
        };
        let model = column("Model")?;
        let response = column("Response tokens")?;
        if names.len() < 4 {
            return Err(DatasetError::line(path, 1, "fewer than 4 columns"));
        }
        let mut rows = Vec::new();
        for (i, line) in lines {
            let at = |why: String| DatasetError::line(path, i + 1, why);
            let fields = split(line).map_err(|e| at(e.to_string()))?;
            if fields.len() != names.len() {
                return Err(at(format!(
                    "{} fields, the header has {}",
                    fields.len(),
                    names.len()
                )));
            }
            let count = |col: usize| -> Result<f64, DatasetError> {
                let f = fields[col].trim();
                f.parse::<f64>().map_err(|_| {
                    at(format!(
                        "column \"{}\" is {f:?}, not a number",
                        names[col].trim()
                    ))
                })
            };
            if fields[model].trim() != "GPT-4" || count(response)? <= 0.0 {
                continue;
            }
            let tokens = |col: usize| -> Result<usize, DatasetError> {
                let v = count(col)?;
                if v < 0.0 || v.fract() != 0.0 {
                    return Err(at(format!(
                        "column \"{}\" is {v}, not a token count",
                        names[col].trim()
                    )));
                }
                Ok(v as usize)
            };
            rows.push((tokens(2)?, tokens(3)?));
        }
        Ok(Self {
            path: path.to_owned(),
            rows,
        })
    }

    /// GPT-4 rows with a positive response.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The `(request tokens, response tokens)` pairs Python picks, in its order.
    pub fn pick(&self, s: &Sampling) -> Result<Vec<Counts>, DatasetError> {
        if self.rows.is_empty() {
            return Err(DatasetError::file(
                &self.path,
                "has no GPT-4 row with a positive \"Response tokens\"",
            ));
        }
        let mut rs = NpRandomState::new(s.seed).ok_or_else(|| {
            DatasetError::Unusable(format!(
                "--seed {}: the burstgpt dataset samples as numpy does, which takes seeds \
                 below 2^32",
                s.seed
            ))
        })?;
        Ok(rs
            .sample_rows(self.rows.len(), s.num_requests)
            .into_iter()
            .map(|i| self.rows[i])
            .collect())
    }

    /// Python's `BurstGPTDataset.sample`.
    pub fn sample(
        &self,
        s: &Sampling,
        tok: &Tokenizer,
    ) -> Result<Vec<SampleRequest>, DatasetError> {
        let vocab = tok.vocab_size();
        if vocab == 0 {
            return Err(DatasetError::Unusable(format!(
                "the burstgpt dataset decodes token ids, but tokenizer {} reports no \
                 vocabulary size; pass --tokenizer <directory with tokenizer.json>",
                tok.id()
            )));
        }
        self.pick(s)?
            .into_par_iter()
            .enumerate()
            .map(|(i, (input_len, output_len))| {
                let ids: Vec<u32> = (0..input_len).map(|j| ((i + j) % vocab) as u32).collect();
                let text = tok.decode(&ids, false).map_err(DatasetError::Tokenize)?;
                Ok(SampleRequest {
                    prompt: Prompt::Text(Arc::from(text)),
                    prompt_len: input_len,
                    expected_output_len: output_len,
                    request_id: Some(s.request_id(i)),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n";

    fn parse(body: &str) -> Result<BurstGpt, DatasetError> {
        BurstGpt::parse(Path::new("b.csv"), &format!("{HEADER}{body}"))
    }

    #[test]
    fn keeps_gpt4_rows_with_a_response() {
        let b = parse(
            "1,GPT-4,10,20,30,Conversation log\n2,ChatGPT,5,5,10,API log\n3,GPT-4,7,0,7,API log\n\
             4,GPT-4,8,9,17,API log\n",
        )
        .unwrap();
        assert_eq!(b.rows, [(10, 20), (8, 9)]);
    }

    #[test]
    fn bad_rows_name_file_and_line() {
        for (body, want) in [
            (
                "1,GPT-4,10,x,30,API log\n",
                "b.csv:2: column \"Response tokens\" is \"x\"",
            ),
            ("1,GPT-4,10,20\n", "b.csv:2: 4 fields, the header has 6"),
            (
                "1,GPT-4,1.5,20,30,API log\n",
                "b.csv:2: column \"Request tokens\" is 1.5",
            ),
        ] {
            let e = parse(body).err().unwrap().to_string();
            assert!(e.contains(want), "{e}");
        }
        let e = BurstGpt::parse(Path::new("b.csv"), "a,b\n1,2\n")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("b.csv:1: no \"Model\" column"), "{e}");
    }
}
