//! One request/response exchange on a keep-alive connection: write the prepared bytes, read
//! the response, decode head → body → SSE events → JSON chunks, and stamp every event with
//! the time its read completed.
//!
//! Every response is bounded ([`ResponseLimits`]): at most `--max-response-events` SSE events
//! (an endless stream fails with `response_too_long` instead of growing the worker's gap and
//! text arenas until the request timeout), at most [`ResponseLimits::max_text_bytes`] of
//! generated text kept, one SSE event of at most 16 MiB (`sse_too_large`) and a non-streamed
//! body of at most [`WHOLE_BODY_CAP`] (`body_too_large`). Checking them is a counter compare
//! per event.
//!
//! Generated text is appended while the stream runs, because whether it is needed is known
//! only at its end: the output length is counted from it when the server sends no usage, and
//! a conversation's next turn quotes it. The worker drops it after the request unless
//! `--save-detailed` asks for it or the count needs it (`worker::Worker::keep`).
//!
//! The exchange owns its connection and buffers while it runs (monoio's rent I/O moves the
//! read buffer into the kernel operation), and hands them back when it ends, so a timeout that
//! drops the exchange also drops the connection: a connection with a cancelled read in flight
//! is never reused.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::io;
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::Instant;

use crate::backends::chunk_template::ChunkTemplate;
use crate::backends::tape::ChunkDecoder;
use crate::backends::{ApiFailure, ResponseMode, Scratch, StreamFacts, StreamReader, Token};
use crate::http::conn::{Connection, Endpoint};
use crate::http::response::{parse_head, BodyDecoder, ResponseHead};
use crate::sse::{Pushed, SseDecoder};
use bytes::Bytes;

use super::recorder::{Failure, WorkerLog, MAX_USAGE_TOKENS};

/// A connection's read buffer. Small on purpose: at 10,000 streams every byte here is
/// multiplied by 10,000 (io_uring owns each in-flight read's buffer, so buffers cannot be
/// shared), and an SSE event is a few hundred bytes, read as it arrives.
const READ_BUF: usize = 512;
/// A ring read that fills its buffer means more bytes are waiting (a fast server, a large
/// body, a client that fell behind). They are then drained with non-blocking `recv`s into
/// the core's [`DRAIN_BUF`] instead of growing the connection's buffer: at 10,000 streams
/// that fell behind, grown buffers were 18.5 MB.
const DRAIN_BUF_LEN: usize = 16 << 10;
/// Drains per full read before the worker goes back to the ring, so that one firehose
/// connection cannot hold the core (64 KiB at most).
const MAX_DRAINS: usize = 4;
/// Over TLS (records are read through the TLS stream, not drained) a full read doubles the
/// connection's buffer instead, up to this.
const TLS_READ_BUF_MAX: usize = 2 << 10;
/// Initial room for a partial SSE event; it grows to the largest event once.
const SSE_BUF: usize = 512;

thread_local! {
    /// One JSON chunk decoder (simd-json scratch buffers and tape) per core thread, shared by
    /// the core's workers: decoding is synchronous between reads, so one is never used by two
    /// workers at once, and 10,000 streams do not carry 10,000 sets of scratch buffers.
    static CHUNK_DECODER: RefCell<ChunkDecoder> = RefCell::new(ChunkDecoder::new());
    /// The core's buffer for draining a socket that holds more than a read buffer (see
    /// [`DRAIN_BUF_LEN`]); used only between two awaits, so never by two workers at once.
    static DRAIN_BUF: RefCell<Vec<u8>> = RefCell::new(vec![0; DRAIN_BUF_LEN]);
}
/// Error bodies are kept up to this size for the failure detail.
const ERROR_BODY_CAP: usize = 2048;
/// A non-streaming body larger than this fails the request (`body_too_large`) instead of
/// growing memory. Fixed: an embeddings or completions answer is far smaller.
pub const WHOLE_BODY_CAP: usize = 64 << 20;
/// A worker's whole-body buffer larger than this after a request is freed, not kept for the
/// next one: one huge answer must not pin its memory in every worker that saw one.
const KEPT_RETAIN: usize = 1 << 20;

/// Default of `--max-response-events`: far beyond any real answer (a 128k-token output
/// streamed one token per event is 128k events), small enough that one response records at
/// most 4 MB of inter-token gaps.
pub const DEFAULT_MAX_RESPONSE_EVENTS: u32 = 1_000_000;

/// How much of one response the client takes in: what bounds a worker's memory per request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseLimits {
    /// SSE events per response (every event with data, tokens or not); one more fails the
    /// request with `response_too_long`.
    pub max_events: u32,
    /// Generated-text bytes kept per response: [`Self::TEXT_BYTES_PER_EVENT`] per allowed
    /// event. Beyond it the text stops growing (whole tokens, so it stays valid UTF-8) and
    /// tokens are still counted; the request fails only when the text was needed to count
    /// the output (the server sent no usage).
    pub max_text_bytes: u32,
}

impl ResponseLimits {
    /// Text bytes kept per allowed event: four times a typical token (about 4 bytes), so a
    /// server sending several tokens per event still fits.
    pub const TEXT_BYTES_PER_EVENT: u32 = 16;

    /// The limits of `--max-response-events max_events`.
    pub fn new(max_events: u32) -> ResponseLimits {
        ResponseLimits {
            max_events,
            max_text_bytes: max_events.saturating_mul(Self::TEXT_BYTES_PER_EVENT),
        }
    }
}

impl Default for ResponseLimits {
    fn default() -> Self {
        ResponseLimits::new(DEFAULT_MAX_RESPONSE_EVENTS)
    }
}

