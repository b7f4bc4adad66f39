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
    sum_of(values.len(), values.iter().copied())
}

/// Sum of the `n` values `values` yields, in numpy's order: the same tree as over a slice,
/// the values read once, front to back (numpy's recursion visits them in that order), so a
/// column need not be collected to be summed.
pub fn sum_of(n: usize, values: impl Iterator<Item = f64>) -> f64 {
    let mut values = values;
    0.0 + pairwise(n, &mut values)
}

/// numpy's `pairwise_sum` over the next `n` items of `items`. A missing item (never: the
/// callers count what they pass) reads as 0.
fn pairwise<I: Iterator<Item = f64>>(n: usize, items: &mut I) -> f64 {
    let mut item = || items.next().unwrap_or(0.0);
    if n < 8 {
        let mut res = 0.0;
        for _ in 0..n {
            res += item();
        }
        res
    } else if n <= PAIRWISE_BLOCK {
        let mut r: [f64; 8] = std::array::from_fn(|_| item());
        let full = n - n % 8;
        let mut i = 8;
        while i < full {
            for acc in r.iter_mut() {
                *acc += item();
            }
            i += 8;
        }
        let mut res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for _ in full..n {
            res += item();
        }
        res
    } else {
        let mut n2 = n / 2;
        n2 -= n2 % 8;
        pairwise(n2, items) + pairwise(n - n2, items)
    }
}

/// `np.mean(values or 0)`.
pub fn mean(values: &[f64]) -> f64 {
    mean_std_of(values.len(), || values.iter().copied()).0
}

/// `np.std(values or 0)` (population standard deviation, ddof 0).
pub fn std(values: &[f64]) -> f64 {
    mean_std_of(values.len(), || values.iter().copied()).1
}

/// `np.mean` and `np.std` (ddof 0) of the `n` values `values()` yields, read twice (the
/// deviations need the mean) and never collected; `(0.0, 0.0)` for none.
pub fn mean_std_of<I: Iterator<Item = f64>>(n: usize, values: impl Fn() -> I) -> (f64, f64) {
    if n == 0 {
        return (0.0, 0.0);
    }
    let count = n as f64;
    let m = sum_of(n, values()) / count;
    let squared_deviations = values().map(|x| {
        let d = x - m;
        d * d
    });
    (m, (sum_of(n, squared_deviations) / count).sqrt())
}

/// Where an order statistic of `n` values reads them, by position in ascending order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pick {
    /// No values: Python's `values or 0`.
    Zero,
    At(usize),
    /// numpy's median of an even count: `(0.0 + s[i - 1] + s[i]) / 2`.
    MeanOfPair(usize),
    /// numpy's linear percentile: `s[i]` towards `s[i + 1]` by `g`.
    Lerp(usize, f64),
}

impl Pick {
    /// `np.median` of `n` values.
    pub fn median(n: usize) -> Pick {
        match n {
            0 => Pick::Zero,
            n if n % 2 == 1 => Pick::At(n / 2),
            n => Pick::MeanOfPair(n / 2),
        }
    }

    /// `np.percentile(values, p)` (method "linear") of `n` values. `p` is in percent
    /// (0..=100); callers validate it. Out-of-range `p` does not panic: above 100 gives the
    /// maximum, below 0 the minimum.
    pub fn percentile(n: usize, p: f64) -> Pick {
        if n == 0 {
            return Pick::Zero;
        }
        let q = p / 100.0;
        let vi = (n - 1) as f64 * q;
        if vi >= (n - 1) as f64 {
            return Pick::At(n - 1);
        }
        if vi < 0.0 {
            return Pick::At(0);
        }
        let floor = vi.floor();
        // In range: 0 <= floor < n - 1 (NaN casts to 0 and propagates through `g`).
        let i = (floor as usize).min(n.saturating_sub(2));
        if n == 1 {
            return Pick::At(0);
        }
        Pick::Lerp(i, vi - floor)
    }

    /// The positions it reads.
    pub fn positions(self) -> impl Iterator<Item = usize> {
        let (a, b) = match self {
            Pick::Zero => (None, None),
            Pick::At(i) => (Some(i), None),
            Pick::MeanOfPair(i) => (Some(i - 1), Some(i)),
            Pick::Lerp(i, _) => (Some(i), Some(i + 1)),
        };
        a.into_iter().chain(b)
    }

