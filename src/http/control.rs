//! Control-plane requests outside the measured window: `/v1/models`, `/tokenize`, `/metrics`,
//! `/start_profile`, the ready check. Blocking calls for the orchestration code, run on a
//! small monoio runtime of their own over the same connection code as the engine.
//!
//! Each calling thread keeps its runtime and one kept-alive connection for the next call:
//! prompt alignment and a server-side tokenizer make one call per prompt (thousands, from
//! rayon threads), and a fresh io_uring ring plus a TCP handshake per call cost ~150 µs and
//! two sockets' worth of kernel work each.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::time::Duration;

use crate::runtime::{build_runtime, ResolvedDriver, Runtime};

use super::conn::{Connection, Endpoint};
use super::request::{HeadTemplate, Method};
use super::response::{parse_head, BodyDecoder, HttpError};

/// Why a control call got no complete response. One phrase; the caller says which call and
/// what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// (OS errors are part of the messages, not a `source`: they would be printed twice.)
    #[error("cannot start a runtime: {0}")]
    Runtime(std::io::Error),
    #[error("no response within {0:?}")]
    Timeout(Duration),
    #[error("cannot connect to {addr}: {error}")]
    Connect {
        addr: SocketAddr,
        error: std::io::Error,
    },
    #[error("write failed: {0}")]
    Write(std::io::Error),
    #[error("read failed: {0}")]
    Read(std::io::Error),
    #[error("the server closed the connection before answering")]
    ClosedBeforeAnswer,
    #[error("response too large")]
    TooLarge,
    #[error("the server closed the connection before the response was complete")]
    ClosedMidResponse,
    #[error(transparent)]
    Http(#[from] HttpError),
}

/// A complete response.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub reason: String,
    pub body: Vec<u8>,
}

impl Response {
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Bodies of control responses are small; anything larger is an error.
const MAX_BODY: usize = 32 << 20;

/// A thread's control runtime and its idle kept-alive connection.
struct ControlThread {
    driver: ResolvedDriver,
    rt: Runtime,
    idle: Option<(ConnKey, Connection)>,
}

/// Which endpoint an idle connection belongs to.
type ConnKey = (SocketAddr, bool);

fn conn_key(ep: &Endpoint) -> ConnKey {
    (ep.addr, ep.tls.is_some())
}

thread_local! {
    static CONTROL: RefCell<Option<ControlThread>> = const { RefCell::new(None) };
}

/// Closes the kept-alive control connections of this thread and of rayon's pool threads
/// (prompt alignment calls the server from there), so that none stays open on the server
/// through the measured run: servers such as llama.cpp hold an HTTP thread per open
/// connection, and a few idle ones could make measured requests wait for a thread.
pub fn close_idle_connections() {
    fn close_here() {
        CONTROL.with(|c| {
            if let Some(thread) = c
                .try_borrow_mut()
                .ok()
                .as_deref_mut()
                .and_then(Option::as_mut)
            {
                thread.idle = None;
            }
        });
    }
    close_here();
    rayon::broadcast(|_| close_here());
}

/// After this long without an answer, a control call says on stderr what it waits for: a
/// server that accepts and never answers must not look like a hung client.
pub const NOTICE_AFTER: Duration = Duration::from_secs(1);

/// How long a control call may take, and who is told when it keeps the run waiting.
#[derive(Clone, Copy)]
pub struct Wait<'a> {
    pub timeout: Duration,
    /// Gets the one-line notice (no `note:` prefix) after [`NOTICE_AFTER`]; the caller decides
    /// where it goes (the app's console), so this layer never prints.
    pub notice: &'a dyn Fn(&str),
}

impl Wait<'_> {
    /// Waits up to `timeout` and tells nobody (tests).
    pub fn quietly(timeout: Duration) -> Wait<'static> {
        Wait {
            timeout,
            notice: &|_| {},
        }
    }
}

