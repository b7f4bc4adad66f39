//! One client connection: read a request (head, then body by length or chunks), hand it
//! to the endpoints, write the answer, and repeat while the connection stays open
//! (keep-alive, pipelined requests kept in the buffer, `Connection: close` honoured).
//!
//! The connection owns its buffers for its whole life; a request costs no allocation once
//! they have grown to the sizes the traffic needs (a buffer that grew for a multi-MB body
//! is shrunk back afterwards so idle connections stay small).

use std::io;
use std::mem;
use std::rc::Rc;
use std::time::{Duration, Instant};

use monoio::buf::IoBufMut;
use monoio::net::TcpStream;

use crate::http::request::Method;

use super::ctx::WorkerCtx;
use super::emission::StreamTrace;
use super::endpoints;
use super::exchange::{self, Exchange, Request, Served};
use super::generation::{End, Script};
use super::io::Io;
use super::request::{self, BodyFraming, ChunkedBody, FramingError, Head};
use super::response::{self, HeadOpts};
use super::routes::{self, Lookup};
use super::stats::LoggedRequest;
use super::tls::MockStream;

/// Smallest free space offered to a read.
const MIN_READ: usize = 4 << 10;
/// Read buffers above this capacity are shrunk once idle.
const KEEP_CAPACITY: usize = 256 << 10;
/// How long a rejected client may keep sending before the socket is closed anyway.
const LINGER: Duration = Duration::from_secs(1);

/// Serves one accepted connection until it closes or the worker stops; errors just close it.
pub async fn serve(stream: TcpStream, ctx: Rc<WorkerCtx>, id: u64) {
    let _live = ctx.life.enter();
    let handshake = MockStream::accept(stream, ctx.shared.tls.as_ref());
    let stream = monoio::select! {
        biased;
        () = ctx.life.stopped() => return,
        s = handshake => match s {
            Ok(s) => s,
            // A failed handshake (a plain-HTTP client on an HTTPS port): just close.
            Err(_) => return,
        },
    };
    let mut conn = Conn {
        ex: Exchange {
            io: Io {
                stream,
                out: Vec::with_capacity(MIN_READ),
                trace: ctx.shared.cfg.timing_report.then(StreamTrace::default),
            },
            script: Script::default(),
            scratch: Vec::new(),
        },
        buf: Vec::with_capacity(MIN_READ),
        chunked: Vec::new(),
        id,
    };
    // The stop is checked first at every wake-up: a stopped or cut connection (shutdown, a
    // crash) serves nothing more, even when a read of its completed in the same wake-up.
    monoio::select! {
        biased;
        () = ctx.life.stopped() => {},
        _ = conn.run(&ctx) => {},
    }
}

struct Conn {
    ex: Exchange,
    buf: Vec<u8>,
    chunked: Vec<u8>,
    /// The connection's id in the request log.
    id: u64,
}

enum Step<T> {
    Ready(T),
    Eof,
    Bad(FramingError),
}

impl Conn {
    async fn run(&mut self, ctx: &WorkerCtx) -> io::Result<()> {
        let max_body = ctx.shared.cfg.max_body_bytes;
        loop {
            let head = match self.read_head(max_body).await? {
                Step::Ready(h) => h,
                Step::Eof => return Ok(()),
                Step::Bad(e) => return self.reject(ctx, &e).await,
            };
            let consumed = match self.read_body(&head, max_body).await? {
                Step::Ready(n) => n,
                Step::Eof => return Ok(()),
                Step::Bad(e) => return self.reject(ctx, &e).await,
            };
            let arrival = Instant::now();
            let end = self.dispatch(ctx, &head, consumed, arrival).await?;
            self.buf.drain(..consumed);
            if self.buf.capacity() > KEEP_CAPACITY && self.buf.len() < MIN_READ {
                self.buf.shrink_to(MIN_READ);
                self.chunked = Vec::new();
            }
            if end == End::Close || head.close {
                return Ok(());
            }
        }
    }

    /// Routes the request, serves it, counts and logs it.
    async fn dispatch(
        &mut self,
        ctx: &WorkerCtx,
        head: &Head,
        consumed: usize,
        arrival: Instant,
    ) -> io::Result<End> {
        let body: &[u8] = match head.body {
            BodyFraming::Length(_) => &self.buf[head.len..consumed],
            BodyFraming::Chunked => &self.chunked,
        };
        let path = &self.buf[head.path.clone()];
        let request_id = head.request_id.clone().map(|r| &self.buf[r]);
        let lookup = routes::lookup(head.method, path);
        let req = Request {
            body,
            arrival,
            request_id,
            close: head.close,
            head_only: head.method == Some(Method::Head),
        };
        let served = match lookup {
            Lookup::Found(route) => endpoints::serve(ctx, &mut self.ex, route, &req).await,
            Lookup::WrongMethod(allowed) => {
                let msg = format!("method not allowed; use {}", allowed.as_str());
                exchange::error(&mut self.ex, &req, 405, &msg, Some(allowed.as_str()))
            }
            Lookup::NotFound => {
                let msg = format!("not found: {}", String::from_utf8_lossy(path));
                exchange::error(&mut self.ex, &req, 404, &msg, None)
            }
        };
        let route = match lookup {
            Lookup::Found(r) => Some(r),
            _ => None,
        };
        ctx.counters().request(route, served.rejected);
        if ctx.shared.cfg.request_log {
            let entry = log_entry(ctx, head, path, body.len(), request_id, arrival, &served);
            let text = |r: &std::ops::Range<usize>| {
                String::from_utf8_lossy(&self.buf[r.clone()]).into_owned()
            };
            ctx.counters().log(LoggedRequest {
                served: Instant::now().saturating_duration_since(ctx.shared.start),
                connection: self.id,
                session_id: head.session_id.as_ref().map(text),
                body: ctx
                    .shared
                    .cfg
                    .request_log_bodies
                    .then(|| String::from_utf8_lossy(body).into_owned()),
                ..entry
            });
        }
        if let Some(trace) = &mut self.ex.io.trace {
            // A stream's last content chunk leaves with this final write: its hand-off is
            // taken here, a lock and a copy before the write, so that the stream is in the
            // timing report before the client can see its end (as with the counters).
            trace.handing_off(Instant::now());
            if trace.ready() {
                ctx.counters().emitted(trace);
                trace.clear();
            }
        }
        // Written only now, so the request is counted before the client can see its end.
        let written = self.ex.io.flush().await;
        if served.client_closed || written.is_err() {
            // Mid-stream or at its last write: a client gone before its answer ended.
            ctx.counters().closed_by_client();
        }
        written?;
        Ok(served.end)
    }

