//! What the mock counts and remembers: per-worker counters (each worker writes only its
//! own, cache-line aligned, so workers share nothing on the request path), the global
//! in-flight gauge, the optional per-request log and the optional emitted timelines.
//!
//! `in_flight` counts model requests (completions, chat, embeddings, pooling, rerank) from
//! arrival until their response is complete in the write buffer (or abandoned); it is also
//! `/metrics`' `vllm:num_requests_running`. Requests are counted, and logged, before their
//! last bytes are written, so a client that has read a whole response finds it in the
//! statistics.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use serde::{Serialize, Serializer};

use super::emission::{Emitted, StreamTrace};
use super::faults::{FaultCounts, FaultKind};
use super::routes::{Route, ROUTES, ROUTE_COUNT};
use super::vllm_metrics::WorkerMetrics;

/// A snapshot of the server's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MockStats {
    /// Every request answered or abandoned (including 4xx).
    pub requests_total: u64,
    /// Requests per served path (paths with no requests are left out).
    pub by_path: BTreeMap<String, u64>,
    /// Requests answered 400/404/405/413/431 because of the request itself.
    pub rejected: u64,
    /// Model requests in progress now.
    pub in_flight: u64,
    /// Highest `in_flight` seen since start (or the last reset).
    pub peak_in_flight: u64,
    /// Faults injected, per kind.
    pub faults: FaultCounts,
    /// TCP connections accepted.
    pub connections_accepted: u64,
    /// Toy prefix cache: prompt tokens looked up.
    pub prefix_cache_queries: u64,
    /// Toy prefix cache: prompt tokens found cached.
    pub prefix_cache_hits: u64,
    /// Model requests received since start, those still in flight included (the next
    /// sequence number; not zeroed by `reset_stats`).
    pub model_requests: u64,
    /// Crashes (`MockConfig::crash`) since start.
    pub crashes: u64,
    /// Responses that could not be written to their end because the client had closed
    /// the connection (a write failed, mid-stream or at the last write): what a client that
    /// cancels requests (`--request-cancellation-rate`) looks like. A whole body written
    /// at once after the client left may still be accepted by the kernel, unseen.
    pub closed_by_client: u64,
}

/// One request as the server saw it (kept when `MockConfig::request_log` is on).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LoggedRequest {
    /// When the whole request had arrived, since the server started.
    #[serde(rename = "arrival_s", serialize_with = "secs")]
    pub arrival: Duration,
    /// When the answer was written but its last write (since the server started): the
    /// client cannot have seen the end before, so `arrival..served` holds the request's
    /// time in flight as the client sees it.
    #[serde(rename = "served_s", serialize_with = "secs")]
    pub served: Duration,
    /// Worker thread that served it.
    pub worker: usize,
    /// The connection it came on: unique in the server (worker in the high bits, the
    /// worker's connection number in the low 40), so a log shows which requests shared one.
    pub connection: u64,
    /// Sequence number of a model request (drives its faults and jitter).
    pub seq: Option<u64>,
    /// Request method.
    pub method: &'static str,
    /// Request path (without the query string).
    pub path: String,
    /// Body bytes (after chunked decoding).
    pub body_len: usize,
    /// Structural hash of the prompt / messages / input (same prompt → same hash).
    pub prompt_hash: Option<u64>,
    /// Prompt tokens by the golden counting rules.
    pub prompt_tokens: Option<u64>,
    /// The request's `max_tokens` / `max_completion_tokens`.
    pub max_tokens: Option<u64>,
    /// The `X-Request-Id` header.
    pub request_id: Option<String>,
    /// The `X-Session-ID` header.
    pub session_id: Option<String>,
    /// The body (only with `MockConfig::request_log_bodies`).
    pub body: Option<String>,
    /// Response status (for a disconnect or stall: the 200 that was started).
    pub status: u16,
    /// The injected fault, if any.
    pub fault: Option<FaultKind>,
}