/// Sends one request and reads the whole response, within `wait.timeout`; `what` names it
/// for the notice given to `wait.notice` when it takes longer than [`NOTICE_AFTER`].
pub fn request(
    driver: ResolvedDriver,
    ep: &Endpoint,
    head: &HeadTemplate,
    body: Option<&[u8]>,
    wait: Wait<'_>,
    what: &str,
) -> Result<Response, ControlError> {
    let Wait { timeout, notice } = wait;
    let cached = CONTROL.with(|c| c.try_borrow_mut().ok().and_then(|mut c| c.take()));
    let mut thread = match cached {
        Some(t) if t.driver == driver => t,
        _ => ControlThread {
            driver,
            rt: build_runtime(driver).map_err(ControlError::Runtime)?,
            idle: None,
        },
    };
    let key = conn_key(ep);
    let reuse = match thread.idle.take() {
        Some((k, c)) if k == key && !c.peer_closed() => Some(c),
        _ => None,
    };
    let (result, keep) = thread.rt.block_on(async {
        let call = monoio::time::timeout(timeout, exchange_reusing(ep, head, body, reuse));
        let mut call = std::pin::pin!(call);
        let answered = monoio::select! {
            r = &mut call => Some(r),
            () = monoio::time::sleep(NOTICE_AFTER.min(timeout)) => None,
        };
        let answered = match answered {
            Some(r) => r,
            None => {
                notice(&format!(
                    "waiting for {what} at {} (no answer after {:?}; giving up after {timeout:?})",
                    ep.addr, NOTICE_AFTER
                ));
                call.await
            }
        };
        match answered {
            Ok(r) => r,
            Err(_) => (Err(ControlError::Timeout(timeout)), None),
        }
    });
    thread.idle = keep.map(|c| (key, c));
    CONTROL.with(|c| {
        if let Ok(mut c) = c.try_borrow_mut() {
            *c = Some(thread);
        }
    });
    result
}

/// `GET path` convenience.
pub fn get(
    driver: ResolvedDriver,
    ep: &Endpoint,
    host: &str,
    path: &str,
    headers: &[(String, String)],
    wait: Wait<'_>,
) -> Result<Response, ControlError> {
    request(
        driver,
        ep,
        &HeadTemplate::new(Method::Get, path, host, headers),
        None,
        wait,
        &format!("GET {path}"),
    )
}

/// `POST path` with a JSON body.
pub fn post_json(
    driver: ResolvedDriver,
    ep: &Endpoint,
    host: &str,
    path: &str,
    headers: &[(String, String)],
    body: &[u8],
    wait: Wait<'_>,
) -> Result<Response, ControlError> {
    request(
        driver,
        ep,
        &HeadTemplate::new(Method::Post, path, host, headers),
        Some(body),
        wait,
        &format!("POST {path}"),
    )
}

/// [`exchange`] on `reuse` when given, once more on a fresh connection if the kept-alive one
/// turns out closed before any response byte (servers close idle connections at any time);
/// a request that got an answer is never sent twice. Returns the connection when it may
/// carry the next request.
async fn exchange_reusing(
    ep: &Endpoint,
    head: &HeadTemplate,
    body: Option<&[u8]>,
    reuse: Option<Connection>,
) -> (Result<Response, ControlError>, Option<Connection>) {
    if let Some(conn) = reuse {
        match exchange(conn, head, body).await {
            Err(Failure::Stale(_)) => {}
            other => return finish(other),
        }
    }
    match Connection::open(ep).await {
        Ok(conn) => finish(exchange(conn, head, body).await),
        Err(error) => (
            Err(ControlError::Connect {
                addr: ep.addr,
                error,
            }),
            None,
        ),
    }
}

/// Why an exchange failed.
enum Failure {
    /// Nothing came back: the connection was closed or reset before any response byte.
    Stale(ControlError),
    /// The server answered, but not with a complete, well-formed response.
    Broken(ControlError),
}

fn finish(
    r: Result<(Response, Option<Connection>), Failure>,
) -> (Result<Response, ControlError>, Option<Connection>) {
    match r {
        Ok((resp, keep)) => (Ok(resp), keep),
        Err(Failure::Stale(e) | Failure::Broken(e)) => (Err(e), None),
    }
}

