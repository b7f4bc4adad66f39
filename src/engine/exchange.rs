//! One request/response exchange on a keep-alive connection: write the prepared bytes, read
//! the response, decode head → body → SSE events → JSON chunks, and stamp every event with
//! the time its read completed.
//!
//! The exchange owns its connection and buffers while it runs (monoio's rent I/O moves the
//! read buffer into the kernel operation), and hands them back when it ends, so a timeout that
//! drops the exchange also drops the connection: a connection with a cancelled read in flight
//! is never reused.

use std::io;
use std::time::Instant;

use crate::backends::stream_chunk::{ChunkDecoder, StreamApi};
use crate::http::conn::{Connection, Endpoint};
use crate::http::request::PreparedRequest;
use crate::http::response::{parse_head, BodyDecoder, ResponseHead};
use crate::sse::SseDecoder;

use super::recorder::{Failure, WorkerLog};

/// How a response body is interpreted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseMode {
    /// SSE stream of completions/chat chunks.
    Stream(StreamApi),
    /// One JSON document (embeddings, pooling, rerank): only the end time matters.
    Whole,
}

/// Read buffer size per connection. Small on purpose: at 10,000 streams every byte here is
/// multiplied by 10,000, and SSE events are a few hundred bytes.
const READ_BUF: usize = 4096;
/// Error bodies are kept up to this size for the failure detail.
const ERROR_BODY_CAP: usize = 2048;
/// A non-streaming body larger than this fails the request instead of growing memory.
const WHOLE_BODY_CAP: usize = 64 << 20;

/// Buffers and decoders a worker reuses from one request to the next.
pub struct ExchangeBuffers {
    read: Vec<u8>,
    /// Head bytes while the head is incomplete, then body bytes the framing decoder could not
    /// consume yet (a chunk-size line split across reads): rare, so the common path never
    /// copies.
    carry: Vec<u8>,
    sse: SseDecoder,
    json: ChunkDecoder,
    body: Vec<u8>,
}

impl Default for ExchangeBuffers {
    fn default() -> Self {
        ExchangeBuffers {
            read: Vec::with_capacity(READ_BUF),
            carry: Vec::new(),
            sse: SseDecoder::new(),
            json: ChunkDecoder::new(),
            body: Vec::new(),
        }
    }
}

/// What the exchange measured, written into the caller's record.
#[derive(Debug, Default)]
pub struct Measured {
    pub first_token: Option<Instant>,
    pub last_token: Option<Instant>,
    pub end: Option<Instant>,
    pub chunks: u32,
    pub usage_prompt_tokens: Option<u64>,
    pub usage_completion_tokens: Option<u64>,
    /// Usage seen on a chunk that also carried choices (llama.cpp); used only when no
    /// usage-only chunk arrives.
    fallback_usage: Option<(Option<u64>, Option<u64>)>,
    /// `[DONE]` seen.
    pub done: bool,
}

/// Result of one attempt to run the exchange on a connection.
enum Attempt {
    Finished(Result<(), Failure>),
    /// The reused connection was closed before any response byte: retry on a fresh one.
    StaleConnection,
}

/// Sends `req` and reads its response, reusing `conn` when possible and reconnecting once,
/// transparently, when a kept-alive connection turns out to be closed.
/// Returns the connection for reuse (None when it must not be reused).
pub async fn exchange(
    mut conn: Option<Connection>,
    ep: &Endpoint,
    req: &PreparedRequest,
    mode: ResponseMode,
    bufs: &mut ExchangeBuffers,
    log: &mut WorkerLog,
    m: &mut Measured,
) -> (Option<Connection>, Result<(), Failure>) {
    if conn.as_ref().is_some_and(Connection::peer_closed) {
        conn = None;
    }
    for _ in 0..2 {
        let mut c = match conn.take() {
            Some(c) => c,
            None => match Connection::open(ep).await {
                Ok(c) => c,
                Err(e) => return (None, Err(io_failure("connect", &e))),
            },
        };
        let reused = c.responses > 0;
        match attempt(&mut c, req, mode, reused, bufs, log, m).await {
            (Attempt::StaleConnection, _) => continue,
            (Attempt::Finished(result), keep_alive) => {
                c.responses += 1;
                let back = (keep_alive && result.is_ok()).then_some(c);
                return (back, result);
            }
        }
    }
    let failure = Failure {
        kind: "connection_closed".into(),
        error: "Server disconnected".into(),
        detail: "the server closed the connection before responding, twice".into(),
    };
    (None, Err(failure))
}

