//! Worker-local shutdown of live connections, and the cut of a crash.
//!
//! Dropping a monoio runtime drops only the tasks in its run queue: a connection task
//! parked on a timer (a stalled stream, a long TTFT) owns the timer that would wake it,
//! so it would leak together with its socket. Instead, every connection task races its
//! work against [`Lifecycle::stopped`]; at shutdown the worker wakes them all, each drops
//! its connection (closing the socket), and the worker waits until none is left.
//! [`Lifecycle::cut`] does the same to the connections live at that moment only (a crash
//! the server comes back from): connections accepted later are served.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// Stop flag, registered wakers and the live-connection count of one worker.
#[derive(Debug, Default)]
pub struct Lifecycle {
    stopping: Cell<bool>,
    /// Cuts so far; a connection is cut when a cut came after it started waiting.
    cuts: Cell<u64>,
    next_id: Cell<u64>,
    wakers: RefCell<HashMap<u64, Waker>>,
    live: Cell<usize>,
}

impl Lifecycle {
    /// Counts a connection as live until the guard drops.
    pub fn enter(&self) -> Live<'_> {
        self.live.set(self.live.get() + 1);
        Live(self)
    }

    /// Connections still live.
    pub fn live(&self) -> usize {
        self.live.get()
    }

    /// Completes once [`Lifecycle::stop`] has been called, or [`Lifecycle::cut`] after this
    /// call.
    pub fn stopped(&self) -> Stopped<'_> {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        Stopped {
            life: self,
            id,
            cuts: self.cuts.get(),
        }
    }

    /// Wakes every waiting connection; their `stopped()` futures complete, and so will every
    /// later one.
    pub fn stop(&self) {
        self.stopping.set(true);
        self.wake_all();
    }

    /// Completes the `stopped()` futures that exist now (their connections close); later
    /// ones wait for the next stop or cut.
    pub fn cut(&self) {
        self.cuts.set(self.cuts.get() + 1);
        self.wake_all();
    }

    fn wake_all(&self) {
        let wakers = std::mem::take(&mut *self.wakers.borrow_mut());
        for w in wakers.into_values() {
            w.wake();
        }
    }
}

/// Decrements the live count on drop.
#[derive(Debug)]
pub struct Live<'a>(&'a Lifecycle);

impl Drop for Live<'_> {
    fn drop(&mut self) {
        self.0.live.set(self.0.live.get() - 1);
    }
}

/// Future of [`Lifecycle::stopped`]; keeps one waker slot, refreshed only when the task's
/// waker changes (it is polled on every wake-up of its task).
#[derive(Debug)]
pub struct Stopped<'a> {
    life: &'a Lifecycle,
    id: u64,
    /// The lifecycle's cut count when this future was made.
    cuts: u64,
}

impl Future for Stopped<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.life.stopping.get() || self.life.cuts.get() != self.cuts {
            return Poll::Ready(());
        }
        let mut wakers = self.life.wakers.borrow_mut();
        match wakers.get_mut(&self.id) {
            Some(w) if w.will_wake(cx.waker()) => {}
            Some(w) => w.clone_from(cx.waker()),
            None => {
                wakers.insert(self.id, cx.waker().clone());
            }
        }
        Poll::Pending
    }
}

impl Drop for Stopped<'_> {
    fn drop(&mut self) {
        self.life.wakers.borrow_mut().remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn stop_wakes_each_waiter_once_and_completes_them() {
        let life = Lifecycle::default();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(Arc::clone(&count));
        let mut cx = Context::from_waker(&waker);
        let mut a = Box::pin(life.stopped());
        let mut b = Box::pin(life.stopped());
        for _ in 0..3 {
            assert!(a.as_mut().poll(&mut cx).is_pending());
        }
        assert!(b.as_mut().poll(&mut cx).is_pending());
        assert_eq!(
            life.wakers.borrow().len(),
            2,
            "one slot per waiter, however often polled"
        );
        life.stop();
        assert_eq!(count.0.load(Ordering::SeqCst), 2);
        assert!(a.as_mut().poll(&mut cx).is_ready());
        drop((a, b));
        assert!(life.wakers.borrow().is_empty());
    }

    #[test]
    fn a_cut_completes_the_waiters_of_that_moment_only() {
        let life = Lifecycle::default();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(Arc::clone(&count));
        let mut cx = Context::from_waker(&waker);
        let mut before = Box::pin(life.stopped());
        assert!(before.as_mut().poll(&mut cx).is_pending());
        life.cut();
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        let mut after = Box::pin(life.stopped());
        assert!(before.as_mut().poll(&mut cx).is_ready());
        assert!(
            after.as_mut().poll(&mut cx).is_pending(),
            "served after the cut"
        );
        life.stop();
        assert!(after.as_mut().poll(&mut cx).is_ready());
    }

    #[test]
    fn live_guard_counts() {
        let life = Lifecycle::default();
        let g1 = life.enter();
        let g2 = life.enter();
        assert_eq!(life.live(), 2);
        drop(g1);
        drop(g2);
        assert_eq!(life.live(), 0);
    }
}