/// Buffers and decoders a worker reuses from one request to the next.
pub struct ExchangeBuffers {
    read: Vec<u8>,
    /// Head bytes while the head is incomplete, then body bytes the framing decoder could not
    /// consume yet: rare, so the common path never copies.
    carry: Vec<u8>,
    body: BodySink,
    limits: ResponseLimits,
    /// Stamped when a request has been fully written, for a worker that cancels requests
    /// (`--request-cancellation-rate`); `None` otherwise.
    sent: Option<Rc<SentMark>>,
}

impl ExchangeBuffers {
    pub fn new(limits: ResponseLimits) -> Self {
        ExchangeBuffers {
            read: Vec::with_capacity(READ_BUF),
            carry: Vec::new(),
            body: BodySink {
                sse: SseDecoder::with_capacity(SSE_BUF),
                kept: Vec::new(),
                template: ChunkTemplate::default(),
            },
            limits,
            sent: None,
        }
    }

    /// Buffers that stamp `mark` each time a request has been fully written.
    pub fn with_sent_mark(mut self, mark: Option<Rc<SentMark>>) -> Self {
        self.sent = mark;
        self
    }

    /// Fresh buffers with the same limits and mark, replacing ones an exchange dropped
    /// mid-response may still have lent to the kernel.
    pub fn renewed(&self) -> Self {
        ExchangeBuffers::new(self.limits).with_sent_mark(self.sent.clone())
    }

    /// The limits these buffers' responses are held to.
    pub fn limits(&self) -> ResponseLimits {
        self.limits
    }
}

/// When the current request was fully written: set by the exchange, awaited by a worker
/// that cancels the request some time after (racing the exchange, so it cannot read the
/// exchange's own state). A transparent retry on a fresh connection stamps it again only
/// if it was not stamped yet: the delay counts from the first complete write.
#[derive(Default)]
pub struct SentMark {
    at: Cell<Option<Instant>>,
    waiter: Cell<Option<Waker>>,
}

impl SentMark {
    /// Forgets the previous request's stamp (before a new request).
    pub fn reset(&self) {
        self.at.set(None);
        self.waiter.set(None);
    }

    fn stamp(&self, now: Instant) {
        if self.at.get().is_none() {
            self.at.set(Some(now));
            if let Some(w) = self.waiter.take() {
                w.wake();
            }
        }
    }

    /// Resolves to the instant the request was fully written.
    pub fn written(&self) -> impl Future<Output = Instant> + '_ {
        std::future::poll_fn(|cx| match self.at.get() {
            Some(t) => Poll::Ready(t),
            None => {
                self.waiter.set(Some(cx.waker().clone()));
                Poll::Pending
            }
        })
    }
}

impl Default for ExchangeBuffers {
    fn default() -> Self {
        ExchangeBuffers::new(ResponseLimits::default())
    }
}

/// What the exchange measured, written into the caller's record.
#[derive(Debug, Default)]
pub struct Measured {
    pub first_token: Option<Instant>,
    /// The first token that is not reasoning (chat content or tool calls, Responses output
    /// text, Anthropic text or tool input): TTFO's end. Equal to `first_token` when the
    /// server sent no reasoning; `None` when it sent reasoning only.
    pub first_output: Option<Instant>,
    pub last_token: Option<Instant>,
    pub end: Option<Instant>,
    pub chunks: u32,
    /// What the events said beyond their tokens (counts, finish reason), as the API's
    /// reader reads them.
    pub facts: StreamFacts,
    /// SSE events seen (held to [`ResponseLimits::max_events`]).
    events: u32,
    /// Generated-text bytes kept (held to [`ResponseLimits::max_text_bytes`]).
    text_len: u32,
    /// Text was dropped at the cap: what was kept is a prefix of the answer.
    pub text_truncated: bool,
}

/// Where decoded events are recorded: the worker's arenas, the request's numbers, and the
/// completion time of the read that delivered the bytes being decoded.
struct Recording<'a> {
    log: &'a mut WorkerLog,
    m: &'a mut Measured,
    now: Instant,
    limits: ResponseLimits,
}

/// Result of one attempt to run the exchange on a connection.
enum Attempt {
    /// The outcome and whether the connection may be kept alive.
    Finished(Result<(), Failure>, bool),
    /// The reused connection was closed before any response byte: retry on a fresh one.
    StaleConnection,
}

/// Sends `req` and reads its response on the connection in `slot`, opening one when the
/// slot is empty and reconnecting once, transparently, when a kept-alive connection turns
/// out to be closed. The slot keeps the connection for reuse when the response allows it,
/// and is empty otherwise.
///
/// The connection is used in place (an `&mut` slot, not taken by value and handed back): a
/// by-value `Option<Connection>` is held two or three times over in this future's state
/// (argument, local, the attempt's binding: ~430 bytes per worker). A caller that drops this
/// future mid-exchange (a timeout, a stop) must empty the slot itself: the connection is then
/// in the middle of a response.
pub async fn exchange(
    slot: &mut Option<Connection>,
    ep: &Endpoint,
    req: &[Bytes],
    mode: ResponseMode,
    bufs: &mut ExchangeBuffers,
    log: &mut WorkerLog,
    m: &mut Measured,
) -> Result<(), Failure> {
    if slot.as_ref().is_some_and(Connection::peer_closed) {
        *slot = None;
    }
    for _ in 0..2 {
        let c = match slot {
            Some(c) => c,
            // Boxed: the connect (and TLS handshake) state is large and needed only while
            // connecting; inline, every idle worker future would carry it.
            None => match Box::pin(Connection::open(ep)).await {
                Ok(c) => slot.insert(c),
                Err(e) => return Err(io_failure("connect", &e)),
            },
        };
        match attempt(c, req, mode, bufs, log, m).await {
            Attempt::StaleConnection => *slot = None,
            Attempt::Finished(result, keep_alive) => {
                c.responses += 1;
                if !(keep_alive && result.is_ok()) {
                    *slot = None;
                }
                return result.and_then(|()| usage_verdict(m));
            }
        }
    }
    *slot = None;
    Err(failure(
        "connection_closed",
        "Server disconnected",
        "the server closed the connection before responding, twice",
    ))
}

