//! The facts of a run merged from its shards' result files (`vllm-bench merge`): the union
//! of N saved facts (each shard's `RunFacts` as `saved_facts::save` wrote it, read and
//! checked by `output::shard_file`), as the one-process run's [`RunFacts`]: every request in
//! that run's order with its saved columns, the duration of the longest shard (all started
//! at one instant), each shard's engine and client health side by side, every probe, and
//! one shard's scrape of the server they share. Each field saved is read back here, so a
//! fact added to `RunFacts` is added to `saved_facts::save` and to [`union`] and nowhere
//! else; a shard's own figures beside the union are computed again from its facts alone.

use serde_json::Value;

use crate::engine::recorder::Histograms;
use crate::metrics::calculator::CountTokens;
use crate::metrics::goodput::GoodputConfig;
use crate::metrics::metric_stats::MetricKind;
use crate::metrics::report::TaskKind;
use crate::metrics::RequestOutput;
use crate::output::facts::{EngineFacts, Lag, PartHealth};
use crate::output::run_result::{Cancelled, MergedPart, MergedShards, Section, Shards};
use crate::output::shard_file::{ShardFile, ShardFileError};
use crate::server_metrics::exposition::Gpu;
use crate::server_metrics::{Series, ServerMetrics};
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

/// A shard's own `completed`, `failed` and `vllm_bench_*` figures (engine, dispatch lag,
/// client health, ...), as its own result holds them: computed again from its facts alone,
/// by the one computation (`RunFacts::result`), so nothing beside the facts is read.
fn shard_figures(
    r: &ShardFile,
    count_tokens: CountTokens<'_>,
) -> Result<serde_json::Map<String, Value>, ShardFileError> {
    let one = std::slice::from_ref(r);
    let rows: Vec<(usize, usize)> = (0..r.section.requests.len()).map(|j| (0, j)).collect();
    let outputs: Vec<RequestOutput> = (0..rows.len())
        .map(|j| r.section.requests.output(j))
        .collect();
    let start = crate::output::start::start_section(r.section.start_block.as_ref());
    let mut facts = union(one, &rows, &outputs, count_tokens, start, false)?;
    // As its own run named its one part.
    for p in &mut facts.health {
        p.name.clear();
    }
    let unreadable = |error| ShardFileError::Section {
        path: r.path.clone(),
        error,
    };
    let text = facts
        .result()
        .document()
        .map_err(unreadable)?
        .to_json_string();
    let doc: serde_json::Map<String, Value> = serde_json::from_str(&text).map_err(unreadable)?;
    let mut out = serde_json::Map::new();
    out.insert("shard".into(), Value::from(r.section.shard));
    out.insert("file".into(), Value::from(r.path.clone()));
    for (k, v) in doc {
        if k == "completed" || k == "failed" || k.starts_with("vllm_bench_") {
            out.insert(k, v);
        }
    }
    Ok(out)
}

/// One shard as a part of the merged result.
fn part(
    r: &ShardFile,
    lag: Option<Lag>,
    count_tokens: CountTokens<'_>,
) -> Result<MergedPart, ShardFileError> {
    Ok(MergedPart {
        name: r.name(),
        file: r.path.clone(),
        requests: r.section.requests.len(),
        interrupted: r.section.interrupted,
        engine: r.section.engine.clone(),
        dispatch_lag: lag,
        figures: shard_figures(r, count_tokens)?,
    })
}

