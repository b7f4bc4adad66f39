//! The timeline the mock actually emitted, as opposed to the one it was configured for.
//!
//! A benchmark client measures TTFT and ITL from when bytes reach it. Comparing that with
//! the *nominal* delays blames the client for the server's own lateness: a single-core mock
//! cannot hand 100,000 events a second to the kernel exactly on time. So, when
//! `MockConfig::timing_report` is on, every streamed generation response records when each
//! content chunk was handed to the kernel, and the report gives the client's true
//! reference:
//!
//! - server TTFT = first content chunk's hand-off − the request's arrival (the instant
//!   the request log uses: the whole request had been read);
//! - server ITL = gap between consecutive content chunks' hand-offs;
//! - lateness = a content chunk's hand-off − the deadline it was scheduled for.
//!
//! "Content chunk" means what the client counts as a token event: the `text` / `delta`
//! chunks, not chat's opening role chunk (empty content), not the usage-only chunk and not
//! `[DONE]`. The hand-off instant is taken just before the write buffer holding the chunk
//! is submitted to the kernel; chunks batched into one write share it (their ITL is 0,
//! exactly what the client sees too). The last content chunk leaves with the stream's
//! tail in the connection's final write; its instant is taken a lock and a copy earlier,
//! so the stream is recorded before the client can read its end. Only streams that
//! completed without an injected fault are kept, since clients count only successful
//! requests.
//!
//! A [`StreamTrace`] lives on each connection (buffers reused from stream to stream); a
//! finished stream is appended to its worker's [`Emitted`] (one uncontended lock per
//! stream); [`Emitted::merge`] + [`Emitted::report`] build the [`TimingReport`].

use std::time::Instant;

use serde::Serialize;

use crate::metrics::stats::{mean, median_sorted, percentile_sorted, sort_samples};

/// The content chunks of the stream being sent on one connection.
#[derive(Debug, Default)]
pub struct StreamTrace {
    /// Arrival of the traced request; `None` when no stream is being traced.
    arrival: Option<Instant>,
    /// Deadlines of content chunks in the write buffer, not yet handed off.
    queued: Vec<Instant>,
    /// Hand-off of the previous content chunk.
    last: Option<Instant>,
    /// First content chunk's hand-off − arrival, ns.
    ttft_ns: Option<u64>,
    /// Gaps between consecutive hand-offs, ns.
    itl_ns: Vec<u64>,
    /// Hand-off − deadline per content chunk, ns.
    lateness_ns: Vec<u64>,
    /// The stream completed without a fault and waits for its last hand-off.
    complete: bool,
}

impl StreamTrace {
    /// Starts tracing a stream of `chunks` content chunks for a request that arrived at
    /// `arrival` (forgetting whatever an earlier, abandoned stream left).
    pub fn begin(&mut self, arrival: Instant, chunks: usize) {
        self.arrival = Some(arrival);
        self.queued.clear();
        self.last = None;
        self.ttft_ns = None;
        self.itl_ns.clear();
        self.lateness_ns.clear();
        self.complete = false;
        self.queued.reserve(chunks);
        self.itl_ns.reserve(chunks.saturating_sub(1));
        self.lateness_ns.reserve(chunks);
    }

    /// A content chunk due at `deadline` was appended to the write buffer.
    pub fn queued(&mut self, deadline: Instant) {
        if self.arrival.is_some() {
            self.queued.push(deadline);
        }
    }

    /// The write buffer is being handed to the kernel at `now`: every queued chunk leaves.
    pub fn handing_off(&mut self, now: Instant) {
        let Some(arrival) = self.arrival else {
            return;
        };
        for deadline in self.queued.drain(..) {
            self.lateness_ns.push(nanos(now, deadline));
            match self.last {
                None => self.ttft_ns = Some(nanos(now, arrival)),
                Some(prev) => self.itl_ns.push(nanos(now, prev)),
            }
            self.last = Some(now);
        }
    }

    /// Ends the stream: `completed` keeps it for the report (after its last hand-off),
    /// otherwise (a fault, a client gone) it is dropped.
    pub fn end(&mut self, completed: bool) {
        if completed {
            self.complete = true;
        } else {
            self.arrival = None;
        }
    }

