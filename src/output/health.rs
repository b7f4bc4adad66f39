//! Client health: whether vllm-bench itself stayed out of the way of what it measured.
//!
//! Three figures, all measured without work on the hot path (see `engine::CoreLoad`):
//! - each core's **busy fraction**: the core thread's CPU time (user + system, the kernel's
//!   per-thread clock read at the run's start and its workers' end) over that window;
//! - each core's **CPU wait**: how long its thread was ready to run but another process had
//!   the core (the kernel's run-queue delay, `/proc/thread-self/schedstat`), over the window;
//! - each core's **longest stall**: the longest any of its timers fired after its deadline
//!   (a heartbeat keeps one due every 10 ms), i.e. how long its event loop was held up;
//! - **late arrivals**: requests whose worker was waiting for their arrival time and that
//!   were still sent more than 1 ms after it (from the records, after the run). Requests that
//!   queued behind `--max-concurrency` are the workload's queueing, not the client's lag.
//!
//! The verdict warns, naming the causes (the one furthest over its limit first), when a core
//! was busy at least 90% of the window (it had no headroom: its events were handled late),
//! when a core waited for the CPU 10% of the window or more, when more than 5% of the
//! arrivals (and at least 3) were sent more than 1 ms late, or when an event loop stalled for
//! more than 25 ms *and* for at least 5% of the run's median latency (TTFT, or end-to-end
//! latency without streaming): a stall delays the timestamps of what its core was reading by
//! at most its length, so 30 ms is a tenth of a 300 ms TTFT but nothing next to a 3 s one.
//!
//! A warning that shows on most runs teaches users to ignore the one that matters, so the
//! limits (calibrated on bench-overhead's health workload: bench-overhead/results/HISTORY.md, "Client
//! health: the limits") leave room for what a quiet machine does anyway: a VM's scheduler holds a thread
//! for a few milliseconds now and then (one 5 ms stall, or one late arrival in 69, used to
//! warn), and CPU shares over a window shorter than [`MIN_WINDOW`] are mostly thread start-up
//! and clock granularity (a run whose every request was refused took 3 ms and showed a core
//! "busy 94%"). A run in which the server answered no request gets no verdict at all: the
//! client's figures say nothing about a server that was not there.

use std::time::Duration;

use crate::engine::recorder::Record;
use crate::engine::CoreLoad;

/// Busy this much of the window or more: the core had no headroom.
pub const BUSY_LIMIT: f64 = 0.9;
/// An arrival sent later than this after its time is late.
pub const LATE_AFTER: Duration = Duration::from_millis(1);
/// Waiting for the CPU this much of the window or more: the core was shared.
pub const WAIT_LIMIT: f64 = 0.1;
/// More than this share of late arrivals is a warning...
pub const LATE_SHARE_LIMIT: f64 = 0.05;
/// ...when at least this many were late.
pub const LATE_COUNT_MIN: usize = 3;
/// An event-loop stall longer than this is a warning...
pub const STALL_LIMIT: Duration = Duration::from_millis(25);
/// ...when it is also at least this share of the run's median latency (see
/// [`ClientHealth::median_latency`]): what it could have added to a typical request's figure.
pub const STALL_SHARE_LIMIT: f64 = 0.05;
/// Busy and CPU-wait shares are judged only over a window at least this long (a firehose
/// run that saturates its core lasts 80 ms; a run whose every connection was refused, 3 ms).
pub const MIN_WINDOW: Duration = Duration::from_millis(50);

/// One core's figures.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CoreHealth {
    pub core: usize,
    /// CPU time over wall time of the measured window, 0 to 1 (a little above 1 is clock
    /// granularity).
    pub busy_fraction: f64,
    /// Share of the window spent waiting for the CPU (`None`: not measured here).
    pub wait_fraction: Option<f64>,
    pub longest_stall: Duration,
    /// The window the shares are of.
    pub window: Duration,
}

/// The client's health over one run (a shard's result carries it for the merge).
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct ClientHealth {
    pub cores: Vec<CoreHealth>,
    /// Requests the client waited to send at their arrival time.
    pub arrivals: usize,
    /// Of those, the ones sent more than [`LATE_AFTER`] after it.
    pub late_arrivals: usize,
    /// Requests the server answered (see [`was_answered`]); 0 means there was no server to
    /// measure the client against.
    pub answered: usize,
    /// The median latency a stall would distort: time to the first token of the successful
    /// requests, or their end-to-end latency when none streamed (`None`: none succeeded; a
    /// shard file of an older vllm-bench).
    #[serde(default)]
    pub median_latency: Option<Duration>,
}

