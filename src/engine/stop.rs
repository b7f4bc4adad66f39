//! Stopping a run from another thread (Ctrl-C, SIGTERM) at once, on every core.
//!
//! The stop flag alone is not enough: a worker waiting for its arrival time (a rate-driven run
//! with at least as many workers as requests claims every request up front) would only see it
//! after the wait, so a run could go on for its whole schedule after Ctrl-C. Each core
//! therefore has an eventfd that [`StopWires::pull`] writes to; the core's [`CoreStop`] task
//! wakes on it, records when the grace period for requests in flight ends and wakes every
//! worker slot parked on it. Until a stop, nothing here costs the hot path more than one
//! waker stored per wait.

use std::cell::{Cell, RefCell};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use crate::runtime::timer::Timers;

/// The write ends of every core's stop eventfd, owned by the run's shared state so that a
/// stop from another thread never writes to a descriptor that was closed (and reused).
#[derive(Debug, Default)]
pub struct StopWires {
    fds: Vec<OwnedFd>,
}

impl StopWires {
    /// One eventfd per core.
    pub fn new(cores: usize) -> io::Result<StopWires> {
        let fds = (0..cores).map(|_| eventfd()).collect::<io::Result<_>>()?;
        Ok(StopWires { fds })
    }

    /// The eventfd of core thread `t`, duplicated for that core's runtime to wait on.
    pub fn receiver(&self, t: usize) -> io::Result<OwnedFd> {
        self.fds[t].try_clone()
    }

    /// Wakes every core's stop task.
    pub fn pull(&self) {
        for fd in &self.fds {
            let one = 1u64;
            // SAFETY: writes 8 bytes from a local u64 to an eventfd this struct owns; a full
            // counter (EAGAIN) already means "stop".
            unsafe { libc::write(fd.as_raw_fd(), (&raw const one).cast(), 8) };
        }
    }
}

fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: plain FFI call with constant flags; the result is checked below.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by eventfd, is open, and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Why a core stopped: what the requests it cuts are counted as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopCause {
    /// Ctrl-C, SIGTERM: a cut request failed (`interrupted`).
    Interrupt,
    /// The run's time bound (`--duration`): a cut request is cancelled.
    TimeBound,
}

/// One core's view of the stop: whether it came, when the grace period ends, and the worker
/// slots waiting for it.
#[derive(Debug)]
pub struct CoreStop {
    grace: Duration,
    /// The end of the grace period, once stopped.
    grace_end: Cell<Option<Instant>>,
    cause: Cell<StopCause>,
    /// One waker per worker slot of this core (a slot waits for one thing at a time).
    waiters: RefCell<Vec<Option<Waker>>>,
}

impl CoreStop {
    /// A stop for `slots` worker slots whose requests in flight get `grace` after a stop.
    pub fn new(slots: usize, grace: Duration) -> CoreStop {
        CoreStop {
            grace,
            grace_end: Cell::new(None),
            cause: Cell::new(StopCause::Interrupt),
            waiters: RefCell::new(vec![None; slots]),
        }
    }

    /// One more slot (a lane's extra connection, made when its tree's requests in flight
    /// outgrow the slots it has); its index.
    pub fn add_slot(&self) -> usize {
        let mut waiters = self.waiters.borrow_mut();
        waiters.push(None);
        waiters.len() - 1
    }

    /// Marks the core stopped (now) and wakes every waiting slot. Idempotent.
    pub fn trigger(&self) {
        self.trigger_with(self.grace, StopCause::Interrupt);
    }

    /// [`CoreStop::trigger`] with its own grace period and cause; the first stop wins.
    pub fn trigger_with(&self, grace: Duration, cause: StopCause) {
        if self.grace_end.get().is_some() {
            return;
        }
        self.cause.set(cause);
        self.grace_end.set(Some(
            Instant::now()
                .checked_add(grace)
                .unwrap_or_else(Instant::now),
        ));
        for w in self.waiters.borrow_mut().iter_mut() {
            if let Some(w) = w.take() {
                w.wake();
            }
        }
    }

    /// True once the stop came.
    pub fn stopped(&self) -> bool {
        self.grace_end.get().is_some()
    }

    /// Why it stopped (meaningful once [`CoreStop::stopped`]).
    pub fn cause(&self) -> StopCause {
        self.cause.get()
    }

    /// Resolves when the stop comes (at once if it came).
    pub async fn wait(&self, slot: usize) {
        std::future::poll_fn(|cx| {
            if self.stopped() {
                return Poll::Ready(());
            }
            let mut waiters = self.waiters.borrow_mut();
            match &mut waiters[slot] {
                Some(w) if w.will_wake(cx.waker()) => {}
                w => *w = Some(cx.waker().clone()),
            }
            Poll::Pending
        })
        .await;
        self.waiters.borrow_mut()[slot] = None;
    }

