//! One client connection: plain TCP or TLS, with connect timeout, `TCP_NODELAY`, and a cheap
//! check that a kept-alive connection is still open before it is reused.
//!
//! A request of many shared parts (a trace replay's prompt blocks) goes out with vectored
//! writes (`writev`, at most [`IOV_MAX`] parts per call), so its cost in syscalls does not
//! grow with its number of parts; over TLS the parts go into one record where they fit
//! ([`super::tls`]).

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use monoio::buf::IoVecBuf;
use monoio::io::AsyncReadRent;
use monoio::net::TcpStream;
use rustls::pki_types::ServerName;

use super::source::SourceAddrs;
use super::tls::TlsStream;

/// What TLS needs to open a connection: the shared rustls config and the SNI name.
#[derive(Clone)]
pub struct TlsSetup {
    pub config: Arc<rustls::ClientConfig>,
    pub server_name: ServerName<'static>,
}

/// Where and how to connect. Built once before the run; cloned per core.
#[derive(Clone)]
pub struct Endpoint {
    pub addr: SocketAddr,
    pub tls: Option<TlsSetup>,
    pub connect_timeout: Duration,
    /// Loopback source addresses to spread connections over (`--local-addrs`; empty = none).
    pub source: SourceAddrs,
}

enum Transport {
    Plain(TcpStream),
    Tls(Box<TlsStream>),
}

/// An open connection and how many responses it has carried (0 = fresh).
pub struct Connection {
    transport: Transport,
    fd: RawFd,
    /// Responses completed on this connection; a reused connection that fails before any
    /// response byte is retried once on a fresh one (the server closed it while idle).
    pub responses: u32,
    /// Opened ahead of its first request (before the clock): it may have idled past the
    /// server's keep-alive timeout, so it is retried like a reused one.
    pub opened_ahead: bool,
    /// The iovec buffers of the last vectored write, kept for the next (no allocation per
    /// request once they have grown).
    spare_iov: Option<IoParts>,
}

/// Linux's limit on iovecs per `writev` call.
pub const IOV_MAX: usize = 1024;

/// A batch of request parts as an iovec array. It holds its own reference to every part, so
/// the memory the kernel reads stays valid even if the write future is dropped while the
/// io_uring operation is in flight (monoio then keeps the buffer until it completes).
#[derive(Default)]
struct IoParts {
    iov: Vec<libc::iovec>,
    keep: Vec<Bytes>,
}

impl IoParts {
    fn fill(&mut self, parts: &[Bytes]) {
        self.clear();
        for p in parts.iter().filter(|p| !p.is_empty()) {
            self.iov.push(libc::iovec {
                iov_base: p.as_ptr() as *mut libc::c_void,
                iov_len: p.len(),
            });
            self.keep.push(p.clone());
        }
    }

    fn clear(&mut self) {
        self.iov.clear();
        self.keep.clear();
    }

    /// Drops the first `sent` bytes from the iovecs (the parts stay held in `keep`).
    fn advance(&mut self, mut sent: usize) {
        let whole = self.iov.iter().take_while(|v| {
            let fits = v.iov_len <= sent;
            if fits {
                sent -= v.iov_len;
            }
            fits
        });
        let whole = whole.count();
        self.iov.drain(..whole);
        if let Some(first) = self.iov.first_mut() {
            // SAFETY: `sent` < `first.iov_len` here, so the pointer stays inside its part.
            first.iov_base = unsafe { first.iov_base.cast::<u8>().add(sent) }.cast();
            first.iov_len -= sent;
        }
    }
}

