//! One measured run of the plan, at one point: what it varies (prompts, rate, concurrency;
//! a sweep runs several points on the same plan and engine), its schedule, the run itself
//! with the progress bar and Ctrl-C, and its report (Python's block, our extras, the result
//! file).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::Result;

use crate::config::{Config, ProfileWhen, RunPlots, Ui};
use crate::engine::schedule::{
    arrival_offsets, rps_changes, to_durations, Cancellations, RampUp, RateSpec,
};
use crate::engine::{Progress, RunReport, Workload};
use crate::metrics::agentic::{AgenticFacts, AgenticSettings};
use crate::metrics::calculator::CountTokens;
use crate::metrics::report::{BenchmarkReport, TaskKind};
use crate::metrics::steady_state::SteadyStateOutcome;
use crate::output::console::{render_preamble, Preamble};
use crate::output::facts::{self, EngineFacts, Lag, PartHealth};
use crate::output::health::ClientHealth;
use crate::output::json::{JsonObject, RpsChangeEvent, RunInfo};
use crate::output::localtime::LocalDateTime;
use crate::output::plot;
use crate::output::request_export::RequestExport;
use crate::output::result_files::derived;
use crate::output::run_result::{Cancelled, RunResult, Shards};

use super::outcome::nothing_ran;
use super::plan::Plan;
use super::prepare::Prepared;
use super::profiling::Trigger;
use super::progress::Watcher;
use super::run_dataset::RunDataset;
use super::run_facts::{MetricSettings, RequestFacts, RunFacts, ServerView};
use super::share::Share;
use crate::output::dashboard::Dashboard;

/// What one measured run varies; everything else is the plan's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// Sessions run (the first ones of the plan): requests, or conversations.
    pub num_prompts: usize,
    /// Requests (sessions) per second; `f64::INFINITY` = all at once.
    pub request_rate: f64,
    /// Requests in flight at most.
    pub max_concurrency: Option<usize>,
}

impl Point {
    /// The one point of a plain run: every prepared session, the configured rate and cap.
    pub fn of(config: &Config, prepared: &Prepared) -> Point {
        Point {
            num_prompts: prepared.requests.len(),
            request_rate: config.rate.request_rate,
            max_concurrency: config.max_in_flight(),
        }
    }
}

/// What the measured run produced.
pub struct MeasuredPoint {
    pub report: RunReport,
    pub rps_events: Vec<RpsChangeEvent>,
    pub prefix_cache: Option<facts::PrefixCache>,
    /// Ctrl-C or SIGTERM stopped the run.
    pub interrupted: bool,
    /// The whole run, or a shard's part (`--shard`) and where its records sit in the whole.
    pub share: Share,
    /// This run's share of the server's `/metrics` (empty when off or unanswered).
    pub server_metrics: crate::server_metrics::ServerMetrics,
    /// `--gpu-telemetry`: the DCGM exporters' scrapes (empty without).
    pub gpu_metrics: crate::server_metrics::ServerMetrics,
    /// The wall-clock time of the run's epoch (its spans' zero).
    pub epoch_wall: SystemTime,
}

/// The measured run of `point`: schedule, preamble, profiling start, progress bar, and what
/// the dataset reads from the server before and after (a trace's prefix-cache counters).
pub fn measure(plan: &Plan, config: &Config, point: &Point) -> Result<MeasuredPoint> {
    measure_watched(plan, config, point, |_, _| {})
}

