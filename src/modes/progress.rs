//! The progress bar (indicatif, stderr; off with `--disable-tqdm`) and Ctrl-C handling: the
//! first Ctrl-C stops sending new requests and lets the run finish and report what it
//! measured; a second one exits at once.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::engine::Progress;

static INTERRUPTS: AtomicUsize = AtomicUsize::new(0);

extern "C" fn on_sigint(_: libc::c_int) {
    if INTERRUPTS.fetch_add(1, Ordering::SeqCst) >= 1 {
        // SAFETY: `_exit` is async-signal-safe; 130 is the shell's code for SIGINT.
        unsafe { libc::_exit(130) };
    }
}

/// Installs the Ctrl-C handler (idempotent).
pub fn install_interrupt_handler() {
    // SAFETY: `on_sigint` only touches an atomic and calls `_exit`, both async-signal-safe.
    unsafe {
        libc::signal(
            libc::SIGINT,
            on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
    }
}

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
                    bar.println("Interrupted: no new requests are sent; waiting for those in flight (Ctrl-C again to quit).");
                }
                std::thread::sleep(Duration::from_millis(100));
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
