//! This run's figures from one endpoint's scrapes over the measured window: a server's
//! counters and histograms are cumulative since it started, so a run's share is the
//! difference between the last scrape and the first; its gauges are levels, so a run's
//! figure is their spread over the samples.

use std::collections::BTreeMap;
use std::time::Instant;

use super::exposition::{Histogram, Scrape};

/// One scrape and when it was answered.
#[derive(Debug, Clone)]
pub struct Sample {
    pub at: Instant,
    pub scrape: Scrape,
}

/// A gauge over the samples taken during the run (the first scrape, before the run, and the
/// last, after it, see an idle server and would pull the mean towards zero). NaN figures
/// when no sample fell inside the run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GaugeStats {
    pub min: f64,
    pub mean: f64,
    pub max: f64,
    /// How many samples the figures are of.
    pub samples: usize,
}

/// Fewer samples inside the run than this say too little about a level to show it: a short
/// run scraped every second has one or two, which may all fall between its requests.
pub const MIN_GAUGE_SAMPLES: usize = 3;

impl GaugeStats {
    /// Whether there are enough samples to show the figures (see [`MIN_GAUGE_SAMPLES`]).
    pub fn is_enough(&self) -> bool {
        self.samples >= MIN_GAUGE_SAMPLES
    }
}

/// One percentile of a histogram: the bucket the rank falls in and, where the buckets allow
/// it, the value interpolated inside that bucket.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quantile {
    /// The bucket `(lower, upper]` the rank falls in (`upper` infinite for the overflow
    /// bucket); `None` when not known (a result file of an older vllm-bench).
    pub bucket: Option<(f64, f64)>,
    /// Linear interpolation inside the bucket (Prometheus' `histogram_quantile`), kept only
    /// where it does not contradict the server's exact mean (see [`interpolation_holds`]);
    /// exactly 0 when every observation was 0.
    pub value: Option<f64>,
}

/// A histogram's share of the window: count and sum deltas (the mean is exact), and
/// percentiles no finer than the server's buckets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HistogramDelta {
    pub count: f64,
    pub sum: f64,
    pub p50: Option<Quantile>,
    pub p90: Option<Quantile>,
    pub p99: Option<Quantile>,
}

impl HistogramDelta {
    /// The mean observation (`sum / count`), when there was one.
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0.0).then(|| self.sum / self.count)
    }
}

/// A cumulative series that went down in the window: the server restarted (or reset it), so
/// no delta is reported for it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WentDown {
    /// The value before the drop, and after it.
    pub from: f64,
    pub to: f64,
}

/// The gauges' values at each sample, for plots and the result file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Series {
    /// Seconds since the run started (the first scrape, before it, is at or below zero).
    pub t: Vec<f64>,
    /// Per gauge, its value at each `t` (`None` where that scrape lacked it).
    pub gauges: BTreeMap<String, Vec<Option<f64>>>,
    /// Per GPU-labelled counter or gauge (a DCGM exporter's), per GPU, its value at each
    /// `t` (`None` where that scrape lacked it).
    pub per_gpu: BTreeMap<String, BTreeMap<super::exposition::Gpu, Vec<Option<f64>>>>,
}

/// One endpoint's figures for the window.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Figures {
    /// Counter deltas, by family name without `_total`.
    pub counters: BTreeMap<String, f64>,
    /// Counters and histograms that went down (left out of `counters` and `histograms`).
    pub went_down: BTreeMap<String, WentDown>,
    pub gauges: BTreeMap<String, GaugeStats>,
    pub histograms: BTreeMap<String, HistogramDelta>,
    /// `vllm:prefix_cache_hits` delta / `vllm:prefix_cache_queries` delta.
    pub prefix_cache_hit_rate: Option<f64>,
    pub series: Series,
}

impl Series {
    /// The values of the first of `names` the samples have.
    pub fn gauge(&self, names: &[&str]) -> Option<&[Option<f64>]> {
        names
            .iter()
            .find_map(|n| self.gauges.get(*n))
            .map(Vec::as_slice)
    }
}

