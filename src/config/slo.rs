//! The SLO capacity search's settings: the `--slo` terms (`METRIC:STAT=MS`), the
//! `--slo-goodput` share, and `--slo-search` with its range, tolerance and budgets, each
//! checked against the flags it cannot work with.
//!
//! A term names a figure every run already computes (`ttft:p99` is the result key
//! `p99_ttft_ms`), so a probe is judged on the numbers its own report shows: the metrics and
//! percentiles the terms need are added to `--percentile-metrics` and `--metric-percentiles`
//! ([`SloConfig::add_reported`]). Malformed terms are all reported, one line each.

use std::time::Duration;

use super::ConfigError;
use crate::cli::{pyvalue, Cli};
use crate::metrics::metric_stats::{percentile_word, MetricKind};
use crate::metrics::report::TaskKind;
use crate::pyfmt::float_repr;

pub use crate::metrics::metric_stats::SLO_METRICS;

/// Which statistic of a metric a term bounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SloStat {
    Mean,
    Median,
    /// `pNN[.N]`, in [0, 100].
    Percentile(f64),
}

impl SloStat {
    /// The word in terms and result keys: `mean`, `median`, `p99`, `p99.9`.
    pub fn word(self) -> String {
        match self {
            SloStat::Mean => "mean".to_owned(),
            SloStat::Median => "median".to_owned(),
            SloStat::Percentile(p) => format!("p{}", percentile_word(p)),
        }
    }
}

/// One `--slo` term: `stat` of `metric` at most `bound_ms` milliseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct SloTerm {
    pub metric: MetricKind,
    pub stat: SloStat,
    pub bound_ms: f64,
}

impl SloTerm {
    /// `ttft:p99`, as the term names it.
    pub fn name(&self) -> String {
        format!("{}:{}", self.metric.name(), self.stat.word())
    }

    /// The result key of the figure it bounds (`p99_ttft_ms`), as every run reports it.
    pub fn key(&self) -> String {
        format!("{}_{}_ms", self.stat.word(), self.metric.name())
    }

    /// `ttft:p99=500`.
    pub fn text(&self) -> String {
        format!("{}={}", self.name(), number(self.bound_ms))
    }
}

/// A number as a term shows it: `500`, `12.5`.
pub fn number(v: f64) -> String {
    if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        float_repr(v)
    }
}

/// What the search varies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchVariable {
    /// An integer: the answer is exact.
    MaxConcurrency,
    /// Continuous: the answer is within the tolerance.
    RequestRate,
}

impl SearchVariable {
    /// The result key (`max_concurrency`, `request_rate`), as sweeps name their axis.
    pub fn key(self) -> &'static str {
        match self {
            SearchVariable::MaxConcurrency => "max_concurrency",
            SearchVariable::RequestRate => "request_rate",
        }
    }
}

/// `--slo-search` and its terms.
#[derive(Debug, Clone, PartialEq)]
pub struct SloConfig {
    pub variable: SearchVariable,
    pub terms: Vec<SloTerm>,
    /// `--slo-goodput`: the least share of requests meeting every `--goodput` threshold.
    pub goodput_share: Option<f64>,
    /// `--slo-search-range LO,HI`; for a concurrency search, `1,--num-prompts` by default.
    pub range: Option<(f64, f64)>,
    /// Relative tolerance of a rate search.
    pub tolerance: f64,
    pub max_time: Option<Duration>,
    pub max_requests: Option<u64>,
    /// `--reset-prefix-cache`: before each probe, as a sweep does before each point.
    pub reset_prefix_cache: bool,
}

impl SloConfig {
    /// Adds what the terms are judged on to what every probe computes and reports.
    pub(super) fn add_reported(&self, metrics: &mut Vec<MetricKind>, percentiles: &mut Vec<f64>) {
        for t in &self.terms {
            if !metrics.contains(&t.metric) {
                metrics.push(t.metric);
            }
            if let SloStat::Percentile(p) = t.stat {
                if !percentiles.contains(&p) {
                    percentiles.push(p);
                }
            }
        }
    }
}

/// The `--slo-search-tolerance` accepted: probed rates are rounded to four significant
/// digits, so below 0.1 % two rates would not differ, and a run's own noise is larger than
/// that anyway; above 50 % the answer says little more than the bracket.
pub const TOLERANCE: (f64, f64) = (0.001, 0.5);

