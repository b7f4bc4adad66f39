//! The `random` dataset (Python 0.33 `RandomDataset` semantics, exact token counts).
//!
//! Per request, as in Python:
//! * input length uniform in `[floor(L·(1−ri)), ceil(L·(1+ri))]` where
//!   `L = max(0, --random-input-len − num_special_tokens_to_add())` (the server adds those
//!   specials back), output length uniform in `[max(1, floor(O·(1−ro))), max(1,
//!   ceil(O·(1+ro)))]`, `ri`/`ro` the input and output keys of `--random-range-ratio` (one
//!   number sets both); drawn input, output, offset, as Python draws its three arrays;
//! * `--random-prefix-len` tokens of shared prefix, drawn once from the allowed ids;
//! * the body walks the allowed ids from `(offset + index)` where `offset` is uniform in
//!   `[0, vocab_size)`;
//! * the text is decoded, re-encoded and adjusted so that `prompt_len = prefix + input
//!   length` exactly (Python may end a token or two off).
//!
//! Two ways to get there, same guarantee ([`FitStrategy`]): small datasets fit every prompt
//! on its own ([`super::token_fit`], Python's loop made exact); large ones encode the whole
//! vocabulary walk once and cut each body out of it as a window whose two seams are
//! re-encoded and checked ([`super::walk_corpus`]) — 100k prompts of 1024 tokens then cost
//! about one encode of the vocabulary plus a few dozen tokens per prompt instead of two
//! full encodes per prompt.
//!
//! Differences from Python, all deliberate:
//! * lengths are exact and the prefix is shared token for token: it is fitted on its own and
//!   every prompt's encoding starts with its ids (Python decodes prefix and body together,
//!   so the boundary token can differ between prompts);
//! * every added token is avoided, not only `all_special_ids` (see
//!   [`crate::tokenizer::Tokenizer::control_token_ids`]), padding included;
//! * randomness is our own (`StdRng`, one stream per request derived from `--seed` and the
//!   index), so a seed gives the same prompts for any thread count but not numpy's prompts;
//! * `--prompt-token-ids` sends the id walk itself (no decode/encode): the server sees exactly
//!   `prefix + input length` tokens, so the special-token deduction above is not applied;
//! * on the window path a body starts at position `(offset + index) mod n` of the
//!   *re-encoded* walk (its `n` tokens) rather than at a vocabulary id: the same text, cut
//!   where the tokenizer cuts it;
//! * `--max-model-len` drops requests whose `prompt_len + output_len` exceeds it.
//!
//! Generation is parallel (rayon) and happens before the clock starts; prompts are
//! `Arc<str>` / `Arc<[u32]>` shared by the request builder.

use std::sync::Arc;

use anyhow::{bail, Result};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;

use super::token_fit::{Fitted, Fitter, Vocabulary};
use super::walk_corpus::{SeamFitter, WalkCorpus};
use super::{DatasetStats, Prompt, SampleRequest, Sampling};
use crate::tokenizer::Tokenizer;

/// Input/output length jitter (`--random-range-ratio`): input lengths are drawn from
/// `[L·(1−input), L·(1+input)]`, output lengths from `[O·(1−output), O·(1+output)]`
/// (Python's `_resolve_range_ratios`: one number sets both).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RangeRatio {
    pub input: f64,
    pub output: f64,
}

impl RangeRatio {
    /// One ratio for both lengths.
    pub fn both(r: f64) -> Self {
        Self {
            input: r,
            output: r,
        }
    }

    /// Each ratio must be in `[0, 1)` (Python checks input, then output).
    pub fn check(&self) -> Result<(), RatioOutOfRange> {
        let bad = |r: f64| !(0.0..1.0).contains(&r);
        match (bad(self.input), bad(self.output)) {
            (false, false) => Ok(()),
            // One number for both (or the same value twice): the key would say nothing.
            _ if self.input.to_bits() == self.output.to_bits() => Err(RatioOutOfRange(None)),
            (true, _) => Err(RatioOutOfRange(Some("input"))),
            (false, true) => Err(RatioOutOfRange(Some("output"))),
        }
    }
}

impl std::fmt::Display for RangeRatio {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.input.to_bits() == self.output.to_bits() {
            write!(f, "{}", self.input)
        } else {
            write!(
                f,
                "{{\"input\": {}, \"output\": {}}}",
                self.input, self.output
            )
        }
    }
}

/// A range ratio outside `[0, 1)`: which key (`None` when both are the same value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RatioOutOfRange(pub Option<&'static str>);