/// [`measure`], handing `on_run` the run's [`Progress`] handle and its arrival offsets
/// (seconds from the start; `None` when all are sent at once) as the run starts: the SLO
/// search watches a probe for over-saturation with it.
pub fn measure_watched(
    plan: &Plan,
    config: &Config,
    point: &Point,
    on_run: impl FnOnce(Progress, Option<&[f64]>),
) -> Result<MeasuredPoint> {
    let (workload, offsets) =
        schedule(config, &plan.prepared, &plan.dataset, point).map_err(nothing_ran)?;
    let (workload, mut share) = Share::select(workload, config.shard.shard);
    let baseline = plan.dataset.baseline(&plan.target);
    // Before the line a user (or a script) sees, so a Ctrl-C right after it is handled.
    plan.stop.arm();
    plan.console.line("Starting main benchmark run...");
    let profile_when = config.report.profile_when;
    if profile_when == ProfileWhen::WholeRun {
        plan.profiler("start");
    }
    let ramp = config.rate.ramp_up;
    plan.console
        .out(render_preamble(&preamble(config, point, ramp.as_ref())));
    if workload.probe.is_some() {
        let rate = crate::pyfmt::float_repr(config.rate.probe_request_rate);
        plan.console
            .line(format_args!("Probe request rate: {rate} req/s"));
    }
    share.announce(&workload, &plan.console);
    plan.dataset
        .before_measured_run(&plan.engine)
        .map_err(nothing_ran)?;
    let scraper = super::server_scrape::start(config, plan);
    crate::http::control::close_idle_connections();
    let start = share
        .start_instant(&config.shard, &plan.console)
        .map_err(|e| nothing_ran(e.into()))?;
    let wall_start = start.map_or_else(SystemTime::now, |s| s.1);
    let mut watcher = None;
    let mut dashboard = None;
    let mut board_point = None;
    let mut trigger = None;
    let mut report = plan.engine.run_at(workload, start.map(|s| s.0), |p| {
        on_run(p.clone(), offsets.as_deref());
        let labels = super::live_board::begin(config, p.live());
        board_point = Some(labels.point.clone());
        let server = scraper.as_ref().and_then(|s| s.latest());
        let gpus = scraper.as_ref().map(|s| s.latest_gpu()).unwrap_or_default();
        let (d, show_bar) = open_ui(
            config,
            &p,
            labels,
            (server, gpus),
            &plan.console,
            &plan.stop,
        );
        dashboard = d;
        watcher = Some(Watcher::start(
            p,
            show_bar,
            plan.console.clone(),
            plan.stop.clone(),
        ));
        if let ProfileWhen::AtBatch { running, duration } = profile_when {
            trigger = Some(Trigger::start(
                Arc::new(plan.profiled()),
                running,
                duration,
                plan.console.clone(),
            ));
        }
    })?;
    // The dashboard first: its viewport is cleared before anything else is printed.
    if let Some(d) = dashboard {
        d.finish();
    }
    if let Some(w) = watcher {
        w.finish();
    }
    if let Some(point) = board_point {
        super::live_board::end(&point);
    }
    if let Some(line) = crate::output::start::late_start_warning(report.start.as_ref()) {
        plan.console.warning(line);
    }
    // The clock started late when a core was not ready by `--start-at`.
    let wall_start = wall_start + report.start.as_ref().map_or(Duration::ZERO, |s| s.late);
    // With `--start-at` the set instant (shards share it); else the epoch read off both
    // clocks at one moment.
    let epoch_wall = match start {
        Some(_) => wall_start,
        None => SystemTime::now() - report.epoch.elapsed(),
    };
    let (server_metrics, gpu_metrics) = super::server_scrape::finish(scraper, report.epoch, plan);
    // Before a shard renumbers the records: the dataset reads them by the run's indices.
    plan.dataset.settle(&mut report);
    share.globalize(&mut report);
    plan.dataset.mark_outputs(&mut report.merged);
    if let Some(t) = trigger {
        t.finish();
    }
    let prefix_cache = plan.dataset.prefix_cache(&plan.target, baseline);
    let rps_events = rps_changes(&rate_spec(config, point), offsets.as_deref().unwrap_or(&[]))
        .into_iter()
        .map(|(rps, at)| RpsChangeEvent {
            rps,
            timestamp: LocalDateTime::at(wall_start + Duration::from_secs_f64(at)).isoformat(),
        })
        .collect();
    Ok(MeasuredPoint {
        report,
        rps_events,
        prefix_cache,
        interrupted: plan.stop.stop_requested(),
        share,
        server_metrics,
        gpu_metrics,
        epoch_wall,
    })
}

/// What shows the run (`--ui`): the dashboard when asked for or by default and the terminal
/// is fit for it, else the bar (drawn only when stderr is a terminal), or nothing. Returns
/// the dashboard, if open, and whether the bar is shown. Why an asked-for dashboard is not
/// shown is said once.
fn open_ui(
    config: &Config,
    progress: &Progress,
    labels: crate::output::live_metrics::RunLabels,
    (server, gpus): (
        Option<Arc<crate::server_metrics::LatestScrape>>,
        Vec<Arc<crate::server_metrics::LatestScrape>>,
    ),
    console: &crate::output::stdio::Console,
    stop: &crate::runtime::stop_handle::StopHandle,
) -> (Option<Dashboard>, bool) {
    static SAID: std::sync::Once = std::sync::Once::new();
    match config.output.ui {
        Ui::None => (None, false),
        Ui::Bar => (None, true),
        ui @ (Ui::Auto | Ui::Dashboard) => {
            match Dashboard::start(
                progress.clone(),
                labels,
                (server, gpus),
                console,
                stop.clone(),
            ) {
                Ok(d) => (Some(d), false),
                Err(why) => {
                    if ui == Ui::Dashboard {
                        SAID.call_once(|| {
                            console.note(format_args!(
                                "--ui dashboard: {why}; showing the progress bar instead"
                            ))
                        });
                    }
                    (None, true)
                }
            }
        }
    }
}

