//! Arrival schedules: the offset from the start of the run at which each request is released.
//!
//! Computed entirely before the clock starts (Python's `get_request` precomputes its delays
//! too); the engine only sleeps until each offset. Semantics follow vLLM 0.33:
//! - infinite rate: every request at offset 0;
//! - finite rate: gamma-distributed gaps (shape = burstiness, scale = 1/(rate·burstiness);
//!   burstiness 1 is Poisson, infinite burstiness is a constant gap), accumulated, then — without
//!   ramp-up — rescaled so the last request arrives exactly at `N / rate`;
//! - ramp-up: the rate for request `i` moves from start to end linearly or exponentially with
//!   progress `i / max(N-1, 1)`, and no rescaling is applied.

use std::sync::Arc;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Gamma};

pub use crate::types::{RampUp, RampUpStrategy};

/// How requests are released.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateSpec {
    /// Requests per second; `f64::INFINITY` sends everything at once.
    pub request_rate: f64,
    pub burstiness: f64,
    pub ramp_up: Option<RampUp>,
    pub seed: u64,
}

/// The rate in force for request `index` (Python's `_get_current_request_rate`).
pub fn current_rate(spec: &RateSpec, index: usize, total: usize) -> f64 {
    match spec.ramp_up {
        None => spec.request_rate,
        Some(r) => {
            let progress = index as f64 / (total.saturating_sub(1)).max(1) as f64;
            let (start, end) = (r.start_rps as f64, r.end_rps as f64);
            match r.strategy {
                RampUpStrategy::Linear => start + (end - start) * progress,
                RampUpStrategy::Exponential => start * (end / start).powf(progress),
            }
        }
    }
}

/// The highest rate a ramp-up may reach (`--ramp-up-end-rps`): 100,000 requests per second,
/// above what one client machine sends. The result lists every integer rate the ramp passes
/// (Python's `rps_change_events`), so the list grows with the end rate, not with the run:
/// `--ramp-up-end-rps 1000000000` ran the benchmark and then lost its result allocating
/// 3.4 GB for it. Checked before the clock (`config`), and held here too.
pub const MAX_RAMP_RPS: u64 = 100_000;

/// Why no schedule can be drawn from a rate spec.
#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    #[error(
        "--burstiness {}: must be a positive, finite number (1 is Poisson, below 1 burstier, \
         above 1 steadier)",
        crate::pyfmt::float_repr(*.0)
    )]
    Burstiness(f64),
    #[error(
        "the request rate for request {index} is {}; it must be positive",
        crate::pyfmt::float_repr(*rate)
    )]
    Rate { index: usize, rate: f64 },
}

