//! Live counters: what a run has done so far, published by the engine's cores for a reader on
//! another thread (the dashboard, the client's own `/metrics`) while the run goes.
//!
//! Each core owns one [`CoreCounters`], aligned to its own cache lines (no core writes a line
//! another core writes), and is its only writer: a bump is a relaxed load and store of its
//! own atomic, no lock, no read-modify-write, no allocation. Readers sum the cores
//! ([`LiveRun::snapshot`]) whenever they like; every counter only grows, so a reader sees
//! monotone figures.
//!
//! Latencies go into [`LiveHistogram`]s: fixed, cumulative bucket arrays (two significant
//! decimal digits: the buckets of a decade are 1.0, 1.1, ... 9.9 times its power of ten,
//! from 1 µs to 1000 s). Cumulative because Prometheus wants cumulative histograms; windowed
//! figures ("p99 over the last 10 s") are the difference of two snapshots a reader took,
//! which keeps the window off the hot path (no ring to rotate on the cores). Decimal
//! buckets because every bound a Prometheus histogram of LLM latencies uses (1 ms, 2.5 ms,
//! 75 ms, 0.15 s, ...) is then one of their bounds exactly, and a percentile read from them
//! is the true value truncated to two significant digits, never finer than what was kept.
//!
//! The result of a run does not come from here (it comes from the recorders, exactly): these
//! figures are for watching a run as it goes.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// Decades the histograms cover: 1 µs to 1000 s.
const DECADES: usize = 9;
/// Buckets per decade: mantissas 10..=99.
const PER_DECADE: usize = 90;
/// The smallest bound, in ns (1 µs).
const FLOOR_NS: u64 = 1_000;
/// Every bucket: one below 1 µs, the decades, one at or above 1000 s.
pub const BUCKETS: usize = 2 + DECADES * PER_DECADE;

/// Powers of ten up to 10^12, for the bucket arithmetic.
const POW10: [u64; 13] = [
    1,
    10,
    100,
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
    1_000_000_000,
    10_000_000_000,
    100_000_000_000,
    1_000_000_000_000,
];

/// The bucket of a value in ns. Buckets hold `(lower, upper]` (Prometheus' `le` is
/// inclusive), so a value is placed by `ns - 1`.
pub fn bucket_of(ns: u64) -> usize {
    let v = ns.saturating_sub(1);
    if v < FLOOR_NS {
        return 0;
    }
    let e = v.ilog10() as usize; // 3..
    if e >= 3 + DECADES {
        return BUCKETS - 1;
    }
    let mantissa = (v / POW10[e - 1]) as usize; // 10..=99
    1 + (e - 3) * PER_DECADE + (mantissa - 10)
}

/// The upper bound of bucket `i` in ns (`u64::MAX` for the last, open one).
pub fn upper_ns(i: usize) -> u64 {
    match i {
        0 => FLOOR_NS,
        i if i >= BUCKETS - 1 => u64::MAX,
        i => {
            let k = i - 1;
            let (e, mantissa) = (3 + k / PER_DECADE, 10 + (k % PER_DECADE) as u64);
            (mantissa + 1) * POW10[e - 1]
        }
    }
}

/// The lower bound of bucket `i` in ns (0 for the first).
pub fn lower_ns(i: usize) -> u64 {
    if i == 0 {
        0
    } else {
        upper_ns(i - 1)
    }
}

/// Adds `by` to an atomic only its one thread writes: a plain load and store (no locked
/// instruction); readers on other threads see whole values.
#[inline]
fn bump(a: &AtomicU64, by: u64) {
    a.store(
        a.load(Ordering::Relaxed).wrapping_add(by),
        Ordering::Relaxed,
    );
}

/// One latency's cumulative distribution on one core.
pub struct LiveHistogram {
    buckets: [AtomicU64; BUCKETS],
    count: AtomicU64,
    sum_ns: AtomicU64,
}

impl Default for LiveHistogram {
    fn default() -> Self {
        LiveHistogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            count: AtomicU64::new(0),
            sum_ns: AtomicU64::new(0),
        }
    }
}