/// Why the client may have been the bottleneck.
#[derive(Debug, Clone, PartialEq)]
pub enum Cause {
    BusyCore {
        core: usize,
        busy_fraction: f64,
    },
    SharedCore {
        core: usize,
        wait_fraction: f64,
    },
    LateArrivals {
        late: usize,
        arrivals: usize,
    },
    Stall {
        core: usize,
        longest: Duration,
        /// The run's median latency it is set against.
        median_latency: Option<Duration>,
    },
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cause::BusyCore {
                core,
                busy_fraction,
            } => write!(
                f,
                "core {core} was busy {:.0}% of the run",
                busy_fraction * 100.0
            ),
            Cause::SharedCore {
                core,
                wait_fraction,
            } => write!(
                f,
                "core {core} waited for the CPU {:.0}% of the run (another process on it)",
                wait_fraction * 100.0
            ),
            Cause::LateArrivals { late, arrivals } => {
                write!(
                    f,
                    "{late} of {arrivals} arrivals were sent more than 1 ms late"
                )
            }
            Cause::Stall {
                core,
                longest,
                median_latency,
            } => {
                write!(
                    f,
                    "core {core}'s event loop stalled for {:.1} ms",
                    longest.as_secs_f64() * 1e3
                )?;
                if let Some(m) = median_latency {
                    write!(
                        f,
                        " ({:.0}% of the median latency, {:.1} ms)",
                        longest.as_secs_f64() / m.as_secs_f64() * 100.0,
                        m.as_secs_f64() * 1e3
                    )?;
                }
                Ok(())
            }
        }
    }
}

/// Whether the server answered the request at all: it succeeded, sent a token, or failed in
/// a way only an answer can (an HTTP status, a malformed event, ...). Refused, cut before the
/// first token, or timed out with nothing: no answer.
fn was_answered(r: &Record) -> bool {
    match &r.failure {
        None => true,
        Some(_) if r.first_token_ns.is_some() => true,
        Some(f) => !matches!(f.kind.as_str(), "connect" | "disconnected" | "timeout"),
    }
}

impl Cause {
    /// How far over its limit the cause is (1 = at the limit): the verdict's ranking.
    pub fn severity(&self) -> f64 {
        match self {
            Cause::BusyCore { busy_fraction, .. } => busy_fraction / BUSY_LIMIT,
            Cause::SharedCore { wait_fraction, .. } => wait_fraction / WAIT_LIMIT,
            Cause::LateArrivals { late, arrivals } => {
                *late as f64 / (*arrivals as f64 * LATE_SHARE_LIMIT).max(LATE_COUNT_MIN as f64)
            }
            Cause::Stall {
                longest,
                median_latency,
                ..
            } => longest.as_secs_f64() / stall_limit(*median_latency).as_secs_f64(),
        }
    }
}

impl ClientHealth {
    /// The figures of a run from its cores' loads and its records.
    pub fn of(loads: &[CoreLoad], records: &[Record]) -> ClientHealth {
        let cores = loads
            .iter()
            .map(|l| {
                let share = |d: Duration| {
                    if l.window.is_zero() {
                        0.0
                    } else {
                        d.as_secs_f64() / l.window.as_secs_f64()
                    }
                };
                CoreHealth {
                    core: l.core,
                    busy_fraction: share(l.busy),
                    wait_fraction: l.waited.map(share),
                    longest_stall: l.longest_stall,
                    window: l.window,
                }
            })
            .collect();
        let late_ns = LATE_AFTER.as_nanos() as u64;
        let waited = records.iter().filter(|r| r.was_waiting);
        let (mut arrivals, mut late_arrivals) = (0, 0);
        for r in waited {
            arrivals += 1;
            if r.start_ns.saturating_sub(r.scheduled_ns) > late_ns {
                late_arrivals += 1;
            }
        }
        let answered = records.iter().filter(|r| was_answered(r)).count();
        ClientHealth {
            cores,
            arrivals,
            late_arrivals,
            answered,
            median_latency: median_latency(records),
        }
    }

