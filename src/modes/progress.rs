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
//! The signal handler only counts and writes one byte to a pipe (both async-signal-safe);
//! the watcher thread sleeps on that pipe between bar redraws, so it stops the engine the
//! moment the signal comes, not at its next redraw.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

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
/// Read and write ends of the pipe the handler wakes the watcher with (-1 = none).
static WAKE_READ: AtomicI32 = AtomicI32::new(-1);
static WAKE_WRITE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_interrupt(_: libc::c_int) {
    let now = monotonic_ns();
    // The first signal stamps the time; a later one reads it.
    let first = match FIRST_SIGNAL_NS.compare_exchange(0, now, Ordering::SeqCst, Ordering::SeqCst) {
        Ok(_) => 0,
        Err(first) => first,
    };
    if quits_now(first, now) {
        // SAFETY: `_exit` is async-signal-safe.
        unsafe { libc::_exit(INTERRUPTED_EXIT) };
    }
    if INTERRUPTS.fetch_add(1, Ordering::SeqCst) >= 1 {
        // The same request to stop, delivered twice: the watcher already has it.
        return;
    }
    let fd = WAKE_WRITE.load(Ordering::SeqCst);
    if fd >= 0 {
        // SAFETY: `write` is async-signal-safe; one byte from a static to our own pipe (a
        // full pipe already holds a wake-up).
        unsafe { libc::write(fd, b"!".as_ptr().cast(), 1) };
    }
}

/// Installs the Ctrl-C and SIGTERM handler and its wake-up pipe (idempotent).
pub fn install_interrupt_handler() {
    if WAKE_READ.load(Ordering::SeqCst) < 0 {
        let mut fds = [-1; 2];
        // SAFETY: `pipe2` writes two descriptors into the array on success.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } == 0 {
            WAKE_WRITE.store(fds[1], Ordering::SeqCst);
            WAKE_READ.store(fds[0], Ordering::SeqCst);
        }
    }
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: `on_interrupt` only touches atomics and calls `write`/`_exit`, all
        // async-signal-safe.
        unsafe {
            libc::signal(
                sig,
                on_interrupt as extern "C" fn(libc::c_int) as libc::sighandler_t,
            );
        }
    }
}

/// Sleeps up to `timeout`, waking early when a signal came (without the pipe: just sleeps).
fn sleep_or_signal(timeout: Duration) {
    let fd = WAKE_READ.load(Ordering::SeqCst);
    if fd < 0 {
        std::thread::sleep(timeout);
        return;
    }
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd on the stack; the pipe stays open for the process's life.
    if unsafe { libc::poll(&mut pfd, 1, timeout.as_millis() as libc::c_int) } > 0 {
        let mut sink = [0u8; 64];
        // SAFETY: reads into a local buffer from our own non-blocking pipe.
        unsafe { libc::read(fd, sink.as_mut_ptr().cast(), sink.len()) };
    }
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
    bar.set_position(completed as u64);
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
                new_bar(progress.total() as u64)
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
