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

/// A gauge over the window's samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GaugeStats {
    pub min: f64,
    pub mean: f64,
    pub max: f64,
}

/// A histogram's share of the window: count and sum deltas, percentiles interpolated
/// linearly inside the bucket they fall in (as Prometheus' `histogram_quantile`), so no
/// finer than the server's bucket bounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HistogramDelta {
    pub count: f64,
    pub sum: f64,
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p99: Option<f64>,
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
            let seen: Vec<f64> = values.iter().flatten().copied().collect();
            if !seen.is_empty() {
                f.gauges.insert(
                    name.clone(),
                    GaugeStats {
                        min: seen.iter().copied().fold(f64::INFINITY, f64::min),
                        max: seen.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                        mean: seen.iter().sum::<f64>() / seen.len() as f64,
                    },
                );
            }
            series.gauges.insert(name.clone(), values);
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
    let before = |le: f64| {
        start
            .and_then(|s| s.buckets.iter().find(|b| b.0 == le))
            .map_or(0.0, |b| b.1)
    };
    let buckets: Vec<(f64, f64)> = end
        .buckets
        .iter()
        .map(|&(le, c)| (le, (c - before(le)).max(0.0)))
        .collect();
    let (c0, s0) = start.map_or((0.0, 0.0), |s| (s.count, s.sum));
    let (count, sum) = (end.count - c0, end.sum - s0);
    // Every observation zero (a server without a queue): exactly zero, not half a bucket.
    let q = |p| {
        if count > 0.0 && sum == 0.0 {
            Some(0.0)
        } else {
            quantile(&buckets, p)
        }
    };
    HistogramDelta {
        count,
        sum,
        p50: q(0.5),
        p90: q(0.9),
        p99: q(0.99),
    }
}

/// Prometheus' `histogram_quantile` over cumulative `(le, count)` buckets: linear inside the
/// bucket the rank falls in; a rank in the `+Inf` bucket gives the highest finite bound.
pub fn quantile(buckets: &[(f64, f64)], q: f64) -> Option<f64> {
    let total = buckets.last()?.1;
    if total <= 0.0 || !total.is_finite() {
        return None;
    }
    let rank = q * total;
    let i = buckets.iter().position(|b| b.1 >= rank)?;
    let (le, cum) = buckets[i];
    if le.is_infinite() {
        return i.checked_sub(1).map(|j| buckets[j].0);
    }
    let (lower, below) = match i.checked_sub(1) {
        Some(j) => buckets[j],
        None => (if le > 0.0 { 0.0 } else { le }, 0.0),
    };
    let inside = cum - below;
    if inside <= 0.0 {
        return Some(le);
    }
    Some(lower + (le - lower) * (rank - below) / inside)
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
        assert_eq!(
            f.gauges["g"],
            GaugeStats {
                min: 1.0,
                mean: 3.0,
                max: 5.0
            }
        );
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
        b.scrape.histograms.insert("h".into(), h(9.0, 14.0, 2.4));
        let f = Figures::of(&[a, b], t0).unwrap();
        let d = f.histograms["h"];
        assert_eq!(d.count, 4.0);
        assert!((d.sum - 0.4).abs() < 1e-12);
        assert_eq!(d.p50, Some(0.05));
    }
}
