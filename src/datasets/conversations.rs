//! Conversations for multi-turn runs: per conversation, the user message of every turn and
//! the output length asked for it. The assistant messages are not here: a run sends back
//! the answers the server really streamed, never recorded ones.
//!
//! Synthetic conversations ([`synthetic`]) take their user messages from the random
//! dataset's generator (exact token lengths, `--seed`-deterministic): the first turns with
//! `--random-input-len` (and its range ratio and prefix), the later ones with
//! `--per-turn-input-len`. In prefix-sharing mode every turn is one fixed-length message,
//! a prefix shared by all conversations, then one shared within the conversation, then a
//! unique part, sent without the history.

use std::sync::Arc;

use anyhow::{bail, Result};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::random::{self, RandomConfig, RandomParams, RangeRatio};
use super::{Prompt, SampleRequest, Sampling};
use crate::tokenizer::Tokenizer;

/// One user turn of a conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct UserTurn {
    pub text: Arc<str>,
    /// Tokens of `text` as the client counted them.
    pub prompt_len: usize,
    /// The output-token limit of the turn's request.
    pub output_len: usize,
}

/// One conversation: its id (the `X-Session-ID` of its requests) and its user turns.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    pub id: String,
    pub turns: Vec<UserTurn>,
}

/// What a turn's request holds besides its own user message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum History {
    /// Every earlier user message and the real answers (the default).
    Full,
    /// Nothing: each turn is sent alone (prefix-sharing mode).
    None,
}

/// The conversations of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversations {
    pub list: Vec<Conversation>,
    pub history: History,
}

impl Conversations {
    /// Requests planned: one per turn.
    pub fn total_turns(&self) -> usize {
        self.list.iter().map(|c| c.turns.len()).sum()
    }
}

/// Where `--multi-turn` takes its conversations from, as the configuration decided and
/// validated it (`--dataset-name random` or `sharegpt`). What a sweep's points and
/// repetitions change (the count, the seed, the ids) is not here: [`SyntheticOptions::of`]
/// and [`ShareGptConversationOptions::of`] add the run's [`Sampling`].
#[derive(Debug, Clone, PartialEq)]
pub enum ConversationParams {
    Synthetic(SyntheticParams),
    ShareGpt(ShareGptConversationParams),
}

/// The flags of synthetic conversations.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntheticParams {
    /// The random dataset's flags (first turns, output lengths, range ratio).
    pub random: RandomParams,
    /// Turns per conversation, inclusive (`--multi-turn-min/max-turns`, 0 meaning
    /// `--multi-turn-num-turns`, already resolved).
    pub turns: (usize, usize),
    /// `--per-turn-input-len` (0 = the first turn's).
    pub per_turn_input_len: usize,
    /// `--multi-turn-prefix-global-ratio`, `--multi-turn-prefix-conversation-ratio`.
    pub prefix_ratios: (f64, f64),
}

/// The flags of ShareGPT conversations.
#[derive(Debug, Clone, PartialEq)]
pub struct ShareGptConversationParams {
    /// `--multi-turn-min-turns` (0 = no minimum).
    pub min_turns: usize,
    /// `--multi-turn-max-turns` (0 = uncapped).
    pub max_turns: usize,
    /// `--sharegpt-output-len`.
    pub output_len: Option<usize>,
}

/// Flags of synthetic conversations.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntheticOptions {
    /// `--num-prompts`: conversations.
    pub conversations: usize,
    /// Turns per conversation, drawn uniformly (seeded) from this inclusive range.
    pub turns: (usize, usize),
    /// `--random-input-len`, `--random-output-len`, `--random-prefix-len`,
    /// `--random-range-ratio` and `--seed` (num_prompts is ignored).
    pub random: RandomConfig,
    /// `--per-turn-input-len`: input tokens of turns after the first (0 = the first's).
    pub per_turn_input_len: usize,
    /// `--multi-turn-prefix-global-ratio` and `--multi-turn-prefix-conversation-ratio`;
    /// either above 0 selects prefix-sharing mode.
    pub prefix_ratios: (f64, f64),
    /// `--request-id-prefix`: conversation `c` is `{prefix}conv-{c}`.
    pub id_prefix: String,
}

