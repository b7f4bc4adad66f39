//! The run's hook into the server-metrics scrape (`crate::server_metrics`): which endpoints
//! (the server's own `/metrics` unless `--no-server-metrics` — every replica's with
//! `--base-url` repeated, each an endpoint named by its URL — then every
//! `--server-metrics-url`, then every `--gpu-telemetry` DCGM exporter), started before the
//! measured run and finished after it, with each endpoint that gave nothing said in one
//! note. The exporters' scrapes are handed back apart from the server's: they are GPU
//! telemetry, not server figures.

use std::sync::Arc;
use std::time::Instant;

use crate::config::Config;
use crate::server_metrics::{HttpSource, Options, ScrapeError, Scraper, ServerMetrics};

use super::plan::Plan;

/// A running scrape: the scraper, and which of its endpoints are GPU exporters.
pub struct RunScrape {
    scraper: Scraper,
    gpu_urls: Vec<String>,
    /// Each GPU exporter's first and newest scrape, for the dashboard's GPU line.
    gpu_latest: Vec<Arc<crate::server_metrics::LatestScrape>>,
}

impl RunScrape {
    /// The newest scrape of the server, for the dashboard's server line.
    pub fn latest(&self) -> Option<Arc<crate::server_metrics::LatestScrape>> {
        self.scraper.latest()
    }

    /// The newest scrape of each GPU exporter (`--gpu-telemetry`), for the dashboard.
    pub fn latest_gpu(&self) -> Vec<Arc<crate::server_metrics::LatestScrape>> {
        self.gpu_latest.clone()
    }
}

/// Starts scraping (`None` with `--no-server-metrics`); notes go to the console.
pub fn start(config: &Config, plan: &Plan) -> Option<RunScrape> {
    let c = &config.server_metrics;
    if !c.enabled {
        return None;
    }
    let t = &plan.target;
    let timeout = config.scrape_timeout();
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
    let mut gpu_urls = Vec::new();
    let mut published = Vec::new();
    for url in &c.gpu_urls {
        let connect = config.engine.connect_timeout;
        match HttpSource::at(url, t.driver, config.server.insecure, connect) {
            Ok(s) => {
                gpu_urls.push(crate::server_metrics::Source::url(&s));
                published.push((sources.len(), Arc::default()));
                sources.push(Arc::new(s));
            }
            Err(e) => plan.console.note(format_args!(
                "gpu telemetry: {url}: {e}; this run has no GPU figures from it"
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
        published,
    };
    let (scraper, notes) = Scraper::start(sources, &opts);
    for n in notes {
        plan.console.note(n);
    }
    let gpu_latest = opts.published.iter().map(|(_, l)| l.clone()).collect();
    Some(RunScrape {
        scraper,
        gpu_urls,
        gpu_latest,
    })
}

/// Ends the scrape at the end of the run that started at `epoch`: the server's endpoints,
/// then the GPU exporters'.
pub fn finish(
    scrape: Option<RunScrape>,
    epoch: Instant,
    plan: &Plan,
) -> (ServerMetrics, ServerMetrics) {
    let Some(s) = scrape else {
        return Default::default();
    };
    let out = s.scraper.finish(epoch);
    for n in &out.notes {
        plan.console.note(n);
    }
    // The exporters' sources came last: from the end, each GPU URL claims one endpoint of
    // that URL (an exporter can be the server's own `/metrics`, scraped twice).
    let mut claims = s.gpu_urls;
    let (mut gpu, mut server) = (Vec::new(), Vec::new());
    for e in out.endpoints.into_iter().rev() {
        match claims.iter().rposition(|u| *u == e.url) {
            Some(i) => {
                claims.remove(i);
                gpu.push(e);
            }
            None => server.push(e),
        }
    }
    gpu.reverse();
    server.reverse();
    (
        ServerMetrics {
            endpoints: server,
            notes: out.notes,
        },
        ServerMetrics {
            endpoints: gpu,
            notes: Vec::new(),
        },
    )
}
