//! The thread-per-core engine: pinned monoio runtimes, one precomputed schedule claimed through
//! an atomic cursor, per-core recorders merged after the run.
//!
//! Shape (DESIGN.md): the caller prepares every request's bytes and arrival offset before the
//! clock starts; [`run`] starts one thread per core, each with its own runtime, connections,
//! buffers and recorder; the only state shared during the run is the request cursor (plus a
//! completion counter for the progress bar and a stop flag). Workers are spread round-robin
//! over the cores; their number is the concurrency limit.

pub mod exchange;
pub mod limits;
pub mod recorder;
pub mod runtime;
pub mod schedule;
mod stop;
pub mod timer;
mod worker;

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, OnceLock};
use std::time::{Duration, Instant};

use crate::http::conn::{Connection, Endpoint};
use crate::http::request::PreparedRequest;

pub use exchange::ResponseMode;
use recorder::{Histograms, Merged, WorkerLog};
pub use runtime::{DriverChoice, ResolvedDriver};
use stop::{CoreStop, StopWires};
use timer::Timers;

/// The requests of one run and when to send them.
#[derive(Clone)]
pub struct Workload {
    pub requests: Arc<[PreparedRequest]>,
    /// The client's prompt length per request (replaced by the server's usage when sent).
    pub client_prompt_lens: Arc<[u32]>,
    /// Arrival offset of each request from the start of the run; `None` = all at once.
    pub arrivals: Option<Arc<[Duration]>>,
    pub max_concurrency: Option<usize>,
    pub mode: ResponseMode,
    /// Per request, the earlier request that must finish before it is sent (a Bailian
    /// child turn's parent); `None` = independent requests.
    pub parents: Option<Arc<[Option<u32>]>>,
    /// Expected token events per request (sizes the ITL arenas before the clock starts).
    pub expected_tokens: usize,
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
    /// After a stop (Ctrl-C), how long requests in flight may still finish before they are
    /// cancelled and counted as failed (`interrupted`).
    pub interrupt_grace: Duration,
}

/// Cross-core state of a run.
struct Shared {
    endpoint: Endpoint,
    workload: Workload,
    options: EngineOptions,
    cursor: AtomicUsize,
    completed: AtomicUsize,
    /// Completion time (ns since the epoch, 0 = not yet) per request, kept only when some
    /// request waits for another (`Workload::parents`).
    finished: Option<Box<[AtomicU64]>>,
    stop: AtomicBool,
    /// Wakes every core at a stop, including workers waiting for an arrival time.
    wires: StopWires,
    epoch: OnceLock<Instant>,
    ready: Barrier,
    go: Barrier,
}

/// A handle to a running engine: progress and stop, readable from another thread.
#[derive(Clone)]
pub struct Progress(Arc<Shared>);

