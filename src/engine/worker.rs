//! A worker: one logical client slot. It claims the next session from the shared cursor,
//! waits for its arrival time, runs the session's requests in order on its own keep-alive
//! connection and records each outcome. The number of workers is the concurrency limit, so
//! `--max-concurrency` holds exactly across all cores with no semaphore (a session waiting
//! for its next request keeps its worker, so it counts against the limit). Waits use the
//! core's precise [`Timers`] (a timerfd), not monoio's millisecond wheel, so a request leaves
//! within microseconds of its scheduled time.
//!
//! With several replicas a worker keeps a connection to the replica of its last request and
//! trades it through its core's per-replica pool when a session goes to another one (an
//! index into the pool, precomputed per session: nothing is looked up by name).
//!
//! A stop ([`CoreStop`]) ends a wait at once (the request is not sent) and cuts an exchange
//! still running when the grace period is over (a failure, `interrupted`).

use std::cell::RefCell;

use bytes::Bytes;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::http::conn::Connection;
use crate::http::request::PreparedRequest;

use super::exchange::{exchange, ExchangeBuffers, Measured, ResponseLimits, SentMark};
use super::lanes::{run_lane, LaneWorker};
use super::live::Finished;
use super::recorder::{nonzero_ns, Failure, Gaps, Histograms, Record, TokenCount, WorkerLog};
use super::replicas::Pool;
use super::session::Answer;
use super::session::{FollowUps, NextRequest, Reply};
use super::stop::{CoreStop, StopCause};
use super::RunShared;
use crate::runtime::timer::Timers;

/// What a worker shares with the other workers of its core.
pub struct CoreHandles {
    pub timers: Rc<Timers>,
    pub stop: Rc<CoreStop>,
    /// The worker's slot in `stop`.
    pub slot: usize,
    /// The core's idle connections by replica: a worker parks its connection there when its
    /// next request goes to another replica, and at its end.
    pub pool: Rc<RefCell<Pool>>,
    /// The core's slot in the run's live counters.
    pub live: usize,
}

fn ns_since(epoch: Instant, t: Instant) -> u64 {
    t.saturating_duration_since(epoch).as_nanos() as u64
}

/// A worker's state across the requests it runs.
struct Worker {
    shared: Arc<RunShared>,
    epoch: Instant,
    conn: Option<Connection>,
    /// The replica `conn` is (or would be) connected to.
    replica: usize,
    histograms: Rc<RefCell<Histograms>>,
    core: CoreHandles,
    log: WorkerLog,
    bufs: ExchangeBuffers,
    /// A request's parts with another replica's `Host` line (reused from request to request).
    parts: Vec<Bytes>,
    /// The probe lane: its requests are not the workload's (no progress count).
    probe: bool,
    /// When the current request was fully written (`bufs` stamps it), for the requests the
    /// workload cancels; `None` when it cancels none.
    sent_mark: Option<Rc<SentMark>>,
}

/// Runs sessions until the schedule is exhausted (or the run is stopped); returns its log,
/// its connection parked in the core's pool (kept alive for the next run when the server
/// keeps it). `conn`: the replica of the connection it starts with, and the connection.
///
/// A plain function that builds the worker and returns an `async move` block that owns it
/// and drives [`Worker::run_sessions`] by reference: an `async fn` taking the worker (or its
/// parts) by value would hold it twice in its state, as argument and as local (~460 bytes
/// per worker).
pub fn run_worker(
    shared: Arc<RunShared>,
    epoch: Instant,
    conn: (usize, Option<Connection>),
    histograms: Rc<RefCell<Histograms>>,
    core: CoreHandles,
    log: WorkerLog,
) -> impl std::future::Future<Output = WorkerLog> {
    let mut w = Worker::new(shared, epoch, conn, histograms, core, log);
    async move {
        let sessions = w.shared.workload.sessions.clone();
        match sessions.as_deref().and_then(|s| s.lanes()) {
            Some(lanes) => w = run_lane(w, lanes).await,
            None => w.run_sessions().await,
        }
        w.shared.workers_left.fetch_sub(1, Ordering::AcqRel);
        w.park();
        w.log
    }
}

