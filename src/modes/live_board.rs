//! Every measured run of the process as its live counters show it
//! ([`crate::engine::live`]), for the readers that outlive one run: the client's own
//! `/metrics` (`--metrics-listen`), which keeps serving every run's final counts until the
//! process exits, and the dashboard's table of a sweep's points done.
//!
//! One board per process (a static): the endpoint's life is the process's, not a run's, and
//! a run registers itself from wherever it is measured (`modes::point`). A run registers
//! once, before its clock starts; the lock is taken by readers and by the registration, never
//! by the engine's cores.

use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use anyhow::{anyhow, Result};

use crate::config::Config;
use crate::engine::live::{LiveRun, Snapshot};
use crate::http::text_server::TextServer;
use crate::output::live_metrics::{self, RunLabels, RunView};
use crate::output::stdio::Console;

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

/// `--metrics-listen`: binds the address now (before anything is sent: a port in use is one
/// line and no run) and serves the board's page from a thread of its own until the process
/// exits. Says where on stderr.
pub fn listen(config: &Config, console: &Console) -> Result<()> {
    let Some(addr) = &config.output.metrics_listen else {
        return Ok(());
    };
    let server = TextServer::bind(addr).map_err(|e| {
        anyhow!("--metrics-listen {addr}: cannot listen there: {e} (give a free HOST:PORT)")
    })?;
    let bound = server.local_addr()?;
    server
        .serve("/metrics", Arc::new(page))
        .map_err(|e| anyhow!("--metrics-listen {addr}: no thread to serve it: {e}"))?;
    console.note(format_args!(
        "serving the client's metrics at http://{bound}/metrics until the process exits"
    ));
    Ok(())
}

/// The Prometheus page of every run so far.
fn page() -> String {
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

/// A run starting: puts it on the board and returns its labels (`point` counts the runs of
/// the process from 0).
pub fn begin(config: &Config, live: Arc<LiveRun>) -> RunLabels {
    let mut b = board();
    let labels = RunLabels {
        run: config.output.label.clone().unwrap_or_else(|| {
            config
                .model
                .model
                .clone()
                .unwrap_or_else(|| "vllm-bench".into())
        }),
        point: b.runs.len().to_string(),
        shard: config
            .shard
            .shard
            .map(|s| format!("{}/{}", s.index, s.count))
            .unwrap_or_default(),
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
