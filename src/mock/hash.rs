//! Stable, seedable hashing and pseudo-randomness for the mock server.
//!
//! Everything the mock decides "at random" (faults, jitter, embedding values, rerank
//! scores, response ids) must be reproducible from the configured seed and a request's
//! sequence number, across runs, machines and Rust versions. So this module owns two tiny,
//! fully specified primitives instead of `std`'s unspecified `DefaultHasher` or a crate's
//! version-dependent generator:
//! - [`Fnv64`]: FNV-1a 64-bit, used for prompt hashes, toy token ids and prefix blocks;
//! - [`SplitMix64`]: the splitmix64 generator, used for every seeded random draw.

pub use crate::mix::{fnv64, Fnv64};
use crate::mix::{mix64, GAMMA};

/// splitmix64: a tiny, well-mixed generator whose output is fixed by its seed.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator for the stream identified by `(seed, stream)`: one stream per request
    /// sequence number, so a request's draws do not depend on other requests.
    pub fn new(seed: u64, stream: u64) -> Self {
        let mut g = SplitMix64(seed ^ stream.wrapping_mul(GAMMA));
        // Decorrelate neighbouring seeds/streams before the first real draw.
        g.next_u64();
        g
    }

    /// Next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GAMMA);
        mix64(self.0)
    }

    /// Uniform in `[0, 1)` with 53 bits of precision.
    #[inline]
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `[-1, 1)`.
    #[inline]
    pub fn next_signed_unit(&mut self) -> f64 {
        self.next_f64() * 2.0 - 1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_matches_reference_vectors() {
        // Published FNV-1a 64 test vectors.
        assert_eq!(fnv64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn splitmix_is_deterministic_per_stream() {
        let draws = |seed, stream| {
            let mut g = SplitMix64::new(seed, stream);
            [g.next_u64(), g.next_u64(), g.next_u64()]
        };
        assert_eq!(draws(7, 3), draws(7, 3));
        assert_ne!(draws(7, 3), draws(7, 4));
        assert_ne!(draws(7, 3), draws(8, 3));
    }

    #[test]
    fn unit_draws_stay_in_range() {
        let mut g = SplitMix64::new(1, 1);
        for _ in 0..10_000 {
            let x = g.next_f64();
            assert!((0.0..1.0).contains(&x));
            let y = g.next_signed_unit();
            assert!((-1.0..1.0).contains(&y));
        }
    }
}
