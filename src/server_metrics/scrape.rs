//! The scrape threads: one per endpoint, off the engine's cores, reading `/metrics` before
//! the run, every interval during it, and once at its end.
//!
//! Every wait is bounded so a missing, hung or slow endpoint never holds the run: the start
//! waits at most one scrape timeout for the first answers (before the run's clock starts)
//! and drops an endpoint that gave none; the end asks every thread for its last scrape with
//! one shared deadline and gives up on a thread that misses it (the thread ends by itself
//! when its call times out). What went wrong is returned as one line per endpoint; this
//! layer prints nothing.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::http::conn::{tls_setup, Endpoint, TlsError};
use crate::http::control::{self, ControlError, Wait};
use crate::http::source::SourceAddrs;
use crate::http::url::{BaseUrl, ResolveError, Scheme};
use crate::runtime::{available_cores, pin_current_thread, ResolvedDriver};

use super::exposition::{self, ParseError};
use super::window::{Figures, Sample};

/// Why one scrape gave no sample.
#[derive(Debug, thiserror::Error)]
pub enum ScrapeError {
    #[error(transparent)]
    Control(#[from] ControlError),
    #[error("HTTP {status} {reason}")]
    Status { status: u16, reason: String },
    #[error("not Prometheus text ({0})")]
    Parse(#[from] ParseError),
    #[error("no answer within {0:?}")]
    NoAnswer(Duration),
}

/// Why an endpoint of `--server-metrics-url` cannot be scraped at all.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    #[error(transparent)]
    Tls(#[from] TlsError),
}

/// Something that answers with a metrics body.
pub trait Source: Send + Sync + 'static {
    /// Where, for messages and the result file.
    fn url(&self) -> String;
    /// One scrape, within `timeout`.
    fn fetch(&self, timeout: Duration) -> Result<String, ScrapeError>;
}

/// A `/metrics` endpoint over HTTP(S), on control-plane connections of the scrape thread.
pub struct HttpSource {
    pub driver: ResolvedDriver,
    pub endpoint: Endpoint,
    /// The `Host` header.
    pub host: String,
    /// The request target (`/metrics`).
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub url: String,
}

impl HttpSource {
    /// `url` as given to `--server-metrics-url` (its path, or `/metrics` when it has none).
    pub fn at(
        url: &BaseUrl,
        driver: ResolvedDriver,
        insecure: bool,
        connect_timeout: Duration,
    ) -> Result<HttpSource, SourceError> {
        let addr = url.resolve()?[0];
        let tls = match url.scheme {
            Scheme::Http => None,
            Scheme::Https => Some(tls_setup(&url.host, insecure)?),
        };
        let path = if url.path_prefix.is_empty() {
            "/metrics".to_string()
        } else {
            url.path_prefix.clone()
        };
        let bare = BaseUrl {
            path_prefix: String::new(),
            ..url.clone()
        };
        Ok(HttpSource {
            driver,
            endpoint: Endpoint {
                addr,
                tls,
                connect_timeout,
                source: SourceAddrs::default(),
            },
            host: url.host_header(),
            url: bare.url_of(&path),
            path,
            headers: Vec::new(),
        })
    }
}

impl Source for HttpSource {
    fn url(&self) -> String {
        self.url.clone()
    }

