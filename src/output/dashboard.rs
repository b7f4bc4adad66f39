//! The terminal dashboard (`--ui dashboard`, the default on a terminal): a live view of the
//! run drawn a few times a second from the counters the engine's cores publish
//! ([`crate::engine::live`]) — planned and elapsed, requests by outcome and failure reason,
//! throughput and latency percentiles over the last seconds and over the run, the client's
//! health (dispatch lag, core busy), the server's and the GPUs' figures when scraped, and for
//! sweeps and repeated runs the runs done so far.
//!
//! Drawn with ratatui in an *inline* viewport on stdout (below the lines Python prints
//! before a run), not the alternate screen, and without raw mode but for the moments the
//! terminal is asked where its cursor is (`output::dashboard_terminal`, which keeps the
//! signal keys on even then): the terminal's modes are otherwise never changed, so there is
//! nothing to restore however the process ends (a second Ctrl-C exits at once from the
//! signal handler; a panic; SIGKILL). Ctrl-C is always the terminal's SIGINT and is handled
//! as without the dashboard (`modes::progress`). When the run ends the
//! viewport is cleared and the cursor put at its top, so the block prints where the
//! dashboard was, exactly as it prints without it.
//!
//! Figures never claim more precision than they have: latencies come from buckets of two
//! significant digits and are shown with two; rates over a window of a few seconds with one
//! decimal.

use crate::runtime::helper_thread::HelperThread;
use crate::runtime::stop_handle::StopHandle;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::fmt::Write as _;
use std::rc::Rc;

use ratatui::layout::{Constraint, Position, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Gauge, Paragraph};
use ratatui::{Frame, Terminal, TerminalOptions, Viewport};

use crate::engine::live::{Latency, Snapshot};
use crate::engine::Progress;
use crate::output::dashboard_terminal::DashboardBackend;
use crate::output::live_metrics::RunLabels;
use crate::output::stdio::Console;
use crate::server_metrics::{self, exposition::Scrape, LatestScrape};

/// Narrower than this the dashboard does not fit: the bar is shown instead.
pub const MIN_WIDTH: u16 = 80;
/// Runs done shown in the table (the latest ones).
const DONE_ROWS: usize = 5;
/// Lines the dashboard takes without its table of runs done.
const BASE_HEIGHT: u16 = 18;
/// How often it reads the counters (three times a second); it redraws only what changed.
const TICK: Duration = Duration::from_millis(333);
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
    thread: HelperThread,
}

type Term = Terminal<DashboardBackend>;

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
            DashboardBackend::new(out),
            TerminalOptions {
                viewport: Viewport::Inline(height),
            },
        )
        .map_err(|e| Unfit::Cursor(e.to_string()))?;
        let thread = HelperThread::spawn("dashboard", move |done| {
            run(terminal, progress, labels, scrapes, &stop, done)
        })
        .map_err(|e| Unfit::Cursor(e.to_string()))?;
        Ok(Dashboard { thread })
    }

    /// Ends the dashboard once the run returned: a last frame, then the viewport cleared.
    pub fn finish(self) {
        self.thread.finish();
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

/// The dashboard thread: redraw every tick until told to finish, then clear. A tick reads
/// the counters into the snapshot it keeps, rewrites the frame's text in place and draws it
/// only when it changed; the server's and the GPUs' lines are
/// rendered again only when a new scrape came.
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
    let fixed = Fixed::new(&labels, &live_done(), gpu_height(&gpus));
    let mut history = History::default();
    let mut snapshot = Snapshot::default();
    let (mut text, mut shown) = (FrameText::default(), None::<FrameText>);
    let mut scrapes = Scrapes::new(server, gpus);
    let mut layout = Rows::default();
    let mut scratch = String::new();
    let mut top = Position::ORIGIN;
    loop {
        let finishing = done.load(Ordering::Relaxed);
        let now = Instant::now();
        live.snapshot_into(&mut snapshot);
        history.push(now, &snapshot);
        let view = View {
            time_bound: progress.time_bound(),
            elapsed: now - started,
            interrupted: stop.stop_requested(),
            now: &snapshot,
            then: history.oldest(now),
        };
        text.fill(&view, &mut scratch);
        scrapes.refresh(&mut text);
        // A resized terminal is redrawn with the next change (the gauge's seconds, at most
        // a second later): asking its size every tick costs more than the frame.
        if shown.as_ref() != Some(&text) {
            let drawn = terminal.draw(|f| {
                // The viewport's top on the screen (a completed frame's area is the screen).
                top = f.area().as_position();
                draw(f, &fixed, &text, &mut layout);
            });
            if drawn.is_err() {
                // Stdout is gone: nothing more to draw on.
                return;
            }
            match &mut shown {
                Some(t) => t.clone_from(&text),
                None => shown = Some(text.clone()),
            }
        }
        if finishing {
            break;
        }
        std::thread::sleep(TICK);
    }
    let _ = terminal.clear();
    let _ = terminal.set_cursor_position(top);
    let _ = terminal.show_cursor();
}

