//! Opening a run's connections before its clock starts, and, for a run that starts at a set
//! instant (`--start-at`), early enough that every core is ready by then.
//!
//! Why this is more than "open them 2 s ahead": at ~8,300 connections per core to one busy
//! single-worker server, opening took 12–24 s on a 2-core machine (bench-overhead/results/HISTORY.md,
//! "50,000 streams as three Slurm tasks"), so cores that began 2 s before the start reached
//! the start barrier long after it and the run's duration counted the connecting. Opening
//! long before the start has its own risk: a server or proxy may close a connection that
//! idles too long (see [`MAX_LEAD`]). So:
//!
//! - the engine starts a core's opening [`lead`] before the start, in proportion to the
//!   connections the core opens and to the connect rate learned in this process
//!   ([`ConnectRate`]: earlier runs' full batches), or an assumed slow rate when none is
//!   known;
//! - a core opens [`OPEN_AT_ONCE`] at a time and, after each batch, measures its own rate and
//!   pauses until the rest, at that rate, would finish just before the start (paced
//!   batches: a too-early guess costs one old batch, not thousands of old connections);
//! - just before the ready barrier it replaces the connections the server closed while they
//!   waited (one non-blocking peek each), so none is found closed inside a measured request.
//!
//! What a core still does not manage by the start is reported, not hidden: the engine's
//! clock starts when every core is ready ([`super::RunReport::start`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::http::conn::Connection;
use crate::runtime::timer::Timers;

use super::RunShared;

/// Connections a core opens at once. One at a time, 8,300 connections took 12-27 s here;
/// all at once overflow a server's listen queue (16,000 per shard did: connect timeouts).
/// 128 per core stay far below a listen backlog and, on a real network (a round trip per
/// connect), open thousands a second.
pub const OPEN_AT_ONCE: usize = 128;

/// The shortest lead: a few connections still get time for a slow network's handshakes
/// (and TLS), as before the lead scaled.
pub const MIN_LEAD: Duration = Duration::from_secs(2);

/// The longest lead. A connection opened ahead idles until the start, and idle connections
/// get closed: proxies and load balancers commonly after 60 s (nginx's
/// `client_header_timeout`, cloud load balancers' idle timeout), uvicorn (vLLM's server) 5 s
/// after a response (its keep-alive timer is armed by a completed response, not by a fresh
/// connection that sent nothing). 45 s stays below the 60 s ones with room to spare; with
/// paced batches only the first batch is that old, and connections closed anyway are
/// replaced before the start (a peek each) or, closed after it, retried once on a fresh
/// connection inside their request (its TTFT then holds a connect).
pub const MAX_LEAD: Duration = Duration::from_secs(45);

/// The expected connect time is multiplied by this: a rate measured on a first batch or an
/// earlier run is not a promise (the server slows as its connection count grows, other
/// processes take the cores).
const SAFETY: f64 = 1.5;

/// Added to every lead: the barrier, the wake-up and the last batch's stragglers.
const MARGIN: Duration = Duration::from_millis(500);

/// Connections per second per core assumed when this process has not measured a rate yet:
/// the slowest seen (8,333 per core in 27 s to a single-worker server on a busy 2-core
/// machine). Too slow a guess only makes the first batch older: the rest are paced.
pub const ASSUMED_RATE: f64 = 300.0;

/// How long before a set start a core that opens `connections` connections starts opening,
/// at `rate` connections per second (`None`, or not a positive rate: [`ASSUMED_RATE`]):
/// the expected time × [`SAFETY`] + [`MARGIN`], within [`MIN_LEAD`]..=[`MAX_LEAD`].
pub fn lead(connections: usize, rate: Option<f64>) -> Duration {
    let rate = rate
        .filter(|r| r.is_finite() && *r > 0.0)
        .unwrap_or(ASSUMED_RATE);
    let secs = connections as f64 / rate * SAFETY + MARGIN.as_secs_f64();
    Duration::from_secs_f64(secs.min(MAX_LEAD.as_secs_f64())).max(MIN_LEAD)
}

/// The connect rate a core last measured in this process (connections per second while it
/// was opening full batches), for the next set start's [`lead`]. Only a full batch of
/// [`OPEN_AT_ONCE`] counts: one connection's latency says nothing about how fast thousands
/// open (on loopback it is far too fast, across a network far too slow).
#[derive(Debug, Default)]
pub struct ConnectRate(AtomicU64);

impl ConnectRate {
    /// The last measured rate, if any.
    pub fn get(&self) -> Option<f64> {
        let bits = self.0.load(Ordering::Relaxed);
        (bits != 0).then(|| f64::from_bits(bits))
    }

    /// Records `opened` connections in `took` (opening time, pauses excluded).
    pub fn record(&self, opened: usize, took: Duration) {
        if opened >= OPEN_AT_ONCE && !took.is_zero() {
            let rate = opened as f64 / took.as_secs_f64();
            self.0.store(rate.to_bits(), Ordering::Relaxed);
        }
    }
}

/// How one core opened its connections for a run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Opening {
    /// Connections opened ahead (failures excluded: their workers connect on first use).
    pub opened: usize,
    /// Time spent opening them, pauses excluded.
    pub took: Duration,
    /// When the core reached the start barrier, connections open.
    pub ready_at: Instant,
}

impl Opening {
    /// This opening as a core's start, relative to the set instant `at`.
    pub fn start_of(&self, core: usize, at: Instant) -> super::CoreStart {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let ready_ms = match self.ready_at.checked_duration_since(at) {
            Some(after) => ms(after),
            None => -ms(at - self.ready_at),
        };
        super::CoreStart {
            core,
            opened: self.opened,
            connecting: self.took,
            ready_ms,
        }
    }
}

