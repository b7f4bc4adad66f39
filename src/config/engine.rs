//! The engine's own settings (vllm-bench only): how many pinned cores, which I/O driver, the
//! connect and request timeouts, and whether to open connections before the clock starts.

use std::time::Duration;

use super::ConfigError;
use crate::cli::Cli;
use crate::datasets::limits;
use crate::http::source::MAX_LOCAL_ADDRS;
use crate::runtime::{self, DriverChoice};

/// Engine settings.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineConfig {
    /// Runtimes to start, one pinned per core.
    pub num_cores: usize,
    pub io_driver: DriverChoice,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    /// Open the connections before the measured run (off with `--no-preconnect`).
    pub preconnect: bool,
    /// Loopback source addresses to bind connections to (`--local-addrs`; 1 = no binding).
    pub local_addrs: usize,
    /// How long requests in flight may still run after Ctrl-C (`--interrupt-grace-sec`).
    pub interrupt_grace: Duration,
    /// `--num-cores` or `VLLM_BENCH_CORES` was given (else every available core).
    pub num_cores_asked: bool,
    /// SSE events one response may send before it fails (`--max-response-events`).
    pub max_response_events: u32,
    /// `--duration`/`--duration-grace`: the measured run's time bound.
    pub time_bound: Option<crate::engine::TimeBound>,
    /// `--keep-cpus-awake`: idle CPUs poll instead of sleeping while the engine runs.
    pub keep_cpus_awake: bool,
}

pub(super) fn resolve(cli: &Cli) -> Result<EngineConfig, ConfigError> {
    let e = &cli.engine;
    let available = runtime::available_cores().len();
    let num_cores = match e.num_cores {
        None => available,
        Some(0) => {
            return Err(ConfigError::value(
                "--num-cores/VLLM_BENCH_CORES",
                0,
                "must be at least 1",
            ))
        }
        Some(n) if n > available => {
            return Err(ConfigError::value(
                "--num-cores/VLLM_BENCH_CORES",
                n,
                format!("only {available} cores are available to this process"),
            ))
        }
        Some(n) => n,
    };
    Ok(EngineConfig {
        num_cores,
        num_cores_asked: e.num_cores.is_some(),
        io_driver: e.io_driver,
        connect_timeout: timeout("--connect-timeout-sec", e.connect_timeout_sec)?,
        request_timeout: timeout("--request-timeout-sec", e.request_timeout_sec)?,
        preconnect: !e.no_preconnect,
        local_addrs: local_addrs(e.local_addrs)?,
        interrupt_grace: grace(e.interrupt_grace_sec)?,
        max_response_events: max_response_events(e.max_response_events)?,
        time_bound: time_bound(e.duration, e.duration_grace)?,
        keep_cpus_awake: e.keep_cpus_awake,
    })
}

/// `--duration S` (a positive number of seconds) and its `--duration-grace`.
fn time_bound(
    duration: Option<f64>,
    grace: f64,
) -> Result<Option<crate::engine::TimeBound>, ConfigError> {
    let grace = seconds("--duration-grace", grace, true)?;
    let Some(d) = duration else {
        return Ok(None);
    };
    Ok(Some(crate::engine::TimeBound {
        after: seconds("--duration", d, false)?,
        grace,
    }))
}

/// A number of seconds a `Duration` holds (at most a year), positive or (`zero_ok`) zero.
fn seconds(flag: &str, s: f64, zero_ok: bool) -> Result<Duration, ConfigError> {
    let ok = s.is_finite() && s <= 31_536_000.0 && (s > 0.0 || (zero_ok && s == 0.0));
    if !ok {
        let want = if zero_ok { "0 or more" } else { "more than 0" };
        return Err(ConfigError::number(
            flag,
            s,
            format!("must be {want} seconds, at most 31536000 (a year)"),
        ));
    }
    Ok(Duration::from_secs_f64(s))
}

fn local_addrs(n: usize) -> Result<usize, ConfigError> {
    if !(1..=MAX_LOCAL_ADDRS).contains(&n) {
        return Err(ConfigError::value(
            "--local-addrs",
            n,
            format!("must be between 1 and {MAX_LOCAL_ADDRS}"),
        ));
    }
    Ok(n)
}

/// The most `--max-response-events` may allow: 10,000,000, ten times the default. A
/// response's inter-token gaps (4 bytes an event) and its kept text (16 bytes an event) grow
/// up to this bound in every worker that receives one, so 4,294,967,295 let one endless
/// stream take 86 GB; at this bound one response holds at most 40 MB of gaps and 160 MB of
/// text, and a 10-million-token answer still fits.
pub const MAX_RESPONSE_EVENTS: u32 = 10_000_000;

