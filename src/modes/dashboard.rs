//! The terminal dashboard (`--ui dashboard`, the default on a terminal): a live view of the
//! run drawn a few times a second from the counters the engine's cores publish
//! ([`crate::engine::live`]) — planned and elapsed, requests by outcome and failure reason,
//! throughput and latency percentiles over the last seconds and over the run, the client's
//! health (dispatch lag, core busy), the server's and the GPUs' figures when scraped, and for
//! sweeps and repeated runs the runs done so far.
//!
//! Drawn with ratatui in an *inline* viewport on stdout (below the lines Python prints
//! before a run), not the alternate screen, and without raw mode: the terminal's modes are
//! never changed, so there is nothing to restore however the process ends (a second Ctrl-C
//! exits at once from the signal handler; a panic; SIGKILL). Ctrl-C is still the terminal's
//! SIGINT and is handled as without the dashboard (`modes::progress`). When the run ends the
//! viewport is cleared and the cursor put at its top, so the block prints where the
//! dashboard was, exactly as it prints without it.
//!
//! Figures never claim more precision than they have: latencies come from buckets of two
//! significant digits and are shown with two; rates over a window of a few seconds with one
//! decimal.

use crate::runtime::stop_handle::StopHandle;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ratatui::backend::CrosstermBackend;
use ratatui::layout::{Constraint, Position};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Cell, Gauge, Paragraph, Row, Table};
use ratatui::{Frame, Terminal, TerminalOptions, Viewport};

use crate::engine::live::{Latency, LiveRun, Snapshot};
use crate::engine::Progress;
use crate::output::live_metrics::RunLabels;
use crate::output::stdio::{Console, TerminalOut};
use crate::server_metrics::{self, exposition::Scrape, LatestScrape};

/// Narrower than this the dashboard does not fit: the bar is shown instead.
pub const MIN_WIDTH: u16 = 80;
/// Runs done shown in the table (the latest ones).
const DONE_ROWS: usize = 5;
/// Lines the dashboard takes without its table of runs done.
const BASE_HEIGHT: u16 = 18;
/// How often it redraws.
const TICK: Duration = Duration::from_millis(250);
/// The window of the windowed figures.
pub const WINDOW: Duration = Duration::from_secs(10);

/// Why the dashboard is not shown (the bar is, instead).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unfit {
    NotATerminal,
    NotUtf8,
    Narrow(u16),
    Short(u16),
    Cursor(String),
}

impl std::fmt::Display for Unfit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unfit::NotATerminal => f.write_str("stdout is not a terminal"),
            Unfit::NotUtf8 => f.write_str(
                "the terminal's locale is not UTF-8 (LC_ALL, LC_CTYPE or LANG names no UTF-8)",
            ),
            Unfit::Narrow(w) => write!(f, "the terminal is {w} columns wide, under {MIN_WIDTH}"),
            Unfit::Short(h) => write!(f, "the terminal is {h} lines high, too few"),
            Unfit::Cursor(e) => write!(f, "the terminal did not report its cursor: {e}"),
        }
    }
}

/// Whether the locale in `LC_ALL`, `LC_CTYPE` or `LANG` (the first set, as C's `setlocale`
/// reads them) is UTF-8.
pub fn locale_is_utf8(var: impl Fn(&str) -> Option<String>) -> bool {
    ["LC_ALL", "LC_CTYPE", "LANG"]
        .iter()
        .find_map(|v| var(v).filter(|s| !s.is_empty()))
        .is_some_and(|l| {
            let l = l.to_ascii_lowercase();
            l.contains("utf-8") || l.contains("utf8")
        })
}

