//! Whether the measured runs of one invocation (a sweep's points, `--num-runs`
//! repetitions, SLO probes) measured their workload or the server's prefix cache of an
//! earlier one.
//!
//! Each run after the first sends prompts of its own ([`super::sweep_prompts::point_seed`]), so the
//! share of prompt tokens the server finds cached is the sharing the workload itself has
//! (`--random-prefix-len`, a trace's repeated blocks, the warm-ups), however high. A run
//! that re-sent prompts of an earlier one (`--same-prompts`, or a dataset whose prompts do
//! not change with the seed) and whose cached share is [`EXCESS`] or more above the first
//! run's was answered from the cache of the earlier one: its TTFT reads low and the
//! capacity it suggests is inflated. Both halves are evidence: the client knows which
//! prompts it sent before (a hash of each request's bytes), the server's own
//! `vllm:prefix_cache_{hits,queries}` over each run (the scrape, `crate::server_metrics`)
//! say what the cache answered. Without the counters, or after `--reset-prefix-cache`,
//! there is nothing to say. Said once per invocation: one line is enough to act on.

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};

use crate::http::request::PreparedRequest;
use crate::server_metrics::{window, ServerMetrics};

/// How far (a share of the prompt tokens, absolute) a run's cached share may exceed the
/// first run's before it is said: run-to-run noise of a workload's own sharing is a few
/// points; a re-sent prompt set is most of its tokens.
pub const EXCESS: f64 = 0.2;

/// Prompt tokens the server looked up in its prefix cache over one run, and found there,
/// summed over the endpoints that export vLLM's counters (every replica's).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CachedShare {
    pub hits: f64,
    pub queries: f64,
}

impl CachedShare {
    /// `None` when no endpoint exported both counters or none was queried.
    pub fn of(m: &ServerMetrics) -> Option<CachedShare> {
        let (mut hits, mut queries, mut seen) = (0.0, 0.0, false);
        for e in &m.endpoints {
            let c = &e.figures.counters;
            if let (Some(h), Some(q)) = (
                c.get(window::PREFIX_CACHE_HITS),
                c.get(window::PREFIX_CACHE_QUERIES),
            ) {
                (hits, queries, seen) = (hits + h, queries + q, true);
            }
        }
        (seen && queries > 0.0).then_some(CachedShare { hits, queries })
    }

    pub fn share(self) -> f64 {
        self.hits / self.queries
    }
}

/// The runs seen so far, the prompts they sent, and whether the warning was given.
#[derive(Debug, Clone)]
pub struct CacheWatch {
    /// A hash of every request an earlier run sent.
    sent: HashSet<u64>,
    /// The first run's share: what the workload's own sharing gives.
    first: Option<CachedShare>,
    /// `--same-prompts`: the fix named is dropping it.
    same_prompts: bool,
    /// `--reset-prefix-cache`: each run starts from an empty cache; nothing to watch.
    reset: bool,
    runs: usize,
    warned: bool,
}

impl CacheWatch {
    pub fn new(same_prompts: bool, reset_prefix_cache: bool) -> CacheWatch {
        CacheWatch {
            sent: HashSet::new(),
            first: None,
            same_prompts,
            reset: reset_prefix_cache,
            runs: 0,
            warned: false,
        }
    }

    /// Takes one run: the requests it sent and the server's metrics over it (`what` names
    /// the run: `sweep point 2 (max_concurrency = 4)`); the warning to print, at most once
    /// per watch. Between runs, never inside one: hashing the requests reads their bytes.
    pub fn observe(
        &mut self,
        what: &str,
        sent: &[PreparedRequest],
        m: &ServerMetrics,
    ) -> Option<String> {
        let share = CachedShare::of(m);
        let keys: Vec<u64> = sent.iter().map(key).collect();
        let re_sent = keys.iter().filter(|k| self.sent.contains(k)).count();
        self.sent.extend(keys);
        self.runs += 1;
        if self.runs == 1 {
            self.first = share;
            return None;
        }
        let (first, now) = (self.first?, share?);
        if self.reset || self.warned || re_sent == 0 || now.share() < first.share() + EXCESS {
            return None;
        }
        self.warned = true;
        let fix = if self.same_prompts {
            "--same-prompts re-sends the earlier runs' prompts: drop it to give every run \
             prompts of its own, or add --reset-prefix-cache (vLLM needs \
             VLLM_SERVER_DEV_MODE=1)"
        } else {
            "this dataset's prompts do not change with the seed, so every run re-sends them: \
             add --reset-prefix-cache (vLLM needs VLLM_SERVER_DEV_MODE=1), or give the \
             dataset more prompts than one run sends"
        };
        Some(format!(
            "{what}: {re_sent} of its {} requests were sent by an earlier run, and the server \
             answered {:.0} % of its prompt tokens from its prefix cache ({} of {} tokens, \
             vllm:prefix_cache_hits/queries) against {:.0} % in the first run: its latencies \
             are those of cached prompts, not of this workload; {fix}",
            sent.len(),
            now.share() * 100.0,
            now.hits,
            now.queries,
            first.share() * 100.0,
        ))
    }
}

