//! Lanes: a worker that runs a [`Lane`] instead of sessions (the agentic replay). A lane
//! decides itself what to send and when ([`Lane::step`]), from the responses that ended,
//! and may have several requests in flight at once (a tree's subagents run beside its root):
//! each goes out on a connection of the lane's own, taken from the lane's idle ones or,
//! when its requests in flight outgrow them, a new one (a worker of the same core, with its
//! own stop slot and log; the logs join the lane's at its end). Everything stays on the
//! worker's core: a tree's spawns and joins are core-local, nothing is shared but the run's
//! counters.
//!
//! The lane is asked at every change (a response ended, a timer fired) and answers with the
//! next request to send now (prepared before the clock, the lane only picks it), a time to
//! wait for, or that it waits for a response, or that it is done. A stop (Ctrl-C, the
//! time bound) ends its sends at once: the lane counts what it had due as not sent, and the
//! requests in flight get the grace period like any worker's.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use crate::http::request::PreparedRequest;

use super::recorder::{Failure, WorkerLog};
use super::worker::{CoreHandles, Sent, Turn, Worker};

/// The lanes of a run: one per worker (the run's `max_concurrency`).
pub trait LaneSource: Send + Sync {
    /// Lane `lane`'s state, made on the core that runs it (a lane is claimed once, in
    /// worker order).
    fn lane(&self, lane: usize) -> Box<dyn Lane>;
    /// The next lane to run (a shared cursor: each worker claims one).
    fn claim(&self) -> usize;
}

/// What a lane wants next.
pub enum LaneStep {
    /// Send `request` now; `ticket` names it in [`Lane::sent`] and [`Lane::ended`], `index`
    /// is its record's place among the run's records.
    Send {
        ticket: u64,
        index: u32,
        request: PreparedRequest,
        client_prompt_len: u32,
    },
    /// Nothing to send before this time (ns since the run's epoch).
    WaitUntil(u64),
    /// Only a response can move it on.
    AwaitResponse,
    /// The lane has nothing more to send and nothing in flight.
    Done,
}

/// How a request of a lane ended.
#[derive(Debug, Clone, Copy)]
pub struct Answer<'a> {
    /// Times in ns since the run's epoch.
    pub sent_ns: u64,
    pub first_token_ns: Option<u64>,
    pub end_ns: u64,
    /// Inter-token gaps recorded (0 for a failure: its partial data is not kept).
    pub itl_intervals: u32,
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    pub failure: Option<&'a Failure>,
    /// Cut by the run's stop (`--duration` + grace) or cancelled on purpose.
    pub cancelled: bool,
}

/// One lane's schedule, run on one core.
pub trait Lane {
    /// What to do at `now_ns` (since the run's epoch).
    fn step(&mut self, now_ns: u64) -> LaneStep;
    /// The request `ticket` went out at `now_ns`.
    fn sent(&mut self, ticket: u64, now_ns: u64);
    /// The response to `ticket` ended.
    fn ended(&mut self, ticket: u64, answer: &Answer<'_>);
    /// The run stopped: no more sends (the lane counts what it had due as not sent, in the
    /// run's total).
    fn stop(&mut self);
    /// The lane's run is over (every request in flight ended).
    fn finish(&mut self);
}

/// A wake-up for the lane's loop from the tasks of its requests (one core, one waiter).
#[derive(Default)]
struct Notify {
    set: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

impl Notify {
    fn notify(&self) {
        self.set.set(true);
        if let Some(w) = self.waker.borrow_mut().take() {
            w.wake();
        }
    }

