//! Rate control: arrival rate and burstiness, the concurrency cap, ramp-up and self-timing,
//! with the rules of Python's `main_async` and `get_request`.

use std::time::Duration;

use super::ConfigError;
use crate::cli::{Cli, DatasetName, RampUp, RampUpStrategy};
use crate::datasets::limits::{self, SecondsError};
use crate::engine::schedule::MAX_RAMP_RPS;
use crate::pyfmt::float_repr;

/// How requests are released.
#[derive(Debug, Clone, PartialEq)]
pub struct RateConfig {
    /// Requests per second; `f64::INFINITY` sends everything at once.
    pub request_rate: f64,
    /// Gamma shape of the inter-arrival times (1.0 = Poisson).
    pub burstiness: f64,
    /// At most this many requests in flight.
    pub max_concurrency: Option<usize>,
    pub ramp_up: Option<RampUp>,
    /// Requests carry their own arrival times (timed_trace).
    pub self_timed: bool,
    /// Probe requests per second beside the workload (0 = none).
    pub probe_request_rate: f64,
    /// `--request-cancellation-rate` (and its delay); `None` when the rate was not given.
    pub cancellation: Option<CancelConfig>,
}

/// Requests the client cancels on purpose, as a server whose clients disconnect sees them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CancelConfig {
    /// Share of the requests cancelled, in percent (0..=100).
    pub percent: f64,
    /// From the moment a cancelled request was fully sent to the close of its connection.
    pub delay: Duration,
}

impl RateConfig {
    /// True when the rate is `inf`: every request is released at time 0.
    pub fn is_unbounded(&self) -> bool {
        self.request_rate.is_infinite()
    }

    /// True for a closed loop: `--max-concurrency` workers, each sending its next request
    /// when the last one ends (an infinite rate, no ramp-up, no trace timestamps).
    pub fn is_closed_loop(&self) -> bool {
        self.is_closed_loop_at(self.max_concurrency, self.request_rate)
    }

    /// [`Self::is_closed_loop`] at a run's own cap and rate (a sweep point varies them).
    pub fn is_closed_loop_at(&self, max_concurrency: Option<usize>, request_rate: f64) -> bool {
        max_concurrency.is_some()
            && request_rate.is_infinite()
            && self.ramp_up.is_none()
            && !self.self_timed
    }
}

pub(super) fn resolve(cli: &Cli) -> Result<RateConfig, ConfigError> {
    let r = &cli.rate;
    if r.request_rate.is_nan() || r.request_rate <= 0.0 {
        return Err(ConfigError::number(
            "--request-rate",
            r.request_rate,
            "must be greater than 0 (inf sends every request at once)",
        ));
    }
    schedulable("--request-rate", r.request_rate, cli.dataset.num_prompts)?;
    // Its reciprocal is the gamma scale: a subnormal burstiness would make it infinite.
    let b = r.burstiness;
    if !(b.is_finite() && b > 0.0 && (1.0 / b).is_finite()) {
        return Err(ConfigError::number(
            "--burstiness",
            b,
            "must be a positive, finite number (1 is Poisson, below 1 burstier, above 1 \
             steadier)",
        ));
    }
    if r.max_concurrency == Some(0) {
        return Err(ConfigError::value(
            "--max-concurrency",
            0,
            "must be greater than 0",
        ));
    }
    if !(r.probe_request_rate.is_finite() && r.probe_request_rate >= 0.0) {
        return Err(ConfigError::number(
            "--probe-request-rate",
            r.probe_request_rate,
            "must be a non-negative number",
        ));
    }
    if r.probe_request_rate > 0.0 {
        // The probe waits 1 / rate after each answer.
        limits::duration_from_secs(1.0 / r.probe_request_rate).map_err(|_| {
            ConfigError::value(
                "--probe-request-rate",
                float_repr(r.probe_request_rate),
                format!(
                    "a probe every {:.3e} s is more than {} s (365 days) apart; use 0 (no \
                     probe) or a rate of at least {:.2e}",
                    1.0 / r.probe_request_rate,
                    limits::MAX_SECONDS,
                    limits::min_rate(1) * 1.01
                ),
            )
        })?;
    }
    Ok(RateConfig {
        request_rate: r.request_rate,
        burstiness: r.burstiness,
        max_concurrency: r.max_concurrency,
        ramp_up: ramp_up(cli)?,
        self_timed: self_timed(cli)?,
        probe_request_rate: r.probe_request_rate,
        cancellation: cancellation(r.request_cancellation_rate, r.request_cancellation_delay)?,
    })
}

