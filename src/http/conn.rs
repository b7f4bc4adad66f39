//! One client connection: plain TCP or TLS, with connect timeout, `TCP_NODELAY`, and a cheap
//! check that a kept-alive connection is still open before it is reused.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use monoio::net::TcpStream;
use monoio_rustls::{ClientTlsStream, TlsConnector};
use rustls::pki_types::ServerName;

use super::source::SourceAddrs;

/// What TLS needs to open a connection: the shared rustls config and the SNI name.
#[derive(Clone)]
pub struct TlsSetup {
    pub connector: TlsConnector,
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
    Tls(Box<ClientTlsStream<TcpStream>>),
}

/// An open connection and how many responses it has carried (0 = fresh).
pub struct Connection {
    transport: Transport,
    fd: RawFd,
    /// Responses completed on this connection; a reused connection that fails before any
    /// response byte is retried once on a fresh one (the server closed it while idle).
    pub responses: u32,
}

/// Builds the rustls client config (ring provider, webpki roots) or, with `--insecure`, one
/// that accepts any certificate.
pub fn tls_setup(host: &str, insecure: bool) -> Result<TlsSetup, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup failed: {e}"))?;
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
    let server_name = ServerName::try_from(host.to_string())
        .map_err(|e| format!("invalid TLS server name '{host}': {e}"))?;
    Ok(TlsSetup {
        connector: TlsConnector::from(Arc::new(config)),
        server_name,
    })
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
                let handshake = tls.connector.connect(tls.server_name.clone(), tcp);
                match monoio::time::timeout(ep.connect_timeout, handshake).await {
                    Ok(Ok(s)) => Transport::Tls(Box::new(s)),
                    Ok(Err(e)) => {
                        return Err(io::Error::other(format!("TLS handshake failed: {e}")))
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
        })
    }

    /// True when the peer has already closed (or reset) this idle connection, so it must not
    /// be reused. One non-blocking `recv(MSG_PEEK)`: servers such as llama.cpp close after
    /// every streamed response, and finding that out here keeps the reconnect outside the
    /// measured request.
    pub fn peer_closed(&self) -> bool {
        let mut byte = 0u8;
        // SAFETY: `fd` is the open socket owned by `self.transport` (it lives as long as
        // `self`); the buffer is one valid, writable byte; MSG_PEEK leaves the data in place.
        let n = unsafe {
            libc::recv(
                self.fd,
                (&mut byte as *mut u8).cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        match n {
            0 => true,
            n if n > 0 => false, // unread bytes (e.g. a TLS alert): let the exchange see them
            _ => {
                let err = io::Error::last_os_error();
                !matches!(
                    err.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                )
            }
        }
    }

    /// Writes all request parts (shared `Bytes`, never copied).
    pub async fn write_parts(&mut self, parts: &[Bytes]) -> io::Result<()> {
        for part in parts {
            let (res, _) = match &mut self.transport {
                Transport::Plain(s) => s.write_all(part.clone()).await,
                Transport::Tls(s) => s.write_all(part.clone()).await,
            };
            res?;
        }
        Ok(())
    }

    /// Reads into the spare capacity of `buf` (rent style: the buffer comes back).
    pub async fn read(&mut self, buf: Vec<u8>) -> (io::Result<usize>, Vec<u8>) {
        match &mut self.transport {
            Transport::Plain(s) => s.read(buf).await,
            Transport::Tls(s) => s.read(buf).await,
        }
    }
}

mod insecure {
    //! `--insecure`: accept any server certificate (self-signed test servers).
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
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls12_signature(
                message,
                cert,
                dss,
                &self.0.signature_verification_algorithms,
            )
        }
        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls13_signature(
                message,
                cert,
                dss,
                &self.0.signature_verification_algorithms,
            )
        }
        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.0.signature_verification_algorithms.supported_schemes()
        }
    }
}