impl Worker {
    /// Claims sessions from the cursor and runs them until the schedule is exhausted, a
    /// session's failure ends the worker, or the run is stopped.
    async fn run_sessions(&mut self) {
        let epoch = self.epoch;
        let sessions = self.shared.workload.requests.len();
        loop {
            if self.stopped() {
                break;
            }
            let session = self.shared.cursor.fetch_add(1, Ordering::Relaxed);
            if session >= sessions {
                break;
            }
            let offset = self
                .shared
                .workload
                .arrivals
                .as_ref()
                .map_or(Duration::ZERO, |a| a[session]);
            let scheduled = epoch + offset;
            let was_waiting = self.wait_until(scheduled).await;
            if self.stopped_for(scheduled) {
                // Claimed but never sent: the run counts it as not sent.
                break;
            }
            if !self.run_session(session, scheduled, was_waiting).await {
                break;
            }
        }
    }
}

/// The probe lane (`Workload::probe`): its request, then its interval, again and again
/// until the workload's workers are all done (or the run is stopped), as Python's
/// `probe_loop` does. Its records are its own: not counted in progress or histograms.
pub async fn run_probe(
    shared: Arc<RunShared>,
    epoch: Instant,
    conn: Option<Connection>,
    core: CoreHandles,
) -> WorkerLog {
    // Its own histograms: the probes are not the workload's latencies.
    let histograms = Rc::new(RefCell::new(Histograms::default()));
    let log = WorkerLog::with_capacity(64, 1, true);
    let mut w = Worker::new(shared, epoch, (0, conn), histograms, core, log);
    w.probe = true;
    let Some(probe) = w.shared.workload.probe.clone() else {
        w.park();
        return w.log;
    };
    let mut index = 0;
    while !w.stopped() && w.shared.workers_left.load(Ordering::Acquire) > 0 {
        let turn = Turn {
            request: &probe.request,
            client_prompt_len: 1,
            scheduled: Instant::now(),
            was_waiting: false,
            replica: 0,
        };
        let rec = w.send(index, turn).await;
        w.keep(rec);
        index += 1;
        w.wait_until(Instant::now() + probe.interval).await;
    }
    w.park();
    w.log
}

impl Worker {
    fn new(
        shared: Arc<RunShared>,
        epoch: Instant,
        (replica, conn): (usize, Option<Connection>),
        histograms: Rc<RefCell<Histograms>>,
        core: CoreHandles,
        log: WorkerLog,
    ) -> Worker {
        let limits = ResponseLimits::new(shared.options.max_response_events);
        // Made before the clock starts, once per worker, and only when requests are cancelled.
        let sent_mark = shared
            .workload
            .cancel
            .as_ref()
            .map(|_| Rc::new(SentMark::default()));
        Worker {
            shared,
            epoch,
            conn,
            replica,
            histograms,
            core,
            log,
            bufs: ExchangeBuffers::new(limits).with_sent_mark(sent_mark.clone()),
            parts: Vec::new(),
            probe: false,
            sent_mark,
        }
    }

    /// Connects the worker to replica `r`: its connection, if to another replica, goes to
    /// the core's pool, and it takes one to `r` from there (none: the exchange opens one).
    fn use_replica(&mut self, r: usize) {
        if r == self.replica {
            return;
        }
        let mut pool = self.core.pool.borrow_mut();
        if let Some(c) = self.conn.take() {
            pool[self.replica].push(c);
        }
        self.conn = pool[r].pop();
        self.replica = r;
    }

    /// Leaves the worker's connection in the core's pool (for the next run).
    fn park(&mut self) {
        if let Some(c) = self.conn.take() {
            self.core.pool.borrow_mut()[self.replica].push(c);
        }
    }

    /// The run was stopped (Ctrl-C) or this core reached the run's time bound.
    fn stopped(&self) -> bool {
        self.shared.stop.load(Ordering::Acquire) || self.core.stop.stopped()
    }