/// Arrival offsets (seconds) for `total` requests. Returns `None` when every offset is zero
/// (infinite rate without ramp-up), so the engine can skip timers altogether.
pub fn arrival_offsets(spec: &RateSpec, total: usize) -> Result<Option<Vec<f64>>, ScheduleError> {
    if spec.burstiness <= 0.0 || spec.burstiness.is_nan() {
        return Err(ScheduleError::Burstiness(spec.burstiness));
    }
    if spec.ramp_up.is_none() && spec.request_rate.is_infinite() {
        return Ok(None);
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(spec.seed);
    // Gaps of mean 1 (shape = burstiness, scale = 1/burstiness), divided by the rate: the
    // same law as Python's `gamma(shape=b, scale=1/(rate·b))`, but `rate·b` cannot overflow
    // (`--burstiness 1e308` made the scale 0 and the run fail).
    let unit_gap = if spec.burstiness.is_infinite() {
        None
    } else {
        let scale = 1.0 / spec.burstiness; // infinite for a subnormal burstiness
        Some(
            Gamma::new(spec.burstiness, scale)
                .ok()
                .filter(|_| scale.is_finite())
                .ok_or(ScheduleError::Burstiness(spec.burstiness))?,
        )
    };
    let mut delays = Vec::with_capacity(total);
    let mut acc = 0.0f64;
    for i in 0..total {
        let rate = current_rate(spec, i, total);
        if rate <= 0.0 || rate.is_nan() {
            return Err(ScheduleError::Rate { index: i, rate });
        }
        let gap = match &unit_gap {
            _ if rate.is_infinite() => 0.0,
            None => 1.0 / rate,
            Some(gamma) => gamma.sample(&mut rng) / rate,
        };
        acc += gap;
        delays.push(acc);
    }
    if spec.ramp_up.is_none() {
        if let Some(&last) = delays.last() {
            if last != 0.0 {
                let factor = (total as f64 / spec.request_rate) / last;
                for d in &mut delays {
                    *d *= factor;
                }
            }
        }
    }
    Ok(Some(delays))
}

/// Python's `rps_change_events` for a ramp-up, as `(rps, arrival offset in seconds)`: the start
/// rate at offset 0, then every integer rate the ramp passes, stamped with the arrival of the
/// first request sent at that rate or above. Empty without ramp-up. At most
/// [`MAX_RAMP_RPS`] + 1 entries: rates above it are not listed.
pub fn rps_changes(spec: &RateSpec, offsets: &[f64]) -> Vec<(u64, f64)> {
    let Some(ramp) = spec.ramp_up else {
        return Vec::new();
    };
    let mut last = ramp.start_rps.min(MAX_RAMP_RPS);
    let mut events = vec![(last, 0.0)];
    for (i, &at) in offsets.iter().enumerate() {
        let rate = (current_rate(spec, i, offsets.len()) as u64).min(MAX_RAMP_RPS);
        if rate > last {
            events.extend((last + 1..=rate).map(|r| (r, at)));
            last = rate;
        }
    }
    events
}

/// Which requests the client cancels on purpose (`--request-cancellation-rate`) and when:
/// drawn from the seed before the clock starts, so the engine only tests a bit per request.
#[derive(Debug, Clone, PartialEq)]
pub struct Cancellations {
    /// From the moment a chosen request was fully written to the close of its connection.
    pub delay: Duration,
    /// One bit per request (record index) of the workload.
    chosen: Arc<[u64]>,
}

/// Mixed into the seed so the choice of cancelled requests is its own random stream: the
/// arrival times of a run with cancellation are those of the same run without.
const CANCEL_STREAM: u64 = 0x6361_6e63_656c_6c65;

impl Cancellations {
    /// Each of `total` requests cancelled with probability `percent` / 100, independently
    /// (seeded by `seed`): the share cancelled is `percent` within sampling error.
    pub fn draw(percent: f64, delay: Duration, seed: u64, total: usize) -> Cancellations {
        let p = (percent / 100.0).clamp(0.0, 1.0);
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ CANCEL_STREAM);
        Cancellations::from_fn(delay, total, |_| rng.random_bool(p))
    }

    /// Request `i` of `total` cancelled when `chosen(i)` (called in index order).
    pub fn from_fn(
        delay: Duration,
        total: usize,
        mut chosen: impl FnMut(usize) -> bool,
    ) -> Cancellations {
        let mut bits = vec![0u64; total.div_ceil(64)];
        for i in 0..total {
            if chosen(i) {
                bits[i / 64] |= 1 << (i % 64);
            }
        }
        Cancellations {
            delay,
            chosen: bits.into(),
        }
    }

    /// Whether request `index` is cancelled.
    pub fn is_chosen(&self, index: usize) -> bool {
        self.chosen
            .get(index / 64)
            .is_some_and(|w| w >> (index % 64) & 1 == 1)
    }

    /// Requests chosen.
    pub fn count(&self) -> usize {
        self.chosen.iter().map(|w| w.count_ones() as usize).sum()
    }
}