/// `--max-response-events`: at least one event (a response with none cannot succeed), at
/// most [`MAX_RESPONSE_EVENTS`].
fn max_response_events(n: u32) -> Result<u32, ConfigError> {
    if !(1..=MAX_RESPONSE_EVENTS).contains(&n) {
        return Err(ConfigError::value(
            "--max-response-events",
            n,
            "must be between 1 and 10000000 (each event of a response costs up to 20 bytes \
             while it streams)",
        ));
    }
    Ok(n)
}

/// `--interrupt-grace-sec`: zero (cancel at once) or a positive, finite number of seconds.
fn grace(secs: f64) -> Result<Duration, ConfigError> {
    const FLAG: &str = "--interrupt-grace-sec";
    if secs == 0.0 {
        return Ok(Duration::ZERO);
    }
    timeout(FLAG, secs).map_err(|_| {
        ConfigError::number(
            FLAG,
            secs,
            "must be 0 or a positive number of seconds, at most 31536000 (365 days)",
        )
    })
}

/// A positive time of at most [`limits::MAX_SECONDS`] (365 days): a longer one is a typo,
/// and the engine adds it to the clock (`Instant + Duration` panics on overflow).
fn timeout(flag: &str, secs: f64) -> Result<Duration, ConfigError> {
    match limits::duration_from_secs(secs) {
        Ok(d) if secs > 0.0 => Ok(d),
        _ => Err(ConfigError::number(
            flag,
            secs,
            "must be a positive number of seconds, at most 31536000 (365 days)",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duration_is_positive_and_its_grace_may_be_zero() {
        let b = time_bound(Some(1.5), 0.0).unwrap().unwrap();
        assert_eq!(b.after, Duration::from_millis(1500));
        assert_eq!(b.grace, Duration::ZERO);
        assert_eq!(time_bound(None, 30.0).unwrap(), None);
        let e = time_bound(Some(0.0), 30.0).unwrap_err().to_string();
        assert!(
            e.starts_with("--duration 0: must be more than 0 seconds"),
            "{e}"
        );
        let e = time_bound(Some(5.0), -1.0).unwrap_err().to_string();
        assert!(
            e.starts_with("--duration-grace -1: must be 0 or more"),
            "{e}"
        );
        assert!(time_bound(Some(f64::NAN), 1.0).is_err());
        let cli = crate::cli::parse_from(["vllm-bench"]).expect("no flags parse");
        assert_eq!(
            (cli.engine.duration, cli.engine.duration_grace),
            (None, 30.0)
        );
    }

    #[test]
    fn local_addrs_must_be_in_range() {
        assert_eq!(local_addrs(1).unwrap(), 1);
        assert_eq!(local_addrs(250).unwrap(), 250);
        assert_eq!(
            local_addrs(0).unwrap_err().to_string(),
            "--local-addrs 0: must be between 1 and 250"
        );
        assert!(local_addrs(251).is_err());
    }

    #[test]
    fn max_response_events_defaults_to_the_engine_default() {
        let cli = crate::cli::parse_from(["vllm-bench"]).expect("no flags parse");
        assert_eq!(
            cli.engine.max_response_events,
            crate::engine::exchange::DEFAULT_MAX_RESPONSE_EVENTS
        );
    }

    #[test]
    fn max_response_events_must_be_positive() {
        assert_eq!(max_response_events(1).unwrap(), 1);
        assert_eq!(
            max_response_events(0).unwrap_err().to_string(),
            "--max-response-events 0: must be between 1 and 10000000 (each event of a \
             response costs up to 20 bytes while it streams)"
        );
        assert!(max_response_events(MAX_RESPONSE_EVENTS).is_ok());
        assert!(max_response_events(u32::MAX).is_err());
    }

    #[test]
    fn interrupt_grace_may_be_zero_but_not_negative() {
        assert_eq!(grace(0.0).unwrap(), Duration::ZERO);
        assert_eq!(grace(2.5).unwrap(), Duration::from_millis(2500));
        assert_eq!(
            grace(-1.0).unwrap_err().to_string(),
            "--interrupt-grace-sec -1: must be 0 or a positive number of seconds, at most \
             31536000 (365 days)"
        );
        assert!(grace(f64::NAN).is_err());
    }

    #[test]
    fn timeouts_must_be_positive_and_finite() {
        assert_eq!(timeout("--t", 1.5).unwrap(), Duration::from_millis(1500));
        assert!(timeout("--t", 0.0).is_err());
        assert!(timeout("--t", -1.0).is_err());
        assert!(timeout("--t", f64::NAN).is_err());
        assert_eq!(
            timeout("--t", f64::INFINITY).unwrap_err().to_string(),
            "--t inf: must be a positive number of seconds, at most 31536000 (365 days)"
        );
        assert!(timeout("--t", 31_536_000.0).is_ok());
    }

    #[test]
    fn request_timeout_1e308_is_refused_in_a_short_line() {
        let e = timeout("--request-timeout-sec", 1e308)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "--request-timeout-sec 1e+308: must be a positive number of seconds, at most \
             31536000 (365 days)"
        );
    }
}