fn io_failure(kind: &str, e: &io::Error) -> Failure {
    failure(kind, e.to_string(), format!("{kind}: {e}"))
}

fn failure(kind: &str, error: impl Into<String>, detail: impl Into<String>) -> Failure {
    Failure {
        kind: kind.into(),
        error: error.into(),
        detail: detail.into(),
    }
}

/// One try on one connection.
async fn attempt(
    c: &mut Connection,
    req: &[Bytes],
    mode: ResponseMode,
    bufs: &mut ExchangeBuffers,
    log: &mut WorkerLog,
    m: &mut Measured,
) -> Attempt {
    // A kept-alive (or opened-ahead) connection that fails before any response byte was
    // closed by the server while idle: the request never reached it, so it is retried on a
    // fresh connection.
    let reused = c.may_be_stale();
    if let Err(e) = c.write_parts(req).await {
        if reused {
            return Attempt::StaleConnection;
        }
        return Attempt::Finished(Err(io_failure("write", &e)), false);
    }
    if let Some(mark) = &bufs.sent {
        mark.stamp(Instant::now());
    }
    let mut state = ResponseState {
        mode,
        head: None,
        body: None,
    };
    bufs.carry.clear();
    bufs.body.reset();
    let mut received_any = false;
    loop {
        let mut buf = std::mem::take(&mut bufs.read);
        buf.clear();
        let (res, buf) = c.read(buf).await;
        // The moment the read completed is the arrival time of every event in it.
        let mut rec = Recording {
            log: &mut *log,
            m: &mut *m,
            now: Instant::now(),
            limits: bufs.limits,
        };
        bufs.read = buf;
        let n = match res {
            Ok(0) | Err(_) if reused && !received_any => return Attempt::StaleConnection,
            Ok(0) => return Attempt::Finished(state.on_eof(bufs, &mut rec), false),
            Ok(n) => n,
            Err(e) => return Attempt::Finished(Err(io_failure("read", &e)), false),
        };
        received_any = true;
        let data = std::mem::take(&mut bufs.read);
        let mut step = state.on_bytes(&data[..n], bufs, &mut rec);
        let full = n == data.capacity();
        bufs.read = data;
        if step.is_none() && full {
            if c.is_plain() {
                step = drain_ready(c, &mut state, bufs, &mut rec);
            } else if n < TLS_READ_BUF_MAX {
                bufs.read.reserve(n);
            }
        }
        if let Some((outcome, keep_alive)) = step {
            return Attempt::Finished(outcome, keep_alive);
        }
    }
}

/// Feeds the bytes already waiting on `c` to the response, read with non-blocking `recv`s
/// into the core's drain buffer, each stamped when it returned (the read completion, as for
/// a ring read). Stops when a `recv` does not fill the buffer (the socket is drained), after
/// [`MAX_DRAINS`], or when the response ends.
fn drain_ready(
    c: &mut Connection,
    state: &mut ResponseState,
    bufs: &mut ExchangeBuffers,
    rec: &mut Recording,
) -> Step {
    DRAIN_BUF.with(|cell| {
        let mut buf = cell.borrow_mut();
        for _ in 0..MAX_DRAINS {
            let res = c.read_ready(&mut buf)?;
            rec.now = Instant::now();
            let n = match res {
                Ok(0) => return Some((state.on_eof(bufs, rec), false)),
                Ok(n) => n,
                Err(e) => return Some((Err(io_failure("read", &e)), false)),
            };
            if let Some(done) = state.on_bytes(&buf[..n], bufs, rec) {
                return Some(done);
            }
            if n < buf.len() {
                return None;
            }
        }
        None
    })
}

/// `None` while the response needs more bytes; else its outcome and whether the connection
/// may be kept alive.
type Step = Option<(Result<(), Failure>, bool)>;

/// The response being decoded: head first, then the body by its framing.
struct ResponseState {
    mode: ResponseMode,
    head: Option<ResponseHead>,
    body: Option<BodyDecoder>,
}

impl ResponseState {
    fn on_bytes(&mut self, data: &[u8], bufs: &mut ExchangeBuffers, rec: &mut Recording) -> Step {
        if bufs.carry.is_empty() {
            if self.head.is_none() {
                // The common first read: the whole head and the body's start, parsed where
                // they are (no copy, and no carry buffer kept per worker).
                match self.take_head(data) {
                    Ok(Some(start)) => return self.on_body(&data[start..], bufs, rec),
                    Ok(None) => {
                        bufs.carry.extend_from_slice(data);
                        return None;
                    }
                    Err(step) => return step,
                }
            }
            return self.on_body(data, bufs, rec);
        }
        // Rare path: a head or body framing split across reads.
        let mut joined = std::mem::take(&mut bufs.carry);
        joined.extend_from_slice(data);
        if self.head.is_none() {
            match self.take_head(&joined) {
                Ok(Some(start)) => {
                    joined.drain(..start);
                }
                Ok(None) => {
                    bufs.carry = joined;
                    return None;
                }
                Err(step) => return step,
            }
        }
        let step = self.on_body(&joined, bufs, rec);
        if bufs.carry.is_empty() {
            joined.clear();
            bufs.carry = joined; // keep the capacity
        }
        step
    }