/// `--request-cancellation-rate PCT` (0..=100) and `--request-cancellation-delay SECONDS`
/// (a time the engine can wait for; default 0); the delay alone would do nothing.
fn cancellation(
    rate: Option<f64>,
    delay: Option<f64>,
) -> Result<Option<CancelConfig>, ConfigError> {
    let Some(percent) = rate else {
        return match delay {
            Some(_) => Err(ConfigError::flag(
                "--request-cancellation-delay",
                "has no effect without --request-cancellation-rate; give both",
            )),
            None => Ok(None),
        };
    };
    if !(0.0..=100.0).contains(&percent) {
        return Err(ConfigError::value(
            "--request-cancellation-rate",
            float_repr(percent),
            "must be a percentage between 0 and 100",
        ));
    }
    let secs = delay.unwrap_or(0.0);
    let delay = limits::duration_from_secs(secs)
        .map_err(|why| ConfigError::value("--request-cancellation-delay", float_repr(secs), why))?;
    Ok(Some(CancelConfig { percent, delay }))
}

/// A finite `rate` must give a schedule the engine can keep: `count` requests (the run's
/// `--num-prompts`) at `rate` per second end `count / rate` seconds after the start, which
/// must be a time vllm-bench accepts ([`limits::MAX_SECONDS`]). An infinite rate has no
/// schedule. Shared by `--request-rate` and each `--sweep-request-rate` point.
pub(super) fn schedulable(flag: &str, rate: f64, count: usize) -> Result<(), ConfigError> {
    match limits::schedule_span(count as u64, rate) {
        Ok(_) => Ok(()),
        Err(SecondsError::TooLong) => Err(ConfigError::value(
            flag,
            float_repr(rate),
            format!(
                "{count} request(s) at this rate take {:.3e} s, more than the {} s (365 days) \
                 a schedule may span; use a rate of at least {:.2e}",
                count.max(1) as f64 / rate,
                limits::MAX_SECONDS,
                limits::min_rate(count as u64) * 1.01
            ),
        )),
        Err(_) => Err(ConfigError::value(
            flag,
            float_repr(rate),
            "must be greater than 0 (inf sends every request at once)",
        )),
    }
}

fn ramp_up(cli: &Cli) -> Result<Option<RampUp>, ConfigError> {
    let r = &cli.rate;
    let Some(strategy) = r.ramp_up_strategy else {
        for (flag, v) in [
            ("--ramp-up-start-rps", r.ramp_up_start_rps),
            ("--ramp-up-end-rps", r.ramp_up_end_rps),
        ] {
            if v.is_some() {
                return Err(ConfigError::flag(flag, "needs --ramp-up-strategy"));
            }
        }
        return Ok(None);
    };
    if r.request_rate.is_finite() {
        return Err(ConfigError::number(
            "--request-rate",
            r.request_rate,
            "conflicts with --ramp-up-strategy, which controls the rate; remove --request-rate",
        ));
    }
    let (Some(start), Some(end)) = (r.ramp_up_start_rps, r.ramp_up_end_rps) else {
        return Err(ConfigError::flag(
            "--ramp-up-strategy",
            "needs both --ramp-up-start-rps and --ramp-up-end-rps",
        ));
    };
    for (flag, v) in [("--ramp-up-start-rps", start), ("--ramp-up-end-rps", end)] {
        if v < 0 {
            return Err(ConfigError::value(flag, v, "must be non-negative"));
        }
    }
    if end.unsigned_abs() > MAX_RAMP_RPS {
        return Err(ConfigError::value(
            "--ramp-up-end-rps",
            end,
            format!(
                "must be at most {MAX_RAMP_RPS} requests per second (the result lists every \
                 integer rate the ramp passes)"
            ),
        ));
    }
    if start > end {
        return Err(ConfigError::value(
            "--ramp-up-start-rps",
            start,
            format!("must not exceed --ramp-up-end-rps ({end})"),
        ));
    }
    if strategy == RampUpStrategy::Exponential && start == 0 {
        return Err(ConfigError::value(
            "--ramp-up-start-rps",
            0,
            "must be at least 1 for the exponential ramp-up",
        ));
    }
    Ok(Some(RampUp {
        strategy,
        start_rps: start.unsigned_abs(),
        end_rps: end.unsigned_abs(),
    }))
}

/// Python: `--self-timed`/`--no-self-timed` exist only for timed_trace, where self-timing is
/// the default.
fn self_timed(cli: &Cli) -> Result<bool, ConfigError> {
    let t = &cli.dataset.timed_trace;
    if cli.dataset.dataset_name == DatasetName::TimedTrace {
        return Ok(!t.no_self_timed);
    }
    for flag in ["--self-timed", "--no-self-timed"] {
        if cli.was_given(flag) {
            return Err(ConfigError::flag(
                flag,
                "only valid with --dataset-name timed_trace",
            ));
        }
    }
    Ok(false)
}
