//! Sub-millisecond sleeps for the engine's arrival times and the mock's event deadlines.
//!
//! monoio's timer wheel ticks in milliseconds and rounds deadlines up, so a sleep through it
//! ends 0–2 ms late (about 1.3 ms on average): for the client that is dispatch lag added to
//! every scheduled arrival, for the mock a bias in the TTFT/ITL it is told to produce — both
//! larger than the client overhead the project exists to measure. Each runtime (a client
//! core, a mock worker) therefore keeps its own deadline heap driven by one Linux `timerfd`
//! (nanosecond resolution): the earliest deadline arms the timerfd, the runtime's timer loop
//! ([`Timers::run`]) waits for it to become readable (a poll op on io_uring, epoll readiness
//! on the legacy driver), wakes every sleeper that is due and re-arms for the next one. A
//! sleep never ends before its deadline; it ends a few microseconds after it (the wake-up
//! latency), with no spinning.
//!
//! The timer loop never returns: run it beside the real work (spawned, or in a `select!`)
//! so that the runtime's `block_on` ends with the work, not with the loop.
//!
//! If a timerfd cannot be created, sleeps fall back to monoio's timer.

use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// One runtime's precise timers. Create it inside that runtime (the timerfd registers with
/// its driver) and share it between that runtime's tasks (`Rc`).
#[derive(Debug, Default)]
pub struct Timers {
    /// The timerfd, as a monoio stream only to wait for its readiness.
    source: Option<monoio::net::UnixStream>,
    /// Deadlines in firing order; ties fire in registration order (the sequence number).
    /// Entries of sleeps dropped early stay until they reach the top or a compaction.
    heap: RefCell<BinaryHeap<Reverse<(Instant, u64, SleepId)>>>,
    wakers: RefCell<Sleepers>,
    next_seq: Cell<u64>,
    armed: Cell<Option<Instant>>,
    /// The latest any sleeper was woken after its deadline since the last
    /// [`Timers::take_longest_lateness`]: how long the runtime's event loop was held up (the
    /// client-health "longest stall"). One subtraction per fired deadline.
    longest_lateness: Cell<Duration>,
}

impl Timers {
    /// Timers backed by a fresh timerfd (or by monoio's timer if that fails).
    pub fn new() -> Timers {
        Timers {
            source: timerfd().ok(),
            ..Timers::default()
        }
    }

    /// Waits until `deadline` (returns at once if it has passed).
    pub async fn sleep_until(&self, deadline: Instant) {
        if deadline <= Instant::now() {
            return;
        }
        let mut alarm = self.alarm(deadline);
        std::future::poll_fn(|cx| match alarm.poll_expired(cx) {
            true => Poll::Ready(()),
            false => Poll::Pending,
        })
        .await;
    }