    /// Parses the response head at the start of `buf` once it is complete: where the body
    /// starts in `buf`, `Ok(None)` while the head is incomplete, or the failed step.
    fn take_head(&mut self, buf: &[u8]) -> Result<Option<usize>, Step> {
        match parse_head(buf) {
            Ok(None) => Ok(None),
            Err(e) => Err(Some((
                Err(failure("bad_response", e.to_string(), e.to_string())),
                false,
            ))),
            Ok(Some(head)) => {
                let start = head.head_len;
                self.body = Some(BodyDecoder::new(head.body));
                self.head = Some(head);
                Ok(Some(start))
            }
        }
    }

    /// Feeds body bytes through the framing decoder into the body sink.
    fn on_body(&mut self, data: &[u8], bufs: &mut ExchangeBuffers, rec: &mut Recording) -> Step {
        let (Some(head), Some(decoder)) = (&self.head, &mut self.body) else {
            return None;
        };
        let success = head.is_success();
        let keep_alive = head.keep_alive;
        let mode = self.mode;
        let sink = &mut bufs.body;
        let mut failed = None;
        let decoded = decoder.decode_all(data, |payload| {
            if failed.is_none() {
                failed = sink.consume(payload, success, mode, rec).err();
            }
        });
        if let Some(f) = failed {
            return Some((Err(f), false));
        }
        match decoded {
            Err(e) => Some((
                Err(failure("bad_body", e.to_string(), e.to_string())),
                false,
            )),
            Ok((_, true)) => Some((self.finish(bufs, rec), keep_alive)),
            Ok((consumed, false)) => {
                bufs.carry.extend_from_slice(&data[consumed..]);
                None
            }
        }
    }

    /// The server closed the connection: the end of an until-close body, else a truncation.
    fn on_eof(&mut self, bufs: &mut ExchangeBuffers, rec: &mut Recording) -> Result<(), Failure> {
        let Some(body) = &mut self.body else {
            return Err(failure(
                "disconnected",
                "Server disconnected",
                "the server closed the connection before sending a response head",
            ));
        };
        if body.finish().is_ok() || rec.m.facts.done {
            return self.finish(bufs, rec);
        }
        Err(failure(
            "disconnected",
            "Response payload is not completed",
            "the server closed the connection in the middle of the response",
        ))
    }

    /// The body is complete: classify the outcome (Python semantics).
    fn finish(&mut self, bufs: &mut ExchangeBuffers, rec: &mut Recording) -> Result<(), Failure> {
        rec.m.end = Some(rec.now);
        let Some(head) = &self.head else {
            return Err(failure(
                "bad_response",
                "no response head",
                "no response head",
            ));
        };
        if !head.is_success() {
            let body = String::from_utf8_lossy(&bufs.body.kept).trim().to_string();
            return Err(failure(
                &format!("http_{}", head.status),
                head.reason.to_string(),
                format!("HTTP {} {}: {}", head.status, head.reason, body),
            ));
        }
        match self.mode.stream_reader() {
            None => Ok(self
                .mode
                .read_whole(&mut bufs.body.kept, &mut rec.m.facts)?),
            Some(reader) => bufs.body.finish_stream(reader, rec),
        }
    }
}

/// Where body payload goes: error bodies are kept (capped) for the failure detail, whole
/// bodies are collected, streams go through the SSE decoder event by event.
struct BodySink {
    sse: SseDecoder,
    kept: Vec<u8>,
    /// The stream's last plain token chunk (kept across requests: a match is valid whatever
    /// stream the template came from).
    template: ChunkTemplate,
}

impl BodySink {
    fn reset(&mut self) {
        self.sse.reset();
        if self.kept.capacity() > KEPT_RETAIN {
            self.kept = Vec::new();
        }
        self.kept.clear();
    }

    fn consume(
        &mut self,
        payload: &[u8],
        success: bool,
        mode: ResponseMode,
        rec: &mut Recording,
    ) -> Result<(), Failure> {
        if !success {
            let room = ERROR_BODY_CAP.saturating_sub(self.kept.len());
            self.kept
                .extend_from_slice(&payload[..payload.len().min(room)]);
            return Ok(());
        }
        match mode.stream_reader() {
            None => {
                if self.kept.len() + payload.len() > WHOLE_BODY_CAP {
                    return Err(body_too_large());
                }
                self.kept.extend_from_slice(payload);
                Ok(())
            }
            Some(reader) => {
                // One whole event per payload (one HTTP chunk per event) is the rule: it is
                // read without walking the SSE decoder's lines, and a token chunk the
                // reader knows (its template) without parsing or copying it either.
                let template = &self.template;
                let pushed = self
                    .sse
                    .push_known(payload, |data| reader.known_event(data, template))
                    .map_err(|e| failure(e.kind(), e.to_string(), e.to_string()))?;
                match pushed {
                    Pushed::Known(token) => return rec.known_event(token),
                    Pushed::Event(ev) => {
                        return rec.event(ev.is_done(), ev.data, reader, &mut self.template)
                    }
                    Pushed::Bytes => {}
                }
                while let Some(ev) = self.sse.next_event() {
                    rec.event(ev.is_done(), ev.data, reader, &mut self.template)?;
                }
                Ok(())
            }
        }
    }

    /// The stream ended: a trailing event without its blank line, then the verdict: what
    /// the stream said (the reader), whether its text was cut where it was still needed,
    /// and what it lacked (the reader).
    fn finish_stream(
        &mut self,
        reader: &'static dyn StreamReader,
        rec: &mut Recording,
    ) -> Result<(), Failure> {
        while let Some(ev) = self.sse.finish() {
            rec.event(ev.is_done(), ev.data, reader, &mut self.template)?;
        }
        let m = &mut *rec.m;
        reader.settle(&mut m.facts)?;
        text_verdict(m, rec.limits)?;
        Ok(reader.verdict(&m.facts, m.first_token.is_some())?)
    }
}

