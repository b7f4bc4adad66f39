//! The running server: worker threads (one monoio runtime and one `SO_REUSEPORT` listener
//! each, optionally pinned), the shared state they read (`ctx`), and a shutdown that never
//! hangs.
//!
//! Startup binds worker 0 first (port 0 → an ephemeral port), learns its address, then
//! binds the others to the same port; `start` returns once every worker is listening.
//! Shutdown sets a flag that each worker's stop watcher polls every [`STOP_POLL`] (a crash
//! that stays down sets it too; the watcher also makes the cut of a crash another worker
//! triggered); the watcher then cancels the accept in flight and the accept loop returns once that accept
//! has completed, `block_on` returns, and dropping the runtime drops every connection task
//! (closing its socket), so in-flight streams, stalls and idle keep-alive connections
//! cannot delay the join.
//!
//! The accept is cancelled and awaited, never dropped: on io_uring, an accept dropped while
//! its completion races in loses the accepted descriptor (monoio discards the result of an
//! abandoned op), leaving a client connected to a socket nobody serves or closes.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use monoio::io::{CancelHandle, Canceller};
use monoio::net::{ListenerOpts, TcpListener};

use rayon::iter::ParallelIterator;

use super::body;
use super::config::MockConfig;
use super::conn;
use super::ctx::{Shared, WorkerCtx};
use super::emission::TimingReport;
use super::lifecycle::Lifecycle;
use super::stats::{LoggedRequest, MockStats};
use crate::runtime::timer::Timers;
use crate::runtime::{build_runtime, resolve_driver, ResolvedDriver};

/// How often an idle worker checks the stop flag (bounds shutdown latency).
pub const STOP_POLL: Duration = Duration::from_millis(10);
/// Bound on the 1 ms waits for connections to close at shutdown.
const DRAIN_TICKS: usize = 1000;
/// Listen backlog: thousands of clients may connect at once.
const BACKLOG: i32 = 4096;

/// A running mock server; stops (and joins its threads) on [`MockServer::shutdown`] or drop.
#[derive(Debug)]
pub struct MockServer {
    shared: Arc<Shared>,
    addr: SocketAddr,
    driver: ResolvedDriver,
    threads: Vec<JoinHandle<()>>,
}

impl MockServer {
    /// Validates `cfg`, binds, starts the workers and returns once all are listening.
    pub fn start(cfg: MockConfig) -> io::Result<MockServer> {
        cfg.validate()?;
        // `auto` falls back to epoll silently here: the driver is part of the listening line.
        let (driver, _fallback_note) = resolve_driver(cfg.driver)
            .map_err(|e| io::Error::new(io::ErrorKind::Unsupported, e))?;
        let requested = SocketAddr::new(cfg.host, cfg.port);
        if cfg.port != 0 {
            // SO_REUSEPORT would let us silently share a port another server already
            // listens on; a plain bind first turns that into a clear error.
            drop(std::net::TcpListener::bind(requested).map_err(|e| bind_error(requested, e))?);
        }
        let workers = cfg.workers;
        let mut server = MockServer {
            shared: Arc::new(Shared::new(cfg)?),
            addr: requested,
            driver,
            threads: Vec::with_capacity(workers),
        };
        for i in 0..workers {
            // Worker 0 learns the port; the rest bind to it.
            match server.spawn_worker(i) {
                Ok(addr) => server.addr = addr,
                Err(e) => {
                    server.stop_and_join();
                    return Err(e);
                }
            }
        }
        Ok(server)
    }

