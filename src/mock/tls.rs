//! The mock's HTTPS (`MockConfig::tls`, `mock-llm-server --tls`): a self-signed certificate for
//! `localhost` and the bind address, made at start (nothing on disk), served through rustls
//! on the ring provider the client uses. Clients connect with `--insecure`. It exists so that
//! the client's TLS path is tested and its cost per event measured (bench-overhead's HTTPS
//! rows) against a server whose own TLS cost is on another core.

use std::io;
use std::net::IpAddr;
use std::sync::Arc;

use monoio::buf::IoBufMut;
use monoio::io::{AsyncReadRent, AsyncWriteRent, AsyncWriteRentExt};
use monoio::net::TcpStream;
use monoio::BufResult;
use monoio_rustls::{ServerTlsStream, TlsAcceptor};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::http::conn::send_buf_all;

/// The acceptor every worker's connections shake hands through: one certificate for the
/// server's life.
#[derive(Clone)]
pub struct Acceptor(TlsAcceptor);

impl std::fmt::Debug for Acceptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Acceptor(self-signed)")
    }
}

/// Makes the certificate and the acceptor.
pub fn acceptor(host: IpAddr) -> io::Result<Acceptor> {
    let names = vec!["localhost".to_string(), host.to_string()];
    let certified = rcgen::generate_simple_self_signed(names).map_err(io::Error::other)?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(certified.key_pair.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(io::Error::other)?
        .with_no_client_auth()
        .with_single_cert(vec![certified.cert.der().clone()], key)
        .map_err(io::Error::other)?;
    Ok(Acceptor(TlsAcceptor::from(Arc::new(config))))
}

/// A client connection, plain or behind TLS.
pub enum MockStream {
    Plain(TcpStream),
    Tls(Box<ServerTlsStream<TcpStream>>),
}

impl std::fmt::Debug for MockStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            MockStream::Plain(_) => "MockStream::Plain",
            MockStream::Tls(_) => "MockStream::Tls",
        })
    }
}

impl MockStream {
    /// Wraps an accepted socket: the TLS handshake first when `tls` is given.
    pub async fn accept(stream: TcpStream, tls: Option<&Acceptor>) -> io::Result<MockStream> {
        // Each SSE event must leave at once, not wait for Nagle.
        let _ = stream.set_nodelay(true);
        match tls {
            None => Ok(MockStream::Plain(stream)),
            Some(Acceptor(acceptor)) => match acceptor.accept(stream).await {
                Ok(s) => Ok(MockStream::Tls(Box::new(s))),
                Err(e) => Err(io::Error::other(e)),
            },
        }
    }

    pub async fn read<T: IoBufMut>(&mut self, buf: T) -> BufResult<usize, T> {
        match self {
            MockStream::Plain(s) => s.read(buf).await,
            MockStream::Tls(s) => Box::pin(s.read(buf)).await,
        }
    }

    pub async fn write_all(&mut self, buf: Vec<u8>) -> BufResult<usize, Vec<u8>> {
        match self {
            // Sent now, not at the runtime's next park: the emitted timeline stamps the
            // hand-off just before this call (`Io::flush`).
            MockStream::Plain(s) => {
                let len = buf.len();
                (send_buf_all(s, &buf).await.map(|()| len), buf)
            }
            MockStream::Tls(s) => Box::pin(s.write_all(buf)).await,
        }
    }

    /// Half-closes (TLS: close_notify first).
    pub async fn shutdown(&mut self) -> io::Result<()> {
        match self {
            MockStream::Plain(s) => s.shutdown().await,
            MockStream::Tls(s) => Box::pin(s.shutdown()).await,
        }
    }
}
