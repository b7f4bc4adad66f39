//! Loopback source addresses for many concurrent connections (`--local-addrs N`).
//!
//! Every connection to one server address needs its own ephemeral port, and Linux hands out
//! about 28,000 of them (`ip_local_port_range`), so a single source address cannot hold
//! 50,000 concurrent streams. Any 127.0.0.0/8 address reaches a loopback server, and each
//! has its own port space: binding connection *i* to 127.0.0.(1 + i mod N) multiplies the
//! limit by N. The bind uses `IP_BIND_ADDRESS_NO_PORT` so the port is chosen at `connect`
//! (per 4-tuple), not reserved at `bind` (per address).

use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use monoio::net::TcpStream;
use socket2::{Domain, SockRef, Socket, Type};

/// Most source addresses `--local-addrs` accepts: 127.0.0.1 ..= 127.0.0.250.
pub const MAX_LOCAL_ADDRS: usize = 250;

/// Why `--local-addrs` cannot work for this server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    #[error("--local-addrs {0}: at most {MAX_LOCAL_ADDRS} loopback source addresses")]
    TooMany(usize),
    #[error(
        "--local-addrs {n}: the server address {server} is not in 127.0.0.0/8; extra source \
         addresses only work for a loopback server"
    )]
    NotLoopback { n: usize, server: SocketAddr },
}

/// The source addresses new connections bind to, taken round-robin; empty = the kernel's
/// choice (no bind). Cloned per core; the cursor is shared so cores interleave evenly. It is
/// touched only when a connection opens, never per request or event.
#[derive(Clone, Default, Debug)]
pub struct SourceAddrs {
    addrs: Arc<[Ipv4Addr]>,
    cursor: Arc<AtomicUsize>,
}

impl SourceAddrs {
    /// `n` loopback addresses 127.0.0.1 ..= 127.0.0.n for a server at `server`; `n <= 1`
    /// means no binding. The error says why the combination cannot work.
    pub fn loopback(n: usize, server: SocketAddr) -> Result<SourceAddrs, SourceError> {
        if n <= 1 {
            return Ok(SourceAddrs::default());
        }
        if n > MAX_LOCAL_ADDRS {
            return Err(SourceError::TooMany(n));
        }
        match server {
            SocketAddr::V4(v4) if v4.ip().is_loopback() => {}
            _ => return Err(SourceError::NotLoopback { n, server }),
        }
        let addrs: Vec<Ipv4Addr> = (1..=n as u8).map(|i| Ipv4Addr::new(127, 0, 0, i)).collect();
        Ok(SourceAddrs {
            addrs: addrs.into(),
            cursor: Arc::default(),
        })
    }

    /// Number of source addresses (0 = no binding; the kernel's single address).
    pub fn len(&self) -> usize {
        self.addrs.len()
    }

    /// True when connections are not bound.
    pub fn is_empty(&self) -> bool {
        self.addrs.is_empty()
    }

    /// The address the next connection binds to.
    fn next(&self) -> Option<Ipv4Addr> {
        if self.addrs.is_empty() {
            return None;
        }
        let i = self.cursor.fetch_add(1, Ordering::Relaxed) % self.addrs.len();
        Some(self.addrs[i])
    }

    /// Connects to `dst`, from the next source address when there are any.
    pub async fn connect(&self, dst: SocketAddr) -> io::Result<TcpStream> {
        match (self.next(), dst) {
            (None, _) => TcpStream::connect_addr(dst).await,
            (Some(src), SocketAddr::V4(dst)) => connect_from(src, dst).await,
            (Some(_), SocketAddr::V6(_)) => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "loopback source addresses are IPv4; the server address is IPv6",
            )),
        }
    }
}

/// A non-blocking socket bound to `src` with its connect to `dst` started.
fn start_connect(src: Ipv4Addr, dst: SocketAddrV4) -> io::Result<std::net::TcpStream> {
    // socket2 adds SOCK_CLOEXEC itself on Linux.
    let sock = Socket::new(Domain::IPV4, Type::STREAM.nonblocking(), None)?;
    set_bind_address_no_port(&sock);
    sock.bind(&SocketAddrV4::new(src, 0).into())
        .map_err(|e| io::Error::new(e.kind(), format!("cannot bind source address {src}: {e}")))?;
    match sock.connect(&dst.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) => return Err(e),
    }
    Ok(sock.into())
}

