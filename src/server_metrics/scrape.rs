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

use super::exposition::{self, ParseError, Scrape};
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
    /// Where the first endpoint's (the server's own) scrapes are published as they come,
    /// for a live view (the dashboard); `None`: nowhere.
    pub latest: Option<Arc<LatestScrape>>,
    /// Other endpoints whose scrapes are published as they come, by their index among the
    /// sources (the GPU exporters', for the dashboard's GPU line).
    pub published: Vec<(usize, Arc<LatestScrape>)>,
}

impl Options {
    /// Where endpoint `index`'s scrapes are published.
    fn publishing(&self, index: usize) -> impl Iterator<Item = &Arc<LatestScrape>> {
        let published = self.published.iter().filter(move |(i, _)| *i == index);
        self.latest
            .iter()
            .filter(move |_| index == 0)
            .chain(published.map(|(_, l)| l))
    }
}

/// The first and the newest scrape of the server's own endpoint during a run, for a view
/// that shows the server as the run goes (the dashboard). Written by the scrape thread once
/// per interval, read by the viewer: a lock, off the engine's cores.
#[derive(Debug, Default)]
pub struct LatestScrape {
    scrapes: std::sync::Mutex<(Option<Scrape>, Option<Scrape>)>,
    /// Scrapes published so far: a viewer reads (copies) them again only when it grew.
    published: std::sync::atomic::AtomicU64,
}

impl LatestScrape {
    fn publish(&self, s: &Scrape) {
        let mut g = self.scrapes.lock().unwrap_or_else(|p| p.into_inner());
        if g.0.is_none() {
            g.0 = Some(s.clone());
        }
        g.1 = Some(s.clone());
        self.published
            .fetch_add(1, std::sync::atomic::Ordering::Release);
    }

    /// [`LatestScrape::publish`], for a viewer's tests.
    #[cfg(test)]
    pub fn publish_for_test(&self, s: &Scrape) {
        self.publish(s);
    }

