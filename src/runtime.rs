//! Per-thread monoio runtimes: io_uring when the kernel allows it, epoll otherwise.
//!
//! Both the client engine and the mock server build their runtimes here so the driver choice,
//! the automatic fallback and the message that reports it exist once. A thread-per-core
//! program builds one runtime per thread, inside that thread (monoio runtimes are `!Send`).
//! Each runtime's sub-millisecond sleeps are [`timer`], shared the same way.

pub mod clock;
pub mod cpu_latency;
pub mod helper_thread;
pub mod stop_handle;
pub mod timer;

use std::fmt;
use std::str::FromStr;

use clap::ValueEnum;
use monoio::time::TimeDriver;
use monoio::{FusionRuntime, IoUringDriver, LegacyDriver, RuntimeBuilder};

/// The runtime type every thread runs: one of the two drivers, each with a timer.
pub type Runtime = FusionRuntime<TimeDriver<IoUringDriver>, TimeDriver<LegacyDriver>>;

/// Which I/O driver to use (`--io-driver` of both binaries). The clap value names are the
/// only spelling table: [`FromStr`] goes through them too. The variants' docs are kept out of
/// `--help` (`help = None`): the flag's own help describes the choices in one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum DriverChoice {
    /// io_uring when it can be set up here, else epoll (and say so once on stderr).
    #[default]
    #[value(name = "auto", help = None::<&str>)]
    Auto,
    /// io_uring or fail.
    #[value(name = "uring", alias = "io_uring", alias = "io-uring", help = None::<&str>)]
    IoUring,
    /// epoll (monoio's legacy driver), e.g. under seccomp profiles that forbid io_uring.
    #[value(name = "epoll", alias = "legacy", help = None::<&str>)]
    Epoll,
}

/// Why a driver cannot be had: an unknown name, or io_uring asked for where it cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DriverError {
    #[error("invalid I/O driver '{0}': expected one of auto, uring, epoll")]
    Unknown(String),
    #[error(
        "--io-driver uring: io_uring is not available here (kernel too old, disabled by \
         /proc/sys/kernel/io_uring_disabled, or blocked by seccomp); use --io-driver epoll"
    )]
    UringUnavailable,
}

impl FromStr for DriverChoice {
    type Err = DriverError;
    fn from_str(s: &str) -> Result<Self, DriverError> {
        <Self as ValueEnum>::from_str(s, false).map_err(|_| DriverError::Unknown(s.to_string()))
    }
}

/// The driver a runtime actually got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResolvedDriver {
    IoUring,
    Epoll,
}

impl fmt::Display for ResolvedDriver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::IoUring => "io_uring",
            Self::Epoll => "epoll",
        })
    }
}

impl From<ResolvedDriver> for DriverChoice {
    /// The choice that always resolves to `driver` (e.g. to start the embedded mock on the
    /// driver the client already resolved).
    fn from(driver: ResolvedDriver) -> DriverChoice {
        match driver {
            ResolvedDriver::IoUring => DriverChoice::IoUring,
            ResolvedDriver::Epoll => DriverChoice::Epoll,
        }
    }
}

/// Submission-queue entries per io_uring ring: enough for thousands of in-flight operations
/// per core without the ring becoming the limit.
const URING_ENTRIES: u32 = 4096;

/// Decides the driver once per process (probing io_uring creates a ring; do it once).
///
/// `Auto` falls back to epoll when monoio's probe finds io_uring missing or incomplete
/// (old kernel, `io_uring_disabled`, seccomp in containers) and returns the reason so the
/// caller can print it once.
pub fn resolve_driver(
    choice: DriverChoice,
) -> Result<(ResolvedDriver, Option<String>), DriverError> {
    match choice {
        DriverChoice::Epoll => Ok((ResolvedDriver::Epoll, None)),
        DriverChoice::IoUring if uring_usable() => Ok((ResolvedDriver::IoUring, None)),
        DriverChoice::IoUring => Err(DriverError::UringUnavailable),
        DriverChoice::Auto if uring_usable() => Ok((ResolvedDriver::IoUring, None)),
        DriverChoice::Auto => Ok((
            ResolvedDriver::Epoll,
            Some("io_uring is not available here; using the epoll driver".to_string()),
        )),
    }
}

/// io_uring has the operations monoio needs *and* a ring of our size can be created here
/// (the probe alone passes where `RLIMIT_MEMLOCK` or a seccomp profile later refuses the
/// ring). Checked once per process.
fn uring_usable() -> bool {
    static USABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *USABLE.get_or_init(|| {
        monoio::utils::detect_uring()
            && uring_setup().is_some()
            && build_runtime(ResolvedDriver::IoUring).is_ok()
    })
}

/// How a ring delivers completions: the setup flags, newest kernel first.
///
/// By default the kernel runs a completion's task work (the recv itself, once the socket is
/// readable) by interrupting the thread with an IPI wherever it is, which on a busy
/// streaming core is one interrupt per event (10 % of the client's CPU in a profile at 1000
/// streams). `COOP_TASKRUN` (5.19) defers that work to the thread's next system call;
/// `SINGLE_ISSUER | DEFER_TASKRUN` (6.1) runs it only when the thread waits for completions,
/// all at once — which is when monoio parks (`submit_and_wait` / `submit_with_args`, both
/// with `GETEVENTS`). Every runtime here lives on the one thread that built it (monoio
/// runtimes are `!Send`), which is what `SINGLE_ISSUER` requires. A completion's time stamp
/// is unchanged by either: user space sees a completion only when it reaps the ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UringSetup {
    /// `SINGLE_ISSUER | DEFER_TASKRUN` (Linux 6.1+).
    Defer,
    /// `COOP_TASKRUN | TASKRUN_FLAG` (Linux 5.19+).
    Coop,
    /// No flags: task work by interrupt (any kernel with io_uring).
    Interrupt,
}

