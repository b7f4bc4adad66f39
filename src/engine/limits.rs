//! OS limits a run with many concurrent streams runs into: open files and ephemeral ports.
//!
//! Every concurrent stream holds one socket, so 10,000 streams need 10,000 file descriptors,
//! while the usual soft `RLIMIT_NOFILE` is 1024. Before a run the engine raises the soft limit
//! to the hard one (what any process may do without privileges) and then checks that the
//! planned connections fit in it and in the ephemeral port range: a run that cannot fit fails
//! before the clock starts with a one-line error saying which limit and how to lift it,
//! instead of a flood of per-request `EMFILE`/`EADDRNOTAVAIL` failures halfway through.

use std::io;

/// Descriptors a run needs besides its sockets: stdio, io_uring rings and eventfds (a few per
/// core), the tokenizer and dataset files, the result file, the progress bar's terminal.
const RESERVED_FDS: u64 = 64;

/// Where the kernel keeps the ephemeral port range used by `connect` without `bind`.
const PORT_RANGE_FILE: &str = "/proc/sys/net/ipv4/ip_local_port_range";

/// Why the planned connections cannot run: the limit, the numbers and the fix, on one line.
#[derive(Debug, thiserror::Error)]
pub enum LimitsError {
    /// (The OS error is part of the message, not a `source`: it would be printed twice.)
    #[error("cannot read the open-file limit (RLIMIT_NOFILE): {0}")]
    Read(io::Error),
    #[error(
        "{connections} concurrent connections need about {needed} file descriptors but \
         RLIMIT_NOFILE allows {allowed} (hard limit {hard}): raise the hard limit (`ulimit -Hn`, \
         LimitNOFILE= in a systemd unit, or /etc/security/limits.conf) or lower \
         --max-concurrency"
    )]
    OpenFiles {
        connections: usize,
        needed: u64,
        allowed: u64,
        hard: u64,
    },
    #[error(
        "{connections} concurrent connections to one server address need as many \
         ephemeral ports but {sources} source address(es) × {ports} \
         (net.ipv4.ip_local_port_range) allow {allowed}: use --local-addrs {need} (loopback \
         servers), widen the port range, or lower --max-concurrency"
    )]
    EphemeralPorts {
        connections: usize,
        sources: u64,
        ports: u64,
        allowed: u64,
        need: u64,
    },
}

/// The limits that bound the number of concurrent connections of this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OsLimits {
    /// Soft `RLIMIT_NOFILE` after raising it (`u64::MAX` = unlimited).
    pub open_files: u64,
    /// The hard `RLIMIT_NOFILE`: how far an unprivileged process could go.
    pub open_files_hard: u64,
    /// Ephemeral ports toward one server address (`None` when the range cannot be read).
    pub ephemeral_ports: Option<u64>,
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit and reads the ephemeral port range.
pub fn raise_and_read() -> io::Result<OsLimits> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid, writable rlimit for the duration of the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: `raised` is a valid rlimit; raising the soft limit up to the hard one is
        // always permitted, and a failure leaves the old limit in place (checked below).
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            lim.rlim_cur = lim.rlim_max;
        }
    }
    let ports = std::fs::read_to_string(PORT_RANGE_FILE)
        .ok()
        .and_then(|s| parse_port_range(&s));
    Ok(OsLimits {
        open_files: lim.rlim_cur,
        open_files_hard: lim.rlim_max,
        ephemeral_ports: ports,
    })
}

/// Number of ports in `ip_local_port_range` ("32768\t60999" → 28232).
fn parse_port_range(text: &str) -> Option<u64> {
    let mut it = text.split_whitespace().map(str::parse::<u64>);
    let (lo, hi) = (it.next()?.ok()?, it.next()?.ok()?);
    (hi >= lo).then(|| hi - lo + 1)
}

/// Checks that `connections` concurrent sockets to one server address, spread over
/// `sources` source addresses (each with its own port range), fit in `limits`; the error
/// names the limit, the numbers and the fix.
pub fn check_capacity(
    connections: usize,
    sources: usize,
    limits: &OsLimits,
) -> Result<(), LimitsError> {
    let conns = connections as u64;
    let needed = conns.saturating_add(RESERVED_FDS);
    if needed > limits.open_files {
        return Err(LimitsError::OpenFiles {
            connections,
            needed,
            allowed: limits.open_files,
            hard: limits.open_files_hard,
        });
    }
    if let Some(ports) = limits.ephemeral_ports {
        let sources = sources.max(1) as u64;
        if conns > ports.saturating_mul(sources) {
            return Err(LimitsError::EphemeralPorts {
                connections,
                sources,
                ports,
                allowed: ports.saturating_mul(sources),
                need: conns.div_ceil(ports),
            });
        }
    }
    Ok(())
}

/// Raises `RLIMIT_NOFILE` and checks that `connections` over `sources` source addresses fit:
/// the engine's pre-run gate.
pub fn ensure_capacity(connections: usize, sources: usize) -> Result<OsLimits, LimitsError> {
    let limits = raise_and_read().map_err(LimitsError::Read)?;
    check_capacity(connections, sources, &limits)?;
    Ok(limits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(open_files: u64, ports: Option<u64>) -> OsLimits {
        OsLimits {
            open_files,
            open_files_hard: open_files,
            ephemeral_ports: ports,
        }
    }

    #[test]
    fn port_range_is_parsed_inclusively() {
        assert_eq!(parse_port_range("32768\t60999\n"), Some(28232));
        assert_eq!(parse_port_range("1024 1024"), Some(1));
        assert_eq!(parse_port_range("60999 32768"), None);
        assert_eq!(parse_port_range("garbage"), None);
        assert_eq!(parse_port_range(""), None);
    }

    #[test]
    fn connections_within_both_limits_pass() {
        assert!(check_capacity(10_000, 1, &limits(20_000, Some(28_232))).is_ok());
        assert!(check_capacity(50_000, 1, &limits(u64::MAX, None)).is_ok());
    }

    #[test]
    fn too_few_file_descriptors_is_a_clear_error() {
        let err = check_capacity(50_000, 2, &limits(20_000, Some(64_512)))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("50000 concurrent connections need about 50064 file descriptors"));
        assert!(err.contains("RLIMIT_NOFILE allows 20000"), "{err}");
        assert!(err.contains("--max-concurrency"), "{err}");
        // The reserve counts: exactly at the limit minus the reserve passes, one more fails.
        assert!(check_capacity(1000 - 64, 1, &limits(1000, None)).is_ok());
        assert!(check_capacity(1000 - 63, 1, &limits(1000, None)).is_err());
    }

    #[test]
    fn too_few_ephemeral_ports_is_a_clear_error() {
        let err = check_capacity(30_000, 1, &limits(1 << 20, Some(28_232)))
            .unwrap_err()
            .to_string();
        assert!(err.contains("1 source address(es) × 28232"), "{err}");
        assert!(err.contains("--local-addrs 2"), "{err}");
        // Two source addresses double the ports: 50,000 fits, 60,000 needs a third.
        assert!(check_capacity(50_000, 2, &limits(1 << 20, Some(28_232))).is_ok());
        let err = check_capacity(60_000, 2, &limits(1 << 20, Some(28_232)))
            .unwrap_err()
            .to_string();
        assert!(err.contains("--local-addrs 3"), "{err}");
    }

    #[test]
    fn raising_reaches_the_hard_limit() {
        let l = raise_and_read().expect("getrlimit works on Linux");
        assert_eq!(l.open_files, l.open_files_hard);
    }
}
