//! A toy prefix cache behind `/metrics`' `vllm:prefix_cache_queries_total` and
//! `vllm:prefix_cache_hits_total`, so clients that scrape those counters see them move.
//!
//! Each model request's prompt becomes toy token ids (see `super::body`), cut into full
//! blocks of 16 ids; block `i`'s key is a hash chained over blocks `0..=i`, so it stands for
//! the whole prefix. A request queries all its prompt tokens; its hits are 16 per leading
//! block whose key was seen before. Keys are remembered server-wide (all workers) up to
//! [`MAX_KEYS`], after which the cache is emptied (a crude eviction) —
//! `POST /reset_prefix_cache` empties it too. Counters only grow (until `reset_stats`).

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, PoisonError};

use super::body::{Digest, BLOCK_TOKENS};

/// Block keys remembered at most.
pub const MAX_KEYS: usize = 1 << 20;

/// The cache and its two counters.
#[derive(Debug, Default)]
pub struct PrefixCache {
    keys: Mutex<HashSet<u64>>,
    queries: AtomicU64,
    hits: AtomicU64,
}

impl PrefixCache {
    /// Looks `prompt` up and remembers its blocks; returns its hits (cached tokens).
    pub fn observe(&self, prompt: &Digest) -> u64 {
        self.queries.fetch_add(prompt.tokens, Relaxed);
        let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        let cached = prompt
            .blocks
            .iter()
            .take_while(|k| keys.contains(k))
            .count();
        if keys.len() + prompt.blocks.len() > MAX_KEYS {
            keys.clear();
        }
        keys.extend(prompt.blocks.iter().skip(cached));
        drop(keys);
        let hits = ((cached * BLOCK_TOKENS) as u64).min(prompt.tokens);
        self.hits.fetch_add(hits, Relaxed);
        hits
    }

    /// Forgets every cached block (counters keep their values).
    pub fn clear(&self) {
        self.keys
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// `(queries, hits)` in tokens.
    pub fn counters(&self) -> (u64, u64) {
        (self.queries.load(Relaxed), self.hits.load(Relaxed))
    }

    /// Zeroes the counters and forgets the blocks.
    pub fn reset(&self) {
        self.clear();
        self.queries.store(0, Relaxed);
        self.hits.store(0, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(blocks: &[u64], tokens: u64) -> Digest {
        Digest {
            tokens,
            hash: 0,
            items: vec![],
            blocks: blocks.to_vec(),
        }
    }

    #[test]
    fn leading_known_blocks_are_hits() {
        let c = PrefixCache::default();
        c.observe(&digest(&[1, 2, 3], 50));
        assert_eq!(c.counters(), (50, 0));
        c.observe(&digest(&[1, 2, 9], 50));
        assert_eq!(c.counters(), (100, 32));
        // Block 3 alone is not a prefix hit: block keys are chained, a miss stops the walk.
        c.observe(&digest(&[7, 3], 40));
        assert_eq!(c.counters(), (140, 32));
        c.clear();
        c.observe(&digest(&[1], 20));
        assert_eq!(c.counters(), (160, 32));
        c.reset();
        assert_eq!(c.counters(), (0, 0));
    }
}
