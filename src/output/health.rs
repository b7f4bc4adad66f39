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
//! The verdict warns, naming the cause, when a core was busy at least 90% of the window
//! (it had no headroom: its events were handled late), when a core waited for the CPU 10%
//! of the window or more, when more than 1% of the arrivals were late, or when an event
//! loop stalled for more than 5 ms.

use std::time::Duration;

use crate::engine::recorder::Record;
use crate::engine::CoreLoad;

/// Busy this much of the window or more: the core had no headroom.
pub const BUSY_LIMIT: f64 = 0.9;
/// An arrival sent later than this after its time is late.
pub const LATE_AFTER: Duration = Duration::from_millis(1);
/// Waiting for the CPU this much of the window or more: the core was shared.
pub const WAIT_LIMIT: f64 = 0.1;
/// More than this share of late arrivals is a warning.
pub const LATE_SHARE_LIMIT: f64 = 0.01;
/// An event-loop stall longer than this is a warning.
pub const STALL_LIMIT: Duration = Duration::from_millis(5);

/// One core's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct CoreHealth {
    pub core: usize,
    /// CPU time over wall time of the measured window, 0 to 1 (a little above 1 is clock
    /// granularity).
    pub busy_fraction: f64,
    /// Share of the window spent waiting for the CPU (`None`: not measured here).
    pub wait_fraction: Option<f64>,
    pub longest_stall: Duration,
}

/// The client's health over one run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ClientHealth {
    pub cores: Vec<CoreHealth>,
    /// Requests the client waited to send at their arrival time.
    pub arrivals: usize,
    /// Of those, the ones sent more than [`LATE_AFTER`] after it.
    pub late_arrivals: usize,
}

/// Why the client may have been the bottleneck.
#[derive(Debug, Clone, PartialEq)]
pub enum Cause {
    BusyCore { core: usize, busy_fraction: f64 },
    SharedCore { core: usize, wait_fraction: f64 },
    LateArrivals { late: usize, arrivals: usize },
    Stall { core: usize, longest: Duration },
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
            Cause::Stall { core, longest } => write!(
                f,
                "core {core}'s event loop stalled for {:.1} ms",
                longest.as_secs_f64() * 1e3
            ),
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
        ClientHealth {
            cores,
            arrivals,
            late_arrivals,
        }
    }

    /// What makes the client a suspect, most telling first; empty when it stayed out of
    /// the way.
    pub fn causes(&self) -> Vec<Cause> {
        let mut causes: Vec<Cause> = self
            .cores
            .iter()
            .filter(|c| c.busy_fraction >= BUSY_LIMIT)
            .map(|c| Cause::BusyCore {
                core: c.core,
                busy_fraction: c.busy_fraction,
            })
            .collect();
        causes.extend(self.cores.iter().filter_map(|c| {
            let wait = c.wait_fraction.filter(|w| *w >= WAIT_LIMIT)?;
            Some(Cause::SharedCore {
                core: c.core,
                wait_fraction: wait,
            })
        }));
        if self.late_arrivals as f64 > self.arrivals as f64 * LATE_SHARE_LIMIT {
            causes.push(Cause::LateArrivals {
                late: self.late_arrivals,
                arrivals: self.arrivals,
            });
        }
        causes.extend(
            self.cores
                .iter()
                .filter(|c| c.longest_stall > STALL_LIMIT)
                .map(|c| Cause::Stall {
                    core: c.core,
                    longest: c.longest_stall,
                }),
        );
        causes
    }

    /// The line printed after the vllm-bench block.
    pub fn verdict(&self) -> String {
        let causes = self.causes();
        if causes.is_empty() {
            return "client: not a bottleneck".to_string();
        }
        let list: Vec<String> = causes.iter().map(ToString::to_string).collect();
        format!(
            "client: WARNING: the client may have limited this run: {} (give it more or \
             quieter cores: --num-cores, or fewer other processes on them)",
            list.join("; ")
        )
    }
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
    fn a_constructed_run_gives_exact_figures() {
        let loads = [
            CoreLoad {
                core: 2,
                busy: ms(250),
                window: ms(1000),
                waited: Some(ms(125)),
                longest_stall: Duration::from_micros(300),
            },
            CoreLoad {
                core: 5,
                busy: ms(950),
                window: ms(1000),
                waited: None,
                longest_stall: ms(12),
            },
        ];
        let records = [
            arrival(0, 50, true),
            arrival(10, 1_000, true),  // exactly 1 ms: not late
            arrival(20, 1_001, true),  // late
            arrival(30, 7_000, true),  // late
            arrival(40, 9_000, false), // queued behind the limit: not an arrival
        ];
        let h = ClientHealth::of(&loads, &records);
        assert_eq!(h.arrivals, 4);
        assert_eq!(h.late_arrivals, 2);
        assert_eq!(h.cores[0].busy_fraction, 0.25);
        assert_eq!(h.cores[0].wait_fraction, Some(0.125));
        assert_eq!(h.cores[1].wait_fraction, None);
        assert_eq!(h.cores[1].busy_fraction, 0.95);
        assert_eq!(h.cores[1].longest_stall, ms(12));
        assert_eq!(
            h.causes(),
            [
                Cause::BusyCore {
                    core: 5,
                    busy_fraction: 0.95
                },
                Cause::SharedCore {
                    core: 2,
                    wait_fraction: 0.125
                },
                Cause::LateArrivals {
                    late: 2,
                    arrivals: 4
                },
                Cause::Stall {
                    core: 5,
                    longest: ms(12)
                },
            ]
        );
        assert!(h.verdict().starts_with(
            "client: WARNING: the client may have limited this run: core 5 was busy 95% of \
             the run; core 2 waited for the CPU 12% of the run (another process on it); 2 of 4 \
             arrivals were sent more than 1 ms late; core 5's event loop \
             stalled for 12.0 ms ("
        ));
    }

    #[test]
    fn a_quiet_client_is_not_a_bottleneck() {
        let loads = [CoreLoad {
            core: 0,
            busy: ms(100),
            window: ms(1000),
            waited: Some(ms(20)),
            longest_stall: ms(1),
        }];
        let records: Vec<Record> = (0..200).map(|i| arrival(i, 20, true)).collect();
        let h = ClientHealth::of(&loads, &records);
        assert_eq!((h.arrivals, h.late_arrivals), (200, 0));
        assert_eq!(h.verdict(), "client: not a bottleneck");
        // One late arrival in 200 is within the 1% allowance; three are not.
        let mut some_late = records.clone();
        some_late[0] = arrival(0, 2_000, true);
        assert!(ClientHealth::of(&loads, &some_late).causes().is_empty());
        some_late[1] = arrival(1, 2_000, true);
        some_late[2] = arrival(2, 2_000, true);
        assert_eq!(ClientHealth::of(&loads, &some_late).causes().len(), 1);
    }

    #[test]
    fn an_empty_window_is_not_busy() {
        let h = ClientHealth::of(&[CoreLoad::default()], &[]);
        assert_eq!(h.cores[0].busy_fraction, 0.0);
        assert_eq!(h.verdict(), "client: not a bottleneck");
    }
}
