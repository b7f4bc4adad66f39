//! Keeping idle CPUs out of sleep states while the engine runs (`--keep-cpus-awake`).
//!
//! Between a response's events the engine's cores are mostly idle, and an idle CPU sleeps:
//! a C-state on bare metal, a halted vCPU in a VM. Leaving it takes from about a
//! microsecond (C1) to hundreds (deep C-states; a halted vCPU runs again only when the host
//! schedules it), and the arrival stamp taken after such a wake-up is late by that much:
//! it lands in the inter-token latency's tail. On the 2-core Firecracker VM of
//! `docs/performance.md`, idle wake-ups were late by 0.2–0.4 ms at p99, and vllm-bench's
//! ITL p99 error vs what the server sent was 0.74 ms; with the CPUs kept awake, 0.04 ms
//! and 0.02 ms.
//!
//! Linux's PM QoS takes a bound on how long a CPU may take to wake: a process writes it
//! (microseconds, a native-endian i32) to `/dev/cpu_dma_latency` and keeps the file open;
//! the request ends when the file is closed, also when the process dies, so it cannot
//! outlive the run. 0 makes idle CPUs poll instead of sleeping. The request is
//! machine-wide: the per-CPU one (`power/pm_qos_resume_latency_us`) cannot ask for 0, and
//! the haltpoll governor of KVM guests polls only for 0.

use std::fs::{File, OpenOptions};
use std::io::Write;

/// The PM QoS device that takes a CPU wake-up latency bound.
pub const CPU_LATENCY_DEVICE: &str = "/dev/cpu_dma_latency";

/// A held request that no CPU sleeps deeper than polling; released when dropped.
#[derive(Debug)]
pub struct CpusKeptAwake {
    /// The request lives as long as this file stays open.
    _device: File,
}

/// Why the CPUs cannot be kept awake: the device is missing (no PM QoS in this kernel) or
/// not writable (it needs root).
#[derive(Debug, thiserror::Error)]
#[error(
    "--keep-cpus-awake: cannot ask the kernel to keep idle CPUs awake through \
     {CPU_LATENCY_DEVICE} ({0}); it needs root (or write access to that file), or drop the flag"
)]
pub struct KeepAwakeError(std::io::Error);

impl CpusKeptAwake {
    /// Asks that no CPU of this machine enters a sleep state slower to leave than 0 µs,
    /// until the returned value is dropped.
    pub fn hold() -> Result<CpusKeptAwake, KeepAwakeError> {
        let mut device = OpenOptions::new()
            .write(true)
            .open(CPU_LATENCY_DEVICE)
            .map_err(KeepAwakeError)?;
        device
            .write_all(&0i32.to_ne_bytes())
            .map_err(KeepAwakeError)?;
        Ok(CpusKeptAwake { _device: device })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The current machine-wide bound, µs (reading the device gives it).
    fn current_bound() -> Option<i32> {
        let bytes = std::fs::read(CPU_LATENCY_DEVICE).ok()?;
        Some(i32::from_ne_bytes(bytes.get(..4)?.try_into().ok()?))
    }

    #[test]
    fn the_request_holds_while_kept_and_ends_when_dropped() {
        match CpusKeptAwake::hold() {
            Ok(held) => {
                assert_eq!(current_bound(), Some(0), "held: idle CPUs poll");
                drop(held);
                // Another process may hold its own request; ours is gone unless it also
                // asked for 0.
                let after = current_bound().expect("the device reads");
                assert!(after >= 0, "{after}");
            }
            Err(e) => {
                // Not root, or no PM QoS: the error names the device and the fix.
                let text = e.to_string();
                assert!(text.contains(CPU_LATENCY_DEVICE), "{text}");
                assert!(text.contains("drop the flag"), "{text}");
            }
        }
    }
}