impl LiveHistogram {
    /// Records one value (ns); only the owning core calls it.
    #[inline]
    pub fn record(&self, ns: u64) {
        bump(&self.buckets[bucket_of(ns)], 1);
        bump(&self.count, 1);
        bump(&self.sum_ns, ns);
    }

    fn add_to(&self, into: &mut Distribution) {
        for (sum, b) in into.buckets.iter_mut().zip(&self.buckets) {
            *sum += b.load(Ordering::Relaxed);
        }
        into.count += self.count.load(Ordering::Relaxed);
        into.sum_ns += self.sum_ns.load(Ordering::Relaxed);
    }
}

/// The latencies the cores publish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Latency {
    Ttft,
    Tpot,
    Itl,
    E2el,
    /// From a request's scheduled time to its send, when its worker was idle (the client's
    /// own delay).
    DispatchLag,
}

impl Latency {
    pub const ALL: [Latency; 5] = [
        Latency::Ttft,
        Latency::Tpot,
        Latency::Itl,
        Latency::E2el,
        Latency::DispatchLag,
    ];
}

/// Failure reasons a core names one by one; more distinct ones are counted as `other`.
pub const REASON_SLOTS: usize = 8;

/// A failure reason and how often it came, on one core.
#[derive(Default)]
struct ReasonSlot {
    /// Set once, by the core, the first time the reason comes.
    name: OnceLock<Box<str>>,
    count: AtomicU64,
}

/// One core's counters. Aligned to 128 bytes (two cache lines, for the adjacent-line
/// prefetcher) so no two cores write the same line.
#[repr(align(128))]
#[derive(Default)]
pub struct CoreCounters {
    sent: AtomicU64,
    completed: AtomicU64,
    failed: AtomicU64,
    cancelled: AtomicU64,
    tokens_in: AtomicU64,
    tokens_out: AtomicU64,
    /// CPU time the core's thread used since the run started (its heartbeat updates it).
    busy_ns: AtomicU64,
    reasons: [ReasonSlot; REASON_SLOTS],
    other_reasons: AtomicU64,
    latencies: [LiveHistogram; 5],
}

/// A finished request as the live counters take it.
pub struct Finished<I: Iterator<Item = u64>> {
    pub prompt_tokens: u64,
    pub output_tokens: u64,
    pub ttft_ns: Option<u64>,
    pub tpot_ns: Option<u64>,
    pub e2el_ns: u64,
    /// The response's inter-token gaps (ns).
    pub gaps: I,
}

impl CoreCounters {
    /// A request was sent.
    #[inline]
    pub fn sent(&self) {
        bump(&self.sent, 1);
    }

    /// A request was sent `lag_ns` after its scheduled time, its worker idle until then.
    #[inline]
    pub fn dispatch_lag(&self, lag_ns: u64) {
        self.latency(Latency::DispatchLag).record(lag_ns);
    }

    /// A request was cancelled (on purpose, or cut at the time bound).
    #[inline]
    pub fn cancelled(&self) {
        bump(&self.cancelled, 1);
    }

    /// A request failed, for `reason` (a failure's stable kind). The first time a reason
    /// comes on this core its name is kept (one allocation, on the failure path, which
    /// allocates its own error text anyway).
    pub fn failed(&self, reason: &str) {
        bump(&self.failed, 1);
        for slot in &self.reasons {
            match slot.name.get() {
                Some(name) if &**name == reason => return bump(&slot.count, 1),
                Some(_) => {}
                None => {
                    // Only this core sets its slots, so the slot is still empty here.
                    let _ = slot.name.set(reason.into());
                    return bump(&slot.count, 1);
                }
            }
        }
        bump(&self.other_reasons, 1);
    }

    /// A request completed.
    #[inline]
    pub fn completed<I: Iterator<Item = u64>>(&self, r: Finished<I>) {
        bump(&self.completed, 1);
        bump(&self.tokens_in, r.prompt_tokens);
        bump(&self.tokens_out, r.output_tokens);
        if let Some(t) = r.ttft_ns {
            self.latency(Latency::Ttft).record(t);
        }
        if let Some(t) = r.tpot_ns {
            self.latency(Latency::Tpot).record(t);
        }
        self.latency(Latency::E2el).record(r.e2el_ns);
        let itl = self.latency(Latency::Itl);
        for gap in r.gaps {
            itl.record(gap);
        }
    }