/// Sends every byte `iov` covers on `fd`: non-blocking `sendmsg`s, waiting on `s` for room
/// only when the socket's send buffer is full. (Not monoio's `write_vectored_all`: 0.2.4's
/// `IoVecMeta::consume` does not advance a partly written iovec, so a vectored write larger
/// than the send buffer went out wrong.)
async fn send_all(fd: RawFd, s: &TcpStream, iov: &mut IoParts) -> io::Result<()> {
    while !iov.iov.is_empty() {
        match sendmsg_now(fd, &iov.iov) {
            Some(Ok(n)) => iov.advance(n),
            Some(Err(e)) => return Err(e),
            None => {}
        }
        if !iov.iov.is_empty() {
            s.writable(false).await?;
        }
    }
    Ok(())
}

/// What a non-blocking send syscall returned: `None` when the socket took nothing now
/// (`EAGAIN`, `EINTR`).
fn sent(n: isize) -> Option<io::Result<usize>> {
    match usize::try_from(n) {
        Ok(n) => Some(Ok(n)),
        Err(_) => {
            let err = io::Error::last_os_error();
            match err.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => None,
                _ => Some(Err(err)),
            }
        }
    }
}

/// Sends all of `buf` on `s` now: non-blocking `send`s in the caller's own turn, waiting for
/// room only when the socket's send buffer is full. Through the ring a write leaves at the
/// runtime's next park, after every other ready task; this one leaves before the call
/// returns, so an instant taken just before it is when the bytes reached the kernel (the
/// mock's emitted timeline relies on that).
pub async fn send_buf_all(s: &TcpStream, buf: &[u8]) -> io::Result<()> {
    let fd = s.as_raw_fd();
    let mut off = 0;
    loop {
        match send_now(fd, &buf[off..]) {
            Some(Ok(n)) => off += n,
            Some(Err(e)) => return Err(e),
            None => {}
        }
        if off == buf.len() {
            return Ok(());
        }
        // Rare: the send buffer is full; wait until it takes more.
        s.writable(false).await?;
    }
}

/// One non-blocking `send` of `buf` on `fd` (no `SIGPIPE` on a closed peer: an error).
fn send_now(fd: RawFd, buf: &[u8]) -> Option<io::Result<usize>> {
    // SAFETY: `fd` is an open socket the caller's connection owns; `buf` is valid for
    // reading `buf.len()` bytes for the duration of the call.
    let n = unsafe {
        libc::send(
            fd,
            buf.as_ptr().cast(),
            buf.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
    sent(n)
}

/// One non-blocking `sendmsg` of the buffers `iov` points to.
fn sendmsg_now(fd: RawFd, iov: &[libc::iovec]) -> Option<io::Result<usize>> {
    // SAFETY: an all-zero msghdr is valid (no name, no control data).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_ptr().cast_mut();
    msg.msg_iovlen = iov.len() as _;
    // SAFETY: `fd` is an open socket the caller's connection owns; every iovec points into
    // a `Bytes` the caller holds for the duration of the call (at most IOV_MAX of them).
    let n = unsafe { libc::sendmsg(fd, &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
    sent(n)
}

// SAFETY: every iovec points into a `Bytes` held in `keep` (reference counted, its memory
// never moves or changes), and the array is not modified while the runtime owns the value:
// `fill`/`clear` need `&mut self`, which the runtime's ownership excludes.
unsafe impl IoVecBuf for IoParts {
    fn read_iovec_ptr(&self) -> *const libc::iovec {
        self.iov.as_ptr()
    }

    fn read_iovec_len(&self) -> usize {
        self.iov.len()
    }
}

/// Why TLS cannot be set up for a server.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("TLS setup failed: {0}")]
    Setup(rustls::Error),
    #[error("invalid TLS server name '{host}': {error}")]
    ServerName {
        host: String,
        error: rustls::pki_types::InvalidDnsNameError,
    },
}

/// Builds the rustls client config (ring provider, webpki roots) or, with `--insecure`, one
/// that accepts any certificate.
pub fn tls_setup(host: &str, insecure: bool) -> Result<TlsSetup, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Setup)?;
    let mut config = if insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(insecure::AcceptAnyCert(provider)))
            .with_no_client_auth()
    } else {
        let roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let server_name =
        ServerName::try_from(host.to_string()).map_err(|error| TlsError::ServerName {
            host: host.to_string(),
            error,
        })?;
    Ok(TlsSetup {
        config: Arc::new(config),
        server_name,
    })
}