fn secs<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// Counters one worker writes; read (summed) by `MockServer::stats` from other threads.
#[repr(align(64))]
#[derive(Debug)]
pub struct WorkerCounters {
    requests: AtomicU64,
    by_route: [AtomicU64; ROUTE_COUNT],
    not_found: AtomicU64,
    rejected: AtomicU64,
    faults: [AtomicU64; FaultKind::COUNT],
    connections: AtomicU64,
    closed_by_client: AtomicU64,
    log: Mutex<Vec<LoggedRequest>>,
    emitted: Mutex<Emitted>,
    /// `/metrics`' vLLM counters and histograms (never reset: a server's count since start).
    pub vllm: WorkerMetrics,
}

impl Default for WorkerCounters {
    fn default() -> Self {
        WorkerCounters {
            requests: AtomicU64::new(0),
            by_route: std::array::from_fn(|_| AtomicU64::new(0)),
            not_found: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            faults: std::array::from_fn(|_| AtomicU64::new(0)),
            connections: AtomicU64::new(0),
            closed_by_client: AtomicU64::new(0),
            log: Mutex::new(Vec::new()),
            emitted: Mutex::new(Emitted::default()),
            vllm: WorkerMetrics::default(),
        }
    }
}

impl WorkerCounters {
    /// A connection was accepted; returns its number among this worker's connections.
    pub fn connection(&self) -> u64 {
        self.connections.fetch_add(1, Relaxed)
    }

    /// A request was answered: `route` is `None` for unknown paths and framing errors.
    pub fn request(&self, route: Option<Route>, rejected: bool) {
        self.requests.fetch_add(1, Relaxed);
        match route {
            Some(r) => self.by_route[r.index()].fetch_add(1, Relaxed),
            None => self.not_found.fetch_add(1, Relaxed),
        };
        if rejected {
            self.rejected.fetch_add(1, Relaxed);
        }
    }

    /// A response could not be written to its end: its client closed the connection.
    pub fn closed_by_client(&self) {
        self.closed_by_client.fetch_add(1, Relaxed);
    }

    /// A fault was injected.
    pub fn fault(&self, kind: FaultKind) {
        self.faults[kind.index()].fetch_add(1, Relaxed);
    }

    /// Appends to the request log.
    pub fn log(&self, entry: LoggedRequest) {
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(entry);
    }

    /// Appends a completed stream's emitted timeline (once per stream; only this worker
    /// takes the lock on the request path).
    pub fn emitted(&self, trace: &StreamTrace) {
        self.emitted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .record(trace);
    }

