//! The progress bar (indicatif, stderr; off with `--disable-tqdm`) and the watcher that
//! forwards a stop request (Ctrl-C, SIGTERM: the run's [`StopHandle`]) to the engine: the
//! run stops at once — nothing more is sent, requests in flight get the grace period
//! (`--interrupt-grace-sec`) — and reports what it measured, marked interrupted.
//!
//! The watcher thread sleeps on the handle between bar redraws, so it stops the engine the
//! moment the request comes, not at its next redraw.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::engine::Progress;
use crate::output::stdio::Console;
pub use crate::runtime::stop_handle::{StopHandle, INTERRUPTED_EXIT};

/// How often the bar reads the engine's counters and redraws.
const TICK: Duration = Duration::from_millis(100);

/// The bar: position per finished request, our own rate/in-flight/failure message (indicatif's
/// `{per_sec}` has no fixed precision), and its ETA.
fn new_bar(total: u64) -> ProgressBar {
    let bar = ProgressBar::new(total);
    bar.set_draw_target(ProgressDrawTarget::stderr_with_hz(10));
    if let Ok(style) =
        ProgressStyle::with_template("{bar:30} {pos}/{len} [{elapsed_precise}<{eta_precise}] {msg}")
    {
        bar.set_style(style);
    }
    bar
}

/// `--duration`: the bar measures the run's time, seconds of the bound.
fn time_bar(bound: Duration) -> ProgressBar {
    let bar = ProgressBar::new(bound.as_secs().max(1));
    bar.set_draw_target(ProgressDrawTarget::stderr_with_hz(10));
    if let Ok(style) = ProgressStyle::with_template("{bar:30} {pos}/{len} s {msg}") {
        bar.set_style(style);
    }
    bar
}

/// One redraw from the engine's counters (atomics only: nothing on the engine's side).
fn tick(bar: &ProgressBar, progress: &Progress, elapsed: Duration) {
    let completed = progress.completed();
    if !bar.is_hidden() {
        // The message first: setting the position may redraw, and should show this tick's.
        bar.set_message(status(
            completed,
            progress.in_flight(),
            progress.failed(),
            elapsed,
        ));
    }
    match progress.time_bound() {
        Some(bound) => bar.set_position(elapsed.min(bound).as_secs()),
        None => bar.set_position(completed as u64),
    }
}

/// The bar's message: finished requests per second (one decimal), requests in flight,
/// failures so far.
fn status(completed: usize, in_flight: usize, failed: usize, elapsed: Duration) -> String {
    let secs = elapsed.as_secs_f64();
    let rate = if secs > 0.0 {
        completed as f64 / secs
    } else {
        0.0
    };
    format!("{rate:.1} req/s, {in_flight} in flight, {failed} failed")
}

/// The notice printed when a run is stopped.
const NOTICE: &str = "Interrupted: no new requests are sent; requests in flight get the grace \
                      period (--interrupt-grace-sec), then are cancelled (Ctrl-C again to quit).";

/// Watches a running engine from a helper thread: draws the bar, forwards Ctrl-C.
pub struct Watcher {
    done: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Watcher {
    /// Starts the watcher thread; the bar is drawn only when `show_bar` and the console's
    /// stderr is a terminal (a log file gets no redraw escapes).
    pub fn start(
        progress: Progress,
        show_bar: bool,
        console: Console,
        stop: StopHandle,
    ) -> Watcher {
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        let show_bar = show_bar && console.stderr_is_terminal();
        let thread = std::thread::spawn(move || {
            let bar = if show_bar {
                match progress.time_bound() {
                    Some(bound) => time_bar(bound),
                    None => new_bar(progress.total() as u64),
                }
            } else {
                ProgressBar::hidden()
            };
            let started = Instant::now();
            let mut stopped = false;
            while !flag.load(Ordering::Relaxed) {
                tick(&bar, &progress, started.elapsed());
                if !stopped && stop.stop_requested() {
                    stopped = true;
                    progress.stop();
                    // On stderr with or without the bar (a hidden bar prints nothing).
                    bar.suspend(|| console.err_line(NOTICE));
                }
                stop.sleep_or_stop(TICK);
            }
            tick(&bar, &progress, started.elapsed());
            bar.finish_and_clear();
        });
        Watcher {
            done,
            thread: Some(thread),
        }
    }

    /// Stops the watcher once the run returned.
    pub fn finish(mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_has_one_decimal_in_flight_and_failures() {
        let s = status(25, 7, 2, Duration::from_secs(2));
        assert_eq!(s, "12.5 req/s, 7 in flight, 2 failed");
        assert_eq!(
            status(0, 0, 0, Duration::ZERO),
            "0.0 req/s, 0 in flight, 0 failed"
        );
    }
}
