//! Deterministic token ids for trace blocks and request tails.
//!
//! A trace gives no text, only "block `h` of `chunk` tokens". We turn every block into token
//! ids with a fixed splitmix64 stream, so the ids are a pure function of (hash id, chunk size,
//! vocabulary): identical on every run and machine. Python salts `hash(str)` per process
//! (`PYTHONHASHSEED`), so its prompts change between runs; ours never do.
//!
//! Token `p` of a block is drawn from the `p`-th value of the block's stream, so a block cut
//! short (the last block of a prompt) is exactly a prefix of the full block: records sharing
//! a leading run of hash ids share those tokens even when one of them ends inside the block.
//!
//! Tokens past the last hash id (a trace that gives too few ids, or none: Azure, BurstGPT)
//! come from a stream seeded by the record's index in the file, so they are unique to the
//! request and still reproducible.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

use super::TraceError;

pub(crate) use crate::mix::mix64;
use crate::mix::GAMMA;
/// Domain constants keep block streams and tail streams apart.
const BLOCK_DOMAIN: u64 = 0x7472_6163_652d_626c; // "trace-bl"
const TAIL_DOMAIN: u64 = 0x7472_6163_652d_746c; // "trace-tl"

/// The `p`-th value of the splitmix64 stream that starts at `seed`.
fn stream_value(seed: u64, p: u64) -> u64 {
    mix64(seed.wrapping_add(p.wrapping_add(1).wrapping_mul(GAMMA)))
}

/// Seed of the stream of block `hash_id` when blocks are `chunk` tokens long.
pub(crate) fn block_seed(hash_id: u64, chunk: u32) -> u64 {
    mix64(mix64(BLOCK_DOMAIN.wrapping_add(u64::from(chunk))) ^ hash_id)
}

/// Seed of the stream of the unique tail of the record at file index `index`.
pub(crate) fn tail_seed(index: u64) -> u64 {
    mix64(TAIL_DOMAIN ^ mix64(index))
}

/// Hashes `u64` keys (hash ids, prefix-chain keys) with the splitmix64 mixer: no
/// per-process salt needed, and much cheaper than SipHash.
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = mix64(self.0 ^ u64::from(b));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = mix64(n);
    }
}

/// A map keyed by `u64` ids.
pub(crate) type IdMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;
/// A set of `u64` ids.
pub(crate) type IdSet = HashSet<u64, BuildHasherDefault<IdHasher>>;

/// The token ids a prompt may use: `0..vocab_size` without the special ids.
#[derive(Debug, Clone)]
pub struct TokenSpace {
    allowed: Box<[u32]>,
    vocab_size: u32,
}

impl TokenSpace {
    /// Builds the space from the tokenizer's vocabulary size and its special token ids
    /// (ids at or above `vocab_size` are ignored). Errors when nothing is left.
    pub fn new(vocab_size: u32, special_ids: &[u32]) -> Result<Self, TraceError> {
        let mut special: Vec<u32> = special_ids.to_vec();
        special.sort_unstable();
        let allowed: Box<[u32]> = (0..vocab_size)
            .filter(|id| special.binary_search(id).is_err())
            .collect();
        if allowed.is_empty() {
            return Err(TraceError::Option(format!(
                "vocabulary of {vocab_size} ids has no usable token once the {} special ids \
                 are removed; check the tokenizer's vocab size",
                special.len()
            )));
        }
        Ok(Self {
            allowed,
            vocab_size,
        })
    }

    /// The vocabulary size the space was built from.
    pub fn vocab_size(&self) -> u32 {
        self.vocab_size
    }

    /// How many ids prompts draw from.
    pub fn len(&self) -> usize {
        self.allowed.len()
    }

    /// Never true: construction rejects an empty space.
    pub fn is_empty(&self) -> bool {
        self.allowed.is_empty()
    }

    /// Maps a 64-bit random value to an allowed id (Lemire's multiply-shift: no division,
    /// bias below 2^-40 for any real vocabulary).
    fn pick(&self, r: u64) -> u32 {
        let i = ((u128::from(r) * self.allowed.len() as u128) >> 64) as usize;
        self.allowed[i]
    }

    /// Token `p` of the stream `seed`.
    pub(crate) fn token(&self, seed: u64, p: u64) -> u32 {
        self.pick(stream_value(seed, p))
    }

    /// Tokens `from..from+len` of the stream `seed`, appended to `out`.
    pub(crate) fn extend(&self, seed: u64, from: u64, len: u64, out: &mut Vec<u32>) {
        out.extend((from..from + len).map(|p| self.token(seed, p)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixer_is_splitmix64() {
        // First output of splitmix64 seeded with 0 (reference value of the published
        // algorithm): a change of constants is caught here.
        assert_eq!(stream_value(0, 0), 0xE220_A839_7B1D_CDAF);
    }

    #[test]
    fn space_excludes_special_ids() {
        let space = TokenSpace::new(8, &[0, 3, 99]).unwrap();
        assert_eq!(&*space.allowed, &[1, 2, 4, 5, 6, 7]);
        for r in [0, u64::MAX, 1 << 63, 12345] {
            assert!(![0, 3].contains(&space.pick(r)));
        }
        assert_eq!(space.pick(0), 1);
        assert_eq!(space.pick(u64::MAX), 7);
    }

    #[test]
    fn empty_space_is_an_error() {
        let err = TokenSpace::new(2, &[0, 1]).unwrap_err().to_string();
        assert!(err.contains("no usable token"), "{err}");
    }

    #[test]
    fn block_and_tail_streams_differ() {
        assert_ne!(block_seed(7, 16), block_seed(7, 32));
        assert_ne!(block_seed(7, 16), tail_seed(7));
        assert_ne!(tail_seed(1), tail_seed(2));
    }
}
