//! Synthetic prompts with an exact token count: a vocabulary walk turned into text whose
//! re-encoding has exactly the requested number of tokens.
//!
//! Python's `gen_prompt_decode_to_target_len` decodes the ids, re-encodes the text, truncates
//! or pads, and gives up after 10 rounds, leaving some prompts a token or two off (it logs
//! the total mismatch). We keep its loop and make the result exact:
//!
//! * a candidate is accepted only if `encode(text)` has exactly the target length, starts
//!   with the shared prefix's ids, and contains no control token ([`Vocabulary`]);
//! * padding draws from the allowed ids (Python draws from the whole vocabulary, specials
//!   included);
//! * a walk that does not converge in [`MAX_ROUNDS`] rounds, or whose first token merges
//!   with the prefix, restarts from a fresh random position, up to [`MAX_RESTARTS`] times;
//!   only then is it an error (it never happened with the fixtures' tokenizers).

use anyhow::{bail, Result};
use rand::Rng;

use crate::tokenizer::Tokenizer;

/// Adjustment rounds (decode → encode → truncate/pad) per walk; Python's `max_retry` is 10.
pub const MAX_ROUNDS: usize = 10;
/// Fresh walks tried before giving up.
pub const MAX_RESTARTS: usize = 16;

/// The ids a synthetic prompt may use: `0..vocab_size` minus the tokenizer's control tokens
/// (Python's `allowed_tokens`, stricter: see [`Tokenizer::control_token_ids`]).
#[derive(Debug, Clone)]
pub struct Vocabulary {
    allowed: Vec<u32>,
    /// `forbidden[id]` for every id below the tokenizer's full id space that is not allowed;
    /// ids at or past its end are forbidden too (added tokens above the base vocabulary).
    forbidden: Vec<bool>,
    /// What the tokenizer puts between two decoded pieces when it decodes them together:
    /// empty for byte-level BPE (the spaces live in the tokens), a space for word-level
    /// tokenizers (the embedded mock's), so `prefix text + joiner + decoded body` is the
    /// decode of the joined ids.
    joiner: String,
}

impl Vocabulary {
    /// The allowed ids of `tokenizer`.
    pub fn new(tokenizer: &Tokenizer) -> Result<Self> {
        let vocab_size = tokenizer.vocab_size();
        let mut forbidden = vec![false; vocab_size];
        for &id in tokenizer.control_token_ids() {
            if let Some(slot) = forbidden.get_mut(id as usize) {
                *slot = true;
            }
        }
        let allowed: Vec<u32> = (0..vocab_size as u32)
            .filter(|&id| !forbidden[id as usize])
            .collect();
        if allowed.is_empty() {
            bail!(
                "tokenizer {} reports no usable vocabulary (vocab_size {vocab_size}); synthetic \
                 prompts need a local tokenizer: pass --tokenizer <directory with tokenizer.json>",
                tokenizer.id()
            );
        }
        let joiner = joiner(tokenizer, &allowed)?;
        Ok(Self {
            allowed,
            forbidden,
            joiner,
        })
    }

    /// See the field: the separator a joint decode inserts between two pieces.
    pub fn joiner(&self) -> &str {
        &self.joiner
    }

    /// Number of allowed ids.
    pub fn len(&self) -> usize {
        self.allowed.len()
    }

    /// Never true: [`Vocabulary::new`] refuses an empty vocabulary.
    pub fn is_empty(&self) -> bool {
        self.allowed.is_empty()
    }

    /// `len` ids walking the allowed list from `start` (Python:
    /// `allowed[(offset + index + arange(len)) % len(allowed)]`).
    pub fn walk(&self, start: usize, len: usize) -> Vec<u32> {
        let n = self.allowed.len();
        (0..len).map(|k| self.allowed[(start + k) % n]).collect()
    }

    /// One allowed id drawn uniformly.
    pub fn random<R: Rng>(&self, rng: &mut R) -> u32 {
        self.allowed[rng.random_range(0..self.allowed.len())]
    }

    /// True for ids a prompt must not contain.
    pub fn is_forbidden(&self, id: u32) -> bool {
        self.forbidden.get(id as usize).copied().unwrap_or(true)
    }
}

