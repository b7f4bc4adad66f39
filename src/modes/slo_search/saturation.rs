//! Stopping a rate probe early once it is clearly over-saturated: the server completes
//! requests well below the rate they arrive at, for long enough that it is not a burst.
//! Such a probe can only miss by more the longer it runs (its queue only grows), so the
//! search stops it and saves the time and the requests.
//!
//! The rule, on counts the engine already keeps ([`Progress`]) and the probe's own arrival
//! schedule: every [`TICK`], over the last [`WINDOW`], the requests due (their arrival time
//! passed) and the requests completed are counted; the window is behind when at least
//! [`MIN_DUE`] requests were due in it and fewer than [`KEEP_UP`] of that many completed.
//! [`BEHIND_TICKS`] behind windows in a row stop the probe ([`Progress::stop`]): requests
//! not sent yet are counted as not sent, requests in flight get the interrupt grace and
//! are then cancelled (failed, `interrupted`). A probe sent all at once (`inf`) has no
//! arrivals to fall behind and is never stopped; neither is any normal run.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::engine::Progress;

/// How often the counts are read.
pub const TICK: Duration = Duration::from_millis(100);
/// The span each verdict looks back over.
pub const WINDOW: Duration = Duration::from_secs(1);
/// Fewest arrivals in a window to judge it by (fewer: too few to tell).
pub const MIN_DUE: usize = 10;
/// A window keeps up when its completions reach this share of its arrivals.
pub const KEEP_UP: f64 = 0.8;
/// Consecutive behind windows that stop the probe (the first judged after one `WINDOW`,
/// so a probe is stopped 1.4 s into its run at the earliest).
pub const BEHIND_TICKS: usize = 5;

/// Whether the counts so far (one `(due, completed)` sample per tick, the first at the
/// run's start) say the probe is over-saturated.
pub fn behind(samples: &[(usize, usize)]) -> bool {
    let per_window = (WINDOW.as_millis() / TICK.as_millis()) as usize;
    if samples.len() < per_window + BEHIND_TICKS {
        return false;
    }
    let n = samples.len();
    (n - BEHIND_TICKS..n).all(|end| {
        let (due1, done1) = samples[end];
        let (due0, done0) = samples[end - per_window];
        let due = due1.saturating_sub(due0);
        let done = done1.saturating_sub(done0);
        due >= MIN_DUE && (done as f64) < KEEP_UP * due as f64
    })
}

/// A probe's watcher thread.
pub struct Watch {
    done: Arc<AtomicBool>,
    stopped_at: Arc<Mutex<Option<Duration>>>,
    thread: Option<JoinHandle<()>>,
}

impl Watch {
    /// Watches a run with arrival `offsets` (seconds from its start); `None` (all at once):
    /// nothing to watch.
    pub fn start(progress: Progress, offsets: Option<&[f64]>) -> Watch {
        let done = Arc::new(AtomicBool::new(false));
        let stopped_at = Arc::new(Mutex::new(None));
        let thread = offsets.map(|o| {
            let offsets: Vec<f64> = o.to_vec();
            let (done, stopped_at) = (done.clone(), stopped_at.clone());
            std::thread::spawn(move || {
                let started = Instant::now();
                let mut samples = Vec::new();
                while !done.load(Ordering::Relaxed) {
                    let t = started.elapsed().as_secs_f64();
                    let due = offsets.partition_point(|&a| a <= t);
                    samples.push((due, progress.completed()));
                    if behind(&samples) {
                        progress.stop();
                        *stopped_at.lock().unwrap_or_else(|e| e.into_inner()) =
                            Some(started.elapsed());
                        return;
                    }
                    std::thread::sleep(TICK);
                }
            })
        });
        Watch {
            done,
            stopped_at,
            thread,
        }
    }

    /// Ends the watch once the run returned: when the probe was stopped, how far into it.
    pub fn finish(mut self) -> Option<Duration> {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let at = *self.stopped_at.lock().unwrap_or_else(|e| e.into_inner());
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completions_far_behind_arrivals_for_long_enough_are_saturation() {
        // 20 arrivals a tick, 10 completions: behind from the first full window on.
        let falling: Vec<(usize, usize)> = (0..16).map(|i| (20 * i, 10 * i)).collect();
        assert!(behind(&falling));
        assert!(!behind(&falling[..14]), "only four behind windows yet");
        let keeping_up: Vec<(usize, usize)> = (0..30).map(|i| (20 * i, 18 * i)).collect();
        assert!(!behind(&keeping_up));
        let all_at_once: Vec<(usize, usize)> = (0..30).map(|i| (100, 3 * i)).collect();
        assert!(!behind(&all_at_once), "nothing due in a window");
    }
}
