//! The run's side of the process's live board ([`crate::output::live_board`]): the
//! `--metrics-listen` endpoint bound before anything is sent, and each measured run put on
//! the board under the names the configuration gives it (`--label` or the model, `--shard`).

use std::sync::Arc;

use anyhow::{anyhow, Result};

use crate::config::Config;
use crate::engine::live::LiveRun;
use crate::http::text_server::TextServer;
use crate::output::live_board;
use crate::output::live_metrics::RunLabels;
use crate::output::stdio::Console;

pub use crate::output::live_board::{end, ended};

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
        .serve("/metrics", Arc::new(live_board::page))
        .map_err(|e| anyhow!("--metrics-listen {addr}: no thread to serve it: {e}"))?;
    console.note(format_args!(
        "serving the client's metrics at http://{bound}/metrics until the process exits"
    ));
    Ok(())
}

/// A run starting: puts it on the board as `--label` (else the model) and its `--shard`,
/// and returns its labels.
pub fn begin(config: &Config, live: Arc<LiveRun>) -> RunLabels {
    let run = config.output.label.clone().unwrap_or_else(|| {
        config
            .model
            .model
            .clone()
            .unwrap_or_else(|| "vllm-bench".into())
    });
    let shard = config
        .shard
        .shard
        .map(|s| format!("{}/{}", s.index, s.count))
        .unwrap_or_default();
    live_board::begin(run, shard, live)
}