    async fn wait(&self) {
        std::future::poll_fn(|cx| {
            if self.set.replace(false) {
                return Poll::Ready(());
            }
            *self.waker.borrow_mut() = Some(cx.waker().clone());
            Poll::Pending
        })
        .await;
    }
}

/// A request of the lane that ended, with the connection (worker) it used.
struct Returned {
    ticket: u64,
    worker: Worker,
    sent: Sent,
}

/// Runs the lane the worker `home` claims until it is done or the run stops; returns the
/// worker with every request of the lane in its log.
pub(super) async fn run_lane(home: Worker, source: &dyn LaneSource) -> Worker {
    let mut lane = source.lane(source.claim());
    let shared = home.shared.clone();
    let epoch = home.epoch;
    let core = &home.core;
    let (timers, stop) = (core.timers.clone(), core.stop.clone());
    let pool = core.pool.clone();
    let histograms = home.histograms.clone();
    // The loop's own stop slot: the home worker's is its exchanges'.
    let slot = stop.add_slot();
    let returned: Rc<RefCell<VecDeque<Returned>>> = Rc::default();
    let notify: Rc<Notify> = Rc::default();
    let mut idle: Vec<Worker> = vec![home];
    let mut made: Vec<Worker> = Vec::new();
    let mut in_flight = 0usize;
    let mut stopping = false;
    let tokens = shared.workload.expected_tokens;
    let keep_text = shared.options.keep_all_text;
    let ns_now = || Instant::now().saturating_duration_since(epoch).as_nanos() as u64;
    let bound = shared.workload.time_bound.map(|b| epoch + b.after);
    let stopped = || {
        shared.stop.load(Ordering::Acquire)
            || stop.stopped()
            || bound.is_some_and(|b| Instant::now() >= b)
    };
    loop {
        while let Some(r) = returned.borrow_mut().pop_front() {
            in_flight -= 1;
            let Returned {
                ticket,
                mut worker,
                sent,
            } = r;
            let rec = &sent.rec;
            let answer = Answer {
                sent_ns: rec.start_ns,
                first_token_ns: rec.first_token_ns.map(|t| t.get()),
                end_ns: rec.end_ns,
                itl_intervals: rec.itl.end - rec.itl.start,
                prompt_tokens: rec.usage_prompt_tokens.get(),
                completion_tokens: rec.usage_completion_tokens.get(),
                failure: rec.failure.as_deref(),
                cancelled: sent.cancelled,
            };
            lane.ended(ticket, &answer);
            worker.keep(sent);
            idle.push(worker);
        }
        if !stopping && stopped() {
            stopping = true;
            lane.stop();
        }
        if stopping {
            if in_flight == 0 {
                break;
            }
            notify.wait().await;
            continue;
        }
        match lane.step(ns_now()) {
            LaneStep::Send {
                ticket,
                index,
                request,
                client_prompt_len,
            } => {
                let mut worker = match idle.pop() {
                    Some(w) => w,
                    None => {
                        let handles = CoreHandles {
                            timers: timers.clone(),
                            stop: stop.clone(),
                            slot: stop.add_slot(),
                            pool: pool.clone(),
                        };
                        let log = WorkerLog::with_capacity(16, tokens, keep_text);
                        Worker::new(
                            shared.clone(),
                            epoch,
                            (0, None),
                            histograms.clone(),
                            handles,
                            log,
                        )
                    }
                };
                let now = Instant::now();
                lane.sent(ticket, ns_now());
                in_flight += 1;
                let (returned, notify) = (returned.clone(), notify.clone());
                monoio::spawn(async move {
                    let turn = Turn {
                        request: &request,
                        client_prompt_len,
                        scheduled: now,
                        was_waiting: true,
                        replica: 0,
                    };
                    let sent = worker.send(index as usize, turn).await;
                    returned.borrow_mut().push_back(Returned {
                        ticket,
                        worker,
                        sent,
                    });
                    notify.notify();
                });
            }
            LaneStep::WaitUntil(at) => {
                let at = epoch + Duration::from_nanos(at);
                let at = bound.map_or(at, |b| at.min(b));
                monoio::select! {
                    () = timers.sleep_until(at) => {},
                    () = notify.wait() => {},
                    () = stop.wait(slot) => {},
                }
            }
            LaneStep::AwaitResponse => {
                monoio::select! {
                    () = notify.wait() => {},
                    () = stop.wait(slot) => {},
                }
            }
            LaneStep::Done => break,
        }
    }
    lane.finish();
    // Every worker is idle again: the extra ones hand their logs to one and their
    // connections to the core's pool.
    made.append(&mut idle);
    let mut home = made.pop().expect("the home worker at least");
    for mut w in made {
        w.park();
        home.log.absorb(std::mem::take(&mut w.log));
    }
    home
}
