//! A minimal HTTP/1.1 server for one text page (the client's own `/metrics`,
//! `--metrics-listen`): one thread of its own, off the engine's cores, one connection at a
//! time, `Connection: close`. Every read is bounded (a request head of at most
//! [`MAX_HEAD`] bytes within [`READ_TIMEOUT`]), so a client that sends nothing or too much
//! costs a few seconds of this thread, never memory or the run.
//!
//! The thread lives as long as the process: it is detached, and the process's exit ends it.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

/// The longest request head read.
pub const MAX_HEAD: usize = 8 * 1024;
/// How long a connection may take to send its head, and to take the answer.
pub const READ_TIMEOUT: Duration = Duration::from_secs(2);

/// What the page is made of at each request.
pub type Page = Arc<dyn Fn() -> String + Send + Sync>;

/// A bound listener, not serving yet.
pub struct TextServer {
    listener: TcpListener,
}

impl TextServer {
    /// Binds `addr` (`HOST:PORT`; port 0 takes a free one).
    pub fn bind(addr: &str) -> std::io::Result<TextServer> {
        let addrs: Vec<SocketAddr> = addr.to_socket_addrs()?.collect();
        let listener = TcpListener::bind(&addrs[..])?;
        Ok(TextServer { listener })
    }

    /// The address bound (with the port chosen for port 0).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves `page` at `path` (every other path: 404) on a detached thread until the
    /// process exits.
    pub fn serve(self, path: &'static str, page: Page) -> std::io::Result<()> {
        std::thread::Builder::new()
            .name("metrics-listen".into())
            .spawn(move || {
                for stream in self.listener.incoming().flatten() {
                    // One bad connection is that connection's problem only.
                    let _ = answer(stream, path, &page);
                }
            })?;
        Ok(())
    }
}

/// Reads one request head and answers it.
fn answer(mut stream: TcpStream, path: &str, page: &Page) -> std::io::Result<()> {
    stream.set_read_timeout(Some(READ_TIMEOUT))?;
    stream.set_write_timeout(Some(READ_TIMEOUT))?;
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() >= MAX_HEAD {
            return respond(&mut stream, "431 Request Header Fields Too Large", "");
        }
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let mut parts = line.split(|&b| b == b' ');
    let (method, target) = (parts.next(), parts.next());
    let target = target.map(|t| t.split(|&b| b == b'?').next().unwrap_or_default());
    match (method, target) {
        (Some(b"GET"), Some(t)) if t == path.as_bytes() => respond(&mut stream, "200 OK", &page()),
        (Some(b"GET"), _) => respond(&mut stream, "404 Not Found", "not found\n"),
        _ => respond(&mut stream, "405 Method Not Allowed", ""),
    }
}

fn respond(stream: &mut TcpStream, status: &str, body: &str) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(addr: SocketAddr, request: &str) -> String {
        let mut s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        s.write_all(request.as_bytes()).expect("write");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("read");
        out
    }

    #[test]
    fn serves_the_page_at_its_path_and_nothing_else() {
        let server = TextServer::bind("127.0.0.1:0").expect("bind");
        let addr = server.local_addr().expect("addr");
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = calls.clone();
        server
            .serve(
                "/metrics",
                Arc::new(move || {
                    let n = seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    format!("x {n}\n")
                }),
            )
            .expect("serve");
        let ok = get(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.ends_with("\r\n\r\nx 0\n"), "{ok}");
        let again = get(addr, "GET /metrics?a=b HTTP/1.1\r\n\r\n");
        assert!(again.ends_with("x 1\n"), "made afresh per request: {again}");
        assert!(get(addr, "GET / HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
        assert!(get(addr, "POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405"));
    }
}