fn io_failure(kind: &str, e: &io::Error) -> Failure {
    Failure {
        kind: kind.into(),
        error: e.to_string(),
        detail: format!("{kind}: {e}"),
    }
}

fn failure(kind: &str, error: impl Into<String>, detail: impl Into<String>) -> Failure {
    Failure {
        kind: kind.into(),
        error: error.into(),
        detail: detail.into(),
    }
}

/// One try on one connection. Returns whether the connection may be kept alive.
async fn attempt(
    c: &mut Connection,
    req: &PreparedRequest,
    mode: ResponseMode,
    reused: bool,
    bufs: &mut ExchangeBuffers,
    log: &mut WorkerLog,
    m: &mut Measured,
) -> (Attempt, bool) {
    if let Err(e) = c.write_parts(&req.parts).await {
        if reused {
            return (Attempt::StaleConnection, false);
        }
        return (Attempt::Finished(Err(io_failure("write", &e))), false);
    }
    let mut state = ResponseState {
        mode,
        head: None,
        body: None,
    };
    bufs.carry.clear();
    bufs.body.clear();
    bufs.sse.reset();
    let mut received_any = false;
    loop {
        let mut buf = std::mem::take(&mut bufs.read);
        buf.clear();
        let (res, buf) = c.read(buf).await;
        // The moment the read completed is the arrival time of every event in it.
        let now = Instant::now();
        bufs.read = buf;
        let n = match res {
            Ok(n) => n,
            Err(_) if reused && !received_any => return (Attempt::StaleConnection, false),
            Err(e) => return (Attempt::Finished(Err(io_failure("read", &e))), false),
        };
        if n == 0 {
            if reused && !received_any {
                return (Attempt::StaleConnection, false);
            }
            let outcome = state.on_eof(bufs, log, m, now);
            return (Attempt::Finished(outcome), false);
        }
        received_any = true;
        let data = std::mem::take(&mut bufs.read);
        let step = state.on_bytes(&data[..n], bufs, log, m, now);
        bufs.read = data;
        if let Step::Done(outcome, keep_alive) = step {
            return (Attempt::Finished(outcome), keep_alive);
        }
    }
}

enum Step {
    NeedMore,
    Done(Result<(), Failure>, bool),
}

/// The response being decoded: head first, then the body by its framing.
struct ResponseState {
    mode: ResponseMode,
    head: Option<ResponseHead>,
    body: Option<BodyDecoder>,
}

impl ResponseState {
    fn on_bytes(
        &mut self,
        data: &[u8],
        bufs: &mut ExchangeBuffers,
        log: &mut WorkerLog,
        m: &mut Measured,
        now: Instant,
    ) -> Step {
        if self.head.is_some() && bufs.carry.is_empty() {
            return self.on_body(data, bufs, log, m, now);
        }
        // Rare path: an incomplete head, or body framing split across reads.
        let mut joined = std::mem::take(&mut bufs.carry);
        joined.extend_from_slice(data);
        if self.head.is_none() {
            match parse_head(&joined) {
                Ok(None) => {
                    bufs.carry = joined;
                    return Step::NeedMore;
                }
                Err(e) => {
                    return Step::Done(
                        Err(failure("bad_response", e.to_string(), e.to_string())),
                        false,
                    )
                }
                Ok(Some(head)) => {
                    let start = head.head_len;
                    self.body = Some(BodyDecoder::new(head.body));
                    self.head = Some(head);
                    joined.drain(..start);
                }
            }
        }
        let step = self.on_body(&joined, bufs, log, m, now);
        if bufs.carry.is_empty() {
            joined.clear();
            bufs.carry = joined; // keep the capacity
        }
        step
    }

