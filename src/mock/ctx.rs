//! The state a mock worker's handlers read: [`Shared`] (one per server) and [`WorkerCtx`] (one
//! per worker thread). Its own module so that the server, the connection and the handlers
//! import it and not each other.

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::Instant;

use super::config::MockConfig;
use super::lifecycle::Lifecycle;
use super::prefix_cache::PrefixCache;
use super::stats::{MockStats, Stats, WorkerCounters};
use crate::engine::timer::Timers;

/// State shared by all workers, read-mostly.
#[derive(Debug)]
pub struct Shared {
    /// The configuration.
    pub cfg: MockConfig,
    /// The model name as a JSON string literal (quoted, escaped), spliced into bodies.
    pub model_json: String,
    /// The `/v1/models` body, built once.
    pub models_body: Vec<u8>,
    /// Server start: request-log arrivals are measured from here.
    pub start: Instant,
    /// Next model-request sequence number.
    pub seq: AtomicU64,
    /// Counters, gauge and log.
    pub stats: Stats,
    /// Toy prefix cache.
    pub prefix: PrefixCache,
    /// Set by shutdown.
    pub stop: AtomicBool,
}

impl Shared {
    pub(super) fn new(cfg: MockConfig) -> Shared {
        let model_json = serde_json::Value::from(cfg.model.as_str()).to_string();
        let created = unix_now();
        let models_body = format!(
            "{{\"object\":\"list\",\"data\":[{{\"id\":{m},\"object\":\"model\",\"created\":{created},\
             \"owned_by\":\"vllm\",\"root\":{m},\"parent\":null,\"max_model_len\":{},\"permission\":[]}}]}}",
            cfg.max_model_len,
            m = model_json
        )
        .into_bytes();
        Shared {
            stats: Stats::new(cfg.workers),
            cfg,
            model_json,
            models_body,
            start: Instant::now(),
            seq: AtomicU64::new(0),
            prefix: PrefixCache::default(),
            stop: AtomicBool::new(false),
        }
    }

    /// Snapshot of all statistics, prefix-cache counters included.
    pub fn stats(&self) -> MockStats {
        let mut s = self.stats.snapshot();
        (s.prefix_cache_queries, s.prefix_cache_hits) = self.prefix.counters();
        s
    }
}

/// Seconds since the Unix epoch (for `created` fields).
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// What one worker thread owns.
#[derive(Debug)]
pub struct WorkerCtx {
    /// Shared state.
    pub shared: Arc<Shared>,
    /// Worker number (its counters slot).
    pub index: usize,
    /// This worker's live connections and their stop signal.
    pub life: Lifecycle,
    /// This worker's precise event timers.
    pub timers: Timers,
}

impl WorkerCtx {
    /// This worker's counters.
    pub fn counters(&self) -> &WorkerCounters {
        self.shared.stats.worker(self.index)
    }
}
