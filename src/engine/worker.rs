//! A worker: one logical client slot. It claims the next request from the shared cursor,
//! waits for its arrival time, runs the exchange on its own keep-alive connection and records
//! the outcome. The number of workers is the concurrency limit, so `--max-concurrency` holds
//! exactly across all cores with no semaphore. Arrival waits use the core's precise
//! [`Timers`] (a timerfd), not monoio's millisecond wheel, so a request leaves within
//! microseconds of its scheduled time.
//!
//! A stop ([`CoreStop`]) ends an arrival wait at once (the claimed request is not sent) and
//! cuts an exchange still running when the grace period is over (a failure, `interrupted`).

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use crate::http::conn::Connection;

use super::exchange::{exchange, ExchangeBuffers, Measured};
use super::recorder::{Failure, Histograms, Record, WorkerLog};
use super::stop::CoreStop;
use super::timer::Timers;
use super::RunShared;

/// What a worker shares with the other workers of its core.
pub struct CoreHandles {
    pub timers: Rc<Timers>,
    pub stop: Rc<CoreStop>,
    /// The worker's slot in `stop`.
    pub slot: usize,
}

fn ns_since(epoch: Instant, t: Instant) -> u64 {
    t.saturating_duration_since(epoch).as_nanos() as u64
}

/// Runs requests until the schedule is exhausted (or the run is stopped); returns its log and
/// its connection (kept alive for the next run when the server keeps it).
pub async fn run_worker(
    shared: Arc<RunShared>,
    epoch: Instant,
    mut conn: Option<Connection>,
    histograms: Rc<RefCell<Histograms>>,
    core: CoreHandles,
    mut log: WorkerLog,
) -> (WorkerLog, Option<Connection>) {
    let CoreHandles { timers, stop, slot } = core;
    let w = &shared.workload;
    let total = w.requests.len();
    let mut bufs = ExchangeBuffers::default();
    loop {
        if shared.stop.load(Ordering::Acquire) {
            break;
        }
        let index = shared.cursor.fetch_add(1, Ordering::Relaxed);
        if index >= total {
            break;
        }
        let offset = w
            .arrivals
            .as_ref()
            .map_or(std::time::Duration::ZERO, |a| a[index]);
        let mut scheduled = epoch + offset;
        let was_waiting = Instant::now() < scheduled;
        if was_waiting {
            monoio::select! {
                () = timers.sleep_until(scheduled) => {},
                () = stop.wait(slot) => {},
            }
        }
        if let Some(parent_done) = wait_for_parent(&shared, index, epoch, &timers).await {
            // The request's arrival is its parent's completion when that came later.
            scheduled = scheduled.max(parent_done);
        }
        if shared.stop.load(Ordering::Acquire) {
            // Claimed but never sent: the run counts it as not sent.
            break;
        }
        let start = Instant::now();
        let (itl0, text0) = log.arena_marks();
        let mut m = Measured::default();
        let deadline = start.checked_add(shared.options.request_timeout);
        // The exchange is built inside the deadline future, not bound to a local first: a
        // local would be a second ~1.5 KB slot in every worker's future.
        let outcome = monoio::select! {
            done = timers.timeout_at(
                deadline,
                exchange(
                    conn.take(),
                    &shared.endpoint,
                    &w.requests[index],
                    w.mode,
                    &mut bufs,
                    &mut log,
                    &mut m,
                ),
            ) => Some(done),
            () = stop.grace_over(slot, &timers) => None,
        };
        let result = match outcome {
            Some(Some((back, result))) => {
                conn = back;
                result
            }
            Some(None) => {
                bufs = ExchangeBuffers::default();
                Err(Failure {
                    kind: "timeout".into(),
                    error: "TimeoutError".into(),
                    detail: format!(
                        "no complete response within {:?} (--request-timeout-sec)",
                        shared.options.request_timeout
                    ),
                })
            }
            None => {
                bufs = ExchangeBuffers::default();
                Err(Failure {
                    kind: "interrupted".into(),
                    error: "Interrupted".into(),
                    detail: format!(
                        "still running {:?} after the run was stopped (Ctrl-C or SIGTERM)",
                        shared.options.interrupt_grace
                    ),
                })
            }
        };
        let end = Instant::now();
        if result.is_err() {
            // A failed request keeps no partial data (Python: itl [] and text "").
            log.itl_ns.truncate(itl0 as usize);
            log.text.truncate(text0 as usize);
        } else if m.usage_completion_tokens.is_some_and(|c| c > 0) && !shared.options.keep_all_text
        {
            // The server counted the tokens; the text is only needed with --save-detailed.
            log.text.truncate(text0 as usize);
        }
        let (itl1, text1) = log.arena_marks();
        let rec = Record {
            index: index as u32,
            scheduled_ns: ns_since(epoch, scheduled),
            start_ns: ns_since(epoch, start),
            first_token_ns: m.first_token.map(|t| ns_since(epoch, t)),
            last_token_ns: m.last_token.map_or(0, |t| ns_since(epoch, t)),
            itl: itl0..itl1,
            text: text0..text1,
            usage_prompt_tokens: m.usage_prompt_tokens,
            usage_completion_tokens: m.usage_completion_tokens,
            chunks: m.chunks,
            client_prompt_len: w.client_prompt_lens.get(index).copied().unwrap_or(0),
            was_waiting,
            failure: result.err().map(Box::new),
            end_ns: ns_since(epoch, m.end.unwrap_or(end)),
        };
        log.push(rec, &mut histograms.borrow_mut());
        shared.completed.fetch_add(1, Ordering::Relaxed);
        if let Some(done) = &shared.finished {
            done[index].store(ns_since(epoch, Instant::now()).max(1), Ordering::Release);
        }
    }
    (log, conn)
}

/// How often a request that waits for its parent checks whether the parent finished. Parents
/// run on any core, so the check is a poll of the parent's completion stamp.
const PARENT_POLL: std::time::Duration = std::time::Duration::from_micros(500);

/// Waits until the request's parent (`Workload::parents`) has finished, or the run is
/// stopped; returns the parent's completion time when there was a parent to wait for.
/// A parent always has a smaller index, so it was claimed earlier and is running or done:
/// waiting cannot deadlock.
async fn wait_for_parent(
    shared: &RunShared,
    index: usize,
    epoch: Instant,
    timers: &Timers,
) -> Option<Instant> {
    let parent = shared.workload.parents.as_ref()?[index]? as usize;
    let done = shared.finished.as_ref()?;
    if parent >= index {
        return None;
    }
    loop {
        let at = done[parent].load(Ordering::Acquire);
        if at != 0 {
            return Some(epoch + std::time::Duration::from_nanos(at));
        }
        if shared.stop.load(Ordering::Relaxed) {
            return None;
        }
        timers.sleep(PARENT_POLL).await;
    }
}
