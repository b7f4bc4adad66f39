//! What vllm-bench adds after Python's closing line, and as extra result-JSON keys: the
//! engine that measured, dispatch lag (how faithfully arrivals were honoured), failures
//! counted by reason, for a trace replay the prefix-cache hit ratio (ideal vs measured), and
//! the client's health ([`super::health`]) with its verdict after the block.

use std::fmt::Write;

use crate::engine::{EngineOptions, RunReport};
use crate::output::health::ClientHealth;
use crate::output::json::{Json, JsonObject};
use crate::runtime::{uring_setup, ResolvedDriver, UringSetup};

/// Lag percentiles, ms.
#[derive(Debug, Clone, PartialEq)]
pub struct Lag {
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub samples: u64,
}

/// A trace replay's prefix-cache hit ratios.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PrefixCache {
    /// Fraction of prompt tokens an infinite prefix cache would serve (replay order).
    pub ideal_token_hit_ratio: f64,
    /// The same counted in whole blocks.
    pub ideal_block_hit_ratio: f64,
    /// `Δhits / Δqueries` of the server's `vllm:prefix_cache_{hits,queries}_total` over the
    /// run; `None` when the server does not export them.
    pub measured_hit_ratio: Option<f64>,
}

/// Our additions to a run's report.
#[derive(Debug, Clone, PartialEq)]
pub struct Extras {
    pub cores: usize,
    pub driver: String,
    /// How the io_uring rings deliver completions (`defer`, `coop`, `interrupt`); `None`
    /// on epoll. It changes the client's CPU per event, so a result says which it had.
    pub uring_setup: Option<&'static str>,
    pub workers: usize,
    pub dispatch_lag: Option<Lag>,
    pub failures: Vec<(String, usize, String)>,
    pub not_sent: usize,
    /// Of `not_sent`: requests whose session (conversation) ended at an earlier failure.
    pub not_sent_session_ended: usize,
    /// Ctrl-C or SIGTERM stopped the run (set by the caller).
    pub interrupted: bool,
    /// Set by the caller for a trace replay.
    pub prefix_cache: Option<PrefixCache>,
    pub health: ClientHealth,
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

impl Extras {
    pub fn from_run(run: &RunReport, opts: &EngineOptions) -> Extras {
        let h = &run.merged.histograms.dispatch_lag;
        let dispatch_lag = (!h.is_empty()).then(|| Lag {
            p50_ms: ms(h.value_at_quantile(0.5)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            max_ms: ms(h.max()),
            samples: h.len(),
        });
        let failures = run
            .merged
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
            .collect();
        Extras {
            cores: opts.cores.len(),
            driver: opts.driver.to_string(),
            uring_setup: (opts.driver == ResolvedDriver::IoUring)
                .then(uring_setup)
                .flatten()
                .map(UringSetup::name),
            workers: run.workers,
            dispatch_lag,
            failures,
            not_sent: run.not_sent,
            not_sent_session_ended: run.not_sent_session_ended,
            interrupted: false,
            prefix_cache: None,
            health: ClientHealth::of(&run.loads, &run.merged.records),
        }
    }

    /// The console section printed after Python's block.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{:-^50}", "vllm-bench");
        let setup = self
            .uring_setup
            .map(|s| format!(" ({s})"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "{:<40} {} cores, {}{setup}, {} workers",
            "Engine:", self.cores, self.driver, self.workers
        );
        if let Some(l) = &self.dispatch_lag {
            let _ = writeln!(
                out,
                "{:<40} {:.3} / {:.3} / {:.3}",
                "Dispatch lag p50/p99/max (ms):", l.p50_ms, l.p99_ms, l.max_ms
            );
        }
        self.render_health(&mut out);
        if let Some(p) = &self.prefix_cache {
            let _ = writeln!(
                out,
                "{:<40} {:.4}",
                "Ideal prefix-cache hit ratio (tokens):", p.ideal_token_hit_ratio
            );
            if let Some(m) = p.measured_hit_ratio {
                let _ = writeln!(out, "{:<40} {m:.4}", "Server prefix-cache hit ratio:");
            }
        }
        if self.interrupted {
            let _ = writeln!(
                out,
                "{:<40} yes (Ctrl-C or SIGTERM; the figures cover what ran)",
                "Interrupted:"
            );
        }
        let stopped = self.not_sent - self.not_sent_session_ended;
        if stopped > 0 {
            let _ = writeln!(out, "{:<40} {stopped}", "Not sent (interrupted):");
        }
        if self.not_sent_session_ended > 0 {
            let _ = writeln!(
                out,
                "{:<40} {}",
                "Not sent (an earlier turn failed):", self.not_sent_session_ended
            );
        }
        for (kind, n, example) in &self.failures {
            let _ = writeln!(
                out,
                "{:<40} {n}  e.g. {}",
                format!("Failed ({kind}):"),
                truncate(example, 120)
            );
        }
        let _ = writeln!(out, "{}", "=".repeat(50));
        let _ = writeln!(out, "{}", self.health.verdict());
        out
    }

    /// The health lines of the block: busy share and longest stall per core, late arrivals.
    fn render_health(&self, out: &mut String) {
        let h = &self.health;
        let per_core = |f: &dyn Fn(&crate::output::health::CoreHealth) -> String| {
            h.cores
                .iter()
                .map(|c| format!("{} (core {})", f(c), c.core))
                .collect::<Vec<_>>()
                .join(", ")
        };
        if !h.cores.is_empty() {
            let busy = per_core(&|c| format!("{:.1}", c.busy_fraction * 100.0));
            let _ = writeln!(out, "{:<40} {busy}", "Client core busy (%):");
            if h.cores.iter().all(|c| c.wait_fraction.is_some()) {
                let wait = per_core(&|c| format!("{:.1}", c.wait_fraction.unwrap_or(0.0) * 100.0));
                let _ = writeln!(out, "{:<40} {wait}", "Client core waiting for CPU (%):");
            }
            let stall = per_core(&|c| format!("{:.3}", c.longest_stall.as_secs_f64() * 1e3));
            let _ = writeln!(out, "{:<40} {stall}", "Longest event-loop stall (ms):");
        }
        let _ = writeln!(
            out,
            "{:<40} {} of {}",
            "Arrivals sent >1 ms late:", h.late_arrivals, h.arrivals
        );
    }

    /// Extra result-JSON keys (after Python's).
    pub fn to_json(&self) -> JsonObject<'static> {
        let mut doc = JsonObject::new();
        doc.set("vllm_bench_engine_cores", Json::UInt(self.cores as u64));
        doc.set("vllm_bench_io_driver", Json::str(self.driver.clone()));
        if let Some(setup) = self.uring_setup {
            doc.set("vllm_bench_uring_setup", Json::str(setup));
        }
        doc.set("vllm_bench_workers", Json::UInt(self.workers as u64));
        if let Some(l) = &self.dispatch_lag {
            doc.set("vllm_bench_dispatch_lag_p50_ms", Json::Float(l.p50_ms));
            doc.set("vllm_bench_dispatch_lag_p99_ms", Json::Float(l.p99_ms));
            doc.set("vllm_bench_dispatch_lag_max_ms", Json::Float(l.max_ms));
        }
        let mut failures = JsonObject::new();
        for (kind, n, _) in &self.failures {
            failures.set(kind.clone(), Json::UInt(*n as u64));
        }
        doc.set("vllm_bench_failures_by_reason", Json::Object(failures));
        doc.set("vllm_bench_not_sent", Json::UInt(self.not_sent as u64));
        if self.not_sent_session_ended > 0 {
            doc.set(
                "vllm_bench_not_sent_session_ended",
                Json::UInt(self.not_sent_session_ended as u64),
            );
        }
        doc.set("vllm_bench_interrupted", Json::Bool(self.interrupted));
        doc.set("vllm_bench_client_health", Json::Object(self.health_json()));
        if let Some(p) = &self.prefix_cache {
            doc.set(
                "vllm_bench_trace_ideal_prefix_hit_ratio",
                Json::Float(p.ideal_token_hit_ratio),
            );
            doc.set(
                "vllm_bench_trace_ideal_block_hit_ratio",
                Json::Float(p.ideal_block_hit_ratio),
            );
            if let Some(m) = p.measured_hit_ratio {
                doc.set("vllm_bench_server_prefix_hit_ratio", Json::Float(m));
            }
        }
        doc
    }
}

impl Extras {
    /// `vllm_bench_client_health`: per-core busy fraction and longest stall, the dispatch
    /// lag, late arrivals, the verdict and its causes.
    fn health_json(&self) -> JsonObject<'static> {
        let h = &self.health;
        let mut doc = JsonObject::new();
        let cores = h
            .cores
            .iter()
            .map(|c| {
                let mut o = JsonObject::new();
                o.set("core", Json::UInt(c.core as u64));
                o.set("busy_fraction", Json::Float(c.busy_fraction));
                o.set("cpu_wait_fraction", Json::opt(c.wait_fraction, Json::Float));
                o.set(
                    "longest_stall_ms",
                    Json::Float(c.longest_stall.as_secs_f64() * 1e3),
                );
                Json::Object(o)
            })
            .collect();
        doc.set("cores", Json::List(cores));
        if let Some(l) = &self.dispatch_lag {
            doc.set("dispatch_lag_p50_ms", Json::Float(l.p50_ms));
            doc.set("dispatch_lag_p99_ms", Json::Float(l.p99_ms));
            doc.set("dispatch_lag_max_ms", Json::Float(l.max_ms));
        }
        doc.set("arrivals", Json::UInt(h.arrivals as u64));
        doc.set("late_arrivals_over_1ms", Json::UInt(h.late_arrivals as u64));
        let causes = h.causes();
        // null: the server answered nothing, so the run says nothing about the client.
        let bottleneck = h.has_verdict().then_some(!causes.is_empty());
        doc.set("bottleneck", Json::opt(bottleneck, Json::Bool));
        let causes = causes.iter().map(|c| Json::str(c.to_string())).collect();
        doc.set("causes", Json::List(causes));
        doc.set("verdict", Json::str(h.verdict()));
        doc
    }
}

fn truncate(s: &str, n: usize) -> String {
    let line = s.lines().next().unwrap_or("");
    match line.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line.to_string(),
    }
}
