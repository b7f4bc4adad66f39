//! A helper thread that runs until it is told to finish: the progress watcher's and the
//! dashboard's. Its body polls the flag between ticks; [`HelperThread::finish`] (or a drop,
//! when the run unwinds) sets it and joins, so the thread's last frame is drawn before
//! anything else prints.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// A running helper thread and the flag that tells it to finish.
pub struct HelperThread {
    done: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl HelperThread {
    /// Starts `body` on a thread named `name`; `body` returns once the flag it is given is set.
    pub fn spawn(
        name: &str,
        body: impl FnOnce(&AtomicBool) + Send + 'static,
    ) -> io::Result<HelperThread> {
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || body(&flag))?;
        Ok(HelperThread {
            done,
            thread: Some(thread),
        })
    }

    /// Tells the thread to finish and waits for it.
    pub fn finish(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for HelperThread {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A thread whose body polls the flag and records that it returned.
    fn polling(ended: &Arc<AtomicBool>) -> HelperThread {
        let ended = ended.clone();
        HelperThread::spawn("test helper", move |done| {
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(1));
            }
            ended.store(true, Ordering::Relaxed);
        })
        .expect("spawn")
    }

    #[test]
    fn finish_and_drop_both_stop_the_body_and_wait_for_it() {
        let ended = Arc::new(AtomicBool::new(false));
        polling(&ended).finish();
        assert!(
            ended.load(Ordering::Relaxed),
            "finish returned before the body"
        );
        let ended = Arc::new(AtomicBool::new(false));
        drop(polling(&ended));
        assert!(
            ended.load(Ordering::Relaxed),
            "drop returned before the body"
        );
    }
}
