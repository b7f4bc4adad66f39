//! The state a mock worker's handlers read: [`Shared`] (one per server) and [`WorkerCtx`] (one
//! per worker thread). Its own module so that the server, the connection and the handlers
//! import it and not each other.

use std::cell::{Cell, RefCell};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use monoio::io::Canceller;

use super::config::{AfterCrash, MockConfig};
use super::lifecycle::Lifecycle;
use super::prefix_cache::PrefixCache;
use super::prompt_tokenizer::PromptTokenizer;
use super::stats::{MockStats, Stats, WorkerCounters};
use crate::runtime::timer::Timers;

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
    /// Counts prompt tokens; serves `/tokenize` and `/detokenize`.
    pub tokenizer: Arc<PromptTokenizer>,
    /// Set by shutdown (and by a crash that stays down).
    pub stop: AtomicBool,
    /// Crashes so far (`MockConfig::crash`); each worker cuts its connections once per crash.
    pub crashes: AtomicU64,
    /// `MockConfig::slots`: the model slots requests wait for.
    pub slots: Option<super::slots::Slots>,
    /// `MockConfig::tls`: the acceptor every connection's handshake goes through.
    pub tls: Option<super::tls::Acceptor>,
}

impl Shared {
    pub(super) fn new(cfg: MockConfig) -> io::Result<Shared> {
        let model_json = serde_json::Value::from(cfg.model.as_str()).to_string();
        let created = unix_now();
        let models_body = format!(
            "{{\"object\":\"list\",\"data\":[{{\"id\":{m},\"object\":\"model\",\"created\":{created},\
             \"owned_by\":\"vllm\",\"root\":{m},\"parent\":null,\"max_model_len\":{},\"permission\":[]}}]}}",
            cfg.max_model_len,
            m = model_json
        )
        .into_bytes();
        let tls = match cfg.tls {
            true => Some(super::tls::acceptor(cfg.host)?),
            false => None,
        };
        Ok(Shared {
            tls,
            tokenizer: Arc::new(PromptTokenizer::new(cfg.tokenizer.clone())),
            slots: cfg.slots.map(super::slots::Slots::new),
            stats: Stats::new(cfg.workers),
            cfg,
            model_json,
            models_body,
            start: Instant::now(),
            seq: AtomicU64::new(0),
            prefix: PrefixCache::default(),
            stop: AtomicBool::new(false),
            crashes: AtomicU64::new(0),
        })
    }

    /// Snapshot of all statistics, prefix-cache counters included.
    pub fn stats(&self) -> MockStats {
        let mut s = self.stats.snapshot();
        (s.prefix_cache_queries, s.prefix_cache_hits) = self.prefix.counters();
        s.model_requests = self.seq.load(Ordering::Relaxed);
        s.crashes = self.crashes.load(Ordering::Relaxed);
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
pub struct WorkerCtx {
    /// Shared state.
    pub shared: Arc<Shared>,
    /// Worker number (its counters slot).
    pub index: usize,
    /// This worker's live connections and their stop signal.
    pub life: Lifecycle,
    /// This worker's precise event timers.
    pub timers: Timers,
    /// The last crash whose cut this worker has made.
    pub crashes_seen: Cell<u64>,
    /// Cancels this worker's accept in flight (see `server::accept_loop`).
    pub accept: RefCell<Canceller>,
}

impl std::fmt::Debug for WorkerCtx {
    // By hand: monoio's `Canceller` has no `Debug`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerCtx")
            .field("shared", &self.shared)
            .field("index", &self.index)
            .field("life", &self.life)
            .field("timers", &self.timers)
            .field("crashes_seen", &self.crashes_seen)
            .finish_non_exhaustive()
    }
}

impl WorkerCtx {
    /// This worker's counters.
    pub fn counters(&self) -> &WorkerCounters {
        self.shared.stats.worker(self.index)
    }

    /// Stops accepting: the accept in flight is cancelled and the accept loop returns.
    pub fn stop_accepting(&self) {
        let canceller = self.accept.take();
        let _ = canceller.cancel();
    }

    /// Crashes the server now, on this worker at once and on the others at their next stop
    /// check (`server::STOP_POLL`). [`AfterCrash::Restart`] cuts the connections and keeps
    /// accepting. [`AfterCrash::Down`] stops every worker as shutdown does, which closes the
    /// listener before any connection, so no client connects in between.
    pub fn crash(&self, then: AfterCrash) {
        let n = self.shared.crashes.fetch_add(1, Ordering::AcqRel) + 1;
        self.crashes_seen.set(n);
        match then {
            AfterCrash::Down => {
                self.shared.stop.store(true, Ordering::Release);
                self.stop_accepting();
            }
            AfterCrash::Restart => {
                // A new process: `/metrics` counts from zero, the prefix cache is empty.
                for w in self.shared.stats.workers() {
                    w.vllm.reset();
                }
                self.shared.prefix.reset();
                self.life.cut();
            }
        }
    }

    /// Makes the cut of a crash another worker triggered, once (stop checks call this).
    pub fn follow_crashes(&self) {
        let n = self.shared.crashes.load(Ordering::Acquire);
        if n != self.crashes_seen.get() {
            self.crashes_seen.set(n);
            // After a crash that stays down the stop flag is set too; a cut is harmless then.
            self.life.cut();
        }
    }
}