    fn fetch(&self, timeout: Duration) -> Result<String, ScrapeError> {
        let resp = control::get(
            self.driver,
            &self.endpoint,
            &self.host,
            &self.path,
            &self.headers,
            Wait::quietly(timeout),
        )
        .map_err(|e| match e {
            // One wording for a silent endpoint, whichever wait gave up first.
            ControlError::Timeout(d) => ScrapeError::NoAnswer(d),
            e => ScrapeError::Control(e),
        })?;
        if !resp.is_success() {
            return Err(ScrapeError::Status {
                status: resp.status,
                reason: resp.reason,
            });
        }
        Ok(resp.text())
    }
}

/// How the scrapes are timed.
#[derive(Debug, Clone)]
pub struct Options {
    /// Between two scrapes during the run.
    pub interval: Duration,
    /// The longest one scrape may take, and the longest the start and the end wait.
    pub timeout: Duration,
    /// Cores the scrape threads keep off (the engine's).
    pub avoid_cores: Vec<usize>,
}

/// Scrapes in progress; [`Scraper::finish`] ends them.
pub struct Scraper {
    running: Vec<Running>,
    timeout: Duration,
}

struct Running {
    url: String,
    /// Sends the end's deadline.
    stop: mpsc::Sender<Instant>,
    done: mpsc::Receiver<Outcome>,
}

/// What a scrape thread hands back at the end.
struct Outcome {
    samples: Vec<Sample>,
    failed: usize,
    /// The end-of-run scrape's failure: without it there is no window.
    end: Result<(), ScrapeError>,
}

/// One endpoint's result.
#[derive(Debug, Clone)]
pub struct EndpointMetrics {
    pub url: String,
    /// Scrapes answered, and failed (during the run: skipped, not fatal).
    pub scrapes: usize,
    pub failed: usize,
    pub figures: Figures,
}

/// Every endpoint that gave figures, and one line per endpoint that did not.
#[derive(Debug, Clone, Default)]
pub struct ServerMetrics {
    pub endpoints: Vec<EndpointMetrics>,
    pub notes: Vec<String>,
}

impl Scraper {
    /// Takes every source's first scrape (waiting at most `opts.timeout` in all) and starts
    /// scraping each one that answered every `opts.interval`. Returns one line for each
    /// source that did not answer.
    pub fn start(sources: Vec<Arc<dyn Source>>, opts: &Options) -> (Scraper, Vec<String>) {
        let mut started = Vec::new();
        for source in sources {
            let (ready_tx, ready) = mpsc::channel::<Result<(), ScrapeError>>();
            let (stop, stop_rx) = mpsc::channel::<Instant>();
            let (done_tx, done) = mpsc::channel::<Outcome>();
            let url = source.url();
            let opts = opts.clone();
            let spawned = std::thread::Builder::new()
                .name("server-metrics".into())
                .spawn(move || scrape_loop(&*source, &opts, &ready_tx, &stop_rx, &done_tx));
            if spawned.is_ok() {
                started.push((ready, Running { url, stop, done }));
            }
        }
        let deadline = Instant::now() + opts.timeout;
        let mut notes = Vec::new();
        let mut running = Vec::new();
        for (ready, r) in started {
            let left = deadline.saturating_duration_since(Instant::now());
            let error = match ready.recv_timeout(left) {
                Ok(Ok(())) => {
                    running.push(r);
                    continue;
                }
                Ok(Err(e)) => e,
                Err(_) => ScrapeError::NoAnswer(opts.timeout),
            };
            notes.push(format!(
                "server metrics: {}: {error}; this run has no server figures from it \
                 (--no-server-metrics turns scraping off)",
                r.url
            ));
        }
        (
            Scraper {
                running,
                timeout: opts.timeout,
            },
            notes,
        )
    }