/// Snapshots of the last [`WINDOW`], one a second, for the windowed figures.
#[derive(Default)]
struct History {
    samples: VecDeque<(Instant, Snapshot)>,
}

impl History {
    /// Keeps `snap`, taken `at`, when the newest kept is a second old (copying it then
    /// only); forgets those older than the window.
    fn push(&mut self, at: Instant, snap: &Snapshot) {
        let due = self
            .samples
            .back()
            .is_none_or(|(t, _)| at.saturating_duration_since(*t) >= Duration::from_secs(1));
        if due {
            // The oldest one out of the window makes room for the new one.
            let reused = match self.samples.front() {
                Some((t, _)) if at.saturating_duration_since(*t) > WINDOW => {
                    self.samples.pop_front()
                }
                _ => None,
            };
            let mut kept = reused.map(|(_, s)| s).unwrap_or_default();
            kept.clone_from(snap);
            self.samples.push_back((at, kept));
        }
        while self
            .samples
            .front()
            .is_some_and(|(t, _)| at.saturating_duration_since(*t) > WINDOW)
        {
            self.samples.pop_front();
        }
    }

    /// The oldest snapshot within the window before `at`, and how old it is.
    fn oldest(&self, at: Instant) -> Option<(Duration, &Snapshot)> {
        self.samples
            .front()
            .map(|(t, s)| (at.saturating_duration_since(*t), s))
            .filter(|(age, _)| !age.is_zero())
    }
}

/// What one tick reads.
struct View<'a> {
    /// The run's `--duration`, if any: the gauge then shows time.
    time_bound: Option<Duration>,
    elapsed: Duration,
    interrupted: bool,
    /// The counters now, and the oldest snapshot of the window with its age.
    now: &'a Snapshot,
    then: Option<(Duration, &'a Snapshot)>,
}

/// What a dashboard shows that does not change while it is open: its title, the height of
/// its GPU line and the table of the runs done before this one.
struct Fixed {
    title: String,
    gpu_rows: u16,
    done: Vec<String>,
}

/// The latency table's columns (as wide as its figures need, one blank between).
const LATENCY_COLUMNS: [usize; 5] = [8, 14, 10, 10, 10];
/// The runs-done table's columns.
const DONE_COLUMN: usize = 10;

impl Fixed {
    fn new(labels: &RunLabels, runs_done: &[(RunLabels, Snapshot)], gpu_rows: u16) -> Fixed {
        let mut title = format!(" vllm-bench · {} · run {} ", labels.run, labels.point);
        if !labels.shard.is_empty() {
            title.push_str(&format!("· shard {} ", labels.shard));
        }
        let mut done = Vec::new();
        if !runs_done.is_empty() {
            let header = [
                "Run done",
                "completed",
                "failed",
                "cancelled",
                "out tokens",
                "TTFT p50",
                "ITL p99",
            ];
            done.push(columns(header.iter().copied(), &[DONE_COLUMN; 6]));
            let skip = runs_done.len().saturating_sub(DONE_ROWS);
            for (l, s) in &runs_done[skip..] {
                let [ttft] = s.latency(Latency::Ttft).quantiles_since(None, [0.5]);
                let [itl] = s.latency(Latency::Itl).quantiles_since(None, [0.99]);
                let cells = [
                    l.point.clone(),
                    s.completed.to_string(),
                    s.failed.to_string(),
                    s.cancelled.to_string(),
                    s.tokens_out.to_string(),
                    latency(ttft),
                    latency(itl),
                ];
                done.push(columns(cells.iter().map(String::as_str), &[DONE_COLUMN; 6]));
            }
        }
        Fixed {
            title,
            gpu_rows,
            done,
        }
    }
}