impl Recording<'_> {
    /// Applies one SSE event: counts it against the bound, then lets the API's reader say
    /// what it means; a token is stamped with the read's time and its text kept.
    fn event(
        &mut self,
        done: bool,
        data: &mut [u8],
        reader: &'static dyn StreamReader,
        template: &mut ChunkTemplate,
    ) -> Result<(), Failure> {
        self.count_event()?;
        if done {
            self.m.facts.done = true;
            return Ok(());
        }
        let facts = &mut self.m.facts;
        let token = CHUNK_DECODER
            .with(|json| {
                let json = &mut *json.borrow_mut();
                reader.event(data, &mut Scratch { json, template }, facts)
            })
            .map_err(malformed_event)?;
        self.apply(token);
        Ok(())
    }

    /// Applies one SSE event its reader knew without parsing it (see
    /// [`StreamReader::known_event`]): counted like any other, then its token if any.
    fn known_event(&mut self, token: Option<Token<'_>>) -> Result<(), Failure> {
        self.count_event()?;
        self.apply(token);
        Ok(())
    }

    /// Counts one event against the response's bound.
    fn count_event(&mut self) -> Result<(), Failure> {
        self.m.events += 1;
        if self.m.events > self.limits.max_events {
            return Err(too_many_events(self.limits.max_events));
        }
        Ok(())
    }

    /// A token event (if it is one), stamped with the read's time, its text kept.
    fn apply(&mut self, token: Option<Token<'_>>) {
        if let Some(token) = token {
            self.token_at_now(token.output);
            if let Some(text) = &token.text {
                self.keep_text(text.as_bytes());
            }
        }
    }

    /// Appends one token's text unless that takes the response's text past its cap; from the
    /// first token that does not fit on, nothing more is kept (so the text is a prefix of
    /// whole tokens, valid UTF-8).
    fn keep_text(&mut self, text: &[u8]) {
        let m = &mut *self.m;
        let len = m.text_len as usize + text.len();
        if !m.text_truncated && len <= self.limits.max_text_bytes as usize {
            self.log.text.extend_from_slice(text);
            m.text_len = len as u32;
        } else {
            m.text_truncated = true;
        }
    }

    /// One token event at the current read's time: the first sets TTFT, later ones add a gap;
    /// the first `output` one (not reasoning) sets TTFO.
    fn token_at_now(&mut self, output: bool) {
        let m = &mut *self.m;
        if output && m.first_output.is_none() {
            m.first_output = Some(self.now);
        }
        match m.last_token {
            None => m.first_token = Some(self.now),
            Some(prev) => self
                .log
                .itl_ns
                .push(self.now.duration_since(prev).as_nanos() as u64),
        }
        m.last_token = Some(self.now);
        m.chunks += 1;
    }
}

/// The reason of a response cut at a [`ResponseLimits`] bound.
const TOO_LONG: &str = "response_too_long";

#[cold]
fn too_many_events(max: u32) -> Failure {
    failure(
        TOO_LONG,
        format!("response too long: more than {max} SSE events (--max-response-events)"),
        format!(
            "the server sent more than {max} SSE events in one response (an endless stream?); \
             raise --max-response-events if it really answers that long"
        ),
    )
}

#[cold]
fn body_too_large() -> Failure {
    let mib = WHOLE_BODY_CAP >> 20;
    failure(
        "body_too_large",
        format!("response body over {mib} MiB"),
        format!(
            "a non-streamed response body over {mib} MiB (a fixed limit, not a setting): \
             the server sent an endless or runaway body"
        ),
    )
}

/// A stream whose text was cut at its cap fails only when the text was still needed: with no
/// completion count from the server, the output length is counted from the text (Python's
/// fallback), and a cut text would undercount it silently.
fn text_verdict(m: &Measured, limits: ResponseLimits) -> Result<(), Failure> {
    if !m.text_truncated || m.facts.usage_completion_tokens.is_some_and(|c| c > 0) {
        return Ok(());
    }
    let max = limits.max_text_bytes;
    Err(failure(
        TOO_LONG,
        format!("response too long: generated text over {max} bytes and no usage to count it"),
        format!(
            "the generated text passed {max} bytes ({} per --max-response-events event) and \
             the server sent no completion token count, so the output length cannot be \
             counted; raise --max-response-events or ask the server for usage",
            ResponseLimits::TEXT_BYTES_PER_EVENT
        ),
    ))
}

/// A usage count past [`MAX_USAGE_TOKENS`] is the server's error, not a count: the request
/// fails as `bad_usage`, naming the figure, instead of swamping (or wrapping) the run's
/// token totals while its throughput read something else.
fn usage_verdict(m: &Measured) -> Result<(), Failure> {
    let counts = [
        ("prompt_tokens", m.facts.usage_prompt_tokens),
        ("completion_tokens", m.facts.usage_completion_tokens),
        ("reasoning_tokens", m.facts.usage_reasoning_tokens),
    ];
    match counts
        .into_iter()
        .find_map(|(name, n)| n.filter(|&n| n > MAX_USAGE_TOKENS).map(|n| (name, n)))
    {
        None => Ok(()),
        Some((name, n)) => Err(failure(
            "bad_usage",
            format!("server reported usage {name} = {n}, over {MAX_USAGE_TOKENS}"),
            format!(
                "the server's usage says {name} = {n} for one response, more than the \
                 {MAX_USAGE_TOKENS} tokens any response can hold: a server bug; the request \
                 is counted as failed and its tokens in no total"
            ),
        )),
    }
}

fn malformed_event(e: crate::backends::tape::ChunkError) -> Failure {
    let msg = format!("malformed SSE event: {e}");
    failure("malformed_event", msg.clone(), msg)
}

