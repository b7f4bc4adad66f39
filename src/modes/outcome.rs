//! How an invocation ended, for the exit status: completed, interrupted, or ran without a
//! single success; and the error that means nothing was sent at all.

use crate::metrics::RequestOutput;

/// How a benchmark that ran ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Ran to the end of its schedule (or was a `--dry-run`).
    Completed,
    /// Stopped by Ctrl-C or SIGTERM; what was measured was reported, marked interrupted.
    Interrupted,
    /// Ran, reported and saved, but not one request succeeded (a server that is down, a
    /// wrong port or protocol): a script must be able to tell this from a good run.
    NoneSucceeded {
        failed: usize,
        /// Requests the client cancelled on purpose (`--request-cancellation-rate`).
        cancelled: usize,
        /// One failure's reason, for the closing line (empty when none failed).
        example: String,
    },
    /// `--slo-search` found no value that meets every term (even the lowest probe missed,
    /// or a budget stopped it first): the report says why.
    SloNotMet { why: String },
}

/// How the measured run ended: interrupted first, then whether anything succeeded.
/// `cancelled` requests (in no output) count as sent without success: a run whose every
/// request was cancelled succeeded in nothing (exit 1, as docs/flags.md says).
pub fn outcome(outputs: &[RequestOutput], cancelled: usize, interrupted: bool) -> Outcome {
    if interrupted {
        return Outcome::Interrupted;
    }
    if (outputs.is_empty() && cancelled == 0) || outputs.iter().any(|o| o.success) {
        return Outcome::Completed;
    }
    Outcome::NoneSucceeded {
        failed: outputs.len(),
        cancelled,
        example: outputs.first().map(|o| o.error.clone()).unwrap_or_default(),
    }
}

/// An error before the measured run sent a request (a server that cannot be reached or
/// listed, a tokenizer or dataset that cannot be built, a ready check that timed out): the
/// program exits 2 (nothing ran), not 1 (the run failed). Displays its cause as one line.
#[derive(Debug)]
pub struct NothingRan(anyhow::Error);

impl std::fmt::Display for NothingRan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.0)
    }
}

impl std::error::Error for NothingRan {}

pub fn nothing_ran(e: anyhow::Error) -> anyhow::Error {
    NothingRan(e).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output(success: bool, error: &str) -> RequestOutput {
        RequestOutput {
            success,
            error: error.into(),
            ..RequestOutput::default()
        }
    }

    #[test]
    fn outcome_is_interrupted_first_then_whether_anything_succeeded() {
        let failed = [output(false, "Bad Gateway"), output(false, "x")];
        let mixed = [output(false, "x"), output(true, "")];
        assert_eq!(outcome(&failed, 0, true), Outcome::Interrupted);
        assert_eq!(outcome(&mixed, 0, false), Outcome::Completed);
        assert_eq!(outcome(&mixed, 5, false), Outcome::Completed);
        assert_eq!(
            outcome(&[], 0, false),
            Outcome::Completed,
            "nothing planned"
        );
        assert_eq!(
            outcome(&failed, 0, false),
            Outcome::NoneSucceeded {
                failed: 2,
                cancelled: 0,
                example: "Bad Gateway".into()
            }
        );
    }

    #[test]
    fn every_request_cancelled_is_none_succeeded() {
        assert_eq!(
            outcome(&[], 100, false),
            Outcome::NoneSucceeded {
                failed: 0,
                cancelled: 100,
                example: String::new()
            }
        );
    }
}
