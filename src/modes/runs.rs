//! Which measured runs one invocation makes, all on one plan and one engine: the single run
//! of a plain benchmark, a sweep's points (`--sweep-max-concurrency`, `--sweep-request-rate`)
//! or `--num-runs` repetitions; and the summary after them.
//!
//! A sweep sizes its dataset for its largest point, and every point takes the first sessions
//! it needs. Every run after the first (point, repetition, SLO probe) sends prompts of its
//! own, drawn with its own seed ([`super::sweep_prompts`]): re-sent prompts would be
//! answered from the server's prefix cache, and a later point would measure the cache, not
//! the load.
//! `--same-prompts` keeps one prompt set for all; [`super::sweep_cache`] says when a run's
//! cached share shows it measured an earlier one's prompts.

use std::borrow::Cow;

use anyhow::Result;

use crate::config::{Config, RunKind, SloConfig, SweepAxis};
use crate::metrics::steady_state::{SteadyState, SteadyStateOutcome};
use crate::output::plot;
use crate::output::runs_summary::{
    figures, render_run_line, render_spreads, render_sweep, runs_json, spreads, sweep_json,
};

use super::outcome::{nothing_ran, outcome, Outcome};
use super::plan::Plan;
use super::point::{self, Point, Reporting};
use super::prepare::Prepared;
use super::summary_file::{page_path, summary_path, write_summary_plot};
use super::sweep_cache::CacheWatch;
use super::sweep_prompts::{own_prompts, sent_by};

/// The measured runs of one invocation.
#[derive(Debug, Clone, PartialEq)]
pub enum Runs {
    One(Point),
    /// `axis` is the varied value's name (`max_concurrency`, `request_rate`), `values` its
    /// value at each point, as shown.
    Sweep {
        axis: &'static str,
        values: Vec<String>,
        points: Vec<Point>,
        reset_prefix_cache: bool,
    },
    /// `--num-runs`: the same point `runs` times.
    Repeat {
        point: Point,
        runs: usize,
    },
    /// `--slo-search`: probes chosen one after another, each `point` with the searched
    /// value set, `runs_per_value` times (`--num-runs`).
    Search {
        base: Point,
        slo: SloConfig,
        runs_per_value: usize,
    },
}

/// Sessions a point of a concurrency sweep runs: concurrency × `--sweep-num-prompts-factor`,
/// else `--num-prompts`.
fn sweep_prompts(config: &Config, concurrency: usize) -> usize {
    let factor = config.runs.sweep().and_then(|s| s.num_prompts_factor);
    factor.map_or(config.dataset.num_prompts, |f| {
        concurrency.saturating_mul(f)
    })
}

/// The configuration the plan is built from: a sweep's dataset sized for its largest
/// point, and `--sweep-summary-percentiles` added to the computed percentiles.
pub fn plan_config(config: &Config) -> Cow<'_, Config> {
    let RunKind::Sweep(sweep) = &config.runs else {
        return Cow::Borrowed(config);
    };
    let mut c = config.clone();
    if let SweepAxis::MaxConcurrency(values) = &sweep.axis {
        let largest = values.iter().map(|&v| sweep_prompts(config, v)).max();
        c.dataset.num_prompts = largest.unwrap_or(c.dataset.num_prompts);
    }
    for &p in &config.output.sweep_summary_percentiles {
        if !c.output.metric_percentiles.contains(&p) {
            c.output.metric_percentiles.push(p);
        }
    }
    Cow::Owned(c)
}

/// A rate as the summary shows it, Python's repr (`inf`, `10.0`, `2.5`).
fn rate_text(r: f64) -> String {
    if r.is_infinite() {
        "inf".into()
    } else {
        crate::pyfmt::float_repr(r)
    }
}