/// A tolerance as a percentage, as precise as the accepted range needs (`5`, `0.1`, `12.5`).
pub fn tolerance_percent(tolerance: f64) -> String {
    number((tolerance * 1000.0).round() / 10.0)
}

/// The flags of the search other than `--slo-search` itself.
const SEARCH_FLAGS: [&str; 6] = [
    "--slo",
    "--slo-goodput",
    "--slo-search-range",
    "--slo-search-tolerance",
    "--slo-search-max-time",
    "--slo-search-max-requests",
];

/// Parses every term of every `--slo` value; all malformed terms are reported, one line
/// each (joined by newlines in one error).
pub fn parse_terms<S: AsRef<str>>(values: &[S]) -> Result<Vec<SloTerm>, ConfigError> {
    let (mut terms, mut bad) = (Vec::new(), Vec::new());
    for value in values {
        for raw in value.as_ref().split(',') {
            match term(raw.trim()) {
                Ok(t) => terms.push(t),
                Err(why) => bad.push(ConfigError::value("--slo", raw.trim(), why).to_string()),
            }
        }
    }
    if !bad.is_empty() {
        return Err(ConfigError::invalid(bad.join("\n")));
    }
    Ok(terms)
}

fn term(text: &str) -> Result<SloTerm, String> {
    const FORM: &str = "expected METRIC:STAT=MS, e.g. ttft:p99=500";
    if text.is_empty() {
        return Err(format!("empty term; {FORM}"));
    }
    let (name, bound) = text.split_once('=').ok_or_else(|| FORM.to_owned())?;
    let (metric, stat) = name.split_once(':').ok_or_else(|| FORM.to_owned())?;
    let metric = SLO_METRICS
        .iter()
        .copied()
        .find(|m| m.name() == metric.trim())
        .ok_or_else(|| {
            let names: Vec<&str> = SLO_METRICS.iter().map(|m| m.name()).collect();
            format!(
                "unknown metric '{}' (choose from {})",
                metric.trim(),
                names.join(", ")
            )
        })?;
    let stat = match stat.trim() {
        "mean" => SloStat::Mean,
        "median" => SloStat::Median,
        s => match s.strip_prefix('p') {
            Some(p) => SloStat::Percentile(
                super::output::percentile(p).map_err(|why| format!("'{s}': {why}"))?,
            ),
            None => {
                return Err(format!(
                    "unknown statistic '{s}' (choose from mean, median, pNN such as p99 or p99.9)"
                ))
            }
        },
    };
    let bound_ms = pyvalue::py_float(bound)
        .filter(|b| b.is_finite() && *b > 0.0)
        .ok_or_else(|| {
            format!(
                "bound '{}': expected a positive number of milliseconds",
                bound.trim()
            )
        })?;
    Ok(SloTerm {
        metric,
        stat,
        bound_ms,
    })
}

/// What the rest of the configuration says that the search must check.
pub(super) struct Context<'a> {
    pub cli: &'a Cli,
    pub task: TaskKind,
    pub num_prompts: usize,
    pub goodput_given: bool,
    pub self_timed: bool,
    /// A concurrency cap for a rate search (`--max-concurrency`, `--multi-turn-concurrency`).
    pub capped: bool,
}