    /// Whether a completed stream has been fully handed off and can be recorded.
    pub fn ready(&self) -> bool {
        self.complete && self.queued.is_empty() && self.ttft_ns.is_some()
    }

    /// Stops tracing (after the stream was recorded).
    pub fn clear(&mut self) {
        self.arrival = None;
        self.complete = false;
    }
}

/// `later − earlier` in nanoseconds, 0 if `later` is earlier.
fn nanos(later: Instant, earlier: Instant) -> u64 {
    u64::try_from(later.saturating_duration_since(earlier).as_nanos()).unwrap_or(u64::MAX)
}

/// The emitted timelines of many streams (one worker's, or all merged).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Emitted {
    /// Streams recorded.
    pub streams: u64,
    /// Server TTFT per stream, ns.
    pub ttft_ns: Vec<u64>,
    /// Server ITLs of all streams, ns.
    pub itl_ns: Vec<u64>,
    /// Lateness of every content chunk, ns (its length is the chunk count).
    pub lateness_ns: Vec<u64>,
}

impl Emitted {
    /// Appends one finished stream.
    pub fn record(&mut self, t: &StreamTrace) {
        let Some(ttft) = t.ttft_ns else {
            return;
        };
        self.streams += 1;
        self.ttft_ns.push(ttft);
        self.itl_ns.extend_from_slice(&t.itl_ns);
        self.lateness_ns.extend_from_slice(&t.lateness_ns);
    }

    /// Appends another set of streams.
    pub fn merge(&mut self, other: &Emitted) {
        self.streams += other.streams;
        self.ttft_ns.extend_from_slice(&other.ttft_ns);
        self.itl_ns.extend_from_slice(&other.itl_ns);
        self.lateness_ns.extend_from_slice(&other.lateness_ns);
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        *self = Emitted::default();
    }

    /// Summary statistics in milliseconds (numpy's mean, median and linear percentile).
    pub fn report(&self) -> TimingReport {
        let ttft = Samples::from_ns(&self.ttft_ns);
        let itl = Samples::from_ns(&self.itl_ns);
        let late = Samples::from_ns(&self.lateness_ns);
        TimingReport {
            streams: self.streams,
            chunks: self.lateness_ns.len() as u64,
            ttft_ms: TtftSummary {
                mean: ttft.mean,
                median: median_sorted(&ttft.sorted),
                p99: ttft.percentile(99.0),
            },
            itl_ms: ItlSummary {
                mean: itl.mean,
                median: median_sorted(&itl.sorted),
                p50: itl.percentile(50.0),
                p99: itl.percentile(99.0),
            },
            lateness_ms: LatenessSummary {
                mean: late.mean,
                p50: late.percentile(50.0),
                p99: late.percentile(99.0),
                max: late.sorted.last().copied().unwrap_or(0.0),
            },
        }
    }
}

/// Values in ms, their mean (original order, as numpy sums) and a sorted copy.
struct Samples {
    mean: f64,
    sorted: Vec<f64>,
}

impl Samples {
    fn from_ns(ns: &[u64]) -> Samples {
        let mut ms: Vec<f64> = ns.iter().map(|&v| v as f64 / 1e6).collect();
        let m = mean(&ms);
        sort_samples(&mut ms);
        Samples {
            mean: m,
            sorted: ms,
        }
    }

    fn percentile(&self, p: f64) -> f64 {
        percentile_sorted(&self.sorted, p)
    }
}

/// What the server emitted, summarised (`mock-llm-server --timing-report`'s JSON).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimingReport {
    /// Streams that completed without a fault.
    pub streams: u64,
    /// Their content chunks.
    pub chunks: u64,
    /// Server TTFT (first content chunk's hand-off − arrival), ms.
    pub ttft_ms: TtftSummary,
    /// Server ITL (gap between consecutive content chunks' hand-offs), ms.
    pub itl_ms: ItlSummary,
    /// Content chunk hand-off − its scheduled deadline, ms.
    pub lateness_ms: LatenessSummary,
}

/// TTFT statistics, ms.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TtftSummary {
    /// Mean.
    pub mean: f64,
    /// Median.
    pub median: f64,
    /// 99th percentile.
    pub p99: f64,
}