    /// Resolves when the grace period after a stop has run out: the moment requests still in
    /// flight are cancelled.
    pub async fn grace_over(&self, slot: usize, timers: &Timers) {
        self.wait(slot).await;
        if let Some(end) = self.grace_end.get() {
            timers.sleep_until(end).await;
        }
    }

    /// Waits for the stop: for the eventfd `receiver` to be written and `flag` to be set
    /// (or, without a receiver, for `flag`, checked every 10 ms), then triggers. Run it
    /// beside the workers of a run; a write left over from an earlier run only costs one
    /// check of `flag`.
    pub async fn watch(&self, receiver: Option<&StopReceiver>, flag: impl Fn() -> bool) {
        if let Some(r) = receiver {
            while !flag() {
                if r.0.readable(false).await.is_err() {
                    break;
                }
                drain(r.0.as_raw_fd());
            }
        }
        while !flag() {
            monoio::time::sleep(Duration::from_millis(10)).await;
        }
        self.trigger();
    }
}

/// A core's end of its stop eventfd, registered with the core's runtime once.
#[derive(Debug)]
pub struct StopReceiver(monoio::net::UnixStream);

impl StopReceiver {
    /// Wraps `wire` for readiness waits; call inside the core's runtime.
    pub fn new(wire: OwnedFd) -> io::Result<StopReceiver> {
        // Like the timerfd: a UnixStream only to wait for the eventfd's readiness, never a
        // socket call; dropping it closes the descriptor.
        monoio::net::UnixStream::from_std(std::os::unix::net::UnixStream::from(wire))
            .map(StopReceiver)
    }
}

/// Consumes the eventfd's counter (non-blocking; nothing to read is fine).
fn drain(fd: i32) {
    let mut n = 0u64;
    // SAFETY: reads at most 8 bytes into a local u64 from our own open fd.
    unsafe { libc::read(fd, (&raw mut n).cast(), 8) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    use crate::runtime::{build_runtime, ResolvedDriver};

    /// A stop pulled from another thread wakes a slot parked far from its own deadline, and
    /// the grace period follows it.
    fn stop_from_another_thread_wakes_waiters(driver: ResolvedDriver) {
        let wires = Arc::new(StopWires::new(1).expect("eventfd"));
        let flag = Arc::new(AtomicBool::new(false));
        let wire = wires.receiver(0).expect("dup");
        let mut rt = build_runtime(driver).expect("runtime");
        let puller = rt.block_on(async {
            let timers = Rc::new(Timers::new());
            let stop = CoreStop::new(2, Duration::from_millis(20));
            let receiver = StopReceiver::new(wire).expect("register the eventfd");
            let watched = stop.watch(Some(&receiver), || flag.load(Ordering::Acquire));
            let work = async {
                let far = Instant::now() + Duration::from_secs(600);
                let woke = monoio::select! {
                    () = timers.sleep_until(far) => false,
                    () = stop.wait(0) => true,
                };
                assert!(woke, "the stop ends the wait");
                let end = stop.grace_end.get().expect("grace end set");
                stop.grace_over(1, &timers).await;
                assert!(Instant::now() >= end, "grace over no earlier than its end");
            };
            // join! polls its branches in order: the puller starts once `work` is parked.
            let pull = async {
                let (wires, flag) = (Arc::clone(&wires), Arc::clone(&flag));
                std::thread::spawn(move || {
                    flag.store(true, Ordering::Release);
                    wires.pull();
                })
            };
            monoio::select! {
                () = timers.run() => unreachable!("the timer loop never returns"),
                ((), (), t) = async { monoio::join!(watched, work, pull) } => t,
            }
        });
        puller.join().unwrap();
    }

    #[test]
    fn stop_wakes_waiters_on_legacy() {
        stop_from_another_thread_wakes_waiters(ResolvedDriver::Epoll);
    }

    #[test]
    fn stop_wakes_waiters_on_io_uring() {
        if monoio::utils::detect_uring() {
            stop_from_another_thread_wakes_waiters(ResolvedDriver::IoUring);
        }
    }

    #[test]
    fn the_first_stop_sets_the_cause_and_grace() {
        let stop = CoreStop::new(1, Duration::from_secs(600));
        stop.trigger_with(Duration::ZERO, StopCause::TimeBound);
        stop.trigger();
        assert_eq!(stop.cause(), StopCause::TimeBound);
        assert!(stop.grace_end.get().unwrap() <= Instant::now());
    }

    #[test]
    fn trigger_is_idempotent_and_keeps_the_first_grace_end() {
        let stop = CoreStop::new(1, Duration::from_secs(1));
        assert!(!stop.stopped());
        stop.trigger();
        let first = stop.grace_end.get();
        stop.trigger();
        assert_eq!(stop.grace_end.get(), first);
    }
}