pub(super) fn resolve(cx: &Context<'_>) -> Result<Option<SloConfig>, ConfigError> {
    let (cli, s) = (cx.cli, &cx.cli.slo);
    let Some(variable) = &s.slo_search else {
        if let Some(f) = SEARCH_FLAGS.iter().find(|f| cli.was_given(f)) {
            return Err(ConfigError::flag(
                f,
                "needs --slo-search max-concurrency or --slo-search request-rate",
            ));
        }
        return Ok(None);
    };
    let variable = match variable.trim() {
        "max-concurrency" | "max_concurrency" => SearchVariable::MaxConcurrency,
        "request-rate" | "request_rate" => SearchVariable::RequestRate,
        other => {
            return Err(ConfigError::value(
                "--slo-search",
                other,
                "expected max-concurrency or request-rate",
            ))
        }
    };
    let terms = parse_terms(&s.slo)?;
    if terms.is_empty() && s.slo_goodput.is_none() {
        return Err(ConfigError::flag(
            "--slo-search",
            "needs --slo terms (e.g. --slo ttft:p99=500,tpot:p99=50) or --slo-goodput",
        ));
    }
    conflicts(cli, variable)?;
    let pooling = cx.task == TaskKind::Pooling;
    let tokenless = cli.model.skip_tokenizer_init;
    for t in &terms {
        let token_metric = !matches!(t.metric, MetricKind::E2el | MetricKind::ClientQueueTime);
        if token_metric && (pooling || tokenless) {
            let why = if pooling {
                "pooling backends report e2el only"
            } else {
                "--skip-tokenizer-init runs report e2el only"
            };
            return Err(ConfigError::value("--slo", t.text(), why));
        }
        if t.metric == MetricKind::ClientQueueTime && variable == SearchVariable::MaxConcurrency {
            // Waiting for a free worker shrinks as the cap grows: the term would be met
            // best at the highest concurrency, the opposite of what the search assumes.
            return Err(ConfigError::value(
                "--slo",
                t.text(),
                "client_queue_time falls as max-concurrency rises, so a concurrency search \
                 cannot bound it; search request-rate with --max-concurrency",
            ));
        }
        let uncapped = variable == SearchVariable::RequestRate && !cx.capped;
        if t.metric == MetricKind::ClientQueueTime && uncapped {
            return Err(ConfigError::value(
                "--slo",
                t.text(),
                "client_queue_time is measured under a concurrency cap: add --max-concurrency",
            ));
        }
    }
    if let Some(share) = s.slo_goodput {
        if !(share > 0.0 && share <= 1.0) {
            return Err(ConfigError::value(
                "--slo-goodput",
                float_repr(share),
                "must be a share in (0, 1], e.g. 0.95",
            ));
        }
        if !cx.goodput_given {
            return Err(ConfigError::flag(
                "--slo-goodput",
                "needs --goodput thresholds, e.g. --goodput ttft:500 tpot:50",
            ));
        }
        if pooling {
            return Err(ConfigError::flag(
                "--slo-goodput",
                "pooling backends compute no goodput",
            ));
        }
    }
    if variable == SearchVariable::RequestRate && cx.self_timed {
        return Err(ConfigError::flag(
            "--slo-search",
            "request-rate cannot vary the rate of a trace that carries its own timestamps; \
             add --no-self-timed, or search max-concurrency",
        ));
    }
    let tolerance = s.slo_search_tolerance;
    if !(TOLERANCE.0..=TOLERANCE.1).contains(&tolerance) {
        return Err(ConfigError::value(
            "--slo-search-tolerance",
            float_repr(tolerance),
            format!(
                "must be a fraction from {} to {}, e.g. 0.05 (5 %)",
                TOLERANCE.0, TOLERANCE.1
            ),
        ));
    }
    let max_time = match s.slo_search_max_time {
        None => None,
        Some(t) => Some(
            crate::datasets::limits::duration_from_secs(t)
                .ok()
                .filter(|_| t > 0.0)
                .ok_or_else(|| {
                    ConfigError::value(
                        "--slo-search-max-time",
                        float_repr(t),
                        "must be a positive number of seconds",
                    )
                })?,
        ),
    };
    if s.slo_search_max_requests == Some(0) {
        return Err(ConfigError::value(
            "--slo-search-max-requests",
            0,
            "must be at least 1",
        ));
    }
    let range = match &s.slo_search_range {
        Some(text) => Some(range(text, variable, cx.num_prompts)?),
        None => None,
    };
    Ok(Some(SloConfig {
        variable,
        terms,
        goodput_share: s.slo_goodput,
        range,
        tolerance,
        max_time,
        max_requests: s.slo_search_max_requests,
        reset_prefix_cache: cli.sweep.reset_prefix_cache,
    }))
}

