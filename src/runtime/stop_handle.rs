//! The stop handle: how a run is asked to stop from outside (Ctrl-C, SIGTERM, or a test).
//!
//! The first request stops the run at once — nothing more is sent, requests in flight get
//! the grace period (`--interrupt-grace-sec`) — and the run reports what it measured, marked
//! interrupted; a second signal exits at once. Both exit with status 130.
//!
//! One handle per program run, made by `app` and passed down (no process-global state), so
//! that a whole run can also go through the program in a test's own process: the binary's
//! handle ([`StopHandle::on_signals`]) installs the SIGINT/SIGTERM handlers when the run
//! [arms](StopHandle::arm) it; a test's ([`StopHandle::manual`]) installs nothing and is
//! stopped by [`StopHandle::request_stop`], the same path a signal takes minus the quit.
//!
//! A second signal within [`SAME_REQUEST_WINDOW`] of the first is the same request to stop,
//! not "quit now": coreutils `timeout` signals the process and then its whole group, `docker
//! stop` and process managers signal several processes of one job at once, so one stop
//! arrives as two signals microseconds apart. A person's second Ctrl-C comes later and still
//! quits at once.
//!
//! The signal handler (signal-hook's registry) only counts and writes one byte to a socket
//! pair (both async-signal-safe); the watcher sleeps on that socket between bar redraws
//! ([`StopHandle::sleep_or_stop`]), so it stops the engine the moment the request comes.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Once};
use std::time::Duration;

use signal_hook::consts::{SIGINT, SIGTERM};

/// The exit status of an interrupted run (the shell's code for SIGINT).
pub const INTERRUPTED_EXIT: i32 = 130;

/// Signals this close to the first one are the same request to stop (see the module doc).
pub const SAME_REQUEST_WINDOW: Duration = Duration::from_secs(1);

/// A run's stop: cheap to clone (clones share one state).
#[derive(Clone)]
pub struct StopHandle(Arc<State>);

impl std::fmt::Debug for StopHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StopHandle")
            .field("signals", &self.0.signals)
            .field("armed", &self.armed())
            .field("stop_requested", &self.stop_requested())
            .finish()
    }
}

struct State {
    /// Arming installs the process's SIGINT/SIGTERM handlers (the binary's handle).
    signals: bool,
    armed: Once,
    requests: AtomicUsize,
    /// When the first request came (monotonic clock, nanoseconds; 0 = none yet).
    first_ns: AtomicU64,
    /// The socket pair a request wakes the watcher through (`None`: no socket could be made,
    /// the watcher then just sleeps its tick).
    wake: Option<(UnixStream, UnixStream)>,
}

impl StopHandle {
    /// The program's handle: [`StopHandle::arm`] installs the Ctrl-C and SIGTERM handlers
    /// (for the rest of the process). Made once, by `app::main`.
    pub fn on_signals() -> StopHandle {
        StopHandle::new(true)
    }

    /// A handle no signal reaches, for a run inside another program (a test): stopped only
    /// by [`StopHandle::request_stop`].
    pub fn manual() -> StopHandle {
        StopHandle::new(false)
    }

    fn new(signals: bool) -> StopHandle {
        let wake = UnixStream::pair()
            .ok()
            .filter(|(_, write)| write.set_nonblocking(true).is_ok());
        StopHandle(Arc::new(State {
            signals,
            armed: Once::new(),
            requests: AtomicUsize::new(0),
            first_ns: AtomicU64::new(0),
            wake,
        }))
    }