    /// The core's thread has used `busy` of CPU since the run started.
    #[inline]
    pub fn busy(&self, busy: Duration) {
        self.busy_ns
            .store(busy.as_nanos() as u64, Ordering::Relaxed);
    }

    fn latency(&self, l: Latency) -> &LiveHistogram {
        &self.latencies[l as usize]
    }
}

/// One run's counters: one [`CoreCounters`] per core taking part.
pub struct LiveRun {
    cores: Box<[CoreCounters]>,
    claimed: AtomicUsize,
    planned: usize,
}

impl LiveRun {
    /// Counters for `cores` cores of a run of `planned` requests.
    pub fn new(cores: usize, planned: usize) -> LiveRun {
        LiveRun {
            cores: (0..cores.max(1)).map(|_| CoreCounters::default()).collect(),
            claimed: AtomicUsize::new(0),
            planned,
        }
    }

    /// A core's slot, taken once per run by each core (before the clock starts).
    pub fn claim(&self) -> usize {
        self.claimed.fetch_add(1, Ordering::Relaxed) % self.cores.len()
    }

    /// The counters of slot `i`.
    #[inline]
    pub fn core(&self, i: usize) -> &CoreCounters {
        &self.cores[i]
    }

    /// Requests planned for the run.
    pub fn planned(&self) -> usize {
        self.planned
    }

    /// The sum over the cores now (allocates: for readers, never on a core).
    pub fn snapshot(&self) -> Snapshot {
        let mut s = Snapshot::default();
        self.snapshot_into(&mut s);
        s
    }

    /// The sum over the cores now, written over `s` (a reader that reads again and again
    /// keeps its buffers: nothing is allocated but a failure reason's name the first time
    /// `s` holds it).
    pub fn snapshot_into(&self, s: &mut Snapshot) {
        s.planned = self.planned as u64;
        (s.sent, s.completed, s.failed, s.cancelled) = (0, 0, 0, 0);
        (s.tokens_in, s.tokens_out) = (0, 0);
        s.busy_ns.clear();
        for (_, n) in s.reasons.iter_mut() {
            *n = 0;
        }
        for d in s.latencies.iter_mut() {
            d.buckets.clear();
            d.buckets.resize(BUCKETS, 0);
            (d.count, d.sum_ns) = (0, 0);
        }
        let mut add_reason =
            |name: &str, n: u64| match s.reasons.iter_mut().find(|(r, _)| r == name) {
                Some((_, count)) => *count += n,
                None => s.reasons.push((name.to_string(), n)),
            };
        for c in self.cores.iter() {
            for slot in &c.reasons {
                if let Some(name) = slot.name.get() {
                    add_reason(name, slot.count.load(Ordering::Relaxed));
                }
            }
            let other = c.other_reasons.load(Ordering::Relaxed);
            if other > 0 {
                add_reason(OTHER_REASON, other);
            }
        }
        for c in self.cores.iter() {
            // Finished counts before sent: a request counted finished was counted sent
            // before it, so in flight never reads negative.
            s.completed += c.completed.load(Ordering::Relaxed);
            s.failed += c.failed.load(Ordering::Relaxed);
            s.cancelled += c.cancelled.load(Ordering::Relaxed);
            s.tokens_in += c.tokens_in.load(Ordering::Relaxed);
            s.tokens_out += c.tokens_out.load(Ordering::Relaxed);
            s.busy_ns.push(c.busy_ns.load(Ordering::Relaxed));
            for (l, d) in Latency::ALL.iter().zip(s.latencies.iter_mut()) {
                c.latency(*l).add_to(d);
            }
        }
        for c in self.cores.iter() {
            s.sent += c.sent.load(Ordering::Relaxed);
        }
        s.sent = s.sent.max(s.completed + s.failed + s.cancelled);
        // A reason `s` held from another run's snapshot.
        s.reasons.retain(|(_, n)| *n > 0);
        s.reasons.sort();
    }
}

/// The reason failures beyond [`REASON_SLOTS`] distinct ones on a core are counted under.
pub const OTHER_REASON: &str = "other";