    /// Takes the last scrapes (within one timeout in all) and works out the figures, with
    /// times relative to `epoch` (the run's start).
    pub fn finish(self, epoch: Instant) -> ServerMetrics {
        let deadline = Instant::now() + self.timeout;
        for r in &self.running {
            let _ = r.stop.send(deadline);
        }
        // A thread answers just after the deadline when its last call timed out at it.
        let grace = deadline + Duration::from_millis(100);
        let mut out = ServerMetrics::default();
        for r in self.running {
            let outcome = r
                .done
                .recv_timeout(grace.saturating_duration_since(Instant::now()));
            let why = match outcome {
                Ok(Outcome {
                    samples,
                    failed,
                    end: Ok(()),
                }) => match Figures::of(&samples, epoch) {
                    Some(figures) => {
                        out.endpoints.push(EndpointMetrics {
                            url: r.url,
                            scrapes: samples.len(),
                            failed,
                            figures,
                        });
                        continue;
                    }
                    None => "fewer than two scrapes".to_string(),
                },
                Ok(Outcome { end: Err(e), .. }) => format!("the end-of-run scrape failed: {e}"),
                Err(_) => format!(
                    "the end-of-run scrape got no answer within {:?}",
                    self.timeout
                ),
            };
            out.notes.push(format!(
                "server metrics: {}: {why}; this run has no server figures from it",
                r.url
            ));
        }
        out
    }
}

/// Keeps the calling thread off `avoid` (best effort: pinned to the first other core).
fn keep_off(avoid: &[usize]) {
    if avoid.is_empty() {
        return;
    }
    if let Some(&core) = available_cores().iter().find(|c| !avoid.contains(c)) {
        pin_current_thread(core);
    }
}

fn scrape(source: &dyn Source, timeout: Duration) -> Result<Sample, ScrapeError> {
    let text = source.fetch(timeout)?;
    let scrape = exposition::parse(&text)?;
    Ok(Sample {
        at: Instant::now(),
        scrape,
    })
}

/// Keeps a sample that is neither the first nor the last small: the window needs only the
/// first and last buckets; in between, counts, counters and gauges.
fn thin(sample: &mut Sample) {
    for h in sample.scrape.histograms.values_mut() {
        h.buckets = Vec::new();
    }
}

fn scrape_loop(
    source: &dyn Source,
    opts: &Options,
    ready: &mpsc::Sender<Result<(), ScrapeError>>,
    stop: &mpsc::Receiver<Instant>,
    done: &mpsc::Sender<Outcome>,
) {
    keep_off(&opts.avoid_cores);
    let first = match scrape(source, opts.timeout) {
        Ok(s) => s,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    if ready.send(Ok(())).is_err() {
        return; // answered after the start stopped waiting
    }
    let mut samples = vec![first];
    let mut failed = 0;
    let mut next = Instant::now() + opts.interval;
    loop {
        match stop.recv_timeout(next.saturating_duration_since(Instant::now())) {
            Ok(deadline) => {
                let left = deadline.saturating_duration_since(Instant::now());
                let end = if left.is_zero() {
                    Err(ScrapeError::NoAnswer(opts.timeout))
                } else {
                    scrape(source, left).map(|s| {
                        if samples.len() > 1 {
                            samples.last_mut().map(thin);
                        }
                        samples.push(s);
                    })
                };
                let _ = done.send(Outcome {
                    samples,
                    failed,
                    end,
                });
                return;
            }
            Err(RecvTimeoutError::Disconnected) => return,
            Err(RecvTimeoutError::Timeout) => {
                match scrape(source, opts.timeout) {
                    Ok(s) => {
                        if samples.len() > 1 {
                            samples.last_mut().map(thin);
                        }
                        samples.push(s);
                    }
                    Err(_) => failed += 1,
                }
                next += opts.interval;
                let now = Instant::now();
                if next < now {
                    next = now + opts.interval;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// A server whose counter is the number of scrapes so far.
    struct Counting(AtomicU64);

    impl Source for Counting {
        fn url(&self) -> String {
            "counting".into()
        }
        fn fetch(&self, _: Duration) -> Result<String, ScrapeError> {
            let n = self.0.fetch_add(1, Ordering::SeqCst);
            Ok(format!("# TYPE c counter\nc_total {}\nrunning 3\n", 10 + n))
        }
    }

    /// Never answers within the timeout.
    struct Hung;

    impl Source for Hung {
        fn url(&self) -> String {
            "hung".into()
        }
        fn fetch(&self, timeout: Duration) -> Result<String, ScrapeError> {
            std::thread::sleep(timeout);
            Err(ScrapeError::NoAnswer(timeout))
        }
    }

    struct Garbage;

    impl Source for Garbage {
        fn url(&self) -> String {
            "garbage".into()
        }
        fn fetch(&self, _: Duration) -> Result<String, ScrapeError> {
            Ok("<html>oops</html>".into())
        }
    }

    fn opts() -> Options {
        Options {
            interval: Duration::from_millis(5),
            timeout: Duration::from_millis(200),
            avoid_cores: Vec::new(),
        }
    }

    #[test]
    fn a_window_counts_the_scrapes_between_start_and_end() {
        let source = Arc::new(Counting(AtomicU64::new(0)));
        let (scraper, notes) = Scraper::start(vec![source.clone()], &opts());
        assert!(notes.is_empty(), "{notes:?}");
        let epoch = Instant::now();
        for _ in 0..1000 {
            if source.0.load(Ordering::SeqCst) >= 4 {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let out = scraper.finish(epoch);
        let scrapes = source.0.load(Ordering::SeqCst);
        let e = &out.endpoints[0];
        assert_eq!(e.scrapes as u64, scrapes);
        assert_eq!(e.figures.counters["c"], (scrapes - 1) as f64);
        assert_eq!(e.figures.gauges["running"].max, 3.0);
    }

    #[test]
    fn hung_and_garbage_endpoints_are_one_line_each_and_do_not_hold_the_start() {
        let o = opts();
        let sources: Vec<Arc<dyn Source>> = vec![Arc::new(Hung), Arc::new(Garbage)];
        let (scraper, notes) = Scraper::start(sources, &o);
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].contains("hung: no answer"), "{notes:?}");
        assert!(
            notes[1].contains("garbage: not Prometheus text"),
            "{notes:?}"
        );
        let out = scraper.finish(Instant::now());
        assert!(out.endpoints.is_empty() && out.notes.is_empty());
    }
}
