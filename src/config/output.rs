//! What is reported and saved: percentile metrics and percentiles, goodput SLOs, the result
//! file, metadata, progress bar and timeline plot; and the [`ReportPolicy`] the run's steps
//! follow (save, append, detailed, plots, profiling, quiet), decided here once.
//!
//! The metric names ([`MetricKind`]) and the `--goodput` parser ([`GoodputConfig::parse`])
//! belong to `metrics`; this module applies the CLI's stricter rules on top (an unknown
//! percentile metric is an error, not skipped) and words errors as `--flag VALUE: reason`.

use std::path::PathBuf;

use super::parse::{comma_list, key_value};
use super::{ConfigError, ProfileWhen, SearchVariable, SweepAxis, SweepConfig};
use crate::cli::{pyvalue::py_float, Cli};
use crate::metrics::goodput::{GoodputConfig, GoodputError};
use crate::metrics::metric_stats::MetricKind;
use crate::metrics::report::TaskKind;

/// How every measured run is reported, decided once from the flags: the steps (a point's
/// report, a sweep's or repeated runs' summary, the plan) read this instead of combining
/// flags themselves.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportPolicy {
    /// A result document is written (`--save-result` or `--append-result`).
    pub save: bool,
    /// It is appended to the file (`--append-result`).
    pub append: bool,
    /// With the per-request lists and every generated text (`--save-detailed`).
    pub detailed: bool,
    /// A run's own plots, beside its result file.
    pub plots: RunPlots,
    /// When the server's profiler runs.
    pub profile_when: ProfileWhen,
    /// No console block per run: `--num-runs` prints one line per run instead.
    pub quiet: bool,
}

/// A run's plots (`--plot-timeline`, `--plot-dataset-stats`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunPlots {
    /// `--plot-timeline`, with its two ITL thresholds in ms (`--timeline-itl-thresholds`).
    pub timeline: Option<(f64, f64)>,
    pub dataset_stats: bool,
}

/// What shows a run as it goes (`--ui`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ui {
    /// No `--ui`: the dashboard when stdout is a terminal fit for it, else the bar (which
    /// is drawn only when stderr is a terminal).
    Auto,
    /// `--ui dashboard`: as `Auto`, and a note when the terminal is not fit for it.
    Dashboard,
    /// `--ui bar`: the progress bar.
    Bar,
    /// `--ui none`, or `--disable-tqdm` without `--ui`: nothing.
    None,
}

/// Reporting and result files.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputConfig {
    pub result_dir: Option<PathBuf>,
    pub result_filename: Option<String>,
    /// Metrics with percentile statistics, in the order given, without repeats.
    pub percentile_metrics: Vec<MetricKind>,
    /// Percentiles in [0, 100], in the order given, without repeats.
    pub metric_percentiles: Vec<f64>,
    /// SLOs in milliseconds (a repeated key keeps its last value); empty without `--goodput`.
    pub goodput: GoodputConfig,
    pub sweep_summary_percentiles: Vec<f64>,
    pub disable_tqdm: bool,
    /// `--terminal-chart`: draw the chart even when stdout is not a terminal.
    pub terminal_chart: bool,
    /// `--ui`: what shows the run as it goes (the terminal's checks come at the run).
    pub ui: Ui,
    /// `--metrics-listen`: where the client's own `/metrics` is served.
    pub metrics_listen: Option<String>,
    /// `None`: Python writes `"label": null` and names files after the backend.
    pub label: Option<String>,
    /// `--metadata` pairs, in order.
    pub metadata: Vec<(String, String)>,
    /// `--plot`: an HTML plot of a sweep's or repeated runs' summary.
    pub plot: bool,
    /// `--plot-summary FILE`: plot a saved summary and run nothing.
    pub plot_summary: Option<PathBuf>,
    /// `--export-requests FILE`: one row per request, the format from the extension.
    pub export_requests: Option<crate::output::request_export::RequestExport>,
}

impl OutputConfig {
    /// Where this invocation's results go, and the one writer of them.
    pub fn result_files(&self) -> crate::output::result_files::ResultFiles {
        crate::output::result_files::ResultFiles {
            dir: self.result_dir.clone(),
            filename: self.result_filename.clone(),
        }
    }
}

