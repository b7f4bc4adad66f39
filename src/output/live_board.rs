//! Every measured run of the process as its live counters show it
//! ([`crate::engine::live`]), for the readers that outlive one run: the client's own
//! `/metrics` page ([`page`], served by `--metrics-listen`), which keeps every run's final
//! counts until the process exits, and the dashboard's table of a sweep's points done
//! ([`ended`]).
//!
//! One board per process (a static): the endpoint's life is the process's, not a run's, and
//! a run registers itself from wherever it is measured (`modes::point`, through
//! `modes::live_board`, which names it from the configuration). A run registers once, before
//! its clock starts; the lock is taken by readers and by the registration, never by the
//! engine's cores.

use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use crate::engine::live::{LiveRun, Snapshot};

use super::live_metrics::{self, RunLabels, RunView};

/// One run on the board.
pub struct BoardRun {
    pub labels: RunLabels,
    pub live: Arc<LiveRun>,
    /// The counters once the run ended (the live ones stay readable too; this marks it
    /// ended for `vllm_bench_run_active`).
    pub ended: Option<Snapshot>,
}

#[derive(Default)]
struct Board {
    runs: Vec<BoardRun>,
}

static BOARD: OnceLock<Mutex<Board>> = OnceLock::new();

fn board() -> MutexGuard<'static, Board> {
    BOARD
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// The Prometheus page of every run so far.
pub fn page() -> String {
    let runs: Vec<(RunLabels, Snapshot, bool)> = board()
        .runs
        .iter()
        .map(|r| match &r.ended {
            Some(s) => (r.labels.clone(), s.clone(), false),
            None => (r.labels.clone(), r.live.snapshot(), true),
        })
        .collect();
    let views: Vec<RunView<'_>> = runs
        .iter()
        .map(|(labels, snapshot, active)| RunView {
            labels,
            snapshot,
            active: *active,
        })
        .collect();
    live_metrics::render(&views)
}

/// A run starting: puts it on the board as `run` (`shard`: `i/n`, or empty) and returns its
/// labels (`point` counts the runs of the process from 0).
pub fn begin(run: String, shard: String, live: Arc<LiveRun>) -> RunLabels {
    let mut b = board();
    let labels = RunLabels {
        run,
        point: b.runs.len().to_string(),
        shard,
    };
    b.runs.push(BoardRun {
        labels: labels.clone(),
        live,
        ended: None,
    });
    labels
}

/// The run `point` ended: its counters are final.
pub fn end(point: &str) {
    let mut b = board();
    if let Some(r) = b.runs.iter_mut().find(|r| r.labels.point == point) {
        r.ended = Some(r.live.snapshot());
    }
}

/// The runs that ended, with their final counters (the dashboard's table of points done).
pub fn ended() -> Vec<(RunLabels, Snapshot)> {
    board()
        .runs
        .iter()
        .filter_map(|r| r.ended.clone().map(|s| (r.labels.clone(), s)))
        .collect()
}
