//! [`DatasetStats`]: what a generated dataset looks like, for `--dry-run` and logs.

use std::fmt;

use super::{Prompt, SampleRequest};

/// Min / mean / max / total of one length column.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LenStats {
    pub min: usize,
    pub max: usize,
    pub mean: f64,
    pub total: u64,
}

impl LenStats {
    fn of(values: impl Iterator<Item = usize>) -> Self {
        let (mut min, mut max, mut total, mut n) = (usize::MAX, 0, 0u64, 0u64);
        for v in values {
            min = min.min(v);
            max = max.max(v);
            total += v as u64;
            n += 1;
        }
        if n == 0 {
            return Self::default();
        }
        Self {
            min,
            max,
            mean: total as f64 / n as f64,
            total,
        }
    }
}

/// Summary of a list of [`SampleRequest`]s.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DatasetStats {
    /// Number of requests.
    pub count: usize,
    /// How many send token ids (`--prompt-token-ids`) rather than text.
    pub token_id_prompts: usize,
    /// Prompt length in tokens (client-side count).
    pub prompt_len: LenStats,
    /// Requested output length (`max_tokens`).
    pub output_len: LenStats,
    /// Requests dropped before the run (e.g. by `--max-model-len`); set by the caller.
    pub filtered: usize,
}

impl DatasetStats {
    /// Summarises `requests`.
    pub fn from_requests(requests: &[SampleRequest]) -> Self {
        Self {
            count: requests.len(),
            token_id_prompts: requests
                .iter()
                .filter(|r| matches!(r.prompt, Prompt::TokenIds(_)))
                .count(),
            prompt_len: LenStats::of(requests.iter().map(|r| r.prompt_len)),
            output_len: LenStats::of(requests.iter().map(|r| r.expected_output_len)),
            filtered: 0,
        }
    }
}

impl fmt::Display for DatasetStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.token_id_prompts {
            0 => "text prompts",
            n if n == self.count => "token-id prompts",
            _ => "mixed text / token-id prompts",
        };
        writeln!(f, "Requests: {} ({kind})", self.count)?;
        if self.filtered > 0 {
            writeln!(f, "Filtered out: {}", self.filtered)?;
        }
        for (label, s) in [
            ("Prompt tokens", &self.prompt_len),
            ("Output tokens", &self.output_len),
        ] {
            writeln!(
                f,
                "{label}: min {} / mean {:.2} / max {} / total {}",
                s.min, s.mean, s.max, s.total
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn req(prompt_len: usize, out: usize, ids: bool) -> SampleRequest {
        SampleRequest {
            prompt: if ids {
                Prompt::TokenIds(Arc::from(vec![1u32; prompt_len]))
            } else {
                Prompt::Text(Arc::from("x"))
            },
            prompt_len,
            expected_output_len: out,
            request_id: None,
        }
    }

    #[test]
    fn summarises_lengths_and_prompt_kinds() {
        let s =
            DatasetStats::from_requests(&[req(10, 5, false), req(20, 7, true), req(30, 9, false)]);
        assert_eq!(s.count, 3);
        assert_eq!(s.token_id_prompts, 1);
        assert_eq!(
            s.prompt_len,
            LenStats {
                min: 10,
                max: 30,
                mean: 20.0,
                total: 60
            }
        );
        assert_eq!(s.output_len.total, 21);
        let text = s.to_string();
        assert!(
            text.contains("Requests: 3 (mixed text / token-id prompts)"),
            "{text}"
        );
        assert!(
            text.contains("Prompt tokens: min 10 / mean 20.00 / max 30 / total 60"),
            "{text}"
        );
    }

    #[test]
    fn empty_is_all_zero() {
        let s = DatasetStats::from_requests(&[]);
        assert_eq!(s.prompt_len, LenStats::default());
        assert_eq!(s.count, 0);
    }
}
