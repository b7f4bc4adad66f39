//! The facts of a run merged from its shards' result files (`vllm-bench merge`): the union
//! of N shard files, each read and checked (`output::shard_file`), as the one-process run's
//! [`RunFacts`]: every request in that run's order with its saved columns, the duration of
//! the longest shard (all started at one instant), each shard's engine and client health
//! side by side, and one shard's scrape of the server they share.

use serde_json::Value;

use crate::engine::recorder::Histograms;
use crate::metrics::calculator::CountTokens;
use crate::metrics::goodput::GoodputConfig;
use crate::metrics::metric_stats::MetricKind;
use crate::metrics::report::TaskKind;
use crate::metrics::RequestOutput;
use crate::output::facts::{EngineFacts, Lag, PartHealth};
use crate::output::json::RpsChangeEvent;
use crate::output::run_result::{Cancelled, MergedPart, MergedShards, Section, Shards};
use crate::output::shard_file::{ShardFile, ShardFileError};
use crate::server_metrics::ServerMetrics;
use crate::types::Backend;

use super::run_facts::{MetricSettings, RequestFacts, RunFacts, ServerView};

/// A column of the union: `column(shard)[row]` for every request, in the one-process run's
/// order; `None` unless every shard recorded it (a feature's column is empty without it).
fn union_column<T: Clone>(
    shards: &[ShardFile],
    rows: &[(usize, usize)],
    column: impl Fn(&ShardFile) -> &[T],
) -> Option<Vec<T>> {
    if shards.iter().any(|r| column(r).is_empty()) {
        return None;
    }
    Some(
        rows.iter()
            .map(|&(s, j)| column(&shards[s])[j].clone())
            .collect(),
    )
}

fn task_of(backend: &str) -> TaskKind {
    Backend::all()
        .iter()
        .find(|b| b.name() == backend)
        .map_or(TaskKind::Generation, |b| TaskKind::for_backend(*b))
}

/// Failures by reason over all shards, with the first shard's example of each.
fn failures(shards: &[ShardFile]) -> Vec<(String, usize, String)> {
    let mut all: Vec<(String, usize, String)> = Vec::new();
    for (kind, n, example) in shards.iter().flat_map(|r| &r.section.failures) {
        match all.iter_mut().find(|f| &f.0 == kind) {
            Some(f) => f.1 += n,
            None => all.push((kind.clone(), *n, example.clone())),
        }
    }
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all
}

/// A shard's own `vllm_bench_*` figures (engine, dispatch lag, client health, ...).
fn shard_figures(r: &ShardFile) -> serde_json::Map<String, Value> {
    let mut out = serde_json::Map::new();
    out.insert("shard".into(), Value::from(r.section.shard));
    out.insert("file".into(), Value::from(r.path.clone()));
    for key in ["completed", "failed"] {
        if let Some(v) = r.doc.get(key) {
            out.insert(key.into(), v.clone());
        }
    }
    for (k, v) in r.doc.iter().filter(|(k, _)| k.starts_with("vllm_bench_")) {
        out.insert(k.clone(), v.clone());
    }
    out
}

/// The shards' ramp-up events (every shard computed the same from the same schedule).
fn rps_events(doc: &serde_json::Map<String, Value>) -> Vec<RpsChangeEvent> {
    let Some(Value::Array(events)) = doc.get("rps_change_events") else {
        return Vec::new();
    };
    events
        .iter()
        .filter_map(|e| {
            Some(RpsChangeEvent {
                rps: e.get("rps")?.as_u64()?,
                timestamp: e.get("timestamp")?.as_str()?.to_string(),
            })
        })
        .collect()
}

/// One shard as a part of the merged result.
fn part(r: &ShardFile, lag: Option<Lag>) -> MergedPart {
    MergedPart {
        name: format!("{}/{}", r.section.shard, r.section.shards),
        file: r.path.clone(),
        requests: r.section.requests.len(),
        interrupted: r.section.interrupted,
        engine: r.section.engine.clone(),
        dispatch_lag: lag,
        figures: shard_figures(r),
    }
}