impl Runs {
    /// The runs `config` asks for ([`RunKind`], decided by config), over the plan's
    /// prepared sessions.
    pub fn of(config: &Config, prepared: &Prepared) -> Runs {
        let one = Point::of(config, prepared);
        let sessions = prepared.requests.len();
        match &config.runs {
            RunKind::One => Runs::One(one),
            RunKind::Repeat(n) => Runs::Repeat {
                point: one,
                runs: *n,
            },
            RunKind::Search {
                slo,
                runs_per_value,
            } => Runs::Search {
                base: one,
                slo: (**slo).clone(),
                runs_per_value: *runs_per_value,
            },
            RunKind::Sweep(sweep) => {
                let (axis, values, points) = match &sweep.axis {
                    SweepAxis::MaxConcurrency(cs) => (
                        "max_concurrency",
                        cs.iter().map(usize::to_string).collect(),
                        cs.iter()
                            .map(|&c| Point {
                                num_prompts: sweep_prompts(config, c).min(sessions),
                                max_concurrency: Some(c),
                                ..one
                            })
                            .collect(),
                    ),
                    SweepAxis::RequestRate(rates) => (
                        "request_rate",
                        rates.iter().map(|&r| rate_text(r)).collect(),
                        rates
                            .iter()
                            .map(|&r| Point {
                                request_rate: r,
                                max_concurrency: config.max_in_flight(),
                                ..one
                            })
                            .collect(),
                    ),
                };
                Runs::Sweep {
                    axis,
                    values,
                    points,
                    reset_prefix_cache: sweep.reset_prefix_cache,
                }
            }
        }
    }

    /// Runs them all (stopping after an interrupted one) and reports; the outcome of the
    /// invocation: interrupted if any run was, none succeeded if no run had a success.
    pub fn run(&self, plan: &mut Plan, config: &Config) -> Result<Outcome> {
        match self {
            Runs::One(p) => {
                let m = point::measure(plan, config, p)?;
                point::finish(config, plan, p, &m, &Reporting::default())?;
                // The agentic replay's failure threshold stopped it: reported and saved,
                // and an error (AIPerf exits non-zero).
                if let Some(crossed) = plan.dataset.agentic().and_then(|a| a.threshold_crossed()) {
                    return Err(crossed.into());
                }
                Ok(outcome(
                    &m.report.merged.outputs,
                    m.report.cancelled,
                    m.interrupted,
                ))
            }
            Runs::Sweep {
                axis,
                values,
                points,
                reset_prefix_cache,
            } => sweep(plan, config, axis, values, points, *reset_prefix_cache),
            Runs::Repeat { point, runs } => repeat(plan, config, point, *runs),
            Runs::Search {
                base,
                slo,
                runs_per_value,
            } => super::slo_search::run(plan, config, slo, base, *runs_per_value),
        }
    }
}

/// The outcome of several runs.
fn combined(outcomes: Vec<Outcome>) -> Outcome {
    if outcomes.contains(&Outcome::Interrupted) {
        return Outcome::Interrupted;
    }
    match outcomes.iter().find(|o| **o == Outcome::Completed) {
        Some(_) => Outcome::Completed,
        None => outcomes.into_iter().next().unwrap_or(Outcome::Completed),
    }
}

/// A report's figures as the summary plots take them.
fn figure_pairs(r: &crate::metrics::report::BenchmarkReport) -> plot::runs_plot::Figures {
    figures(r).into_iter().map(|f| (f.key, f.value)).collect()
}