    /// The statistic, given the value at each position it reads.
    pub fn of(self, at: impl Fn(usize) -> f64) -> f64 {
        match self {
            Pick::Zero => 0.0,
            Pick::At(i) => at(i),
            // numpy takes the mean of the middle pair: a pairwise sum (0.0 + a + b) over 2.
            Pick::MeanOfPair(i) => (0.0 + at(i - 1) + at(i)) / 2.0,
            Pick::Lerp(i, g) => lerp(at(i), at(i + 1), g),
        }
    }
}

/// `np.median(values or 0)` of values already sorted ascending.
pub fn median_sorted(sorted: &[f64]) -> f64 {
    Pick::median(sorted.len()).of(|i| sorted[i])
}

/// `np.percentile(values or 0, p)` (method "linear") of values already sorted ascending
/// (see [`Pick::percentile`]).
pub fn percentile_sorted(sorted: &[f64], p: f64) -> f64 {
    Pick::percentile(sorted.len(), p).of(|i| sorted[i])
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

/// Each of `picks` (all of one count of values) of the values `values()` yields, from one
/// [`select`] of the positions they read.
pub fn picked<I: Iterator<Item = f64>>(values: impl Fn() -> I, picks: &[Pick]) -> Vec<f64> {
    let mut positions: Vec<usize> = picks.iter().flat_map(|p| p.positions()).collect();
    positions.sort_unstable();
    positions.dedup();
    let found = select(values, &positions);
    let at = |i: usize| found[positions.binary_search(&i).unwrap_or(0)];
    picks.iter().map(|pick| pick.of(at)).collect()
}

/// A float as a key whose unsigned order is `f64::total_cmp`'s (NaN last, as sorted).
fn order_key(x: f64) -> u64 {
    let bits = x.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | 1 << 63
    }
}

fn from_order_key(key: u64) -> f64 {
    f64::from_bits(if key >> 63 == 1 {
        key & !(1 << 63)
    } else {
        !key
    })
}

/// Most histograms of 16-bit digits (512 KiB each) one pass of [`select`] keeps; past it,
/// digits of 8 bits (2 KiB), so a long `--metric-percentiles` list costs passes, not memory.
const WIDE_DIGIT_GROUPS: usize = 16;

/// Most values [`select`] copies to pick from (512 KiB): below it, a copy partitioned in
/// place costs less than the radix passes' histograms (512 KiB each, zeroed, most of them
/// fresh pages), which made the end of a short run cost a sixth of its CPU.
const COPY_AT_MOST: usize = 1 << 16;

/// The values at positions `ranks` (each below the count) of the values `values()` yields,
/// as if they were sorted ascending (`total_cmp`: what [`sort_samples`] gives). Exact: every
/// value is counted, as numpy's percentile of every value is. A few values are copied and
/// partitioned ([`partition_select`]); more are never copied ([`radix_select`]): they are a
/// run's inter-token gaps, a billion in an hour-long run, and a copy to sort was once the
/// largest thing the report held.
pub fn select<I: Iterator<Item = f64>>(values: impl Fn() -> I, ranks: &[usize]) -> Vec<f64> {
    let mut few: Vec<f64> = values().take(COPY_AT_MOST + 1).collect();
    if few.len() <= COPY_AT_MOST {
        partition_select(&mut few, ranks)
    } else {
        drop(few);
        radix_select(values, ranks)
    }
}

/// [`select`] over values in hand, reordering them: one `select_nth_unstable` per rank, in
/// rank order, each over the part the previous one left above its rank.
fn partition_select(values: &mut [f64], ranks: &[usize]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..ranks.len()).collect();
    order.sort_unstable_by_key(|&i| ranks[i]);
    let mut found = vec![0.0; ranks.len()];
    let mut settled = 0;
    for i in order {
        let rank = ranks[i];
        let (_, nth, _) = values[settled..].select_nth_unstable_by(rank - settled, f64::total_cmp);
        found[i] = *nth;
        settled = rank;
    }
    found
}

