//! The progress bar (indicatif, stderr; off with `--disable-tqdm`) and Ctrl-C handling: the
//! first Ctrl-C (or SIGTERM) stops the run at once — nothing more is sent, requests in flight
//! get the grace period (`--interrupt-grace-sec`) — and the run reports what it measured,
//! marked interrupted; a second one exits at once. Both exit with status 130.
//!
//! A second signal within [`SAME_REQUEST_WINDOW`] of the first is the same request to stop,
//! not "quit now": coreutils `timeout` signals the process and then its whole group, `docker
//! stop` and process managers signal several processes of one job at once, so one stop
//! arrives as two signals microseconds apart. A person's second Ctrl-C comes later and still
//! quits at once.
//!
//! The signal handler (signal-hook's registry) only counts and writes one byte to a socket
//! pair (both async-signal-safe); the watcher thread sleeps on that socket between bar redraws, so it stops the engine the
//! moment the signal comes, not at its next redraw.

use std::io::{IsTerminal, Read};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Once, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use signal_hook::consts::{SIGINT, SIGTERM};

use crate::engine::Progress;
use crate::output::stdio::Console;

/// The exit status of an interrupted run (the shell's code for SIGINT).
pub const INTERRUPTED_EXIT: i32 = 130;

static INTERRUPTS: AtomicUsize = AtomicUsize::new(0);
/// When the first signal came (monotonic clock, nanoseconds; 0 = none yet).
static FIRST_SIGNAL_NS: AtomicU64 = AtomicU64::new(0);

/// Signals this close to the first one are the same request to stop (see the module doc).
pub const SAME_REQUEST_WINDOW: Duration = Duration::from_secs(1);

/// The monotonic clock in nanoseconds (`clock_gettime` is async-signal-safe); never 0.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `clock_gettime` writes one timespec into a local; it is async-signal-safe.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
        .max(1)
}

/// Whether a signal at `now_ns` quits at once: a second signal, after the window.
fn quits_now(first_ns: u64, now_ns: u64) -> bool {
    first_ns != 0 && now_ns.saturating_sub(first_ns) >= SAME_REQUEST_WINDOW.as_nanos() as u64
}
/// The read end of the socket pair the handler wakes the watcher through (unset = none).
static WAKE: OnceLock<UnixStream> = OnceLock::new();
/// Installs the handlers once: every point of a sweep calls [`install_interrupt_handler`],
/// and signal-hook adds an action per call rather than replacing it.
static INSTALL: Once = Once::new();

/// The first part of the handler: stamps the first signal, quits on a later one after the
/// window, counts. Only atomics, `clock_gettime` and `_exit`: all async-signal-safe.
fn on_interrupt() {
    let now = monotonic_ns();
    // The first signal stamps the time; a later one reads it.
    let first = match FIRST_SIGNAL_NS.compare_exchange(0, now, Ordering::SeqCst, Ordering::SeqCst) {
        Ok(_) => 0,
        Err(first) => first,
    };
    if quits_now(first, now) {
        signal_hook::low_level::exit(INTERRUPTED_EXIT);
    }
    INTERRUPTS.fetch_add(1, Ordering::SeqCst);
}

/// The Ctrl-C and SIGTERM handlers are installed (they stay for the life of the process).
/// Tests that run the program in their own process check that a run did not install them.
pub fn interrupt_handler_installed() -> bool {
    INSTALL.is_completed()
}

/// Installs the Ctrl-C and SIGTERM handler and its wake-up socket (idempotent).
pub fn install_interrupt_handler() {
    INSTALL.call_once(|| {
        for sig in [SIGINT, SIGTERM] {
            // SAFETY: signal-hook's `register` is unsafe because the action runs inside the
            // signal handler; `on_interrupt` only touches atomics and calls `clock_gettime`
            // and `_exit`, all async-signal-safe, and neither allocates nor locks.
            let _ = unsafe { signal_hook::low_level::register(sig, on_interrupt) };
        }
        // Registered after `on_interrupt`, so it runs after it (signal-hook keeps the order):
        // a quitting signal exits before it writes. Each signal writes one byte with a
        // non-blocking send (a full socket already holds a wake-up); the watcher drains them.
        if let Ok((read, write)) = UnixStream::pair() {
            let registered = [SIGINT, SIGTERM].into_iter().all(|sig| {
                write
                    .try_clone()
                    .is_ok_and(|w| signal_hook::low_level::pipe::register(sig, w).is_ok())
            });
            if registered {
                let _ = WAKE.set(read);
            }
        }
    });
}

/// Sleeps up to `timeout`, waking early when a signal came (without the socket: just sleeps).
fn sleep_or_signal(timeout: Duration) {
    let Some(mut wake) = WAKE.get().filter(|_| !timeout.is_zero()) else {
        std::thread::sleep(timeout);
        return;
    };
    if wake.set_read_timeout(Some(timeout)).is_err() {
        std::thread::sleep(timeout);
        return;
    }
    // One read takes every wake-up byte there is (up to 64); a timeout just returns.
    let mut sink = [0u8; 64];
    let _ = wake.read(&mut sink);
}

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

/// True once the user pressed Ctrl-C.
pub fn interrupted() -> bool {
    INTERRUPTS.load(Ordering::SeqCst) > 0
}

/// Watches a running engine from a helper thread: draws the bar, forwards Ctrl-C.
pub struct Watcher {
    done: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Watcher {
    /// Starts the watcher thread; the bar is drawn only when `show_bar` and stderr is a
    /// terminal (a log file gets no redraw escapes).
    pub fn start(progress: Progress, show_bar: bool, console: Console) -> Watcher {
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        let show_bar = show_bar && std::io::stderr().is_terminal();
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
                if !stopped && interrupted() {
                    stopped = true;
                    progress.stop();
                    // On stderr with or without the bar (a hidden bar prints nothing).
                    bar.suspend(|| console.err_line(NOTICE));
                }
                sleep_or_signal(TICK);
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
    fn a_second_signal_within_the_window_is_the_same_request_a_later_one_quits() {
        let first = 5_000_000_000;
        let window = SAME_REQUEST_WINDOW.as_nanos() as u64;
        assert!(!quits_now(0, first), "the first signal never quits");
        assert!(!quits_now(first, first + 1_000), "timeout's group signal");
        assert!(!quits_now(first, first + window - 1));
        assert!(quits_now(first, first + window), "a person's second Ctrl-C");
    }

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
