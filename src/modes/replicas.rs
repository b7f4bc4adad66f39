//! Several replicas of one model in one run (`--base-url` repeated, docs/servers.md "Several
//! replicas"): which replica each session goes to, decided before the clock as part of the
//! workload, and the ready check that waits for every replica.
//!
//! Spreading: with `round-robin` session `i` (in the one-process schedule order, so every
//! `--shard` agrees) goes to replica `i mod R`; with `session`, sessions whose first
//! requests' bodies start with the same [`AFFINITY_PREFIX_BYTES`] bytes form a group, and the
//! groups are dealt round-robin in order of first appearance, so a shared prompt prefix
//! stays in one replica's prefix cache. Either way a session (a multi-turn conversation, a
//! trace chain) never leaves its replica: its later turns reuse its earlier ones' cache.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use crate::config::Config;
use crate::engine::Workload;
use crate::http::request::PreparedRequest;
use crate::types::ReplicaAffinity;

/// The replica table of `workload` for the run's servers (`None` with one server).
pub fn table(config: &Config, workload: &Workload) -> Option<Arc<[u16]>> {
    let replicas = 1 + config.server.more_replicas.len();
    (replicas > 1)
        .then(|| assign(&workload.requests, replicas, config.server.replica_affinity).into())
}

/// How much of a session's first request body decides its group with
/// `--replica-affinity session`: about 50 tokens of prompt after the JSON keys before it, enough to
/// tell apart prompts that share no prefix and short enough to fall inside a shared one.
pub const AFFINITY_PREFIX_BYTES: usize = 256;

/// The replica of every session of `requests` (session `i`'s first request is
/// `requests[i]`), decided before the clock.
pub fn assign(
    requests: &[PreparedRequest],
    replicas: usize,
    affinity: ReplicaAffinity,
) -> Vec<u16> {
    let r = replicas.clamp(1, usize::from(u16::MAX));
    match affinity {
        ReplicaAffinity::RoundRobin => (0..requests.len()).map(|i| (i % r) as u16).collect(),
        ReplicaAffinity::Session => {
            let mut groups: std::collections::HashMap<Vec<u8>, u16> = Default::default();
            requests
                .iter()
                .map(|req| {
                    let key = body_prefix(req, AFFINITY_PREFIX_BYTES);
                    let next = (groups.len() % r) as u16;
                    *groups.entry(key).or_insert(next)
                })
                .collect()
        }
    }
}

/// The first `n` bytes of a request's body (after the head's blank line), across parts.
fn body_prefix(req: &PreparedRequest, n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n);
    let mut in_body = false;
    for part in req.parts.iter() {
        let bytes: &[u8] = if in_body {
            part
        } else {
            match memchr::memmem::find(part, b"\r\n\r\n") {
                Some(at) => {
                    in_body = true;
                    &part[at + 4..]
                }
                None => continue,
            }
        };
        let take = (n - out.len()).min(bytes.len());
        out.extend_from_slice(&bytes[..take]);
        if out.len() == n {
            break;
        }
    }
    out
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
    let deadline = Instant::now() + timeout;
    let mut waiting: Vec<usize> = (0..urls.len()).collect();
    loop {
        let failed = send_each(&waiting)?;
        if failed.is_empty() {
            return Ok(());
        }
        waiting = failed.iter().map(|(r, _)| *r).collect();
        let retry = Instant::now() + Duration::from_secs(5);
        loop {
            if stopped() {
                return Ok(());
            }
            let now = Instant::now();
            if now >= deadline {
                let missing: Vec<String> = failed
                    .iter()
                    .map(|(r, e)| format!("{} ({e})", urls[*r]))
                    .collect();
                bail!(
                    "{} of {} replicas not ready after {}s: {}; raise --ready-check-timeout-sec, \
                     start them, or leave them out of --base-url",
                    missing.len(),
                    urls.len(),
                    timeout.as_secs(),
                    missing.join(", ")
                );
            }
            if now >= retry {
                break;
            }
            // In slices, so a stop is seen within one.
            std::thread::sleep(Duration::from_millis(50).min(deadline - now));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::request::{HeadTemplate, Method};

    #[test]
    fn session_affinity_keeps_a_shared_prefix_on_one_replica() {
        let head = HeadTemplate::new(Method::Post, "/", "h", &[]);
        let body = |p: &str| format!("{{\"prompt\":\"{p}\"}}");
        let shared = "x".repeat(300);
        let reqs: Vec<_> = [
            body(&format!("{shared}1")),
            body("other"),
            body(&format!("{shared}2")),
            body("third"),
        ]
        .iter()
        .enumerate()
        .map(|(i, b)| head.build(Some(&i.to_string()), None, b.as_bytes()))
        .collect();
        assert_eq!(assign(&reqs, 2, ReplicaAffinity::Session), [0, 1, 0, 0]);
        assert_eq!(assign(&reqs, 2, ReplicaAffinity::RoundRobin), [0, 1, 0, 1]);
        assert_eq!(assign(&reqs, 3, ReplicaAffinity::Session), [0, 1, 0, 2]);
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