/// A request's identity across runs: a hash of its bytes.
fn key(r: &PreparedRequest) -> u64 {
    let mut h = DefaultHasher::new();
    for part in r.parts.iter() {
        part.hash(&mut h);
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server_metrics::{EndpointMetrics, Figures};

    /// `n` requests, numbered from `from`.
    fn requests(from: usize, n: usize) -> Vec<PreparedRequest> {
        (from..from + n)
            .map(|i| PreparedRequest {
                parts: vec![bytes::Bytes::from(format!("prompt {i}"))].into(),
            })
            .collect()
    }

    fn scraped(hits: f64, queries: f64) -> ServerMetrics {
        let mut figures = Figures::default();
        figures
            .counters
            .insert(window::PREFIX_CACHE_HITS.into(), hits);
        figures
            .counters
            .insert(window::PREFIX_CACHE_QUERIES.into(), queries);
        ServerMetrics {
            endpoints: vec![EndpointMetrics {
                url: "http://127.0.0.1:1/metrics".into(),
                scrapes: 2,
                failed: 0,
                figures,
            }],
            notes: Vec::new(),
        }
    }

    #[test]
    fn a_later_run_answered_from_the_cache_of_an_earlier_one_is_said_once() {
        let mut w = CacheWatch::new(true, false);
        let first = w.observe("sweep point 1", &requests(0, 4), &scraped(12.0, 512.0));
        assert_eq!(first, None);
        let line = w
            .observe(
                "sweep point 2 (max_concurrency = 4)",
                &requests(0, 8),
                &scraped(504.0, 1024.0),
            )
            .expect("49 % cached against 2 %, 4 requests re-sent: said");
        assert!(
            line.starts_with(
                "sweep point 2 (max_concurrency = 4): 4 of its 8 requests were sent by an \
                 earlier run, and the server answered 49 % of its prompt tokens from its \
                 prefix cache (504 of 1024 tokens"
            ),
            "{line}"
        );
        assert!(line.contains("against 2 % in the first run"), "{line}");
        assert!(line.contains("drop it"), "{line}");
        let third = w.observe("sweep point 3", &requests(0, 16), &scraped(2000.0, 2048.0));
        assert_eq!(third, None, "once per invocation");
    }

    #[test]
    fn a_workload_that_shares_its_own_prefixes_is_not_said() {
        // Every run shares 60 % by design (a long common prefix): not the cache of an
        // earlier run.
        let mut w = CacheWatch::new(false, false);
        assert_eq!(
            w.observe("run 1", &requests(0, 4), &scraped(600.0, 1000.0)),
            None
        );
        assert_eq!(
            w.observe("run 2", &requests(4, 4), &scraped(650.0, 1000.0)),
            None
        );
        // A larger point of a workload that shares within itself (4 prompts on 4 prefixes,
        // then 100 on the same 4): a high share, but nothing re-sent, so nothing to say.
        assert_eq!(
            w.observe("run 3", &requests(8, 100), &scraped(960.0, 1000.0)),
            None
        );
        // After --reset-prefix-cache, or without the counters, there is nothing to say.
        let mut reset = CacheWatch::new(false, true);
        reset.observe("run 1", &requests(0, 4), &scraped(0.0, 1000.0));
        let again = reset.observe("run 2", &requests(0, 4), &scraped(900.0, 1000.0));
        assert_eq!(again, None);
        let mut blind = CacheWatch::new(false, false);
        blind.observe("run 1", &requests(0, 4), &ServerMetrics::default());
        let again = blind.observe("run 2", &requests(0, 4), &scraped(900.0, 1000.0));
        assert_eq!(again, None);
    }

    #[test]
    fn fresh_prompts_that_hit_anyway_name_the_dataset_as_the_cause() {
        let mut w = CacheWatch::new(false, false);
        w.observe("run 1", &requests(0, 4), &scraped(0.0, 1000.0));
        let line = w
            .observe("run 2", &requests(0, 4), &scraped(990.0, 1000.0))
            .unwrap();
        assert!(
            line.contains("prompts do not change with the seed"),
            "{line}"
        );
    }
}