    /// What makes the client a suspect, most telling first; empty when it stayed out of
    /// the way.
    pub fn causes(&self) -> Vec<Cause> {
        if !self.has_verdict() {
            return Vec::new();
        }
        let judged = |c: &&CoreHealth| c.window >= MIN_WINDOW;
        let mut causes: Vec<Cause> = self
            .cores
            .iter()
            .filter(judged)
            .filter(|c| c.busy_fraction >= BUSY_LIMIT)
            .map(|c| Cause::BusyCore {
                core: c.core,
                busy_fraction: c.busy_fraction,
            })
            .collect();
        causes.extend(self.cores.iter().filter(judged).filter_map(|c| {
            let wait = c.wait_fraction.filter(|w| *w >= WAIT_LIMIT)?;
            Some(Cause::SharedCore {
                core: c.core,
                wait_fraction: wait,
            })
        }));
        if self.late_arrivals >= LATE_COUNT_MIN
            && self.late_arrivals as f64 > self.arrivals as f64 * LATE_SHARE_LIMIT
        {
            causes.push(Cause::LateArrivals {
                late: self.late_arrivals,
                arrivals: self.arrivals,
            });
        }
        let stall_limit = stall_limit(self.median_latency);
        causes.extend(
            self.cores
                .iter()
                .filter(|c| c.longest_stall > stall_limit)
                .map(|c| Cause::Stall {
                    core: c.core,
                    longest: c.longest_stall,
                    median_latency: self.median_latency,
                }),
        );
        // Stable: equally severe causes keep the order above.
        causes.sort_by(|a, b| b.severity().total_cmp(&a.severity()));
        causes
    }

    /// Whether the run says anything about the client: the server answered a request.
    pub fn has_verdict(&self) -> bool {
        self.answered > 0
    }

    /// The line printed after the vllm-bench block.
    pub fn verdict(&self) -> String {
        let causes = self.causes();
        let list: Vec<String> = causes.iter().map(ToString::to_string).collect();
        verdict_line(self.has_verdict(), &list)
    }
}

/// The longest stall that is no warning: [`STALL_LIMIT`], or [`STALL_SHARE_LIMIT`] of the
/// run's median latency when that is longer.
fn stall_limit(median_latency: Option<Duration>) -> Duration {
    let share = median_latency.map_or(Duration::ZERO, |m| m.mul_f64(STALL_SHARE_LIMIT));
    STALL_LIMIT.max(share)
}

/// The median time to the first token of the successful requests, or of their end-to-end
/// latency when none streamed a first token.
fn median_latency(records: &[Record]) -> Option<Duration> {
    // Cancelled requests are in no record (the recorder counts them apart).
    let ok = || records.iter().filter(|r| r.failure.is_none());
    let mut ns: Vec<u64> = ok()
        .filter_map(|r| r.first_token_ns.map(|t| t.get().saturating_sub(r.start_ns)))
        .collect();
    if ns.is_empty() {
        ns = ok().map(|r| r.end_ns.saturating_sub(r.start_ns)).collect();
    }
    // A record without its times (nothing measured) says nothing about the latency.
    ns.retain(|&n| n > 0);
    if ns.is_empty() {
        return None;
    }
    let mid = ns.len() / 2;
    let (_, m, _) = ns.select_nth_unstable(mid);
    Some(Duration::from_nanos(*m))
}

/// The verdict of a run from whether it has one and its causes, worst first.
fn verdict_line(has_verdict: bool, causes: &[String]) -> String {
    if !has_verdict {
        return "client: no verdict (the server answered no request)".to_string();
    }
    if causes.is_empty() {
        return "client: not a bottleneck".to_string();
    }
    format!(
        "client: WARNING: the client may have limited this run: {} (give it more or \
         quieter cores: --num-cores, or fewer other processes on them)",
        causes.join("; ")
    )
}

/// The client's health of a run made of several parts (the shards of a merged run), each
/// judged on its own machine: one verdict over all of them, worst cause first, each cause
/// naming its part. One part (`--shard 0/1`) is judged exactly as a run of one process.
pub fn combined_causes(parts: &[(&str, &ClientHealth)]) -> Vec<(String, f64)> {
    let mut all: Vec<(String, f64)> = parts
        .iter()
        .flat_map(|(name, h)| {
            h.causes().into_iter().map(move |c| {
                let text = match parts.len() {
                    1 => c.to_string(),
                    _ => format!("shard {name}: {c}"),
                };
                (text, c.severity())
            })
        })
        .collect();
    // Stable: equally severe causes keep the parts' order.
    all.sort_by(|a, b| b.1.total_cmp(&a.1));
    all
}