fn rate_spec(config: &Config, point: &Point) -> RateSpec {
    let r = &config.rate;
    RateSpec {
        request_rate: point.request_rate,
        burstiness: r.burstiness,
        ramp_up: r.ramp_up,
        seed: config.dataset.seed,
    }
}

/// The measured workload of `point`: the plan's first `point.num_prompts` sessions with
/// their arrival offsets (seconds; `None` when all are sent at once): the dataset's own
/// offsets when it has them (a self-timed trace), else the rate's; grouped into the
/// dataset's sessions.
pub fn schedule(
    config: &Config,
    prepared: &Prepared,
    dataset: &RunDataset,
    point: &Point,
) -> Result<(Workload, Option<Vec<f64>>)> {
    let n = point.num_prompts.min(prepared.requests.len());
    let offsets = match dataset.arrivals() {
        Some(own) => Some(own[..n.min(own.len())].to_vec()),
        None => arrival_offsets(&rate_spec(config, point), n)?,
    };
    let arrivals: Option<Arc<[Duration]>> = offsets.as_deref().map(|o| to_durations(o).into());
    let first = |all: &Arc<[_]>| {
        if n == all.len() {
            all.clone()
        } else {
            all[..n].into()
        }
    };
    let workload = Workload {
        requests: first(&prepared.requests),
        client_prompt_lens: prepared.prompt_lens[..n].into(),
        arrivals,
        max_concurrency: point.max_concurrency,
        mode: prepared.mode,
        sessions: None,
        expected_tokens: prepared.output_lens.iter().copied().max().unwrap_or(0),
        probe: prepared.probe.clone(),
        replica_of: None,
        cancel: None,
        time_bound: config.engine.time_bound,
    };
    let (mut workload, firsts) = dataset.sessions().shape(workload, n);
    // Each session's prompt key is its first request's.
    let prompt_keys: Option<Vec<u64>> = prepared.prompt_keys.as_ref().map(|k| match &firsts {
        Some(firsts) => firsts.iter().map(|&i| k[i]).collect(),
        None => k[..n].into(),
    });
    workload.replica_of = super::replicas::table(config, &workload, prompt_keys.as_deref());
    workload.cancel = config
        .rate
        .cancellation
        .map(|c| Cancellations::draw(c.percent, c.delay, config.dataset.seed, workload.total()));
    Ok((workload, offsets))
}

fn preamble<'a>(config: &Config, point: &Point, ramp: Option<&'a RampUp>) -> Preamble<'a> {
    Preamble {
        self_timed: config.rate.self_timed,
        ramp_up: ramp,
        request_rate: point.request_rate,
        burstiness: config.rate.burstiness,
        max_concurrency: point.max_concurrency.map(|c| c as u64),
    }
}

/// How a measured point is reported.
#[derive(Debug, Clone, Default)]
pub struct Reporting {
    /// Build the result document (`--save-result` / `--append-result`) but do not write it:
    /// the caller collects it (repeated runs write one file holding every run).
    pub collect: bool,
    /// Appended to the stem of `--result-filename` (sweep points, which would otherwise
    /// overwrite one file).
    pub file_suffix: Option<String>,
    /// Appended to the plots' stem only (repeated runs share one result file, not plots).
    pub plot_suffix: Option<String>,
    /// Appended to the stem of the default result file name (no `--result-filename`): an
    /// SLO search's repeated probe of one value, whose default name would be the same.
    pub default_name_suffix: Option<String>,
}

/// What reporting a point produced.
pub struct Finished {
    pub report: BenchmarkReport,
    /// The result document, when collected (`Reporting::collect`).
    pub document: Option<JsonObject<'static>>,
    /// Where it was written (or, collected, would have been).
    pub file: Option<std::path::PathBuf>,
    /// The steady-state figures, when they apply (for a sweep's summary).
    pub steady_state: Option<SteadyStateOutcome>,
}