/// One latency's distribution summed over the cores (or the difference of two).
#[derive(Debug, Clone, PartialEq)]
pub struct Distribution {
    pub buckets: Vec<u64>,
    pub count: u64,
    pub sum_ns: u64,
}

impl Default for Distribution {
    fn default() -> Self {
        Distribution {
            buckets: vec![0; BUCKETS],
            count: 0,
            sum_ns: 0,
        }
    }
}

impl Distribution {
    /// The observations since `earlier` (a snapshot of the same counters taken before).
    pub fn since(&self, earlier: &Distribution) -> Distribution {
        Distribution {
            buckets: self
                .buckets
                .iter()
                .zip(&earlier.buckets)
                .map(|(a, b)| a.saturating_sub(*b))
                .collect(),
            count: self.count.saturating_sub(earlier.count),
            sum_ns: self.sum_ns.saturating_sub(earlier.sum_ns),
        }
    }

    /// The `q` quantile (0..=1) as the lower bound of its bucket: the true value truncated
    /// to two significant digits (`None` without observations).
    pub fn quantile_ns(&self, q: f64) -> Option<u64> {
        self.quantiles_since(None, [q])[0]
    }

    /// The `qs` quantiles (each 0..=1, ascending) of the observations since `earlier` (a
    /// snapshot of the same counters taken before; all of them without), as
    /// [`Distribution::quantile_ns`] reads them: one pass over the buckets, nothing copied.
    pub fn quantiles_since<const N: usize>(
        &self,
        earlier: Option<&Distribution>,
        qs: [f64; N],
    ) -> [Option<u64>; N] {
        let count = |i: usize| {
            let before = earlier.and_then(|e| e.buckets.get(i)).copied().unwrap_or(0);
            self.buckets[i].saturating_sub(before)
        };
        let total: u64 = (0..self.buckets.len()).map(count).sum();
        let mut out = [None; N];
        if total == 0 {
            return out;
        }
        let ranks = qs.map(|q| ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1));
        let (mut seen, mut next) = (0, 0);
        for i in 0..self.buckets.len() {
            seen += count(i);
            while next < N && seen >= ranks[next] {
                out[next] = Some(lower_ns(i));
                next += 1;
            }
            if next == N {
                break;
            }
        }
        out
    }

    /// Observations at or below `le_ns`, which must be a bucket bound to be exact (the
    /// Prometheus bounds are).
    pub fn at_or_below(&self, le_ns: u64) -> u64 {
        self.buckets
            .iter()
            .enumerate()
            .take_while(|(i, _)| upper_ns(*i) <= le_ns)
            .map(|(_, n)| n)
            .sum()
    }
}

/// A run's counters summed over its cores at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    pub planned: u64,
    pub sent: u64,
    pub completed: u64,
    pub failed: u64,
    pub cancelled: u64,
    pub tokens_in: u64,
    pub tokens_out: u64,
    /// CPU time each core's thread used since the run started, in core order.
    pub busy_ns: Vec<u64>,
    /// Failures by reason, sorted by reason.
    pub reasons: Vec<(String, u64)>,
    /// In [`Latency::ALL`]'s order.
    pub latencies: [Distribution; 5],
}

impl Snapshot {
    /// Requests sent and not finished yet.
    pub fn in_flight(&self) -> u64 {
        self.sent
            .saturating_sub(self.completed + self.failed + self.cancelled)
    }

