//! The thread-per-core engine: pinned monoio runtimes, one precomputed schedule claimed through
//! an atomic cursor, per-core recorders merged after the run.
//!
//! Shape (DESIGN.md): the caller prepares every session's first request and arrival offset
//! before the clock starts (a session's later requests come from its [`SessionSource`]); [`Engine::start`] starts one thread per core, each with its own runtime,
//! timers and kept-alive connections, once per process; [`Engine::run`] then runs workloads
//! on them, each with fresh per-run state (cursor, recorders, histograms, stop). The only
//! state shared during a run is the session cursor (plus a completion counter for the
//! progress bar and a stop flag). Workers are spread round-robin over the cores; their number
//! is the concurrency limit.

mod core_thread;
pub mod exchange;
pub mod lanes;
pub mod limits;
pub mod live;
pub mod preconnect;
pub mod recorder;
pub mod replicas;
pub mod schedule;
pub mod session;
mod stop;
mod worker;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, OnceLock};
use std::time::{Duration, Instant};

use crate::http::request::PreparedRequest;

use crate::backends::ResponseMode;
pub use crate::runtime::{DriverChoice, ResolvedDriver};
use recorder::Merged;
pub use replicas::Replicas;
pub use session::SessionSource;
use stop::StopWires;

/// The sessions of one run and when to start them. Without a [`SessionSource`] every session
/// is one request: `requests[i]` is request `i`.
#[derive(Clone)]
pub struct Workload {
    /// The first request of each session, in the order the cursor hands them out.
    pub requests: Arc<[PreparedRequest]>,
    /// The client's prompt length per first request (replaced by the server's usage).
    pub client_prompt_lens: Arc<[u32]>,
    /// Arrival offset of each session's first request from the start of the run; `None` =
    /// all at once.
    pub arrivals: Option<Arc<[Duration]>>,
    /// Requests in flight never exceed this (the number of workers; a worker keeps its slot
    /// while its session waits for its next request).
    pub max_concurrency: Option<usize>,
    pub mode: ResponseMode,
    /// The later requests of sessions of more than one request.
    pub sessions: Option<Arc<dyn SessionSource>>,
    /// Expected token events per request (sizes the ITL arenas before the clock starts).
    pub expected_tokens: usize,
    /// `--probe-request-rate`: one request at a time beside the workload, outside the
    /// concurrency limit, until the workload's last request ended.
    pub probe: Option<Probe>,
    /// The replica of each session (`--base-url` repeated), decided before the clock;
    /// `None`: session `i` on replica `i mod R` (every session on the one server when
    /// there is one).
    pub replica_of: Option<Arc<[u16]>>,
    /// `--request-cancellation-rate`: the requests the client cancels on purpose.
    pub cancel: Option<schedule::Cancellations>,
    /// `--duration`: the run stops starting requests this long after its start.
    pub time_bound: Option<TimeBound>,
}

/// A time-bounded run (`--duration`, `--duration-grace`): `after` the run's start no request
/// is sent any more (those waiting are counted as not sent) and the requests in flight get
/// `grace` to finish; then they are cut and counted as cancelled (neither completed nor
/// failed: the bound ended them, not the server). Every core keeps the bound on its own
/// timers from the shared epoch, so no core waits for another to hear of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeBound {
    pub after: Duration,
    pub grace: Duration,
}

/// Python 0.33's probe requests: a one-token request sent again `interval` after each answer,
/// on a connection of its own, while the workload runs; measured apart from it.
#[derive(Clone)]
pub struct Probe {
    pub request: PreparedRequest,
    pub interval: Duration,
}

impl Workload {
    /// Requests planned: completed + failed + cancelled + not sent at the end of the run.
    pub fn total(&self) -> usize {
        self.sessions
            .as_ref()
            .map_or(self.requests.len(), |s| s.total())
    }

    /// The replica session `session` runs on, of `replicas`.
    pub fn replica(&self, session: usize, replicas: usize) -> usize {
        match &self.replica_of {
            Some(table) => usize::from(table[session]) % replicas.max(1),
            None => session % replicas.max(1),
        }
    }
}

/// How the engine runs.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Cores to run on, one thread each.
    pub cores: Vec<usize>,
    pub pin: bool,
    pub driver: ResolvedDriver,
    pub request_timeout: Duration,
    /// Open every worker's connection before the clock starts.
    pub preconnect: bool,
    /// Keep generated text even when the server reported usage (`--save-detailed`).
    pub keep_all_text: bool,
    /// SSE events one response may send (`--max-response-events`); see
    /// [`exchange::ResponseLimits`].
    pub max_response_events: u32,
    /// After a stop (Ctrl-C), how long requests in flight may still finish before they are
    /// cancelled and counted as failed (`interrupted`).
    pub interrupt_grace: Duration,
}