impl SyntheticOptions {
    /// What one run generates: the flags `p` with the run's count (conversations), seed and
    /// id prefix.
    pub fn of(p: &SyntheticParams, sampling: &Sampling) -> Self {
        Self {
            conversations: sampling.num_requests,
            turns: p.turns,
            // The turns' own counts, seeds and ids replace the run's.
            random: RandomConfig::of(&p.random, sampling, None),
            per_turn_input_len: p.per_turn_input_len,
            prefix_ratios: p.prefix_ratios,
            id_prefix: sampling.request_id_prefix.clone(),
        }
    }
}

/// Seeds of the generator's separate draws, offsets of `--seed`.
const TURN_COUNTS: u64 = 0x7475_726e;
const LATER_TURNS: u64 = 1;
const GLOBAL_PREFIX: u64 = 2;
const CONVERSATION_PREFIXES: u64 = 3;
const FIRST_UNIQUE: u64 = 4;
const LATER_UNIQUE: u64 = 5;

/// Generates synthetic conversations.
pub fn synthetic(opts: &SyntheticOptions, tokenizer: &Tokenizer) -> Result<Conversations> {
    let (lo, hi) = opts.turns;
    if lo == 0 || lo > hi {
        bail!("turns per conversation must be a range of at least 1 (got {lo}..={hi})");
    }
    let mut rng = StdRng::seed_from_u64(opts.random.seed ^ TURN_COUNTS);
    let counts: Vec<usize> = (0..opts.conversations)
        .map(|_| {
            if lo == hi {
                lo
            } else {
                rng.random_range(lo..=hi)
            }
        })
        .collect();
    let ids = (0..opts.conversations).map(|c| format!("{}conv-{c}", opts.id_prefix));
    let (global, conversation) = opts.prefix_ratios;
    let (turns, history) = if global > 0.0 || conversation > 0.0 {
        (
            prefix_sharing_turns(opts, &counts, tokenizer)?,
            History::None,
        )
    } else {
        (accumulating_turns(opts, &counts, tokenizer)?, History::Full)
    };
    let list = ids
        .zip(turns)
        .map(|(id, turns)| Conversation { id, turns })
        .collect();
    Ok(Conversations { list, history })
}

/// `n` random-dataset prompts of `input_len` tokens (their own prefix included) drawn with
/// `seed`.
fn prompts(
    base: &RandomConfig,
    n: usize,
    input_len: usize,
    prefix_len: usize,
    range_ratio: RangeRatio,
    seed: u64,
    tokenizer: &Tokenizer,
) -> Result<Vec<SampleRequest>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    let cfg = RandomConfig {
        num_prompts: n,
        input_len,
        prefix_len,
        range_ratio,
        seed,
        prompt_token_ids: false,
        max_model_len: None,
        request_id_prefix: None,
        ..base.clone()
    };
    Ok(random::sample(&cfg, tokenizer)?.requests)
}

fn text(r: &SampleRequest) -> Arc<str> {
    match &r.prompt {
        Prompt::Text(t) => t.clone(),
        Prompt::TokenIds(_) | Prompt::Texts(_) | Prompt::Chat(_) => {
            unreachable!("conversations are generated as text")
        }
    }
}

fn turn(r: &SampleRequest) -> UserTurn {
    UserTurn {
        text: text(r),
        prompt_len: r.prompt_len,
        output_len: r.expected_output_len,
    }
}

/// The default mode: first turns like the random dataset, later turns with
/// `--per-turn-input-len`.
fn accumulating_turns(
    opts: &SyntheticOptions,
    counts: &[usize],
    tokenizer: &Tokenizer,
) -> Result<Vec<Vec<UserTurn>>> {
    let r = &opts.random;
    let firsts = prompts(
        r,
        counts.len(),
        r.input_len,
        r.prefix_len,
        r.range_ratio,
        r.seed,
        tokenizer,
    )?;
    let later_len = match opts.per_turn_input_len {
        0 => r.input_len,
        n => n,
    };
    let later_n: usize = counts.iter().map(|c| c - 1).sum();
    let seed = r.seed.wrapping_add(LATER_TURNS);
    let mut later = prompts(r, later_n, later_len, 0, r.range_ratio, seed, tokenizer)?.into_iter();
    Ok(counts
        .iter()
        .zip(&firsts)
        .map(|(&n, first)| {
            let mut turns = Vec::with_capacity(n);
            turns.push(turn(first));
            turns.extend(later.by_ref().take(n - 1).map(|r| turn(&r)));
            turns
        })
        .collect())
}