    pub fn latency(&self, l: Latency) -> &Distribution {
        &self.latencies[l as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_hold_two_significant_digits_and_the_prometheus_bounds_are_bounds() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(
            bucket_of(1_000),
            0,
            "1 µs is the first bucket's upper bound"
        );
        assert_eq!(bucket_of(1_001), 1);
        assert_eq!(lower_ns(1), 1_000);
        assert_eq!(upper_ns(1), 1_100);
        // 12.34 ms sits in (12 ms, 13 ms].
        let b = bucket_of(12_340_000);
        assert_eq!((lower_ns(b), upper_ns(b)), (12_000_000, 13_000_000));
        // An exact bound belongs to the bucket below it (le is inclusive).
        let b = bucket_of(2_500_000);
        assert_eq!(upper_ns(b), 2_500_000);
        for le in [
            0.001, 0.0025, 0.005, 0.075, 0.15, 0.4, 2.5, 7.5, 40.0, 600.0,
        ] {
            let ns = (le * 1e9_f64).round() as u64;
            assert_eq!(upper_ns(bucket_of(ns)), ns, "{le} s is a bucket bound");
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        assert_eq!(bucket_of(1_000_000_000_001), BUCKETS - 1);
        assert_eq!(bucket_of(1_000_000_000_000), BUCKETS - 2);
        for i in 1..BUCKETS - 1 {
            assert_eq!(upper_ns(i - 1), lower_ns(i));
            assert!(upper_ns(i) > lower_ns(i));
            assert_eq!(bucket_of(upper_ns(i)), i);
            assert_eq!(bucket_of(lower_ns(i) + 1), i);
        }
    }

    #[test]
    fn cores_sum_into_a_snapshot_and_windows_are_differences() {
        let run = LiveRun::new(2, 10);
        let (a, b) = (run.claim(), run.claim());
        assert_ne!(a, b);
        for _ in 0..3 {
            run.core(a).sent();
        }
        run.core(b).sent();
        let done = |ttft| Finished {
            prompt_tokens: 5,
            output_tokens: 3,
            ttft_ns: Some(ttft),
            tpot_ns: Some(10_000_000),
            e2el_ns: 30_000_000,
            gaps: [10_000_000u64, 10_500_000].into_iter(),
        };
        run.core(a).completed(done(20_000_000));
        let before = run.snapshot();
        run.core(b).completed(done(40_000_000));
        run.core(a).failed("http_500");
        run.core(b).failed("http_500");
        let s = run.snapshot();
        assert_eq!((s.sent, s.completed, s.failed, s.in_flight()), (4, 2, 2, 0));
        assert_eq!((s.tokens_in, s.tokens_out), (10, 6));
        assert_eq!(s.reasons, vec![("http_500".to_string(), 2)]);
        let ttft = s.latency(Latency::Ttft);
        assert_eq!(ttft.count, 2);
        assert_eq!(ttft.quantile_ns(0.5), Some(19_000_000));
        assert_eq!(ttft.quantile_ns(0.99), Some(39_000_000));
        let window = ttft.since(before.latency(Latency::Ttft));
        assert_eq!(window.count, 1);
        assert_eq!(window.quantile_ns(0.5), Some(39_000_000));
        // Read without the copy: the same figures.
        let earlier = Some(before.latency(Latency::Ttft));
        assert_eq!(
            ttft.quantiles_since(earlier, [0.5, 0.99]),
            [Some(39_000_000), Some(39_000_000)]
        );
        assert_eq!(
            ttft.quantiles_since(None, [0.5, 0.99]),
            [Some(19_000_000), Some(39_000_000)]
        );
        assert_eq!(
            ttft.quantiles_since(Some(ttft), [0.5]),
            [None],
            "none since"
        );
        // A snapshot read over an older one is the fresh one.
        let mut reused = before.clone();
        run.snapshot_into(&mut reused);
        assert_eq!(reused, s);
        assert_eq!(s.latency(Latency::Itl).count, 4);
        assert_eq!(s.latency(Latency::Itl).at_or_below(10_000_000), 2);
        assert_eq!(s.latency(Latency::Itl).at_or_below(11_000_000), 4);
    }

    #[test]
    fn reasons_beyond_the_slots_are_counted_as_other() {
        let run = LiveRun::new(1, 0);
        for i in 0..REASON_SLOTS + 2 {
            run.core(0).failed(&format!("r{i:02}"));
        }
        let s = run.snapshot();
        assert_eq!(s.failed, REASON_SLOTS as u64 + 2);
        assert_eq!(s.reasons.len(), REASON_SLOTS + 1);
        assert!(s.reasons.contains(&(OTHER_REASON.to_string(), 2)));
    }

    #[test]
    fn a_core_writes_cache_lines_of_its_own() {
        assert_eq!(std::mem::align_of::<CoreCounters>(), 128);
        assert_eq!(std::mem::size_of::<CoreCounters>() % 128, 0);
    }
}