/// `cells` in columns of `widths` (the last as wide as it is), one blank between, each cut
/// to its width.
fn columns<'c>(cells: impl Iterator<Item = &'c str>, widths: &[usize]) -> String {
    let mut out = String::new();
    for (k, cell) in cells.enumerate() {
        match widths.get(k) {
            Some(&w) => {
                let cut: String = cell.chars().take(w).collect();
                let _ = write!(out, "{cut:<w$} ");
            }
            None => out.push_str(cell),
        }
    }
    out.trim_end().to_string()
}

/// The text of one frame. Each tick rewrites it in place (its strings keep their capacity),
/// and a text equal to the one shown is not drawn again.
#[derive(Debug, Clone, Default, PartialEq)]
struct FrameText {
    ratio: f64,
    gauge: String,
    requests: [String; 2],
    throughput: String,
    /// The header, then TTFT, TPOT, ITL and E2EL.
    latencies: [String; 5],
    health: [String; 2],
    server: String,
    gpu: String,
}

impl FrameText {
    fn fill(&mut self, v: &View<'_>, scratch: &mut String) {
        let s = v.now;
        let secs = v.elapsed.as_secs();
        let g = &mut self.gauge;
        g.clear();
        self.ratio = match v.time_bound {
            Some(bound) => {
                let _ = write!(g, "{secs} s of {} s", bound.as_secs());
                v.elapsed.as_secs_f64() / bound.as_secs_f64().max(1e-9)
            }
            None => {
                let finished = s.completed + s.failed + s.cancelled;
                let _ = write!(g, "{finished} of {} requests · {secs} s", s.planned);
                finished as f64 / s.planned.max(1) as f64
            }
        }
        .clamp(0.0, 1.0);
        if v.interrupted {
            g.push_str(" · stopping (Ctrl-C): requests in flight get the grace period");
        }
        let [requests, failed] = &mut self.requests;
        requests.clear();
        let _ = write!(
            requests,
            "Requests  planned {}  sent {}  completed {}  in flight {}  cancelled {}",
            s.planned,
            s.sent,
            s.completed,
            s.in_flight(),
            s.cancelled
        );
        failed.clear();
        let _ = write!(failed, "          failed {}", s.failed);
        for (k, (reason, n)) in s.reasons.iter().enumerate() {
            let _ = write!(failed, "{}{reason} {n}", if k == 0 { " (" } else { ", " });
        }
        if !s.reasons.is_empty() {
            failed.push(')');
        }
        self.throughput.clear();
        match v.then {
            Some((dt, then)) if dt.as_secs_f64() >= 0.5 => {
                let secs = dt.as_secs_f64();
                let rate = |a: u64, b: u64| a.saturating_sub(b) as f64 / secs;
                let _ = write!(
                    self.throughput,
                    "Last {:.0} s   {:.1} req/s completed   {:.1} output tok/s   {:.1} prompt tok/s",
                    secs,
                    rate(s.completed, then.completed),
                    rate(s.tokens_out, then.tokens_out),
                    rate(s.tokens_in, then.tokens_in),
                );
            }
            _ => self.throughput.push_str("Last seconds   (measuring)"),
        }
        if self.latencies[0].is_empty() {
            let header = ["Latency", "last 10 s p50", "p99", "run p50", "p99", "count"];
            self.latencies[0] = columns(header.into_iter(), &LATENCY_COLUMNS);
        }
        let names = [
            (Latency::Ttft, "TTFT"),
            (Latency::Tpot, "TPOT"),
            (Latency::Itl, "ITL"),
            (Latency::E2el, "E2EL"),
        ];
        for ((l, name), out) in names.into_iter().zip(&mut self.latencies[1..]) {
            let run = s.latency(l);
            let [w50, w99] = run.quantiles_since(v.then.map(|t| t.1.latency(l)), [0.5, 0.99]);
            let [r50, r99] = run.quantiles_since(None, [0.5, 0.99]);
            out.clear();
            let _ = write!(out, "{name:<8} ");
            for (ns, w) in [w50, w99, r50, r99].into_iter().zip(&LATENCY_COLUMNS[1..]) {
                scratch.clear();
                write_latency(scratch, ns);
                let _ = write!(out, "{scratch:<w$} ");
            }
            let _ = write!(out, "{}", run.count);
        }
        let lag = s.latency(Latency::DispatchLag);
        let [recent] =
            lag.quantiles_since(v.then.map(|t| t.1.latency(Latency::DispatchLag)), [0.99]);
        let [whole] = lag.quantiles_since(None, [0.99]);
        let [client, busy] = &mut self.health;
        client.clear();
        client.push_str("Client    dispatch lag p99 last 10 s ");
        write_latency(client, recent);
        client.push_str(", run ");
        write_latency(client, whole);
        busy.clear();
        busy.push_str("          core busy");
        for (k, now) in s.busy_ns.iter().enumerate() {
            match v.then {
                Some((dt, then)) if dt.as_secs_f64() >= 0.5 => {
                    let b = then.busy_ns.get(k).copied().unwrap_or(0);
                    let pct = now.saturating_sub(b) as f64 / dt.as_nanos() as f64 * 100.0;
                    let _ = write!(busy, " {pct:.0}%");
                }
                _ => busy.push_str(" -"),
            }
        }
    }
}

