//! What vllm-bench adds after Python's closing line, and as extra result-JSON keys: the
//! engine that measured, dispatch lag (how faithfully arrivals were honoured), failures
//! counted by reason, for a trace replay the prefix-cache hit ratio (ideal vs measured), and
//! the client's health ([`super::health`]) with its verdict after the block. A merged run
//! adds its shards side by side and judges the client's health over all of them.
//!
//! Both producers of a [`RunResult`] (a live run, merged shards) are printed and saved by
//! the same two functions here, so their blocks and keys cannot drift apart.

use std::fmt::Write;

use crate::output::facts::{Lag, PartHealth};
use crate::output::health::{combined_causes, combined_verdict, ClientHealth, CoreHealth};
use crate::output::json::{Json, JsonObject};
use crate::output::run_result::{RunResult, Shards};
use crate::safe_text::escape;

/// The console section printed after Python's block (and the steady-state block).
pub fn render(r: &RunResult<'_>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{:-^50}", "vllm-bench");
    if let Some(e) = &r.engine {
        let setup = e
            .uring_setup
            .as_deref()
            .map(|s| format!(" ({s})"))
            .unwrap_or_default();
        let awake = if e.cpus_kept_awake {
            ", CPUs kept awake"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "{:<40} {} cores, {}{setup}, {} workers{awake}",
            "Engine:",
            e.cores,
            escape(&e.driver),
            e.workers
        );
    }
    if let Shards::Merged(m) = &r.shards {
        let _ = writeln!(out, "{:<40} {}", "Shards merged:", m.parts.len());
        for p in &m.parts {
            let engine = p.engine.as_ref().map_or(String::new(), |e| {
                format!(
                    ", {} cores, {}, {} workers",
                    e.cores,
                    escape(&e.driver),
                    e.workers
                )
            });
            let lag = p
                .dispatch_lag
                .as_ref()
                .map_or(String::new(), |l| format!(", lag p99 {:.3} ms", l.p99_ms));
            let _ = writeln!(
                out,
                "{:<40} {} requests{engine}{lag}",
                format!("Shard {}:", p.name),
                p.requests,
            );
        }
    }
    if let Some(l) = &r.dispatch_lag {
        let _ = writeln!(
            out,
            "{:<40} {:.3} / {:.3} / {:.3}",
            "Dispatch lag p50/p99/max (ms):", l.p50_ms, l.p99_ms, l.max_ms
        );
    }
    render_health(&r.health, &mut out);
    if let Some(p) = &r.prefix_cache {
        let _ = writeln!(
            out,
            "{:<40} {:.4}",
            "Ideal prefix-cache hit ratio (tokens):", p.ideal_token_hit_ratio
        );
        if let Some(m) = p.measured_hit_ratio {
            let _ = writeln!(out, "{:<40} {m:.4}", "Server prefix-cache hit ratio:");
        }
    }
    if r.interrupted {
        let which = match &r.shards {
            Shards::Merged(m) => {
                let names: Vec<String> = m
                    .parts
                    .iter()
                    .filter(|p| p.interrupted)
                    .map(|p| format!("{} ({})", p.name, escape(&p.file)))
                    .collect();
                format!(", shard {}", names.join(", "))
            }
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "{:<40} yes{which} (Ctrl-C or SIGTERM; the figures cover what ran)",
            "Interrupted:"
        );
    }
    let ended_by_cancel = r.cancelled.map_or(0, |c| c.not_sent_session);
    if let Some(c) = &r.cancelled {
        let completed = r.outputs.iter().filter(|o| o.success).count();
        let failed = r.outputs.len() - completed;
        let _ = writeln!(out, "{:<40} {}", "Cancelled requests:", c.requests);
        // The agentic replay's overflows are answered, yet in no figure of Python's block.
        let overflows = match c.context_overflows {
            0 => String::new(),
            n => format!(" + {n} context overflows"),
        };
        let _ = writeln!(
            out,
            "{:<40} {} = {completed} completed + {failed} failed{overflows} + {} cancelled + {} not sent",
            "Requests planned:",
            completed + failed + c.context_overflows + c.requests + r.not_sent,
            c.requests,
            r.not_sent
        );
    }
    let stopped = r.not_sent - r.not_sent_session_ended - ended_by_cancel;
    if stopped > 0 {
        // Not interrupted, the run was stopped by its own bound (`--duration`, an SLO probe
        // stopped early as saturated).
        let why = if r.interrupted {
            "Not sent (interrupted):"
        } else {
            "Not sent (the run's bound came first):"
        };
        let _ = writeln!(out, "{why:<40} {stopped}");
    }
    if r.not_sent_session_ended > 0 {
        let _ = writeln!(
            out,
            "{:<40} {}",
            "Not sent (an earlier turn failed):", r.not_sent_session_ended
        );
    }
    if ended_by_cancel > 0 {
        let _ = writeln!(
            out,
            "{:<40} {ended_by_cancel}",
            "Not sent (an earlier turn cancelled):"
        );
    }
    for (kind, n, example) in &r.failures {
        // A server's text (and, merged, read from a file): control characters escaped.
        let _ = writeln!(
            out,
            "{:<40} {n}  e.g. {}",
            format!("Failed ({}):", escape(kind)),
            escape(&truncate(example, 120))
        );
    }
    let _ = writeln!(out, "{}", "=".repeat(50));
    if !r.health.is_empty() {
        let _ = writeln!(out, "{}", combined_verdict(&named(&r.health)));
    }
    if r.health.len() > 1 {
        for p in &r.health {
            let _ = writeln!(out, "  shard {}: {}", p.name, p.health.verdict());
        }
    }
    out
}

