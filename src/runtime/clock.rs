//! What the host says about its clock and itself, for a shard's start facts: the kernel's
//! clock state (adjtimex(2), read only: what `timedatectl`'s NTPSynchronized reports,
//! without systemd or a process) and the host's name. System calls live here, below the
//! orchestration that records them and the output that reports them.

/// The kernel's clock state.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClockState {
    /// Whether the clock is synchronized (not `TIME_ERROR`, no `STA_UNSYNC`); `None` when
    /// the kernel does not say.
    pub synchronized: Option<bool>,
    /// Its maximum error (ms), when it is synchronized.
    pub max_error_ms: Option<f64>,
}

/// The kernel's clock state now.
pub fn kernel_clock() -> ClockState {
    // SAFETY: `timex` is a C struct of integers, for which all zero bytes are a valid value.
    let mut t: libc::timex = unsafe { std::mem::zeroed() };
    // SAFETY: `modes` is 0, so adjtimex only writes the kernel's state into `t`, which we
    // own and which lives through the call.
    let state = unsafe { libc::adjtimex(&mut t) };
    if state < 0 {
        return ClockState {
            synchronized: None,
            max_error_ms: None,
        };
    }
    let synchronized = state != libc::TIME_ERROR && t.status & libc::STA_UNSYNC == 0;
    ClockState {
        synchronized: Some(synchronized),
        max_error_ms: synchronized.then_some(t.maxerror as f64 / 1e3),
    }
}

/// The host's name (`/proc/sys/kernel/hostname`), `unknown` when it cannot be read.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_clock_state_is_read_without_privileges() {
        let c = kernel_clock();
        assert!(c.synchronized.is_some(), "adjtimex answers on Linux");
        assert_eq!(c.max_error_ms.is_some(), c.synchronized == Some(true));
        assert!(!host_name().is_empty());
    }
}