/// Cross-core state of one run: fresh for every run, shared by the cores that take part.
struct RunShared {
    replicas: Replicas,
    workload: Workload,
    options: EngineOptions,
    /// The next session to claim.
    cursor: AtomicUsize,
    completed: AtomicUsize,
    /// Requests sent (for the progress bar's in-flight count: sent − completed).
    sent: AtomicUsize,
    /// Requests that failed so far (for the progress bar).
    failed: AtomicUsize,
    /// The workload's workers still running (the probe lane ends when none is).
    workers_left: AtomicUsize,
    stop: AtomicBool,
    /// Wakes every core at a stop, including workers waiting for an arrival time (the
    /// engine's, shared by all its runs).
    wires: Arc<StopWires>,
    epoch: OnceLock<Instant>,
    ready: Barrier,
    go: Barrier,
    /// The set instant the run starts at (`run_at`), if any: cores open fresh connections
    /// for it, paced to be ready just before it (see [`preconnect`]).
    start: Option<Instant>,
    /// The engine's learned connect rate (the next set start's lead).
    connect_rate: Arc<preconnect::ConnectRate>,
    /// What the cores publish as the run goes (dashboard, `--metrics-listen`).
    live: Arc<live::LiveRun>,
}

/// A handle to a running engine: progress and stop, readable from another thread.
#[derive(Clone)]
pub struct Progress(Arc<RunShared>);

impl Progress {
    pub fn completed(&self) -> usize {
        self.0.completed.load(Ordering::Relaxed)
    }
    pub fn total(&self) -> usize {
        self.0.workload.total()
    }
    /// Requests sent and not finished yet.
    pub fn in_flight(&self) -> usize {
        // Read `completed` first: a request counted there was counted as sent before.
        let completed = self.completed();
        self.0
            .sent
            .load(Ordering::Relaxed)
            .saturating_sub(completed)
    }
    /// Requests that failed so far.
    pub fn failed(&self) -> usize {
        self.0.failed.load(Ordering::Relaxed)
    }
    /// The counters the cores publish as the run goes ([`live`]).
    pub fn live(&self) -> Arc<live::LiveRun> {
        self.0.live.clone()
    }
    /// The run's time bound (`--duration`), if it has one: the bar then shows time.
    pub fn time_bound(&self) -> Option<Duration> {
        self.0.workload.time_bound.map(|b| b.after)
    }
    /// Stops the run (Ctrl-C) at once: no request is claimed or sent any more, workers
    /// waiting for an arrival time give up their request (counted as not sent), and requests
    /// in flight get [`EngineOptions::interrupt_grace`] to finish before they are cancelled
    /// (counted as failed, reason `interrupted`).
    pub fn stop(&self) {
        self.0.stop.store(true, Ordering::Release);
        self.0.wires.pull();
    }
}

/// What one core's thread did during a run's measured window (client health).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CoreLoad {
    /// The CPU the core thread runs on.
    pub core: usize,
    /// CPU time the thread used (user + system) from the run's start to its workers' end.
    pub busy: Duration,
    /// That window's wall-clock length.
    pub window: Duration,
    /// Time in that window the thread was ready to run but waited for the CPU (another
    /// process had the core); `None` without `/proc/thread-self/schedstat`.
    pub waited: Option<Duration>,
    /// The longest any of the core's timers fired after its deadline: how long its event
    /// loop was held up at worst (heartbeat every 10 ms, so a stall is always seen).
    pub longest_stall: Duration,
}

/// What a run measured.
pub struct RunReport {
    pub merged: Merged,
    /// From the start of the run to the end of the last response (Python's duration).
    pub duration: Duration,
    pub epoch: Instant,
    pub workers: usize,
    /// Requests that were never sent (the run was stopped, or an earlier request of their
    /// session failed).
    pub not_sent: usize,
    /// Of those, the requests whose session ended early because one of its requests failed
    /// (or its source had no next request).
    pub not_sent_session_ended: usize,
    /// Requests the client cancelled on purpose (`Workload::cancel`): sent, then their
    /// connection closed before the response ended. Not in `merged` (neither completed nor
    /// failed, and in no latency).
    pub cancelled: usize,
    /// Requests never sent because an earlier request of their session was cancelled (also
    /// counted in `not_sent`).
    pub not_sent_session_cancelled: usize,
    /// The probe requests (`Workload::probe`), in the order they were sent.
    pub probes: Vec<crate::metrics::RequestOutput>,
    /// Each core's load, in core order.
    pub loads: Vec<CoreLoad>,
    /// How a run with a set start (`run_at`) started; `None` without one.
    pub start: Option<StartReport>,
}