/// `IP_BIND_ADDRESS_NO_PORT`, which socket2 0.5 has no setter for. Failure (very old kernels)
/// only means bind reserves the port itself: still correct, fewer ports.
fn set_bind_address_no_port(sock: &Socket) {
    let one: libc::c_int = 1;
    // SAFETY: `sock` is an open socket for the whole call; the option value points to a live
    // c_int and the length given is its size.
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// Connects from `src` to `dst` without blocking the runtime: start the connect, hand the
/// socket to monoio, wait until it is writable, then read the connect's outcome (SO_ERROR).
async fn connect_from(src: Ipv4Addr, dst: SocketAddrV4) -> io::Result<TcpStream> {
    let stream = TcpStream::from_std(start_connect(src, dst)?)?;
    stream.writable(false).await?;
    // SAFETY: monoio's TcpStream has no `AsFd`; its fd stays open while `stream` lives, and
    // the borrow ends with this statement.
    let fd = unsafe { BorrowedFd::borrow_raw(stream.as_raw_fd()) };
    if let Some(err) = SockRef::from(&fd).take_error()? {
        return Err(err);
    }
    Ok(stream)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{build_runtime, ResolvedDriver};

    fn server() -> SocketAddr {
        "127.0.0.1:8000".parse().unwrap()
    }

    #[test]
    fn one_or_zero_addresses_means_no_binding() {
        assert!(SourceAddrs::loopback(0, server()).unwrap().is_empty());
        assert!(SourceAddrs::loopback(1, server()).unwrap().next().is_none());
    }

    #[test]
    fn addresses_are_taken_round_robin() {
        let s = SourceAddrs::loopback(3, server()).unwrap();
        let got: Vec<u8> = (0..7).map(|_| s.next().unwrap().octets()[3]).collect();
        assert_eq!(got, [1, 2, 3, 1, 2, 3, 1]);
        // Clones (one per core) share the cursor, so cores interleave.
        let c = s.clone();
        assert_eq!(c.next().unwrap().octets()[3], 2);
    }

    #[test]
    fn non_loopback_servers_and_too_many_addresses_are_refused() {
        let err = SourceAddrs::loopback(4, "10.0.0.1:80".parse().unwrap())
            .unwrap_err()
            .to_string();
        assert!(err.contains("not in 127.0.0.0/8"), "{err}");
        let err = SourceAddrs::loopback(4, "[::1]:80".parse().unwrap())
            .unwrap_err()
            .to_string();
        assert!(err.contains("not in 127.0.0.0/8"), "{err}");
        let err = SourceAddrs::loopback(251, server())
            .unwrap_err()
            .to_string();
        assert!(err.contains("at most 250"), "{err}");
    }

    /// Connections really leave from 127.0.0.1, .2, .3 in turn, on both drivers, and a
    /// refused connect is reported, not hung on.
    #[test]
    fn connections_bind_each_source_address_in_turn() {
        for driver in [ResolvedDriver::IoUring, ResolvedDriver::Epoll] {
            if driver == ResolvedDriver::IoUring && !monoio::utils::detect_uring() {
                continue;
            }
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap();
            let sources = SourceAddrs::loopback(3, addr).unwrap();
            let mut rt = build_runtime(driver).unwrap();
            let locals = rt.block_on(async {
                let mut out = Vec::new();
                for _ in 0..4 {
                    let s = sources.connect(addr).await.expect("loopback connect");
                    out.push(s.local_addr().unwrap().ip());
                }
                out
            });
            let want: Vec<std::net::IpAddr> = [1, 2, 3, 1]
                .iter()
                .map(|&i| Ipv4Addr::new(127, 0, 0, i).into())
                .collect();
            assert_eq!(locals, want, "{driver}");
            drop(listener);
            let refused = rt.block_on(sources.connect(addr));
            assert!(
                refused.is_err(),
                "{driver}: connect to a closed port must fail"
            );
        }
    }
}