impl std::fmt::Display for RatioOutOfRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(key) => write!(f, "\"{key}\" must be in [0, 1)"),
            None => f.write_str("must be in [0, 1)"),
        }
    }
}

impl std::error::Error for RatioOutOfRange {}

/// The random dataset's own flags, as the configuration validated them (the random family:
/// `random`, `random-mm`, `random-rerank` and `--multi-turn`'s synthetic conversations).
/// What every dataset shares (`--num-prompts`, `--seed`, `--max-model-len`,
/// `--request-id-prefix`) is not here: [`RandomConfig::of`] adds it when the run builds the
/// dataset.
#[derive(Debug, Clone, PartialEq)]
pub struct RandomParams {
    /// `--random-input-len` (or `--input-len`).
    pub input_len: usize,
    /// `--random-output-len` (or `--output-len`).
    pub output_len: usize,
    /// `--random-prefix-len`.
    pub prefix_len: usize,
    /// `--random-range-ratio`.
    pub range_ratio: RangeRatio,
    /// `--random-batch-size`: prompts per request (embeddings batching).
    pub batch_size: usize,
    /// `--prompt-token-ids`: send token-id arrays instead of text.
    pub prompt_token_ids: bool,
}

/// Flags of the random dataset (defaults are Python's).
#[derive(Debug, Clone, PartialEq)]
pub struct RandomConfig {
    /// `--num-prompts`.
    pub num_prompts: usize,
    /// `--random-input-len` (already overridden by `--input-len` when given).
    pub input_len: usize,
    /// `--random-output-len` (already overridden by `--output-len` when given).
    pub output_len: usize,
    /// `--random-prefix-len`.
    pub prefix_len: usize,
    /// `--random-range-ratio`, each in `[0, 1)`.
    pub range_ratio: RangeRatio,
    /// `--seed`.
    pub seed: u64,
    /// `--prompt-token-ids`: send id arrays instead of text.
    pub prompt_token_ids: bool,
    /// `--max-model-len`: drop requests with `prompt_len + output_len` above it.
    pub max_model_len: Option<usize>,
    /// `--request-id-prefix`; request `i` gets id `prefix + i` (Python's rule).
    pub request_id_prefix: Option<String>,
    /// How text prompts are fitted (an implementation choice, not a flag).
    pub fit: FitStrategy,
}

impl Default for RandomConfig {
    fn default() -> Self {
        Self {
            num_prompts: 1000,
            input_len: 1024,
            output_len: 128,
            prefix_len: 0,
            range_ratio: RangeRatio::default(),
            seed: 0,
            prompt_token_ids: false,
            max_model_len: None,
            request_id_prefix: None,
            fit: FitStrategy::Auto,
        }
    }
}

impl RandomConfig {
    /// What one run generates: the dataset's flags `p` with the shared `sampling`
    /// (`--num-prompts`, `--seed`, `--request-id-prefix`) and `--max-model-len`.
    pub fn of(p: &RandomParams, sampling: &Sampling, max_model_len: Option<usize>) -> Self {
        Self {
            num_prompts: sampling.num_requests,
            input_len: p.input_len,
            output_len: p.output_len,
            prefix_len: p.prefix_len,
            range_ratio: p.range_ratio,
            seed: sampling.seed,
            prompt_token_ids: p.prompt_token_ids,
            max_model_len,
            request_id_prefix: Some(sampling.request_id_prefix.clone()),
            ..Self::default()
        }
    }

    /// Applies the general `--input-len` / `--output-len` overrides (Python maps them onto
    /// `--random-input-len` / `--random-output-len`).
    pub fn with_overrides(mut self, input_len: Option<usize>, output_len: Option<usize>) -> Self {
        self.input_len = input_len.unwrap_or(self.input_len);
        self.output_len = output_len.unwrap_or(self.output_len);
        self
    }
}

/// Inclusive sampling ranges of one dataset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LengthRanges {
    pub input: (usize, usize),
    pub output: (usize, usize),
}

impl LengthRanges {
    /// Python's `get_sampling_params` bounds (floor for low, ceil for high, output ≥ 1;
    /// input lengths with the input ratio, output lengths with the output ratio) and the
    /// "total input at least 1 token" check of `sample`.
    pub fn new(cfg: &RandomConfig, num_special: usize) -> Result<Self> {
        let ratio = cfg.range_ratio;
        if let Err(why) = ratio.check() {
            bail!("--random-range-ratio {ratio}: {why}");
        }
        let low = |len: usize, r: f64| (len as f64 * (1.0 - r)).floor() as usize;
        let high = |len: usize, r: f64| (len as f64 * (1.0 + r)).ceil() as usize;
        let real_input = cfg.input_len.saturating_sub(num_special);
        let input = (low(real_input, ratio.input), high(real_input, ratio.input));
        let output = (
            low(cfg.output_len, ratio.output).max(1),
            high(cfg.output_len, ratio.output).max(1),
        );
        if cfg.prefix_len + input.0 < 1 {
            bail!(
                "--random-input-len {} is too small: with {num_special} special tokens and \
                 an input range ratio of {} a prompt could have 0 tokens; increase \
                 --random-input-len or --random-prefix-len, or lower --random-range-ratio",
                cfg.input_len,
                ratio.input
            );
        }
        Ok(Self { input, output })
    }
}

