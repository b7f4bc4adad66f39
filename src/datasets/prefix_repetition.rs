//! The prefix-repetition dataset (`--dataset-name prefix_repetition`, Python 0.33's
//! `PrefixRepetitionRandomDataset`): `--prefix-repetition-num-prefixes` random prefixes of
//! `--prefix-repetition-prefix-len` tokens, each followed by `num_prompts / num_prefixes`
//! random suffixes of `--prefix-repetition-suffix-len` tokens (so a server's prefix cache can
//! hit), asking for `--prefix-repetition-output-len` tokens; then, unless
//! `--disable-shuffle`, `random.seed(seed)` + `random.shuffle` of the requests (CPython's, so
//! the order is Python's).
//!
//! Differences from Python, deliberate and shared with the random dataset
//! ([`super::random`]): the token draws are our own generator (not numpy's), lengths are
//! exact (prefix and prompt re-encode to exactly their lengths; Python can be a token off),
//! and control tokens are avoided. Like Python the requests carry no request id, and a
//! `num_prompts` not divisible by the prefix count yields `per_prefix × num_prefixes`
//! requests.

use std::sync::Arc;

use rand::rngs::StdRng;
use rand::SeedableRng;
use rayon::prelude::*;

use super::error::DatasetError;
use super::pyrandom::PyRandom;
use super::sampling::Sampling;
use super::token_fit::{Fitted, Fitter, Vocabulary};
use super::{Prompt, SampleRequest};
use crate::tokenizer::Tokenizer;

/// The dataset's lengths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrefixRepetitionOptions {
    pub prefix_len: usize,
    pub suffix_len: usize,
    pub num_prefixes: usize,
    pub output_len: usize,
}

/// Python's `PrefixRepetitionRandomDataset.sample`.
pub fn sample(
    s: &Sampling,
    o: PrefixRepetitionOptions,
    tok: &Tokenizer,
) -> Result<Vec<SampleRequest>, DatasetError> {
    let per_prefix = s.num_requests / o.num_prefixes.max(1);
    if per_prefix == 0 {
        return Err(DatasetError::Unusable(format!(
            "--num-prompts ({}) must be at least --prefix-repetition-num-prefixes ({})",
            s.num_requests, o.num_prefixes
        )));
    }
    let fail = |e: anyhow::Error| DatasetError::Unusable(format!("prefix_repetition: {e:#}"));
    let vocab = Vocabulary::new(tok).map_err(fail)?;
    let prefixes = (0..o.num_prefixes)
        .into_par_iter()
        .map(|p| {
            let mut rng = rng_for(s.seed, p, None);
            fit(tok, &vocab, &Fitted::default(), o.prefix_len, &mut rng)
        })
        .collect::<anyhow::Result<Vec<_>>>()
        .map_err(fail)?;
    let mut requests = (0..o.num_prefixes * per_prefix)
        .into_par_iter()
        .map(|i| {
            let (p, k) = (i / per_prefix, i % per_prefix);
            let mut rng = rng_for(s.seed, p, Some(k));
            let fitted = fit(tok, &vocab, &prefixes[p], o.suffix_len, &mut rng)?;
            Ok(SampleRequest {
                prompt_len: fitted.ids.len(),
                prompt: Prompt::Text(Arc::from(fitted.text)),
                expected_output_len: o.output_len,
                request_id: None,
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()
        .map_err(fail)?;
    if s.shuffle {
        PyRandom::new(s.seed).shuffle(&mut requests);
    }
    Ok(requests)
}

/// `prefix` plus `len` random allowed tokens, re-encoding to exactly `prefix + len` tokens.
fn fit(
    tok: &Tokenizer,
    vocab: &Vocabulary,
    prefix: &Fitted,
    len: usize,
    rng: &mut StdRng,
) -> anyhow::Result<Fitted> {
    if len == 0 {
        return Ok(prefix.clone());
    }
    let first = (0..len).map(|_| vocab.random(rng)).collect();
    Fitter::new(tok, vocab, prefix).fit_ids(first, len, rng)
}

/// One generator per prefix (`suffix = None`) and per suffix, so the prompts do not depend
/// on the thread count.
fn rng_for(seed: u64, prefix: usize, suffix: Option<usize>) -> StdRng {
    let mut x = seed ^ 0x7072_6566_6978_7265; // "prefixre"
    for v in [prefix as u64, suffix.map_or(u64::MAX, |k| k as u64)] {
        x = splitmix(x ^ v);
    }
    StdRng::seed_from_u64(x)
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