impl Figures {
    /// The first of `names` that is a gauge of the window.
    pub fn gauge(&self, names: &[&str]) -> Option<&GaugeStats> {
        names.iter().find_map(|n| self.gauges.get(*n))
    }
}

/// vLLM's prefix-cache counters (tokens).
pub const PREFIX_CACHE_HITS: &str = "vllm:prefix_cache_hits";
pub const PREFIX_CACHE_QUERIES: &str = "vllm:prefix_cache_queries";

impl Figures {
    /// The figures of `samples` (in scrape order; the first taken before the run, the last
    /// after it), with times relative to `epoch` (the run's start). `None` with fewer than
    /// two samples: no window.
    pub fn of(samples: &[Sample], epoch: Instant) -> Option<Figures> {
        let (first, last) = (samples.first()?, samples.last()?);
        if samples.len() < 2 {
            return None;
        }
        let mut f = Figures::default();
        for name in last.scrape.counters.keys() {
            // A series the first scrape lacks counts from zero (it appeared in the window);
            // a later scrape that lacks it says nothing about it.
            let start = first.scrape.counters.get(name).copied().unwrap_or(0.0);
            let later = samples[1..]
                .iter()
                .filter_map(|s| s.scrape.counters.get(name).copied());
            match increase(std::iter::once(start).chain(later)) {
                Ok(d) => f.counters.insert(name.clone(), d).map(drop),
                Err(w) => f.went_down.insert(name.clone(), w).map(drop),
            };
        }
        for (name, end) in &last.scrape.histograms {
            let start = first.scrape.histograms.get(name).map_or(0.0, |h| h.count);
            let later = samples[1..]
                .iter()
                .filter_map(|s| s.scrape.histograms.get(name).map(|h: &Histogram| h.count));
            if let Err(w) = increase(std::iter::once(start).chain(later)) {
                f.went_down.insert(name.clone(), w);
                continue;
            }
            let start = first.scrape.histograms.get(name);
            f.histograms
                .insert(name.clone(), histogram_delta(start, end));
        }
        let mut series = Series::default();
        for s in samples {
            series.t.push(seconds_since(epoch, s.at));
        }
        let names: std::collections::BTreeSet<&String> = samples
            .iter()
            .flat_map(|s| s.scrape.gauges.keys())
            .collect();
        for name in names {
            let values: Vec<Option<f64>> = samples
                .iter()
                .map(|s| s.scrape.gauges.get(name).copied())
                .collect();
            // The samples taken during the run: all but the first and the last.
            let during = &values[1..values.len() - 1];
            let seen: Vec<f64> = during.iter().flatten().copied().collect();
            let stats = if seen.is_empty() {
                GaugeStats {
                    min: f64::NAN,
                    mean: f64::NAN,
                    max: f64::NAN,
                    samples: 0,
                }
            } else {
                GaugeStats {
                    min: seen.iter().copied().fold(f64::INFINITY, f64::min),
                    max: seen.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                    mean: seen.iter().sum::<f64>() / seen.len() as f64,
                    samples: seen.len(),
                }
            };
            f.gauges.insert(name.clone(), stats);
            series.gauges.insert(name.clone(), values);
        }
        for s in samples {
            for (name, gpus) in &s.scrape.per_gpu {
                for gpu in gpus.keys() {
                    series
                        .per_gpu
                        .entry(name.clone())
                        .or_default()
                        .entry(gpu.clone())
                        .or_insert_with(|| {
                            samples
                                .iter()
                                .map(|s| s.scrape.per_gpu.get(name)?.get(gpu).copied())
                                .collect()
                        });
                }
            }
        }
        f.series = series;
        f.prefix_cache_hit_rate = match (
            f.counters.get(PREFIX_CACHE_HITS),
            f.counters.get(PREFIX_CACHE_QUERIES),
        ) {
            (Some(h), Some(&q)) if q > 0.0 => Some(h / q),
            _ => None,
        };
        Some(f)
    }
}