    /// Runs `fut` until `deadline` (`None`: no deadline); yields `None` if the deadline came
    /// first.
    ///
    /// The engine's per-request timeout. monoio's `timeout` would embed a ~700-byte timer
    /// entry in every worker's future (7 MB at 10,000 streams) for a deadline that almost
    /// never fires; this one is an entry in the core's deadline heap and a 40-byte [`Sleep`].
    /// A struct, not an `async fn`: an `async fn` would hold `fut` twice (argument and
    /// pinned local), doubling the worker's largest state.
    pub fn timeout_at<F: Future>(&self, deadline: Option<Instant>, fut: F) -> Deadline<'_, F> {
        Deadline {
            fut,
            alarm: deadline.map(|d| self.alarm(d)),
        }
    }

    /// The deadline as something to poll: the precise heap, or monoio's timer without a
    /// timerfd.
    fn alarm(&self, deadline: Instant) -> Alarm<'_> {
        match self.source {
            Some(_) => Alarm::Precise(Sleep {
                timers: self,
                deadline,
                id: None,
            }),
            None => Alarm::Wheel(Box::pin(monoio::time::sleep_until(
                monoio::time::Instant::from_std(deadline),
            ))),
        }
    }

    /// The longest a due sleeper waited past its deadline since the last call; resets it.
    pub fn take_longest_lateness(&self) -> Duration {
        self.longest_lateness.replace(Duration::ZERO)
    }

    /// Waits for `d`.
    pub async fn sleep(&self, d: Duration) {
        self.sleep_until(Instant::now() + d).await;
    }

    /// The timer loop: wakes due sleepers whenever the timerfd fires. Never returns (drop
    /// it to stop); without a timerfd it just waits, since sleeps use monoio's timer then.
    pub async fn run(&self) {
        let Some(source) = &self.source else {
            return std::future::pending().await;
        };
        loop {
            // Not relaxed: on epoll, readiness is re-checked with poll(2) because the
            // expiration count is read below, behind monoio's back.
            if source.readable(false).await.is_err() {
                // Should not happen; if waiting on the timerfd fails, poll the heap every
                // millisecond instead: still never early, at most about 2 ms late.
                monoio::time::sleep(Duration::from_millis(1)).await;
            }
            drain(source.as_raw_fd());
            self.armed.set(None);
            self.fire_due();
        }
    }

    /// Wakes every sleeper whose deadline has passed and arms the timerfd for the next.
    fn fire_due(&self) {
        let now = Instant::now();
        let mut heap = self.heap.borrow_mut();
        let mut wakers = self.wakers.borrow_mut();
        while let Some(&Reverse((deadline, _, id))) = heap.peek() {
            if deadline <= now {
                heap.pop();
                if let Some(w) = wakers.remove(id) {
                    let late = now - deadline;
                    if late > self.longest_lateness.get() {
                        self.longest_lateness.set(late);
                    }
                    w.wake();
                }
            } else if wakers.get_mut(id).is_none() {
                // A sleep dropped before its deadline.
                heap.pop();
            } else {
                self.arm(deadline);
                break;
            }
        }
    }

    /// Sets the timerfd to fire at `deadline` (relative arming never fires early).
    fn arm(&self, deadline: Instant) {
        let Some(source) = &self.source else {
            return;
        };
        // A zero value would disarm: a due deadline fires after 1 ns instead.
        let after = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_nanos(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: after.as_secs() as libc::time_t,
                tv_nsec: libc::c_long::from(after.subsec_nanos() as i32),
            },
        };
        // SAFETY: the fd is our open timerfd and `spec` is a valid itimerspec on the
        // stack; the old value is not requested (null).
        let rc =
            unsafe { libc::timerfd_settime(source.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
        if rc == 0 {
            self.armed.set(Some(deadline));
        }
    }

    fn register(&self, deadline: Instant, waker: &Waker) -> SleepId {
        let seq = self.next_seq.get();
        self.next_seq.set(seq + 1);
        let mut wakers = self.wakers.borrow_mut();
        let id = wakers.insert(waker.clone());
        let mut heap = self.heap.borrow_mut();
        heap.push(Reverse((deadline, seq, id)));
        // Every request leaves a timeout entry that is almost never due (hours away): drop
        // the dead ones once they outnumber the live, so a long run's heap stays the size of
        // what is waiting (amortised O(1) per registration).
        if heap.len() > 2 * wakers.len() + COMPACT_SLACK {
            heap.retain(|Reverse((_, _, id))| wakers.is_live(*id));
        }
        drop((heap, wakers));
        if self.armed.get().is_none_or(|a| deadline < a) {
            self.arm(deadline);
        }
        id
    }
}

/// Dead heap entries tolerated beyond twice the live ones before a compaction.
const COMPACT_SLACK: usize = 1024;

/// A registered sleep: its slot in [`Sleepers`] and the slot's generation when it was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct SleepId {
    slot: u32,
    generation: u32,
}

/// The wakers of registered sleeps, in reusable slots. Firing or dropping a sleep frees its
/// slot and bumps the slot's generation, so a heap entry or a [`Sleep`] holding an older
/// [`SleepId`] finds nothing. Lookups are an index, not a hash: a worker's request timeout
/// is polled on every read of its response.
#[derive(Debug, Default)]
struct Sleepers {
    slots: Vec<Slot>,
    free: Vec<u32>,
    live: usize,
}

#[derive(Debug, Default)]
struct Slot {
    generation: u32,
    waker: Option<Waker>,
}

impl Sleepers {
    fn insert(&mut self, waker: Waker) -> SleepId {
        let slot = self.free.pop().unwrap_or_else(|| {
            self.slots.push(Slot::default());
            (self.slots.len() - 1) as u32
        });
        let entry = &mut self.slots[slot as usize];
        entry.waker = Some(waker);
        self.live += 1;
        SleepId {
            slot,
            generation: entry.generation,
        }
    }

