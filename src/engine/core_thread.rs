//! One core of the persistent engine: a pinned thread that owns, for the engine's whole life,
//! its monoio runtime (one io_uring ring), its precise [`Timers`], its end of the stop
//! eventfd and a pool of kept-alive connections per replica, and runs the workers of each run
//! it is handed. Nothing here is created per run but the workers, their logs and the histograms.
//!
//! The thread waits for commands on a channel outside the runtime (`block_on` is entered
//! once per run), so an idle engine costs no CPU. Tasks spawned once (the timer loop) stay in
//! the runtime between runs and resume with the next `block_on`.

use std::cell::RefCell;
use std::os::fd::OwnedFd;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

use crate::http::conn::Connection;
use crate::metrics::RequestOutput;

use super::live::CoreCounters;
use super::preconnect::{self, Opening};
use super::recorder::{self, CoreOutputs, Histograms, WorkerLog};
use super::replicas::Pool;
use super::stop::{CoreStop, StopCause, StopReceiver};
use super::worker::{self, CoreHandles};
use super::{CoreLoad, EngineError, EngineOptions, RunShared};
use crate::runtime::timer::Timers;
use crate::runtime::{self, Runtime};

/// What one core hands back after a run: its workers' requests as outputs and its
/// histograms, and the probe lane's outputs when it ran here.
pub struct CoreResult {
    pub outputs: CoreOutputs,
    pub histograms: Histograms,
    pub probe: Option<Vec<RequestOutput>>,
    pub load: CoreLoad,
    /// How the core opened its connections before the run and when it was ready.
    pub opening: Opening,
}

/// A run for this core: the shared state, how many workers it runs here, and whether the
/// probe lane (`Workload::probe`) runs here.
struct Command {
    shared: Arc<RunShared>,
    workers: usize,
    probe_lane: bool,
    reply: mpsc::Sender<CoreResult>,
}

/// The engine's side of one core thread.
pub struct CoreHandle {
    /// The thread's OS id.
    pub tid: i32,
    /// The CPU the thread was started for.
    pub core: usize,
    commands: Option<mpsc::Sender<Command>>,
    thread: Option<JoinHandle<()>>,
}

impl CoreHandle {
    /// Starts the thread for `core` and returns once its runtime is up (or failed to start).
    pub fn start(
        core: usize,
        options: &EngineOptions,
        wire: OwnedFd,
    ) -> Result<CoreHandle, EngineError> {
        let (commands, inbox) = mpsc::channel();
        let (up_tx, up_rx) = mpsc::sync_channel(1);
        let (pin, driver) = (options.pin, options.driver);
        let thread = std::thread::Builder::new()
            .name(format!("vllm-bench-core{core}"))
            .spawn(move || {
                if pin {
                    runtime::pin_current_thread(core);
                }
                // SAFETY: gettid has no preconditions.
                let tid = unsafe { libc::gettid() };
                match runtime::build_runtime(driver) {
                    Ok(rt) => {
                        let _ = up_tx.send(Ok(tid));
                        serve(rt, wire, inbox);
                    }
                    Err(e) => {
                        let _ = up_tx.send(Err(e));
                    }
                }
            })
            .map_err(EngineError::Thread)?;
        match up_rx.recv() {
            Ok(Ok(tid)) => Ok(CoreHandle {
                tid,
                core,
                commands: Some(commands),
                thread: Some(thread),
            }),
            Ok(Err(error)) => {
                let _ = thread.join();
                Err(EngineError::Runtime { core, error })
            }
            Err(_) => Err(EngineError::Panicked),
        }
    }

    /// Hands the core its part of a run; the result arrives on the returned channel.
    pub fn run(
        &self,
        shared: Arc<RunShared>,
        workers: usize,
        probe_lane: bool,
    ) -> Result<mpsc::Receiver<CoreResult>, EngineError> {
        let (reply, result) = mpsc::channel();
        let sent = self.commands.as_ref().map(|c| {
            c.send(Command {
                shared,
                workers,
                probe_lane,
                reply,
            })
        });
        match sent {
            Some(Ok(())) => Ok(result),
            _ => Err(EngineError::Panicked),
        }
    }