    /// [`Worker::stopped`], or a request due at `scheduled` is not before the run's time
    /// bound (decided by the schedule, not by which of two timers due together fired first).
    fn stopped_for(&self, scheduled: Instant) -> bool {
        self.stopped()
            || self
                .shared
                .workload
                .time_bound
                .is_some_and(|b| scheduled >= self.epoch + b.after)
    }

    /// Waits until `at` or a stop; returns whether there was anything to wait for.
    async fn wait_until(&self, at: Instant) -> bool {
        let waiting = Instant::now() < at;
        if waiting {
            let CoreHandles {
                timers, stop, slot, ..
            } = &self.core;
            monoio::select! {
                () = timers.sleep_until(at) => {},
                () = stop.wait(*slot) => {},
            }
        }
        waiting
    }

    /// Runs session `session` from its first request to its last (or its first failure);
    /// returns false when the run was stopped while the session waited for a request.
    async fn run_session(&mut self, session: usize, scheduled: Instant, waited: bool) -> bool {
        let shared = self.shared.clone();
        let w = &shared.workload;
        let replica = w.replica(session, shared.replicas.len());
        let first = Turn {
            request: &w.requests[session],
            client_prompt_len: w.client_prompt_lens.get(session).copied().unwrap_or(0),
            scheduled,
            was_waiting: waited,
            replica,
        };
        let Some(source) = &w.sessions else {
            let rec = self.send(session, first).await;
            self.keep(rec);
            return true;
        };
        let turns = source.turns(session);
        let mut follow: Option<Box<dyn FollowUps + '_>> = None;
        let mut next: Option<NextRequest> = None;
        let mut previous_end = scheduled;
        for turn in 0..turns {
            let sent = match &next {
                None => self.send(source.record(session, turn), first).await,
                Some(n) => {
                    let scheduled = (previous_end + n.delay).max(self.epoch + n.not_before);
                    let waited = self.wait_until(scheduled).await;
                    if self.stopped_for(scheduled) {
                        return false;
                    }
                    let turn_req = Turn {
                        request: &n.request,
                        client_prompt_len: n.client_prompt_len,
                        scheduled,
                        was_waiting: waited,
                        replica,
                    };
                    self.send(source.record(session, turn), turn_req).await
                }
            };
            previous_end = self.epoch + Duration::from_nanos(sent.rec.end_ns);
            let last = turn + 1 == turns;
            // A cancelled turn ends its conversation: its user left, and there is no answer
            // for the next turn to quote.
            let cancelled = sent.cancelled;
            next = match (&sent.rec.failure, last) {
                _ if cancelled => None,
                (None, false) => {
                    let f = follow.get_or_insert_with(|| source.follow(session));
                    f.next(&self.reply(&sent.rec))
                }
                _ => None,
            };
            self.keep(sent);
            if next.is_none() {
                let rest = (turns - turn - 1) as u32;
                if cancelled {
                    self.log.session_cancelled += rest;
                } else if !self.stopped() {
                    self.log.session_ended += rest;
                }
                return true;
            }
        }
        true
    }