pub(super) fn resolve(cli: &Cli, warnings: &mut Vec<String>) -> Result<OutputConfig, ConfigError> {
    let o = &cli.output;
    let task = TaskKind::for_backend(cli.server.backend);
    let pooling = task == TaskKind::Pooling;
    let percentile_metrics = percentile_metrics(o.percentile_metrics.as_deref(), task)?;
    if pooling {
        let ignored: Vec<&str> = percentile_metrics
            .iter()
            .filter(|m| **m != MetricKind::E2el)
            .map(|m| m.name())
            .collect();
        if !ignored.is_empty() {
            warnings.push(format!(
                "pooling backends report e2el only; ignoring --percentile-metrics {}",
                ignored.join(",")
            ));
        }
    }
    if o.plot_summary.is_some() {
        // As with --compare: nothing else applies, so no other flag may look as if it did.
        if let Some(flag) = cli
            .given()
            .iter()
            .find(|f| *f != "--plot-summary" && !cli.is_from_env(f))
        {
            return Err(ConfigError::flag(
                "--plot-summary",
                format!(
                    "plots a saved summary and runs no benchmark; {flag} has no effect with it"
                ),
            ));
        }
    }
    let sweeping = cli.sweep.sweep_max_concurrency.is_some()
        || cli.sweep.sweep_request_rate.is_some()
        || cli.slo.slo_search.is_some();
    if o.plot && !sweeping && cli.multi_run.num_runs < 2 {
        warnings.push(
            "--plot draws the summary of a sweep or of --num-runs, and this is one run; \
             --plot-timeline and --plot-dataset-stats draw one run"
                .to_owned(),
        );
    }
    if o.save_detailed && !o.save_result && !o.append_result {
        warnings.push(
            "--save-detailed adds the per-request lists to the result file, and no file is \
             written without --save-result (or --append-result); add one of them"
                .to_owned(),
        );
    }
    let goodput = goodput(&o.goodput)?;
    if pooling && !goodput.is_empty() {
        warnings.push("pooling backends compute no goodput; ignoring --goodput".to_owned());
    }
    Ok(OutputConfig {
        result_dir: o.result_dir.as_ref().map(PathBuf::from),
        result_filename: o.result_filename.clone(),
        percentile_metrics,
        metric_percentiles: percentiles("--metric-percentiles", &o.metric_percentiles)?,
        goodput,
        sweep_summary_percentiles: match &o.sweep_summary_percentiles {
            Some(list) => percentiles("--sweep-summary-percentiles", list)?,
            None => Vec::new(),
        },
        disable_tqdm: o.disable_tqdm,
        terminal_chart: o.terminal_chart,
        ui: match o.ui.as_deref() {
            Some("dashboard") => Ui::Dashboard,
            Some("bar") => Ui::Bar,
            Some(_) => Ui::None,
            None if o.disable_tqdm => Ui::None,
            None => Ui::Auto,
        },
        metrics_listen: o.metrics_listen.clone(),
        label: o.label.clone(),
        metadata: o
            .metadata
            .iter()
            .map(|m| key_value("--metadata", m))
            .collect::<Result<_, _>>()?,
        plot: o.plot,
        plot_summary: o.plot_summary.as_ref().map(PathBuf::from),
        export_requests: export_requests(o.export_requests.as_deref())?,
    })
}

/// `--export-requests FILE`: its format from the extension, or refused now.
pub(super) fn export_requests(
    file: Option<&std::path::Path>,
) -> Result<Option<crate::output::request_export::RequestExport>, ConfigError> {
    use crate::output::request_export::{RequestExport, UNKNOWN_FORMAT};
    file.map(|f| {
        RequestExport::of(f).ok_or_else(|| {
            ConfigError::value("--export-requests", f.to_string_lossy(), UNKNOWN_FORMAT)
        })
    })
    .transpose()
}

/// The run's plots; the ITL thresholds are checked even without `--plot-timeline`.
pub(super) fn run_plots(cli: &Cli) -> Result<RunPlots, ConfigError> {
    let thresholds = itl_thresholds(&cli.output.timeline_itl_thresholds)?;
    Ok(RunPlots {
        timeline: cli.output.plot_timeline.then_some(thresholds),
        dataset_stats: cli.dataset.plot_dataset_stats,
    })
}

