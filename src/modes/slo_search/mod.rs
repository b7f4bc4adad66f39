//! `--slo-search`: the largest concurrency or request rate at which every `--slo` term is
//! met. The search ([`algorithm`], pure) says which value to probe next; each probe here is a
//! normal measured run of the one plan on the one persistent engine (`point::measure` and
//! `point::finish`, as a sweep point: prompts of its own unless `--same-prompts`, its own
//! result file), judged on the figures its report computes, and printed as one line as it
//! finishes. Budgets (`--slo-search-max-time`, `--slo-search-max-requests`) are checked
//! before each probe; a rate probe that is clearly over-saturated is stopped early
//! ([`saturation`]).
//! Then the block, the summary document and the plot (`output::slo_search`).

pub mod algorithm;
pub mod saturation;

use std::time::Instant;

use anyhow::Result;

use crate::config::slo::tolerance_percent;
use crate::config::{Config, SearchVariable, SloConfig};
use crate::metrics::metric_stats::MetricKind;
use crate::metrics::report::{BenchmarkReport, TaskMetrics};
use crate::output::plot;
use crate::output::runs_summary::{figures, Figure};
use crate::output::slo_search::{
    plot_points, render_block, render_probe_line, to_json, value_text, Probe, SearchReport,
    TermFigure,
};

use self::algorithm::{saturated, Answer, Search, Space, Step};
use super::outcome::{nothing_ran, Outcome};
use super::plan::Plan;
use super::point::{self, Point, Reporting};
use super::sweep_cache::CacheWatch;
use super::sweep_prompts::{own_prompts, sent_by};

/// A safety net far beyond any real search (doubling plus bisection of a 64-bit range, each
/// boundary value run a few times).
const MAX_PROBES: usize = 200;

/// The search's space from the configuration and the plan's probe size.
fn space(slo: &SloConfig, num_prompts: usize, seed_floor: f64) -> Space {
    match slo.variable {
        SearchVariable::MaxConcurrency => {
            let (lo, hi) = slo.range.unwrap_or((1.0, num_prompts.max(1) as f64));
            Space::Integer {
                lo: lo as u64,
                hi: hi as u64,
            }
        }
        SearchVariable::RequestRate => Space::Rate {
            range: slo.range,
            tolerance: slo.tolerance,
            floor: seed_floor,
        },
    }
}

/// Judges one measured run against the terms.
fn judge(
    slo: &SloConfig,
    report: &BenchmarkReport,
    figs: &[Figure],
) -> (Vec<TermFigure>, Option<(f64, f64)>, u64) {
    // A probe whose requests all only reasoned has no TTFO sample: its report's zeros are
    // no figure (n/a, a miss), not a met bound.
    let no_ttfo = matches!(&report.metrics,
        TaskMetrics::Generation { metrics: m, .. } if m.completed == m.no_output_token);
    let terms = slo
        .terms
        .iter()
        .map(|t| {
            let key = t.key();
            let missing = t.metric == MetricKind::Ttfo && no_ttfo;
            TermFigure {
                name: t.name(),
                value_ms: figs
                    .iter()
                    .find(|f| f.key == key && !missing)
                    .map(|f| f.value),
                key,
                bound_ms: t.bound_ms,
            }
        })
        .collect();
    let (failed, good_share) = match &report.metrics {
        TaskMetrics::Generation { metrics: m, .. } => {
            let total = m.completed + m.failed;
            let good = (m.request_goodput * report.duration_s).round();
            let share = if total == 0 { 0.0 } else { good / total as f64 };
            (m.failed, share)
        }
        TaskMetrics::Pooling(m) => (m.failed, 0.0),
    };
    let goodput = slo.goodput_share.map(|need| (good_share, need));
    (terms, goodput, failed)
}