    /// Feeds body bytes through the framing decoder into the mode's consumer.
    fn on_body(
        &mut self,
        data: &[u8],
        bufs: &mut ExchangeBuffers,
        log: &mut WorkerLog,
        m: &mut Measured,
        now: Instant,
    ) -> Step {
        let (Some(head), Some(decoder)) = (&self.head, &mut self.body) else {
            return Step::NeedMore;
        };
        let success = head.is_success();
        let keep_alive = head.keep_alive;
        let mode = self.mode;
        let ExchangeBuffers {
            sse,
            json,
            body,
            carry,
            ..
        } = bufs;
        let mut failed = None;
        let decoded = decoder.decode_all(data, |payload| {
            if failed.is_none() {
                failed =
                    consume_payload(payload, success, mode, sse, json, body, log, m, now).err();
            }
        });
        if let Some(f) = failed {
            return Step::Done(Err(f), false);
        }
        match decoded {
            Err(e) => Step::Done(
                Err(failure("bad_body", e.to_string(), e.to_string())),
                false,
            ),
            Ok((_, true)) => Step::Done(self.finish(bufs, log, m, now), keep_alive),
            Ok((consumed, false)) => {
                if consumed < data.len() {
                    carry.extend_from_slice(&data[consumed..]);
                }
                Step::NeedMore
            }
        }
    }

    /// The server closed the connection: the end of an until-close body, else a truncation.
    fn on_eof(
        &mut self,
        bufs: &mut ExchangeBuffers,
        log: &mut WorkerLog,
        m: &mut Measured,
        now: Instant,
    ) -> Result<(), Failure> {
        let complete = match &mut self.body {
            None => {
                return Err(failure(
                    "disconnected",
                    "Server disconnected",
                    "the server closed the connection before sending a response head",
                ))
            }
            Some(body) => body.finish().is_ok(),
        };
        if complete || m.done {
            return self.finish(bufs, log, m, now);
        }
        Err(failure(
            "disconnected",
            "Response payload is not completed",
            "the server closed the connection in the middle of the response",
        ))
    }

    /// The body is complete: classify the outcome (Python semantics).
    fn finish(
        &mut self,
        bufs: &mut ExchangeBuffers,
        log: &mut WorkerLog,
        m: &mut Measured,
        now: Instant,
    ) -> Result<(), Failure> {
        m.end = Some(now);
        let Some(head) = &self.head else {
            return Err(failure(
                "bad_response",
                "no response head",
                "no response head",
            ));
        };
        if !head.is_success() {
            let body = String::from_utf8_lossy(&bufs.body).trim().to_string();
            return Err(failure(
                &format!("http_{}", head.status),
                head.reason.to_string(),
                format!("HTTP {} {}: {}", head.status, head.reason, body),
            ));
        }
        match self.mode {
            ResponseMode::Whole => {
                m.usage_prompt_tokens = whole_body_prompt_tokens(&mut bufs.body);
                Ok(())
            }
            ResponseMode::Stream(api) => {
                while let Some(ev) = bufs.sse.finish() {
                    let done = ev.is_done();
                    handle_event(done, ev.data, &mut bufs.json, api, log, m, now)?;
                }
                if m.usage_completion_tokens.is_none() && m.usage_prompt_tokens.is_none() {
                    if let Some((p, c)) = m.fallback_usage.take() {
                        m.usage_prompt_tokens = p;
                        m.usage_completion_tokens = c;
                    }
                }
                if m.first_token.is_none() {
                    return Err(failure(
                        "no_token",
                        "Never received a valid chunk to calculate TTFT.This response will be marked as failed!",
                        "the stream ended without a token event",
                    ));
                }
                Ok(())
            }
        }
    }
}