/// The [`ReportPolicy`] of the flags, with the plots and profiling already resolved.
pub(super) fn report_policy(cli: &Cli, plots: RunPlots, profile_when: ProfileWhen) -> ReportPolicy {
    let o = &cli.output;
    ReportPolicy {
        save: o.save_result || o.append_result,
        append: o.append_result,
        detailed: o.save_detailed,
        plots,
        profile_when,
        // Repeated runs print one line each, an SLO search one per probe.
        quiet: cli.multi_run.num_runs > 1 || cli.slo.slo_search.is_some(),
    }
}

/// The longest file name the file system takes (Linux `NAME_MAX`, in bytes).
const NAME_MAX: usize = 255;

/// `--result-filename`, checked before the run so that a name the file system refuses does
/// not lose the result at the end: not empty, and its file name (the part after the last
/// `/`; a path in front is allowed, as in Python's `os.path.join`) must stay within
/// [`NAME_MAX`] bytes with the longest suffix vllm-bench derives from it in this
/// configuration (see [`derived_growth`]).
pub(super) fn check_result_filename(
    output: &OutputConfig,
    plots: RunPlots,
    sweep: Option<&SweepConfig>,
    num_runs: usize,
    search: Option<SearchVariable>,
) -> Result<(), ConfigError> {
    const FLAG: &str = "--result-filename";
    let Some(name) = output.result_filename.as_deref() else {
        return check_label(output.label.as_deref(), plots, sweep, num_runs, search);
    };
    if name.is_empty() {
        return Err(ConfigError::value(
            FLAG,
            "",
            "cannot be empty; give a file name such as result.json",
        ));
    }
    let file = name.rsplit('/').next().unwrap_or(name);
    let plot = if plots.dataset_stats {
        ".dataset_stats.html"
    } else if plots.timeline.is_some() {
        ".timeline.html"
    } else {
        ""
    };
    let longest = file.len() + derived_growth(file, plot, sweep, num_runs, search);
    if longest > NAME_MAX {
        return Err(ConfigError::flag(
            FLAG,
            format!(
                "the file name is {} bytes and the longest name derived from it here is \
                 {longest}; file names hold at most {NAME_MAX} bytes: shorten it",
                file.len()
            ),
        ));
    }
    Ok(())
}

/// Room kept in a default result name for what follows the label: the rate (or ramp-up),
/// the concurrency, the model's name and the date, `-{rate}qps-concurrency{n}-{model}-{date}.json`.
const DEFAULT_NAME_REST: usize = 128;

/// `--label`, when the result and plot names are made from it (no `--result-filename`):
/// checked before the run, as the name is, so that a label no file name can hold (a `/`,
/// which would also lead out of `--result-dir`, or too long) does not lose the result
/// after it.
fn check_label(
    label: Option<&str>,
    plots: RunPlots,
    sweep: Option<&SweepConfig>,
    num_runs: usize,
    search: Option<SearchVariable>,
) -> Result<(), ConfigError> {
    const FLAG: &str = "--label";
    let Some(label) = label else {
        return Ok(());
    };
    if label.contains('/') || label.contains('\0') {
        return Err(ConfigError::value(
            FLAG,
            label,
            "the result file is named after the label, which cannot hold '/' (or NUL); \
             use --result-dir for a directory",
        ));
    }
    let plot = if plots.dataset_stats {
        ".dataset_stats.html"
    } else {
        ".timeline.html"
    };
    let growth = derived_growth("x.json", plot, sweep, num_runs, search);
    let most = NAME_MAX.saturating_sub(DEFAULT_NAME_REST + growth);
    if label.len() > most {
        return Err(ConfigError::flag(
            FLAG,
            format!(
                "the label is {} bytes; the result file is named after it (with the rate, \
                 model and date after it, in at most {NAME_MAX} bytes): keep it within \
                 {most} bytes, or give --result-filename",
                label.len()
            ),
        ));
    }
    Ok(())
}

