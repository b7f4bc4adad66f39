//! The facts of a run that both its producers (a live run, merged shards) carry and every
//! printer reads: the engine that measured, dispatch lag, a trace's prefix-cache ratios, the
//! client's health per part, failures by reason, requests cancelled on purpose. Plain data at
//! the floor of `output`, so the model (`run_result`), the shard file and the printers all
//! import it, and it imports none of them.

use crate::engine::{EngineOptions, RunReport};
use crate::output::health::ClientHealth;
use crate::runtime::{uring_setup, ResolvedDriver, UringSetup};

/// Lag percentiles, ms.
#[derive(Debug, Clone, PartialEq)]
pub struct Lag {
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub samples: u64,
}

impl Lag {
    /// The percentiles of a dispatch-lag histogram (ns); `None` when it is empty.
    pub fn of(h: &hdrhistogram::Histogram<u64>) -> Option<Lag> {
        (!h.is_empty()).then(|| Lag {
            p50_ms: ms(h.value_at_quantile(0.5)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            max_ms: ms(h.max()),
            samples: h.len(),
        })
    }
}

/// A trace replay's prefix-cache hit ratios.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PrefixCache {
    /// Fraction of prompt tokens an infinite prefix cache would serve (replay order).
    pub ideal_token_hit_ratio: f64,
    /// The same counted in whole blocks.
    pub ideal_block_hit_ratio: f64,
    /// `Δhits / Δqueries` of the server's `vllm:prefix_cache_{hits,queries}_total` over the
    /// run; `None` when the server does not export them.
    pub measured_hit_ratio: Option<f64>,
}

/// The engine that measured: it changes the client's cost per event, so a result says
/// which it had.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EngineFacts {
    pub cores: usize,
    pub driver: String,
    /// How the io_uring rings deliver completions (`defer`, `coop`, `interrupt`); `None`
    /// on epoll.
    pub uring_setup: Option<String>,
    pub workers: usize,
    /// Idle CPUs polled instead of sleeping (`--keep-cpus-awake`): arrival stamps did not
    /// wait for a sleeping core to wake. (Absent from shard files written before it.)
    #[serde(default)]
    pub cpus_kept_awake: bool,
}

impl EngineFacts {
    /// The engine of a finished run, and whether it ran with idle CPUs kept awake.
    pub fn of(run: &RunReport, opts: &EngineOptions, cpus_kept_awake: bool) -> EngineFacts {
        EngineFacts {
            cores: opts.cores.len(),
            driver: opts.driver.to_string(),
            uring_setup: (opts.driver == ResolvedDriver::IoUring)
                .then(uring_setup)
                .flatten()
                .map(|s| UringSetup::name(s).to_string()),
            workers: run.workers,
            cpus_kept_awake,
        }
    }

    /// The engines of several shards as one: cores and workers added up, the drivers (and
    /// ring setups) named once each in shard order; CPUs kept awake only if every shard's
    /// were.
    pub fn combine(parts: &[&EngineFacts]) -> Option<EngineFacts> {
        let first = parts.first()?;
        let distinct = |f: &dyn Fn(&EngineFacts) -> Option<String>| {
            let mut names: Vec<String> = Vec::new();
            for n in parts.iter().filter_map(|p| f(p)) {
                if !names.contains(&n) {
                    names.push(n);
                }
            }
            (!names.is_empty()).then(|| names.join("+"))
        };
        Some(EngineFacts {
            cores: parts.iter().map(|p| p.cores).sum(),
            driver: distinct(&|p| Some(p.driver.clone())).unwrap_or_else(|| first.driver.clone()),
            uring_setup: distinct(&|p| p.uring_setup.clone()),
            workers: parts.iter().map(|p| p.workers).sum(),
            cpus_kept_awake: parts.iter().all(|p| p.cpus_kept_awake),
        })
    }
}

/// One part's client health (the run's, or one shard's of a merged run).
#[derive(Debug, Clone, PartialEq)]
pub struct PartHealth {
    /// `K/N` for a shard.
    pub name: String,
    pub health: ClientHealth,
    pub dispatch_lag: Option<Lag>,
}

/// Failures by reason of a finished run, each with its first example.
pub fn failures_of(run: &RunReport) -> Vec<(String, usize, String)> {
    run.merged
        .failures_by_kind
        .iter()
        .map(|(kind, n)| {
            let example = run
                .merged
                .records
                .iter()
                .find_map(|r| {
                    r.failure
                        .as_ref()
                        .filter(|f| &f.kind == kind)
                        .map(|f| f.detail.clone())
                })
                .unwrap_or_default();
            (kind.clone(), *n, example)
        })
        .collect()
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// `--request-cancellation-rate` and `--duration`: the requests the client cancelled on
/// purpose (or cut at the bound), and the agentic replay's context overflows. Counted apart
/// from the completed and failed ones (and in no metric); planned = completed + failed +
/// context overflows + cancelled + not sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Cancelled {
    /// Requests sent, then cut by closing their connection before their response ended.
    pub requests: usize,
    /// Of the requests not sent: those whose conversation ended at a cancelled turn.
    pub not_sent_session: usize,
    /// `--dataset-name agentic_trace`: requests answered with a context-length error (SPEC
    /// §3.5): they end their stream and are neither completed nor failed. (Absent from shard
    /// files written before it was counted.)
    #[serde(default)]
    pub context_overflows: usize,
}