/// The server's and the GPU exporters' newest scrapes, and how many of each were rendered
/// into the frame's lines.
struct Scrapes {
    server: Option<(Arc<LatestScrape>, u64)>,
    gpus: Vec<(Arc<LatestScrape>, u64)>,
}

impl Scrapes {
    fn new(server: Option<Arc<LatestScrape>>, gpus: Vec<Arc<LatestScrape>>) -> Scrapes {
        // `u64::MAX`: not rendered yet.
        Scrapes {
            server: server.map(|s| (s, u64::MAX)),
            gpus: gpus.into_iter().map(|g| (g, u64::MAX)).collect(),
        }
    }

    /// Renders the server's and the GPUs' lines again when a new scrape came.
    fn refresh(&mut self, text: &mut FrameText) {
        match &mut self.server {
            Some((latest, seen)) if latest.published() != *seen => {
                *seen = latest.published();
                text.server = match latest.get() {
                    Some((first, last)) => format!("Server    {}", server_line(&first, &last)),
                    None => "Server    not scraped (yet)".into(),
                };
            }
            Some(_) => {}
            None if text.server.is_empty() => text.server = "Server    not scraped (yet)".into(),
            None => {}
        }
        let changed = self.gpus.iter().any(|(g, seen)| g.published() != *seen);
        if changed || text.gpu.is_empty() {
            for (g, seen) in &mut self.gpus {
                *seen = g.published();
            }
            let scrapes: Vec<(Scrape, Scrape)> =
                self.gpus.iter().filter_map(|(g, _)| g.get()).collect();
            let line = gpu_line(&scrapes).unwrap_or_else(|| "not scraped (yet)".into());
            text.gpu = format!("GPU       {line}");
        }
    }
}

/// The rows of the layout, solved once per area (the solver is most of a frame's cost).
#[derive(Default)]
struct Rows {
    solved: Option<(Rect, u16, Rc<[Rect]>)>,
}

impl Rows {
    fn of(&mut self, inner: Rect, gpu_rows: u16) -> Rc<[Rect]> {
        match &self.solved {
            Some((area, g, rows)) if *area == inner && *g == gpu_rows => rows.clone(),
            _ => {
                let rows = ratatui::layout::Layout::vertical([
                    Constraint::Length(1), // gauge
                    Constraint::Length(2), // requests
                    Constraint::Length(1), // throughput
                    Constraint::Length(6), // latency table
                    Constraint::Length(2), // client health
                    Constraint::Length(1), // server
                    Constraint::Length(gpu_rows),
                    Constraint::Min(0), // runs done
                ])
                .split(inner);
                self.solved = Some((inner, gpu_rows, rows.clone()));
                rows
            }
        }
    }
}