    /// Answers a framing error and closes (the rest of the stream cannot be trusted).
    async fn reject(&mut self, ctx: &WorkerCtx, e: &FramingError) -> io::Result<()> {
        let (status, reason) = e.status();
        self.ex.scratch.clear();
        response::error_body(&mut self.ex.scratch, status, e.message());
        let opts = HeadOpts {
            content_type: response::JSON,
            close: true,
            ..HeadOpts::default()
        };
        response::full(
            &mut self.ex.io.out,
            status,
            reason,
            &self.ex.scratch,
            &opts,
            false,
        );
        ctx.counters().request(None, true);
        self.ex.io.flush().await?;
        self.linger().await;
        Ok(())
    }

    /// Half-closes, then discards what the client is still sending (for at most
    /// [`LINGER`]): closing with unread bytes would send a reset, and the client could
    /// lose the error answer it has not read yet.
    async fn linger(&mut self) {
        if self.ex.io.stream.shutdown().await.is_err() {
            return;
        }
        let deadline = monoio::time::Instant::now() + LINGER;
        loop {
            self.buf.clear();
            match monoio::time::timeout_at(deadline, self.read_more()).await {
                Ok(Ok(true)) => {}
                _ => return,
            }
        }
    }

    async fn read_head(&mut self, max_body: usize) -> io::Result<Step<Head>> {
        loop {
            match request::parse_head(&self.buf, max_body) {
                Ok(Some(h)) => return Ok(Step::Ready(h)),
                Ok(None) => {
                    if !self.read_more().await? {
                        return Ok(Step::Eof);
                    }
                }
                Err(e) => return Ok(Step::Bad(e)),
            }
        }
    }

    /// Reads the body; returns the bytes of `buf` the whole request occupies.
    async fn read_body(&mut self, head: &Head, max_body: usize) -> io::Result<Step<usize>> {
        let mut continued = false;
        match head.body {
            BodyFraming::Length(n) => {
                let need = head.len + n;
                if self.buf.len() < need {
                    self.buf.reserve(need - self.buf.len());
                }
                while self.buf.len() < need {
                    self.send_continue(head, &mut continued).await?;
                    if !self.read_more().await? {
                        return Ok(Step::Eof);
                    }
                }
                Ok(Step::Ready(need))
            }
            BodyFraming::Chunked => {
                let mut decoder = ChunkedBody::default();
                self.chunked.clear();
                loop {
                    match decoder.decode(&self.buf[head.len..], &mut self.chunked, max_body) {
                        Ok(Some(n)) => return Ok(Step::Ready(head.len + n)),
                        Ok(None) => {
                            self.send_continue(head, &mut continued).await?;
                            if !self.read_more().await? {
                                return Ok(Step::Eof);
                            }
                        }
                        Err(e) => return Ok(Step::Bad(e)),
                    }
                }
            }
        }
    }

    /// `100 Continue` once, for clients that wait for it before sending the body.
    async fn send_continue(&mut self, head: &Head, sent: &mut bool) -> io::Result<()> {
        if head.expect_continue && !*sent {
            *sent = true;
            self.ex
                .io
                .out
                .extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
            self.ex.io.flush().await?;
        }
        Ok(())
    }

    /// Reads more bytes into `buf`; false on end of stream.
    async fn read_more(&mut self) -> io::Result<bool> {
        if self.buf.capacity() - self.buf.len() < MIN_READ {
            self.buf.reserve(MIN_READ.max(self.buf.len()));
        }
        let (len, cap) = (self.buf.len(), self.buf.capacity());
        let buf = mem::take(&mut self.buf);
        let (res, slice) = self.ex.io.stream.read(buf.slice_mut(len..cap)).await;
        self.buf = slice.into_inner();
        Ok(res? > 0)
    }
}

fn log_entry(
    ctx: &WorkerCtx,
    head: &Head,
    path: &[u8],
    body_len: usize,
    request_id: Option<&[u8]>,
    arrival: Instant,
    served: &Served,
) -> LoggedRequest {
    LoggedRequest {
        arrival: arrival.saturating_duration_since(ctx.shared.start),
        served: Duration::ZERO,
        worker: ctx.index,
        // Set by the caller, which knows the connection and holds the head's bytes.
        connection: 0,
        session_id: None,
        body: None,
        seq: served.seq,
        method: head.method.map_or("OTHER", Method::as_str),
        path: String::from_utf8_lossy(path).into_owned(),
        body_len,
        prompt_hash: served.prompt.map(|p| p.0),
        prompt_tokens: served.prompt.map(|p| p.1),
        max_tokens: served.max_tokens,
        request_id: request_id.map(|id| String::from_utf8_lossy(id).into_owned()),
        status: served.status,
        fault: served.fault,
    }
}