/// A drawn dashboard; [`Dashboard::finish`] clears it.
pub struct Dashboard {
    done: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

type Term = Terminal<CrosstermBackend<TerminalOut>>;

impl Dashboard {
    /// Opens the dashboard on the console's terminal, or says why it cannot be. `scrapes`:
    /// the server's newest scrape and each GPU exporter's (`--gpu-telemetry`), when scraped.
    pub fn start(
        progress: Progress,
        labels: RunLabels,
        scrapes: (Option<Arc<LatestScrape>>, Vec<Arc<LatestScrape>>),
        console: &Console,
        stop: StopHandle,
    ) -> Result<Dashboard, Unfit> {
        let out = console.terminal().ok_or(Unfit::NotATerminal)?;
        if !locale_is_utf8(|v| std::env::var(v).ok()) {
            return Err(Unfit::NotUtf8);
        }
        let (w, h) =
            ratatui::crossterm::terminal::size().map_err(|e| Unfit::Cursor(e.to_string()))?;
        if w < MIN_WIDTH {
            return Err(Unfit::Narrow(w));
        }
        let height = BASE_HEIGHT + gpu_height(&scrapes.1) + done_height(live_done().len());
        if h <= height {
            return Err(Unfit::Short(h));
        }
        let terminal = Terminal::with_options(
            CrosstermBackend::new(out),
            TerminalOptions {
                viewport: Viewport::Inline(height),
            },
        )
        .map_err(|e| Unfit::Cursor(e.to_string()))?;
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        let thread = std::thread::Builder::new()
            .name("dashboard".into())
            .spawn(move || run(terminal, progress, labels, scrapes, &stop, &flag))
            .map_err(|e| Unfit::Cursor(e.to_string()))?;
        Ok(Dashboard {
            done,
            thread: Some(thread),
        })
    }