impl UringSetup {
    /// Best first: the order in which [`uring_setup`] tries them.
    const LADDER: [UringSetup; 3] = [UringSetup::Defer, UringSetup::Coop, UringSetup::Interrupt];

    /// The name `VLLM_BENCH_URING_SETUP` and the report use.
    pub fn name(self) -> &'static str {
        match self {
            UringSetup::Defer => "defer",
            UringSetup::Coop => "coop",
            UringSetup::Interrupt => "interrupt",
        }
    }

    fn builder(self) -> io_uring::Builder {
        let mut b = io_uring::IoUring::builder();
        match self {
            UringSetup::Defer => {
                b.setup_single_issuer().setup_defer_taskrun();
            }
            UringSetup::Coop => {
                b.setup_coop_taskrun().setup_taskrun_flag();
            }
            UringSetup::Interrupt => {}
        }
        b
    }
}

/// `VLLM_BENCH_URING_SETUP` when it names a setup (an unknown name is ignored: see
/// [`uring_setup_env_warning`]).
fn pinned_uring_setup() -> Option<String> {
    std::env::var("VLLM_BENCH_URING_SETUP")
        .ok()
        .filter(|p| UringSetup::LADDER.iter().any(|s| s.name() == p))
}

/// The warning for a `VLLM_BENCH_URING_SETUP` that names no setup (the app prints it).
pub fn uring_setup_env_warning() -> Option<String> {
    let set = std::env::var("VLLM_BENCH_URING_SETUP").ok()?;
    pinned_uring_setup().is_none().then(|| {
        format!("VLLM_BENCH_URING_SETUP={set:?} is not one of defer, coop, interrupt; ignored")
    })
}

/// The setup every ring of this process uses: the first of [`UringSetup::LADDER`] this
/// kernel accepts, decided once. `VLLM_BENCH_URING_SETUP=defer|coop|interrupt` pins one (to
/// measure them against each other); a pinned setup the kernel refuses makes io_uring
/// unavailable, as if the kernel had none.
pub fn uring_setup() -> Option<UringSetup> {
    static SETUP: std::sync::OnceLock<Option<UringSetup>> = std::sync::OnceLock::new();
    *SETUP.get_or_init(|| {
        let pinned = pinned_uring_setup();
        UringSetup::LADDER
            .into_iter()
            .filter(|s| pinned.as_deref().is_none_or(|p| p == s.name()))
            .find(|s| s.builder().build(URING_ENTRIES).is_ok())
    })
}

/// Builds a runtime with the given driver for the calling thread.
pub fn build_runtime(driver: ResolvedDriver) -> std::io::Result<Runtime> {
    match driver {
        ResolvedDriver::IoUring => Ok(RuntimeBuilder::<IoUringDriver>::new()
            .with_entries(URING_ENTRIES)
            .uring_builder(uring_setup().unwrap_or(UringSetup::Interrupt).builder())
            .enable_timer()
            .build()?
            .into()),
        ResolvedDriver::Epoll => Ok(RuntimeBuilder::<LegacyDriver>::new()
            .enable_timer()
            .build()?
            .into()),
    }
}

/// Pins the calling thread to `core` (best effort: pinning can be refused in containers, and
/// a benchmark that runs unpinned is still correct, only noisier).
pub fn pin_current_thread(core: usize) -> bool {
    core_affinity::set_for_current(core_affinity::CoreId { id: core })
}

/// The cores this process may run on (its affinity mask), in ascending order.
pub fn available_cores() -> Vec<usize> {
    let mut ids: Vec<usize> = core_affinity::get_core_ids()
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.id)
        .collect();
    if ids.is_empty() {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        ids = (0..n).collect();
    }
    ids.sort_unstable();
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_choice_parses_documented_names() {
        assert_eq!("auto".parse::<DriverChoice>(), Ok(DriverChoice::Auto));
        assert_eq!("uring".parse::<DriverChoice>(), Ok(DriverChoice::IoUring));
        assert_eq!("epoll".parse::<DriverChoice>(), Ok(DriverChoice::Epoll));
        assert_eq!(
            "io_uring".parse::<DriverChoice>(),
            Ok(DriverChoice::IoUring)
        );
        assert_eq!("legacy".parse::<DriverChoice>(), Ok(DriverChoice::Epoll));
        assert!("kqueue"
            .parse::<DriverChoice>()
            .unwrap_err()
            .to_string()
            .contains("auto, uring, epoll"));
    }

    #[test]
    fn a_resolved_driver_converts_to_the_choice_that_resolves_to_it() {
        let (auto, _) = resolve_driver(DriverChoice::Auto).unwrap();
        for driver in [auto, ResolvedDriver::Epoll] {
            assert_eq!(resolve_driver(driver.into()), Ok((driver, None)));
        }
    }

    #[test]
    fn both_drivers_run_a_timer() {
        let (auto, _) = resolve_driver(DriverChoice::Auto).unwrap();
        for driver in [auto, ResolvedDriver::Epoll] {
            let mut rt = build_runtime(driver).unwrap();
            let waited = rt.block_on(async {
                let t = std::time::Instant::now();
                monoio::time::sleep(std::time::Duration::from_millis(5)).await;
                t.elapsed()
            });
            assert!(
                waited >= std::time::Duration::from_millis(5),
                "{driver}: {waited:?}"
            );
        }
    }

    #[test]
    fn available_cores_is_never_empty() {
        assert!(!available_cores().is_empty());
    }
}