fn named(parts: &[PartHealth]) -> Vec<(&str, &ClientHealth)> {
    parts.iter().map(|p| (p.name.as_str(), &p.health)).collect()
}

/// The health lines of the block: busy share and longest stall per core, late arrivals;
/// several parts (shards) side by side on each line.
fn render_health(parts: &[PartHealth], out: &mut String) {
    let several = parts.len() > 1;
    let line = |out: &mut String, label: &str, f: &dyn Fn(&ClientHealth) -> Option<String>| {
        let values: Vec<String> = parts
            .iter()
            .filter_map(|p| {
                let v = f(&p.health)?;
                Some(match several {
                    true => format!("{}: {v}", p.name),
                    false => v,
                })
            })
            .collect();
        if !values.is_empty() {
            let _ = writeln!(out, "{label:<40} {}", values.join(" | "));
        }
    };
    let per_core = |h: &ClientHealth, f: &dyn Fn(&CoreHealth) -> String| {
        (!h.cores.is_empty()).then(|| {
            h.cores
                .iter()
                .map(|c| format!("{} (core {})", f(c), c.core))
                .collect::<Vec<_>>()
                .join(", ")
        })
    };
    line(out, "Client core busy (%):", &|h| {
        per_core(h, &|c| format!("{:.1}", c.busy_fraction * 100.0))
    });
    line(out, "Client core waiting for CPU (%):", &|h| {
        h.cores
            .iter()
            .all(|c| c.wait_fraction.is_some())
            .then(|| {
                per_core(h, &|c| {
                    format!("{:.1}", c.wait_fraction.unwrap_or(0.0) * 100.0)
                })
            })
            .flatten()
    });
    line(out, "Longest event-loop stall (ms):", &|h| {
        per_core(h, &|c| {
            format!("{:.3}", c.longest_stall.as_secs_f64() * 1e3)
        })
    });
    line(out, "Arrivals sent >1 ms late:", &|h| {
        Some(format!("{} of {}", h.late_arrivals, h.arrivals))
    });
}