    /// Ends the dashboard once the run returned: a last frame, then the viewport cleared.
    pub fn finish(mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn live_done() -> Vec<(RunLabels, Snapshot)> {
    super::live_board::ended()
}

/// The GPU line is shown when GPU exporters are scraped.
fn gpu_height(gpus: &[Arc<LatestScrape>]) -> u16 {
    u16::from(!gpus.is_empty())
}

fn done_height(runs: usize) -> u16 {
    if runs == 0 {
        0
    } else {
        3 + runs.min(DONE_ROWS) as u16
    }
}

/// The dashboard thread: redraw every tick until told to finish, then clear.
fn run(
    mut terminal: Term,
    progress: Progress,
    labels: RunLabels,
    (server, gpus): (Option<Arc<LatestScrape>>, Vec<Arc<LatestScrape>>),
    stop: &StopHandle,
    done: &AtomicBool,
) {
    let live = progress.live();
    let started = Instant::now();
    let runs_done = live_done();
    let mut history = History::default();
    let top = loop {
        let finishing = done.load(Ordering::Relaxed);
        let now = Instant::now();
        let view = View {
            labels: &labels,
            time_bound: progress.time_bound(),
            live: &live,
            elapsed: now - started,
            interrupted: stop.stop_requested(),
            window: history.push(now, live.snapshot()),
            runs_done: &runs_done,
            server: server.as_ref().and_then(|s| s.get()),
            gpu_rows: gpu_height(&gpus),
            gpus: gpus.iter().filter_map(|g| g.get()).collect(),
        };
        // The viewport's top on the screen (a completed frame's area is the whole screen).
        let mut top = Position::ORIGIN;
        let drawn = terminal.draw(|f| {
            top = f.area().as_position();
            view.draw(f);
        });
        if drawn.is_err() {
            // Stdout is gone: nothing more to draw on.
            return;
        }
        if finishing {
            break top;
        }
        std::thread::sleep(TICK);
    };
    let _ = terminal.clear();
    let _ = terminal.set_cursor_position(top);
    let _ = terminal.show_cursor();
}

/// Snapshots of the last [`WINDOW`], one a second, for the windowed figures.
#[derive(Default)]
struct History {
    samples: VecDeque<(Instant, Snapshot)>,
}

/// The newest snapshot and the oldest within the window.
struct Window {
    now: Snapshot,
    then: Option<(Duration, Snapshot)>,
}

impl History {
    fn push(&mut self, at: Instant, snap: Snapshot) -> Window {
        while self
            .samples
            .front()
            .is_some_and(|(t, _)| at.saturating_duration_since(*t) > WINDOW)
        {
            self.samples.pop_front();
        }
        let due = self
            .samples
            .back()
            .is_none_or(|(t, _)| at.saturating_duration_since(*t) >= Duration::from_secs(1));
        let then = self
            .samples
            .front()
            .map(|(t, s)| (at.saturating_duration_since(*t), s.clone()));
        if due {
            self.samples.push_back((at, snap.clone()));
        }
        Window { now: snap, then }
    }
}

/// Two significant digits of a latency in ns (a bucket's lower bound has exactly two).
pub fn latency(ns: Option<u64>) -> String {
    let Some(ns) = ns else {
        return "-".into();
    };
    let (v, unit) = match ns {
        n if n < 1_000_000 => (n as f64 / 1e3, "µs"),
        n if n < 1_000_000_000 => (n as f64 / 1e6, "ms"),
        n => (n as f64 / 1e9, "s"),
    };
    if v < 10.0 {
        format!("{v:.1} {unit}")
    } else {
        format!("{v:.0} {unit}")
    }
}

/// The server's figures from its scrapes: running, waiting and KV-cache use from the newest,
/// the prefix-cache hit rate over the run from the counters' growth since the first (what the
/// server does not expose is left out).
pub fn server_line(first: &Scrape, last: &Scrape) -> String {
    let gauge = |names: &[&str]| names.iter().find_map(|n| last.gauges.get(*n).copied());
    let mut parts = Vec::new();
    if let Some(v) = gauge(server_metrics::RUNNING) {
        parts.push(format!("running {v:.0}"));
    }
    if let Some(v) = gauge(server_metrics::WAITING) {
        parts.push(format!("waiting {v:.0}"));
    }
    if let Some(v) = gauge(server_metrics::KV_CACHE_USAGE) {
        parts.push(format!("KV cache {:.0}%", v * 100.0));
    }
    let grown = |name: &str| {
        let now = last.counters.get(name)?;
        Some(now - first.counters.get(name).copied().unwrap_or(0.0))
    };
    if let (Some(hits), Some(queries)) = (
        grown(server_metrics::vllm::PREFIX_CACHE_HITS),
        grown(server_metrics::vllm::PREFIX_CACHE_QUERIES),
    ) {
        if queries > 0.0 {
            parts.push(format!(
                "prefix-cache hits {:.0}% this run",
                hits / queries * 100.0
            ));
        }
    }
    if parts.is_empty() {
        "no running/waiting/KV figures in its /metrics".to_string()
    } else {
        parts.join("  ")
    }
}

/// The GPUs' figures from their exporters' first and newest scrapes (`--gpu-telemetry`, DCGM
/// names): how many GPUs, their power summed and their utilisation averaged at the newest
/// scrape, and the energy their counters grew by since the first (the run's so far: the
/// first scrape is taken just before the run). `None` while no exporter reports a GPU.
pub fn gpu_line(scrapes: &[(Scrape, Scrape)]) -> Option<String> {
    use server_metrics::gpu::dcgm;
    let mut gpus = std::collections::BTreeSet::new();
    let mut power: Option<f64> = None;
    let mut util = Vec::new();
    let mut energy_mj: Option<f64> = None;
    for (k, (first, last)) in scrapes.iter().enumerate() {
        let of = |s: &Scrape, name: &str| s.per_gpu.get(name).cloned().unwrap_or_default();
        for name in [
            dcgm::POWER_USAGE,
            dcgm::GPU_UTIL,
            dcgm::TOTAL_ENERGY_CONSUMPTION,
        ] {
            gpus.extend(of(last, name).into_keys().map(|g| (k, g)));
        }
        for w in of(last, dcgm::POWER_USAGE).values() {
            *power.get_or_insert(0.0) += w;
        }
        util.extend(of(last, dcgm::GPU_UTIL).into_values());
        let before = of(first, dcgm::TOTAL_ENERGY_CONSUMPTION);
        for (gpu, now) in of(last, dcgm::TOTAL_ENERGY_CONSUMPTION) {
            if let Some(then) = before.get(&gpu).filter(|then| **then <= now) {
                *energy_mj.get_or_insert(0.0) += now - then;
            }
        }
    }
    if gpus.is_empty() {
        return None;
    }
    let n = gpus.len();
    let mut parts = vec![format!("{n} GPU{}", if n == 1 { "" } else { "s" })];
    if let Some(w) = power {
        parts.push(format!("power {w:.0} W"));
    }
    if !util.is_empty() {
        let mean = util.iter().sum::<f64>() / util.len() as f64;
        parts.push(format!("utilisation {mean:.1}%"));
    }
    if let Some(mj) = energy_mj {
        let j = mj / 1e3;
        parts.push(if j < 1e3 {
            format!("energy {j:.1} J this run")
        } else {
            format!("energy {:.2} kJ this run", j / 1e3)
        });
    }
    Some(parts.join("  "))
}

/// Everything one frame shows.
struct View<'a> {
    labels: &'a RunLabels,
    /// The run's `--duration`, if any: the gauge then shows time.
    time_bound: Option<Duration>,
    live: &'a LiveRun,
    elapsed: Duration,
    interrupted: bool,
    window: Window,
    runs_done: &'a [(RunLabels, Snapshot)],
    /// The server's first and newest scrape of the run, when scraped.
    server: Option<(Scrape, Scrape)>,
    /// Lines of the GPU figures (0 without `--gpu-telemetry`).
    gpu_rows: u16,
    /// Each GPU exporter's first and newest scrape (those scraped so far).
    gpus: Vec<(Scrape, Scrape)>,
}

impl View<'_> {
    fn draw(&self, f: &mut Frame<'_>) {
        let area = f.area();
        let s = &self.window.now;
        let mut title = format!(
            " vllm-bench · {} · run {} ",
            self.labels.run, self.labels.point
        );
        if !self.labels.shard.is_empty() {
            title.push_str(&format!("· shard {} ", self.labels.shard));
        }
        let block = Block::default().borders(Borders::ALL).title(title);
        let inner = block.inner(area);
        f.render_widget(block, area);
        let rows = ratatui::layout::Layout::vertical([
            Constraint::Length(1), // gauge
            Constraint::Length(2), // requests
            Constraint::Length(1), // throughput
            Constraint::Length(6), // latency table
            Constraint::Length(2), // client health
            Constraint::Length(1), // server
            Constraint::Length(self.gpu_rows),
            Constraint::Min(0), // runs done
        ])
        .split(inner);
        f.render_widget(self.gauge(s), rows[0]);
        f.render_widget(Paragraph::new(self.requests(s)), rows[1]);
        f.render_widget(Paragraph::new(self.throughput()), rows[2]);
        f.render_widget(self.latencies(), rows[3]);
        f.render_widget(Paragraph::new(self.health()), rows[4]);
        f.render_widget(Paragraph::new(self.server()), rows[5]);
        if self.gpu_rows > 0 {
            let line = gpu_line(&self.gpus).unwrap_or_else(|| "not scraped (yet)".into());
            f.render_widget(Paragraph::new(format!("GPU       {line}")), rows[6]);
        }
        if !self.runs_done.is_empty() {
            f.render_widget(self.done_table(), rows[7]);
        }
        // The cursor stays visible, at the bottom of the dashboard: nothing to restore.
        f.set_cursor_position(Position::new(area.x, area.bottom().saturating_sub(1)));
    }