/// A reader's verdict, as the engine records a failure.
impl From<ApiFailure> for Failure {
    fn from(f: ApiFailure) -> Failure {
        Failure {
            kind: f.kind.into(),
            error: f.error,
            detail: f.detail,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::{Api, FinishReason};
    use std::time::Duration;

    /// A vLLM-shaped Responses stream (events as vLLM 0.33 sends them, trimmed), one SSE
    /// event per HTTP chunk.
    const RESPONSES_EVENTS: &[&str] = &[
        "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\",\"usage\":null}}\n\n",
        "event: response.reasoning_text.delta\ndata: {\"type\":\"response.reasoning_text.delta\",\"sequence_number\":1,\"item_id\":\"rs_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"hmm\"}\n\n",
        ": keep-alive\n\n",
        "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":2,\"item_id\":\"msg_1\",\"output_index\":1,\"content_index\":0,\"delta\":\" Hel\\u00e9\",\"logprobs\":[]}\n\n",
        "event: response.output_text.delta\r\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":3,\"item_id\":\"msg_1\",\"output_index\":1,\"content_index\":0,\"delta\":\"lo\",\"logprobs\":[]}\r\n\r\n",
        "event: response.output_text.done\ndata: {\"type\":\"response.output_text.done\",\"sequence_number\":4,\"text\":\" Hel\\u00e9lo\"}\n\n",
        "event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":5,\"response\":{\"id\":\"resp_1\",\"status\":\"incomplete\",\"usage\":{\"input_tokens\":12,\"output_tokens\":3,\"total_tokens\":15}}}\n\n",
    ];

    fn http_response(events: &[&str]) -> Vec<u8> {
        let mut out = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
        for e in events {
            out.extend_from_slice(format!("{:x}\r\n{e}\r\n", e.len()).as_bytes());
        }
        out.extend_from_slice(b"0\r\n\r\n");
        out
    }

    struct Outcome {
        result: Option<Result<(), Failure>>,
        m: Measured,
        log: WorkerLog,
    }

    /// Feeds `reads` as successive reads, the k-th completing at `base + k ms`.
    fn feed(mode: ResponseMode, reads: &[&[u8]]) -> Outcome {
        feed_limited(ResponseLimits::default(), mode, reads)
    }

    /// [`feed`] with `limits`.
    fn feed_limited(limits: ResponseLimits, mode: ResponseMode, reads: &[&[u8]]) -> Outcome {
        let base = Instant::now();
        let mut state = ResponseState {
            mode,
            head: None,
            body: None,
        };
        let mut bufs = ExchangeBuffers::new(limits);
        let (mut log, mut m) = (WorkerLog::default(), Measured::default());
        let mut result = None;
        for (k, read) in reads.iter().enumerate() {
            let mut rec = Recording {
                log: &mut log,
                m: &mut m,
                now: base + Duration::from_millis(k as u64),
                limits: bufs.limits,
            };
            if let Some((r, _)) = state.on_bytes(read, &mut bufs, &mut rec) {
                result = Some(r);
                break;
            }
        }
        Outcome { result, m, log }
    }

    fn responses() -> ResponseMode {
        Api::Responses.response_mode()
    }

    #[test]
    fn responses_stream_split_at_every_byte_gives_the_same_events() {
        assert_every_split_gives_the_same_events(
            responses(),
            RESPONSES_EVENTS,
            "reasoning + 2 output deltas",
        );
    }

    #[test]
    fn responses_timings_follow_python() {
        // Head, then one event per read, 1 ms apart: TTFT at the reasoning delta (read 2),
        // ITL gaps between token events only, the end at the last token.
        let o = event_per_read(responses(), RESPONSES_EVENTS);
        assert_eq!(o.result, Some(Ok(())));
        let first = o.m.first_token.unwrap();
        let last = o.m.last_token.unwrap();
        // Reads: 0 head, 1 created, 2 reasoning, 3 comment, 4 delta, 5 delta.
        assert_eq!(last.duration_since(first), Duration::from_millis(3));
        assert_eq!(
            o.log.itl_ns.range(0..2).collect::<Vec<_>>(),
            [2_000_000, 1_000_000]
        );
    }

    #[test]
    fn responses_failures_carry_python_reasons() {
        let no_terminal = http_response(&RESPONSES_EVENTS[..RESPONSES_EVENTS.len() - 1]);
        let o = feed(responses(), &[&no_terminal]);
        let f = o.result.unwrap().unwrap_err();
        assert_eq!(f.kind, "no_terminal_event");
        assert_eq!(
            f.error,
            "Stream ended without a terminal event.This response will be marked as failed!"
        );
        let no_token = http_response(&[RESPONSES_EVENTS[0], RESPONSES_EVENTS[6]]);
        let f = feed(responses(), &[&no_token]).result.unwrap().unwrap_err();
        assert_eq!(f.kind, "no_token");
        assert!(
            f.error.starts_with("Never received a token delta"),
            "{}",
            f.error
        );
        let error = "event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"boom\",\"param\":null}\n\n";
        let with_error = http_response(&[RESPONSES_EVENTS[3], error, RESPONSES_EVENTS[6]]);
        let f = feed(responses(), &[&with_error])
            .result
            .unwrap()
            .unwrap_err();
        assert_eq!(f.kind, "stream_error");
        assert_eq!(
            f.error,
            r#"{"type": "error", "code": "server_error", "message": "boom", "param": null}"#
        );
        let bad =
            http_response(&["data: {\"type\":\"response.output_text.delta\",\"delta\":5}\n\n"]);
        let f = feed(responses(), &[&bad]).result.unwrap().unwrap_err();
        assert_eq!(f.kind, "malformed_event");
    }

    /// An Anthropic Messages stream as vLLM 0.33 sends it (a thinking block, then a text
    /// block), with a `ping` Anthropic's API sends; one SSE event per HTTP chunk.
    const ANTHROPIC_EVENTS: &[&str] = &[
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"chatcmpl-1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"m\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":12,\"output_tokens\":0}}}\n\n",
        "event: ping\ndata: {\"type\":\"ping\"}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"},\"index\":0}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hmm\"},\"index\":0}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"content_block\":{\"type\":\"text\",\"text\":\"\"},\"index\":1}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\" Hel\\u00e9\"},\"index\":1}\n\n",
        "event: content_block_delta\r\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"lo\"},\"index\":1}\r\n\r\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\",\"stop_sequence\":null},\"usage\":{\"input_tokens\":12,\"output_tokens\":3}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    ];

    /// `events` split in two at every byte: the same three token events (one reasoning or
    /// thinking, two with text), text, usage and end every time (`what`: the token events).
    fn assert_every_split_gives_the_same_events(mode: ResponseMode, events: &[&str], what: &str) {
        let bytes = http_response(events);
        for at in 0..=bytes.len() {
            let o = feed(mode, &[&bytes[..at], &bytes[at..]]);
            assert_eq!(o.result, Some(Ok(())), "split at {at}");
            assert_eq!(o.m.chunks, 3, "split at {at}: {what}");
            assert_eq!(o.log.text, " Hel\u{e9}lo".as_bytes(), "split at {at}");
            assert_eq!(
                (
                    o.m.facts.usage_prompt_tokens,
                    o.m.facts.usage_completion_tokens
                ),
                (Some(12), Some(3)),
                "split at {at}"
            );
            assert!(!o.m.facts.done, "split at {at}");
            assert_eq!(o.m.facts.finish_reason, Some(FinishReason::Length));
        }
    }

    fn anthropic() -> ResponseMode {
        Api::AnthropicMessages.response_mode()
    }

    /// `events` as one read each after the head's: the k-th event arrives at `k + 1` ms.
    fn event_per_read(mode: ResponseMode, events: &[&str]) -> Outcome {
        let bytes = http_response(events);
        let head_end = memchr::memmem::find(&bytes, b"\r\n\r\n").unwrap() + 4;
        let mut reads: Vec<&[u8]> = vec![&bytes[..head_end]];
        let mut at = head_end;
        for e in events {
            let framed = format!("{:x}\r\n{e}\r\n", e.len()).len();
            reads.push(&bytes[at..at + framed]);
            at += framed;
        }
        reads.push(&bytes[at..]);
        feed(mode, &reads)
    }

    /// TTFO's end minus TTFT's.
    fn thinking(o: &Outcome) -> Option<Duration> {
        Some(o.m.first_output?.duration_since(o.m.first_token?))
    }

    #[test]
    fn the_first_output_token_is_the_first_that_is_not_reasoning_on_every_api() {
        // Responses: reasoning at read 2, output text at read 4 (a comment between).
        let o = event_per_read(responses(), RESPONSES_EVENTS);
        assert_eq!(o.result, Some(Ok(())));
        assert_eq!(thinking(&o), Some(Duration::from_millis(2)));
        // Anthropic: thinking at read 4, text at read 7.
        let o = event_per_read(anthropic(), ANTHROPIC_EVENTS);
        assert_eq!(o.result, Some(Ok(())));
        assert_eq!(thinking(&o), Some(Duration::from_millis(3)));
        // Chat: the role chunk, two reasoning chunks (`reasoning`, then vLLM's older
        // `reasoning_content`), content, the usage with its reasoning count.
        let chat = [
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning\":\"hm\"}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":null,\"reasoning_content\":\"m\"}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" yes\"}}]}\n\n",
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":3,\"completion_tokens_details\":{\"reasoning_tokens\":2}}}\n\n",
            "data: [DONE]\n\n",
        ];
        let chat_mode = Api::Chat.response_mode();
        let o = event_per_read(chat_mode, &chat);
        assert_eq!(o.result, Some(Ok(())));
        assert_eq!(o.m.chunks, 3);
        assert_eq!(thinking(&o), Some(Duration::from_millis(2)));
        assert_eq!(o.m.facts.usage_reasoning_tokens, Some(2));
        assert_eq!(o.log.text, b" yes");
        // Tool calls are output; a stream of reasoning only has no first output token.
        let tool =
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0}]}}]}\n\n";
        let o = event_per_read(chat_mode, &[chat[1], tool, chat[5]]);
        assert_eq!(thinking(&o), Some(Duration::from_millis(1)));
        let o = event_per_read(chat_mode, &[chat[1], chat[2], chat[5]]);
        assert_eq!(o.result, Some(Ok(())));
        assert!(o.m.first_token.is_some() && o.m.first_output.is_none());
        // Without reasoning the first output token is the first token (completions too).
        let o = event_per_read(chat_mode, &[chat[0], chat[3], chat[5]]);
        assert_eq!(thinking(&o), Some(Duration::ZERO));
        let text = "data: {\"choices\":[{\"index\":0,\"text\":\" a\"}]}\n\n";
        let o = event_per_read(Api::Completions.response_mode(), &[text, chat[5]]);
        assert_eq!(thinking(&o), Some(Duration::ZERO));
    }

    #[test]
    fn anthropic_stream_split_at_every_byte_gives_the_same_events() {
        assert_every_split_gives_the_same_events(
            anthropic(),
            ANTHROPIC_EVENTS,
            "thinking + 2 text deltas",
        );
    }

    #[test]
    fn anthropic_thinking_is_the_first_token_and_only_deltas_add_gaps() {
        // One event per read, 1 ms apart: TTFT at the thinking delta (read 4), gaps between
        // the three deltas only (reads 4, 7, 8).
        let o = event_per_read(anthropic(), ANTHROPIC_EVENTS);
        assert_eq!(o.result, Some(Ok(())));
        assert_eq!(
            o.log.itl_ns.range(0..2).collect::<Vec<_>>(),
            [3_000_000, 1_000_000]
        );
    }

    #[test]
    fn anthropic_error_event_and_missing_stop_fail_with_their_reason() {
        let error = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
        let mut events = ANTHROPIC_EVENTS[..7].to_vec();
        events.push(error);
        let f = feed(anthropic(), &[&http_response(&events)])
            .result
            .unwrap()
            .unwrap_err();
        assert_eq!(f.kind, "stream_error");
        assert_eq!(f.error, "overloaded_error: Overloaded");
        let no_stop = http_response(&ANTHROPIC_EVENTS[..ANTHROPIC_EVENTS.len() - 1]);
        let f = feed(anthropic(), &[&no_stop]).result.unwrap().unwrap_err();
        assert_eq!(f.kind, "no_terminal_event");
        assert!(f.detail.contains("message_stop"), "{}", f.detail);
        let no_token = http_response(&[ANTHROPIC_EVENTS[0], ANTHROPIC_EVENTS[10]]);
        let f = feed(anthropic(), &[&no_token]).result.unwrap().unwrap_err();
        assert_eq!(f.kind, "no_token");
        let bad = http_response(&[
            "data: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":5}}\n\n",
        ]);
        let f = feed(anthropic(), &[&bad]).result.unwrap().unwrap_err();
        assert_eq!(f.kind, "malformed_event");
    }

    /// A completions stream of `tokens` events carrying `text` each, then the usage chunk
    /// (when `usage`) and `[DONE]`.
    fn completions_stream(tokens: usize, text: &str, usage: bool) -> Vec<u8> {
        let token = format!("data: {{\"choices\":[{{\"text\":\"{text}\"}}]}}\n\n");
        let usage_event = format!(
            "data: {{\"choices\":[],\"usage\":{{\"prompt_tokens\":3,\"completion_tokens\":{tokens}}}}}\n\n"
        );
        let mut events: Vec<&str> = vec![&token; tokens];
        if usage {
            events.push(&usage_event);
        }
        events.push("data: [DONE]\n\n");
        http_response(&events)
    }

    fn completions() -> ResponseMode {
        Api::Completions.response_mode()
    }

    #[test]
    fn a_stream_longer_than_its_event_cap_fails_as_response_too_long() {
        // 10 tokens + usage + [DONE] = 12 events.
        let bytes = completions_stream(10, " tok", true);
        let o = feed_limited(ResponseLimits::new(12), completions(), &[&bytes]);
        assert_eq!(o.result, Some(Ok(())), "exactly at the cap passes");
        let o = feed_limited(ResponseLimits::new(11), completions(), &[&bytes]);
        let f = o.result.unwrap().unwrap_err();
        assert_eq!(f.kind, "response_too_long");
        assert!(f.error.contains("more than 11 SSE events"), "{}", f.error);
        assert!(f.detail.contains("--max-response-events"), "{}", f.detail);
        // Cut where the cap is reached: the 12th event (`[DONE]`) is never applied.
        assert!(!o.m.facts.done);
    }

    #[test]
    fn text_past_its_cap_stops_at_a_whole_token_and_fails_only_without_usage() {
        // 64 text bytes kept: of 10 tokens of 10 bytes, the first 6 fit.
        let limits = ResponseLimits {
            max_events: 100,
            max_text_bytes: 64,
        };
        let with_usage = completions_stream(10, "0123456789", true);
        let o = feed_limited(limits, completions(), &[&with_usage]);
        assert_eq!(o.result, Some(Ok(())));
        assert_eq!(o.log.text, "0123456789".repeat(6).as_bytes());
        assert!(o.m.text_truncated);
        assert_eq!(o.m.chunks, 10, "tokens past the text cap are still counted");
        assert_eq!(o.log.itl_ns.len(), 9);
        assert_eq!(o.m.facts.usage_completion_tokens, Some(10));

        let without_usage = completions_stream(10, "0123456789", false);
        let f = feed_limited(limits, completions(), &[&without_usage])
            .result
            .unwrap()
            .unwrap_err();
        assert_eq!(f.kind, "response_too_long");
        assert!(f.error.contains("no usage"), "{}", f.error);

        // Under the cap, no usage is fine: the text is whole and counts the output.
        let short = completions_stream(6, "0123456789", false);
        let o = feed_limited(limits, completions(), &[&short]);
        assert_eq!(o.result, Some(Ok(())));
        assert!(!o.m.text_truncated);
    }

    #[test]
    fn the_default_limits_allow_a_million_events_and_16_mb_of_text() {
        let l = ResponseLimits::default();
        assert_eq!(l.max_events, 1_000_000);
        assert_eq!(l.max_text_bytes, 16_000_000);
        assert_eq!(ResponseLimits::new(u32::MAX).max_text_bytes, u32::MAX);
    }

    #[test]
    fn a_usage_no_response_can_hold_fails_its_request_naming_the_figure() {
        let mut fine = Measured::default();
        fine.facts.usage_prompt_tokens = Some(MAX_USAGE_TOKENS);
        fine.facts.usage_completion_tokens = Some(5);
        assert_eq!(usage_verdict(&fine), Ok(()));
        let mut huge = Measured::default();
        huge.facts.usage_completion_tokens = Some(1_000_000_000_000_000_000);
        let f = usage_verdict(&huge).unwrap_err();
        assert_eq!(f.kind, "bad_usage");
        assert!(
            f.error.contains("completion_tokens = 1000000000000000000"),
            "{}",
            f.error
        );
        let mut reasoning = Measured::default();
        reasoning.facts.usage_reasoning_tokens = Some(MAX_USAGE_TOKENS + 1);
        assert!(usage_verdict(&reasoning)
            .unwrap_err()
            .error
            .contains("reasoning_tokens"));
    }
}