/// One slice of decoded body: error bodies are kept (capped) for the failure detail, whole
/// bodies are collected, streams go through the SSE decoder event by event.
#[allow(clippy::too_many_arguments)]
fn consume_payload(
    payload: &[u8],
    success: bool,
    mode: ResponseMode,
    sse: &mut SseDecoder,
    json: &mut ChunkDecoder,
    body: &mut Vec<u8>,
    log: &mut WorkerLog,
    m: &mut Measured,
    now: Instant,
) -> Result<(), Failure> {
    if !success {
        let room = ERROR_BODY_CAP.saturating_sub(body.len());
        body.extend_from_slice(&payload[..payload.len().min(room)]);
        return Ok(());
    }
    match mode {
        ResponseMode::Whole => {
            if body.len() + payload.len() > WHOLE_BODY_CAP {
                return Err(failure(
                    "body_too_large",
                    "response body too large",
                    format!("over {WHOLE_BODY_CAP} bytes"),
                ));
            }
            body.extend_from_slice(payload);
            Ok(())
        }
        ResponseMode::Stream(api) => {
            sse.push(payload)
                .map_err(|e| failure("sse_too_large", e.to_string(), e.to_string()))?;
            drain_events(sse, json, api, log, m, now)
        }
    }
}

/// Decodes every complete SSE event in the decoder.
fn drain_events(
    sse: &mut SseDecoder,
    json: &mut ChunkDecoder,
    api: StreamApi,
    rec: &mut WorkerLog,
    m: &mut Measured,
    now: Instant,
) -> Result<(), Failure> {
    while let Some(ev) = sse.next_event() {
        let done = ev.is_done();
        handle_event(done, ev.data, json, api, rec, m, now)?;
    }
    Ok(())
}

/// Applies one SSE event (Python's `async_request_openai_*` loop body).
fn handle_event(
    done: bool,
    data: &mut [u8],
    json: &mut ChunkDecoder,
    api: StreamApi,
    rec: &mut WorkerLog,
    m: &mut Measured,
    now: Instant,
) -> Result<(), Failure> {
    if done {
        m.done = true;
        return Ok(());
    }
    let chunk = json.decode(api, data).map_err(|e| Failure {
        kind: "malformed_event".into(),
        error: format!("malformed SSE event: {e}"),
        detail: format!("malformed SSE event: {e}"),
    })?;
    if chunk.has_choices {
        if chunk.is_token(api) {
            match m.last_token {
                None => m.first_token = Some(now),
                Some(prev) => rec.itl_ns.push(now.duration_since(prev).as_nanos() as u64),
            }
            m.last_token = Some(now);
            m.chunks += 1;
            if let Some(text) = &chunk.text {
                rec.text.extend_from_slice(text.as_bytes());
            }
        }
        if let Some(u) = &chunk.usage {
            m.fallback_usage = Some((u.prompt_tokens, u.completion_tokens));
        }
    } else if let Some(u) = &chunk.usage {
        m.usage_completion_tokens = u.completion_tokens;
        if u.prompt_tokens.is_some() {
            m.usage_prompt_tokens = u.prompt_tokens;
        }
    }
    Ok(())
}

/// `usage.prompt_tokens` of a non-streaming JSON body, if present.
fn whole_body_prompt_tokens(body: &mut [u8]) -> Option<u64> {
    #[derive(serde::Deserialize)]
    struct Usage {
        prompt_tokens: Option<u64>,
    }
    #[derive(serde::Deserialize)]
    struct Body {
        usage: Option<Usage>,
    }
    simd_json::serde::from_slice::<Body>(body)
        .ok()?
        .usage?
        .prompt_tokens
}