/// `decode([a, b])` minus `decode([a])` and `decode([b])` for two allowed ids, when what is
/// left between them is whitespace (else nothing).
fn joiner(tokenizer: &Tokenizer, allowed: &[u32]) -> Result<String> {
    let (Some(&a), Some(&b)) = (allowed.first(), allowed.get(1)) else {
        return Ok(String::new());
    };
    let (da, db) = (
        tokenizer.decode(&[a], false)?,
        tokenizer.decode(&[b], false)?,
    );
    let joint = tokenizer.decode(&[a, b], false)?;
    let sep = joint
        .strip_prefix(da.as_str())
        .and_then(|rest| rest.strip_suffix(db.as_str()))
        .filter(|sep| sep.chars().all(char::is_whitespace))
        .unwrap_or_default();
    Ok(sep.to_owned())
}

/// A prompt fitted to an exact token count.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Fitted {
    pub text: String,
    /// `encode(text, add_special_tokens=false)`; its length is the target.
    pub ids: Vec<u32>,
}

/// Fits prompts made of `prefix` followed by a walk of the vocabulary.
pub struct Fitter<'a> {
    tokenizer: &'a Tokenizer,
    vocab: &'a Vocabulary,
    prefix: &'a Fitted,
}

impl<'a> Fitter<'a> {
    /// A fitter whose prompts all start with `prefix` (use [`Fitted::default`] for none).
    pub fn new(tokenizer: &'a Tokenizer, vocab: &'a Vocabulary, prefix: &'a Fitted) -> Self {
        Self {
            tokenizer,
            vocab,
            prefix,
        }
    }

    /// Text of `prefix + body` with exactly `prefix.len() + body_len` tokens, starting with the
    /// walk of `body_len` allowed ids at `start`.
    pub fn fit<R: Rng>(&self, start: usize, body_len: usize, rng: &mut R) -> Result<Fitted> {
        self.fit_ids(self.vocab.walk(start, body_len), body_len, rng)
    }

    /// Like [`Fitter::fit`], starting from the ids `first` (`body_len` of them).
    pub fn fit_ids<R: Rng>(&self, first: Vec<u32>, body_len: usize, rng: &mut R) -> Result<Fitted> {
        let target = self.prefix.ids.len() + body_len;
        let mut body = first;
        for _ in 0..MAX_RESTARTS {
            if let Some(fitted) = self.fit_walk(body, target, rng)? {
                return Ok(fitted);
            }
            body = self
                .vocab
                .walk(rng.random_range(0..self.vocab.len()), body_len);
        }
        bail!(
            "could not build a prompt of exactly {target} tokens with tokenizer {} after {} \
             attempts; try another --seed or --random-input-len",
            self.tokenizer.id(),
            MAX_RESTARTS * MAX_ROUNDS
        )
    }

    /// Python's decode → encode → truncate/pad loop on one walk; `None` if it does not
    /// converge to an acceptable prompt.
    fn fit_walk<R: Rng>(
        &self,
        mut body: Vec<u32>,
        target: usize,
        rng: &mut R,
    ) -> Result<Option<Fitted>> {
        let prefix_len = self.prefix.ids.len();
        for _ in 0..MAX_ROUNDS {
            let decoded = self.tokenizer.decode(&body, false)?;
            let mut text = String::with_capacity(self.prefix.text.len() + decoded.len() + 1);
            text.push_str(&self.prefix.text);
            if !self.prefix.text.is_empty() {
                text.push_str(self.vocab.joiner());
            }
            text.push_str(&decoded);
            let ids = self.tokenizer.encode(&text, false)?;
            if !ids.starts_with(&self.prefix.ids)
                || ids.iter().any(|&id| self.vocab.is_forbidden(id))
            {
                // The body merged into the prefix or spelled a control token: a new walk
                // is needed, truncating or padding cannot fix the start.
                return Ok(None);
            }
            match ids.len().cmp(&target) {
                std::cmp::Ordering::Equal => return Ok(Some(Fitted { text, ids })),
                std::cmp::Ordering::Greater => body = ids[prefix_len..target].to_vec(),
                std::cmp::Ordering::Less => {
                    let missing = target - ids.len();
                    body = ids[prefix_len..].to_vec();
                    body.extend((0..missing).map(|_| self.vocab.random(rng)));
                }
            }
        }
        Ok(None)
    }
}
