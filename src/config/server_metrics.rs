//! The server-metrics scrape: on unless `--no-server-metrics`, its interval, and the extra
//! endpoints of `--server-metrics-url` (checked here, before anything runs).

use std::time::Duration;

use super::ConfigError;
use crate::cli::Cli;
use crate::http::url::BaseUrl;
use crate::safe_text::redact_url;

/// Shortest and longest `--server-metrics-interval` (seconds): below 10 ms the scrape costs
/// more than it tells; above an hour no run has a sample in between.
const MIN_INTERVAL: f64 = 0.01;
const MAX_INTERVAL: f64 = 3600.0;

/// The longest one scrape may take; also the longest the start waits for the first scrapes
/// (once, before the run's clock starts) and the end for the last ones. Shorter when the
/// request timeout is ([`super::Config::scrape_timeout`]).
pub const SCRAPE_TIMEOUT: Duration = Duration::from_secs(2);

/// How the server's metrics are scraped.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerMetricsConfig {
    /// Scrape the server's own `/metrics` (and `urls`).
    pub enabled: bool,
    pub interval: Duration,
    /// More endpoints (their path, or `/metrics` when the URL has none).
    pub urls: Vec<BaseUrl>,
    /// `--gpu-telemetry`: DCGM exporters, scraped with the rest, reported apart.
    pub gpu_urls: Vec<BaseUrl>,
}

pub(super) fn resolve(cli: &Cli) -> Result<ServerMetricsConfig, ConfigError> {
    let a = &cli.server_metrics;
    let secs = a.server_metrics_interval;
    if !(MIN_INTERVAL..=MAX_INTERVAL).contains(&secs) {
        return Err(ConfigError::number(
            "--server-metrics-interval",
            secs,
            format!("must be between {MIN_INTERVAL} and {MAX_INTERVAL} seconds"),
        ));
    }
    if a.no_server_metrics && !a.server_metrics_url.is_empty() {
        return Err(ConfigError::flag(
            "--server-metrics-url",
            "has no effect with --no-server-metrics; drop one of them",
        ));
    }
    if a.no_server_metrics && !a.gpu_telemetry.is_empty() {
        return Err(ConfigError::flag(
            "--gpu-telemetry",
            "is scraped with the server's metrics, which --no-server-metrics turns off; drop \
             one of them",
        ));
    }
    let parse = |flag: &str, list: &[String]| {
        list.iter()
            .map(|u| {
                BaseUrl::parse(u).map_err(|why| {
                    ConfigError::value(
                        flag,
                        redact_url(u),
                        format!("{why}; e.g. http://host:9400/metrics"),
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()
    };
    let urls = parse("--server-metrics-url", &a.server_metrics_url)?;
    let gpu_urls = parse("--gpu-telemetry", &a.gpu_telemetry)?;
    Ok(ServerMetricsConfig {
        enabled: !a.no_server_metrics,
        interval: Duration::from_secs_f64(secs),
        urls,
        gpu_urls,
    })
}