fn sweep(
    plan: &mut Plan,
    config: &Config,
    axis: &str,
    values: &[String],
    points: &[Point],
    reset: bool,
) -> Result<Outcome> {
    let (mut reports, mut files, mut outcomes) = (Vec::new(), Vec::new(), Vec::new());
    let (mut steady, mut interrupted) = (Vec::new(), Vec::new());
    let mut cache = CacheWatch::new(config.multi_run.same_prompts, reset);
    for (i, (p, v)) in points.iter().zip(values).enumerate() {
        // Built before the cache reset and the point's line: the reset is for its run.
        let own = own_prompts(plan, config, i)?;
        let config = &*own;
        if reset {
            let done = plan
                .target
                .reset_prefix_cache()
                .map_err(anyhow::Error::from);
            // Refused before the first point: nothing ran.
            done.map_err(|e| if i == 0 { nothing_ran(e) } else { e })?;
        }
        plan.console.line(format_args!(
            "Sweep point {}/{}: {axis} = {v}",
            i + 1,
            points.len()
        ));
        let m = point::measure(plan, config, p)?;
        let how = Reporting {
            file_suffix: Some(format!("-{axis}{v}")),
            ..Reporting::default()
        };
        let f = point::finish(config, plan, p, &m, &how)?;
        let what = format!("sweep point {} ({axis} = {v})", i + 1);
        outcomes.push(judged(plan, p, &m, &mut cache, &what));
        reports.push(f.report);
        steady.push(f.steady_state);
        interrupted.push(m.interrupted);
        files.push(f.file.map(|p| p.display().to_string()));
        if m.interrupted {
            break;
        }
    }
    let shown = &values[..reports.len()];
    let steady: Vec<Option<&SteadyState>> = steady
        .iter()
        .map(|s| match s {
            Some(SteadyStateOutcome::Computed(s)) => Some(s),
            _ => None,
        })
        .collect();
    plan.console
        .out(render_sweep(axis, shown, &reports, &steady, &interrupted));
    if config.output.plot {
        let points = shown
            .iter()
            .zip(&reports)
            .map(|(v, r)| (v.clone(), figure_pairs(r)))
            .collect();
        let summary = plot::runs_plot::Summary::Sweep {
            axis: axis.to_string(),
            points,
        };
        let path = page_path(&summary_path(config, "sweep-summary"));
        write_summary_plot(&path, &summary, &plan.console);
    }
    if config.report.save {
        let path = summary_path(config, "sweep-summary");
        let doc = sweep_json(axis, shown, &reports, &steady, &interrupted, &files);
        let files = config.output.result_files();
        files.save(&path, &doc, false, "sweep summary", &plan.console)?;
    }
    Ok(combined(outcomes))
}

/// One measured run of several (`what` names it): says when it measured an earlier run's
/// prefix cache, and gives its outcome.
fn judged(
    plan: &Plan,
    p: &Point,
    m: &point::MeasuredPoint,
    cache: &mut CacheWatch,
    what: &str,
) -> Outcome {
    if let Some(w) = cache.observe(what, sent_by(plan, p), &m.server_metrics) {
        plan.console.warning(w);
    }
    outcome(&m.report.merged.outputs, m.report.cancelled, m.interrupted)
}