    /// The waker of a sleep still waiting; `None` once it fired or was dropped.
    fn get_mut(&mut self, id: SleepId) -> Option<&mut Waker> {
        let entry = self.slots.get_mut(id.slot as usize)?;
        match entry.generation == id.generation {
            true => entry.waker.as_mut(),
            false => None,
        }
    }

    fn is_live(&self, id: SleepId) -> bool {
        self.slots
            .get(id.slot as usize)
            .is_some_and(|e| e.generation == id.generation && e.waker.is_some())
    }

    /// Frees the sleep's slot, returning its waker if it was still waiting.
    fn remove(&mut self, id: SleepId) -> Option<Waker> {
        let entry = self.slots.get_mut(id.slot as usize)?;
        if entry.generation != id.generation {
            return None;
        }
        let waker = entry.waker.take()?;
        entry.generation = entry.generation.wrapping_add(1);
        self.free.push(id.slot);
        self.live -= 1;
        Some(waker)
    }

    /// Sleeps still waiting.
    fn len(&self) -> usize {
        self.live
    }
}

/// Creates a non-blocking monotonic timerfd wrapped for readiness waits.
fn timerfd() -> io::Result<monoio::net::UnixStream> {
    // SAFETY: plain FFI call with constant flags; the result is checked below.
    let fd = unsafe {
        libc::timerfd_create(
            libc::CLOCK_MONOTONIC,
            libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by timerfd_create, is open, and nothing else owns it.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    // monoio has no public type for an arbitrary pollable fd. A UnixStream is only a
    // registered fd; we use nothing but its `readable` (a poll op / epoll readiness),
    // never a socket call, and dropping it closes the timerfd.
    monoio::net::UnixStream::from_std(std::os::unix::net::UnixStream::from(owned))
}

/// Consumes the timerfd's expiration count (non-blocking; nothing to read is fine).
fn drain(fd: i32) {
    let mut expirations = 0u64;
    // SAFETY: reads at most 8 bytes into a local u64 from our own open fd.
    unsafe {
        libc::read(
            fd,
            (&raw mut expirations).cast(),
            std::mem::size_of::<u64>(),
        )
    };
}

/// Future of [`Timers::timeout_at`].
pub struct Deadline<'a, F> {
    fut: F,
    alarm: Option<Alarm<'a>>,
}

impl<F: Future> Future for Deadline<'_, F> {
    type Output = Option<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: `fut` is structurally pinned: it is never moved out of `self` nor handed
        // out unpinned, and `Deadline` has no `Drop` impl; `alarm` is `Unpin` and is only
        // used through a plain `&mut`.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: `this` came from a pinned `Deadline`, and `fut` is structurally pinned (above).
        let fut = unsafe { Pin::new_unchecked(&mut this.fut) };
        if let Poll::Ready(out) = fut.poll(cx) {
            return Poll::Ready(Some(out));
        }
        match this.alarm.as_mut().is_some_and(|a| a.poll_expired(cx)) {
            true => Poll::Ready(None),
            false => Poll::Pending,
        }
    }
}

/// A deadline to watch beside other work: precise, or monoio's wheel without a timerfd
/// (boxed there: monoio's sleep is large and that path is rare).
enum Alarm<'a> {
    Precise(Sleep<'a>),
    Wheel(Pin<Box<monoio::time::Sleep>>),
}

impl Alarm<'_> {
    fn poll_expired(&mut self, cx: &mut Context<'_>) -> bool {
        match self {
            Alarm::Precise(s) => Pin::new(s).poll(cx).is_ready(),
            Alarm::Wheel(s) => s.as_mut().poll(cx).is_ready(),
        }
    }
}

/// Future of one precise sleep.
///
/// Once registered it ends when the timer loop fires it (the loop frees its slot), so a poll
/// while it waits — every read of a response polls the request's timeout — is one slot
/// lookup, without reading the clock.
struct Sleep<'a> {
    timers: &'a Timers,
    deadline: Instant,
    id: Option<SleepId>,
}