/// Whether the server at `addr` answers a TLS ClientHello with plain HTTP (`HTTP/1.x ...`):
/// an `https://` URL given for a plain-HTTP server, which would otherwise wait out the
/// handshake timeout (a plain server waits for the end of a request line the ClientHello
/// never sends). The ClientHello is followed by a blank line so such a server answers at
/// once; a TLS server answers the ClientHello first. Waits at most `wait` for the first
/// bytes; `false` when nothing (or anything else) comes. Blocking: for the checks before
/// the run.
pub fn answers_tls_with_http(addr: SocketAddr, host: &str, wait: Duration) -> bool {
    use std::io::{Read, Write};
    let hello = || -> Option<Vec<u8>> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .ok()?
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        let name = ServerName::try_from(host.to_string()).ok()?;
        let mut conn = rustls::ClientConnection::new(Arc::new(config), name).ok()?;
        let mut bytes = Vec::new();
        conn.write_tls(&mut bytes).ok()?;
        Some(bytes)
    };
    let Some(mut bytes) = hello() else {
        return false;
    };
    bytes.extend_from_slice(b"\r\n\r\n");
    let Ok(mut tcp) = std::net::TcpStream::connect_timeout(&addr, wait) else {
        return false;
    };
    if tcp.set_read_timeout(Some(wait)).is_err() || tcp.write_all(&bytes).is_err() {
        return false;
    }
    let mut head = [0u8; 5];
    let mut got = 0;
    while got < head.len() {
        match tcp.read(&mut head[got..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    &head[..got] == b"HTTP/"
}

impl Connection {
    /// Opens a connection within the endpoint's connect timeout.
    pub async fn open(ep: &Endpoint) -> io::Result<Connection> {
        let tcp = match monoio::time::timeout(ep.connect_timeout, ep.source.connect(ep.addr)).await
        {
            Ok(r) => r?,
            Err(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "connect to {} timed out after {:?}",
                        ep.addr, ep.connect_timeout
                    ),
                ))
            }
        };
        tcp.set_nodelay(true)?;
        let fd = tcp.as_raw_fd();
        let transport = match &ep.tls {
            None => Transport::Plain(tcp),
            Some(tls) => {
                let handshake =
                    TlsStream::connect(tls.config.clone(), tls.server_name.clone(), tcp);
                match monoio::time::timeout(ep.connect_timeout, handshake).await {
                    Ok(Ok(s)) => Transport::Tls(Box::new(s)),
                    Ok(Err(e)) => {
                        // The rustls error says why (e.g. "invalid peer certificate:
                        // UnknownIssuer").
                        // Plain text where a TLS record belongs: most likely an HTTP server.
                        let hint = if e.to_string().contains("InvalidContentType") {
                            " (the server answered in plain text: it speaks HTTP, not \
                             HTTPS; use an http:// URL)"
                        } else {
                            ""
                        };
                        return Err(io::Error::new(
                            e.kind(),
                            format!("TLS handshake failed: {e}{hint}"),
                        ));
                    }
                    Err(_) => {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "TLS handshake timed out",
                        ))
                    }
                }
            }
        };
        Ok(Connection {
            transport,
            fd,
            responses: 0,
            opened_ahead: false,
            spare_iov: None,
        })
    }

    /// A connection that may idle before its first request (see [`Connection::opened_ahead`]).
    pub fn ahead(mut self) -> Connection {
        self.opened_ahead = true;
        self
    }

    /// True when a failure before any response byte means the server closed this connection
    /// while it idled (it carried responses before, or was opened ahead of its first use):
    /// the request never reached the server and is retried once on a fresh connection.
    pub fn may_be_stale(&self) -> bool {
        self.responses > 0 || self.opened_ahead
    }

    /// True when the peer has already closed (or reset) this idle connection, so it must not
    /// be reused. One non-blocking `recv(MSG_PEEK)`: servers such as llama.cpp close after
    /// every streamed response, and finding that out here keeps the reconnect outside the
    /// measured request.
    pub fn peer_closed(&self) -> bool {
        let mut byte = [0u8];
        match self.recv_now(&mut byte, libc::MSG_PEEK) {
            Some(Ok(0)) | Some(Err(_)) => true,
            // Unread bytes (e.g. a TLS alert): let the exchange see them.
            Some(Ok(_)) | None => false,
        }
    }

    /// One non-blocking `recv` with `flags` into `buf`: `None` when nothing is waiting.
    fn recv_now(&self, buf: &mut [u8], flags: libc::c_int) -> Option<io::Result<usize>> {
        // SAFETY: `fd` is the open socket owned by `self.transport` (it lives as long as
        // `self`); `buf` is valid and writable for `buf.len()` bytes; callers have no ring
        // read in flight on this socket, so nothing else writes into it.
        let n = unsafe {
            libc::recv(
                self.fd,
                buf.as_mut_ptr().cast(),
                buf.len(),
                flags | libc::MSG_DONTWAIT,
            )
        };
        match usize::try_from(n) {
            Ok(n) => Some(Ok(n)),
            Err(_) => {
                let err = io::Error::last_os_error();
                match err.kind() {
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => None,
                    _ => Some(Err(err)),
                }
            }
        }
    }

    /// Ends the connection now, from a cut exchange (a cancel, a timeout, a stop): the peer
    /// sees it end at once, a FIN and then a reset at its next write, as after a close. The
    /// descriptor itself is closed when the connection is dropped, through the ring, once the
    /// cut read's cancellation has completed: the core's next turn, which after a run's last
    /// exchange is the next run (the engine's runtime idles between runs), so the peer would
    /// meanwhile write a whole answer into an open socket. `shutdown` on the descriptor the
    /// connection still owns never touches another socket.
    pub fn abort(self) {
        // SAFETY: `fd` is the open socket owned by `self.transport`, alive until the end of
        // this call; `shutdown` neither frees nor reuses it.
        unsafe { libc::shutdown(self.fd, libc::SHUT_RDWR) };
    }

    /// Plain TCP, not TLS.
    pub fn is_plain(&self) -> bool {
        matches!(self.transport, Transport::Plain(_))
    }

    /// Reads bytes that have already arrived, without waiting: one non-blocking `recv` into
    /// `buf`. `None` when nothing is waiting, or over TLS (whose records are read through
    /// the TLS stream only); `Some(Ok(0))` at end of stream.
    ///
    /// For draining a socket that a full [`read`](Self::read) showed to hold more: the bytes
    /// are there, so a direct `recv` into a buffer the core shares is cheaper than another
    /// ring round trip into a per-connection buffer that would have to grow.
    pub fn read_ready(&mut self, buf: &mut [u8]) -> Option<io::Result<usize>> {
        if !self.is_plain() {
            return None;
        }
        self.recv_now(buf, 0)
    }

    /// Writes all request parts (shared `Bytes`, never copied): one `write` for a single
    /// part, else `writev` over batches of at most [`IOV_MAX`] parts; over TLS the parts go
    /// into rustls together and leave in one write ([`TlsStream::write_parts`]).
    ///
    /// Plain TCP first tries one non-blocking `send` / `sendmsg` right here: a request fits
    /// the socket's send buffer as a rule, so it leaves at once and the response's read is
    /// queued in the same turn. Through the ring, the write would complete only at the
    /// runtime's next park, and the read be submitted at the park after that: one more ring
    /// round trip per request, which bounds a closed loop's requests per second (the
    /// firehose). When the send buffer is full the write waits for room (a readiness wait)
    /// and sends the rest the same way.
    pub async fn write_parts(&mut self, parts: &[Bytes]) -> io::Result<()> {
        let fd = self.fd;
        match &mut self.transport {
            // Boxed (once per request): the TLS write future holds the parts' iovecs and
            // a socket write, which every idle worker's state would carry inline.
            Transport::Tls(s) => Box::pin(s.write_parts(parts)).await?,
            Transport::Plain(s) if parts.len() == 1 => send_buf_all(s, &parts[0]).await?,
            Transport::Plain(s) => {
                let mut iov = self.spare_iov.take().unwrap_or_default();
                for batch in parts.chunks(IOV_MAX) {
                    iov.fill(batch);
                    let result = send_all(fd, s, &mut iov).await;
                    iov.clear();
                    if let Err(e) = result {
                        self.spare_iov = Some(iov);
                        return Err(e);
                    }
                }
                self.spare_iov = Some(iov);
            }
        }
        Ok(())
    }

    /// Reads into `buf` from its start, up to its capacity (rent style: the buffer comes
    /// back). Over TLS: the decrypted bytes, with every record of one socket read decrypted
    /// ([`TlsStream::read`]; its future is a plain read's plus a few words, so neither is
    /// boxed).
    pub async fn read(&mut self, buf: Vec<u8>) -> (io::Result<usize>, Vec<u8>) {
        match &mut self.transport {
            Transport::Plain(s) => s.read(buf).await,
            Transport::Tls(s) => s.read(buf).await,
        }
    }
}