    /// True while the thread can take a run (it has not died of a panic).
    pub fn alive(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Ends the thread (its loop ends with the channel) and joins it.
    pub fn stop_and_join(mut self) {
        drop(self.commands.take());
        if let Some(t) = self.thread.take() {
            // A thread that panicked has nothing left to clean up.
            let _ = t.join();
        }
    }
}

/// The core thread's life: set up what lives in the runtime, then one `block_on` per run.
fn serve(mut rt: Runtime, wire: OwnedFd, inbox: mpsc::Receiver<Command>) {
    let (timers, receiver) = rt.block_on(async move {
        let timers = Rc::new(Timers::new());
        let loop_timers = timers.clone();
        // Never returns; it stays in the runtime between runs and is dropped with it.
        monoio::spawn(async move { loop_timers.run().await });
        // Without the eventfd registered, a stop is still seen by polling the flag.
        (timers, StopReceiver::new(wire).ok())
    });
    let mut pool: Pool = Vec::new();
    while let Ok(cmd) = inbox.recv() {
        let probe = cmd.probe_lane && cmd.shared.workload.probe.is_some();
        let result = rt.block_on(run_workers(
            &cmd.shared,
            Lanes {
                workers: cmd.workers,
                probe,
            },
            &timers,
            receiver.as_ref(),
            &mut pool,
        ));
        crate::allocator::release_freed_pages();
        let _ = cmd.reply.send(result);
    }
}

/// What a core runs of a run: its workers, and maybe the probe lane.
struct Lanes {
    workers: usize,
    probe: bool,
}

/// One run's workers on this core: connections from the pool (or new ones before the clock
/// with preconnect, see [`preconnect`]), the common start, then every worker to its end;
/// their connections go back to the pool. The barriers are always reached; the epoch is set
/// once every core is at the first (with a set start: that instant, or later if a core was
/// not ready by then, reported in `Opening`).
async fn run_workers(
    shared: &Arc<RunShared>,
    lanes: Lanes,
    timers: &Rc<Timers>,
    receiver: Option<&StopReceiver>,
    pool: &mut Pool,
) -> CoreResult {
    let workers = lanes.workers;
    let replicas = shared.replicas.len();
    pool.resize_with(replicas, Vec::new);
    if shared.start.is_some() {
        // The run starts at a set instant: connections kept since the warm-ups have idled
        // and may be past the server's keep-alive timeout; open new ones now, just before.
        pool.iter_mut().for_each(Vec::clear);
    }
    // Worker `slot` starts with a connection to replica `slot mod R` (the replicas get
    // equal shares); it trades it through the pool when a session goes to another one.
    let mut conns: Vec<(usize, Option<Connection>)> = (0..workers)
        .map(|slot| (slot % replicas, pool[slot % replicas].pop()))
        .collect();
    let mut connecting = std::time::Duration::ZERO;
    if shared.options.preconnect {
        let missing: Vec<usize> = conns
            .iter()
            .filter(|(_, c)| c.is_none())
            .map(|&(r, _)| r)
            .collect();
        let (opened, took) = preconnect::open_ahead(shared, &missing, timers).await;
        connecting = took;
        let mut opened = opened.into_iter();
        for (_, c) in conns.iter_mut().filter(|(_, c)| c.is_none()) {
            *c = opened.next().flatten();
        }
    }
    for p in pool.iter_mut() {
        // Room for every worker's connection, so parking one never allocates mid-run.
        p.reserve(workers + 1);
    }
    let shared_pool = Rc::new(RefCell::new(std::mem::take(pool)));
    let opening = Opening {
        opened: conns.iter().filter(|(_, c)| c.is_some()).count(),
        took: connecting,
        ready_at: std::time::Instant::now(),
    };
    shared.ready.wait();
    shared.go.wait();
    let epoch = *shared
        .epoch
        .get()
        .expect("epoch is set before the go barrier");
    // The measured window starts here: CPU time and the event loop's lateness from now on.
    let cpu_at_start = thread_cpu_time();
    let waited_at_start = run_queue_wait();
    let _ = timers.take_longest_lateness();
    let histograms = Rc::new(RefCell::new(Histograms::default()));
    // The probe lane's slot, when it runs here, is the last one.
    let slots = workers + usize::from(lanes.probe);
    let stop = Rc::new(CoreStop::new(slots, shared.options.interrupt_grace));
    let total = shared.workload.total();
    let per_worker = total.div_ceil(super::worker_count(&shared.workload).max(1));
    let tokens = shared.workload.expected_tokens;
    let keep_text = shared.options.keep_all_text;
    let mut joins = Vec::with_capacity(workers);
    let live = shared.live.claim();
    let handles = |slot| CoreHandles {
        timers: timers.clone(),
        stop: stop.clone(),
        slot,
        pool: shared_pool.clone(),
        live,
    };
    for (slot, (replica, conn)) in conns.into_iter().enumerate() {
        let log = WorkerLog::with_capacity(per_worker, tokens, keep_text);
        joins.push(monoio::spawn(worker::run_worker(
            shared.clone(),
            epoch,
            (replica, conn),
            histograms.clone(),
            handles(slot),
            log,
        )));
    }
    let probe = lanes.probe.then(|| {
        // The probe lane asks the first replica.
        let conn = shared_pool.borrow_mut()[0].pop();
        monoio::spawn(worker::run_probe(
            shared.clone(),
            epoch,
            conn,
            handles(workers),
        ))
    });
    let mut logs = Vec::with_capacity(workers);
    let mut probe_log = None;
    {
        let work = async {
            for j in joins {
                logs.push(j.await);
            }
            if let Some(p) = probe {
                probe_log = Some(p.await);
            }
        };
        let watch = stop.watch(receiver, || shared.stop.load(Ordering::Acquire));
        // `--duration`: this core stops at the bound on its own timers (a Ctrl-C first wins).
        let bound = shared.workload.time_bound;
        let watch = async {
            let at_bound = async {
                match bound {
                    Some(b) => {
                        timers.sleep_until(epoch + b.after).await;
                        stop.trigger_with(b.grace, StopCause::TimeBound);
                    }
                    None => std::future::pending().await,
                }
            };
            monoio::select! {
                () = watch => {},
                () = at_bound => {},
            }
        };
        let work = async {
            monoio::select! {
                () = work => {},
                () = heartbeat(timers, shared.live.core(live), cpu_at_start) => {},
            }
        };
        let mut work = std::pin::pin!(work);
        let mut watch = std::pin::pin!(watch);
        monoio::select! {
            () = &mut work => {},
            // Stopped: the workers wind down on their own (arrival waits end, exchanges
            // get the grace period); wait for them.
            () = &mut watch => work.as_mut().await,
        }
    }
    let load = CoreLoad {
        // Filled in by the engine, which knows which CPU this thread is on.
        core: 0,
        busy: thread_cpu_time().saturating_sub(cpu_at_start),
        waited: run_queue_wait()
            .zip(waited_at_start)
            .map(|(end, start)| end.saturating_sub(start)),
        window: epoch.elapsed(),
        longest_stall: timers.take_longest_lateness(),
    };
    // Every worker parked its connection: they stay for the next run.
    *pool = std::mem::take(&mut *shared_pool.borrow_mut());
    let histograms = histograms.borrow().clone();
    CoreResult {
        outputs: recorder::outputs(logs),
        histograms,
        probe: probe_log.map(recorder::outputs_of),
        load,
        opening,
    }
}

/// How often the heartbeat sleeps: the event loop's stalls are measured as its timers'
/// lateness, and this keeps one timer due at least every 10 ms even in a run that sets none
/// (all at once, no arrival times), for 100 cheap wake-ups a second.
const HEARTBEAT: std::time::Duration = std::time::Duration::from_millis(10);

/// Every this many heartbeats (100 ms) the core publishes its CPU time to the live counters.
const BUSY_EVERY: u32 = 10;

/// Sleeps again and again on the core's timers (never returns; dropped with the run), and
/// now and then publishes the thread's CPU time since `cpu_at_start` (client health, live).
async fn heartbeat(timers: &Timers, live: &CoreCounters, cpu_at_start: std::time::Duration) {
    let mut beats = 0u32;
    loop {
        timers.sleep(HEARTBEAT).await;
        beats = beats.wrapping_add(1);
        if beats.is_multiple_of(BUSY_EVERY) {
            live.busy(thread_cpu_time().saturating_sub(cpu_at_start));
        }
    }
}

/// How long this thread has been runnable but waiting for a CPU (the second figure of
/// `/proc/thread-self/schedstat`, ns): time another process held the client's core. `None`
/// where the kernel does not export it.
fn run_queue_wait() -> Option<std::time::Duration> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns = text.split_whitespace().nth(1)?.parse().ok()?;
    Some(std::time::Duration::from_nanos(ns))
}