/// ITL statistics, ms (`median` and `p50` are the same number, under both names clients use).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ItlSummary {
    /// Mean.
    pub mean: f64,
    /// Median.
    pub median: f64,
    /// 50th percentile.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
}

/// Lateness statistics, ms.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatenessSummary {
    /// Mean.
    pub mean: f64,
    /// 50th percentile.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Maximum.
    pub max: f64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn batched_and_separate_hand_offs_give_ttft_itl_and_lateness() {
        let t0 = Instant::now();
        let mut t = StreamTrace::default();
        t.begin(t0, 3);
        // Chunk 1 due at 20 ms, handed off at 21 ms.
        t.queued(t0 + ms(20));
        t.handing_off(t0 + ms(21));
        // Chunks 2 and 3 (due 25, 30) batched into one write at 33 ms.
        t.queued(t0 + ms(25));
        t.queued(t0 + ms(30));
        assert!(!t.ready());
        t.end(true);
        assert!(!t.ready(), "not ready while chunks wait in the buffer");
        t.handing_off(t0 + ms(33));
        // A flush with nothing queued (the tail) changes nothing.
        t.handing_off(t0 + ms(40));
        assert!(t.ready());
        let mut e = Emitted::default();
        e.record(&t);
        t.clear();
        assert_eq!(e.streams, 1);
        assert_eq!(e.ttft_ns, [21_000_000]);
        assert_eq!(e.itl_ns, [12_000_000, 0]);
        assert_eq!(e.lateness_ns, [1_000_000, 8_000_000, 3_000_000]);
        let r = e.report();
        assert_eq!(r.chunks, 3);
        assert_eq!(r.ttft_ms.mean, 21.0);
        assert_eq!(r.itl_ms.p50, 6.0);
        assert_eq!(r.itl_ms.median, 6.0);
        assert_eq!(r.lateness_ms.max, 8.0);
        assert_eq!(r.lateness_ms.p50, 3.0);
        // numpy: percentile([1, 3, 8], 99) = 3 + (8 - 3) * 0.98.
        assert!(
            (r.lateness_ms.p99 - 7.9).abs() < 1e-12,
            "{}",
            r.lateness_ms.p99
        );
    }

    #[test]
    fn abandoned_and_untraced_streams_are_not_recorded() {
        let t0 = Instant::now();
        let mut t = StreamTrace::default();
        // Never begun: queued chunks are ignored.
        t.queued(t0);
        t.handing_off(t0);
        assert!(!t.ready());
        t.begin(t0, 2);
        t.queued(t0 + ms(1));
        t.handing_off(t0 + ms(2));
        t.end(false);
        assert!(!t.ready());
        // A new stream forgets the abandoned one entirely.
        t.begin(t0 + ms(10), 1);
        t.queued(t0 + ms(15));
        t.end(true);
        t.handing_off(t0 + ms(16));
        let mut e = Emitted::default();
        e.record(&t);
        assert_eq!(
            (e.ttft_ns.as_slice(), e.itl_ns.len()),
            (&[6_000_000][..], 0)
        );
        assert_eq!(e.lateness_ns, [1_000_000]);
    }

    #[test]
    fn merge_concatenates_and_empty_reports_are_zero() {
        let mut a = Emitted {
            streams: 1,
            ttft_ns: vec![1],
            itl_ns: vec![2],
            lateness_ns: vec![3, 4],
        };
        a.merge(&a.clone());
        assert_eq!(a.streams, 2);
        assert_eq!(a.lateness_ns, [3, 4, 3, 4]);
        let empty = Emitted::default().report();
        assert_eq!((empty.streams, empty.chunks), (0, 0));
        assert_eq!(empty.ttft_ms.mean, 0.0);
        assert_eq!(empty.lateness_ms.max, 0.0);
        let json = serde_json::to_value(&empty).unwrap();
        for key in ["streams", "chunks", "ttft_ms", "itl_ms", "lateness_ms"] {
            assert!(json.get(key).is_some(), "{key} in {json}");
        }
        assert!(json["itl_ms"].get("p50").is_some() && json["itl_ms"].get("median").is_some());
    }
}