/// A generated random dataset.
#[derive(Debug, Clone, PartialEq)]
pub struct Sampled {
    /// The requests, in index order (minus the filtered ones).
    pub requests: Vec<SampleRequest>,
    /// Requests dropped by `--max-model-len`.
    pub filtered: usize,
    /// How the prompts were built.
    pub generation: Generation,
}

/// How a dataset's prompts were built (see [`FitStrategy`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generation {
    /// `--prompt-token-ids`: the id walk, no tokenizer round trip.
    TokenIds,
    /// Decode → encode → adjust for every prompt.
    PerPrompt,
    /// Windows of the walk encoded once ([`super::walk_corpus`]).
    Window,
}

/// How text prompts are fitted to their exact length. Both give exact prompts; they differ
/// in cost: per prompt ≈ two encodes of every prompt, windows ≈ one encode of the whole
/// vocabulary walk plus a few dozen tokens per prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FitStrategy {
    /// Windows when `num_prompts × mean input length` is at least twice the vocabulary.
    #[default]
    Auto,
    PerPrompt,
    Window,
}

impl Sampled {
    /// Summary for `--dry-run`.
    pub fn stats(&self) -> DatasetStats {
        DatasetStats {
            filtered: self.filtered,
            ..DatasetStats::from_requests(&self.requests)
        }
    }
}

/// Generates the random dataset for `cfg` with `tokenizer`.
pub fn sample(cfg: &RandomConfig, tokenizer: &Tokenizer) -> Result<Sampled> {
    let num_special = if cfg.prompt_token_ids {
        0
    } else {
        tokenizer.num_special_tokens_to_add()
    };
    let ranges = LengthRanges::new(cfg, num_special)?;
    let vocab = Vocabulary::new(tokenizer)?;
    let mut prefix_rng = stream(cfg.seed, PREFIX_STREAM);
    let prefix_ids: Vec<u32> = (0..cfg.prefix_len)
        .map(|_| vocab.random(&mut prefix_rng))
        .collect();
    let gen = Gen {
        cfg,
        tokenizer,
        ranges,
        vocab: &vocab,
    };
    let (requests, generation) = if cfg.prompt_token_ids {
        (
            gen.token_id_requests(prefix_ids.into()),
            Generation::TokenIds,
        )
    } else {
        let prefix = if cfg.prefix_len == 0 {
            Fitted::default()
        } else {
            // The prefix's own walk is its random ids; fit it alone so it is shared exactly.
            Fitter::new(tokenizer, &vocab, &Fitted::default()).fit_ids(
                prefix_ids,
                cfg.prefix_len,
                &mut prefix_rng,
            )?
        };
        gen.text_requests(&prefix)?
    };
    let (requests, filtered) = match cfg.max_model_len {
        Some(max) => super::max_model_len::retain_within(requests, max),
        None => (requests, 0),
    };
    Ok(Sampled {
        requests,
        filtered,
        generation,
    })
}

/// Window-built prompts re-encoded in full as a guard, evenly spaced (a full encode costs
/// as much as ~50 seam checks). A tokenizer for which windows are not exact is off on most
/// prompts, so a few dozen samples catch it.
const SPOT_CHECKS: usize = 64;

/// The shared inputs of one generation.
struct Gen<'a> {
    cfg: &'a RandomConfig,
    tokenizer: &'a Tokenizer,
    ranges: LengthRanges,
    vocab: &'a Vocabulary,
}