/// Prefix-sharing mode: `[global][conversation][unique]` per turn, lengths from the first
/// turn's input length (so the shared parts are the same bytes in every turn).
fn prefix_sharing_turns(
    opts: &SyntheticOptions,
    counts: &[usize],
    tokenizer: &Tokenizer,
) -> Result<Vec<Vec<UserTurn>>> {
    let r = &opts.random;
    let special = tokenizer.num_special_tokens_to_add();
    let first_len = r.input_len.saturating_sub(special);
    let later_len = match opts.per_turn_input_len {
        0 => first_len,
        n => n.saturating_sub(special),
    };
    let (g, c) = opts.prefix_ratios;
    let global_len = (first_len as f64 * g).floor() as usize;
    let conv_len = (first_len as f64 * c).floor() as usize;
    let shared = global_len + conv_len;
    if first_len <= shared || later_len <= shared {
        bail!(
            "--multi-turn-prefix ratios leave no unique part: the shared prefixes take {shared} \
             of {} tokens per turn; raise --random-input-len / --per-turn-input-len or lower \
             the ratios",
            first_len.min(later_len)
        );
    }
    // Each batch asks for its exact length: the generator subtracts the special tokens.
    let exact = |len: usize| len + special;
    let seed = |k: u64| r.seed.wrapping_add(k);
    let fixed = RangeRatio::default();
    let one = |n, len, k| prompts(r, n, exact(len), 0, fixed, seed(k), tokenizer);
    let global = match global_len {
        0 => None,
        len => one(1, len, GLOBAL_PREFIX)?.first().map(text),
    };
    let conv_prefixes = match conv_len {
        0 => Vec::new(),
        len => one(counts.len(), len, CONVERSATION_PREFIXES)?,
    };
    let firsts = one(counts.len(), first_len - shared, FIRST_UNIQUE)?;
    let later_n: usize = counts.iter().map(|n| n - 1).sum();
    let mut later = one(later_n, later_len - shared, LATER_UNIQUE)?.into_iter();
    let compose = |conv: usize, unique: &SampleRequest| {
        let mut text = String::new();
        text.push_str(global.as_deref().unwrap_or(""));
        if let Some(p) = conv_prefixes.get(conv) {
            text.push_str(&self::text(p));
        }
        text.push_str(&self::text(unique));
        UserTurn {
            text: text.into(),
            prompt_len: shared + unique.prompt_len,
            output_len: unique.expected_output_len,
        }
    };
    Ok(counts
        .iter()
        .enumerate()
        .map(|(conv, &n)| {
            let mut turns = Vec::with_capacity(n);
            turns.push(compose(conv, &firsts[conv]));
            turns.extend(later.by_ref().take(n - 1).map(|u| compose(conv, &u)));
            turns
        })
        .collect())
}

/// Flags of ShareGPT conversations.
#[derive(Debug, Clone, PartialEq)]
pub struct ShareGptConversationOptions {
    /// `--num-prompts`: conversations.
    pub conversations: usize,
    /// `--multi-turn-min-turns` (conversations with fewer turns are skipped; 0 = no minimum).
    pub min_turns: usize,
    /// `--multi-turn-max-turns` (later turns are dropped; 0 = uncapped).
    pub max_turns: usize,
    /// `--sharegpt-output-len`: every turn's output length instead of the recorded answer's.
    pub output_len: Option<usize>,
    /// `--seed`: the order conversations are taken in (unless `shuffle` is false).
    pub seed: u64,
    pub shuffle: bool,
    pub id_prefix: String,
}

impl ShareGptConversationOptions {
    /// What one run loads: the flags `p` with the run's count (conversations), seed, order
    /// and id prefix.
    pub fn of(p: &ShareGptConversationParams, sampling: &Sampling) -> Self {
        Self {
            conversations: sampling.num_requests,
            min_turns: p.min_turns,
            max_turns: p.max_turns,
            output_len: p.output_len,
            seed: sampling.seed,
            shuffle: sampling.shuffle,
            id_prefix: sampling.request_id_prefix.clone(),
        }
    }
}

/// One ShareGPT entry's turns as `(human, recorded answer)` pairs.
type Pairs = Vec<(String, String)>;