/// Runs the search, each probed value `runs_per_value` times; the outcome of the invocation
/// (a capacity found: completed; none: `SloNotMet`).
pub fn run(
    plan: &mut Plan,
    config: &Config,
    slo: &SloConfig,
    base: &Point,
    runs_per_value: usize,
) -> Result<Outcome> {
    let variable = slo.variable.key();
    let floor = crate::datasets::limits::min_rate(base.num_prompts as u64) * 1.01;
    let mut search = Search::new(space(slo, base.num_prompts, floor), runs_per_value);
    let started = Instant::now();
    let mut probes: Vec<Probe> = Vec::new();
    let mut overhead_ms = Vec::new();
    let mut last_end: Option<Instant> = None;
    let mut sent: u64 = 0;
    let mut interrupted = false;
    let mut cache = CacheWatch::new(config.multi_run.same_prompts, slo.reset_prefix_cache);
    // Only a rate search stops a probe early, and only for a term a growing queue drives
    // (a TPOT or ITL bound may hold however long requests wait).
    let watch_saturation = slo.variable == SearchVariable::RequestRate
        && slo
            .terms
            .iter()
            .any(|t| !matches!(t.metric, MetricKind::Tpot | MetricKind::Itl));
    let answer = loop {
        let value = match search.next() {
            Step::Done(a) => break Ok(a),
            Step::Probe(v) => v,
        };
        if probes.len() >= MAX_PROBES {
            break Err(format!("the probe limit ({MAX_PROBES}) was reached"));
        }
        if let Some(max) = slo.max_time.filter(|m| started.elapsed() >= *m) {
            break Err(format!(
                "the time budget ({} s) was reached",
                max.as_secs_f64()
            ));
        }
        let planned = base.num_prompts as u64;
        if let Some(max) = slo.max_requests.filter(|m| sent + planned > *m) {
            break Err(format!(
                "the request budget ({max}) was reached: {sent} sent, the next probe needs \
                 {planned}"
            ));
        }
        let point = match slo.variable {
            SearchVariable::MaxConcurrency => Point {
                max_concurrency: Some(value as usize),
                ..*base
            },
            SearchVariable::RequestRate => Point {
                request_rate: value,
                ..*base
            },
        };
        // Each probe its own prompts (`sweep_prompts::point_seed`): a probe answered from the cache
        // of the one before would meet a TTFT bound the load does not.
        let own = own_prompts(plan, config, probes.len())?;
        let config = &*own;
        if slo.reset_prefix_cache {
            let done = plan
                .target
                .reset_prefix_cache()
                .map_err(anyhow::Error::from);
            done.map_err(|e| if probes.is_empty() { nothing_ran(e) } else { e })?;
        }
        let run = 1 + probes.iter().filter(|p| p.value == value).count();
        if let Some(end) = last_end {
            overhead_ms.push(end.elapsed().as_secs_f64() * 1000.0);
        }
        let mut watch = None;
        let m = point::measure_watched(plan, config, &point, |progress, offsets| {
            if watch_saturation {
                watch = Some(saturation::Watch::start(progress, offsets));
            }
        })?;
        let stopped_saturated = watch.and_then(saturation::Watch::finish);
        let measured_end = Instant::now();
        sent += m.report.merged.outputs.len() as u64;
        // As sweep points name theirs, and a value's later runs their run.
        let run_suffix = (run > 1).then(|| format!("-run{run}"));
        let how = Reporting {
            file_suffix: Some(format!(
                "-{variable}{}{}",
                value_text(value),
                run_suffix.as_deref().unwrap_or("")
            )),
            plot_suffix: None,
            collect: false,
            default_name_suffix: run_suffix,
        };
        let f = point::finish(config, plan, &point, &m, &how)?;
        let what = format!(
            "SLO probe {} ({variable} = {})",
            probes.len() + 1,
            value_text(value)
        );
        if let Some(w) = cache.observe(&what, sent_by(plan, &point), &m.server_metrics) {
            plan.console.warning(w);
        }
        let mut figs = figures(&f.report);
        if let TaskMetrics::Generation { metrics, .. } = &f.report.metrics {
            if f.report.goodput_enabled {
                figs.push(Figure {
                    key: "request_goodput".into(),
                    label: "Request goodput (req/s)".into(),
                    value: metrics.request_goodput,
                });
            }
        }
        let (terms, goodput, failed) = judge(slo, &f.report, &figs);
        let meets = !m.interrupted
            && stopped_saturated.is_none()
            && failed == 0
            && terms.iter().all(TermFigure::meets)
            && goodput.is_none_or(|(s, need)| s >= need);
        let latencies = {
            let mut ok: Vec<(f64, f64)> = m
                .report
                .merged
                .outputs
                .iter()
                .filter(|o| o.success)
                .map(|o| (o.start_time, o.ttft.max(0.0) + o.client_queue_time))
                .collect();
            ok.sort_by(|a, b| a.0.total_cmp(&b.0));
            ok.into_iter().map(|(_, l)| l).collect::<Vec<f64>>()
        };
        let throughput = figs
            .iter()
            .find(|f| f.key == "request_throughput")
            .map_or(0.0, |f| f.value);
        let probe = Probe {
            value,
            run,
            terms,
            goodput,
            failed,
            meets,
            // Only an open loop can over-saturate: with every request released at once
            // (rate inf), queueing grows through any run by design.
            saturated: stopped_saturated.is_some()
                || (!meets && point.request_rate.is_finite() && saturated(&latencies)),
            stopped_early: stopped_saturated.map(|at| (at.as_secs_f64(), m.report.not_sent)),
            interrupted: m.interrupted,
            figures: figs,
            result_file: f.file.map(|p| p.display().to_string()),
        };
        plan.console
            .out(render_probe_line(variable, probes.len(), &probe) + "\n");
        probes.push(probe);
        search.record(value, meets, throughput);
        last_end = Some(measured_end);
        if m.interrupted {
            interrupted = true;
            break Err("the run was interrupted".to_owned());
        }
    };
    let last_run_of = |v: f64| probes.iter().rposition(|p| p.value == v);
    let (best, failed, stopped_because) = match answer {
        Ok(Answer::Found { best, failed }) => (
            last_run_of(best),
            last_run_of(failed),
            match slo.variable {
                SearchVariable::MaxConcurrency => {
                    format!("found: {best} meets and {failed} does not, each confirmed")
                }
                SearchVariable::RequestRate => format!(
                    "found: {} meets and {} does not, within the tolerance ({} %)",
                    value_text(best),
                    value_text(failed),
                    tolerance_percent(slo.tolerance)
                ),
            },
        ),
        Ok(Answer::UpperBoundMet { best }) => (
            last_run_of(best),
            None,
            format!(
                "the top of the range ({}) meets: the capacity is at least that",
                value_text(best)
            ),
        ),
        Ok(Answer::NoneMet { lowest }) => (
            None,
            last_run_of(lowest),
            format!(
                "even the lowest value probed ({}) does not meet",
                value_text(lowest)
            ),
        ),
        Err(why) => {
            // What was reached: the best that meets below the lowest miss so far.
            // An interrupted probe was not judged: not a miss.
            let miss = probes
                .iter()
                .filter(|p| !p.meets && !p.interrupted)
                .map(|p| p.value)
                .fold(f64::INFINITY, f64::min);
            let best = probes
                .iter()
                .enumerate()
                .filter(|(_, p)| p.meets && p.value < miss)
                .max_by(|a, b| a.1.value.total_cmp(&b.1.value))
                .map(|(i, _)| i);
            (best, last_run_of(miss), format!("{why}; not confirmed"))
        }
    };
    let report = SearchReport {
        variable,
        slo: slo.terms.iter().map(|t| t.text()).collect(),
        goodput_share: slo.goodput_share,
        probes,
        best,
        failed,
        stopped_because,
        overhead_ms,
    };
    plan.console.out(render_block(&report));
    if config.output.plot {
        let (points, best, meets) = plot_points(&report);
        let bounds = slo.terms.iter().map(|t| (t.key(), t.bound_ms)).collect();
        let summary = plot::runs_plot::Summary::Search {
            axis: variable.to_string(),
            points,
            bounds,
            best,
            meets,
        };
        let path = super::summary_file::page_path(&super::summary_file::summary_path(
            config,
            "slo-search-summary",
        ));
        super::summary_file::write_summary_plot(&path, &summary, &plan.console);
    }
    if config.report.save {
        let path = super::summary_file::summary_path(config, "slo-search-summary");
        let (files, text) = (config.output.result_files(), to_json(&report));
        files.save(&path, &text, false, "SLO search summary", &plan.console)?;
    }
    if interrupted {
        return Ok(Outcome::Interrupted);
    }
    if let Some(b) = report.best {
        let p = &report.probes[b];
        plan.console.err_line(format_args!(
            "SLO capacity: {variable} = {}",
            value_text(p.value)
        ));
        return Ok(Outcome::Completed);
    }
    let lowest = report
        .failed
        .map(|i| &report.probes[i])
        .map_or_else(String::new, |p| {
            format!(" ({variable} = {}: {})", value_text(p.value), p.why_not())
        });
    Ok(Outcome::SloNotMet {
        why: format!("{}{lowest}", report.stopped_because),
    })
}