    fn reset(&self) {
        let all = [
            &self.requests,
            &self.not_found,
            &self.rejected,
            &self.connections,
            &self.closed_by_client,
        ];
        for c in all.into_iter().chain(&self.by_route).chain(&self.faults) {
            c.store(0, Relaxed);
        }
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        self.emitted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

/// Path reported for requests to unknown paths.
pub const UNKNOWN_PATH: &str = "(unknown)";

/// The server-wide statistics: per-worker counters plus the in-flight gauge.
#[derive(Debug)]
pub struct Stats {
    workers: Vec<WorkerCounters>,
    in_flight: AtomicU64,
    peak_in_flight: AtomicU64,
}

impl Stats {
    /// Statistics for `workers` workers.
    pub fn new(workers: usize) -> Self {
        Stats {
            workers: (0..workers).map(|_| WorkerCounters::default()).collect(),
            in_flight: AtomicU64::new(0),
            peak_in_flight: AtomicU64::new(0),
        }
    }

    /// The counters of worker `i`.
    pub fn worker(&self, i: usize) -> &WorkerCounters {
        &self.workers[i]
    }

    /// Marks a model request as in flight until the guard is dropped.
    pub fn enter(&self) -> InFlight<'_> {
        let now = self.in_flight.fetch_add(1, Relaxed) + 1;
        self.peak_in_flight.fetch_max(now, Relaxed);
        InFlight(self)
    }

    /// Every worker's counters.
    pub fn workers(&self) -> &[WorkerCounters] {
        &self.workers
    }

    /// Model requests in progress now.
    pub fn in_flight(&self) -> u64 {
        self.in_flight.load(Relaxed)
    }

    /// Sums the workers' counters (prefix-cache fields are filled in by the caller).
    pub fn snapshot(&self) -> MockStats {
        let mut s = MockStats {
            in_flight: self.in_flight(),
            peak_in_flight: self.peak_in_flight.load(Relaxed),
            ..MockStats::default()
        };
        let mut faults = [0u64; FaultKind::COUNT];
        let mut by_route = [0u64; ROUTE_COUNT];
        let mut not_found = 0;
        for w in &self.workers {
            s.requests_total += w.requests.load(Relaxed);
            s.rejected += w.rejected.load(Relaxed);
            s.connections_accepted += w.connections.load(Relaxed);
            s.closed_by_client += w.closed_by_client.load(Relaxed);
            not_found += w.not_found.load(Relaxed);
            for (sum, c) in by_route.iter_mut().zip(&w.by_route) {
                *sum += c.load(Relaxed);
            }
            for (sum, c) in faults.iter_mut().zip(&w.faults) {
                *sum += c.load(Relaxed);
            }
        }
        for ((_, _, path), n) in ROUTES.iter().zip(by_route) {
            if n > 0 {
                s.by_path.insert((*path).to_string(), n);
            }
        }
        if not_found > 0 {
            s.by_path.insert(UNKNOWN_PATH.to_string(), not_found);
        }
        s.faults = FaultCounts::from_slots(faults);
        s
    }

    /// All logged requests, in arrival order.
    pub fn request_log(&self) -> Vec<LoggedRequest> {
        let mut all: Vec<LoggedRequest> = self
            .workers
            .iter()
            .flat_map(|w| w.log.lock().unwrap_or_else(PoisonError::into_inner).clone())
            .collect();
        all.sort_by_key(|r| (r.arrival, r.seq));
        all
    }

    /// Every worker's emitted timeline, merged (worker by worker).
    pub fn emitted(&self) -> Emitted {
        let mut all = Emitted::default();
        for w in &self.workers {
            all.merge(&w.emitted.lock().unwrap_or_else(PoisonError::into_inner));
        }
        all
    }

    /// Zeroes the counters and clears the log and the emitted timelines; the peak restarts from the current gauge.
    pub fn reset(&self) {
        for w in &self.workers {
            w.reset();
        }
        self.peak_in_flight.store(self.in_flight(), Relaxed);
    }
}

/// Keeps one model request counted as in flight while alive.
#[derive(Debug)]
pub struct InFlight<'a>(&'a Stats);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_sum_over_workers_and_reset() {
        let s = Stats::new(2);
        s.worker(0).request(Some(Route::Completions), false);
        s.worker(1).request(Some(Route::Completions), false);
        s.worker(1).request(None, true);
        s.worker(0).fault(FaultKind::Stall);
        s.worker(1).connection();
        {
            let _a = s.enter();
            let _b = s.enter();
            assert_eq!(s.in_flight(), 2);
        }
        let snap = s.snapshot();
        assert_eq!(snap.requests_total, 3);
        assert_eq!(snap.by_path["/v1/completions"], 2);
        assert_eq!(snap.by_path[UNKNOWN_PATH], 1);
        assert_eq!(snap.rejected, 1);
        assert_eq!(snap.faults.stall, 1);
        assert_eq!(snap.connections_accepted, 1);
        assert_eq!((snap.in_flight, snap.peak_in_flight), (0, 2));
        s.reset();
        assert_eq!(s.snapshot(), MockStats::default());
    }

    #[test]
    fn log_is_merged_in_arrival_order_and_serializes() {
        let s = Stats::new(2);
        let entry = |ms, worker| LoggedRequest {
            arrival: Duration::from_millis(ms),
            served: Duration::from_millis(ms),
            worker,
            connection: 0,
            seq: Some(ms),
            method: "POST",
            path: "/v1/completions".into(),
            body_len: 10,
            prompt_hash: Some(7),
            prompt_tokens: Some(3),
            max_tokens: Some(4),
            request_id: None,
            session_id: None,
            body: None,
            status: 200,
            fault: Some(FaultKind::Error429),
        };
        s.worker(1).log(entry(5, 1));
        s.worker(0).log(entry(9, 0));
        s.worker(1).log(entry(1, 1));
        let log = s.request_log();
        assert_eq!(
            log.iter().map(|r| r.seq.unwrap()).collect::<Vec<_>>(),
            [1, 5, 9]
        );
        let line = serde_json::to_string(&log[0]).unwrap();
        assert!(line.contains(r#""arrival_s":0.001"#), "{line}");
        assert!(line.contains(r#""fault":"error_429""#), "{line}");
    }
}