#[derive(serde::Deserialize)]
struct RawEntry {
    #[serde(default)]
    conversations: Vec<RawTurn>,
}

#[derive(serde::Deserialize)]
struct RawTurn {
    #[serde(default)]
    from: String,
    #[serde(default)]
    value: String,
}

/// The human→model pairs of an entry, in order: a human message answered by the next
/// message (any other order ends the usable part of the conversation).
fn pairs(turns: Vec<RawTurn>) -> Pairs {
    let mut out = Vec::new();
    let mut it = turns.into_iter();
    while let (Some(q), Some(a)) = (it.next(), it.next()) {
        if q.from != "human" || a.from == "human" {
            break;
        }
        out.push((q.value, a.value));
    }
    out
}

/// ShareGPT conversations with all their turns: each human message is a user turn, each
/// recorded answer gives only the turn's output length (its token count, or
/// `--sharegpt-output-len`); the history a run sends holds the server's real answers.
pub fn sharegpt(
    path: &std::path::Path,
    opts: &ShareGptConversationOptions,
    tokenizer: &Tokenizer,
) -> Result<Conversations, super::DatasetError> {
    use super::DatasetError;
    use rayon::prelude::*;
    let bytes = std::fs::read(path).map_err(|e| DatasetError::file(path, e))?;
    let raw: Vec<RawEntry> = serde_json::from_slice(&bytes).map_err(|e| {
        DatasetError::file(
            path,
            format!("not a ShareGPT JSON list of {{\"conversations\": [...]}}: {e}"),
        )
    })?;
    let min = opts.min_turns.max(1);
    let mut entries: Vec<Pairs> = raw
        .into_iter()
        .map(|e| pairs(e.conversations))
        .filter(|p| p.len() >= min)
        .collect();
    if entries.is_empty() {
        return Err(DatasetError::Unusable(format!(
            "--dataset-path {}: no conversation with at least {min} human/model turn pairs",
            path.display()
        )));
    }
    if opts.shuffle {
        super::pyrandom::PyRandom::new(opts.seed).shuffle(&mut entries);
    }
    entries.truncate(opts.conversations);
    if opts.max_turns > 0 {
        entries.iter_mut().for_each(|p| p.truncate(opts.max_turns));
    }
    let count = |text: &str| tokenizer.count_tokens(text);
    let list = entries
        .into_par_iter()
        .enumerate()
        .map(|(c, pairs)| Conversation {
            id: format!("{}conv-{c}", opts.id_prefix),
            turns: pairs
                .into_iter()
                .map(|(question, answer)| UserTurn {
                    prompt_len: count(&question),
                    output_len: opts.output_len.unwrap_or_else(|| count(&answer).max(1)),
                    text: question.into(),
                })
                .collect(),
        })
        .collect();
    Ok(Conversations {
        list,
        history: History::Full,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sampling() -> Sampling {
        Sampling {
            num_requests: 7,
            seed: 11,
            shuffle: false,
            oversample: true,
            request_id_prefix: "pt3-".into(),
        }
    }

    #[test]
    fn options_take_the_runs_count_seed_and_ids() {
        let random = RandomParams {
            input_len: 40,
            output_len: 8,
            prefix_len: 2,
            range_ratio: RangeRatio::both(0.25),
            batch_size: 1,
            prompt_token_ids: false,
        };
        let p = SyntheticParams {
            random: random.clone(),
            turns: (2, 5),
            per_turn_input_len: 12,
            prefix_ratios: (0.25, 0.0),
        };
        let o = SyntheticOptions::of(&p, &sampling());
        assert_eq!((o.conversations, o.random.seed), (7, 11));
        assert_eq!(o.random, RandomConfig::of(&random, &sampling(), None));
        assert_eq!((o.turns, o.per_turn_input_len), ((2, 5), 12));
        assert_eq!(
            (o.prefix_ratios, o.id_prefix.as_str()),
            ((0.25, 0.0), "pt3-")
        );

        let p = ShareGptConversationParams {
            min_turns: 2,
            max_turns: 0,
            output_len: Some(9),
        };
        let o = ShareGptConversationOptions::of(&p, &sampling());
        assert_eq!((o.conversations, o.seed, o.shuffle), (7, 11, false));
        assert_eq!((o.min_turns, o.max_turns, o.output_len), (2, 0, Some(9)));
        assert_eq!(o.id_prefix, "pt3-");
    }
}