impl Gen<'_> {
    fn plan(&self, index: usize) -> Plan {
        Plan::draw(
            self.cfg.seed,
            index,
            &self.ranges,
            self.tokenizer.vocab_size(),
        )
    }

    /// `--prompt-token-ids`: the walk itself, exact by construction.
    fn token_id_requests(&self, prefix: Arc<[u32]>) -> Vec<SampleRequest> {
        (0..self.cfg.num_prompts)
            .into_par_iter()
            .map(|i| {
                let plan = self.plan(i);
                let mut ids = Vec::with_capacity(prefix.len() + plan.input_len);
                ids.extend_from_slice(&prefix);
                ids.extend(self.vocab.walk(plan.offset + i, plan.input_len));
                let len = ids.len();
                plan.finish(self.cfg, i, Prompt::TokenIds(ids.into()), len)
            })
            .collect()
    }

    /// Text prompts: windows of the encoded walk when the dataset is large enough to pay
    /// for encoding the walk once, else (or if the guard fails) one fit per prompt.
    fn text_requests(&self, prefix: &Fitted) -> Result<(Vec<SampleRequest>, Generation)> {
        if self.use_windows() {
            if let Some(requests) = self.window_requests(prefix)? {
                return Ok((requests, Generation::Window));
            }
        }
        Ok((self.per_prompt_requests(prefix)?, Generation::PerPrompt))
    }

    fn use_windows(&self) -> bool {
        match self.cfg.fit {
            FitStrategy::PerPrompt => false,
            FitStrategy::Window => true,
            // Fitting per prompt costs about two encodes of every prompt; the window path
            // about one encode of the whole vocabulary walk.
            FitStrategy::Auto => {
                let mean_body = (self.ranges.input.0 + self.ranges.input.1) / 2;
                self.cfg.num_prompts.saturating_mul(mean_body) >= 2 * self.vocab.len()
            }
        }
    }

    fn per_prompt_requests(&self, prefix: &Fitted) -> Result<Vec<SampleRequest>> {
        let fitter = Fitter::new(self.tokenizer, self.vocab, prefix);
        (0..self.cfg.num_prompts)
            .into_par_iter()
            .map(|i| {
                let mut plan = self.plan(i);
                let fitted = fitter.fit(plan.offset + i, plan.input_len, &mut plan.rng)?;
                let len = fitted.ids.len();
                Ok(plan.finish(self.cfg, i, Prompt::Text(fitted.text.into()), len))
            })
            .collect()
    }

    /// `None` when the tokenizer cannot support windows or the spot check finds a prompt
    /// whose full encoding disagrees.
    fn window_requests(&self, prefix: &Fitted) -> Result<Option<Vec<SampleRequest>>> {
        let Some(corpus) = WalkCorpus::build(self.tokenizer, self.vocab, self.ranges.input.1)?
        else {
            return Ok(None);
        };
        let seams = SeamFitter::new(self.tokenizer, &corpus, prefix)?;
        let fitter = Fitter::new(self.tokenizer, self.vocab, prefix);
        let requests: Vec<SampleRequest> = (0..self.cfg.num_prompts)
            .into_par_iter()
            .map(|i| {
                let mut plan = self.plan(i);
                let start = (plan.offset + i) % corpus.cycle();
                let text = match seams.fit(start, plan.input_len)? {
                    Some(text) => text,
                    None => {
                        fitter
                            .fit(plan.offset + i, plan.input_len, &mut plan.rng)?
                            .text
                    }
                };
                let len = prefix.ids.len() + plan.input_len;
                Ok(plan.finish(self.cfg, i, Prompt::Text(text.into()), len))
            })
            .collect::<Result<_>>()?;
        Ok(self.spot_check(prefix, &requests)?.then_some(requests))
    }

    /// Re-encodes a sample of the prompts in full: exact length, the prefix's ids first, no
    /// control token.
    fn spot_check(&self, prefix: &Fitted, requests: &[SampleRequest]) -> Result<bool> {
        let n = requests.len();
        let samples = SPOT_CHECKS.min(n);
        let bad = (0..samples)
            .into_par_iter()
            .map(|k| k * n / samples)
            .map(|i| {
                let Prompt::Text(text) = &requests[i].prompt else {
                    return Ok(false);
                };
                let ids = self.tokenizer.encode(text, false)?;
                Ok(ids.len() != requests[i].prompt_len
                    || !ids.starts_with(&prefix.ids)
                    || ids.iter().any(|&id| self.vocab.is_forbidden(id)))
            })
            .collect::<Result<Vec<bool>>>()?;
        Ok(!bad.contains(&true))
    }
}

/// Stream id of the shared prefix (request streams use their index).
const PREFIX_STREAM: u64 = u64::MAX;

/// The RNG of stream `index` under `seed`: independent of thread count and order.
fn stream(seed: u64, index: u64) -> StdRng {
    StdRng::seed_from_u64(splitmix64(seed ^ splitmix64(index.wrapping_add(0x5EED))))
}