/// The most bytes vllm-bench adds to a result file name (`modes::runs`, `modes::point`): a
/// sweep point's `-max_concurrency{N}` or `-request_rate{rate}`, a summary's
/// `-sweep-summary`/`-runs-summary`, a repeated run's plot `-run{i}`, an SLO search's probe
/// (`modes::slo_search`: `-max_concurrency{N}` or `-request_rate{rate}`, then `-run{k}` for a
/// value's later runs) and its `-slo-search-summary`, and a plot's suffix (`plot`, e.g.
/// `.timeline.html`) in place of the extension. An upper bound: not all of them meet in one
/// name.
fn derived_growth(
    file: &str,
    plot: &str,
    sweep: Option<&SweepConfig>,
    num_runs: usize,
    search: Option<SearchVariable>,
) -> usize {
    let point = match sweep.map(|s| &s.axis) {
        None => 0,
        Some(SweepAxis::MaxConcurrency(cs)) => cs
            .iter()
            .map(|c| "-max_concurrency".len() + c.to_string().len())
            .max()
            .unwrap_or(0),
        // As `modes::runs` writes a rate: `inf`, else Python's float repr.
        Some(SweepAxis::RequestRate(rates)) => rates
            .iter()
            .map(|&r| "-request_rate".len() + crate::pyfmt::float_repr(r).len())
            .max()
            .unwrap_or(0),
    };
    let summary = if sweep.is_some() || num_runs > 1 {
        "-sweep-summary".len()
    } else {
        0
    };
    let run = if num_runs > 1 {
        "-run".len() + num_runs.to_string().len()
    } else {
        0
    };
    // A probed value: a concurrency has at most 20 digits, a rate's float repr at most 24
    // bytes; a value runs at most as often as the search's 200 probes.
    let search = match search {
        None => 0,
        Some(v) => {
            let value = match v {
                SearchVariable::MaxConcurrency => "-max_concurrency".len() + 20,
                SearchVariable::RequestRate => "-request_rate".len() + 24,
            };
            value.max("-slo-search-summary".len()) + "-run200".len()
        }
    };
    let ext = file.rsplit_once('.').map_or(0, |(_, e)| e.len() + 1);
    let plot = plot.len().saturating_sub(ext);
    (point.max(summary) + run).max(search) + plot
}

/// Python: `--percentile-metrics` or the task's default ("ttft,tpot,itl" for generation,
/// "e2el" for pooling); an empty value means the default.
fn percentile_metrics(given: Option<&str>, task: TaskKind) -> Result<Vec<MetricKind>, ConfigError> {
    let text = given
        .filter(|s| !s.is_empty())
        .unwrap_or(task.default_percentile_metrics());
    let all: Vec<&str> = MetricKind::ALL.iter().map(|m| m.name()).collect();
    let metrics = comma_list("--percentile-metrics", text, |s| {
        MetricKind::from_name(s)
            .ok_or_else(|| format!("unknown metric (choose from {})", all.join(", ")))
    })?;
    Ok(dedup(metrics))
}

/// A comma-separated list of percentiles in [0, 100].
fn percentiles(flag: &str, text: &str) -> Result<Vec<f64>, ConfigError> {
    let list = comma_list(flag, text, percentile)?;
    Ok(dedup(list))
}

/// One percentile in [0, 100] (`99`, `99.9`): the one rule for `--metric-percentiles`,
/// `--sweep-summary-percentiles` and the `pNN` of an `--slo` term.
pub(super) fn percentile(s: &str) -> Result<f64, String> {
    match py_float(s) {
        Some(p) if (0.0..=100.0).contains(&p) => Ok(p),
        Some(_) => Err("percentiles must be between 0 and 100".to_owned()),
        None => Err("expected a number".to_owned()),
    }
}