    /// How many scrapes were published: a new one is newer than what was read at a lower
    /// count.
    pub fn published(&self) -> u64 {
        self.published.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The first scrape and the newest (`None` before the first answered).
    pub fn get(&self) -> Option<(Scrape, Scrape)> {
        let g = self.scrapes.lock().unwrap_or_else(|p| p.into_inner());
        g.0.clone().zip(g.1.clone())
    }
}

/// At most this many scrape threads, however many endpoints: up to it each endpoint has a
/// thread of its own (a slow one holds no other), beyond it the endpoints share them in turn
/// (10,000 replicas must not start 10,000 threads).
pub const MAX_SCRAPE_THREADS: usize = 8;

/// At most this many endpoints are named one line each in the start's notes; the rest are
/// counted in one more line.
const MAX_NOTES: usize = 5;

/// How long the start and the end wait, past the scrape timeout, for an endpoint that has
/// answered to be parsed: the timeout bounds the server's answer, not our reading of it (a
/// page of 100,000 names takes about 2 s in a debug build on a busy machine).
const PARSE_ALLOWANCE: Duration = Duration::from_secs(20);

/// A scrape thread's word on one endpoint's first scrape.
enum First {
    /// The server answered; its body is being parsed.
    Answered,
    /// The first scrape is done: a sample, or why not.
    Done(Result<(), ScrapeError>),
}

/// Scrapes in progress; [`Scraper::finish`] ends them.
pub struct Scraper {
    /// The endpoints that answered the first scrape: their index among the sources, and URL.
    running: Vec<(usize, String)>,
    workers: Vec<Worker>,
    timeout: Duration,
    latest: Option<Arc<LatestScrape>>,
    /// The sources whose scrapes are published apart (`Options::published`: the GPU
    /// exporters), named as such in the notes.
    exporters: Vec<usize>,
}

/// How a note names what an endpoint that gave nothing leaves out: a GPU exporter's
/// (`exporter`) or the server's figures.
fn no_figures(exporter: bool, url: &str, why: &dyn std::fmt::Display, hint: &str) -> String {
    if exporter {
        format!("gpu telemetry: {url}: {why}; this run has no GPU figures from it")
    } else {
        format!("server metrics: {url}: {why}; this run has no server figures from it{hint}")
    }
}

/// One scrape thread, as the caller holds it.
struct Worker {
    /// Sends the end's deadline.
    stop: mpsc::Sender<Instant>,
    /// Each of its endpoints' outcome, by source index.
    done: mpsc::Receiver<Vec<(usize, Outcome)>>,
}

/// What a scrape thread hands back at the end, per endpoint.
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
    /// scraping each one that answered every `opts.interval`, on at most
    /// [`MAX_SCRAPE_THREADS`] threads. Returns one line for each source that did not answer
    /// (the first [`MAX_NOTES`], then one line counting the others).
    pub fn start(sources: Vec<Arc<dyn Source>>, opts: &Options) -> (Scraper, Vec<String>) {
        let urls: Vec<String> = sources.iter().map(|s| s.url()).collect();
        let threads = sources.len().min(MAX_SCRAPE_THREADS);
        let mut groups: Vec<Vec<(usize, Arc<dyn Source>)>> = vec![Vec::new(); threads];
        for (i, source) in sources.into_iter().enumerate() {
            groups[i % threads].push((i, source));
        }
        let deadline = Instant::now() + opts.timeout;
        let (ready_tx, ready) = mpsc::channel::<(usize, First)>();
        let mut answers: Vec<Option<Result<(), ScrapeError>>> = urls.iter().map(|_| None).collect();
        let mut workers = Vec::new();
        let mut expected = 0;
        for group in groups {
            let (stop, stop_rx) = mpsc::channel::<Instant>();
            let (done_tx, done) = mpsc::channel();
            let members: Vec<usize> = group.iter().map(|g| g.0).collect();
            let (opts, ready_tx) = (opts.clone(), ready_tx.clone());
            let spawned = std::thread::Builder::new()
                .name("server-metrics".into())
                .spawn(move || scrape_group(group, &opts, deadline, &ready_tx, &stop_rx, &done_tx));
            match spawned {
                Ok(_) => {
                    expected += members.len();
                    workers.push(Worker { stop, done });
                }
                Err(e) => {
                    for i in members {
                        let why = ScrapeError::Control(ControlError::Runtime(std::io::Error::new(
                            e.kind(),
                            format!("no thread to scrape it: {e}"),
                        )));
                        answers[i] = Some(Err(why));
                    }
                }
            }
        }
        drop(ready_tx);
        // A thread answers just after the deadline when its last call timed out at it.
        let grace = deadline + Duration::from_millis(100);
        // Endpoints that answered and are being parsed: waited for past the deadline.
        let mut parsing = 0usize;
        let mut in_parse = vec![false; answers.len()];
        while expected > 0 {
            let now = Instant::now();
            let until = if now < grace {
                grace
            } else if parsing > 0 && now < grace + PARSE_ALLOWANCE {
                grace + PARSE_ALLOWANCE
            } else {
                break;
            };
            match ready.recv_timeout(until.saturating_duration_since(now)) {
                Ok((i, First::Answered)) => {
                    in_parse[i] = true;
                    parsing += 1;
                }
                Ok((i, First::Done(answer))) => {
                    if std::mem::take(&mut in_parse[i]) {
                        parsing -= 1;
                    }
                    answers[i] = Some(answer);
                    expected -= 1;
                }
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
        let mut notes = Vec::new();
        let mut running = Vec::new();
        let mut unnamed = 0;
        for (i, (url, answer)) in urls.into_iter().zip(answers).enumerate() {
            let error = match answer {
                Some(Ok(())) => {
                    running.push((i, url));
                    continue;
                }
                Some(Err(e)) => e,
                None => ScrapeError::NoAnswer(opts.timeout),
            };
            if notes.len() == MAX_NOTES {
                unnamed += 1;
                continue;
            }
            let exporter = opts.published.iter().any(|(k, _)| *k == i);
            let hint = " (--no-server-metrics turns scraping off)";
            notes.push(no_figures(exporter, &url, &error, hint));
        }
        if unnamed > 0 {
            notes.push(format!(
                "server metrics: {unnamed} more endpoints gave no first scrape either; this run \
                 has no server figures from them"
            ));
        }
        let scraper = Scraper {
            running,
            workers,
            timeout: opts.timeout,
            latest: opts.latest.clone(),
            exporters: opts.published.iter().map(|(k, _)| *k).collect(),
        };
        (scraper, notes)
    }

    /// Where the server's own scrapes are published as they come (`Options::latest`).
    pub fn latest(&self) -> Option<Arc<LatestScrape>> {
        self.latest.clone()
    }

    /// Takes the last scrapes (within one timeout in all) and works out the figures, with
    /// times relative to `epoch` (the run's start).
    pub fn finish(self, epoch: Instant) -> ServerMetrics {
        let deadline = Instant::now() + self.timeout;
        for w in &self.workers {
            let _ = w.stop.send(deadline);
        }
        // A thread answers just after the deadline when its last call timed out at it, and
        // later when it is still parsing its last answers.
        let grace = deadline + Duration::from_millis(100) + PARSE_ALLOWANCE;
        let mut outcomes: Vec<Option<Outcome>> = Vec::new();
        for w in &self.workers {
            let left = grace.saturating_duration_since(Instant::now());
            for (i, outcome) in w.done.recv_timeout(left).unwrap_or_default() {
                if outcomes.len() <= i {
                    outcomes.resize_with(i + 1, || None);
                }
                outcomes[i] = Some(outcome);
            }
        }
        let mut out = ServerMetrics::default();
        for (i, url) in self.running {
            let why = match outcomes.get_mut(i).and_then(Option::take) {
                Some(Outcome {
                    samples,
                    failed,
                    end: Ok(()),
                }) => match Figures::of(&samples, epoch) {
                    Some(figures) => {
                        out.endpoints.push(EndpointMetrics {
                            url,
                            scrapes: samples.len(),
                            failed,
                            figures,
                        });
                        continue;
                    }
                    None => "fewer than two scrapes".to_string(),
                },
                Some(Outcome { end: Err(e), .. }) => format!("the end-of-run scrape failed: {e}"),
                None => format!(
                    "the end-of-run scrape got no answer within {:?}",
                    self.timeout
                ),
            };
            let exporter = self.exporters.contains(&i);
            out.notes.push(no_figures(exporter, &url, &why, ""));
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
    scrape_then(source, timeout, || {})
}

/// [`scrape`], calling `answered` once the server answered, before its body is parsed.
fn scrape_then(
    source: &dyn Source,
    timeout: Duration,
    answered: impl FnOnce(),
) -> Result<Sample, ScrapeError> {
    let text = source.fetch(timeout)?;
    answered();
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

/// One endpoint as its scrape thread keeps it.
struct Tracked {
    index: usize,
    source: Arc<dyn Source>,
    samples: Vec<Sample>,
    failed: usize,
}

impl Tracked {
    /// One scrape within `timeout`: a sample, or a failure.
    fn take(&mut self, timeout: Duration) -> Result<(), ScrapeError> {
        let s = scrape(&*self.source, timeout)?;
        if self.samples.len() > 1 {
            self.samples.last_mut().map(thin);
        }
        self.samples.push(s);
        Ok(())
    }

    /// The end-of-run scrape, within what is left before `deadline`.
    fn end(mut self, deadline: Instant, timeout: Duration) -> (usize, Outcome) {
        let left = deadline.saturating_duration_since(Instant::now());
        let end = if left.is_zero() {
            Err(ScrapeError::NoAnswer(timeout))
        } else {
            self.take(left.min(timeout))
        };
        let outcome = Outcome {
            samples: self.samples,
            failed: self.failed,
            end,
        };
        (self.index, outcome)
    }
}

/// One scrape thread: the first scrape of each of its endpoints (within `deadline`), one
/// scrape of each every `opts.interval`, and the last when the end's deadline comes.
fn scrape_group(
    group: Vec<(usize, Arc<dyn Source>)>,
    opts: &Options,
    deadline: Instant,
    ready: &mpsc::Sender<(usize, First)>,
    stop: &mpsc::Receiver<Instant>,
    done: &mpsc::Sender<Vec<(usize, Outcome)>>,
) {
    keep_off(&opts.avoid_cores);
    let mut live = Vec::new();
    for (index, source) in group {
        let left = deadline.saturating_duration_since(Instant::now());
        let first = if left.is_zero() {
            Err(ScrapeError::NoAnswer(opts.timeout))
        } else {
            scrape_then(&*source, left.min(opts.timeout), || {
                let _ = ready.send((index, First::Answered));
            })
        };
        let answer = first.map(|sample| {
            for l in opts.publishing(index) {
                l.publish(&sample.scrape);
            }
            live.push(Tracked {
                index,
                source,
                samples: vec![sample],
                failed: 0,
            })
        });
        if ready.send((index, First::Done(answer))).is_err() {
            // The start stopped waiting: the endpoints not tried yet are not scraped.
            break;
        }
    }
    if live.is_empty() {
        return;
    }
    let finish = |live: Vec<Tracked>, end: Instant| {
        let outcomes = live.into_iter().map(|t| t.end(end, opts.timeout)).collect();
        let _ = done.send(outcomes);
    };
    let mut next = Instant::now() + opts.interval;
    loop {
        match stop.recv_timeout(next.saturating_duration_since(Instant::now())) {
            Ok(end) => return finish(live, end),
            Err(RecvTimeoutError::Disconnected) => return,
            Err(RecvTimeoutError::Timeout) => {
                for t in live.iter_mut() {
                    // The end's deadline is short: it ends a round that is still going.
                    if let Ok(end) = stop.try_recv() {
                        return finish(live, end);
                    }
                    match t.take(opts.timeout) {
                        Err(_) => t.failed += 1,
                        Ok(()) => {
                            if let Some(s) = t.samples.last() {
                                for l in opts.publishing(t.index) {
                                    l.publish(&s.scrape);
                                }
                            }
                        }
                    }
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
            latest: None,
            published: Vec::new(),
        }
    }

    #[test]
    fn the_first_endpoints_scrapes_are_published_as_they_come() {
        let source = Arc::new(Counting(AtomicU64::new(0)));
        let opts = Options {
            latest: Some(Arc::default()),
            ..opts()
        };
        let (scraper, _) = Scraper::start(vec![source.clone()], &opts);
        let latest = scraper.latest().expect("published");
        let (first, _) = latest.get().expect("the first scrape is published");
        assert_eq!(first.counters.get("c"), Some(&10.0));
        let started = Instant::now();
        // Scrapes every 5 ms: a newer one comes (bounded wait).
        while latest
            .get()
            .is_some_and(|(_, last)| last.counters.get("c") == Some(&10.0))
        {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "no newer scrape"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let (first, last) = latest.get().expect("scrapes");
        assert_eq!(first.counters.get("c"), Some(&10.0), "the first stays");
        assert!(last.counters.get("c") > Some(&10.0));
        let _ = scraper.finish(Instant::now());
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

    /// Answers at once and notes which thread asked.
    struct ThreadNoting(std::sync::Mutex<std::collections::HashSet<std::thread::ThreadId>>);

    impl Source for ThreadNoting {
        fn url(&self) -> String {
            "noting".into()
        }
        fn fetch(&self, _: Duration) -> Result<String, ScrapeError> {
            self.0.lock().unwrap().insert(std::thread::current().id());
            Ok("running 1\n".into())
        }
    }

    #[test]
    fn three_thousand_replicas_do_not_start_three_thousand_scrape_threads() {
        // Issue 36: a thread per endpoint: 3,000 replicas started 3,006 threads (1.95 GB),
        // 10,000 aborted. Here 3,000 endpoints share at most MAX_SCRAPE_THREADS threads and
        // every one of them is scraped.
        let noting = Arc::new(ThreadNoting(Default::default()));
        let sources: Vec<Arc<dyn Source>> = (0..3000).map(|_| noting.clone() as _).collect();
        let o = Options {
            interval: Duration::from_secs(60),
            timeout: Duration::from_secs(20),
            avoid_cores: Vec::new(),
            latest: None,
            published: Vec::new(),
        };
        let (scraper, notes) = Scraper::start(sources, &o);
        assert!(notes.is_empty(), "{notes:?}");
        let threads = noting.0.lock().unwrap().len();
        assert!(
            (1..=MAX_SCRAPE_THREADS).contains(&threads),
            "{threads} threads"
        );
        let out = scraper.finish(Instant::now());
        assert_eq!(out.endpoints.len(), 3000, "{:?}", &out.notes[..1]);
        assert!(noting.0.lock().unwrap().len() <= MAX_SCRAPE_THREADS);
    }

    #[test]
    fn many_silent_endpoints_are_a_few_lines_not_one_each() {
        let sources: Vec<Arc<dyn Source>> = (0..20).map(|_| Arc::new(Garbage) as _).collect();
        let (_, notes) = Scraper::start(sources, &opts());
        assert_eq!(notes.len(), MAX_NOTES + 1, "{notes:?}");
        assert!(notes[MAX_NOTES].contains("15 more endpoints"), "{notes:?}");
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