/// The union of the shards' facts: every request of every shard in the one-process run's
/// order (`rows`, `outputs`), the duration of the longest shard (all started at one instant),
/// each shard's engine and client health side by side, and one shard's scrape of the
/// server they share ([`server_metrics_shard`]); each shard's own figures beside.
pub fn merged_facts<'a>(
    shards: &'a [ShardFile],
    rows: &[(usize, usize)],
    outputs: &'a [RequestOutput],
    count_tokens: CountTokens<'a>,
    start: Section,
) -> Result<RunFacts<'a>, ShardFileError> {
    let mut facts = union(shards, rows, outputs, count_tokens, start, shards.len() > 1)?;
    let parts = shards
        .iter()
        .map(|r| {
            let lag = Lag::of(&r.histograms()?.dispatch_lag);
            part(r, lag, count_tokens)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let s0 = &shards[0].section;
    facts.shards = Shards::Merged(MergedShards {
        fingerprint: s0.fingerprint.clone(),
        start_at: s0.start_at,
        parts,
    });
    Ok(facts)
}

/// The facts of `shards` together (every saved field, read back; see `saved_facts` for the
/// other direction), as a run of one process that is no shard. `from_shard`: the server's
/// block names the shard whose scrape it shows (several shards).
fn union<'a>(
    shards: &'a [ShardFile],
    rows: &[(usize, usize)],
    outputs: &'a [RequestOutput],
    count_tokens: CountTokens<'a>,
    start: Section,
    from_shard: bool,
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
        from_shard: chosen
            .filter(|_| from_shard)
            .map(|r| (r.section.shard, r.name())),
    };
    let mut all = Histograms::default();
    let mut health = Vec::new();
    let mut engines = Vec::new();
    for r in shards {
        let h = r.histograms()?;
        all.add(&h);
        if let Some(hh) = &r.section.health {
            health.push(PartHealth {
                name: r.name(),
                health: hh.clone(),
                dispatch_lag: Lag::of(&h.dispatch_lag),
            });
        }
        engines.extend(r.section.engine.as_ref());
    }
    let engine = (engines.len() == shards.len())
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
            index: rows
                .iter()
                .map(|&(s, j)| shards[s].section.requests.index[j])
                .collect(),
            shard: Some(
                rows.iter()
                    .map(|&(s, _)| shards[s].section.shard as u16)
                    .collect(),
            ),
        },
        adapter_names: s0.adapters.clone(),
        replica_urls: s0.replicas.clone(),
        // Only shard 0 runs the probe lane; the union keeps every probe saved.
        probes: shards
            .iter()
            .flat_map(|r| r.section.probes.iter().copied())
            .collect(),
        rps_events: s0.rps_events.clone(),
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
                context_overflows: a.context_overflows + b.context_overflows,
            }),
        interrupted: shards.iter().any(|r| r.section.interrupted),
        // Every shard measured the one server's counters over the same span.
        prefix_cache: s0.prefix_cache,
        start,
        server,
        shards: Shards::Whole,
        epoch_ns: shard_epochs(shards),
        gpu: one_per_exporter(
            shards.iter().flat_map(|r| {
                let k = r.section.shard;
                r.gpu
                    .iter()
                    .enumerate()
                    .map(move |(at, (url, s))| (k, at, url.as_str(), s))
            }),
            duration_s,
        ),
        agentic: crate::metrics::agentic::AgenticFacts::union(
            shards.iter().filter_map(|r| r.section.agentic.as_ref()),
        ),
    })
}

/// Per shard K, the wall-clock zero of its spans, ns since the Unix epoch: `--start-at` (read
/// as a live shard reads it) plus how late its clock started. Empty without `--start-at`.
fn shard_epochs(shards: &[ShardFile]) -> Vec<u64> {
    let s0 = &shards[0].section;
    let Some(start) = s0
        .start_at
        .and_then(|t| std::time::Duration::try_from_secs_f64(t).ok())
    else {
        return Vec::new();
    };
    let mut epochs = vec![start.as_nanos() as u64; s0.shards];
    for r in shards {
        let late_ms = r.section.start.as_ref().map_or(0.0, |s| s.late_ms);
        let late = std::time::Duration::try_from_secs_f64(late_ms / 1e3).unwrap_or_default();
        if let Some(e) = epochs.get_mut(r.section.shard) {
            *e = (start + late).as_nanos() as u64;
        }
    }
    epochs
}

/// How well scrapes taken at `t` (seconds on the shards' shared axis, from `--start-at`)
/// cover the merged run, which runs from 0 to `duration`: the time of it they missed (before
/// the first scrape, after the last), then the time they spent outside it (another shard's
/// warm-up, say); the less the better. `None` without scrapes.
fn coverage(t: &[f64], duration: f64) -> Option<(f64, f64)> {
    let (first, last) = (*t.first()?, *t.last()?);
    let missed = first.max(0.0) + (duration - last).max(0.0);
    let outside = (-first).max(0.0) + (last - duration).max(0.0);
    (missed.is_finite() && outside.is_finite()).then_some((missed, outside))
}