/// One connection to each replica of `replicas`, in order, [`OPEN_AT_ONCE`] at a time; with
/// a set start, paced so the last batch ends just before it, and with the connections the
/// server closed while waiting replaced at the end. `None` for one that failed (its worker
/// connects on its first request, as without preconnect). A stop ends the opening: the
/// rest are `None`.
pub(super) async fn open_ahead(
    shared: &Arc<RunShared>,
    replicas: &[usize],
    timers: &Timers,
) -> (Vec<Option<Connection>>, Duration) {
    let n = replicas.len();
    let mut out = Vec::with_capacity(n);
    let mut took = Duration::ZERO;
    let stopped = || shared.stop.load(Ordering::Acquire);
    while out.len() < n && !stopped() {
        if let (Some(at), false) = (shared.start, out.is_empty()) {
            // Measured so far on this core: the rest at that rate, finishing just before.
            let rate = out.len() as f64 / took.as_secs_f64().max(1e-6);
            if let Some(by) = at.checked_sub(lead(n - out.len(), Some(rate))) {
                pause_until(by, timers, &stopped).await;
            }
        }
        let begun = Instant::now();
        let batch = &replicas[out.len()..(out.len() + OPEN_AT_ONCE).min(n)];
        out.extend(open_batch(shared, batch).await);
        took += begun.elapsed();
    }
    // Attempts, not successes: a connect that timed out took its time too.
    shared.connect_rate.record(out.len(), took);
    if shared.start.is_some() {
        replace_closed(shared, replicas, &mut out).await;
    }
    out.resize_with(n, || None);
    (out, took)
}

/// Opens one connection to each of `replicas` at once.
async fn open_batch(shared: &Arc<RunShared>, replicas: &[usize]) -> Vec<Option<Connection>> {
    let opens: Vec<_> = replicas
        .iter()
        .map(|&r| {
            let shared = shared.clone();
            monoio::spawn(async move {
                Connection::open(shared.replicas.endpoint(r))
                    .await
                    .ok()
                    .map(Connection::ahead)
            })
        })
        .collect();
    let mut out = Vec::with_capacity(opens.len());
    for open in opens {
        out.push(open.await);
    }
    out
}

/// Replaces the connections in `conns` the server has closed since they were opened (an
/// idle timeout while they waited for the start), [`OPEN_AT_ONCE`] at a time.
async fn replace_closed(
    shared: &Arc<RunShared>,
    replicas: &[usize],
    conns: &mut [Option<Connection>],
) {
    let closed: Vec<usize> = conns
        .iter()
        .enumerate()
        .filter(|(_, c)| c.as_ref().is_some_and(Connection::peer_closed))
        .map(|(i, _)| i)
        .collect();
    for chunk in closed.chunks(OPEN_AT_ONCE) {
        let targets: Vec<usize> = chunk.iter().map(|&i| replicas[i]).collect();
        for (&i, c) in chunk.iter().zip(open_batch(shared, &targets).await) {
            conns[i] = c;
        }
    }
}

/// Sleeps on the core's timers until `at`, in slices so a stop is seen within one.
async fn pause_until(at: Instant, timers: &Timers, stopped: &impl Fn() -> bool) {
    const SLICE: Duration = Duration::from_millis(20);
    loop {
        let now = Instant::now();
        if now >= at || stopped() {
            return;
        }
        timers.sleep((at - now).min(SLICE)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(d: Duration) -> f64 {
        d.as_secs_f64()
    }

    #[test]
    fn a_few_connections_keep_the_two_second_lead() {
        assert_eq!(lead(0, None), MIN_LEAD);
        assert_eq!(lead(100, None), MIN_LEAD);
        assert_eq!(lead(100, Some(5_000.0)), MIN_LEAD);
    }

    #[test]
    fn the_lead_grows_with_the_connections_a_core_opens() {
        // 8,300 per core at 500/s: 16.6 s expected, × 1.5 + 0.5 s.
        let l = lead(8_300, Some(500.0));
        assert!((secs(l) - 25.4).abs() < 1e-6, "{l:?}");
        assert!(lead(4_000, Some(500.0)) < l);
        assert!(lead(8_300, Some(1_000.0)) < l);
    }

    #[test]
    fn an_unknown_rate_is_taken_as_the_slow_one_seen() {
        assert_eq!(lead(3_000, None), lead(3_000, Some(ASSUMED_RATE)));
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert_eq!(lead(3_000, Some(bad)), lead(3_000, None), "{bad}");
        }
    }

    #[test]
    fn the_lead_never_exceeds_the_idle_timeout_bound() {
        assert_eq!(lead(1_000_000, None), MAX_LEAD);
        assert_eq!(lead(usize::MAX, Some(1e-9)), MAX_LEAD);
        assert!(MAX_LEAD < Duration::from_secs(60));
    }

    #[test]
    fn only_full_batches_teach_the_connect_rate() {
        let r = ConnectRate::default();
        assert_eq!(r.get(), None);
        r.record(1, Duration::from_micros(50));
        r.record(OPEN_AT_ONCE - 1, Duration::from_millis(10));
        assert_eq!(r.get(), None, "a few connections' latency is not a rate");
        r.record(1_000, Duration::ZERO);
        assert_eq!(r.get(), None);
        r.record(1_000, Duration::from_secs(2));
        assert_eq!(r.get(), Some(500.0));
    }
}
