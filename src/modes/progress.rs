//! The watcher of a running engine: it draws the progress bar (`output::progress_bar`) and
//! forwards a stop request (Ctrl-C, SIGTERM: the run's [`StopHandle`], connected by `app`)
//! to the engine: the run stops at once — nothing more is sent, requests in flight get the
//! grace period (`--interrupt-grace-sec`) — and reports what it measured, marked
//! interrupted.
//!
//! The watcher thread sleeps on the handle between bar redraws, so it stops the engine the
//! moment the request comes, not at its next redraw.

use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::engine::Progress;
use crate::output::progress_bar::{Bar, TICK};
use crate::output::stdio::Console;
use crate::runtime::helper_thread::HelperThread;
use crate::runtime::stop_handle::StopHandle;

/// The notice printed when a run is stopped.
const NOTICE: &str = "Interrupted: no new requests are sent; requests in flight get the grace \
                      period (--interrupt-grace-sec), then are cancelled (Ctrl-C again to quit).";

/// Watches a running engine from a helper thread: draws the bar, forwards Ctrl-C.
pub struct Watcher {
    thread: HelperThread,
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
        let show_bar = show_bar && console.stderr_is_terminal();
        let thread = HelperThread::spawn("progress", move |flag| {
            let bar = Bar::new(&progress, show_bar);
            let started = Instant::now();
            let mut stopped = false;
            while !flag.load(Ordering::Relaxed) {
                bar.tick(&progress, started.elapsed());
                if !stopped && stop.stop_requested() {
                    stopped = true;
                    progress.stop();
                    // On stderr with or without the bar (a hidden bar prints nothing).
                    bar.err_line(&console, NOTICE);
                }
                stop.sleep_or_stop(TICK);
            }
            bar.tick(&progress, started.elapsed());
            bar.finish();
        })
        .expect("start the progress watcher thread");
        Watcher { thread }
    }

    /// Stops the watcher once the run returned.
    pub fn finish(self) {
        self.thread.finish();
    }
}
