//! What is reported and saved: percentile metrics and percentiles, goodput SLOs, the result
//! file, metadata, progress bar and timeline plot.

use std::path::PathBuf;

use super::parse::{comma_list, key_value};
use super::ConfigError;
use crate::cli::{pyvalue::py_float, Cli};

/// A metric that can get percentile statistics (`--percentile-metrics`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PercentileMetric {
    Ttft,
    Tpot,
    Itl,
    E2el,
    ClientQueueTime,
    E2elIncludingClientQueue,
}

impl PercentileMetric {
    /// Every metric, in the order Python reports them.
    pub const ALL: [PercentileMetric; 6] = [
        PercentileMetric::Ttft,
        PercentileMetric::Tpot,
        PercentileMetric::Itl,
        PercentileMetric::E2el,
        PercentileMetric::ClientQueueTime,
        PercentileMetric::E2elIncludingClientQueue,
    ];

    /// The name used on the command line and in result keys (`mean_ttft_ms`).
    pub fn name(self) -> &'static str {
        match self {
            PercentileMetric::Ttft => "ttft",
            PercentileMetric::Tpot => "tpot",
            PercentileMetric::Itl => "itl",
            PercentileMetric::E2el => "e2el",
            PercentileMetric::ClientQueueTime => "client_queue_time",
            PercentileMetric::E2elIncludingClientQueue => "e2el_including_client_queue",
        }
    }

    fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == s)
    }
}

/// A goodput SLO metric (`--goodput KEY:VALUE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GoodputMetric {
    Ttft,
    Tpot,
    E2el,
}

impl GoodputMetric {
    /// `ttft`, `tpot` or `e2el`.
    pub fn name(self) -> &'static str {
        match self {
            GoodputMetric::Ttft => "ttft",
            GoodputMetric::Tpot => "tpot",
            GoodputMetric::E2el => "e2el",
        }
    }

    fn from_name(s: &str) -> Option<Self> {
        [
            GoodputMetric::Ttft,
            GoodputMetric::Tpot,
            GoodputMetric::E2el,
        ]
        .into_iter()
        .find(|m| m.name() == s)
    }
}

/// Reporting and result files.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputConfig {
    pub save_result: bool,
    pub save_detailed: bool,
    pub append_result: bool,
    pub result_dir: Option<PathBuf>,
    pub result_filename: Option<String>,
    /// Metrics with percentile statistics, in the order given, without repeats.
    pub percentile_metrics: Vec<PercentileMetric>,
    /// Percentiles in [0, 100], in the order given, without repeats.
    pub metric_percentiles: Vec<f64>,
    /// SLOs in milliseconds, in the order given (a repeated key keeps its first place, last
    /// value).
    pub goodput: Vec<(GoodputMetric, f64)>,
    pub sweep_summary_percentiles: Vec<f64>,
    pub disable_tqdm: bool,
    /// `None`: Python writes `"label": null` and names files after the backend.
    pub label: Option<String>,
    /// `--metadata` pairs, in order.
    pub metadata: Vec<(String, String)>,
    pub plot_timeline: bool,
    /// Two ITL thresholds (ms) for the timeline colours.
    pub timeline_itl_thresholds: (f64, f64),
}

pub(super) fn resolve(cli: &Cli, warnings: &mut Vec<String>) -> Result<OutputConfig, ConfigError> {
    let o = &cli.output;
    let pooling = cli.server.backend.is_pooling();
    let percentile_metrics = percentile_metrics(o.percentile_metrics.as_deref(), pooling)?;
    if pooling {
        let ignored: Vec<&str> = percentile_metrics
            .iter()
            .filter(|m| **m != PercentileMetric::E2el)
            .map(|m| m.name())
            .collect();
        if !ignored.is_empty() {
            warnings.push(format!(
                "pooling backends report e2el only; ignoring --percentile-metrics {}",
                ignored.join(",")
            ));
        }
    }
    let goodput = goodput(&o.goodput)?;
    if pooling && !goodput.is_empty() {
        warnings.push("pooling backends compute no goodput; ignoring --goodput".to_owned());
    }
    Ok(OutputConfig {
        save_result: o.save_result,
        save_detailed: o.save_detailed,
        append_result: o.append_result,
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
        label: o.label.clone(),
        metadata: o
            .metadata
            .iter()
            .map(|m| key_value("--metadata", m))
            .collect::<Result<_, _>>()?,
        plot_timeline: o.plot_timeline,
        timeline_itl_thresholds: itl_thresholds(&o.timeline_itl_thresholds)?,
    })
}

