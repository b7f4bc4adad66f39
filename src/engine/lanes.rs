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
//! next request to send now (prepared before the clock, the lane only picks it; or, for a
//! lane that threads live answers into its histories, put together from messages serialized
//! before the clock and the answers as [`Answer::text`] gave them), a time to wait for, or
//! that it waits for a response, or that it is done. A stop (Ctrl-C, the
//! time bound) ends its sends at once: the lane counts what it had due as not sent, and the
//! requests in flight get the grace period like any worker's.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use crate::http::request::PreparedRequest;
use crate::runtime::timer::Timers;

use super::session::{Answer, LaneSource, LaneStep};
use super::stop::CoreStop;

/// What the lane driver needs of a worker (one connection, one request at a time): the
/// engine's worker implements it, the driver never names it (workers import lanes, not the
/// other way round).
pub(super) trait LaneWorker: Sized + 'static {
    /// A sent request as measured, before it is kept.
    type Sent: 'static;
    /// What makes more workers like this one (same core and run).
    type Maker: 'static;
    fn maker(&self) -> Self::Maker;
    /// A new worker of the same core and run, with a stop slot and a log of its own.
    fn make(maker: &Self::Maker) -> Self;
    /// Sends `request` (record `index`) now and measures it.
    fn send_now(
        self,
        index: u32,
        request: PreparedRequest,
        client_prompt_len: u32,
    ) -> impl std::future::Future<Output = (Self, Self::Sent)>;
    /// What the lane is told of `sent`, which this worker sent (its answer's text is in the
    /// worker's log until [`LaneWorker::keep`]).
    fn answer<'a>(&'a self, sent: &'a Self::Sent) -> Answer<'a>;
    /// Records `sent` (its histograms, its log).
    fn keep(&mut self, sent: Self::Sent);
    /// The run was stopped, this core hit the time bound, or the bound has passed.
    fn run_stopped(&self) -> bool;
    /// The run's epoch, the time bound's instant, the core's timers and stop.
    fn clock(&self) -> (Instant, Option<Instant>, Rc<Timers>, Rc<CoreStop>);
    /// Takes in a sibling's records at the end and parks its connection.
    fn absorb(&mut self, sibling: Self);
    /// Stops the whole run at once, on every core (as an interrupt does): no more sends,
    /// requests in flight get the interrupt's grace period.
    fn halt(maker: &Self::Maker);
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

/// A request of the lane that ended: its ticket, the worker it used and its measure.
type Returned<W> = (u64, W, <W as LaneWorker>::Sent);

/// Runs the lane the worker `home` claims until it is done or the run stops; returns the
/// worker with every request of the lane in its log.
pub(super) async fn run_lane<W: LaneWorker>(home: W, source: &dyn LaneSource) -> W {
    let mut lane = source.lane(source.claim());
    let (epoch, bound, timers, stop) = home.clock();
    // The loop's own stop slot: the workers' are their exchanges'.
    let slot = stop.add_slot();
    let returned: Rc<RefCell<VecDeque<Returned<W>>>> = Rc::default();
    let notify: Rc<Notify> = Rc::default();
    let maker = home.maker();
    let mut idle: Vec<W> = vec![home];
    let mut in_flight = 0usize;
    let mut stopping = false;
    let ns_now = || Instant::now().saturating_duration_since(epoch).as_nanos() as u64;
    loop {
        loop {
            let Some((ticket, mut worker, sent)) = returned.borrow_mut().pop_front() else {
                break;
            };
            in_flight -= 1;
            lane.ended(ticket, &worker.answer(&sent));
            worker.keep(sent);
            idle.push(worker);
        }
        let past_bound = bound.is_some_and(|b| Instant::now() >= b);
        let halted = !stopping && lane.halted();
        if halted {
            W::halt(&maker);
        }
        // The core's stop is looked at itself, not only through an idle worker: with every
        // worker in flight, a stopped core's `stop.wait` is ready at once, and a lane that
        // went on stepping would spin without yielding to the requests it waits for.
        let run_stopped = stop.stopped() || idle.first().is_some_and(W::run_stopped);
        if !stopping && (past_bound || halted || run_stopped) {
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
                // A request beside those in flight gets a worker (a connection) of its own.
                let worker = idle.pop().unwrap_or_else(|| W::make(&maker));
                lane.sent(ticket, ns_now());
                in_flight += 1;
                let (returned, notify) = (returned.clone(), notify.clone());
                monoio::spawn(async move {
                    let (worker, sent) = worker.send_now(index, request, client_prompt_len).await;
                    returned.borrow_mut().push_back((ticket, worker, sent));
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
    let mut home = idle.pop().expect("the home worker at least");
    for w in idle {
        home.absorb(w);
    }
    home
}