    /// What `rec` returned, for the source of the session's next request.
    fn reply<'a>(&'a self, rec: &Record) -> Reply<'a> {
        let text = &self.log.text[rec.text.start as usize..rec.text.end as usize];
        Reply {
            // Token texts are whole `str`s, so their concatenation is valid UTF-8.
            text: std::str::from_utf8(text).unwrap_or_default(),
            prompt_tokens: rec.usage_prompt_tokens.get(),
            completion_tokens: rec.usage_completion_tokens.get(),
            finish_reason: rec.finish_reason,
        }
    }

    /// Sends one request and measures it; the record is not kept yet (its text may still be
    /// needed for the session's next request).
    async fn send(&mut self, index: usize, turn: Turn<'_>) -> Sent {
        self.use_replica(turn.replica);
        let shared = &*self.shared;
        let CoreHandles {
            timers, stop, slot, ..
        } = &self.core;
        let parts = shared
            .replicas
            .parts(turn.replica, turn.request, &mut self.parts);
        let start = Instant::now();
        let (itl0, text0) = self.log.arena_marks();
        let mut m = Measured::default();
        if !self.probe {
            // One relaxed add per request, read by the progress bar's ticker thread.
            shared.sent.fetch_add(1, Ordering::Relaxed);
            let live = shared.live.core(self.core.live);
            live.sent();
            if turn.was_waiting {
                live.dispatch_lag(start.saturating_duration_since(turn.scheduled).as_nanos() as u64);
            }
        }
        let deadline = start.checked_add(shared.options.request_timeout);
        // `--request-cancellation-rate`: a chosen request's connection is closed `delay`
        // after the request was fully written, unless its response ended first.
        let cancel_after = match &shared.workload.cancel {
            Some(c) if !self.probe && c.is_chosen(index) => Some(c.delay),
            _ => None,
        };
        let mark = self.sent_mark.as_deref().filter(|_| cancel_after.is_some());
        if let Some(mark) = mark {
            mark.reset();
        }
        let cancel = async {
            match (mark, cancel_after) {
                (Some(mark), Some(delay)) => {
                    let written = mark.written().await;
                    timers.sleep_until(written + delay).await;
                }
                _ => std::future::pending().await,
            }
        };
        // The exchange is built inside the deadline future, not bound to a local first: a
        // local would be a second ~1.5 KB slot in every worker's future.
        let outcome = monoio::select! {
            done = timers.timeout_at(
                deadline,
                exchange(
                    &mut self.conn,
                    shared.replicas.endpoint(turn.replica),
                    parts,
                    shared.workload.mode,
                    &mut self.bufs,
                    &mut self.log,
                    &mut m,
                ),
            ) => done.map_or(Outcome::TimedOut, Outcome::Done),
            () = stop.grace_over(*slot, timers) => Outcome::Stopped,
            () = cancel => Outcome::Cancelled,
        };
        let mut cancelled = false;
        let result = match outcome {
            Outcome::Done(result) => result,
            cut => {
                // The exchange was dropped mid-response: its connection is ended now (for a
                // cancel, that close is the point; `Connection::abort`) and neither it nor
                // the buffers (which a cancelled read may still have lent to the kernel) are
                // reused; the next request opens a new connection.
                if let Some(conn) = self.conn.take() {
                    conn.abort();
                }
                self.bufs = self.bufs.renewed();
                match cut {
                    // Cut at the time bound: cancelled, like a cancel on purpose.
                    Outcome::Stopped if stop.cause() == StopCause::TimeBound => {
                        cancelled = true;
                        Ok(())
                    }
                    Outcome::Stopped => Err(interrupted_failure(shared.options.interrupt_grace)),
                    Outcome::Cancelled => {
                        cancelled = true;
                        Ok(())
                    }
                    _ => Err(timeout_failure(shared.options.request_timeout)),
                }
            }
        };
        let end = Instant::now();
        let (itl1, text1) = self.log.arena_marks();
        let epoch = self.epoch;
        let rec = Record {
            index: index as u32,
            scheduled_ns: ns_since(epoch, turn.scheduled),
            start_ns: ns_since(epoch, start),
            first_token_ns: m.first_token.map(|t| nonzero_ns(ns_since(epoch, t))),
            first_output_ns: m.first_output.map(|t| nonzero_ns(ns_since(epoch, t))),
            last_token_ns: m.last_token.map_or(0, |t| ns_since(epoch, t)),
            itl: itl0..itl1,
            text: text0..text1,
            usage_prompt_tokens: TokenCount::of(m.facts.usage_prompt_tokens),
            usage_completion_tokens: TokenCount::of(m.facts.usage_completion_tokens),
            usage_reasoning_tokens: TokenCount::of(m.facts.usage_reasoning_tokens),
            client_prompt_len: turn.client_prompt_len,
            was_waiting: turn.was_waiting,
            replica: turn.replica as u16,
            finish_reason: m.facts.finish_reason,
            failure: result.err().map(Box::new),
            end_ns: ns_since(epoch, m.end.unwrap_or(end)),
        };
        Sent {
            rec,
            cancelled,
            cached: TokenCount::of(m.facts.usage_cached_tokens),
        }
    }

    /// Keeps a finished record: drops the data it does not need, feeds the histograms.
    fn keep(&mut self, sent: Sent) {
        let Sent {
            mut rec, cancelled, ..
        } = sent;
        let log = &mut self.log;
        if cancelled {
            // Counted apart: neither completed nor failed, in no latency or histogram.
            log.itl_ns.truncate(rec.itl.start as usize);
            log.text.truncate(rec.text.start as usize);
            log.cancelled += 1;
            log.cancelled_end_ns = log.cancelled_end_ns.max(rec.end_ns);
            if !self.probe {
                self.shared.live.core(self.core.live).cancelled();
            }
            self.shared.completed.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if !self.probe {
            let live = self.shared.live.core(self.core.live);
            match &rec.failure {
                Some(f) => {
                    self.shared.failed.fetch_add(1, Ordering::Relaxed);
                    live.failed(&f.kind);
                }
                None => live.completed(finished(&rec, &log.itl_ns)),
            }
        }
        if rec.failure.is_some() {
            // A failed request keeps no partial data (Python: itl [] and text "").
            log.itl_ns.truncate(rec.itl.start as usize);
            rec.itl.end = rec.itl.start;
            log.text.truncate(rec.text.start as usize);
            rec.text.end = rec.text.start;
        } else if rec.usage_completion_tokens.get().is_some_and(|c| c > 0)
            && !self.shared.options.keep_all_text
        {
            // The server counted the tokens; the text is only needed with --save-detailed.
            log.text.truncate(rec.text.start as usize);
            rec.text.end = rec.text.start;
        }
        log.push(rec, &mut self.histograms.borrow_mut());
        if !self.probe {
            self.shared.completed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A lane's worker (see [`super::lanes`]): the lane sends each request on a worker of its
/// own while it is in flight, made on its core when it needs one more.
impl LaneWorker for Worker {
    type Sent = Sent;
    type Maker = (
        Arc<RunShared>,
        Instant,
        Rc<RefCell<Histograms>>,
        Rc<Timers>,
        Rc<CoreStop>,
        Rc<RefCell<Pool>>,
        usize,
    );

    fn maker(&self) -> Self::Maker {
        (
            self.shared.clone(),
            self.epoch,
            self.histograms.clone(),
            self.core.timers.clone(),
            self.core.stop.clone(),
            self.core.pool.clone(),
            self.core.live,
        )
    }

    fn make((shared, epoch, histograms, timers, stop, pool, live): &Self::Maker) -> Self {
        let handles = CoreHandles {
            timers: timers.clone(),
            stop: stop.clone(),
            slot: stop.add_slot(),
            pool: pool.clone(),
            live: *live,
        };
        let tokens = shared.workload.expected_tokens;
        let log = WorkerLog::with_capacity(16, tokens, shared.options.keep_all_text);
        Worker::new(
            shared.clone(),
            *epoch,
            (0, None),
            histograms.clone(),
            handles,
            log,
        )
    }

    async fn send_now(
        mut self,
        index: u32,
        request: PreparedRequest,
        client_prompt_len: u32,
    ) -> (Self, Sent) {
        let turn = Turn {
            request: &request,
            client_prompt_len,
            scheduled: Instant::now(),
            was_waiting: true,
            replica: 0,
        };
        let sent = self.send(index as usize, turn).await;
        (self, sent)
    }

    fn answer<'a>(&'a self, sent: &'a Sent) -> Answer<'a> {
        Answer {
            cached_tokens: sent.cached.get(),
            text: self.reply(&sent.rec).text,
            ..Answer::of(&sent.rec, sent.cancelled)
        }
    }

    fn keep(&mut self, sent: Sent) {
        Worker::keep(self, sent);
    }

    fn run_stopped(&self) -> bool {
        self.stopped()
    }

    fn halt((shared, ..): &Self::Maker) {
        shared.stop.store(true, Ordering::Release);
        shared.wires.pull();
    }

    fn clock(&self) -> (Instant, Option<Instant>, Rc<Timers>, Rc<CoreStop>) {
        let bound = self
            .shared
            .workload
            .time_bound
            .map(|b| self.epoch + b.after);
        (
            self.epoch,
            bound,
            self.core.timers.clone(),
            self.core.stop.clone(),
        )
    }

    fn absorb(&mut self, mut sibling: Self) {
        sibling.park();
        self.log.absorb(std::mem::take(&mut sibling.log));
    }
}

/// A completed record as the live counters take it (token counts: the server's usage, else
/// the client's prompt length and the token events seen).
fn finished<'a>(rec: &Record, gaps: &'a Gaps) -> Finished<impl Iterator<Item = u64> + 'a> {
    let first = rec.first_token_ns.map(|t| t.get());
    let events = rec.itl.len() as u64 + u64::from(first.is_some());
    let output_tokens = rec.usage_completion_tokens.get().unwrap_or(events);
    let ttft_ns = first.map(|t| t.saturating_sub(rec.start_ns));
    let tpot_ns = first
        .filter(|_| output_tokens > 1)
        .map(|t| rec.last_token_ns.saturating_sub(t) / (output_tokens - 1));
    let e2el_ns = match first {
        Some(_) => rec.last_token_ns,
        None => rec.end_ns,
    }
    .saturating_sub(rec.start_ns);
    Finished {
        prompt_tokens: rec
            .usage_prompt_tokens
            .get()
            .unwrap_or(u64::from(rec.client_prompt_len)),
        output_tokens,
        ttft_ns,
        tpot_ns,
        e2el_ns,
        gaps: gaps.range(rec.itl.clone()),
    }
}

/// How an exchange raced against its limits ended.
enum Outcome {
    Done(Result<(), Failure>),
    /// `--request-timeout-sec` passed.
    TimedOut,
    /// The run was stopped and the grace period is over.
    Stopped,
    /// Cancelled on purpose (`Workload::cancel`).
    Cancelled,
}

/// A request as sent: its record, and whether the client cancelled it on purpose
/// (`Workload::cancel`: counted apart, not kept, so not a field of the kept record).
pub(super) struct Sent {
    rec: Record,
    cancelled: bool,
    /// `usage.prompt_tokens_details.cached_tokens`: told to a lane (the agentic replay
    /// records it per request), not kept in the record, whose size is the run's memory.
    cached: TokenCount,
}

/// One request of a session and when it was due.
#[derive(Clone, Copy)]
struct Turn<'a> {
    request: &'a PreparedRequest,
    client_prompt_len: u32,
    scheduled: Instant,
    was_waiting: bool,
    /// The replica it goes to.
    replica: usize,
}

