//! A fixed number of model slots (`MockConfig::slots`, `mock-llm-server --slots N`): a
//! request waits for a free slot, then gets its first-token delay and token interval from
//! the moment it got one. The simplest server whose capacity is known exactly (slots ÷
//! service time), so a capacity search (`--slo-search`) can be checked against the truth.
//!
//! The slots are shared by every worker thread: one atomic count, taken with a
//! compare-and-swap and waited for on the worker's own timer (a millisecond poll: a mock
//! timed in tens of milliseconds loses nothing by it, and no cross-thread waker is needed).
//! Waiters are served in no particular order, as a busy server's scheduler may.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::runtime::timer::Timers;

/// How often a waiting request looks for a free slot.
const POLL: Duration = Duration::from_millis(1);

/// The slots of one server.
#[derive(Debug)]
pub struct Slots {
    limit: usize,
    in_use: AtomicUsize,
}

/// One slot held; dropping it (the response done, or the connection gone) frees it.
pub struct Slot<'a>(&'a Slots);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.in_use.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Slots {
    pub fn new(limit: usize) -> Slots {
        Slots {
            limit,
            in_use: AtomicUsize::new(0),
        }
    }

    /// A slot now, if one is free.
    pub fn try_take(&self) -> Option<Slot<'_>> {
        self.in_use
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.limit).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot(self))
    }

    /// A slot, once one is free. A connection dropped while waiting takes none.
    pub async fn take(&self, timers: &Timers) -> Slot<'_> {
        loop {
            if let Some(slot) = self.try_take() {
                return slot;
            }
            timers.sleep(POLL).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_is_taken_until_dropped_and_no_more_than_the_limit() {
        let slots = Slots::new(2);
        let a = slots.try_take().expect("first slot");
        let b = slots.try_take().expect("second slot");
        assert!(slots.try_take().is_none(), "only two slots");
        drop(a);
        let c = slots.try_take().expect("a freed slot is free again");
        drop((b, c));
        assert_eq!(slots.in_use.load(Ordering::Acquire), 0);
    }
}
