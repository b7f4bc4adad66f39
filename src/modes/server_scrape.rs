//! The run's hook into the server-metrics scrape (`crate::server_metrics`): which endpoints
//! (the server's own `/metrics` unless `--no-server-metrics` — every replica's with
//! `--base-url` repeated, each an endpoint named by its URL — then every
//! `--server-metrics-url`), started before the measured run and finished after it, with
//! each endpoint that gave nothing said in one note.

use std::sync::Arc;
use std::time::Instant;

use crate::config::Config;
use crate::server_metrics::{HttpSource, Options, ScrapeError, Scraper, ServerMetrics};

use super::plan::Plan;

pub use super::target::{scrape_timeout, SCRAPE_TIMEOUT};

/// Starts scraping (`None` with `--no-server-metrics`); notes go to the console.
pub fn start(config: &Config, plan: &Plan) -> Option<Scraper> {
    let c = &config.server_metrics;
    if !c.enabled {
        return None;
    }
    let t = &plan.target;
    let timeout = scrape_timeout(config);
    let mut sources = t.metrics_sources();
    if let Some(probe) = &plan.metrics_probe {
        if probe.went_unanswered(timeout) {
            plan.console.note(format_args!(
                "server metrics: {}: {}; this run has no server figures from it \
                 (--no-server-metrics turns scraping off)",
                probe.url,
                ScrapeError::NoAnswer(timeout)
            ));
            sources.retain(|s| s.url() != probe.url);
        }
    }
    for url in &c.urls {
        let connect = config.engine.connect_timeout;
        match HttpSource::at(url, t.driver, config.server.insecure, connect) {
            Ok(s) => sources.push(Arc::new(s)),
            Err(e) => plan.console.note(format_args!(
                "server metrics: {url}: {e}; this run has no server figures from it"
            )),
        }
    }
    let opts = Options {
        interval: c.interval,
        timeout,
        avoid_cores: if plan.engine_opts.pin {
            plan.engine_opts.cores.clone()
        } else {
            Vec::new()
        },
        latest: Some(Arc::default()),
    };
    let (scraper, notes) = Scraper::start(sources, &opts);
    for n in notes {
        plan.console.note(n);
    }
    Some(scraper)
}

/// Ends the scrape at the end of the run that started at `epoch`.
pub fn finish(scraper: Option<Scraper>, epoch: Instant, plan: &Plan) -> ServerMetrics {
    let Some(s) = scraper else {
        return ServerMetrics::default();
    };
    let out = s.finish(epoch);
    for n in &out.notes {
        plan.console.note(n);
    }
    out
}