/// How a run with a set start began: when its cores were ready and how late its clock
/// started. The clock (the epoch every time and arrival offset counts from) starts at the
/// set instant, or when the last core is ready if that is later: a run's duration never
/// counts connecting, and its arrivals keep their planned spacing instead of going out at
/// once to catch up. How late it started is this report's `late`, not hidden.
#[derive(Debug, Clone, PartialEq)]
pub struct StartReport {
    /// How long before the set instant the cores began opening their connections.
    pub lead: Duration,
    /// The epoch minus the set instant: zero when every core was ready in time.
    pub late: Duration,
    /// Each core's opening, in core order.
    pub cores: Vec<CoreStart>,
}

/// One core's opening of its connections before a set start.
#[derive(Debug, Clone, PartialEq)]
pub struct CoreStart {
    /// The CPU the core thread runs on.
    pub core: usize,
    /// Connections it opened ahead.
    pub opened: usize,
    /// Time it spent opening them (pauses excluded).
    pub connecting: Duration,
    /// When it was ready (connections open), ms after the set instant: negative when ready
    /// ahead.
    pub ready_ms: f64,
}

/// Errors that prevent an engine from starting or a run from happening at all.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// (The OS error is part of the message, not a `source`: it would be printed twice.)
    #[error("cannot start a runtime on core {core}: {error}")]
    Runtime { core: usize, error: std::io::Error },
    #[error("cannot start a worker thread: {0}")]
    Thread(std::io::Error),
    #[error("cannot create the eventfd that stops a run: {0}")]
    StopSignal(std::io::Error),
    #[error("a worker thread panicked")]
    Panicked,
    /// The planned connections do not fit in the process's file or port limits.
    #[error(transparent)]
    Limits(#[from] limits::LimitsError),
}

/// Number of workers: the concurrency limit, never more than the sessions.
fn worker_count(w: &Workload) -> usize {
    let n = w.requests.len();
    w.max_concurrency
        .map_or(n, |c| c.min(n))
        .max(usize::from(n > 0))
}

/// The persistent engine: one pinned thread per core, each with its runtime (io_uring ring),
/// precise timers, stop eventfd and pool of kept-alive connections, started once and then
/// asked to run workloads. The ready check, the warm-ups and the measured run (and, later,
/// each sweep point or repeated run) use the same threads, rings and connections; only the
/// per-run state (cursor, recorders, histograms, progress, stop) is new for each run.
/// Dropping the engine (or [`Engine::shutdown`]) stops and joins its threads.
pub struct Engine {
    replicas: Replicas,
    options: EngineOptions,
    cores: Vec<core_thread::CoreHandle>,
    wires: Arc<StopWires>,
    /// Connections per second a core last opened, learned across this engine's runs.
    connect_rate: Arc<preconnect::ConnectRate>,
}

impl Engine {
    /// Starts one thread per core of `options.cores` (core 0 when empty) and returns once
    /// every runtime is up. `replicas`: the server, or the servers a run spreads its
    /// sessions over (an [`Endpoint`](crate::http::conn::Endpoint) for one).
    pub fn start(
        replicas: impl Into<Replicas>,
        options: EngineOptions,
    ) -> Result<Engine, EngineError> {
        let replicas = replicas.into();
        let cores = if options.cores.is_empty() {
            vec![0]
        } else {
            options.cores.clone()
        };
        let wires = Arc::new(StopWires::new(cores.len()).map_err(EngineError::StopSignal)?);
        let mut handles = Vec::with_capacity(cores.len());
        for (t, &core) in cores.iter().enumerate() {
            let wire = wires.receiver(t).map_err(EngineError::StopSignal)?;
            handles.push(core_thread::CoreHandle::start(core, &options, wire)?);
        }
        Ok(Engine {
            replicas,
            options,
            cores: handles,
            wires,
            connect_rate: Arc::default(),
        })
    }

    /// The OS thread ids of the engine's core threads (they never change while it runs).
    pub fn thread_ids(&self) -> Vec<i32> {
        self.cores.iter().map(|c| c.tid).collect()
    }