    /// From here on a stop request is the run's to handle (idempotent): the program's handle
    /// installs the signal handlers now. Every point of a sweep arms it, and signal-hook adds
    /// an action per call rather than replacing it, hence once.
    pub fn arm(&self) {
        let state = &self.0;
        state.armed.call_once(|| {
            if !state.signals {
                return;
            }
            for sig in [SIGINT, SIGTERM] {
                let s = Arc::clone(state);
                // SAFETY: signal-hook's `register` is unsafe because the action runs inside
                // the signal handler; `on_signal` only touches atomics (the Arc is not cloned
                // or dropped there) and calls `clock_gettime` and `_exit`, all
                // async-signal-safe, and neither allocates nor locks.
                let _ = unsafe { signal_hook::low_level::register(sig, move || s.on_signal()) };
            }
            // Registered after `on_signal`, so it runs after it (signal-hook keeps the order):
            // a quitting signal exits before it writes. Each signal writes one byte with a
            // non-blocking send (a full socket already holds a wake-up); the watcher drains.
            if let Some((_, write)) = &state.wake {
                for sig in [SIGINT, SIGTERM] {
                    if let Ok(w) = write.try_clone() {
                        let _ = signal_hook::low_level::pipe::register(sig, w);
                    }
                }
            }
        });
    }

    /// Whether [`StopHandle::arm`] was called.
    pub fn armed(&self) -> bool {
        self.0.armed.is_completed()
    }

    /// Asks the run to stop, as a first Ctrl-C does (never quits the process).
    pub fn request_stop(&self) {
        let state = &self.0;
        let _ =
            state
                .first_ns
                .compare_exchange(0, monotonic_ns(), Ordering::SeqCst, Ordering::SeqCst);
        state.requests.fetch_add(1, Ordering::SeqCst);
        if let Some((_, write)) = &state.wake {
            let mut write: &UnixStream = write;
            let _ = write.write(&[1]);
        }
    }

    /// True once a stop was requested (Ctrl-C, SIGTERM, [`StopHandle::request_stop`]).
    pub fn stop_requested(&self) -> bool {
        self.0.requests.load(Ordering::SeqCst) > 0
    }

    /// Sleeps up to `timeout`, waking early when a stop is requested (without the socket:
    /// just sleeps).
    pub fn sleep_or_stop(&self, timeout: Duration) {
        let Some((read, _)) = self.0.wake.as_ref().filter(|_| !timeout.is_zero()) else {
            std::thread::sleep(timeout);
            return;
        };
        let mut read: &UnixStream = read;
        if read.set_read_timeout(Some(timeout)).is_err() {
            std::thread::sleep(timeout);
            return;
        }
        // One read takes every wake-up byte there is (up to 64); a timeout just returns.
        let mut sink = [0u8; 64];
        let _ = read.read(&mut sink);
    }
}

impl State {
    /// What a signal does: stamps the first one, quits on a later one after the window,
    /// counts. Only atomics, `clock_gettime` and `_exit`: all async-signal-safe.
    fn on_signal(&self) {
        let now = monotonic_ns();
        // The first signal stamps the time; a later one reads it.
        let first = match self
            .first_ns
            .compare_exchange(0, now, Ordering::SeqCst, Ordering::SeqCst)
        {
            Ok(_) => 0,
            Err(first) => first,
        };
        if quits_now(first, now) {
            signal_hook::low_level::exit(INTERRUPTED_EXIT);
        }
        self.requests.fetch_add(1, Ordering::SeqCst);
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

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
    fn a_manual_handle_installs_nothing_and_a_request_wakes_its_sleeper() {
        let stop = StopHandle::manual();
        stop.arm();
        assert!(stop.armed() && !stop.stop_requested());
        let sleeper = stop.clone();
        let t = std::thread::spawn(move || {
            let started = Instant::now();
            sleeper.sleep_or_stop(Duration::from_secs(60));
            started.elapsed()
        });
        std::thread::sleep(Duration::from_millis(20));
        stop.request_stop();
        let slept = t.join().unwrap();
        assert!(stop.stop_requested());
        assert!(
            slept < Duration::from_secs(30),
            "woke at the request: {slept:?}"
        );
        // Another handle is not stopped by this one's request.
        assert!(!StopHandle::manual().stop_requested());
    }
}