/// Each of `l` a line, borrowed.
fn lines(l: &[String]) -> Vec<Line<'_>> {
    l.iter().map(|s| Line::from(s.as_str())).collect()
}

/// Draws `text` on the frame.
fn draw(f: &mut Frame<'_>, fixed: &Fixed, text: &FrameText, layout: &mut Rows) {
    let area = f.area();
    let block = Block::default()
        .borders(Borders::ALL)
        .title(fixed.title.as_str());
    let inner = block.inner(area);
    f.render_widget(block, area);
    let rows = layout.of(inner, fixed.gpu_rows);
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let gauge = Gauge::default()
        .ratio(text.ratio)
        .label(text.gauge.as_str())
        .use_unicode(true);
    f.render_widget(gauge, rows[0]);
    f.render_widget(Paragraph::new(lines(&text.requests)), rows[1]);
    f.render_widget(Paragraph::new(text.throughput.as_str()), rows[2]);
    let mut latencies = lines(&text.latencies);
    latencies[0] = Line::styled(text.latencies[0].as_str(), bold);
    f.render_widget(Paragraph::new(latencies), rows[3]);
    f.render_widget(Paragraph::new(lines(&text.health)), rows[4]);
    f.render_widget(Paragraph::new(text.server.as_str()), rows[5]);
    if fixed.gpu_rows > 0 {
        f.render_widget(Paragraph::new(text.gpu.as_str()), rows[6]);
    }
    if let Some((header, done)) = fixed.done.split_first() {
        let mut table = vec![Line::styled(header.as_str(), bold)];
        table.extend(done.iter().map(|l| Line::from(l.as_str())));
        let block = Block::default().borders(Borders::TOP).title(" Runs done ");
        f.render_widget(Paragraph::new(table).block(block), rows[7]);
    }
    // The cursor stays visible, at the bottom of the dashboard: nothing to restore.
    f.set_cursor_position(Position::new(area.x, area.bottom().saturating_sub(1)));
}

/// Two significant digits of a latency in ns (a bucket's lower bound has exactly two).
pub fn latency(ns: Option<u64>) -> String {
    let mut out = String::new();
    write_latency(&mut out, ns);
    out
}

