//! The client's TLS stream: rustls' [`ClientConnection`] driven over a monoio TCP stream with
//! buffers of our own, so that the cost per streamed event over HTTPS stays close to plain
//! HTTP's (bench-overhead's HTTPS rows).
//!
//! Why not `monoio-rustls`' stream (which the mock still serves with): it reads ciphertext
//! into a fixed 16 KiB buffer per connection, hands rustls at most 4 KiB of it per read,
//! copies out at most what the caller's (small) buffer takes, and sends one TLS record and one
//! socket write per request part, waiting for each. Here:
//!
//! - one ring read brings everything the socket holds (the buffer grows while reads fill it,
//!   up to [`CIPHER_BUF_MAX`]); every record in it is decrypted before the read returns, and
//!   the plaintext goes straight into the caller's buffer (rustls keeps what does not fit for
//!   the next read, which then needs no I/O);
//! - a request's parts go into rustls as one vectored write (one record for a small
//!   request), and the records leave in one socket write, from a buffer reused between
//!   requests;
//! - no allocation of ours per read or write once the buffers have grown (rustls itself
//!   still copies each record's plaintext out of its deframer: its buffered API has no
//!   in-place read in this release, and its unbuffered one copies the same way).

use std::io::{self, BufRead, IoSlice, Write};
use std::sync::Arc;

use bytes::Bytes;
use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use monoio::net::TcpStream;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection};

/// The ciphertext buffer's first size: an SSE event's record is a few hundred bytes, and at
/// 10,000 streams every byte here is multiplied by 10,000 (a ring read owns its buffer).
const CIPHER_BUF_MIN: usize = 4 << 10;
/// What a ciphertext buffer grows to while ring reads fill it (a fast server, a large body):
/// two full-size records, so that one read decrypts many.
const CIPHER_BUF_MAX: usize = 34 << 10;
/// Request parts given to rustls per vectored write.
const PARTS_PER_WRITE: usize = 16;
/// The outgoing buffer is let go after a write larger than this (a huge prompt), so a
/// connection does not keep its largest request's size for life.
const OUT_BUF_KEEP: usize = 64 << 10;

/// A TLS client connection over TCP.
pub struct TlsStream {
    tcp: TcpStream,
    session: ClientConnection,
    /// Ciphertext read from the socket; `inbuf[fed..]` has not been handed to rustls yet.
    inbuf: Vec<u8>,
    fed: usize,
    /// Records on their way to the socket (reused between writes).
    out: Vec<u8>,
}

