//! Python-exact statistics: numpy's pairwise `sum`, `mean`, `std` (ddof 0), `median` and
//! linear `percentile`, reproduced bit for bit.
//!
//! Why not the obvious formulas: `vllm bench serve` reports `np.mean`, `np.std`,
//! `np.median` and `np.percentile` of plain Python lists, and users diff our numbers against
//! Python's. Left-to-right summation and the textbook `s[f] + (s[f+1]-s[f]) * g` percentile
//! disagree with numpy in the last bits (see `tests/fixtures/golden/README.md`, "Bit-exact
//! statistics without numpy"), which shows up in the result JSON. So this module follows
//! numpy's evaluation order exactly:
//!
//! - `sum` is `0.0 + pairwise(x)`, numpy's pairwise summation with 8 accumulators over blocks
//!   of at most 128 items;
//! - `mean = sum / n`; `std = sqrt(sum((x - mean)^2) / n)`, both sums pairwise;
//! - `median` averages the middle pair as `(0.0 + a + b) / 2`;
//! - `percentile` uses numpy's "linear" method with its two-sided lerp.
//!
//! An empty input stands for Python's `values or 0` (the scalar 0), so every statistic of an
//! empty slice is `0.0`. Mean and std depend on the order of the values (floating-point sums
//! are not associative), so they take the values in their original order; median and
//! percentile take a sorted slice so one sort serves them all.

/// Largest block numpy sums with its 8-accumulator loop before splitting in two.
const PAIRWISE_BLOCK: usize = 128;

/// Sum of `values` in numpy's order: `0.0 + pairwise(values)`.
pub fn sum(values: &[f64]) -> f64 {
    0.0 + pairwise(0, values.len(), &|i| values[i])
}

/// numpy's `pairwise_sum` over the items `item(lo) .. item(lo + n)`.
///
/// The items come from a closure so `std` can sum squared deviations without allocating a
/// second array of the same length.
fn pairwise<F: Fn(usize) -> f64>(lo: usize, n: usize, item: &F) -> f64 {
    if n < 8 {
        let mut res = 0.0;
        for i in lo..lo + n {
            res += item(i);
        }
        res
    } else if n <= PAIRWISE_BLOCK {
        let mut r: [f64; 8] = std::array::from_fn(|j| item(lo + j));
        let full = n - n % 8;
        let mut i = 8;
        while i < full {
            for (j, acc) in r.iter_mut().enumerate() {
                *acc += item(lo + i + j);
            }
            i += 8;
        }
        let mut res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for k in full..n {
            res += item(lo + k);
        }
        res
    } else {
        let mut n2 = n / 2;
        n2 -= n2 % 8;
        pairwise(lo, n2, item) + pairwise(lo + n2, n - n2, item)
    }
}

/// `np.mean(values or 0)`.
pub fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    sum(values) / values.len() as f64
}

/// `np.std(values or 0)` (population standard deviation, ddof 0).
pub fn std(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let n = values.len() as f64;
    let m = sum(values) / n;
    let squared_deviation = |i: usize| {
        let d = values[i] - m;
        d * d
    };
    ((0.0 + pairwise(0, values.len(), &squared_deviation)) / n).sqrt()
}

/// `np.median(values or 0)` of values already sorted ascending.
pub fn median_sorted(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n == 0 {
        return 0.0;
    }
    let mid = n / 2;
    if n % 2 == 1 {
        sorted[mid]
    } else {
        // numpy takes the mean of the middle pair: a pairwise sum (0.0 + a + b) over 2.
        (0.0 + sorted[mid - 1] + sorted[mid]) / 2.0
    }
}

/// `np.percentile(values or 0, p)` (method "linear") of values already sorted ascending.
///
/// `p` is in percent (0..=100); callers validate it. Out-of-range `p` does not panic: above
/// 100 gives the maximum, below 0 the minimum.
pub fn percentile_sorted(sorted: &[f64], p: f64) -> f64 {
    let n = sorted.len();
    if n == 0 {
        return 0.0;
    }
    let q = p / 100.0;
    let vi = (n - 1) as f64 * q;
    if vi >= (n - 1) as f64 {
        return sorted[n - 1];
    }
    if vi < 0.0 {
        return sorted[0];
    }
    let floor = vi.floor();
    // In range: 0 <= floor < n - 1 (NaN casts to 0 and propagates through `g`).
    let i = floor as usize;
    let g = vi - floor;
    lerp(sorted[i], sorted[i + 1], g)
}

/// numpy's `_lerp`: computed from the nearer end so the result stays within `[a, b]`.
fn lerp(a: f64, b: f64, t: f64) -> f64 {
    let d = b - a;
    if t >= 0.5 {
        b - d * (1.0 - t)
    } else {
        a + d * t
    }
}