mod insecure {
    //! `--insecure`: accept any server certificate (self-signed test servers).
    //!
    //! The handshake's signature (CertificateVerify) is not checked either: it proves only
    //! that the server holds the key of the certificate it sent, and with any certificate
    //! accepted anyone can make one. Checking it cost a P-256 verification per connection:
    //! skipping it took a TLS connection's fixed cost on the client's core from 245 to
    //! 177 µs (plain HTTP: 63 µs; bench-overhead/results/HISTORY.md).
    use std::sync::Arc;

    use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
    use rustls::crypto::CryptoProvider;
    use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
    use rustls::{DigitallySignedStruct, SignatureScheme};

    #[derive(Debug)]
    pub struct AcceptAnyCert(pub Arc<CryptoProvider>);

    impl ServerCertVerifier for AcceptAnyCert {
        fn verify_server_cert(
            &self,
            _: &CertificateDer<'_>,
            _: &[CertificateDer<'_>],
            _: &ServerName<'_>,
            _: &[u8],
            _: UnixTime,
        ) -> Result<ServerCertVerified, rustls::Error> {
            Ok(ServerCertVerified::assertion())
        }
        fn verify_tls12_signature(
            &self,
            _: &[u8],
            _: &CertificateDer<'_>,
            _: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            Ok(HandshakeSignatureValid::assertion())
        }
        fn verify_tls13_signature(
            &self,
            _: &[u8],
            _: &CertificateDer<'_>,
            _: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            Ok(HandshakeSignatureValid::assertion())
        }
        /// What the ClientHello offers: every scheme the provider could verify, so that any
        /// server finds one to sign with.
        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.0.signature_verification_algorithms.supported_schemes()
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    /// A listener on loopback and a thread that reads one connection to its end (bounded by
    /// `timeout`): where the bytes a test writes are collected.
    fn reader(timeout: Duration) -> (SocketAddr, std::thread::JoinHandle<Vec<u8>>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let thread = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            s.set_read_timeout(Some(timeout)).unwrap();
            let mut got = Vec::new();
            s.read_to_end(&mut got).unwrap();
            got
        });
        (addr, thread)
    }

