//! Several replicas of one model in one run (`--base-url` repeated, docs/servers.md "Several
//! replicas"): which replica each session goes to, decided before the clock as part of the
//! workload, and the ready check that waits for every replica.
//!
//! Spreading: with `round-robin` session `i` (in the one-process schedule order, so every
//! `--shard` agrees) goes to replica `i mod R`; with `session`, sessions whose first prompts
//! (as the dataset produced them, not the request bodies) start alike ([`prompt_key`]) form a
//! group, and the groups are dealt round-robin in order of first appearance, so a shared
//! prompt prefix stays in one replica's prefix cache. Either way a session (a multi-turn conversation, a
//! trace chain) never leaves its replica: its later turns reuse its earlier ones' cache.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Result};

use std::hash::{Hash, Hasher};

use crate::config::Config;
use crate::datasets::Prompt;
use crate::engine::Workload;
use crate::types::ReplicaAffinity;

use crate::control_plane::retry_until_ready;

/// The replica table of `workload` for the run's servers (`None` with one server).
/// `prompt_keys` holds each session's [`prompt_key`] (aligned with `workload.requests`), for
/// `--replica-affinity session`; without them every session is its own group.
pub fn table(
    config: &Config,
    workload: &Workload,
    prompt_keys: Option<&[u64]>,
) -> Option<Arc<[u16]>> {
    let replicas = 1 + config.server.more_replicas.len();
    (replicas > 1).then(|| {
        let sessions = workload.requests.len();
        let keys = match config.server.replica_affinity {
            ReplicaAffinity::Session => prompt_keys.filter(|k| k.len() == sessions),
            ReplicaAffinity::RoundRobin => None,
        };
        assign(sessions, keys, replicas).into()
    })
}

/// Whether the run needs [`prompt_key`]s (several replicas, `--replica-affinity session`):
/// the preparation computes them only then.
pub fn wants_prompt_keys(config: &Config) -> bool {
    !config.server.more_replicas.is_empty()
        && config.server.replica_affinity == ReplicaAffinity::Session
}

/// How much of a session's first prompt decides its group with `--replica-affinity session`:
/// the first 256 bytes of its text (about 50 tokens), or its first 64 token ids; enough to
/// tell apart prompts that share no prefix, short enough to fall inside a shared one.
pub const AFFINITY_PREFIX_BYTES: usize = 256;
const AFFINITY_PREFIX_TOKENS: usize = AFFINITY_PREFIX_BYTES / 4;

/// The group key of a prompt as the dataset produced it: the start of the prompt itself,
/// not of the request body, whose first bytes differ by backend (`max_tokens` comes before
/// Anthropic's `messages`) and by per-request fields.
pub fn prompt_key(prompt: &Prompt) -> u64 {
    match prompt {
        Prompt::Text(t) => text_key(t),
        Prompt::TokenIds(ids) => key_of(&ids[..ids.len().min(AFFINITY_PREFIX_TOKENS)]),
        Prompt::Texts(ts) => ts.first().map_or(0, |t| text_key(t)),
        Prompt::Chat(c) => text_key(&c.messages.to_string()),
    }
}

/// [`prompt_key`] of a text prompt (a conversation's first user turn).
pub fn text_key(text: &str) -> u64 {
    let b = text.as_bytes();
    key_of(&b[..b.len().min(AFFINITY_PREFIX_BYTES)])
}

/// [`prompt_key`] of a trace record rebuilt from prefix blocks: its first block's hash id
/// (the blocks are the trace's own statement of what prompts share), or, without hash ids,
/// a key of its own (`unique`, e.g. the record's index).
pub fn block_key(hash_ids: &[u64], unique: u64) -> u64 {
    match hash_ids.first() {
        Some(first) => key_of(&(0u8, *first)),
        None => key_of(&(1u8, unique)),
    }
}

/// A fixed hash (std's SipHash with its fixed keys): every `--shard` computes the same.
fn key_of(value: &(impl Hash + ?Sized)) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    value.hash(&mut h);
    h.finish()
}

