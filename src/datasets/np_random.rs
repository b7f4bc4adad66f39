//! numpy's legacy `RandomState(seed)`, as far as pandas' `DataFrame.sample(n,
//! random_state=seed)` uses it: the same MT19937 as CPython's but seeded with
//! `init_genrand(seed)` (seed < 2³²), bounded integers by masked rejection
//! (`random_interval`), `permutation(n)` (the legacy Fisher–Yates shuffle of `arange(n)`) and
//! `randint(0, n, size)`. Without replacement pandas takes `permutation(n)[:size]`, with
//! replacement `randint(0, n, size)`.
//!
//! Why: Python's BurstGPT dataset picks its rows that way; the same rows need this stream.

use super::pyrandom::PyRandom;

/// `numpy.random.RandomState(seed)`.
pub struct NpRandomState {
    mt: PyRandom,
}

impl NpRandomState {
    /// `None` for a seed numpy refuses (above 2³² − 1).
    pub fn new(seed: u64) -> Option<Self> {
        let seed = u32::try_from(seed).ok()?;
        Some(Self {
            mt: PyRandom::init_genrand(seed),
        })
    }

    /// `random_interval(max)`: uniform in `0..=max` (`max < 2³²` here).
    fn interval(&mut self, max: u32) -> u32 {
        if max == 0 {
            return 0;
        }
        let mask = u32::MAX >> max.leading_zeros();
        loop {
            let v = self.mt.next_u32() & mask;
            if v <= max {
                return v;
            }
        }
    }

    /// `permutation(n)`.
    pub fn permutation(&mut self, n: usize) -> Vec<usize> {
        let mut v: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            let j = self.interval(i as u32) as usize;
            v.swap(i, j);
        }
        v
    }

    /// `randint(0, n, size)` for `1 <= n <= 2³²`.
    pub fn randint(&mut self, n: usize, size: usize) -> Vec<usize> {
        let max = (n - 1) as u32;
        (0..size).map(|_| self.interval(max) as usize).collect()
    }

    /// The row positions of `DataFrame.sample(n=size, random_state=seed,
    /// replace=size > len)` over `len` rows.
    pub fn sample_rows(&mut self, len: usize, size: usize) -> Vec<usize> {
        if size <= len {
            let mut p = self.permutation(len);
            p.truncate(size);
            p
        } else {
            self.randint(len, size)
        }
    }
}