/// [`latency`] written at the end of `out`.
fn write_latency(out: &mut String, ns: Option<u64>) {
    let Some(ns) = ns else {
        out.push('-');
        return;
    };
    let (v, unit) = match ns {
        n if n < 1_000_000 => (n as f64 / 1e3, "µs"),
        n if n < 1_000_000_000 => (n as f64 / 1e6, "ms"),
        n => (n as f64 / 1e9, "s"),
    };
    let _ = if v < 10.0 {
        write!(out, "{v:.1} {unit}")
    } else {
        write!(out, "{v:.0} {unit}")
    };
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

    /// The frame of `view` with `gpus` on a 100-column test terminal, as text.
    fn frame(
        view: &View<'_>,
        gpus: Option<&LatestScrape>,
        runs_done: &[(RunLabels, Snapshot)],
    ) -> String {
        use ratatui::backend::TestBackend;
        let labels = RunLabels {
            run: "mock-model".into(),
            point: "0".into(),
            shard: String::new(),
        };
        let gpu_rows = u16::from(gpus.is_some());
        let fixed = Fixed::new(&labels, runs_done, gpu_rows);
        let mut text = FrameText::default();
        text.fill(view, &mut String::new());
        let gpus: Vec<Arc<LatestScrape>> = gpus
            .map(|g| {
                let latest = Arc::new(LatestScrape::default());
                if let Some((first, last)) = g.get() {
                    latest.publish_for_test(&first);
                    latest.publish_for_test(&last);
                }
                latest
            })
            .into_iter()
            .collect();
        Scrapes::new(None, gpus).refresh(&mut text);
        let height = BASE_HEIGHT + gpu_rows + done_height(runs_done.len());
        let mut terminal = ratatui::Terminal::new(TestBackend::new(100, height)).expect("terminal");
        terminal
            .draw(|f| draw(f, &fixed, &text, &mut Rows::default()))
            .expect("drawn");
        let buffer = terminal.backend().buffer();
        let mut out = String::new();
        for (k, c) in buffer.content().iter().enumerate() {
            out.push_str(c.symbol());
            if (k + 1) % 100 == 0 {
                out.push('\n');
            }
        }
        out
    }

    #[test]
    fn a_drawn_frame_shows_the_run_the_latencies_and_the_gpu_line() {
        let mut out = Vec::new();
        crate::mock::dcgm::render(&mut out, 1, 0);
        let gpu = crate::server_metrics::exposition::parse(std::str::from_utf8(&out).unwrap())
            .expect("page");
        let latest = LatestScrape::default();
        latest.publish_for_test(&gpu);
        let live = crate::engine::live::LiveRun::new(1, 10);
        live.core(0).sent();
        live.core(0).completed(crate::engine::live::Finished {
            prompt_tokens: 5,
            output_tokens: 3,
            ttft_ns: Some(12_340_000),
            tpot_ns: Some(2_000_000),
            e2el_ns: 30_000_000,
            gaps: [2_000_000u64].into_iter(),
        });
        let now = live.snapshot();
        let view = View {
            time_bound: None,
            elapsed: Duration::from_secs(3),
            interrupted: false,
            now: &now,
            then: None,
        };
        let done = [(
            RunLabels {
                run: "m".into(),
                point: "sweep-point-long-name".into(),
                shard: String::new(),
            },
            now.clone(),
        )];
        let text = frame(&view, Some(&latest), &done);
        for line in [
            "GPU       1 GPU  power 100 W  utilisation 50.0%  energy 0.0 J this run",
            "1 of 10 requests · 3 s",
            "Requests  planned 10  sent 1  completed 1  in flight 0  cancelled 0",
            "Latency  last 10 s p50  p99        run p50    p99        count",
            "TTFT     12 ms          12 ms      12 ms      12 ms      1",
            "Server    not scraped (yet)",
            "Run done   completed  failed     cancelled  out tokens TTFT p50   ITL p99",
            "sweep-poin 1          0          0          3          12 ms      1.9 ms",
        ] {
            assert!(text.contains(line), "{line:?} in\n{text}");
        }
    }

    #[test]
    fn a_frame_is_rewritten_in_place_and_equal_when_nothing_changed() {
        let live = crate::engine::live::LiveRun::new(2, 10);
        let now = live.snapshot();
        let view = |elapsed| View {
            time_bound: None,
            elapsed: Duration::from_secs(elapsed),
            interrupted: false,
            now: &now,
            then: None,
        };
        let (mut a, mut b) = (FrameText::default(), FrameText::default());
        let mut scratch = String::new();
        a.fill(&view(3), &mut scratch);
        b.fill(&view(3), &mut scratch);
        assert_eq!(a, b);
        assert_eq!(a.health[1], "          core busy - -");
        let capacity = a.requests[0].capacity();
        a.fill(&view(4), &mut scratch);
        assert_ne!(a, b, "the elapsed seconds changed");
        assert_eq!(a.requests[0].capacity(), capacity, "rewritten in place");
    }

    #[test]
    fn the_window_is_the_oldest_snapshot_within_ten_seconds() {
        let mut h = History::default();
        let t0 = Instant::now();
        let snap = |completed| Snapshot {
            completed,
            ..Snapshot::default()
        };
        let mut at = |secs: u64, completed| {
            let t = t0 + Duration::from_secs(secs);
            h.push(t, &snap(completed));
            h.oldest(t).map(|(dt, s)| (dt.as_secs(), s.completed))
        };
        assert_eq!(at(0, 0), None);
        assert_eq!(at(5, 50), Some((5, 0)));
        assert_eq!(
            at(12, 120),
            Some((7, 50)),
            "the sample 12 s old fell out of the window"
        );
    }
}