fn timeout_failure(limit: Duration) -> Failure {
    Failure {
        kind: "timeout".into(),
        error: "TimeoutError".into(),
        detail: format!("no complete response within {limit:?} (--request-timeout-sec)"),
    }
}

fn interrupted_failure(grace: Duration) -> Failure {
    Failure {
        kind: "interrupted".into(),
        error: "Interrupted".into(),
        detail: format!("still running {grace:?} after the run was stopped (Ctrl-C or SIGTERM)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_past_its_timeout_fails_as_python_names_it() {
        let f = timeout_failure(Duration::from_secs(5));
        assert_eq!(
            (f.kind.as_str(), f.error.as_str()),
            ("timeout", "TimeoutError")
        );
        assert!(f.detail.contains("--request-timeout-sec"), "{}", f.detail);
    }

    #[test]
    fn a_request_still_running_after_a_stop_is_interrupted() {
        let f = interrupted_failure(Duration::from_millis(500));
        assert_eq!(f.kind.as_str(), "interrupted");
        assert!(f.detail.contains("Ctrl-C or SIGTERM"), "{}", f.detail);
    }

    #[test]
    fn an_instant_before_the_epoch_counts_as_the_epoch() {
        let epoch = Instant::now() + Duration::from_secs(1);
        assert_eq!(ns_since(epoch, Instant::now()), 0);
        assert_eq!(ns_since(epoch, epoch + Duration::from_micros(3)), 3_000);
    }
}