impl TlsStream {
    /// Runs the handshake on `tcp` (no timeout here: the caller bounds it).
    pub async fn connect(
        config: Arc<ClientConfig>,
        name: ServerName<'static>,
        tcp: TcpStream,
    ) -> io::Result<TlsStream> {
        let session = ClientConnection::new(config, name).map_err(io::Error::other)?;
        let mut s = TlsStream {
            tcp,
            session,
            inbuf: Vec::with_capacity(CIPHER_BUF_MIN),
            fed: 0,
            out: Vec::new(),
        };
        while s.session.is_handshaking() {
            if s.session.wants_write() {
                s.flush().await?;
                continue;
            }
            if s.fill().await? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the server closed the connection during the TLS handshake",
                ));
            }
            while s.fed < s.inbuf.len() && s.session.is_handshaking() {
                if let Err(e) = s.feed() {
                    // The alert rustls queued (a rejected certificate), best effort.
                    let _ = s.flush().await;
                    return Err(e);
                }
            }
        }
        // The client's Finished.
        s.flush().await?;
        Ok(s)
    }

    /// Reads decrypted bytes into `buf` (from its start, as a ring read into a `Vec` does;
    /// up to its capacity), rent style. `Ok(0)`: the server closed the connection cleanly
    /// (close_notify); a TCP close without it is an `UnexpectedEof` error.
    ///
    /// Its future is about the size of a plain ring read's (the rare writes inside are
    /// boxed), so the connection's read needs no allocation per call.
    pub async fn read(&mut self, mut buf: Vec<u8>) -> (io::Result<usize>, Vec<u8>) {
        buf.clear();
        if buf.capacity() == 0 {
            return (Ok(0), buf);
        }
        loop {
            match self.decrypt_into(&mut buf) {
                Ok(Some(n)) => return (Ok(n), buf),
                Ok(None) => {}
                Err(e) => {
                    // The alert rustls queued for a bad record, best effort.
                    if self.session.wants_write() {
                        let _ = Box::pin(self.flush()).await;
                    }
                    return (Err(e), buf);
                }
            }
            // Nothing decrypted and nothing left to decrypt: the socket next. Whatever
            // rustls wants to say first (a key update's answer) goes out before.
            if self.session.wants_write() {
                if let Err(e) = Box::pin(self.flush()).await {
                    return (Err(e), buf);
                }
            }
            match self.fill().await {
                // Marks the TCP end: the reader then says whether it was clean.
                Ok(0) => {
                    let _ = self.session.read_tls(&mut &b""[..]);
                }
                Ok(_) => {}
                Err(e) => return (Err(e), buf),
            }
        }
    }

    /// Moves decrypted bytes into `buf` (up to its capacity), decrypting what has been read
    /// so far as needed: `Some(n)` once something was moved (or, with `n` 0, the stream
    /// ended cleanly), `None` when every byte read has been decrypted and none is left over.
    fn decrypt_into(&mut self, buf: &mut Vec<u8>) -> io::Result<Option<usize>> {
        loop {
            loop {
                let room = buf.capacity() - buf.len();
                if room == 0 {
                    return Ok(Some(buf.len()));
                }
                let mut reader = self.session.reader();
                let take = match reader.fill_buf() {
                    Ok([]) => return Ok(Some(buf.len())),
                    Ok(chunk) => {
                        let take = chunk.len().min(room);
                        buf.extend_from_slice(&chunk[..take]);
                        take
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    // The end (or an error) after the bytes before it.
                    Err(_) if !buf.is_empty() => return Ok(Some(buf.len())),
                    Err(e) => return Err(e),
                };
                reader.consume(take);
            }
            if !buf.is_empty() || self.fed == self.inbuf.len() {
                return Ok((!buf.is_empty()).then_some(buf.len()));
            }
            self.feed()?;
        }
    }

    /// Hands rustls the next ciphertext read (as much as its deframer takes) and decrypts
    /// every complete record. After a close_notify rustls takes nothing more: the rest is
    /// dropped.
    fn feed(&mut self) -> io::Result<()> {
        let n = self.session.read_tls(&mut &self.inbuf[self.fed..])?;
        self.fed = if n == 0 {
            self.inbuf.len()
        } else {
            self.fed + n
        };
        self.session
            .process_new_packets()
            .map(drop)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    /// One ring read into the ciphertext buffer (everything before was fed): how many bytes
    /// came. A read that filled the buffer doubles it for the next (up to
    /// [`CIPHER_BUF_MAX`]).
    async fn fill(&mut self) -> io::Result<usize> {
        debug_assert_eq!(self.fed, self.inbuf.len());
        let mut inbuf = std::mem::take(&mut self.inbuf);
        // A read dropped in flight (a timeout) took the buffer with it.
        if inbuf.capacity() == 0 {
            inbuf = Vec::with_capacity(CIPHER_BUF_MIN);
        }
        let cap = inbuf.capacity();
        // Before the await: if the read is dropped, `inbuf` is empty and so is what is fed.
        self.fed = 0;
        let (res, mut inbuf) = self.tcp.read(inbuf).await;
        if res
            .as_ref()
            .is_ok_and(|&n| n == cap && cap < CIPHER_BUF_MAX)
        {
            inbuf.reserve_exact((2 * cap).min(CIPHER_BUF_MAX) - inbuf.len());
        }
        if res.is_err() {
            inbuf.clear();
        }
        self.inbuf = inbuf;
        res
    }

    /// Sends every record rustls has ready, in one socket write per batch it hands out.
    async fn flush(&mut self) -> io::Result<()> {
        while self.session.wants_write() {
            let mut out = std::mem::take(&mut self.out);
            out.clear();
            self.session.write_tls(&mut out)?;
            let (res, out) = self.tcp.write_all(out).await;
            if out.capacity() <= OUT_BUF_KEEP {
                self.out = out;
            }
            res?;
        }
        Ok(())
    }

    /// Writes all request parts: up to [`PARTS_PER_WRITE`] at a time into rustls as one
    /// vectored write (one record for a request smaller than a record), then the records in
    /// one socket write. rustls takes at most its buffer limit (64 KiB) before a flush, so a
    /// larger request goes out in pieces.
    pub async fn write_parts(&mut self, parts: &[Bytes]) -> io::Result<()> {
        let (mut i, mut off) = (0, 0);
        while i < parts.len() {
            let mut iov = [IoSlice::new(&[]); PARTS_PER_WRITE];
            let mut offered = 0;
            for (k, part) in parts[i..].iter().take(PARTS_PER_WRITE).enumerate() {
                let s = if k == 0 { &part[off..] } else { &part[..] };
                iov[k] = IoSlice::new(s);
                offered += s.len();
            }
            let batch = (parts.len() - i).min(PARTS_PER_WRITE);
            let mut n = self.session.writer().write_vectored(&iov[..batch])?;
            let taken = n;
            // Past what was taken, empty parts included.
            while i < parts.len() {
                let left = parts[i].len() - off;
                if left > n {
                    off += n;
                    break;
                }
                n -= left;
                i += 1;
                off = 0;
            }
            if taken < offered {
                self.flush().await?;
            }
        }
        self.flush().await
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{SocketAddr, TcpListener};
    use std::time::Duration;

    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

    use super::*;

    /// A server config with a fresh self-signed certificate for `localhost`, and a client
    /// config that trusts exactly that certificate (verification on, as in production).
    fn configs() -> (Arc<rustls::ServerConfig>, Arc<ClientConfig>) {
        let certified = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let cert: CertificateDer<'static> = certified.cert.der().clone();
        let key =
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(certified.key_pair.serialize_der()));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let server = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert.clone()], key)
            .unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(cert).unwrap();
        let client = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        (Arc::new(server), Arc::new(client))
    }

    /// A blocking rustls server on a thread: reads `want` request bytes, answers with one
    /// record per item of `answer`, then ends with a close_notify (`clean`) or a bare TCP
    /// close. Returns the request bytes it read.
    fn serve(
        config: Arc<rustls::ServerConfig>,
        want: usize,
        answer: Vec<Vec<u8>>,
        clean: bool,
    ) -> (SocketAddr, std::thread::JoinHandle<Vec<u8>>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let thread = std::thread::spawn(move || {
            let (tcp, _) = listener.accept().unwrap();
            tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let conn = rustls::ServerConnection::new(config).unwrap();
            let mut tls = rustls::StreamOwned::new(conn, tcp);
            let mut got = vec![0u8; want];
            tls.read_exact(&mut got).unwrap();
            for record in &answer {
                // One write, one record, sent at once.
                tls.write_all(record).unwrap();
            }
            if clean {
                tls.conn.send_close_notify();
            }
            tls.flush().unwrap();
            got
        });
        (addr, thread)
    }

    /// Reads until the end through a buffer of `cap` bytes: what came, and how it ended.
    async fn read_all(s: &mut TlsStream, cap: usize) -> (Vec<u8>, io::Result<()>) {
        let mut read = Vec::new();
        let mut buf = Vec::with_capacity(cap);
        loop {
            let (res, b) = s.read(buf).await;
            buf = b;
            match res {
                Ok(0) => return (read, Ok(())),
                Ok(n) => read.extend_from_slice(&buf[..n]),
                Err(e) => return (read, Err(e)),
            }
        }
    }

    fn runtime() -> monoio::Runtime<monoio::time::TimeDriver<monoio::LegacyDriver>> {
        monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
            .enable_timer()
            .build()
            .unwrap()
    }

    /// A request of more parts than one vectored write takes, with empty parts and one
    /// larger than rustls' send buffer, arrives whole and in order; an answer of 500 small
    /// records comes back whole through a buffer smaller than a record, and the
    /// close_notify reads as the end (`Ok(0)`).
    #[test]
    fn parts_go_out_whole_and_many_records_come_back_whole() {
        let parts: Vec<Bytes> = (0..40)
            .map(|i| match i {
                20 => Bytes::from(vec![b'x'; 200_000]),
                i if i % 7 == 3 => Bytes::new(),
                i => Bytes::from(format!("part {i};")),
            })
            .collect();
        let request: Vec<u8> = parts.concat();
        let records: Vec<Vec<u8>> = (0..500)
            .map(|i| format!("data: event {i}\n\n").into_bytes())
            .collect();
        let answer: Vec<u8> = records.concat();
        let (server, client) = configs();
        let (addr, thread) = serve(server, request.len(), records, true);
        let (read, end) = runtime().block_on(async move {
            let tcp = TcpStream::connect(addr).await.unwrap();
            let name = ServerName::try_from("localhost").unwrap();
            let mut s = TlsStream::connect(client, name, tcp).await.unwrap();
            s.write_parts(&parts).await.unwrap();
            read_all(&mut s, 10).await
        });
        assert_eq!(thread.join().unwrap(), request);
        assert_eq!(read, answer);
        end.unwrap();
    }

    /// A TCP close without close_notify (a truncation) is an error, after the bytes that
    /// did come.
    #[test]
    fn a_close_without_close_notify_is_an_unexpected_eof_after_the_data() {
        let (server, client) = configs();
        let (addr, thread) = serve(server, 3, vec![b"partial".to_vec()], false);
        let (read, end) = runtime().block_on(async move {
            let tcp = TcpStream::connect(addr).await.unwrap();
            let name = ServerName::try_from("localhost").unwrap();
            let mut s = TlsStream::connect(client, name, tcp).await.unwrap();
            s.write_parts(&[Bytes::from_static(b"GET")]).await.unwrap();
            read_all(&mut s, 512).await
        });
        assert_eq!(thread.join().unwrap(), b"GET");
        assert_eq!(read, b"partial");
        assert_eq!(end.unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
    }

    /// A server whose certificate the client does not trust: the handshake fails with
    /// rustls' reason.
    #[test]
    fn an_untrusted_certificate_fails_the_handshake_with_the_reason() {
        let (server, _) = configs();
        let (_, other_client) = configs();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let thread = std::thread::spawn(move || {
            let (mut tcp, _) = listener.accept().unwrap();
            tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut conn = rustls::ServerConnection::new(server).unwrap();
            // Runs until the client's alert ends the handshake.
            while conn.complete_io(&mut tcp).is_ok() && conn.is_handshaking() {}
        });
        let err = runtime()
            .block_on(async move {
                let tcp = TcpStream::connect(addr).await.unwrap();
                let name = ServerName::try_from("localhost").unwrap();
                TlsStream::connect(other_client, name, tcp).await.map(drop)
            })
            .unwrap_err();
        thread.join().unwrap();
        assert!(
            err.to_string().contains("invalid peer certificate"),
            "{err}"
        );
    }
}