/// `--plot-timeline` and `--plot-dataset-stats`: HTML files beside the result file, named
/// as Python names them (`.timeline.html`; `.dataset_stats.html` where Python writes a PNG).
fn write_plots(
    plots: RunPlots,
    outputs: &[crate::metrics::RequestOutput],
    strip: &[plot::timeline::StripLine],
    result: &Path,
    console: &crate::output::stdio::Console,
) {
    let title = result
        .file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    if let Some(thresholds) = plots.timeline {
        let html = plot::timeline::render(outputs, thresholds, &title, strip);
        plot::write(
            &plot::beside(result, "timeline.html"),
            &html,
            "Timeline plot",
            console,
        );
    }
    if plots.dataset_stats {
        let html = plot::dataset_stats::render(outputs, &title);
        let path = plot::beside(result, "dataset_stats.html");
        plot::write(&path, &html, "Dataset statistics plot", console);
    }
}

/// The terminal chart is drawn on a terminal, or anywhere with `--terminal-chart`.
fn show_chart(config: &Config, console: &crate::output::stdio::Console) -> bool {
    config.output.terminal_chart || console.stdout_is_terminal()
}

/// Metrics, the console block, the steady-state block, our extras, and the result file.
pub fn finish(
    config: &Config,
    plan: &Plan,
    point: &Point,
    measured: &MeasuredPoint,
    how: &Reporting,
) -> Result<Finished> {
    let policy = &config.report;
    let tokenizer = plan.tokenizer.as_ref();
    let count = |text: &str| tokenizer.map_or(0, |t| t.count_tokens(text));
    // A sweep point's or repetition's export takes its suffixes, as its result and plots do.
    let export = config.output.export_requests.as_ref().map(|e| {
        let suffix: String = [&how.file_suffix, &how.plot_suffix, &how.default_name_suffix]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect();
        e.with_suffix(&suffix)
    });
    let (result, exported) = run_result(
        config,
        plan,
        point,
        measured,
        &count,
        policy.save,
        export.as_ref(),
    )?;
    if !policy.quiet {
        plan.console
            .out(result.render(show_chart(config, &plan.console)));
    }
    if policy.profile_when == ProfileWhen::WholeRun {
        // After the block, before the result is saved (Python's order).
        plan.profiler("stop");
    }
    let files = config.output.result_files();
    let path = files.result(
        &result.info,
        how.file_suffix.as_deref(),
        how.default_name_suffix.as_deref(),
    );
    let (mut document, mut file) = (None, None);
    if policy.save {
        let doc = result.document()?;
        if how.collect {
            document = Some(doc.into_owned());
        } else {
            let text = doc.to_json_string();
            files.save(&path, &text, policy.append, "result", &plan.console)?;
        }
        file = Some(path.clone());
    }
    if result.task == TaskKind::Generation {
        let plots = match &how.plot_suffix {
            Some(s) => derived(&path, s, None),
            None => path.clone(),
        };
        // The server's own endpoint's gauges, then the GPUs', under the requests.
        let mut strip = measured
            .server_metrics
            .endpoints
            .first()
            .map(|e| plot::timeline::server_lines(&e.figures.series))
            .unwrap_or_default();
        if let Some(gpu) = &result.gpu {
            strip.extend(crate::output::gpu_telemetry::strip_lines(gpu));
        }
        write_plots(policy.plots, result.outputs, &strip, &plots, &plan.console);
    }
    if let Some(exported) = exported {
        let (path, n) = exported?;
        plan.console
            .err_line(format_args!("Exported {n} requests to {}", path.display()));
    }
    Ok(Finished {
        report: result.report,
        document,
        file,
        steady_state: result.steady_state,
    })
}

/// `--export-requests`: where the rows went and how many, or why they did not (reported
/// after the result is saved).
type Exported = Result<(PathBuf, usize)>;