/// One request and its whole response on `conn`; the connection comes back when the
/// response allows another request on it.
async fn exchange(
    mut conn: Connection,
    head: &HeadTemplate,
    body: Option<&[u8]>,
) -> Result<(Response, Option<Connection>), Failure> {
    let req = match body {
        Some(b) => head.build(None, Some("application/json"), b),
        None => head.build(None, None, b""),
    };
    conn.write_parts(&req.parts)
        .await
        .map_err(|e| Failure::Stale(ControlError::Write(e)))?;
    // Decoded as it arrives (the head once, then each read's new bytes): re-parsing the
    // whole response after every read was quadratic in its size (a 5 MB `/metrics` page of
    // 100,000 names outlasted its scrape's timeout).
    let mut pending: Vec<u8> = Vec::new();
    let mut head: Option<(u16, String, bool)> = None;
    let mut decoder = BodyDecoder::new(super::response::BodyKind::Empty);
    let mut body = Vec::new();
    let mut received = 0usize;
    let mut buf = Vec::with_capacity(16 * 1024);
    loop {
        buf.clear();
        let (res, b) = conn.read(buf).await;
        buf = b;
        let failure = |e: ControlError, received: usize| match received {
            0 => Failure::Stale(e),
            _ => Failure::Broken(e),
        };
        let n = res.map_err(|e| failure(ControlError::Read(e), received))?;
        if n == 0 && received == 0 {
            return Err(Failure::Stale(ControlError::ClosedBeforeAnswer));
        }
        received += n;
        pending.extend_from_slice(&buf[..n]);
        if body.len() + pending.len() > MAX_BODY {
            return Err(Failure::Broken(ControlError::TooLarge));
        }
        let eof = n == 0;
        if head.is_none() {
            match parse_head(&pending).map_err(|e| Failure::Broken(e.into()))? {
                Some(h) => {
                    decoder = BodyDecoder::new(h.body);
                    head = Some((h.status, h.reason.to_string(), h.keep_alive));
                    pending.drain(..h.head_len);
                }
                None if eof => return Err(Failure::Broken(ControlError::ClosedMidResponse)),
                None => continue,
            }
        }
        let (consumed, mut done) = decoder
            .decode_all(&pending, |p| body.extend_from_slice(p))
            .map_err(|e| Failure::Broken(e.into()))?;
        pending.drain(..consumed);
        if !done && eof {
            decoder.finish().map_err(|e| Failure::Broken(e.into()))?;
            done = true;
        }
        if done {
            let (status, reason, keep_alive) = head.take().unwrap_or_default();
            let resp = Response {
                status,
                reason,
                body,
            };
            return Ok((resp, (keep_alive && !eof).then_some(conn)));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{SocketAddr, TcpListener};
    use std::thread::JoinHandle;

    use super::*;
    use crate::mock::{MockConfig, MockServer};
    use crate::runtime::{resolve_driver, DriverChoice};

    const TIMEOUT: Duration = Duration::from_secs(10);

    fn driver() -> ResolvedDriver {
        resolve_driver(DriverChoice::Auto).unwrap().0
    }

    fn endpoint(addr: SocketAddr) -> Endpoint {
        Endpoint {
            addr,
            tls: None,
            connect_timeout: TIMEOUT,
            source: Default::default(),
        }
    }

    fn get_ok(ep: &Endpoint) -> Result<Response, ControlError> {
        get(
            driver(),
            ep,
            "localhost",
            "/health",
            &[],
            Wait::quietly(TIMEOUT),
        )
    }

    /// A one-thread HTTP server that answers each connection's requests with `answers` in
    /// turn, then closes it; returns how many connections it accepted.
    fn scripted_server(script: Vec<Vec<&'static [u8]>>) -> (SocketAddr, JoinHandle<usize>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let handle = std::thread::spawn(move || {
            for answers in &script {
                let (mut s, _) = listener.accept().unwrap();
                s.set_read_timeout(Some(TIMEOUT)).unwrap();
                for answer in answers {
                    let mut req = [0u8; 4096];
                    // One read holds a whole small request from the control client.
                    assert!(s.read(&mut req).unwrap() > 0);
                    s.write_all(answer).unwrap();
                }
            }
            script.len()
        });
        (addr, handle)
    }

    const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

    #[test]
    fn calls_from_one_thread_share_one_kept_alive_connection() {
        let server = MockServer::start(MockConfig::default()).unwrap();
        let ep = endpoint(server.addr());
        for _ in 0..5 {
            let resp = post_json(
                driver(),
                &ep,
                "localhost",
                "/tokenize",
                &[],
                br#"{"prompt":"a b"}"#,
                Wait::quietly(TIMEOUT),
            )
            .unwrap();
            assert!(resp.is_success(), "{}", resp.text());
        }
        assert_eq!(server.stats().connections_accepted, 1);
    }

    #[test]
    fn a_kept_connection_the_server_closed_is_replaced_transparently() {
        let (addr, server) = scripted_server(vec![vec![OK], vec![OK]]);
        let ep = endpoint(addr);
        assert_eq!(get_ok(&ep).unwrap().body, b"ok");
        // The server has closed the first connection by now (or will, mid-request).
        assert_eq!(get_ok(&ep).unwrap().body, b"ok");
        assert_eq!(server.join().unwrap(), 2);
    }

    #[test]
    fn a_request_that_got_a_partial_answer_is_not_sent_again() {
        let partial: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nab";
        let (addr, server) = scripted_server(vec![vec![OK, partial]]);
        let ep = endpoint(addr);
        assert!(get_ok(&ep).is_ok());
        let err = get_ok(&ep).unwrap_err().to_string();
        assert!(err.contains("closed before the response"), "{err}");
        assert_eq!(server.join().unwrap(), 1);
    }

    #[test]
    fn idle_connections_are_closed_before_the_measured_run() {
        let server = MockServer::start(MockConfig::default()).unwrap();
        let ep = endpoint(server.addr());
        assert!(get_ok(&ep).unwrap().is_success());
        close_idle_connections();
        assert!(get_ok(&ep).unwrap().is_success());
        // The first connection was closed, so the second call opened another.
        assert_eq!(server.stats().connections_accepted, 2);
    }
}