/// Seconds to `Duration`s for the engine.
pub fn to_durations(offsets: &[f64]) -> Vec<Duration> {
    offsets
        .iter()
        .map(|&s| Duration::from_secs_f64(s.max(0.0)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(rate: f64, burstiness: f64) -> RateSpec {
        RateSpec {
            request_rate: rate,
            burstiness,
            ramp_up: None,
            seed: 0,
        }
    }

    #[test]
    fn cancelled_share_is_the_rate_within_sampling_error() {
        let n = 20_000;
        for pct in [0.0, 10.0, 50.0, 100.0] {
            let c = Cancellations::draw(pct, Duration::ZERO, 7, n);
            let expected = n as f64 * pct / 100.0;
            // Four standard deviations of a binomial count.
            let sd = (n as f64 * pct / 100.0 * (1.0 - pct / 100.0)).sqrt();
            let got = c.count() as f64;
            assert!((got - expected).abs() <= 4.0 * sd, "{pct}%: {got} of {n}");
            assert_eq!(c.count(), (0..n).filter(|&i| c.is_chosen(i)).count());
        }
        assert!(!Cancellations::draw(100.0, Duration::ZERO, 7, 3).is_chosen(3));
    }

    #[test]
    fn same_seed_cancels_the_same_requests_and_another_seed_others() {
        let a = Cancellations::draw(30.0, Duration::ZERO, 1, 500);
        assert_eq!(a, Cancellations::draw(30.0, Duration::ZERO, 1, 500));
        assert_ne!(a, Cancellations::draw(30.0, Duration::ZERO, 2, 500));
    }

    #[test]
    fn infinite_rate_means_no_timers() {
        assert_eq!(
            arrival_offsets(&spec(f64::INFINITY, 1.0), 10).unwrap(),
            None
        );
    }

    #[test]
    fn finite_rate_is_rescaled_to_n_over_rate() {
        for b in [0.5, 1.0, 3.0] {
            let d = arrival_offsets(&spec(40.0, b), 200).unwrap().unwrap();
            assert_eq!(d.len(), 200);
            assert!((d[199] - 5.0).abs() < 1e-9, "last arrival {}", d[199]);
            assert!(d.windows(2).all(|w| w[0] <= w[1]));
        }
    }

    #[test]
    fn infinite_burstiness_is_a_constant_gap() {
        let d = arrival_offsets(&spec(10.0, f64::INFINITY), 5)
            .unwrap()
            .unwrap();
        for (i, x) in d.iter().enumerate() {
            assert!((x - 0.1 * (i + 1) as f64).abs() < 1e-12);
        }
    }

    #[test]
    fn same_seed_same_schedule() {
        let a = arrival_offsets(&spec(5.0, 1.0), 50).unwrap();
        let b = arrival_offsets(&spec(5.0, 1.0), 50).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn ramp_rates_follow_python() {
        let lin = RateSpec {
            ramp_up: Some(RampUp {
                strategy: RampUpStrategy::Linear,
                start_rps: 10,
                end_rps: 100,
            }),
            ..spec(f64::INFINITY, 1.0)
        };
        assert_eq!(current_rate(&lin, 0, 11), 10.0);
        assert_eq!(current_rate(&lin, 5, 11), 55.0);
        assert_eq!(current_rate(&lin, 10, 11), 100.0);
        let exp = RateSpec {
            ramp_up: Some(RampUp {
                strategy: RampUpStrategy::Exponential,
                start_rps: 1,
                end_rps: 100,
            }),
            ..lin
        };
        assert!((current_rate(&exp, 5, 11) - 10.0).abs() < 1e-12);
        let d = arrival_offsets(&lin, 11).unwrap().unwrap();
        assert!(d[0] > 0.0 && d.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn ramp_up_reports_every_integer_rate_once() {
        let spec = RateSpec {
            ramp_up: Some(RampUp {
                strategy: RampUpStrategy::Linear,
                start_rps: 1,
                end_rps: 4,
            }),
            ..spec(f64::INFINITY, 1.0)
        };
        let offsets = arrival_offsets(&spec, 4).unwrap().unwrap();
        let events = rps_changes(&spec, &offsets);
        let rates: Vec<u64> = events.iter().map(|e| e.0).collect();
        assert_eq!(rates, vec![1, 2, 3, 4]);
        assert_eq!(events[0].1, 0.0);
        assert_eq!(events[3].1, offsets[3]);
        assert!(rps_changes(&spec_no_ramp(), &offsets).is_empty());
    }

    fn spec_no_ramp() -> RateSpec {
        spec(10.0, 1.0)
    }

    #[test]
    fn bad_burstiness_is_an_error() {
        assert!(arrival_offsets(&spec(1.0, 0.0), 3)
            .unwrap_err()
            .to_string()
            .contains("--burstiness"));
    }

    #[test]
    fn burstiness_1e308_gives_constant_gaps_instead_of_a_gamma_error() {
        for rate in [1.0, 1e300, f64::MAX] {
            let d = arrival_offsets(&spec(rate, 1e308), 4).unwrap().unwrap();
            assert!(d.iter().all(|x| x.is_finite()), "{d:?}");
        }
        let d = arrival_offsets(&spec(10.0, 1e308), 4).unwrap().unwrap();
        for (i, x) in d.iter().enumerate() {
            assert!((x - 0.1 * (i + 1) as f64).abs() < 1e-9, "{d:?}");
        }
        // A burstiness whose reciprocal overflows names the flag and the range.
        let e = arrival_offsets(&spec(1.0, 1e-310), 3)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "--burstiness 1e-310: must be a positive, finite number (1 is Poisson, below 1 \
             burstier, above 1 steadier)"
        );
    }

    #[test]
    fn ramp_up_end_rps_1e9_lists_a_bounded_number_of_changes() {
        let spec = RateSpec {
            ramp_up: Some(RampUp {
                strategy: RampUpStrategy::Linear,
                start_rps: 1,
                end_rps: 1_000_000_000,
            }),
            ..spec(f64::INFINITY, 1.0)
        };
        let offsets = arrival_offsets(&spec, 3).unwrap().unwrap();
        let events = rps_changes(&spec, &offsets);
        assert_eq!(events.len() as u64, MAX_RAMP_RPS);
        assert_eq!(events.last().unwrap().0, MAX_RAMP_RPS);
    }
}