fn repeat(plan: &mut Plan, config: &Config, p: &Point, runs: usize) -> Result<Outcome> {
    let how = Reporting {
        collect: true,
        file_suffix: None,
        plot_suffix: None,
        default_name_suffix: None,
    };
    let (mut reports, mut documents, mut outcomes) = (Vec::new(), Vec::new(), Vec::new());
    let (mut path, mut interrupted) = (None, Vec::new());
    let mut cache = CacheWatch::new(config.multi_run.same_prompts, false);
    for i in 0..runs {
        let own = own_prompts(plan, config, i)?;
        let config = &*own;
        let m = point::measure(plan, config, p)?;
        let run_how = Reporting {
            plot_suffix: Some(format!("-run{}", i + 1)),
            ..how.clone()
        };
        let f = point::finish(config, plan, p, &m, &run_how)?;
        plan.console
            .out(render_run_line(i + 1, runs, &f.report, m.interrupted));
        let what = format!("run {}/{runs}", i + 1);
        outcomes.push(judged(plan, p, &m, &mut cache, &what));
        reports.push(f.report);
        interrupted.push(m.interrupted);
        documents.extend(f.document);
        path = f.file.or(path);
        if m.interrupted {
            break;
        }
    }
    // An interrupted run is shown and saved, marked, but left out of the statistics.
    let stats = spreads(&reports, &interrupted);
    plan.console
        .out(render_spreads(&stats, reports.len(), &interrupted));
    if config.output.plot {
        let runs = reports.iter().map(figure_pairs).collect();
        // Beside the file holding the runs, else where a summary would go.
        let file = path
            .clone()
            .unwrap_or_else(|| summary_path(config, "runs-summary"));
        write_summary_plot(
            &page_path(&file),
            &plot::runs_plot::Summary::Runs { runs },
            &plan.console,
        );
    }
    if let Some(path) = path.filter(|_| config.report.save) {
        let doc = runs_json(documents, &interrupted, &stats);
        let what = format!("{} runs and their statistics", reports.len());
        let files = config.output.result_files();
        let text = doc.to_json_string();
        files.save(&path, &text, config.report.append, &what, &plan.console)?;
    }
    Ok(combined(outcomes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_invocation_is_one_run_of_every_session() {
        let cfg = Config::of_args(&["--num-prompts", "5", "--max-concurrency", "2"]);
        assert_eq!(
            Runs::of(&cfg, &Prepared::single_requests(5)),
            Runs::One(Point {
                num_prompts: 5,
                request_rate: f64::INFINITY,
                max_concurrency: Some(2),
            })
        );
    }

    #[test]
    fn a_concurrency_sweep_gives_each_point_factor_times_its_concurrency_sessions() {
        let cfg = Config::of_args(&[
            "--sweep-max-concurrency",
            "1,4,50",
            "--sweep-num-prompts-factor",
            "3",
        ]);
        // The plan was sized for the largest point (150), but only 20 sessions were prepared:
        // a point never takes more than there are.
        let Runs::Sweep {
            axis,
            values,
            points,
            ..
        } = Runs::of(&cfg, &Prepared::single_requests(20))
        else {
            panic!("a sweep");
        };
        assert_eq!(axis, "max_concurrency");
        assert_eq!(values, ["1", "4", "50"]);
        let split: Vec<_> = points
            .iter()
            .map(|p| (p.num_prompts, p.max_concurrency))
            .collect();
        assert_eq!(split, [(3, Some(1)), (12, Some(4)), (20, Some(50))]);
    }

    #[test]
    fn a_rate_sweep_runs_every_session_at_each_rate() {
        let cfg = Config::of_args(&["--sweep-request-rate", "1,2.5,inf", "--num-prompts", "7"]);
        let Runs::Sweep {
            axis,
            values,
            points,
            ..
        } = Runs::of(&cfg, &Prepared::single_requests(7))
        else {
            panic!("a sweep");
        };
        assert_eq!(axis, "request_rate");
        assert_eq!(values, ["1.0", "2.5", "inf"], "Python's repr of each rate");
        assert!(points.iter().all(|p| p.num_prompts == 7));
        let rates: Vec<f64> = points.iter().map(|p| p.request_rate).collect();
        assert_eq!(rates, [1.0, 2.5, f64::INFINITY]);
    }

    #[test]
    fn num_runs_repeats_the_one_point() {
        let cfg = Config::of_args(&["--num-runs", "3", "--num-prompts", "4"]);
        let Runs::Repeat { point, runs } = Runs::of(&cfg, &Prepared::single_requests(4)) else {
            panic!("repetitions");
        };
        assert_eq!((point.num_prompts, runs), (4, 3));
    }

    #[test]
    fn the_plan_of_a_concurrency_sweep_is_sized_for_its_largest_point() {
        let cfg = Config::of_args(&[
            "--sweep-max-concurrency",
            "2,8",
            "--sweep-num-prompts-factor",
            "5",
            "--num-prompts",
            "3",
        ]);
        assert_eq!(plan_config(&cfg).dataset.num_prompts, 40);
        let plain = Config::of_args(&["--num-prompts", "3"]);
        assert!(matches!(plan_config(&plain), Cow::Borrowed(_)));
    }
}
