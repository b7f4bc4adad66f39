//! Worker-local shutdown of live connections.
//!
//! Dropping a monoio runtime drops only the tasks in its run queue: a connection task
//! parked on a timer (a stalled stream, a long TTFT) owns the timer that would wake it,
//! so it would leak together with its socket. Instead, every connection task races its
//! work against [`Lifecycle::stopped`]; at shutdown the worker wakes them all, each drops
//! its connection (closing the socket), and the worker waits until none is left.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// Stop flag, registered wakers and the live-connection count of one worker.
#[derive(Debug, Default)]
pub struct Lifecycle {
    stopping: Cell<bool>,
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

    /// Completes once [`Lifecycle::stop`] has been called.
    pub fn stopped(&self) -> Stopped<'_> {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        Stopped { life: self, id }
    }

    /// Wakes every waiting connection; their `stopped()` futures complete.
    pub fn stop(&self) {
        self.stopping.set(true);
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
}

impl Future for Stopped<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.life.stopping.get() {
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