/// The replica of each of `sessions` sessions, decided before the clock: by group of
/// `keys` (groups dealt round-robin in order of first appearance) when given, else session
/// `i` on replica `i mod replicas`.
pub fn assign(sessions: usize, keys: Option<&[u64]>, replicas: usize) -> Vec<u16> {
    let r = replicas.clamp(1, usize::from(u16::MAX));
    match keys {
        None => (0..sessions).map(|i| (i % r) as u16).collect(),
        Some(keys) => {
            let mut groups: std::collections::HashMap<u64, u16> = Default::default();
            keys.iter()
                .map(|&key| {
                    let next = (groups.len() % r) as u16;
                    *groups.entry(key).or_insert(next)
                })
                .collect()
        }
    }
}

/// Waits until every replica has answered one real request (`--ready-check-timeout-sec`),
/// asking again every 5 s the replicas that have not: `send_each` sends one request to each
/// replica of the list it is given and returns those that failed, with the error. A replica
/// still silent at the deadline is named in the error (one line), so a run never starts with
/// part of the deployment down. Returns early once `stopped()` holds.
pub fn wait_until_all_ready(
    timeout: Duration,
    urls: &[String],
    mut send_each: impl FnMut(&[usize]) -> Result<Vec<(usize, String)>>,
    stopped: impl Fn() -> bool,
) -> Result<()> {
    let mut waiting: Vec<usize> = (0..urls.len()).collect();
    let attempt = || {
        let failed = send_each(&waiting)?;
        if failed.is_empty() {
            return Ok::<_, anyhow::Error>(None);
        }
        waiting = failed.iter().map(|(r, _)| *r).collect();
        Ok(Some(failed))
    };
    let Some(failed) = retry_until_ready(timeout, attempt, stopped)? else {
        return Ok(());
    };
    let missing: Vec<String> = failed
        .iter()
        .map(|(r, e)| format!("{} ({e})", urls[*r]))
        .collect();
    bail!(
        "{} of {} replicas not ready after {}s: {}; raise --ready-check-timeout-sec, start \
         them, or leave them out of --base-url",
        missing.len(),
        urls.len(),
        timeout.as_secs(),
        missing.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_affinity_keeps_a_shared_prompt_prefix_on_one_replica() {
        let shared = "x".repeat(300);
        let keys: Vec<u64> = [
            format!("{shared}1"),
            "other".into(),
            format!("{shared}2"),
            "third".into(),
        ]
        .iter()
        .map(|t| prompt_key(&Prompt::Text(t.as_str().into())))
        .collect();
        assert_eq!(assign(4, Some(&keys), 2), [0, 1, 0, 0]);
        assert_eq!(assign(4, None, 2), [0, 1, 0, 1]);
        assert_eq!(assign(4, Some(&keys), 3), [0, 1, 0, 2]);
        let ids = |first: u32| Prompt::TokenIds((first..first + 100).collect::<Vec<u32>>().into());
        assert_eq!(prompt_key(&ids(0)), prompt_key(&ids(0)));
        assert_ne!(prompt_key(&ids(0)), prompt_key(&ids(1)));
        assert_eq!(block_key(&[7, 8], 0), block_key(&[7, 9], 1));
        assert_ne!(block_key(&[], 0), block_key(&[], 1));
    }

    #[test]
    fn a_replica_that_never_answers_is_named_when_the_wait_ends() {
        let urls = ["http://a:1".to_string(), "http://b:2".to_string()];
        let mut asked = Vec::new();
        let err = wait_until_all_ready(
            Duration::ZERO,
            &urls,
            |which| {
                asked.push(which.to_vec());
                Ok(vec![(1, "connection refused".into())])
            },
            || false,
        )
        .unwrap_err()
        .to_string();
        assert_eq!(asked, [vec![0, 1]]);
        assert!(
            err.starts_with("1 of 2 replicas not ready after 0s: http://b:2 (connection refused)"),
            "{err}"
        );
    }
}