impl Future for Sleep<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let Some(id) = self.id else {
            if Instant::now() >= self.deadline {
                return Poll::Ready(());
            }
            let id = self.timers.register(self.deadline, cx.waker());
            self.id = Some(id);
            return Poll::Pending;
        };
        match self.timers.wakers.borrow_mut().get_mut(id) {
            Some(w) => {
                if !w.will_wake(cx.waker()) {
                    w.clone_from(cx.waker());
                }
            }
            None => {
                self.id = None;
                return Poll::Ready(());
            }
        }
        Poll::Pending
    }
}

impl Drop for Sleep<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            self.timers.wakers.borrow_mut().remove(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    use crate::runtime::{build_runtime, ResolvedDriver};

    /// Polls `fut` once with a waker that does nothing (to register a sleep in the heap).
    fn poll_once<F: Future>(fut: Pin<&mut F>) -> Poll<F::Output> {
        fut.poll(&mut Context::from_waker(Waker::noop()))
    }

    /// Sleepers with shuffled deadlines (one dropped early) on a runtime of `driver`.
    ///
    /// Nothing here races the clock: the wake order is asserted only for sleepers that were
    /// registered in the heap before their deadline (checked, and the run repeated with
    /// deadlines ten times further out when the machine was too slow for that), and the
    /// abandoned sleep is registered and then dropped, not timed out.
    fn sleepers_wake_in_order_never_early(driver: ResolvedDriver) {
        let mut rt = build_runtime(driver).expect("runtime");
        rt.block_on(async {
            for unit in [1u64, 10, 100, 1000].map(Duration::from_millis) {
                if sleepers_round(unit).await {
                    return;
                }
            }
            panic!("never managed to register five sleepers within 1 s of starting");
        });
    }

    /// One round with deadlines at multiples of `unit`; false if a deadline passed before
    /// every sleeper was registered (the order would then not be the timer's).
    async fn sleepers_round(unit: Duration) -> bool {
        let timers = Rc::new(Timers::new());
        assert!(timers.source.is_some(), "timerfd available");
        let t0 = Instant::now();
        let ended = Rc::new(RefCell::new(Vec::new()));
        let mut handles = Vec::new();
        for (i, n) in [7u32, 3, 5, 3, 12].into_iter().enumerate() {
            let (timers, ended) = (Rc::clone(&timers), Rc::clone(&ended));
            let due = t0 + unit * n;
            handles.push(monoio::spawn(async move {
                timers.sleep_until(due).await;
                ended.borrow_mut().push((i, due, Instant::now()));
            }));
        }
        // A sleep registered and then dropped before its deadline must not disturb the others.
        let mut abandoned = Box::pin(timers.sleep_until(t0 + unit * 4));
        let _ = poll_once(abandoned.as_mut());
        drop(abandoned);
        // Spawned after the sleepers, so it runs after each of them reached its first wait
        // (tasks start in spawn order): how many were then registered in the heap.
        let probe = Rc::clone(&timers);
        let registered = monoio::spawn(async move { probe.wakers.borrow().len() });
        let all = async {
            let registered = registered.await;
            for h in handles {
                h.await;
            }
            registered
        };
        let registered = monoio::select! {
            () = timers.run() => unreachable!("the timer loop never returns"),
            n = all => n,
        };
        let ended = ended.borrow();
        for &(i, due, at) in ended.iter() {
            assert!(at >= due, "sleeper {i} woke early");
        }
        // The dropped sleep left nothing behind.
        assert_eq!(timers.wakers.borrow().len(), 0);
        if registered < 5 {
            return false;
        }
        let order: Vec<usize> = ended.iter().map(|e| e.0).collect();
        assert!(
            order == [1, 3, 2, 0, 4] || order == [3, 1, 2, 0, 4],
            "{order:?}"
        );
        true
    }

    #[test]
    fn sleepers_wake_in_order_never_early_on_legacy() {
        sleepers_wake_in_order_never_early(ResolvedDriver::Epoll);
    }

    #[test]
    fn sleepers_wake_in_order_never_early_on_io_uring() {
        if monoio::utils::detect_uring() {
            sleepers_wake_in_order_never_early(ResolvedDriver::IoUring);
        }
    }

    #[test]
    fn a_blocked_loop_shows_as_lateness_and_taking_it_resets_it() {
        let mut rt = build_runtime(ResolvedDriver::Epoll).expect("runtime");
        rt.block_on(async {
            let timers = Rc::new(Timers::new());
            let sleeper = Rc::clone(&timers);
            let work = async move {
                // Tasks start in spawn order: the sleep is in the heap before the other task
                // holds the loop up for 20 ms, so the timer loop wakes it at least that late.
                let asleep = monoio::spawn(async move {
                    sleeper.sleep(Duration::from_millis(1)).await;
                });
                let blocker = monoio::spawn(async {
                    std::thread::sleep(Duration::from_millis(20));
                });
                blocker.await;
                asleep.await;
            };
            monoio::select! {
                () = timers.run() => unreachable!("the timer loop never returns"),
                () = work => {},
            }
            let late = timers.take_longest_lateness();
            assert!(late >= Duration::from_millis(19), "{late:?}");
            assert_eq!(timers.take_longest_lateness(), Duration::ZERO);
        });
    }

    #[test]
    fn timeout_at_yields_the_output_before_the_deadline_and_none_after() {
        let mut rt = build_runtime(ResolvedDriver::Epoll).expect("runtime");
        rt.block_on(async {
            let timers = Rc::new(Timers::new());
            let work = async {
                let t0 = Instant::now();
                let quick = async {
                    monoio::time::sleep(Duration::from_millis(2)).await;
                    7
                };
                let far = Some(t0 + Duration::from_secs(60));
                assert_eq!(timers.timeout_at(far, quick).await, Some(7));
                assert_eq!(timers.timeout_at(None, async { 8 }).await, Some(8));
                let deadline = Instant::now() + Duration::from_millis(5);
                let never = std::future::pending::<()>();
                assert_eq!(timers.timeout_at(Some(deadline), never).await, None);
                assert!(Instant::now() >= deadline, "timed out early");
                // The expired and the finished deadlines left no sleeper behind.
                assert_eq!(timers.wakers.borrow().len(), 0);
            };
            monoio::select! {
                () = timers.run() => unreachable!("the timer loop never returns"),
                () = work => {},
            }
        });
    }

    #[test]
    fn a_freed_slot_answers_only_its_new_sleep() {
        let mut sleepers = Sleepers::default();
        let old = sleepers.insert(Waker::noop().clone());
        assert!(sleepers.remove(old).is_some());
        let new = sleepers.insert(Waker::noop().clone());
        assert_eq!(new.slot, old.slot, "the slot is reused");
        assert!(sleepers.get_mut(old).is_none() && !sleepers.is_live(old));
        assert!(sleepers.remove(old).is_none(), "an old id frees nothing");
        assert!(sleepers.get_mut(new).is_some());
        assert_eq!(sleepers.len(), 1);
    }

    #[test]
    fn timeouts_that_never_fire_do_not_pile_up_in_the_heap() {
        let mut rt = build_runtime(ResolvedDriver::Epoll).expect("runtime");
        rt.block_on(async {
            let timers = Timers::new();
            let far = Some(Instant::now() + Duration::from_secs(3600));
            let mut waiting = Vec::new();
            for i in 0..10_000u32 {
                // Every tenth stays registered; the rest finish and drop their timeout.
                let mut t = Box::pin(timers.timeout_at(far, std::future::pending::<()>()));
                let _ = poll_once(t.as_mut());
                if i % 10 == 0 {
                    waiting.push(t);
                }
            }
            let live = timers.wakers.borrow().len();
            assert_eq!(live, 1_000);
            let heap = timers.heap.borrow().len();
            assert!(
                heap <= 2 * live + COMPACT_SLACK + 1,
                "{heap} entries for {live}"
            );
        });
    }

    #[test]
    fn timeout_at_without_a_timerfd_uses_monoios_timer() {
        let mut rt = build_runtime(ResolvedDriver::Epoll).expect("runtime");
        rt.block_on(async {
            let timers = Timers::default();
            assert!(timers.source.is_none());
            let deadline = Instant::now() + Duration::from_millis(3);
            let never = std::future::pending::<()>();
            assert_eq!(timers.timeout_at(Some(deadline), never).await, None);
            assert!(Instant::now() >= deadline);
            assert_eq!(
                timers.timeout_at(Some(deadline), async { 1 }).await,
                Some(1)
            );
        });
    }
}