/// Our result-JSON keys after Python's (and the per-turn and adapter keys).
pub fn to_json(r: &RunResult<'_>) -> JsonObject<'static> {
    let mut doc = JsonObject::new();
    if let Some(e) = &r.engine {
        doc.set("vllm_bench_engine_cores", Json::UInt(e.cores as u64));
        doc.set("vllm_bench_io_driver", Json::str(e.driver.clone()));
        if let Some(setup) = &e.uring_setup {
            doc.set("vllm_bench_uring_setup", Json::str(setup.clone()));
        }
        doc.set("vllm_bench_workers", Json::UInt(e.workers as u64));
        if e.cpus_kept_awake {
            doc.set("vllm_bench_cpus_kept_awake", Json::Bool(true));
        }
    }
    if let Some(l) = &r.dispatch_lag {
        doc.set("vllm_bench_dispatch_lag_p50_ms", Json::Float(l.p50_ms));
        doc.set("vllm_bench_dispatch_lag_p99_ms", Json::Float(l.p99_ms));
        doc.set("vllm_bench_dispatch_lag_max_ms", Json::Float(l.max_ms));
    }
    let mut failures = JsonObject::new();
    for (kind, n, _) in &r.failures {
        failures.set(kind.clone(), Json::UInt(*n as u64));
    }
    doc.set("vllm_bench_failures_by_reason", Json::Object(failures));
    doc.set("vllm_bench_not_sent", Json::UInt(r.not_sent as u64));
    if r.not_sent_session_ended > 0 {
        doc.set(
            "vllm_bench_not_sent_session_ended",
            Json::UInt(r.not_sent_session_ended as u64),
        );
    }
    if let Some(c) = &r.cancelled {
        doc.set("vllm_bench_cancelled", Json::UInt(c.requests as u64));
        if c.context_overflows > 0 {
            doc.set(
                "vllm_bench_context_overflows",
                Json::UInt(c.context_overflows as u64),
            );
        }
        if c.not_sent_session > 0 {
            doc.set(
                "vllm_bench_not_sent_session_cancelled",
                Json::UInt(c.not_sent_session as u64),
            );
        }
    }
    doc.set("vllm_bench_interrupted", Json::Bool(r.interrupted));
    if !r.health.is_empty() {
        doc.set(
            "vllm_bench_client_health",
            Json::Object(health_json(&r.health, r.dispatch_lag.as_ref())),
        );
    }
    if let Some(p) = &r.prefix_cache {
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

/// `vllm_bench_client_health`: per-core busy fraction and longest stall, the dispatch lag,
/// late arrivals, the verdict and its causes. Over several parts (shards): every core (with
/// its shard), the arrivals added up, the combined verdict, and each shard's own object
/// under `shards`.
fn health_json(parts: &[PartHealth], lag: Option<&Lag>) -> JsonObject<'static> {
    if let [one] = parts {
        return part_json(&one.health, lag);
    }
    let mut doc = JsonObject::new();
    let cores = parts
        .iter()
        .flat_map(|p| {
            p.health.cores.iter().map(|c| {
                let mut o = core_json(c);
                o.set("shard", Json::str(p.name.clone()));
                Json::Object(o)
            })
        })
        .collect();
    doc.set("cores", Json::List(cores));
    set_lag(&mut doc, lag);
    let sum =
        |f: &dyn Fn(&ClientHealth) -> usize| parts.iter().map(|p| f(&p.health)).sum::<usize>();
    doc.set("arrivals", Json::UInt(sum(&|h| h.arrivals) as u64));
    doc.set(
        "late_arrivals_over_1ms",
        Json::UInt(sum(&|h| h.late_arrivals) as u64),
    );
    let named = named(parts);
    let causes = combined_causes(&named);
    let judged = parts.iter().any(|p| p.health.has_verdict());
    doc.set(
        "bottleneck",
        Json::opt(judged.then_some(!causes.is_empty()), Json::Bool),
    );
    let causes = causes.into_iter().map(|c| Json::str(c.0)).collect();
    doc.set("causes", Json::List(causes));
    doc.set("verdict", Json::str(combined_verdict(&named)));
    let shards = parts
        .iter()
        .map(|p| {
            let mut o = JsonObject::new();
            o.set("shard", Json::str(p.name.clone()));
            for (k, v) in part_json(&p.health, p.dispatch_lag.as_ref()).into_entries() {
                o.set(k, v);
            }
            Json::Object(o)
        })
        .collect();
    doc.set("shards", Json::List(shards));
    doc
}

fn core_json(c: &CoreHealth) -> JsonObject<'static> {
    let mut o = JsonObject::new();
    o.set("core", Json::UInt(c.core as u64));
    o.set("busy_fraction", Json::Float(c.busy_fraction));
    o.set("cpu_wait_fraction", Json::opt(c.wait_fraction, Json::Float));
    o.set(
        "longest_stall_ms",
        Json::Float(c.longest_stall.as_secs_f64() * 1e3),
    );
    o
}

fn set_lag(doc: &mut JsonObject<'static>, lag: Option<&Lag>) {
    if let Some(l) = lag {
        doc.set("dispatch_lag_p50_ms", Json::Float(l.p50_ms));
        doc.set("dispatch_lag_p99_ms", Json::Float(l.p99_ms));
        doc.set("dispatch_lag_max_ms", Json::Float(l.max_ms));
    }
}

/// One part's health object.
fn part_json(h: &ClientHealth, lag: Option<&Lag>) -> JsonObject<'static> {
    let mut doc = JsonObject::new();
    let cores = h.cores.iter().map(|c| Json::Object(core_json(c))).collect();
    doc.set("cores", Json::List(cores));
    set_lag(&mut doc, lag);
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

/// The first line of `s`, at most `n` characters (an ellipsis marks a cut).
fn truncate(s: &str, n: usize) -> String {
    let line = s.lines().next().unwrap_or("");
    match line.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line.to_string(),
    }
}