/// SplitMix64's finaliser: spreads nearby seeds/indices over the whole `u64` range.
fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The random draws of one request, in a fixed order on its own stream.
struct Plan {
    rng: StdRng,
    input_len: usize,
    output_len: usize,
    offset: usize,
}

impl Plan {
    fn draw(seed: u64, index: usize, ranges: &LengthRanges, vocab_size: usize) -> Self {
        let mut rng = stream(seed, index as u64);
        let input_len = rng.random_range(ranges.input.0..=ranges.input.1);
        let output_len = rng.random_range(ranges.output.0..=ranges.output.1);
        let offset = rng.random_range(0..vocab_size.max(1));
        Self {
            rng,
            input_len,
            output_len,
            offset,
        }
    }

    fn finish(
        self,
        cfg: &RandomConfig,
        index: usize,
        prompt: Prompt,
        prompt_len: usize,
    ) -> SampleRequest {
        SampleRequest {
            prompt,
            prompt_len,
            expected_output_len: self.output_len,
            request_id: cfg
                .request_id_prefix
                .as_ref()
                .map(|p| format!("{p}{index}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranges(input_len: usize, output_len: usize, r: f64, num_special: usize) -> LengthRanges {
        let cfg = RandomConfig {
            input_len,
            output_len,
            range_ratio: RangeRatio::both(r),
            ..Default::default()
        };
        LengthRanges::new(&cfg, num_special).unwrap()
    }

    #[test]
    fn bounds_follow_python_floor_ceil_and_special_deduction() {
        assert_eq!(
            ranges(1024, 128, 0.0, 0),
            LengthRanges {
                input: (1024, 1024),
                output: (128, 128)
            }
        );
        // floor(100·0.75) = 75, ceil(100·1.25) = 125; input deducts one BOS first.
        assert_eq!(
            ranges(101, 100, 0.25, 1),
            LengthRanges {
                input: (75, 125),
                output: (75, 125)
            }
        );
        // ceil(7·1.3) = ceil(9.1) = 10, floor(7·0.7) = floor(4.9) = 4.
        assert_eq!(ranges(7, 7, 0.3, 0).input, (4, 10));
        // Output never samples 0.
        assert_eq!(ranges(20, 1, 0.9, 0).output, (1, 2));
        assert_eq!(ranges(10, 0, 0.0, 0).output, (1, 1));
    }

    #[test]
    fn input_and_output_ratios_bound_their_own_lengths() {
        let cfg = RandomConfig {
            input_len: 100,
            output_len: 100,
            range_ratio: RangeRatio {
                input: 0.25,
                output: 0.5,
            },
            ..Default::default()
        };
        assert_eq!(
            LengthRanges::new(&cfg, 0).unwrap(),
            LengthRanges {
                input: (75, 125),
                output: (50, 150)
            }
        );
        // Python's float products: ceil(100·1.1) = ceil(110.00000000000001) = 111.
        let cfg = RandomConfig {
            range_ratio: RangeRatio::both(0.1),
            ..cfg
        };
        assert_eq!(LengthRanges::new(&cfg, 0).unwrap().input, (90, 111));
    }

    #[test]
    fn each_ratio_is_checked_by_its_key() {
        let check = |input, output| RangeRatio { input, output }.check();
        assert_eq!(check(0.0, 0.99), Ok(()));
        assert_eq!(check(1.0, 1.0), Err(RatioOutOfRange(None)));
        assert_eq!(check(1.0, 0.5), Err(RatioOutOfRange(Some("input"))));
        assert_eq!(check(0.5, -0.1), Err(RatioOutOfRange(Some("output"))));
        assert_eq!(check(f64::NAN, f64::NAN), Err(RatioOutOfRange(None)));
        let cfg = |input, output| RandomConfig {
            range_ratio: RangeRatio { input, output },
            ..Default::default()
        };
        let err = |c: RandomConfig| LengthRanges::new(&c, 0).unwrap_err().to_string();
        assert_eq!(
            err(cfg(0.3, 1.0)),
            r#"--random-range-ratio {"input": 0.3, "output": 1}: "output" must be in [0, 1)"#
        );
        assert_eq!(
            err(cfg(1.0, 1.0)),
            "--random-range-ratio 1: must be in [0, 1)"
        );
    }

    #[test]
    fn request_streams_are_distinct_and_reproducible() {
        let a: u64 = stream(0, 0).random();
        assert_eq!(a, stream(0, 0).random::<u64>());
        assert_ne!(a, stream(0, 1).random::<u64>());
        assert_ne!(a, stream(1, 0).random::<u64>());
        assert_ne!(a, stream(0, PREFIX_STREAM).random::<u64>());
    }
}
