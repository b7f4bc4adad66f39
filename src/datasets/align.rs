//! Python 0.33's prompt alignment to the server's tokenizer (`random` and
//! `prefix_repetition` text prompts), done before the clock starts.
//!
//! The first prompt is tokenized by the server (`add_special_tokens: false`). If `/tokenize`
//! fails, nothing changes (Python prints `WARNING: /tokenize unavailable, skipping
//! alignment.`); if its count equals the prompt's `prompt_len`, nothing changes. Otherwise
//! every prompt the server counts longer than its `prompt_len` is cut to that many server
//! tokens and detokenized; `prompt_len` is kept. A request whose calls fail keeps its prompt.

use std::sync::Arc;

use rayon::prelude::*;

use super::{Prompt, SampleRequest};
use crate::tokenizer::TokenizeEndpoint;

/// What [`align_to_server`] did, with the line Python prints for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Alignment {
    /// Not text prompts, or no requests: nothing to do, nothing printed.
    NotApplicable,
    /// `/tokenize` failed on the first prompt.
    Unavailable,
    /// The server agrees with the client's count.
    Matched,
    /// The counts differed; `changed` prompts were cut.
    Realigned {
        server: usize,
        expected: usize,
        changed: usize,
    },
}

impl Alignment {
    /// The warning Python prints, if any.
    pub fn message(&self) -> Option<String> {
        match self {
            Self::Unavailable => Some("WARNING: /tokenize unavailable, skipping alignment.".to_owned()),
            Self::Realigned { server, expected, .. } => Some(format!(
                "WARNING: tokenizer mismatch (server={server}, expected={expected}), re-aligning prompts."
            )),
            Self::NotApplicable | Self::Matched => None,
        }
    }
}

/// Aligns `requests`' text prompts to the server's tokenizer (in parallel).
pub fn align_to_server(
    requests: &mut [SampleRequest],
    endpoint: &dyn TokenizeEndpoint,
) -> Alignment {
    let Some(first) = requests.first() else {
        return Alignment::NotApplicable;
    };
    let Prompt::Text(first_text) = &first.prompt else {
        return Alignment::NotApplicable;
    };
    let Ok(first_tokens) = endpoint.tokenize(first_text, false) else {
        return Alignment::Unavailable;
    };
    let expected = first.prompt_len;
    if first_tokens.len() == expected {
        return Alignment::Matched;
    }
    let changed = requests
        .par_iter_mut()
        .map(|req| usize::from(cut_to_prompt_len(req, endpoint)))
        .sum();
    Alignment::Realigned {
        server: first_tokens.len(),
        expected,
        changed,
    }
}

/// Cuts one prompt to its `prompt_len` server tokens; true if it changed.
fn cut_to_prompt_len(req: &mut SampleRequest, endpoint: &dyn TokenizeEndpoint) -> bool {
    let Prompt::Text(text) = &req.prompt else {
        return false;
    };
    let Ok(tokens) = endpoint.tokenize(text, false) else {
        return false;
    };
    if tokens.len() <= req.prompt_len {
        return false;
    }
    match endpoint.detokenize(&tokens[..req.prompt_len]) {
        Ok(corrected) => {
            req.prompt = Prompt::Text(Arc::from(corrected));
            true
        }
        Err(_) => false,
    }
}