    /// Starts worker `i` and waits until it listens (or failed to).
    fn spawn_worker(&mut self, i: usize) -> io::Result<SocketAddr> {
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        let shared = Arc::clone(&self.shared);
        let (bind, driver) = (self.addr, self.driver);
        let core = core_for(&shared.cfg, i);
        let handle = std::thread::Builder::new()
            .name(format!("mock-worker-{i}"))
            .spawn(move || {
                if let Some(core) = core {
                    // Pinning is best effort: an unavailable core leaves the thread unpinned.
                    core_affinity::set_for_current(core_affinity::CoreId { id: core });
                }
                let err_tx = ready_tx.clone();
                let run = block_on(driver, worker_main(i, shared, bind, ready_tx));
                if let Err(e) = run {
                    let _ = err_tx.send(Err(e));
                }
            })?;
        self.threads.push(handle);
        ready_rx
            .recv()
            .unwrap_or_else(|_| Err(io::Error::other("mock worker thread exited during startup")))
    }

    /// The bound address (with the real port when 0 was asked for).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://HOST:PORT` (`https://` with `MockConfig::tls`), with a loopback host when
    /// bound to the unspecified address.
    pub fn base_url(&self) -> String {
        let ip = match self.addr.ip() {
            IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
            ip => ip,
        };
        let scheme = if self.shared.cfg.tls { "https" } else { "http" };
        format!("{scheme}://{}", SocketAddr::new(ip, self.addr.port()))
    }

    /// The driver the workers run on.
    pub fn driver(&self) -> ResolvedDriver {
        self.driver
    }

    /// Number of worker threads.
    pub fn workers(&self) -> usize {
        self.threads.len()
    }