/// Python: `--percentile-metrics` or "ttft,tpot,itl" (generation) / "e2el" (pooling); an
/// empty value means the default.
fn percentile_metrics(
    given: Option<&str>,
    pooling: bool,
) -> Result<Vec<PercentileMetric>, ConfigError> {
    let text = match given.filter(|s| !s.is_empty()) {
        Some(s) => s,
        None if pooling => "e2el",
        None => "ttft,tpot,itl",
    };
    let all: Vec<&str> = PercentileMetric::ALL.iter().map(|m| m.name()).collect();
    let metrics = comma_list("--percentile-metrics", text, |s| {
        PercentileMetric::from_name(s)
            .ok_or_else(|| format!("unknown metric (choose from {})", all.join(", ")))
    })?;
    Ok(dedup(metrics))
}

/// A comma-separated list of percentiles in [0, 100].
fn percentiles(flag: &str, text: &str) -> Result<Vec<f64>, ConfigError> {
    let list = comma_list(flag, text, |s| match py_float(s) {
        Some(p) if (0.0..=100.0).contains(&p) => Ok(p),
        Some(_) => Err("percentiles must be between 0 and 100".to_owned()),
        None => Err("expected a number".to_owned()),
    })?;
    Ok(dedup(list))
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

/// Python's `parse_goodput` + `check_goodput_args`: `KEY:VALUE` with one colon, keys ttft,
/// tpot, e2el, values non-negative milliseconds.
fn goodput(pairs: &[String]) -> Result<Vec<(GoodputMetric, f64)>, ConfigError> {
    let mut out: Vec<(GoodputMetric, f64)> = Vec::new();
    for pair in pairs {
        let parts: Vec<&str> = pair.split(':').collect();
        let [name, value] = parts[..] else {
            return Err(ConfigError::value(
                "--goodput",
                pair,
                "expected KEY:VALUE, e.g. ttft:100 (KEY ttft, tpot or e2el; VALUE in ms)",
            ));
        };
        let metric = GoodputMetric::from_name(name).ok_or_else(|| {
            ConfigError::value(
                "--goodput",
                pair,
                format!("unknown metric '{name}' (choose from ttft, tpot, e2el)"),
            )
        })?;
        let ms = match py_float(value).filter(|v| !v.is_nan()) {
            Some(v) if v >= 0.0 => v,
            Some(_) => {
                return Err(ConfigError::value(
                    "--goodput",
                    pair,
                    "must be non-negative",
                ))
            }
            None => {
                return Err(ConfigError::value(
                    "--goodput",
                    pair,
                    "the value must be a number of milliseconds",
                ))
            }
        };
        match out.iter_mut().find(|(m, _)| *m == metric) {
            Some(slot) => slot.1 = ms,
            None => out.push((metric, ms)),
        }
    }
    Ok(out)
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
        use PercentileMetric::*;
        assert_eq!(percentile_metrics(None, false).unwrap(), [Ttft, Tpot, Itl]);
        assert_eq!(percentile_metrics(None, true).unwrap(), [E2el]);
        assert_eq!(
            percentile_metrics(Some(""), false).unwrap(),
            [Ttft, Tpot, Itl]
        );
        assert_eq!(
            percentile_metrics(Some("e2el, ttft,e2el,client_queue_time"), false).unwrap(),
            [E2el, Ttft, ClientQueueTime]
        );
        assert!(percentile_metrics(Some("ttft,foo"), false)
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
            [
                (GoodputMetric::Ttft, 0.0),
                (GoodputMetric::Tpot, 8.0),
                (GoodputMetric::E2el, 400.0)
            ]
        );
        for (bad, why) in [
            ("ttft=3", "expected KEY:VALUE"),
            ("a:b:c", "expected KEY:VALUE"),
            (
                "itl:5",
                "unknown metric 'itl' (choose from ttft, tpot, e2el)",
            ),
            ("ttft:-1", "must be non-negative"),
            ("ttft:fast", "the value must be a number of milliseconds"),
            ("ttft:nan", "the value must be a number of milliseconds"),
        ] {
            let e = goodput(&[bad.to_owned()]).unwrap_err().to_string();
            assert!(e.starts_with(&format!("--goodput {bad}: {why}")), "{e}");
        }
    }

    #[test]
    fn itl_thresholds_need_two_numbers() {
        assert_eq!(itl_thresholds("25,50").unwrap(), (25.0, 50.0));
        assert!(itl_thresholds("25").is_err());
        assert!(itl_thresholds("1,2,3").is_err());
    }
}