/// [`select`] without copying the values: a radix selection over their order-preserving
/// 64-bit keys, a digit a pass (four passes of 16 bits for a few ranks), each pass reading
/// the values once.
fn radix_select<I: Iterator<Item = f64>>(values: impl Fn() -> I, ranks: &[usize]) -> Vec<f64> {
    // Per rank: its key's bits decided so far (the top `decided` bits), and its rank among
    // the values that share them.
    let mut found: Vec<(u64, usize)> = ranks.iter().map(|&r| (0, r)).collect();
    let mut decided = 0u32;
    while decided < 64 && !found.is_empty() {
        let top = |key: u64| key.checked_shr(64 - decided).unwrap_or(0);
        let mut groups: Vec<u64> = found.iter().map(|&(key, _)| top(key)).collect();
        groups.sort_unstable();
        groups.dedup();
        let bits = if groups.len() <= WIDE_DIGIT_GROUPS {
            16
        } else {
            8
        }
        .min(64 - decided);
        let low = 64 - decided - bits;
        let width = 1usize << bits;
        let digit = |key: u64| ((key >> low) as usize) & (width - 1);
        let mut counts = vec![0u64; groups.len() * width];
        for key in values().map(order_key) {
            let group = match groups.as_slice() {
                [only] if *only == top(key) => 0,
                [_] => continue,
                _ => match groups.binary_search(&top(key)) {
                    Ok(g) => g,
                    Err(_) => continue,
                },
            };
            counts[group * width + digit(key)] += 1;
        }
        for (key, rank) in &mut found {
            let g = groups.binary_search(&top(*key)).unwrap_or(0);
            let mut below = 0u64;
            for (d, &count) in counts[g * width..(g + 1) * width].iter().enumerate() {
                if (*rank as u64) < below + count {
                    *key |= (d as u64) << low;
                    *rank -= below as usize;
                    break;
                }
                below += count;
            }
        }
        decided += bits;
    }
    found
        .into_iter()
        .map(|(key, _)| from_order_key(key))
        .collect()
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
    fn streamed_sums_are_numpy_sums() {
        for n in [0usize, 5, 8, 127, 129, 1001, 4099] {
            let x = samples(n, n as u64 + 5);
            assert_eq!(
                sum_of(n, x.iter().copied()).to_bits(),
                (0.0 + reference_pairwise(&x, 0, n)).to_bits(),
                "n = {n}"
            );
        }
    }

    /// Every rank of every kind of value (duplicates, zeros of both signs, negatives, NaN,
    /// values far apart), against a sort; with enough ranks that a pass falls back to
    /// narrow digits.
    #[test]
    fn selection_finds_what_a_sort_puts_at_each_rank() {
        let mut x = samples(3000, 9);
        x.extend([0.0, -0.0, -1.5, f64::NAN, 1e300, 5e-324, 0.0, x[17], x[17]]);
        let mut sorted = x.clone();
        sort_samples(&mut sorted);
        let ranks: Vec<usize> = (0..x.len()).step_by(7).chain([0, x.len() - 1]).collect();
        let copied = |ranks: &[usize]| partition_select(&mut x.clone(), ranks);
        let radix = |ranks: &[usize]| radix_select(|| x.iter().copied(), ranks);
        for (how, got) in [("copied", copied(&ranks)), ("radix", radix(&ranks))] {
            for (&r, &v) in ranks.iter().zip(&got) {
                assert_eq!(v.to_bits(), sorted[r].to_bits(), "{how}: rank {r}");
            }
        }
        assert_eq!(copied(&[1500, 3]), [sorted[1500], sorted[3]]);
        assert_eq!(radix(&[1500, 3]), [sorted[1500], sorted[3]]);
        assert_eq!(copied(&[3, 3]), [sorted[3], sorted[3]]);
        assert!(select(|| x.iter().copied(), &[]).is_empty());
    }

    /// `select` takes the copy below its limit and the radix above it, the same either way.
    #[test]
    fn selection_is_the_same_on_both_sides_of_the_copy_limit() {
        for n in [COPY_AT_MOST, COPY_AT_MOST + 1] {
            let x = samples(n, 3);
            let mut sorted = x.clone();
            sort_samples(&mut sorted);
            let ranks = [n - 1, 0, n / 2, n * 99 / 100];
            let got = select(|| x.iter().copied(), &ranks);
            let want: Vec<f64> = ranks.iter().map(|&r| sorted[r]).collect();
            assert_eq!(got, want, "n = {n}");
        }
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