    /// The configuration the server runs with.
    pub fn config(&self) -> &MockConfig {
        &self.shared.cfg
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> MockStats {
        self.shared.stats()
    }

    /// Every logged request in arrival order (empty unless `request_log` is on).
    pub fn request_log(&self) -> Vec<LoggedRequest> {
        self.shared.stats.request_log()
    }

    /// What the server actually emitted for the streams completed so far (all zero unless
    /// `timing_report` is on): server TTFT, ITL and lateness, merged over the workers.
    pub fn timing_report(&self) -> TimingReport {
        self.shared.stats.emitted().report()
    }

    /// Zeroes the counters (the gauge keeps counting live requests), clears the request
    /// log, the emitted timelines and the toy prefix cache. Request sequence numbers keep running.
    pub fn reset_stats(&self) {
        self.shared.stats.reset();
        self.shared.prefix.reset();
    }

    /// Counts the prompts of `requests` (whole HTTP requests, as a client will send them)
    /// now, in parallel, so that serving them later only looks their counts up: a client that
    /// builds its requests before its clock starts keeps tokenization off the mock's cores
    /// during the run. Only with a real [`MockConfig::tokenizer`] (toy counts cost less than
    /// a lookup); requests without a JSON body are skipped.
    pub fn count_ahead<R: AsRef<[u8]> + Send>(&self, requests: impl ParallelIterator<Item = R>) {
        if self.shared.tokenizer.is_toy() {
            return;
        }
        requests.for_each(|r| {
            let r = r.as_ref();
            if let Some(at) = memchr::memmem::find(r, b"\r\n\r\n") {
                body::count_ahead(&r[at + 4..], &self.shared.tokenizer);
            }
        });
    }

    /// Stops every worker and joins them.
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        for t in self.threads.drain(..) {
            // A worker that panicked has nothing left to clean up.
            let _ = t.join();
        }
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

fn bind_error(addr: SocketAddr, e: io::Error) -> io::Error {
    io::Error::new(
        e.kind(),
        format!("mock server: cannot listen on {addr}: {e}"),
    )
}

/// The core worker `i` is pinned to, if pinning is on.
fn core_for(cfg: &MockConfig, i: usize) -> Option<usize> {
    if !cfg.pin {
        return None;
    }
    match &cfg.core_ids {
        Some(ids) => ids.get(i % ids.len()).copied(),
        None => {
            let n = core_affinity::get_core_ids().map_or(1, |c| c.len().max(1));
            Some(i % n)
        }
    }
}

/// Runs `fut` to completion on a fresh runtime of the given driver (the engine's builder).
fn block_on<F: Future<Output = ()>>(driver: ResolvedDriver, fut: F) -> io::Result<()> {
    build_runtime(driver)?.block_on(fut);
    Ok(())
}

/// One worker: bind, report, then accept until told to stop.
async fn worker_main(
    index: usize,
    shared: Arc<Shared>,
    bind: SocketAddr,
    ready: mpsc::SyncSender<io::Result<SocketAddr>>,
) {
    let opts = ListenerOpts::new()
        .reuse_port(shared.cfg.workers > 1)
        .backlog(BACKLOG);
    let listener = match TcpListener::bind_with_config(bind, &opts)
        .and_then(|l| l.local_addr().map(|a| (l, a)))
    {
        Ok((l, addr)) => {
            let _ = ready.send(Ok(addr));
            l
        }
        Err(e) => {
            let _ = ready.send(Err(bind_error(bind, e)));
            return;
        }
    };
    let ctx = Rc::new(WorkerCtx {
        shared,
        index,
        life: Lifecycle::default(),
        timers: Timers::new(),
        crashes_seen: Cell::new(0),
        accept: RefCell::new(Canceller::new()),
    });
    let accepting = accept_loop(&listener, &ctx, ctx.accept.borrow().handle());
    let stopper = async {
        wait_stop(&ctx).await;
        ctx.stop_accepting();
        std::future::pending::<()>().await
    };
    monoio::select! {
        () = accepting => {},
        () = stopper => unreachable!("the stop watcher never returns"),
        () = ctx.timers.run() => unreachable!("the timer loop never returns"),
    }
    drop(listener);
    // Every connection task drops its socket at its next poll; give them (and the
    // driver's cancellations) a bounded moment to do so.
    ctx.life.stop();
    for _ in 0..DRAIN_TICKS {
        if ctx.life.live() == 0 {
            break;
        }
        monoio::time::sleep(Duration::from_millis(1)).await;
    }
    monoio::time::sleep(Duration::from_millis(1)).await;
}

/// Accepts and serves connections until `cancel` fires (at shutdown); returns only after the
/// accept in flight has completed, so no accepted descriptor is lost.
async fn accept_loop(listener: &TcpListener, ctx: &Rc<WorkerCtx>, cancel: CancelHandle) {
    loop {
        let accepted = listener.cancelable_accept(cancel.clone()).await;
        if ctx.shared.stop.load(Ordering::Acquire) {
            // Accepted as the stop came: dropping the stream closes it.
            return;
        }
        match accepted {
            Ok((stream, _)) => {
                close_on_exec(&stream);
                let n = ctx.counters().connection();
                let id = ((ctx.index as u64) << 40) | n;
                monoio::spawn(conn::serve(stream, Rc::clone(ctx), id));
            }
            // Out of descriptors or a connection reset before accept: back off briefly
            // instead of spinning, then keep serving.
            Err(_) => monoio::time::sleep(Duration::from_millis(5)).await,
        }
    }
}

/// Returns once the server is stopping; meanwhile makes the cut of every crash another
/// worker triggered.
/// Marks an accepted socket close-on-exec. monoio's io_uring accept passes no flags (its
/// epoll accept uses `accept4(SOCK_CLOEXEC)`), so without this a process that the program
/// embedding the mock spawns meanwhile (a test starting the `vllm-bench` binary) inherits
/// the connection: closing it here then sends no FIN until that process exits, and the
/// client waits for a close that does not come (or, writing into it, gets a reset).
fn close_on_exec(stream: &monoio::net::TcpStream) {
    let fd = stream.as_raw_fd();
    // SAFETY: `fd` is the open socket `stream` owns for the duration of this call; F_GETFD
    // and F_SETFD only read and set its descriptor flags. Failure leaves the flag unset,
    // which is only a leak into child processes, as before.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFD);
        if flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
            libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
        }
    }
}

async fn wait_stop(ctx: &WorkerCtx) {
    while !ctx.shared.stop.load(Ordering::Acquire) {
        ctx.follow_crashes();
        monoio::time::sleep(STOP_POLL).await;
    }
}