/// `at - epoch` in seconds, negative before it.
fn seconds_since(epoch: Instant, at: Instant) -> f64 {
    match at.checked_duration_since(epoch) {
        Some(d) => d.as_secs_f64(),
        None => -(epoch - at).as_secs_f64(),
    }
}

/// The increase of a cumulative series (last - first), or its first drop.
fn increase(mut values: impl Iterator<Item = f64>) -> Result<f64, WentDown> {
    let Some(first) = values.next() else {
        return Ok(0.0);
    };
    let mut prev = first;
    for v in values {
        if v < prev {
            return Err(WentDown { from: prev, to: v });
        }
        prev = v;
    }
    Ok(prev - first)
}

fn histogram_delta(start: Option<&Histogram>, end: &Histogram) -> HistogramDelta {
    // Both bucket lists ascend by bound: one walk pairs them (a search per bucket would be
    // quadratic in a hostile server's bucket count).
    let mut before = start.map_or(&[][..], |s| &s.buckets[..]).iter().peekable();
    let buckets: Vec<(f64, f64)> = end
        .buckets
        .iter()
        .map(|&(le, c)| {
            while before.next_if(|b| b.0 < le).is_some() {}
            let c0 = before.next_if(|b| b.0 == le).map_or(0.0, |b| b.1);
            (le, (c - c0).max(0.0))
        })
        .collect();
    let (c0, s0) = start.map_or((0.0, 0.0), |s| (s.count, s.sum));
    let (count, sum) = (end.count - c0, end.sum - s0);
    let all_zero = count > 0.0 && sum == 0.0;
    let holds = all_zero || interpolation_holds(&buckets, count, sum);
    let q = |p| {
        let (bucket, value) = quantile_in(&buckets, p)?;
        // Every observation zero (a server without a queue): exactly zero, not half a bucket.
        let value = if all_zero {
            Some(0.0)
        } else {
            value.filter(|_| holds)
        };
        Some(Quantile {
            bucket: Some(bucket),
            value,
        })
    };
    HistogramDelta {
        count,
        sum,
        p50: q(0.5),
        p90: q(0.9),
        p99: q(0.99),
    }
}

/// How far the server's mean may sit from the mean the interpolation assumes (every
/// observation at its bucket's middle), as a share of the room the buckets leave it (the
/// mean of the buckets' widths).
pub const INTERPOLATION_TOLERANCE: f64 = 0.25;

/// Whether interpolating inside the buckets agrees with the server's exact mean
/// (`sum / count`). Interpolation assumes observations spread evenly over their bucket, so
/// it implies a mean at the buckets' middles; when the real mean is far from it (every
/// prefill 20 ms in a (0, 300 ms] bucket: middle 150 ms) the interpolated percentiles are
/// invented, and only the bucket is known. Observations in the overflow bucket have no
/// middle: nothing can be checked, so nothing is interpolated.
pub fn interpolation_holds(buckets: &[(f64, f64)], count: f64, sum: f64) -> bool {
    if !(count > 0.0 && sum.is_finite()) {
        return false;
    }
    let (mut middle, mut width, mut below) = (0.0, 0.0, 0.0);
    let mut lower = None;
    for &(le, cum) in buckets {
        let inside = cum - below;
        if inside > 0.0 {
            if le.is_infinite() {
                return false;
            }
            let lo = lower.unwrap_or(if le > 0.0 { 0.0 } else { le });
            middle += inside * (lo + le) / 2.0;
            width += inside * (le - lo);
        }
        below = cum;
        lower = Some(le);
    }
    if below <= 0.0 {
        return false;
    }
    let (model, room, mean) = (middle / below, width / below, sum / count);
    (mean - model).abs() <= INTERPOLATION_TOLERANCE * room
}