impl Progress {
    pub fn completed(&self) -> usize {
        self.0.completed.load(Ordering::Relaxed)
    }
    pub fn total(&self) -> usize {
        self.0.workload.requests.len()
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

/// What a run measured.
pub struct RunReport {
    pub merged: Merged,
    /// From the start of the run to the end of the last response (Python's duration).
    pub duration: Duration,
    pub epoch: Instant,
    pub workers: usize,
    /// Requests that were never sent (the run was stopped).
    pub not_sent: usize,
}

/// Errors that prevent a run from happening at all.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("cannot start a runtime on core {core}: {source}")]
    Runtime { core: usize, source: std::io::Error },
    #[error("cannot start a worker thread: {0}")]
    Thread(std::io::Error),
    #[error("cannot create the eventfd that stops a run: {0}")]
    StopSignal(std::io::Error),
    #[error("a worker thread panicked")]
    Panicked,
    /// The planned connections do not fit in the process's file or port limits.
    #[error("{0}")]
    Limits(String),
}

/// Number of workers: the concurrency limit, never more than the requests.
fn worker_count(w: &Workload) -> usize {
    let n = w.requests.len();
    w.max_concurrency
        .map_or(n, |c| c.min(n))
        .max(usize::from(n > 0))
}

/// Runs the workload to completion. `on_progress` is called with a [`Progress`] handle on the
/// calling thread while the cores run (progress bar, Ctrl-C).
pub fn run(
    endpoint: Endpoint,
    workload: Workload,
    options: EngineOptions,
    on_progress: impl FnOnce(Progress),
) -> Result<RunReport, EngineError> {
    let cores = if options.cores.is_empty() {
        vec![0]
    } else {
        options.cores.clone()
    };
    let workers = worker_count(&workload);
    // One socket per worker: fail now, clearly, rather than with EMFILE mid-run.
    limits::ensure_capacity(workers, endpoint.source.len()).map_err(EngineError::Limits)?;
    let threads = cores.len().min(workers.max(1));
    let wires = StopWires::new(threads).map_err(EngineError::StopSignal)?;
    let finished = workload
        .parents
        .as_ref()
        .map(|p| (0..p.len()).map(|_| AtomicU64::new(0)).collect());
    let shared = Arc::new(Shared {
        endpoint,
        workload,
        finished,
        options,
        cursor: AtomicUsize::new(0),
        completed: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
        wires,
        epoch: OnceLock::new(),
        ready: Barrier::new(threads + 1),
        go: Barrier::new(threads + 1),
    });
    let mut handles = Vec::with_capacity(threads);
    for (t, &core) in cores.iter().take(threads).enumerate() {
        let per_core = workers / threads + usize::from(t < workers % threads);
        let shared = shared.clone();
        let wire = shared.wires.receiver(t).map_err(EngineError::StopSignal)?;
        let handle = std::thread::Builder::new()
            .name(format!("vllm-bench-core{core}"))
            .spawn(move || core_thread(core, per_core, shared, wire))
            .map_err(EngineError::Thread)?;
        handles.push(handle);
    }
    shared.ready.wait();
    let epoch = Instant::now();
    let _ = shared.epoch.set(epoch);
    shared.go.wait();
    on_progress(Progress(shared.clone()));
    let mut logs = Vec::with_capacity(workers);
    let mut hists = Vec::with_capacity(threads);
    let mut first_error = None;
    for (h, &core) in handles.into_iter().zip(&cores) {
        match h.join() {
            Ok(Ok((l, hist))) => {
                logs.extend(l);
                hists.push(hist);
            }
            Ok(Err(e)) => {
                first_error = first_error.or(Some(EngineError::Runtime { core, source: e }))
            }
            Err(_) => first_error = first_error.or(Some(EngineError::Panicked)),
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    let total = shared.workload.requests.len();
    let merged = recorder::merge(logs, hists, total);
    let duration = Duration::from_nanos(merged.last_end_ns);
    let not_sent = total - merged.outputs.len();
    Ok(RunReport {
        merged,
        duration,
        epoch,
        workers,
        not_sent,
    })
}

type CoreResult = std::io::Result<(Vec<WorkerLog>, Histograms)>;

/// One core: build the runtime, open connections, wait for the common start, run workers
/// (their arrival waits share the core's precise [`Timers`]).
/// The barriers are always reached, even on error, so a failing core cannot hang the others.
fn core_thread(
    core: usize,
    workers: usize,
    shared: Arc<Shared>,
    wire: std::os::fd::OwnedFd,
) -> CoreResult {
    if shared.options.pin {
        runtime::pin_current_thread(core);
    }
    let mut rt = match runtime::build_runtime(shared.options.driver) {
        Ok(rt) => rt,
        Err(e) => {
            shared.stop.store(true, Ordering::Relaxed);
            shared.ready.wait();
            shared.go.wait();
            return Err(e);
        }
    };
    rt.block_on(async move {
        // The timer loop never returns; spawned, it is dropped with the runtime once the
        // workers (the only future `block_on` waits for) are done.
        let timers = Rc::new(Timers::new());
        let loop_timers = timers.clone();
        monoio::spawn(async move { loop_timers.run().await });
        // Like the timer loop, the stop watcher is dropped with the runtime.
        let stop = Rc::new(CoreStop::new(workers, shared.options.interrupt_grace));
        let (watch_stop, watch_shared) = (stop.clone(), shared.clone());
        monoio::spawn(async move {
            watch_stop
                .watch(wire, || watch_shared.stop.load(Ordering::Acquire))
                .await
        });
        let mut conns: Vec<Option<Connection>> = Vec::with_capacity(workers);
        for _ in 0..workers {
            let c = if shared.options.preconnect {
                Connection::open(&shared.endpoint).await.ok()
            } else {
                None
            };
            conns.push(c);
        }
        shared.ready.wait();
        shared.go.wait();
        let epoch = *shared
            .epoch
            .get()
            .expect("epoch is set before the go barrier");
        let histograms = Rc::new(RefCell::new(Histograms::default()));
        let total = shared.workload.requests.len();
        let per_worker = total.div_ceil(worker_count(&shared.workload).max(1));
        let tokens = shared.workload.expected_tokens;
        let keep_text = shared.options.keep_all_text;
        let mut joins = Vec::with_capacity(workers);
        for (slot, conn) in conns.into_iter().enumerate() {
            let h = histograms.clone();
            let log = WorkerLog::with_capacity(per_worker, tokens, keep_text);
            let core = worker::CoreHandles {
                timers: timers.clone(),
                stop: stop.clone(),
                slot,
            };
            joins.push(monoio::spawn(worker::run_worker(
                shared.clone(),
                epoch,
                conn,
                h,
                core,
                log,
            )));
        }
        let mut logs = Vec::with_capacity(workers);
        for j in joins {
            logs.push(j.await);
        }
        let hist = histograms.borrow().clone();
        Ok((logs, hist))
    })
}