    fn gauge(&self, s: &Snapshot) -> Gauge<'static> {
        let secs = self.elapsed.as_secs();
        let (ratio, label) = match self.time_bound {
            Some(bound) => {
                let b = bound.as_secs_f64().max(1e-9);
                (
                    (self.elapsed.as_secs_f64() / b).min(1.0),
                    format!("{secs} s of {} s", bound.as_secs()),
                )
            }
            None => {
                let finished = s.completed + s.failed + s.cancelled;
                (
                    finished as f64 / (s.planned.max(1)) as f64,
                    format!("{finished} of {} requests · {secs} s", s.planned),
                )
            }
        };
        let label = if self.interrupted {
            format!("{label} · stopping (Ctrl-C): requests in flight get the grace period")
        } else {
            label
        };
        Gauge::default()
            .ratio(ratio.clamp(0.0, 1.0))
            .label(label)
            .use_unicode(true)
    }

    fn requests(&self, s: &Snapshot) -> Vec<Line<'static>> {
        let mut failed = format!("failed {}", s.failed);
        if !s.reasons.is_empty() {
            let reasons: Vec<String> = s.reasons.iter().map(|(r, n)| format!("{r} {n}")).collect();
            failed.push_str(&format!(" ({})", reasons.join(", ")));
        }
        vec![
            Line::from(format!(
                "Requests  planned {}  sent {}  completed {}  in flight {}  cancelled {}",
                s.planned,
                s.sent,
                s.completed,
                s.in_flight(),
                s.cancelled
            )),
            Line::from(format!("          {failed}")),
        ]
    }

    fn throughput(&self) -> Line<'static> {
        let w = &self.window;
        match &w.then {
            Some((dt, then)) if dt.as_secs_f64() >= 0.5 => {
                let secs = dt.as_secs_f64();
                let rate = |a: u64, b: u64| a.saturating_sub(b) as f64 / secs;
                Line::from(format!(
                    "Last {:.0} s   {:.1} req/s completed   {:.1} output tok/s   {:.1} prompt tok/s",
                    secs,
                    rate(w.now.completed, then.completed),
                    rate(w.now.tokens_out, then.tokens_out),
                    rate(w.now.tokens_in, then.tokens_in),
                ))
            }
            _ => Line::from("Last seconds   (measuring)"),
        }
    }

    fn latencies(&self) -> Table<'static> {
        let w = &self.window;
        let header = Row::new(vec![
            Cell::from("Latency"),
            Cell::from("last 10 s p50"),
            Cell::from("p99"),
            Cell::from("run p50"),
            Cell::from("p99"),
            Cell::from("count"),
        ])
        .style(Style::default().add_modifier(Modifier::BOLD));
        let rows = [
            (Latency::Ttft, "TTFT"),
            (Latency::Tpot, "TPOT"),
            (Latency::Itl, "ITL"),
            (Latency::E2el, "E2EL"),
        ]
        .map(|(l, name)| {
            let run = w.now.latency(l);
            let recent = match &w.then {
                Some((_, then)) => run.since(then.latency(l)),
                None => run.clone(),
            };
            Row::new(vec![
                Cell::from(name),
                Cell::from(latency(recent.quantile_ns(0.5))),
                Cell::from(latency(recent.quantile_ns(0.99))),
                Cell::from(latency(run.quantile_ns(0.5))),
                Cell::from(latency(run.quantile_ns(0.99))),
                Cell::from(run.count.to_string()),
            ])
        });
        Table::new(
            rows,
            [
                Constraint::Length(8),
                Constraint::Length(14),
                Constraint::Length(10),
                Constraint::Length(10),
                Constraint::Length(10),
                Constraint::Min(8),
            ],
        )
        .header(header)
    }

    fn health(&self) -> Vec<Line<'static>> {
        let w = &self.window;
        let lag = w.now.latency(Latency::DispatchLag);
        let recent_lag = match &w.then {
            Some((_, then)) => lag.since(then.latency(Latency::DispatchLag)),
            None => lag.clone(),
        };
        let busy: Vec<String> = match &w.then {
            Some((dt, then)) if dt.as_secs_f64() >= 0.5 => w
                .now
                .busy_ns
                .iter()
                .zip(&then.busy_ns)
                .map(|(a, b)| {
                    let pct = a.saturating_sub(*b) as f64 / dt.as_nanos() as f64 * 100.0;
                    format!("{pct:.0}%")
                })
                .collect(),
            _ => vec!["-".into(); self.live.snapshot().busy_ns.len()],
        };
        vec![
            Line::from(format!(
                "Client    dispatch lag p99 last 10 s {}, run {}",
                latency(recent_lag.quantile_ns(0.99)),
                latency(lag.quantile_ns(0.99)),
            )),
            Line::from(format!("          core busy {}", busy.join(" "))),
        ]
    }

    fn server(&self) -> Line<'static> {
        match &self.server {
            Some((first, last)) => Line::from(format!("Server    {}", server_line(first, last))),
            None => Line::from("Server    not scraped (yet)"),
        }
    }

    fn done_table(&self) -> Table<'static> {
        let header = Row::new(vec![
            "Run done",
            "completed",
            "failed",
            "cancelled",
            "out tokens",
            "TTFT p50",
            "ITL p99",
        ])
        .style(Style::default().add_modifier(Modifier::BOLD));
        let skip = self.runs_done.len().saturating_sub(DONE_ROWS);
        let rows: Vec<Row<'static>> = self.runs_done[skip..]
            .iter()
            .map(|(l, s)| {
                Row::new(vec![
                    l.point.clone(),
                    s.completed.to_string(),
                    s.failed.to_string(),
                    s.cancelled.to_string(),
                    s.tokens_out.to_string(),
                    latency(s.latency(Latency::Ttft).quantile_ns(0.5)),
                    latency(s.latency(Latency::Itl).quantile_ns(0.99)),
                ])
            })
            .collect();
        Table::new(rows, [Constraint::Length(10); 7])
            .header(header)
            .block(Block::default().borders(Borders::TOP).title(" Runs done "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_show_two_significant_digits() {
        assert_eq!(latency(None), "-");
        assert_eq!(latency(Some(1_200)), "1.2 µs");
        assert_eq!(latency(Some(12_000_000)), "12 ms");
        assert_eq!(latency(Some(150_000_000)), "150 ms");
        assert_eq!(latency(Some(2_500_000_000)), "2.5 s");
    }

    #[test]
    fn the_locale_decides_utf8_in_posix_order() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |v: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == v)
                    .map(|(_, x)| x.to_string())
            }
        };
        assert!(locale_is_utf8(env(&[("LANG", "en_US.UTF-8")])));
        assert!(locale_is_utf8(env(&[("LC_ALL", "C.utf8"), ("LANG", "C")])));
        assert!(!locale_is_utf8(env(&[
            ("LC_ALL", "C"),
            ("LANG", "en_US.UTF-8")
        ])));
        assert!(!locale_is_utf8(env(&[])), "no locale is C: not UTF-8");
        assert!(locale_is_utf8(env(&[
            ("LC_ALL", ""),
            ("LANG", "en_US.UTF-8")
        ])));
    }

    #[test]
    fn the_server_line_shows_what_the_server_exposes() {
        let page = |hits: u32, queries: u32| {
            crate::server_metrics::exposition::parse(&format!(
                "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 3\n\
                 # TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting 1\n\
                 # TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc 0.25\n\
                 # TYPE vllm:prefix_cache_hits counter\nvllm:prefix_cache_hits_total {hits}\n\
                 # TYPE vllm:prefix_cache_queries counter\n\
                 vllm:prefix_cache_queries_total {queries}\n"
            ))
            .expect("page")
        };
        assert_eq!(
            server_line(&page(10, 100), &page(40, 200)),
            "running 3  waiting 1  KV cache 25%  prefix-cache hits 30% this run"
        );
        let empty = crate::server_metrics::exposition::parse("").expect("empty page");
        assert_eq!(
            server_line(&empty, &empty),
            "no running/waiting/KV figures in its /metrics"
        );
    }

    #[test]
    fn the_gpu_line_sums_power_averages_utilisation_and_counts_energy_since_the_first() {
        let page = |generated| {
            let mut out = Vec::new();
            crate::mock::dcgm::render(&mut out, 2, generated);
            crate::server_metrics::exposition::parse(std::str::from_utf8(&out).unwrap())
                .expect("page")
        };
        // The mock's GPUs: 100 W and 110 W, 50 % and 51 %, 50 mJ a token each.
        assert_eq!(
            gpu_line(&[(page(0), page(10_000))]).as_deref(),
            Some("2 GPUs  power 210 W  utilisation 50.5%  energy 1.00 kJ this run")
        );
        assert_eq!(
            gpu_line(&[(page(0), page(20))]).as_deref(),
            Some("2 GPUs  power 210 W  utilisation 50.5%  energy 2.0 J this run")
        );
        let server_only = crate::server_metrics::exposition::parse(
            "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 3\n",
        )
        .expect("page");
        assert_eq!(gpu_line(&[(server_only.clone(), server_only)]), None);
        assert_eq!(gpu_line(&[]), None);
    }

    #[test]
    fn a_drawn_frame_shows_the_gpu_line() {
        use ratatui::backend::TestBackend;
        let mut out = Vec::new();
        crate::mock::dcgm::render(&mut out, 1, 0);
        let gpu = crate::server_metrics::exposition::parse(std::str::from_utf8(&out).unwrap())
            .expect("page");
        let live = crate::engine::live::LiveRun::new(1, 10);
        let labels = RunLabels {
            run: "mock-model".into(),
            point: "0".into(),
            shard: String::new(),
        };
        let view = View {
            labels: &labels,
            time_bound: None,
            live: &live,
            elapsed: Duration::from_secs(3),
            interrupted: false,
            window: History::default().push(Instant::now(), live.snapshot()),
            runs_done: &[],
            server: None,
            gpu_rows: 1,
            gpus: vec![(gpu.clone(), gpu)],
        };
        let mut terminal =
            ratatui::Terminal::new(TestBackend::new(100, BASE_HEIGHT + 1)).expect("terminal");
        terminal.draw(|f| view.draw(f)).expect("drawn");
        let text: String = terminal
            .backend()
            .buffer()
            .content()
            .iter()
            .map(|c| c.symbol())
            .collect();
        assert!(
            text.contains("GPU       1 GPU  power 100 W  utilisation 50.0%  energy 0.0 J this run"),
            "{text}"
        );
    }

    #[test]
    fn the_window_is_the_oldest_snapshot_within_ten_seconds() {
        let mut h = History::default();
        let t0 = Instant::now();
        let snap = |completed| Snapshot {
            completed,
            ..Snapshot::default()
        };
        assert!(h.push(t0, snap(0)).then.is_none());
        let w = h.push(t0 + Duration::from_secs(5), snap(50));
        assert_eq!(
            w.then.map(|(dt, s)| (dt.as_secs(), s.completed)),
            Some((5, 0))
        );
        let w = h.push(t0 + Duration::from_secs(12), snap(120));
        assert_eq!(
            w.then.map(|(dt, s)| (dt.as_secs(), s.completed)),
            Some((7, 50)),
            "the sample 12 s old fell out of the window"
        );
    }
}