/// Total order used for sorting samples (NaN last, like numpy's sort).
pub fn sort_samples(values: &mut [f64]) {
    values.sort_unstable_by(|a, b| a.total_cmp(b));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic, irregular values (a small LCG) so sums are order-sensitive.
    fn samples(n: usize, seed: u64) -> Vec<f64> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((s >> 11) as f64 / (1u64 << 53) as f64) * 0.01 + 1e-4
            })
            .collect()
    }

    /// A direct transcription of numpy's recursion, written independently of `pairwise`
    /// (index arithmetic instead of slices), to pin the block/split structure.
    fn reference_pairwise(x: &[f64], lo: usize, n: usize) -> f64 {
        if n < 8 {
            let mut res = 0.0;
            for v in &x[lo..lo + n] {
                res += v;
            }
            return res;
        }
        if n <= 128 {
            let mut r = [0.0f64; 8];
            r.copy_from_slice(&x[lo..lo + 8]);
            let mut i = 8;
            while i + 8 <= n {
                for (acc, v) in r.iter_mut().zip(&x[lo + i..lo + i + 8]) {
                    *acc += v;
                }
                i += 8;
            }
            let mut res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
            while i < n {
                res += x[lo + i];
                i += 1;
            }
            return res;
        }
        let n2 = n / 2 - (n / 2) % 8;
        reference_pairwise(x, lo, n2) + reference_pairwise(x, lo + n2, n - n2)
    }

    #[test]
    fn small_sums_are_left_to_right() {
        let x = [0.1, 0.2, 0.3, 1e16, -1e16, 0.7, 0.5];
        let mut naive = 0.0;
        for v in x {
            naive += v;
        }
        assert_eq!(sum(&x).to_bits(), naive.to_bits());
    }

    #[test]
    fn blocked_sum_uses_eight_accumulators() {
        // With 9 items, item 8 joins accumulator 0 only after the tree of 8 is reduced:
        // catastrophic cancellation makes the order visible.
        let mut x = vec![1.0; 8];
        x[0] = 1e16;
        x.push(-1e16);
        let expected = ((1e16 + 1.0) + (1.0 + 1.0)) + ((1.0 + 1.0) + (1.0 + 1.0)) + -1e16;
        assert_eq!(sum(&x), expected);
        // Left to right would lose every 1.0 against 1e16.
        assert_ne!(sum(&x), x.iter().fold(0.0, |a, b| a + b));
    }

    #[test]
    fn sums_match_numpy_recursion_on_tricky_sizes() {
        for n in [
            0usize, 1, 7, 8, 9, 15, 16, 17, 127, 128, 129, 130, 255, 256, 257, 1000, 1001, 4099,
        ] {
            let x = samples(n, n as u64 + 3);
            let expected = 0.0 + reference_pairwise(&x, 0, n);
            assert_eq!(sum(&x).to_bits(), expected.to_bits(), "n = {n}");
        }
    }

    #[test]
    fn pairwise_differs_from_naive_on_long_inputs() {
        // Proof that the test above can fail: naive summation disagrees somewhere.
        let differs = (129..400).any(|n| {
            let x = samples(n, 11);
            sum(&x).to_bits() != x.iter().fold(0.0, |a, b| a + b).to_bits()
        });
        assert!(differs);
    }

    #[test]
    fn empty_input_is_scalar_zero() {
        assert_eq!(mean(&[]), 0.0);
        assert_eq!(std(&[]), 0.0);
        assert_eq!(median_sorted(&[]), 0.0);
        assert_eq!(percentile_sorted(&[], 99.0), 0.0);
    }

    #[test]
    fn mean_and_std_of_known_values() {
        let x = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        assert_eq!(mean(&x), 5.0);
        assert_eq!(std(&x), 2.0);
        assert_eq!(std(&[3.0]), 0.0);
    }

    #[test]
    fn median_odd_and_even() {
        assert_eq!(median_sorted(&[1.0, 2.0, 10.0]), 2.0);
        assert_eq!(median_sorted(&[1.0, 2.0, 3.0, 10.0]), 2.5);
        assert_eq!(median_sorted(&[4.0]), 4.0);
    }

    #[test]
    fn percentile_linear_method() {
        let s = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(percentile_sorted(&s, 0.0), 1.0);
        assert_eq!(percentile_sorted(&s, 50.0), 3.0);
        assert_eq!(percentile_sorted(&s, 100.0), 5.0);
        assert_eq!(percentile_sorted(&s, 90.0), 4.6);
        assert_eq!(percentile_sorted(&s, 10.0), 1.4);
        assert_eq!(percentile_sorted(&[7.0], 99.0), 7.0);
        // Out of range does not panic.
        assert_eq!(percentile_sorted(&s, 150.0), 5.0);
        assert_eq!(percentile_sorted(&s, -5.0), 1.0);
    }

    #[test]
    fn lerp_is_computed_from_the_nearer_end() {
        // Values where a + d*g and b - d*(1-g) round differently.
        let (a, b) = (0.1f64, 0.7f64);
        let g = 0.7f64;
        let from_a = a + (b - a) * g;
        let from_b = b - (b - a) * (1.0 - g);
        assert_ne!(from_a.to_bits(), from_b.to_bits());
        assert_eq!(lerp(a, b, g).to_bits(), from_b.to_bits());
        assert_eq!(lerp(a, b, 0.3).to_bits(), (a + (b - a) * 0.3).to_bits());
    }

    #[test]
    fn sort_puts_nan_last() {
        let mut v = [3.0, f64::NAN, 1.0];
        sort_samples(&mut v);
        assert_eq!(v[0], 1.0);
        assert_eq!(v[1], 3.0);
        assert!(v[2].is_nan());
    }
}