fn dedup<T: PartialEq>(items: Vec<T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::with_capacity(items.len());
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

/// `--goodput KEY:VALUE...`, parsed by the metrics module (Python's `parse_goodput` +
/// `check_goodput_args`: keys ttft, tpot, e2el, and our ttfo; values non-negative milliseconds), with the
/// error worded for the command line.
fn goodput(pairs: &[String]) -> Result<GoodputConfig, ConfigError> {
    GoodputConfig::parse(pairs).map_err(|e| {
        let why = match &e {
            GoodputError::Format {
                key_value: false, ..
            } => "expected KEY:VALUE, e.g. ttft:100 (KEY ttft, ttfo, tpot or e2el; VALUE in ms)"
                .to_owned(),
            GoodputError::Format {
                key_value: true, ..
            } => "the value must be a number of milliseconds".to_owned(),
            GoodputError::Name { name, .. } => {
                format!("unknown metric '{name}' (choose from ttft, ttfo, tpot, e2el)")
            }
            GoodputError::Negative { .. } => "must be non-negative".to_owned(),
        };
        ConfigError::value("--goodput", e.pair(), why)
    })
}

fn itl_thresholds(text: &str) -> Result<(f64, f64), ConfigError> {
    const FLAG: &str = "--timeline-itl-thresholds";
    let values = comma_list(FLAG, text, |s| {
        py_float(s)
            .filter(|v| v.is_finite())
            .ok_or_else(|| "expected a number".to_owned())
    })?;
    match values[..] {
        [low, high] => Ok((low, high)),
        _ => Err(ConfigError::value(
            FLAG,
            text,
            "expected two comma-separated numbers",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_metric_defaults_depend_on_the_task() {
        use MetricKind::*;
        use TaskKind::{Generation, Pooling};
        assert_eq!(
            percentile_metrics(None, Generation).unwrap(),
            [Ttft, Tpot, Itl]
        );
        assert_eq!(percentile_metrics(None, Pooling).unwrap(), [E2el]);
        assert_eq!(
            percentile_metrics(Some(""), Generation).unwrap(),
            [Ttft, Tpot, Itl]
        );
        assert_eq!(
            percentile_metrics(Some("e2el, ttft,e2el,client_queue_time"), Generation).unwrap(),
            [E2el, Ttft, ClientQueueTime]
        );
        assert!(percentile_metrics(Some("ttft,foo"), Generation)
            .unwrap_err()
            .to_string()
            .starts_with("--percentile-metrics ttft,foo: 'foo': unknown metric (choose from"));
    }

    #[test]
    fn percentiles_are_checked() {
        assert_eq!(
            percentiles("--metric-percentiles", "50,90,99,99.9").unwrap(),
            [50.0, 90.0, 99.0, 99.9]
        );
        assert_eq!(
            percentiles("--metric-percentiles", "101")
                .unwrap_err()
                .to_string(),
            "--metric-percentiles 101: '101': percentiles must be between 0 and 100"
        );
        assert_eq!(
            percentiles("--metric-percentiles", "p99")
                .unwrap_err()
                .to_string(),
            "--metric-percentiles p99: 'p99': expected a number"
        );
    }

    #[test]
    fn goodput_follows_python() {
        let g = goodput(&[
            "ttft:30".into(),
            "tpot:8".into(),
            "e2el:400".into(),
            "ttft:0".into(),
        ])
        .unwrap();
        assert_eq!(
            g,
            GoodputConfig {
                ttft_ms: Some(0.0),
                tpot_ms: Some(8.0),
                e2el_ms: Some(400.0),
                ttfo_ms: None
            }
        );
        for (bad, why) in [
            ("ttft=3", "expected KEY:VALUE"),
            ("a:b:c", "expected KEY:VALUE"),
            (
                "itl:5",
                "unknown metric 'itl' (choose from ttft, ttfo, tpot, e2el)",
            ),
            ("ttft:-1", "must be non-negative"),
            ("ttft:fast", "the value must be a number of milliseconds"),
            ("ttft:nan", "the value must be a number of milliseconds"),
        ] {
            let e = goodput(&[bad.to_owned()]).unwrap_err().to_string();
            assert!(e.starts_with(&format!("--goodput {bad}: {why}")), "{e}");
        }
    }

    /// The default result name starts with the label: one it cannot hold is refused before
    /// the run, not after it (the result was lost), and no label leads out of --result-dir.
    #[test]
    fn a_label_no_file_name_can_hold_is_refused_before_the_run() {
        let plots = RunPlots {
            timeline: None,
            dataset_stats: false,
        };
        let check = |label: &str| check_label(Some(label), plots, None, 1, None);
        check("my-run").unwrap();
        for bad in ["a/b", "../../../x", "nul\0byte"] {
            let e = check(bad).unwrap_err().to_string();
            assert!(e.contains("cannot hold '/' (or NUL)"), "{e}");
        }
        let e = check(&"x".repeat(300)).unwrap_err().to_string();
        assert!(e.starts_with("--label: the label is 300 bytes;"), "{e}");
        assert_eq!(e.lines().count(), 1, "{e}");
        check(&"x".repeat(100)).unwrap();
    }

    #[test]
    fn itl_thresholds_need_two_numbers() {
        assert_eq!(itl_thresholds("25,50").unwrap(), (25.0, 50.0));
        assert!(itl_thresholds("25").is_err());
        assert!(itl_thresholds("1,2,3").is_err());
    }
}
