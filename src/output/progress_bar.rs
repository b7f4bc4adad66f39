//! The progress bar (indicatif, stderr; off with `--disable-tqdm`): finished requests (or
//! with `--duration`, seconds) against the run's total, and our own rate, in-flight and
//! failure message. Drawn by `modes::progress`'s watcher from the engine's counters.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::engine::Progress;

use super::stdio::Console;

/// How often the bar reads the engine's counters and redraws.
pub const TICK: Duration = Duration::from_millis(100);

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

/// The bar a run draws on stderr while it goes on (hidden: draws nothing).
pub struct Bar(ProgressBar);

impl Bar {
    /// The bar for the run whose counters are `progress`: its requests, or with
    /// `--duration` its time; hidden unless `show`.
    pub fn new(progress: &Progress, show: bool) -> Bar {
        Bar(match (show, progress.time_bound()) {
            (false, _) => ProgressBar::hidden(),
            (true, Some(bound)) => time_bar(bound),
            (true, None) => new_bar(progress.total() as u64),
        })
    }

    /// One redraw from the engine's counters, `elapsed` into the run.
    pub fn tick(&self, progress: &Progress, elapsed: Duration) {
        tick(&self.0, progress, elapsed);
    }

    /// `line` on the console's stderr, the bar moved out of its way (a hidden bar prints
    /// nothing of its own).
    pub fn err_line(&self, console: &Console, line: &str) {
        self.0.suspend(|| console.err_line(line));
    }

    /// Clears the bar once the run is over.
    pub fn finish(&self) {
        self.0.finish_and_clear();
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