/// CPU time this thread has used (user + system), from the kernel's per-thread clock.
fn thread_cpu_time() -> std::time::Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec on the stack; the clock id is a constant.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return std::time::Duration::ZERO;
    }
    std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::stop::StopWires;

    fn options() -> EngineOptions {
        EngineOptions {
            cores: vec![0],
            pin: false,
            driver: runtime::resolve_driver(runtime::DriverChoice::Auto)
                .expect("a driver")
                .0,
            request_timeout: std::time::Duration::from_secs(1),
            preconnect: false,
            keep_all_text: false,
            max_response_events: 16,
            interrupt_grace: std::time::Duration::from_millis(10),
        }
    }

    #[test]
    fn a_core_thread_comes_up_with_its_os_id_and_ends_when_stopped() {
        let wires = StopWires::new(1).expect("stop wires");
        let core = CoreHandle::start(0, &options(), wires.receiver(0).expect("wire"))
            .expect("the core starts");
        assert!(core.tid > 0);
        assert_eq!(core.core, 0);
        assert!(core.alive(), "it waits for a run");
        // Returns only once the thread has ended (it would hang otherwise).
        core.stop_and_join();
    }

    #[test]
    fn thread_cpu_time_counts_this_threads_work() {
        let before = thread_cpu_time();
        let mut x = 0u64;
        // Bounded: a few hundred million steps at most.
        for i in 0..400_000_000u64 {
            x = std::hint::black_box(x.wrapping_add(i));
            if i % 1_000_000 == 0 && thread_cpu_time() > before {
                break;
            }
        }
        assert!(thread_cpu_time() > before, "{x}");
    }
}