/// The union of the shards' facts: every request of every shard in the one-process run's
/// order (`rows`, `outputs`), the duration of the longest shard (all started at one instant),
/// each shard's engine and client health side by side, and one shard's scrape of the
/// server they share ([`server_metrics_shard`]).
pub fn merged_facts<'a>(
    shards: &'a [ShardFile],
    rows: &[(usize, usize)],
    outputs: &'a [RequestOutput],
    count_tokens: CountTokens<'a>,
    start: Section,
) -> Result<RunFacts<'a>, ShardFileError> {
    let s0 = &shards[0].section;
    let duration_s = shards
        .iter()
        .map(|r| r.section.duration)
        .fold(0.0, f64::max);
    let info = s0.run.clone();
    // One shard's scrape of the shared server (`null` when none has one).
    let chosen = server_metrics_shard(shards, duration_s).map(|i| &shards[i]);
    let server = ServerView {
        metrics: chosen.and_then(|r| r.server_metrics.as_ref()),
        from_shard: chosen.map(|r| (r.section.shard, r.name())),
    };
    let mut all = Histograms::default();
    let mut parts = Vec::with_capacity(shards.len());
    let mut health = Vec::new();
    for r in shards {
        let h = r.histograms()?;
        all.add(&h);
        let lag = Lag::of(&h.dispatch_lag);
        let p = part(r, lag.clone());
        if let Some(hh) = &r.section.health {
            health.push(PartHealth {
                name: p.name.clone(),
                health: hh.clone(),
                dispatch_lag: lag,
            });
        }
        parts.push(p);
    }
    let engines: Vec<&EngineFacts> = parts.iter().filter_map(|p| p.engine.as_ref()).collect();
    let engine = (engines.len() == parts.len())
        .then(|| EngineFacts::combine(&engines))
        .flatten();
    let turns = union_column(shards, rows, |r| r.section.requests.turn.as_slice()).map(|numbers| {
        let ids = union_column(shards, rows, |r| r.section.requests.conversation.as_slice());
        (ids.unwrap_or_default(), numbers)
    });
    Ok(RunFacts {
        task: task_of(&info.backend),
        duration_s,
        settings: MetricSettings {
            percentiles: s0.settings.percentiles.clone(),
            percentile_metrics: MetricKind::parse_list(&s0.settings.percentile_metrics),
            goodput: GoodputConfig {
                ttft_ms: s0.settings.goodput[0],
                tpot_ms: s0.settings.goodput[1],
                e2el_ms: s0.settings.goodput[2],
                ttfo_ms: s0.settings.goodput_ttfo,
            },
            save_detailed: s0.settings.save_detailed,
            steady_state: s0.settings.steady_state,
        },
        info,
        count_tokens: s0.settings.has_tokenizer.then_some(count_tokens),
        outputs,
        requests: RequestFacts {
            spans: rows
                .iter()
                .map(|&(s, j)| {
                    let r = &shards[s].section.requests;
                    (r.start_ns[j], r.end_ns[j])
                })
                .collect(),
            turns,
            adapter: union_column(shards, rows, |r| r.section.requests.adapter.as_slice()),
            audio_s: union_column(shards, rows, |r| r.section.requests.audio_s.as_slice()),
            replica: union_column(shards, rows, |r| r.section.requests.replica.as_slice())
                .unwrap_or_default(),
        },
        adapter_names: s0.adapters.clone(),
        replica_urls: s0.replicas.clone(),
        probe: None,
        rps_events: rps_events(&shards[0].doc),
        engine,
        dispatch_lag: Lag::of(&all.dispatch_lag),
        // Judged only when every shard recorded its own.
        health: if health.len() == shards.len() {
            health
        } else {
            Vec::new()
        },
        failures: failures(shards),
        not_sent: shards.iter().map(|r| r.section.not_sent).sum(),
        not_sent_session_ended: shards
            .iter()
            .map(|r| r.section.not_sent_session_ended)
            .sum(),
        cancelled: shards
            .iter()
            .filter_map(|r| r.section.cancelled)
            .reduce(|a, b| Cancelled {
                requests: a.requests + b.requests,
                not_sent_session: a.not_sent_session + b.not_sent_session,
            }),
        interrupted: shards.iter().any(|r| r.section.interrupted),
        // Every shard measured the one server's counters over the same span.
        prefix_cache: s0.prefix_cache,
        start,
        server,
        shards: Shards::Merged(MergedShards {
            fingerprint: s0.fingerprint.clone(),
            start_at: s0.start_at,
            parts,
        }),
        // Shard files do not carry replay records yet (agentic runs are not sharded).
        agentic: None,
    })
}

/// The shard whose server-metrics scrape the merged result shows (`None` when no shard has
/// one). Its window is the times of its first and last scrape, on the shards' shared axis
/// (seconds from `--start-at`); the merged window runs from 0 to `duration`. The rule: the
/// least of the merged window missed, then the least time outside it (another shard's
/// warm-up, say), then the lowest shard number.
pub fn server_metrics_shard(shards: &[ShardFile], duration: f64) -> Option<usize> {
    let score = |m: &ServerMetrics| {
        let t = &m.endpoints.first()?.figures.series.t;
        let (first, last) = (*t.first()?, *t.last()?);
        let missed = first.max(0.0) + (duration - last).max(0.0);
        let outside = (-first).max(0.0) + (last - duration).max(0.0);
        (missed.is_finite() && outside.is_finite()).then_some((missed, outside))
    };
    shards
        .iter()
        .enumerate()
        .filter_map(|(i, r)| Some((i, score(r.server_metrics.as_ref()?)?)))
        .min_by(|(i, a), (j, b)| {
            a.0.total_cmp(&b.0)
                .then(a.1.total_cmp(&b.1))
                .then(shards[*i].section.shard.cmp(&shards[*j].section.shard))
        })
        .map(|(i, _)| i)
}