    /// Runs `workload` to completion (or until stopped). `on_progress` is called with a
    /// [`Progress`] handle on the calling thread while the cores run (progress bar, Ctrl-C).
    pub fn run(
        &self,
        workload: Workload,
        on_progress: impl FnOnce(Progress),
    ) -> Result<RunReport, EngineError> {
        self.run_at(workload, None, on_progress)
    }

    /// [`Engine::run`] with its epoch at `start` (`--start-at`) when given: before it the
    /// cores open fresh connections (kept ones may have idled past the server's keep-alive
    /// timeout), beginning [`preconnect::lead`] ahead, get ready and wait; every arrival
    /// offset and time of the run counts from `start`, so runs in other processes started at
    /// the same instant share one time axis. If a core is not ready by `start`, the epoch is
    /// the moment the last one is, and [`RunReport::start`] says how late that was.
    /// `on_progress` is called before any wait, so a Ctrl-C during one stops the run (every
    /// request counted as not sent).
    pub fn run_at(
        &self,
        workload: Workload,
        start: Option<Instant>,
        on_progress: impl FnOnce(Progress),
    ) -> Result<RunReport, EngineError> {
        let workers = worker_count(&workload);
        // One socket per worker: fail now, clearly, rather than with EMFILE mid-run.
        limits::ensure_capacity(workers, self.replicas.endpoint(0).source.len())
            .map_err(EngineError::Limits)?;
        let threads = self.cores.len().min(workers.max(1));
        let total_planned = workload.total();
        // Checked before any core is handed the run: a core that cannot take it would leave
        // the others waiting at the start barrier.
        if !self
            .cores
            .iter()
            .take(threads)
            .all(core_thread::CoreHandle::alive)
        {
            return Err(EngineError::Panicked);
        }
        let shared = Arc::new(RunShared {
            replicas: self.replicas.clone(),
            workload,
            options: self.options.clone(),
            cursor: AtomicUsize::new(0),
            completed: AtomicUsize::new(0),
            sent: AtomicUsize::new(0),
            failed: AtomicUsize::new(0),
            workers_left: AtomicUsize::new(workers),
            stop: AtomicBool::new(false),
            wires: self.wires.clone(),
            epoch: OnceLock::new(),
            ready: Barrier::new(threads + 1),
            go: Barrier::new(threads + 1),
            start,
            connect_rate: self.connect_rate.clone(),
            live: Arc::new(live::LiveRun::new(threads, total_planned)),
        });
        let mut on_progress = Some(on_progress);
        // In proportion to the connections the busiest core opens (the cores pace
        // themselves from there, see `preconnect`); without preconnect, nothing to open.
        let lead = if self.options.preconnect {
            preconnect::lead(workers.div_ceil(threads), self.connect_rate.get())
        } else {
            preconnect::MIN_LEAD
        };
        if let Some(at) = start {
            // The progress hook first, so a Ctrl-C during the wait stops the run.
            if let Some(hook) = on_progress.take() {
                hook(Progress(shared.clone()));
            }
            wait_until(at.checked_sub(lead).unwrap_or(at), &shared.stop);
        }
        let mut replies = Vec::with_capacity(threads);
        for (t, core) in self.cores.iter().take(threads).enumerate() {
            let per_core = workers / threads + usize::from(t < workers % threads);
            // The probe lane, if any, runs on the first core.
            replies.push(core.run(shared.clone(), per_core, t == 0)?);
        }
        shared.ready.wait();
        let ready_at = Instant::now();
        let epoch = match start {
            // Not ready in time: the clock starts now, not at the missed instant (see
            // `StartReport`).
            Some(at) if ready_at > at => ready_at,
            Some(at) => wait_until(at, &shared.stop),
            None => ready_at,
        };
        let _ = shared.epoch.set(epoch);
        shared.go.wait();
        // Without a set start, once the cores run (the hook starts threads: not before go).
        if let Some(hook) = on_progress.take() {
            hook(Progress(shared.clone()));
        }
        let mut outputs = Vec::with_capacity(threads);
        let mut hists = Vec::with_capacity(threads);
        let mut probes = Vec::new();
        let mut loads = Vec::with_capacity(threads);
        let mut starts = Vec::with_capacity(threads);
        let mut first_error = None;
        for (reply, handle) in replies.into_iter().zip(&self.cores) {
            match reply.recv() {
                Ok(r) => {
                    loads.push(CoreLoad {
                        core: handle.core,
                        ..r.load
                    });
                    if let Some(at) = start {
                        starts.push(r.opening.start_of(handle.core, at));
                    }
                    outputs.push(r.outputs);
                    hists.push(r.histograms);
                    probes.extend(r.probe);
                }
                Err(_) => first_error = first_error.or(Some(EngineError::Panicked)),
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        let total = shared.workload.total();
        let not_sent_session_ended = outputs.iter().map(|c| c.session_ended).sum();
        let not_sent_session_cancelled = outputs.iter().map(|c| c.session_cancelled).sum();
        let cancelled = outputs.iter().map(|c| c.cancelled).sum();
        let merged = recorder::merge(outputs, hists, total);
        let duration = Duration::from_nanos(merged.last_end_ns);
        let not_sent = total - merged.outputs.len() - cancelled;
        Ok(RunReport {
            merged,
            duration,
            epoch,
            workers,
            not_sent,
            not_sent_session_ended,
            cancelled,
            not_sent_session_cancelled,
            probes: probes.into_iter().flatten().collect(),
            loads,
            start: start.map(|at| StartReport {
                lead,
                late: epoch.saturating_duration_since(at),
                cores: starts,
            }),
        })
    }

    /// Stops every core thread and joins it (also done on drop).
    pub fn shutdown(self) {}
}

impl Drop for Engine {
    fn drop(&mut self) {
        for c in self.cores.drain(..) {
            c.stop_and_join();
        }
    }
}

/// Sleeps until `at` (in slices, so a stop is seen within one) and returns `at`; a stop
/// ends the wait early.
fn wait_until(at: Instant, stop: &AtomicBool) -> Instant {
    const SLICE: Duration = Duration::from_millis(20);
    loop {
        let now = Instant::now();
        if now >= at || stop.load(Ordering::Acquire) {
            return at.min(now);
        }
        std::thread::sleep((at - now).min(SLICE));
    }
}

/// Runs one workload on an engine started for it alone (tests, one-off calls).
pub fn run(
    endpoint: crate::http::conn::Endpoint,
    workload: Workload,
    options: EngineOptions,
    on_progress: impl FnOnce(Progress),
) -> Result<RunReport, EngineError> {
    Engine::start(endpoint, options)?.run(workload, on_progress)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::request::{HeadTemplate, Method};

    /// `n` one-request sessions, at most `max_concurrency` in flight.
    fn workload(n: usize, max_concurrency: Option<usize>) -> Workload {
        let head = HeadTemplate::new(Method::Post, "/", "h", &[]);
        Workload {
            requests: (0..n).map(|_| head.build(None, None, b"")).collect(),
            client_prompt_lens: vec![1; n].into(),
            arrivals: None,
            max_concurrency,
            mode: ResponseMode::Whole,
            sessions: None,
            expected_tokens: 1,
            probe: None,
            replica_of: None,
            cancel: None,
            time_bound: None,
        }
    }

    #[test]
    fn workers_are_the_concurrency_limit_but_never_more_than_the_sessions() {
        assert_eq!(worker_count(&workload(10, Some(4))), 4);
        assert_eq!(worker_count(&workload(3, Some(4))), 3);
        assert_eq!(
            worker_count(&workload(7, None)),
            7,
            "no limit: one per session"
        );
        assert_eq!(
            worker_count(&workload(0, None)),
            0,
            "no sessions, no workers"
        );
        assert_eq!(
            worker_count(&workload(5, Some(0))),
            1,
            "a zero limit still runs the sessions"
        );
    }

    #[test]
    fn sessions_go_round_robin_over_replicas_unless_a_table_assigns_them() {
        let mut w = workload(5, None);
        let spread: Vec<_> = (0..5).map(|s| w.replica(s, 2)).collect();
        assert_eq!(spread, [0, 1, 0, 1, 0]);
        assert_eq!(w.replica(3, 0), 0, "no replica count is one server");
        w.replica_of = Some(vec![2, 2, 0, 1, 5].into());
        let spread: Vec<_> = (0..5).map(|s| w.replica(s, 3)).collect();
        assert_eq!(spread, [2, 2, 0, 1, 2]);
    }

    #[test]
    fn waiting_for_a_start_ends_at_once_when_the_run_is_stopped() {
        let stop = AtomicBool::new(true);
        let far = Instant::now() + Duration::from_secs(3600);
        let woke = wait_until(far, &stop);
        assert!(woke < far, "a stopped run does not wait for its start");
    }

    #[test]
    fn waiting_for_a_start_that_has_passed_returns_the_start() {
        let stop = AtomicBool::new(false);
        let past = Instant::now();
        assert_eq!(wait_until(past, &stop), past);
        let soon = Instant::now() + Duration::from_millis(5);
        assert_eq!(wait_until(soon, &stop), soon);
        assert!(Instant::now() >= soon);
    }
}