/// The flags that set what the search varies, or split the run.
fn conflicts(cli: &Cli, variable: SearchVariable) -> Result<(), ConfigError> {
    if cli.shard.shard.is_some() {
        return Err(ConfigError::flag(
            "--slo-search",
            "cannot run with --shard yet; search with one process, or by hand with shards \
             (docs/distributed.md)",
        ));
    }
    let set_per_probe: &[&str] = match variable {
        SearchVariable::MaxConcurrency => &["--max-concurrency", "--multi-turn-concurrency"],
        SearchVariable::RequestRate => &["--request-rate"],
    };
    let others = ["--sweep-max-concurrency", "--sweep-request-rate"];
    if let Some(f) = set_per_probe.iter().find(|f| cli.was_given(f)) {
        return Err(ConfigError::flag(
            f,
            "conflicts with --slo-search, which sets it per probe",
        ));
    }
    if let Some(f) = others.iter().find(|f| cli.was_given(f)) {
        return Err(ConfigError::flag(
            f,
            "cannot be combined with --slo-search; search or sweep, one at a time",
        ));
    }
    Ok(())
}

/// `LO,HI`: integers from 1 to `--num-prompts` for concurrency (a cap above the prompts of
/// a probe changes nothing), finite positive rates for a rate search.
fn range(
    text: &str,
    variable: SearchVariable,
    num_prompts: usize,
) -> Result<(f64, f64), ConfigError> {
    const FLAG: &str = "--slo-search-range";
    let values = super::parse::comma_list(FLAG, text, |s| match variable {
        SearchVariable::MaxConcurrency => match pyvalue::py_int(s) {
            Some(n) if n >= 1 => Ok(n as f64),
            _ => Err("expected an integer of at least 1".to_owned()),
        },
        SearchVariable::RequestRate => match pyvalue::py_float(s) {
            Some(r) if r.is_finite() && r > 0.0 => Ok(r),
            _ => Err("expected a finite rate greater than 0".to_owned()),
        },
    })?;
    let [lo, hi] = values[..] else {
        return Err(ConfigError::value(FLAG, text, "expected LO,HI"));
    };
    if lo >= hi {
        return Err(ConfigError::value(FLAG, text, "LO must be below HI"));
    }
    if variable == SearchVariable::MaxConcurrency && hi > num_prompts as f64 {
        return Err(ConfigError::value(
            FLAG,
            text,
            format!(
                "HI is above --num-prompts {num_prompts}: a probe of {num_prompts} requests \
                 never has more in flight; raise --num-prompts"
            ),
        ));
    }
    if variable == SearchVariable::RequestRate {
        super::rate::schedulable(FLAG, lo, num_prompts)?;
    }
    Ok((lo, hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_parse_comma_separated_and_repeated() {
        let t =
            parse_terms(&["ttft:p99=500,tpot:p99=50", "e2el:mean=2000", "itl:p99.9=20"]).unwrap();
        let keys: Vec<String> = t.iter().map(SloTerm::key).collect();
        assert_eq!(
            keys,
            ["p99_ttft_ms", "p99_tpot_ms", "mean_e2el_ms", "p99.9_itl_ms"]
        );
        assert_eq!(t[0].text(), "ttft:p99=500");
        let q = parse_terms(&["client_queue_time:median=5"]).unwrap();
        assert_eq!(q[0].key(), "median_client_queue_time_ms");
    }

    #[test]
    fn every_malformed_term_gets_its_own_line() {
        let e = parse_terms(&[
            "ttft:p99=500,foo:p99=1,ttft:p101=5",
            "tpot:max=3,ttft:p99=-1,x",
        ])
        .unwrap_err()
        .to_string();
        let lines: Vec<&str> = e.lines().collect();
        assert_eq!(lines.len(), 5, "{e}");
        assert!(
            lines[0].starts_with("--slo foo:p99=1: unknown metric 'foo'"),
            "{e}"
        );
        assert!(lines[1].contains("between 0 and 100"), "{e}");
        assert!(lines[2].contains("unknown statistic 'max'"), "{e}");
        assert!(lines[3].contains("positive number of milliseconds"), "{e}");
        assert!(lines[4].contains("expected METRIC:STAT=MS"), "{e}");
    }

    #[test]
    fn the_metric_table_is_the_one_list_of_names() {
        for m in SLO_METRICS {
            let t = parse_terms(&[format!("{}:p50=1", m.name())]).unwrap();
            assert_eq!(t[0].metric, *m);
        }
        assert!(parse_terms(&["e2el_including_client_queue:p99=1"]).is_err());
    }
}