/// Prometheus' `histogram_quantile` over cumulative `(le, count)` buckets: linear inside the
/// bucket the rank falls in; a rank in the `+Inf` bucket gives the highest finite bound.
pub fn quantile(buckets: &[(f64, f64)], q: f64) -> Option<f64> {
    quantile_in(buckets, q).and_then(|(bucket, value)| value.or(Some(bucket.0)))
}

/// The bucket `(lower, upper]` the rank `q` falls in and the value interpolated inside it
/// (`None` in the `+Inf` bucket, which has no upper bound to interpolate to).
fn quantile_in(buckets: &[(f64, f64)], q: f64) -> Option<((f64, f64), Option<f64>)> {
    let total = buckets.last()?.1;
    if total <= 0.0 || !total.is_finite() {
        return None;
    }
    let rank = q * total;
    let i = buckets.iter().position(|b| b.1 >= rank)?;
    let (le, cum) = buckets[i];
    let (lower, below) = match i.checked_sub(1) {
        Some(j) => buckets[j],
        None => (if le > 0.0 { 0.0 } else { le }, 0.0),
    };
    if le.is_infinite() {
        // No finite bound below it either: nothing is known.
        return i.checked_sub(1).map(|_| ((lower, le), None));
    }
    let inside = cum - below;
    if inside <= 0.0 {
        return Some(((lower, le), Some(le)));
    }
    let value = lower + (le - lower) * (rank - below) / inside;
    Some(((lower, le), Some(value)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn sample(at: Instant, counters: &[(&str, f64)], gauges: &[(&str, f64)]) -> Sample {
        let mut scrape = Scrape::default();
        for (k, v) in counters {
            scrape.counters.insert(k.to_string(), *v);
        }
        for (k, v) in gauges {
            scrape.gauges.insert(k.to_string(), *v);
        }
        Sample { at, scrape }
    }

    #[test]
    fn counters_are_deltas_and_a_drop_is_reported_not_subtracted() {
        let t0 = Instant::now();
        let s = [
            sample(
                t0,
                &[
                    ("a", 100.0),
                    ("b", 50.0),
                    (PREFIX_CACHE_QUERIES, 1000.0),
                    (PREFIX_CACHE_HITS, 10.0),
                ],
                &[("g", 1.0)],
            ),
            sample(
                t0 + Duration::from_secs(1),
                &[("a", 130.0), ("b", 2.0)],
                &[("g", 5.0)],
            ),
            sample(
                t0 + Duration::from_secs(2),
                &[
                    ("a", 160.0),
                    ("b", 7.0),
                    ("new", 3.0),
                    (PREFIX_CACHE_QUERIES, 1400.0),
                    (PREFIX_CACHE_HITS, 110.0),
                ],
                &[("g", 3.0)],
            ),
        ];
        let f = Figures::of(&s, t0 + Duration::from_secs(1)).unwrap();
        assert_eq!(f.counters["a"], 60.0);
        assert_eq!(
            f.counters["new"], 3.0,
            "a series that appeared counts from zero"
        );
        assert!(!f.counters.contains_key("b"));
        assert_eq!(
            f.went_down["b"],
            WentDown {
                from: 50.0,
                to: 2.0
            }
        );
        // The middle scrape lacked the prefix counters: it says nothing about them.
        assert_eq!(f.prefix_cache_hit_rate, Some(0.25));
        // Gauges are of the samples during the run: the first and last are outside it.
        assert_eq!(
            f.gauges["g"],
            GaugeStats {
                min: 5.0,
                mean: 5.0,
                max: 5.0,
                samples: 1
            }
        );
        assert!(!f.gauges["g"].is_enough());
        assert_eq!(f.series.t, [-1.0, 0.0, 1.0]);
        assert_eq!(f.series.gauges["g"], [Some(1.0), Some(5.0), Some(3.0)]);
    }

    #[test]
    fn hit_rate_is_hits_delta_over_queries_delta() {
        let t0 = Instant::now();
        let s = [
            sample(
                t0,
                &[(PREFIX_CACHE_QUERIES, 1000.0), (PREFIX_CACHE_HITS, 900.0)],
                &[],
            ),
            sample(
                t0,
                &[(PREFIX_CACHE_QUERIES, 1400.0), (PREFIX_CACHE_HITS, 1000.0)],
                &[],
            ),
        ];
        assert_eq!(
            Figures::of(&s, t0).unwrap().prefix_cache_hit_rate,
            Some(0.25)
        );
        assert!(
            Figures::of(&s[..1], t0).is_none(),
            "one sample is no window"
        );
    }

    #[test]
    fn quantiles_interpolate_inside_buckets() {
        let b = [(0.1, 10.0), (0.5, 30.0), (1.0, 40.0), (f64::INFINITY, 40.0)];
        assert_eq!(quantile(&b, 0.25), Some(0.1 * 10.0 / 10.0));
        let p50 = quantile(&b, 0.5).unwrap();
        assert!((p50 - 0.3).abs() < 1e-12, "{p50}");
        assert_eq!(quantile(&b, 1.0), Some(1.0));
        let overflow = [(0.1, 1.0), (f64::INFINITY, 10.0)];
        assert_eq!(
            quantile(&overflow, 0.99),
            Some(0.1),
            "the highest finite bound"
        );
        assert_eq!(quantile(&[(0.1, 0.0), (f64::INFINITY, 0.0)], 0.5), None);
    }

    #[test]
    fn histogram_deltas_subtract_the_first_scrape() {
        let t0 = Instant::now();
        let h = |c1: f64, c2: f64, sum: f64| Histogram {
            buckets: vec![(0.1, c1), (f64::INFINITY, c2)],
            count: c2,
            sum,
        };
        let mut a = sample(t0, &[], &[]);
        a.scrape.histograms.insert("h".into(), h(5.0, 10.0, 2.0));
        let mut b = sample(t0, &[], &[]);
        b.scrape.histograms.insert("h".into(), h(9.0, 14.0, 2.2));
        let f = Figures::of(&[a, b], t0).unwrap();
        let d = f.histograms["h"];
        assert_eq!(d.count, 4.0);
        assert!((d.sum - 0.2).abs() < 1e-12);
        let p50 = d.p50.unwrap();
        assert_eq!(p50.bucket, Some((0.0, 0.1)));
        assert_eq!(p50.value, Some(0.05));
    }

    /// The window of two scrapes of one histogram: `(le, cumulative)` bucket deltas.
    fn delta(buckets: &[(f64, f64)], sum: f64) -> HistogramDelta {
        let t0 = Instant::now();
        let count = buckets.last().unwrap().1;
        let mut a = sample(t0, &[], &[]);
        let empty = buckets.iter().map(|&(le, _)| (le, 0.0)).collect();
        let h = |buckets, count, sum| Histogram {
            buckets,
            count,
            sum,
        };
        a.scrape.histograms.insert("h".into(), h(empty, 0.0, 0.0));
        let mut b = sample(t0, &[], &[]);
        b.scrape
            .histograms
            .insert("h".into(), h(buckets.to_vec(), count, sum));
        Figures::of(&[a, b], t0).unwrap().histograms["h"]
    }

    /// vLLM 0.33's prefill-time buckets (seconds), cumulative counts of `per_bucket`.
    fn vllm_prefill(per_bucket: &[f64]) -> Vec<(f64, f64)> {
        let bounds = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, f64::INFINITY];
        let mut cum = 0.0;
        bounds
            .iter()
            .zip(per_bucket.iter().chain(std::iter::repeat(&0.0)))
            .map(|(&le, &n)| {
                cum += n;
                (le, cum)
            })
            .collect()
    }

    #[test]
    fn prefill_p50_of_150_ms_when_every_prefill_took_20_ms_is_a_bucket_not_a_number() {
        // Issue 36: `prefill mean/p50/p99 20.00 / 150.00 / 297.00`: 24 prefills of 20 ms, all
        // in the (0, 300 ms] bucket. Interpolation puts them at 150 ms; the mean says 20.
        let d = delta(&vllm_prefill(&[24.0]), 24.0 * 0.020);
        assert!((d.mean().unwrap() - 0.020).abs() < 1e-12);
        for q in [d.p50, d.p90, d.p99] {
            let q = q.unwrap();
            assert_eq!(q.bucket, Some((0.0, 0.3)));
            assert_eq!(q.value, None, "no invented figure: {q:?}");
        }
    }

    #[test]
    fn ttft_p50_below_the_mean_inside_one_bucket_is_a_bucket_not_a_number() {
        // Issue 36: `Server TTFT 20.00 / 15.00 / 19.90`: every TTFT just under 20 ms, in
        // vLLM's (10 ms, 20 ms] bucket.
        let b = [
            (0.001, 0.0),
            (0.005, 0.0),
            (0.01, 0.0),
            (0.02, 50.0),
            (0.04, 50.0),
        ];
        let mut b = b.to_vec();
        b.push((f64::INFINITY, 50.0));
        let d = delta(&b, 50.0 * 0.01998);
        let p50 = d.p50.unwrap();
        assert_eq!((p50.bucket, p50.value), (Some((0.01, 0.02)), None));
    }

    #[test]
    fn a_spread_consistent_with_the_mean_is_interpolated() {
        // 40 observations spread evenly over (0.3, 0.5] and (0.5, 0.8]: the mean sits at the
        // buckets' middles, so interpolation holds.
        let d = delta(&vllm_prefill(&[0.0, 20.0, 20.0]), 20.0 * 0.4 + 20.0 * 0.65);
        let p50 = d.p50.unwrap();
        assert_eq!(p50.bucket, Some((0.3, 0.5)));
        assert_eq!(p50.value, Some(0.5));
        let p99 = d.p99.unwrap();
        assert_eq!(p99.bucket, Some((0.5, 0.8)));
        assert!((p99.value.unwrap() - 0.794).abs() < 1e-9, "{p99:?}");
        // An observation past the last bound: no middle to check, no interpolation.
        let d = delta(
            &vllm_prefill(&[0.0, 20.0, 20.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]),
            22.0,
        );
        let p50 = d.p50.unwrap();
        assert_eq!((p50.bucket, p50.value), (Some((0.5, 0.8)), None));
        let p99 = d.p99.unwrap();
        assert_eq!((p99.bucket, p99.value), (Some((10.0, f64::INFINITY)), None));
    }

    #[test]
    fn a_queue_that_never_waited_is_exactly_zero() {
        let d = delta(&vllm_prefill(&[5.0]), 0.0);
        assert_eq!(d.p99.unwrap().value, Some(0.0));
    }

    #[test]
    fn histogram_deltas_pair_buckets_by_bound_in_one_walk() {
        // The first scrape lacks a bound the last has (a bucket appeared): it counts from 0.
        let t0 = Instant::now();
        let mut a = sample(t0, &[], &[]);
        a.scrape.histograms.insert(
            "h".into(),
            Histogram {
                buckets: vec![(0.1, 1.0), (0.2, 1.0), (f64::INFINITY, 2.0)],
                count: 2.0,
                sum: 0.1,
            },
        );
        let mut b = sample(t0, &[], &[]);
        b.scrape.histograms.insert(
            "h".into(),
            Histogram {
                buckets: vec![(0.05, 0.0), (0.1, 3.0), (0.2, 5.0), (f64::INFINITY, 6.0)],
                count: 6.0,
                sum: 0.5,
            },
        );
        // Deltas: (0.05, 0), (0.1, 2), (0.2, 4), (+Inf, 4).
        let d = Figures::of(&[a, b], t0).unwrap().histograms["h"];
        assert_eq!(d.count, 4.0);
        assert_eq!(d.p50.unwrap().bucket, Some((0.05, 0.1)));
        assert_eq!(d.p99.unwrap().bucket, Some((0.1, 0.2)));
    }
}
