//! CPython's `random` module, bit for bit: the Mersenne Twister (MT19937) seeded from an
//! integer as `random.seed(n)` does, and the integer methods built on `getrandbits`
//! (`_randbelow`, `shuffle`, `choice`).
//!
//! Why: Python's file datasets (ShareGPT, custom, spec_bench) select and order their samples
//! with the global `random` module (`random.seed(seed)`, `random.shuffle`, `random.choice`).
//! Reproducing Python's benchmark for the same `--seed` needs this exact generator; `rand`'s
//! generators give different streams. Only what those datasets use is here; floats
//! (`random.random()`) are not needed by them.

/// The state of CPython's `random.Random`, after `random.seed(seed)` for an int seed.
#[derive(Clone)]
pub struct PyRandom {
    mt: [u32; N],
    index: usize,
}

const N: usize = 624;
const M: usize = 397;
const MATRIX_A: u32 = 0x9908_b0df;
const UPPER_MASK: u32 = 0x8000_0000;
const LOWER_MASK: u32 = 0x7fff_ffff;

impl PyRandom {
    /// `random.seed(seed)` for a non-negative int: the seed's 32-bit words, least significant
    /// first (at least one word, so 0 is `[0]`), fed to `init_by_array` (CPython's
    /// `random_seed` in `_randommodule.c`).
    pub fn new(seed: u64) -> Self {
        let (lo, hi) = (seed as u32, (seed >> 32) as u32);
        if hi == 0 {
            Self::from_key(&[lo])
        } else {
            Self::from_key(&[lo, hi])
        }
    }

    /// The generator after MT19937's `init_genrand(s)` alone: how numpy's legacy
    /// `RandomState(s)` seeds the same Mersenne Twister ([`super::np_random`]).
    pub(super) fn init_genrand(s: u32) -> Self {
        let mut mt = [0u32; N];
        mt[0] = s;
        for i in 1..N {
            mt[i] = 1_812_433_253u32
                .wrapping_mul(mt[i - 1] ^ (mt[i - 1] >> 30))
                .wrapping_add(i as u32);
        }
        Self { mt, index: N }
    }

    /// MT19937's `init_by_array`, as in CPython.
    fn from_key(key: &[u32]) -> Self {
        let mut r = Self::init_genrand(19_650_218);
        let mt = &mut r.mt;
        let (mut i, mut j) = (1usize, 0usize);
        for _ in 0..N.max(key.len()) {
            mt[i] = (mt[i] ^ (mt[i - 1] ^ (mt[i - 1] >> 30)).wrapping_mul(1_664_525))
                .wrapping_add(key[j])
                .wrapping_add(j as u32);
            i += 1;
            j += 1;
            if i >= N {
                mt[0] = mt[N - 1];
                i = 1;
            }
            if j >= key.len() {
                j = 0;
            }
        }
        for _ in 0..N - 1 {
            mt[i] = (mt[i] ^ (mt[i - 1] ^ (mt[i - 1] >> 30)).wrapping_mul(1_566_083_941))
                .wrapping_sub(i as u32);
            i += 1;
            if i >= N {
                mt[0] = mt[N - 1];
                i = 1;
            }
        }
        mt[0] = 0x8000_0000; // MSB is 1, assuring a non-zero initial array
        r
    }

    fn twist(&mut self) {
        let mt = &mut self.mt;
        for k in 0..N {
            let y = (mt[k] & UPPER_MASK) | (mt[(k + 1) % N] & LOWER_MASK);
            let mag = if y & 1 == 1 { MATRIX_A } else { 0 };
            mt[k] = mt[(k + M) % N] ^ (y >> 1) ^ mag;
        }
        self.index = 0;
    }

    /// The next 32-bit output (`genrand_uint32`).
    pub fn next_u32(&mut self) -> u32 {
        if self.index >= N {
            self.twist();
        }
        let mut y = self.mt[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// `random.getrandbits(k)` for `k <= 64`: 32-bit words filled least significant first,
    /// the last (most significant) word keeping its top `k mod 32` bits.
    pub fn getrandbits(&mut self, k: u32) -> u64 {
        assert!(k <= 64, "getrandbits: at most 64 bits here");
        if k <= 32 {
            return if k == 0 {
                0
            } else {
                u64::from(self.next_u32() >> (32 - k))
            };
        }
        let lo = u64::from(self.next_u32());
        let hi = u64::from(self.next_u32() >> (64 - k));
        lo | (hi << 32)
    }

    /// `random.random()`: 53 random bits as a float in `[0, 1)` (`genrand_res53`).
    pub fn random(&mut self) -> f64 {
        let a = f64::from(self.next_u32() >> 5);
        let b = f64::from(self.next_u32() >> 6);
        (a * 67_108_864.0 + b) * (1.0 / 9_007_199_254_740_992.0)
    }

    /// `random.choices(range(len), k=1)[0]` without weights: `floor(random() * len)`.
    pub fn choices_index(&mut self, len: usize) -> usize {
        (self.random() * len as f64) as usize
    }

    /// `random._randbelow(n)`: `getrandbits(n.bit_length())` until below `n`; 0 for `n == 0`.
    pub fn randbelow(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        let k = 64 - n.leading_zeros();
        loop {
            let r = self.getrandbits(k);
            if r < n {
                return r;
            }
        }
    }

    /// `random.shuffle(x)`: Fisher–Yates from the end.
    pub fn shuffle<T>(&mut self, x: &mut [T]) {
        for i in (1..x.len()).rev() {
            let j = self.randbelow(i as u64 + 1) as usize;
            x.swap(i, j);
        }
    }

    /// `random.choice(seq)`: the index chosen (Python raises on an empty sequence, so `None`).
    pub fn choice_index(&mut self, len: usize) -> Option<usize> {
        (len > 0).then(|| self.randbelow(len as u64) as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `random.seed(0); [random.getrandbits(32) for _ in range(3)]` in CPython 3.11.
    #[test]
    fn seed_zero_matches_cpython() {
        let mut r = PyRandom::new(0);
        let got: Vec<_> = (0..3).map(|_| r.getrandbits(32)).collect();
        assert_eq!(got, [3_626_764_237, 1_654_615_998, 3_255_389_356]);
    }

    #[test]
    fn shuffle_is_a_permutation() {
        let mut v: Vec<u32> = (0..100).collect();
        PyRandom::new(7).shuffle(&mut v);
        let mut sorted = v.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..100).collect::<Vec<_>>());
        assert_ne!(v, sorted);
    }

    #[test]
    fn choice_of_nothing_is_none() {
        assert_eq!(PyRandom::new(1).choice_index(0), None);
        assert_eq!(PyRandom::new(1).choice_index(1), Some(0));
    }
}