    /// More parts than one `writev` takes, then a single part: every byte arrives, in order.
    #[test]
    fn many_parts_arrive_in_order() {
        let (addr, reader) = reader(Duration::from_secs(10));
        let parts: Vec<Bytes> = (0..2 * IOV_MAX + 7)
            .map(|i| match i % 3 {
                0 => Bytes::new(),
                _ => Bytes::from(format!("{i},")),
            })
            .collect();
        let mut expected: Vec<u8> = parts.concat();
        expected.extend_from_slice(b"end");
        let mut rt = monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
            .enable_timer()
            .build()
            .unwrap();
        rt.block_on(async {
            let ep = Endpoint {
                addr,
                tls: None,
                connect_timeout: Duration::from_secs(5),
                source: Default::default(),
            };
            let mut c = Connection::open(&ep).await.unwrap();
            c.write_parts(&parts).await.unwrap();
            c.write_parts(&[Bytes::from_static(b"end")]).await.unwrap();
        });
        assert_eq!(reader.join().unwrap(), expected);
    }

    /// Requests far larger than a socket's send buffer: the non-blocking send takes part of
    /// each, and the rest (from the middle of a part) goes through the runtime; every byte
    /// arrives once, in order, on both drivers.
    #[test]
    fn a_request_larger_than_the_send_buffer_arrives_whole() {
        let mut drivers = vec!["epoll"];
        if monoio::utils::detect_uring() {
            drivers.push("io_uring");
        }
        for driver in drivers {
            let (addr, reader) = reader(Duration::from_secs(30));
            // Distinct bytes everywhere, so a part sent twice or skipped shows.
            let big = |n: usize, seed: u8| -> Bytes {
                (0..n)
                    .map(|i| (i % 251) as u8 ^ seed)
                    .collect::<Vec<u8>>()
                    .into()
            };
            let single = [big(16 << 20, 1)];
            let multi = [big(5 << 20, 2), Bytes::new(), big(7 << 20, 3), big(3, 4)];
            let mut expected: Vec<u8> = single.concat();
            expected.extend_from_slice(&multi.concat());
            let ep = Endpoint {
                addr,
                tls: None,
                connect_timeout: Duration::from_secs(5),
                source: Default::default(),
            };
            let write = async {
                let mut c = Connection::open(&ep).await.unwrap();
                c.write_parts(&single).await.unwrap();
                c.write_parts(&multi).await.unwrap();
            };
            if driver == "epoll" {
                monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
                    .enable_timer()
                    .build()
                    .unwrap()
                    .block_on(write);
            } else {
                monoio::RuntimeBuilder::<monoio::IoUringDriver>::new()
                    .enable_timer()
                    .build()
                    .unwrap()
                    .block_on(write);
            }
            let got = reader.join().unwrap();
            assert_eq!(got.len(), expected.len(), "{driver}");
            assert!(got == expected, "{driver}: the bytes differ");
        }
    }

    #[test]
    fn advancing_drops_what_was_sent_inside_a_part() {
        let parts = [
            Bytes::from_static(b"abc"),
            Bytes::new(),
            Bytes::from_static(b"defg"),
        ];
        let unsent = |iov: &IoParts| -> Vec<u8> {
            iov.iov
                .iter()
                // SAFETY: every iovec points into a part `iov.keep` holds.
                .flat_map(|v| unsafe {
                    std::slice::from_raw_parts(v.iov_base.cast::<u8>(), v.iov_len)
                })
                .copied()
                .collect()
        };
        for (sent, rest) in [(0, &b"abcdefg"[..]), (3, b"defg"), (5, b"fg"), (7, b"")] {
            let mut iov = IoParts::default();
            iov.fill(&parts);
            iov.advance(sent);
            assert_eq!(unsent(&iov), rest, "after {sent}");
        }
        let mut iov = IoParts::default();
        iov.fill(&parts);
        iov.advance(1);
        iov.advance(3);
        assert_eq!(unsent(&iov), b"efg");
    }
}