/// The combined verdict line of [`combined_causes`]: no verdict when no part's server
/// answered.
pub fn combined_verdict(parts: &[(&str, &ClientHealth)]) -> String {
    let causes: Vec<String> = combined_causes(parts).into_iter().map(|c| c.0).collect();
    verdict_line(parts.iter().any(|(_, h)| h.has_verdict()), &causes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn arrival(scheduled_ms: u64, lag_us: u64, waited: bool) -> Record {
        Record {
            scheduled_ns: scheduled_ms * 1_000_000,
            start_ns: scheduled_ms * 1_000_000 + lag_us * 1_000,
            was_waiting: waited,
            ..Record::default()
        }
    }

    #[test]
    fn a_constructed_run_gives_exact_figures_and_ranks_the_causes() {
        let loads = [
            CoreLoad {
                core: 2,
                busy: ms(2500),
                window: ms(10_000),
                waited: Some(ms(1250)),
                longest_stall: Duration::from_micros(300),
            },
            CoreLoad {
                core: 5,
                busy: ms(9500),
                window: ms(10_000),
                waited: None,
                longest_stall: ms(60),
            },
        ];
        let mut records = vec![
            arrival(0, 50, true),
            arrival(10, 1_000, true),  // exactly 1 ms: not late
            arrival(20, 1_001, true),  // late
            arrival(30, 7_000, true),  // late
            arrival(35, 7_000, true),  // late
            arrival(40, 9_000, false), // queued behind the limit: not an arrival
        ];
        records.extend((50..55).map(|i| arrival(i, 10, true)));
        let h = ClientHealth::of(&loads, &records);
        assert_eq!(h.arrivals, 10);
        assert_eq!(h.late_arrivals, 3);
        assert_eq!(h.answered, 11);
        assert_eq!(h.cores[0].busy_fraction, 0.25);
        assert_eq!(h.cores[0].wait_fraction, Some(0.125));
        assert_eq!(h.cores[1].wait_fraction, None);
        assert_eq!(h.cores[1].busy_fraction, 0.95);
        assert_eq!(h.cores[1].longest_stall, ms(60));
        // Ranked by how far over its limit: stall 2.4x, late 1.0x (3 of 10 against a floor
        // of 3), shared 1.25x, busy 1.06x.
        assert_eq!(
            h.causes(),
            [
                Cause::Stall {
                    core: 5,
                    longest: ms(60),
                    median_latency: None,
                },
                Cause::SharedCore {
                    core: 2,
                    wait_fraction: 0.125
                },
                Cause::BusyCore {
                    core: 5,
                    busy_fraction: 0.95
                },
                Cause::LateArrivals {
                    late: 3,
                    arrivals: 10
                },
            ]
        );
        assert!(h.verdict().starts_with(
            "client: WARNING: the client may have limited this run: core 5's event loop \
             stalled for 60.0 ms; core 2 waited for the CPU 12% of the run (another process \
             on it); core 5 was busy 95% of the run; 3 of 10 arrivals were sent more than 1 \
             ms late ("
        ));
    }

    #[test]
    fn a_quiet_client_is_not_a_bottleneck() {
        let loads = [CoreLoad {
            core: 0,
            busy: ms(1000),
            window: ms(10_000),
            waited: Some(ms(200)),
            longest_stall: ms(1),
        }];
        let records: Vec<Record> = (0..200).map(|i| arrival(i, 20, true)).collect();
        let h = ClientHealth::of(&loads, &records);
        assert_eq!((h.arrivals, h.late_arrivals), (200, 0));
        assert_eq!(h.verdict(), "client: not a bottleneck");
        // A few late arrivals in 200 are within the 5% allowance; eleven are not.
        let mut some_late = records.clone();
        for r in some_late.iter_mut().take(10) {
            *r = arrival(r.scheduled_ns / 1_000_000, 2_000, true);
        }
        assert!(ClientHealth::of(&loads, &some_late).causes().is_empty());
        some_late[10] = arrival(10, 2_000, true);
        assert_eq!(ClientHealth::of(&loads, &some_late).causes().len(), 1);
    }

    #[test]
    fn one_late_arrival_in_69_and_a_5_ms_stall_do_not_warn() {
        let loads = [CoreLoad {
            core: 0,
            busy: ms(3000),
            window: ms(10_000),
            waited: Some(ms(100)),
            longest_stall: Duration::from_micros(5100),
        }];
        let mut records: Vec<Record> = (0..69).map(|i| arrival(i, 20, true)).collect();
        records[7] = arrival(7, 3_000, true);
        let h = ClientHealth::of(&loads, &records);
        assert_eq!(h.verdict(), "client: not a bottleneck");
    }

    #[test]
    fn a_short_window_is_not_judged_busy() {
        // Every request refused within 3 ms: the threads' start-up is most of the window.
        let loads = [CoreLoad {
            core: 1,
            busy: Duration::from_micros(2820),
            window: ms(3),
            waited: Some(ms(1)),
            longest_stall: ms(0),
        }];
        let h = ClientHealth::of(&loads, &[arrival(0, 10, true)]);
        assert!(h.causes().is_empty(), "{:?}", h.causes());
    }

    #[test]
    fn a_run_the_server_never_answered_gets_no_verdict() {
        let refused = Record {
            failure: Some(Box::new(crate::engine::recorder::Failure {
                kind: "connect".into(),
                error: "Connection refused (os error 111)".into(),
                detail: String::new(),
            })),
            ..Record::default()
        };
        let loads = [CoreLoad {
            core: 1,
            busy: ms(9_500),
            window: ms(10_000),
            waited: None,
            longest_stall: ms(0),
        }];
        let h = ClientHealth::of(&loads, &[refused.clone(), refused]);
        assert_eq!(h.answered, 0);
        assert!(!h.has_verdict());
        assert_eq!(
            h.verdict(),
            "client: no verdict (the server answered no request)"
        );
    }

    #[test]
    fn merged_shards_get_one_verdict_worst_cause_first_naming_the_shard() {
        let load = |busy_ms: u64, stall_ms: u64| CoreLoad {
            core: 0,
            busy: ms(busy_ms),
            window: ms(10_000),
            waited: None,
            longest_stall: ms(stall_ms),
        };
        let answered = [arrival(0, 10, true)];
        let quiet = ClientHealth::of(&[load(1000, 1)], &answered);
        let busy = ClientHealth::of(&[load(9500, 1)], &answered);
        let stalled = ClientHealth::of(&[load(1000, 100)], &answered);
        let parts = [("0/3", &quiet), ("1/3", &busy), ("2/3", &stalled)];
        let v = combined_verdict(&parts);
        assert!(
            v.starts_with(
                "client: WARNING: the client may have limited this run: shard 2/3: core 0's \
                 event loop stalled for 100.0 ms; shard 1/3: core 0 was busy 95% of the run ("
            ),
            "{v}"
        );
        // One part is judged as one process.
        assert_eq!(combined_verdict(&[("0/1", &busy)]), busy.verdict());
        let unanswered = ClientHealth::default();
        assert_eq!(
            combined_verdict(&[("0/2", &unanswered), ("1/2", &unanswered)]),
            unanswered.verdict()
        );
    }

    fn streamed(ttft_ms: u64) -> Record {
        Record {
            start_ns: 0,
            first_token_ns: std::num::NonZeroU64::new(ttft_ms * 1_000_000),
            end_ns: (ttft_ms + 100) * 1_000_000,
            ..Record::default()
        }
    }

    #[test]
    fn a_35_ms_stall_on_a_run_whose_ttft_is_3_s_does_not_warn() {
        // Issue 36: the warning fired on 22 of 54 real-server runs, often for 30-40 ms stalls
        // on runs whose TTFT was 2-4 s, which a stall that short cannot distort.
        let loads = [CoreLoad {
            core: 0,
            busy: ms(1000),
            window: ms(30_000),
            waited: Some(ms(10)),
            longest_stall: ms(35),
        }];
        let slow: Vec<Record> = [2000, 3000, 4000].map(streamed).to_vec();
        let h = ClientHealth::of(&loads, &slow);
        assert_eq!(h.median_latency, Some(ms(3000)));
        assert_eq!(h.verdict(), "client: not a bottleneck");
        // The same stall on a run whose TTFT is 100 ms is a third of it: a warning that
        // names its evidence (the stall against the median) and the fix.
        let fast: Vec<Record> = [90, 100, 110].map(streamed).to_vec();
        let v = ClientHealth::of(&loads, &fast).verdict();
        assert!(
            v.starts_with(
                "client: WARNING: the client may have limited this run: core 0's event loop \
                 stalled for 35.0 ms (35% of the median latency, 100.0 ms) (give it more or \
                 quieter cores: --num-cores"
            ),
            "{v}"
        );
        // A 250 ms stall is over 5% of a 4 s median: a warning again.
        let mut long = loads;
        long[0].longest_stall = ms(250);
        let v = ClientHealth::of(&long, &[4000, 4000, 4000].map(streamed)).verdict();
        assert!(v.contains("stalled for 250.0 ms (6% of the median"), "{v}");
    }

    #[test]
    fn without_streaming_the_median_is_end_to_end() {
        let r = Record {
            start_ns: 0,
            end_ns: 2_000_000_000,
            ..Record::default()
        };
        let h = ClientHealth::of(&[], &[r]);
        assert_eq!(h.median_latency, Some(ms(2000)));
    }

    #[test]
    fn an_empty_window_is_not_busy() {
        let h = ClientHealth::of(&[CoreLoad::default()], &[]);
        assert_eq!(h.cores[0].busy_fraction, 0.0);
        assert!(h.causes().is_empty());
    }
}