/// The live run's facts, from the engine's report of the measured run, turned into its
/// result (`RunFacts::result`, as a merge does). `section`: a shard's result carries its
/// section for the merge.
fn run_result<'a>(
    config: &Config,
    plan: &'a Plan,
    point: &Point,
    measured: &'a MeasuredPoint,
    count: CountTokens<'a>,
    section: bool,
    export: Option<&RequestExport>,
) -> Result<(RunResult<'a>, Option<Exported>)> {
    let run = &measured.report;
    let records = &run.merged.records;
    let tokenizer = plan.tokenizer.as_ref();
    let outputs = &run.merged.outputs;
    // A shard reports its own share of the workers; its section keeps the whole.
    let max_concurrency = measured.share.max_concurrency(point.max_concurrency);
    let dataset = plan.dataset.request_facts(records);
    let lora = plan.prepared.lora.as_ref();
    let adapter = lora.map(|l| l.adapters_of(records));
    let adapter_names = lora.map(|l| l.names.clone()).unwrap_or_default();
    let dispatch_lag = Lag::of(&run.merged.histograms.dispatch_lag);
    let info = RunInfo {
        date: LocalDateTime::now().result_date(),
        backend: config.server.backend.name().to_string(),
        label: config.output.label.clone(),
        model_id: plan.model_id.clone(),
        tokenizer_id: tokenizer.map(|t| t.id().to_string()),
        num_prompts: point.num_prompts as u64,
        metadata: config.output.metadata.clone(),
        request_rate: point.request_rate,
        burstiness: config.rate.burstiness,
        max_concurrency: max_concurrency.map(|c| c as u64),
        ramp_up: config.rate.ramp_up,
    };
    let urls: Vec<String> = plan.target.replica_urls();
    let facts = RunFacts {
        info,
        task: TaskKind::for_backend(config.server.backend),
        duration_s: run.duration.as_secs_f64(),
        settings: MetricSettings {
            percentiles: config.output.metric_percentiles.clone(),
            percentile_metrics: config.output.percentile_metrics.clone(),
            goodput: config.output.goodput.clone(),
            save_detailed: config.report.detailed,
            steady_state: super::steady_state_gate::params(
                config,
                max_concurrency,
                point.request_rate,
            ),
        },
        count_tokens: tokenizer.is_some().then_some(count),
        outputs,
        requests: RequestFacts {
            spans: records.iter().map(|r| (r.start_ns, r.end_ns)).collect(),
            turns: dataset.turns,
            adapter,
            audio_s: dataset.audio_s,
            replica: records.iter().map(|r| r.replica).collect(),
            index: records.iter().map(|r| r.index).collect(),
            shard: measured.share.record_shards(records.len()),
        },
        adapter_names,
        replica_urls: urls,
        probes: crate::metrics::probe::latencies(&run.probes),
        rps_events: measured.rps_events.clone(),
        engine: Some(EngineFacts::of(
            run,
            &plan.engine_opts,
            plan.cpus_awake.is_some(),
        )),
        health: vec![PartHealth {
            name: String::new(),
            health: ClientHealth::of(&run.loads, records),
            dispatch_lag: dispatch_lag.clone(),
        }],
        dispatch_lag,
        failures: facts::failures_of(run),
        not_sent: run.not_sent,
        not_sent_session_ended: run.not_sent_session_ended,
        // Cut on purpose (`--request-cancellation-rate`) or at the end of `--duration`'s grace.
        cancelled: (config.rate.cancellation.is_some() || config.engine.time_bound.is_some())
            .then_some(Cancelled {
                requests: run.cancelled,
                not_sent_session: run.not_sent_session_cancelled,
                context_overflows: plan
                    .dataset
                    .agentic()
                    .map_or(0, super::agentic_replay::AgenticRun::context_overflows),
            }),
        interrupted: measured.interrupted,
        prefix_cache: measured.prefix_cache,
        start: crate::output::start::start_section(
            crate::output::start::block(run.start.as_ref()).as_ref(),
        ),
        // The server's side of the run, after ours (`--no-server-metrics`: nothing shown).
        server: ServerView {
            metrics: Some(&measured.server_metrics),
            from_shard: None,
        },
        shards: Shards::Whole,
        gpu: measured
            .gpu_metrics
            .endpoints
            .iter()
            .map(|e| (e.url.as_str(), &e.figures.series))
            .collect(),
        epoch_ns: measured
            .epoch_wall
            .duration_since(std::time::UNIX_EPOCH)
            .ok()
            .map(|d| d.as_nanos() as u64)
            .into_iter()
            .collect(),
        agentic: plan.dataset.agentic().map(|replay| AgenticFacts {
            records: replay.records(run.epoch),
            shapes: replay.shapes().to_vec(),
            settings: AgenticSettings {
                duration_s: config.engine.time_bound.map(|b| b.after.as_secs_f64()),
                streaming: true,
                ignore_eos: config.request.ignore_eos,
                cache_bust: true,
                system_idle_cap_s: Some(super::agentic_replay::SYSTEM_IDLE_CAP.as_secs_f64()),
                forbidden: Vec::new(),
                cancelled: measured.interrupted || replay.threshold_crossed().is_some(),
                threshold_crossed: replay.threshold_crossed(),
                server_prefix_cache_hit: measured
                    .server_metrics
                    .endpoints
                    .first()
                    .and_then(|e| e.figures.prefix_cache_hit_rate),
            },
        }),
    };
    // A shard saves its facts, for `merge`, where it sits among the shards beside them.
    let saved = section
        .then(|| {
            measured.share.place(
                config,
                run,
                point.max_concurrency.map(|c| c as u64),
                super::steady_state_gate::params(config, point.max_concurrency, point.request_rate),
            )
        })
        .flatten()
        .map(|place| super::saved_facts::save(&facts, place));
    // `--export-requests`: the rows are read from the facts before they become the
    // result; a failed write is reported after the result is saved.
    let export = export.map(|e| e.write(facts.request_rows()).map(|n| (e.path.clone(), n)));
    let mut result = facts.result();
    if let Some(section) = saved {
        result.shards = Shards::Part(Box::new(section));
    }
    Ok((result, export))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples() -> RunDataset {
        RunDataset::Samples {
            input_sequences: None,
            audio_s: None,
        }
    }

    #[test]
    fn a_point_takes_the_first_sessions_at_its_rate_and_cap() {
        let cfg = Config::of_args(&["--request-rate", "10", "--max-concurrency", "7"]);
        let p = Prepared::single_requests(5);
        let one = Point::of(&cfg, &p);
        assert_eq!(
            (one.num_prompts, one.request_rate, one.max_concurrency),
            (5, 10.0, Some(7))
        );
        let point = Point {
            num_prompts: 3,
            request_rate: 2.0,
            max_concurrency: Some(2),
        };
        let (w, offsets) = schedule(&cfg, &p, &samples(), &point).unwrap();
        assert_eq!(
            (w.requests.len(), w.total(), w.max_concurrency),
            (3, 3, Some(2))
        );
        assert_eq!(&*w.client_prompt_lens, &[0, 1, 2]);
        let offsets = offsets.expect("a finite rate has arrival times");
        assert_eq!(offsets.len(), 3);
        // Python rescales the gaps so the last of n requests arrives at n / rate.
        assert!((offsets[2] - 1.5).abs() < 1e-9, "{offsets:?}");
        let all_at_once = Point {
            request_rate: f64::INFINITY,
            ..point
        };
        let at_once = schedule(&cfg, &p, &samples(), &all_at_once).unwrap();
        assert!(at_once.1.is_none());
    }

    #[test]
    fn trace_chains_are_grouped_within_the_point() {
        let cfg = Config::of_args(&[]);
        // 0 <- 2 <- 3, 1 alone; a point of 3 requests drops request 3.
        let p = Prepared::single_requests(4);
        let trace = RunDataset::Trace {
            arrivals: Some(vec![0.0, 0.1, 0.2, 0.3].into()),
            parents: Some(vec![None, None, Some(0), Some(2)].into()),
            ideal: facts::PrefixCache {
                ideal_token_hit_ratio: 0.0,
                ideal_block_hit_ratio: 0.0,
                measured_hit_ratio: None,
            },
        };
        let point = Point {
            num_prompts: 3,
            request_rate: f64::INFINITY,
            max_concurrency: None,
        };
        let (w, offsets) = schedule(&cfg, &p, &trace, &point).unwrap();
        assert_eq!(
            offsets.unwrap(),
            vec![0.0, 0.1, 0.2],
            "the trace's own times"
        );
        assert_eq!(
            (w.requests.len(), w.total()),
            (2, 3),
            "two sessions, three requests"
        );
        let sessions = w.sessions.expect("chains");
        assert_eq!((sessions.turns(0), sessions.turns(1)), (2, 1));
    }

    #[test]
    fn conversations_in_flight_come_before_max_concurrency() {
        let cfg = Config::of_args(&[
            "--backend",
            "openai-chat",
            "--multi-turn",
            "--multi-turn-concurrency",
            "3",
            "--max-concurrency",
            "9",
        ]);
        assert_eq!(cfg.max_in_flight(), Some(3));
        assert_eq!(
            Config::of_args(&["--max-concurrency", "9"]).max_in_flight(),
            Some(9)
        );
    }
}
