//! The run's hook into the server-metrics scrape (`crate::server_metrics`): which endpoints
//! (the server's own `/metrics` unless `--no-server-metrics` — every replica's with
//! `--base-url` repeated, each an endpoint named by its URL — then every
//! `--server-metrics-url`), started before the measured run and finished after it, with
//! each endpoint that gave nothing said in one note.

use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use crate::config::Config;
use crate::server_metrics::{HttpSource, Options, ScrapeError, Scraper, ServerMetrics, Source};

use super::plan::Plan;
use super::target::Target;

/// The longest one scrape may take; also the longest the start waits for the first scrapes
/// (once, before the run's clock starts) and the end for the last ones. Shorter when the
/// request timeout is (see [`scrape_timeout`]).
pub const SCRAPE_TIMEOUT: Duration = Duration::from_secs(2);

/// [`SCRAPE_TIMEOUT`], or the request timeout when that is shorter: a control-plane wait
/// never outlasts a request's.
pub fn scrape_timeout(config: &Config) -> Duration {
    SCRAPE_TIMEOUT.min(config.engine.request_timeout)
}

/// One scrape of the server's own `/metrics`, asked in the background while the run is
/// prepared (tokenizer, `/tokenize`, prompts): a server that accepts and never answers then
/// costs its wait once, beside the others, instead of again before the run.
pub struct EarlyProbe {
    url: String,
    answer: Mutex<Option<mpsc::Receiver<Result<(), ScrapeError>>>>,
}

impl EarlyProbe {
    /// Starts the probe (`None` with `--no-server-metrics` or without a thread to spare).
    pub fn start(config: &Config, target: &Target) -> Option<EarlyProbe> {
        if !config.server_metrics.enabled {
            return None;
        }
        let source = replica_sources(target).into_iter().next()?;
        let (tx, rx) = mpsc::channel();
        let timeout = scrape_timeout(config);
        let url = source.url();
        std::thread::Builder::new()
            .name("metrics-probe".into())
            .spawn(move || {
                let answer = source.fetch(timeout).map(drop);
                let _ = tx.send(answer);
            })
            .ok()?;
        Some(EarlyProbe {
            url,
            answer: Mutex::new(Some(rx)),
        })
    }

    /// Whether the probe got no answer in its time (it is waited for at most `timeout`):
    /// then the run's scrape leaves the endpoint out. Asked once; `false` after.
    fn went_unanswered(&self, timeout: Duration) -> bool {
        let rx = self.answer.lock().ok().and_then(|mut a| a.take());
        let answer = rx.map(|rx| rx.recv_timeout(timeout));
        matches!(
            answer,
            Some(Ok(Err(ScrapeError::NoAnswer(_)))) | Some(Err(_))
        )
    }
}

/// Each replica's own `/metrics` (the first replica's first).
fn replica_sources(t: &Target) -> Vec<Arc<dyn Source>> {
    t.each_replica()
        .map(|(base, endpoint)| {
            Arc::new(HttpSource {
                driver: t.driver,
                endpoint: endpoint.clone(),
                host: base.host_header(),
                path: base.request_path("/metrics"),
                headers: t.headers.clone(),
                url: base.url_of("/metrics"),
            }) as Arc<dyn Source>
        })
        .collect()
}

/// Starts scraping (`None` with `--no-server-metrics`); notes go to the console.
pub fn start(config: &Config, plan: &Plan) -> Option<Scraper> {
    let c = &config.server_metrics;
    if !c.enabled {
        return None;
    }
    let t = &plan.target;
    let timeout = scrape_timeout(config);
    let mut sources = replica_sources(t);
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
