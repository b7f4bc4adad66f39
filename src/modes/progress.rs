//! The progress bar (indicatif, stderr; off with `--disable-tqdm`) and Ctrl-C handling: the
//! first Ctrl-C (or SIGTERM) stops the run at once — nothing more is sent, requests in flight
//! get the grace period (`--interrupt-grace-sec`) — and the run reports what it measured,
//! marked interrupted; a second one exits at once. Both exit with status 130.
//!
//! The signal handler only counts and writes one byte to a pipe (both async-signal-safe);
//! the watcher thread sleeps on that pipe between bar redraws, so it stops the engine the
//! moment the signal comes, not at its next redraw.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::engine::Progress;

/// The exit status of an interrupted run (the shell's code for SIGINT).
pub const INTERRUPTED_EXIT: i32 = 130;

static INTERRUPTS: AtomicUsize = AtomicUsize::new(0);
/// Read and write ends of the pipe the handler wakes the watcher with (-1 = none).
static WAKE_READ: AtomicI32 = AtomicI32::new(-1);
static WAKE_WRITE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_interrupt(_: libc::c_int) {
    if INTERRUPTS.fetch_add(1, Ordering::SeqCst) >= 1 {
        // SAFETY: `_exit` is async-signal-safe.
        unsafe { libc::_exit(INTERRUPTED_EXIT) };
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
    pub fn start(progress: Progress, show_bar: bool) -> Watcher {
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        let thread = std::thread::spawn(move || {
            let bar = if show_bar {
                ProgressBar::new(progress.total() as u64)
            } else {
                ProgressBar::hidden()
            };
            if show_bar {
                bar.set_draw_target(ProgressDrawTarget::stderr_with_hz(4));
                if let Ok(style) = ProgressStyle::with_template(
                    "{bar:40} {pos}/{len} [{elapsed_precise}<{eta_precise}, {per_sec}]",
                ) {
                    bar.set_style(style);
                }
            }
            let mut stopped = false;
            while !flag.load(Ordering::Relaxed) {
                bar.set_position(progress.completed() as u64);
                if !stopped && interrupted() {
                    stopped = true;
                    progress.stop();
                    // On stderr with or without the bar (a hidden bar prints nothing).
                    bar.suspend(|| eprintln!("{NOTICE}"));
                }
                sleep_or_signal(Duration::from_millis(100));
            }
            bar.set_position(progress.completed() as u64);
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
