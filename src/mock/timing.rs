//! When each event of a response is due.
//!
//! Deadlines are absolute and anchored to the request's arrival: event `i` is due at
//! `arrival + ttft' + itl'_1 + … + itl'_i`, where each primed delay is the configured one
//! plus its own seeded uniform jitter in `[-jitter, +jitter]` (clamped at zero). A late
//! wake-up therefore never shifts the events after it (no drift), and two runs with the
//! same seed see the same jitter.

use std::time::{Duration, Instant};

use super::hash::SplitMix64;

/// Stream id of the jitter draws, distinct from the fault and id streams.
const JITTER_STREAM: u64 = 0x1177e2;

/// The deadlines of one response's events.
#[derive(Debug, Clone)]
pub struct Schedule {
    next: Instant,
    first: Option<Duration>,
    interval: Duration,
    jitter: Duration,
    rng: SplitMix64,
}

impl Schedule {
    /// A schedule starting at `arrival`; the first deadline is after `first_delay`, each
    /// later one `interval` after the previous (both jittered per draw).
    pub fn new(
        arrival: Instant,
        first_delay: Duration,
        interval: Duration,
        jitter: Duration,
        seed: u64,
        seq: u64,
    ) -> Self {
        Schedule {
            next: arrival,
            first: Some(first_delay),
            interval,
            jitter,
            rng: SplitMix64::new(seed ^ JITTER_STREAM, seq),
        }
    }

    /// The next deadline.
    pub fn next_deadline(&mut self) -> Instant {
        let delay = self.first.take().unwrap_or(self.interval);
        let step = self.jittered(delay);
        self.next += step;
        self.next
    }

    /// Delays every later deadline by `d` (not jittered): a pause in the stream.
    pub fn pause(&mut self, d: Duration) {
        self.next += d;
    }

    fn jittered(&mut self, d: Duration) -> Duration {
        if self.jitter.is_zero() {
            return d;
        }
        let offset = self.rng.next_signed_unit() * self.jitter.as_secs_f64();
        Duration::from_secs_f64((d.as_secs_f64() + offset).max(0.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_jitter_deadlines_are_exact_multiples() {
        let t0 = Instant::now();
        let mut s = Schedule::new(
            t0,
            Duration::from_millis(50),
            Duration::from_millis(10),
            Duration::ZERO,
            1,
            1,
        );
        let got: Vec<Duration> = (0..4).map(|_| s.next_deadline() - t0).collect();
        assert_eq!(got, [50, 60, 70, 80].map(Duration::from_millis));
    }

    #[test]
    fn jitter_is_bounded_seeded_and_non_negative() {
        let t0 = Instant::now();
        let j = Duration::from_millis(3);
        let draw = |seq| {
            let mut s = Schedule::new(
                t0,
                Duration::from_millis(5),
                Duration::from_millis(2),
                j,
                9,
                seq,
            );
            (0..50).map(|_| s.next_deadline()).collect::<Vec<_>>()
        };
        let a = draw(1);
        assert_eq!(a, draw(1));
        assert_ne!(a, draw(2));
        let first = a[0] - t0;
        assert!(
            first >= Duration::from_millis(2) && first <= Duration::from_millis(8),
            "{first:?}"
        );
        for w in a.windows(2) {
            let gap = w[1] - w[0];
            // 2 ms ± 3 ms, clamped at zero.
            assert!(gap <= Duration::from_millis(5), "{gap:?}");
        }
    }
}
