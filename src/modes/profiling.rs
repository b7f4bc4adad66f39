//! `--profile-batch-threshold N`: server-side profiling of the busy part of a run. While the
//! measured run goes on, a thread polls the server's `/metrics` every half second; once
//! `vllm:num_requests_running` reaches N it starts the profiler, and stops it after
//! `--profile-duration` seconds or at the end of the run, whichever comes first. The polls
//! are control-plane requests on their own connection, never on the engine's.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::control_plane::{Target, CONTROL_TIMEOUT};
use crate::output::stdio::Console;

/// How often `/metrics` is read while waiting for the threshold.
const POLL: Duration = Duration::from_millis(500);

/// A running trigger; [`Trigger::finish`] ends it at the end of the run.
pub struct Trigger {
    end: mpsc::Sender<()>,
    thread: JoinHandle<()>,
}

/// What the trigger needs of the server (a trait so tests can drive it without one).
pub trait Server: Send + Sync + 'static {
    /// Requests running now (`vllm:num_requests_running`), when the server says.
    fn running(&self) -> Option<f64>;
    /// `POST /start_profile` or `/stop_profile`; prints Python's lines and any refusal.
    fn profile(&self, action: &str);
}

/// The run's server as the trigger sees it, with the console its lines go to.
pub struct Profiled {
    pub target: Arc<Target>,
    pub console: Console,
}

impl Server for Profiled {
    fn running(&self) -> Option<f64> {
        let scrape = self.target.metrics(CONTROL_TIMEOUT)?;
        scrape.gauges.get("vllm:num_requests_running").copied()
    }

    fn profile(&self, action: &str) {
        let (doing, done) = match action {
            "start" => ("Starting profiler...", "Profiler started"),
            _ => ("Stopping profiler...", "Profiler stopped"),
        };
        self.console.line(doing);
        match self.target.profile(action) {
            Ok(()) => self.console.line(done),
            Err(e) => self.console.warning(format_args!("--profile: {e:#}")),
        }
    }
}

impl Trigger {
    /// Starts watching `server` for `threshold` running requests.
    pub fn start(
        server: Arc<dyn Server>,
        threshold: usize,
        duration: Duration,
        console: Console,
    ) -> Trigger {
        let (end, ended) = mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            watch(&*server, threshold, duration, &ended, &console);
        });
        Trigger { end, thread }
    }

    /// The run is over: stops the profiler if it is running, and the polling.
    pub fn finish(self) {
        let _ = self.end.send(());
        let _ = self.thread.join();
    }
}

/// Waits `d` unless the run ends first; true when it ended.
fn ended_within(ended: &mpsc::Receiver<()>, d: Duration) -> bool {
    !matches!(ended.recv_timeout(d), Err(RecvTimeoutError::Timeout))
}

fn watch(
    server: &dyn Server,
    threshold: usize,
    duration: Duration,
    ended: &mpsc::Receiver<()>,
    console: &Console,
) {
    loop {
        let running = server.running().unwrap_or(0.0);
        if running >= threshold as f64 {
            break;
        }
        if ended_within(ended, POLL) {
            console.note(format_args!(
                "--profile-batch-threshold {threshold}: never reached (the server never ran \
                 that many requests at once); the profiler was not started"
            ));
            return;
        }
    }
    server.profile("start");
    let started = Instant::now();
    ended_within(ended, duration.saturating_sub(started.elapsed()));
    server.profile("stop");
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    /// A server whose running count is the number of polls so far.
    #[derive(Default)]
    struct Fake {
        polls: AtomicUsize,
        calls: Mutex<Vec<(String, usize)>>,
    }

    impl Server for Fake {
        fn running(&self) -> Option<f64> {
            Some(self.polls.fetch_add(1, Ordering::SeqCst) as f64)
        }
        fn profile(&self, action: &str) {
            let polls = self.polls.load(Ordering::SeqCst);
            self.calls.lock().unwrap().push((action.into(), polls));
        }
    }

    #[test]
    fn starts_at_the_threshold_and_stops_at_the_end_of_the_run() {
        let fake = Arc::new(Fake::default());
        // Polls see 0, 1, 2: the third reaches the threshold.
        let t = Trigger::start(
            fake.clone(),
            2,
            Duration::from_secs(600),
            Console::capture().0,
        );
        while fake.calls.lock().unwrap().is_empty() {
            std::thread::yield_now();
        }
        t.finish();
        let calls = fake.calls.lock().unwrap().clone();
        assert_eq!(calls, [("start".to_string(), 3), ("stop".to_string(), 3)]);
    }

    /// With the threshold met at once and no duration, the trigger stops the profiler by
    /// itself, before the run ends.
    #[test]
    fn stops_after_the_duration_without_waiting_for_the_end() {
        let fake = Arc::new(Fake::default());
        let t = Trigger::start(fake.clone(), 0, Duration::ZERO, Console::capture().0);
        while fake.calls.lock().unwrap().len() < 2 {
            std::thread::yield_now();
        }
        t.finish();
        let actions: Vec<String> = fake
            .calls
            .lock()
            .unwrap()
            .iter()
            .map(|c| c.0.clone())
            .collect();
        assert_eq!(actions, ["start", "stop"]);
    }

    #[test]
    fn a_threshold_never_reached_starts_nothing() {
        let fake = Arc::new(Fake::default());
        let t = Trigger::start(
            fake.clone(),
            usize::MAX,
            Duration::from_secs(1),
            Console::capture().0,
        );
        t.finish();
        assert!(fake.calls.lock().unwrap().is_empty());
    }
}