/// The shard whose server-metrics scrape the merged result shows (`None` when no shard has
/// one): the one whose first endpoint's scrapes cover the merged run best ([`coverage`]),
/// then the lowest shard number.
pub fn server_metrics_shard(shards: &[ShardFile], duration: f64) -> Option<usize> {
    let score = |m: &ServerMetrics| coverage(&m.endpoints.first()?.figures.series.t, duration);
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

/// The GPU exporters' scrapes a merge computes its GPU section from, by the code a run uses
/// (`RunFacts::result`): one series per exporter, whichever shards scraped it. `exporters`:
/// each shard's, as (shard number, its place in that shard's `--gpu-telemetry` list, URL,
/// scrapes).
///
/// Shards that name the same exporter scrape the same counters, so their series are not
/// added up (that would count its GPUs and their energy once per shard), nor interleaved
/// (each shard reads the counters on its own machine's clock, and one reading placed out
/// of order looks like a counter that restarted). One shard's series is kept instead: the
/// one whose scrapes cover the merged run best ([`coverage`], the rule of the server's
/// block), then the lowest shard. Every shard takes its first scrape before it waits for
/// `--start-at` and its last after its own last response, so the longest shard's series
/// spans every shard's requests and its energy counter's increase is the energy of the
/// whole run.
///
/// The same exporter is the same URL reporting the same GPU (host and index) at least
/// once: one URL that reports other GPUs on each shard (`localhost:9400` on each node of a
/// multi-node run, each exporter labelling its own `Hostname`) is one exporter per shard,
/// and each is kept. Kept series are in `--gpu-telemetry` order, then by shard.
pub fn one_per_exporter<'s>(
    exporters: impl IntoIterator<Item = (usize, usize, &'s str, &'s Series)>,
    duration: f64,
) -> Vec<(&'s str, &'s Series)> {
    let mut candidates: Vec<_> = exporters
        .into_iter()
        .filter_map(|(shard, at, url, s)| {
            let gpus = crate::server_metrics::gpu::gpus_of(s);
            let score = coverage(&s.t, duration)?;
            (!gpus.is_empty()).then_some((score, shard, at, url, s, gpus))
        })
        .collect();
    candidates.sort_by(|a, b| {
        (a.0 .0.total_cmp(&b.0 .0))
            .then(a.0 .1.total_cmp(&b.0 .1))
            .then((a.1, a.2).cmp(&(b.1, b.2)))
    });
    type Kept<'s> = (usize, usize, &'s str, &'s Series, Vec<&'s Gpu>);
    let mut kept: Vec<Kept<'s>> = Vec::new();
    for (_, shard, at, url, s, gpus) in candidates {
        let seen = kept
            .iter()
            .any(|k| k.2 == url && k.4.iter().any(|g| gpus.contains(g)));
        if !seen {
            kept.push((shard, at, url, s, gpus));
        }
    }
    kept.sort_by_key(|k| (k.1, k.0));
    kept.into_iter().map(|k| (k.2, k.3)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server_metrics::gpu::dcgm;

    /// An exporter's scrapes at `t` of GPUs `gpus` on `host`, each one's energy counter
    /// growing by `mj` a scrape.
    fn scrapes(t: &[f64], host: &str, gpus: &[&str], mj: f64) -> Series {
        let mut s = Series {
            t: t.to_vec(),
            ..Series::default()
        };
        for g in gpus {
            let gpu = Gpu {
                host: host.into(),
                gpu: g.to_string(),
            };
            let values = (0..t.len()).map(|k| Some(k as f64 * mj)).collect();
            s.per_gpu
                .entry(dcgm::TOTAL_ENERGY_CONSUMPTION.into())
                .or_default()
                .insert(gpu, values);
        }
        s
    }

    #[test]
    fn one_exporter_scraped_by_two_shards_is_the_series_covering_the_run() {
        // Shard 0 ended at 2 s, shard 1 at 3 s (the merged run's end).
        let short = scrapes(&[-1.0, 1.0, 2.1], "h", &["0", "1"], 1.0);
        let long = scrapes(&[-1.0, 1.0, 2.0, 3.1], "h", &["0", "1"], 1.0);
        let url = "http://dcgm:9400/metrics";
        let kept = one_per_exporter([(0, 0, url, &short), (1, 0, url, &long)], 3.0);
        assert_eq!(kept.len(), 1);
        assert!(std::ptr::eq(kept[0].1, &long));
        let t = crate::server_metrics::GpuTelemetry::of(kept, 10).unwrap();
        assert_eq!(t.gpus.len(), 2, "each GPU once");
        // 3 mJ each: the longest shard's counter increase.
        assert_eq!(t.energy_j, Some(0.006));
        // Both cover the run: the lower shard's.
        let also = scrapes(&[-1.0, 1.0, 2.0, 3.1], "h", &["0", "1"], 2.0);
        let kept = one_per_exporter([(1, 0, url, &long), (0, 0, url, &also)], 3.0);
        assert_eq!(kept.len(), 1);
        assert!(std::ptr::eq(kept[0].1, &also));
    }

    #[test]
    fn other_exporters_and_one_url_on_other_hosts_are_each_kept() {
        let t = [-1.0, 1.0, 2.0];
        let (a, b) = (scrapes(&t, "a", &["0"], 1.0), scrapes(&t, "b", &["0"], 1.0));
        let c = scrapes(&t, "a", &["0"], 1.0);
        let local = "http://localhost:9400/metrics";
        let other = "http://c:9400/metrics";
        let kept = one_per_exporter(
            [(1, 0, local, &b), (0, 0, local, &a), (0, 1, other, &c)],
            2.0,
        );
        let urls: Vec<(&str, &str)> = kept
            .iter()
            .map(|(u, s)| (*u, crate::server_metrics::gpu::gpus_of(s)[0].host.as_str()))
            .collect();
        assert_eq!(urls, [(local, "a"), (local, "b"), (other, "a")]);
        // An exporter that reported no GPU is none.
        let empty = Series::default();
        assert!(one_per_exporter([(0, 0, local, &empty)], 2.0).is_empty());
    }
}
