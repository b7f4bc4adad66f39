//! Completions, chat completions, responses and Anthropic messages: the shape of every event
//! (as vLLM sends them; the Responses events are [`super::responses`]', the Messages events
//! [`super::anthropic`]'), the per-request event bytes built
//! once before the first one is due, and the timed writer.
//!
//! A stream is: the response head (and, for chat, the opening
//! `{"delta":{"role":"assistant","content":""}}` chunk) at arrival; `ceil(n/k)` content
//! chunks from `arrival + first_token_delay`, `token_interval` apart, each carrying
//! `" tok"` once per token, the last with `finish_reason: "length"`; the usage chunk when
//! asked for; `data: [DONE]`. One HTTP chunk per SSE event, as uvicorn sends them.
//!
//! With `MockConfig::reasoning_tokens` `r` (chat, Responses, Anthropic): the first
//! `min(r, n)` tokens are reasoning, sent as `ceil(r/k)` reasoning chunks on the same
//! schedule (chat `delta.reasoning`, `response.reasoning_text.delta`, Anthropic
//! `thinking_delta` in a `thinking` block), then `MockConfig::thinking_delay` of silence,
//! then the answer's `ceil((n-r)/k)` chunks; the usage counts the reasoning tokens.
//!
//! Every distinct event is serialized once per request into a [`Script`]; sending an
//! event is then one `memcpy` into the write buffer. Events that are already due are
//! batched into one write (up to [`FLUSH_AT`] bytes), so with zero delays the mock writes
//! back to back and the client, not the mock, is the bottleneck. With
//! `MockConfig::timing_report`, each content chunk's deadline goes to the connection's
//! trace (`emission`), which stamps the chunk when its write is handed to the kernel.

use std::io::{self, Write};
use std::ops::Range;
use std::time::{Duration, Instant};

use super::anthropic;
use super::faults::FaultKind;
use super::io::Io;
use super::response::{self, Framing, HeadOpts};
use super::responses;
use super::timing::Schedule;
use crate::runtime::timer::Timers;

/// Write-buffer size at which due events are flushed even if more are due.
pub const FLUSH_AT: usize = 64 << 10;

/// The generation APIs the mock streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// `/v1/completions`: `text_completion`, `choices[0].text`.
    Completions,
    /// `/v1/chat/completions`: `chat.completion.chunk`, `choices[0].delta`.
    Chat,
    /// `/v1/responses`: typed `response.*` events.
    Responses,
    /// `/v1/messages`: Anthropic's typed `message_*` / `content_block_*` events.
    Anthropic,
    /// `/v1/audio/transcriptions`: `transcription.chunk` deltas, no opening role chunk.
    Transcription,
}

/// One generation request, resolved.
#[derive(Debug, Clone)]
pub struct Generation {
    /// Which API's events: completions, chat or responses.
    pub shape: Shape,
    /// Output tokens `n`.
    pub tokens: u64,
    /// Tokens per content chunk `k`.
    pub per_chunk: u64,
    /// Of the `tokens`, the reasoning ones sent first (0 for APIs without reasoning).
    pub reasoning: u64,
    /// The pause between the last reasoning chunk and the first answer chunk.
    pub thinking: Duration,
    /// `usage.prompt_tokens`.
    pub prompt_tokens: u64,
    /// Of them, found in the prefix cache: `usage.prompt_tokens_details.cached_tokens`
    /// (sent only when not 0, so a run without prefix reuse reads as before).
    pub cached_tokens: u64,
    /// Send the usage chunk / usage object.
    pub usage: bool,
    /// `MockConfig::usage_completion_tokens`: the completion count usage reports.
    pub usage_completion_tokens: Option<u64>,
    /// Injected stream fault (disconnect, stall, malformed, close after head), if any.
    pub fault: Option<FaultKind>,
    /// Response id suffix (32 hex digits).
    pub id: u128,
    /// `created` (Unix seconds).
    pub created: u64,
    /// Filler bytes in every event and body (`MockConfig::padding`).
    pub padding: usize,
}

impl Shape {
    /// Typed-event streams have an `error` event a client reads (the `stream_error` fault
    /// sends it); the others are answered with a 500 for that fault.
    pub fn has_error_event(self) -> bool {
        matches!(self, Shape::Responses | Shape::Anthropic)
    }
}

impl Generation {
    /// What an Anthropic event needs to know of this request.
    fn message(&self) -> anthropic::Message {
        anthropic::Message {
            id: self.id,
            prompt_tokens: self.prompt_tokens,
            tokens: self.tokens,
            reasoning: self.reasoning,
            usage: self.usage,
            padding: self.padding,
        }
    }

    /// Chat-shaped (`delta`) rather than completions (`text`).
    fn chat(&self) -> bool {
        matches!(self.shape, Shape::Chat | Shape::Transcription)
    }

    /// What a Responses event needs to know of this request.
    fn responses(&self) -> responses::Response {
        responses::Response {
            id: self.id,
            created: self.created,
            prompt_tokens: self.prompt_tokens,
            tokens: self.tokens,
            reasoning: self.reasoning,
            usage: self.usage,
            padding: self.padding,
        }
    }

    /// Number of content chunks: `ceil(r / k)` reasoning chunks, then `ceil((n - r) / k)`
    /// answer chunks (`ceil(n / k)` without reasoning).
    pub fn chunks(&self) -> u64 {
        self.reasoning_chunks() + self.answer_chunks()
    }

    /// Reasoning chunks, sent first.
    pub fn reasoning_chunks(&self) -> u64 {
        self.reasoning.div_ceil(self.per_chunk)
    }

    fn answer_chunks(&self) -> u64 {
        (self.tokens - self.reasoning).div_ceil(self.per_chunk)
    }

    /// Tokens in the last answer chunk.
    fn last_tokens(&self) -> u64 {
        let answer = self.tokens - self.reasoning;
        answer - self.answer_chunks().saturating_sub(1) * self.per_chunk
    }

    /// Tokens in the last reasoning chunk.
    fn last_reasoning_tokens(&self) -> u64 {
        self.reasoning - self.reasoning_chunks().saturating_sub(1) * self.per_chunk
    }

    fn object(&self, stream: bool) -> &'static str {
        match (self.chat(), stream) {
            _ if self.shape == Shape::Transcription => "transcription.chunk",
            (true, true) => "chat.completion.chunk",
            (true, false) => "chat.completion",
            (false, _) => "text_completion",
        }
    }

    /// `{"id":…,"object":…,"created":…,"model":…,` (the shared start of every body), then
    /// the padding member when padding is asked for.
    fn open(&self, out: &mut Vec<u8>, model_json: &str, stream: bool) {
        let prefix = if self.chat() { "chatcmpl-" } else { "cmpl-" };
        let _ = write!(
            out,
            "{{\"id\":\"{prefix}{:032x}\",\"object\":\"{}\",\"created\":{},\"model\":{model_json},",
            self.id,
            self.object(stream),
            self.created
        );
        response::padding_member(out, self.padding);
    }

    fn usage_json(&self, out: &mut Vec<u8>) {
        let completion = self.usage_completion_tokens.unwrap_or(self.tokens);
        let _ = write!(
            out,
            "\"usage\":{{\"prompt_tokens\":{},\"total_tokens\":{},\"completion_tokens\":{}",
            self.prompt_tokens,
            self.prompt_tokens.saturating_add(completion),
            completion
        );
        if self.cached_tokens > 0 {
            let _ = write!(
                out,
                ",\"prompt_tokens_details\":{{\"cached_tokens\":{}}}",
                self.cached_tokens
            );
        }
        if self.reasoning > 0 {
            let _ = write!(
                out,
                ",\"completion_tokens_details\":{{\"reasoning_tokens\":{}}}",
                self.reasoning
            );
        }
        out.push(b'}');
    }

    /// One streamed content event's JSON; `reasoning` sends the tokens as chat's
    /// `delta.reasoning`.
    fn content_event(
        &self,
        out: &mut Vec<u8>,
        model_json: &str,
        tokens: u64,
        last: bool,
        reasoning: bool,
    ) {
        self.open(out, model_json, true);
        out.extend_from_slice(b"\"choices\":[{\"index\":0,");
        out.extend_from_slice(match (self.chat(), reasoning) {
            (true, true) => b"\"delta\":{\"reasoning\":\"",
            (true, false) => b"\"delta\":{\"content\":\"",
            (false, _) => b"\"text\":\"",
        });
        push_tokens(out, tokens);
        out.extend_from_slice(if self.chat() { b"\"}," } else { b"\"," });
        out.extend_from_slice(b"\"logprobs\":null,\"finish_reason\":");
        out.extend_from_slice(if last { b"\"length\"" } else { b"null" });
        if !self.chat() {
            out.extend_from_slice(b",\"stop_reason\":null");
        }
        out.extend_from_slice(b"}]}");
    }

    /// The whole non-streaming response body.
    pub fn body(&self, out: &mut Vec<u8>, model_json: &str) {
        match self.shape {
            Shape::Responses => return responses::body(&self.responses(), out, model_json),
            Shape::Anthropic => return anthropic::body(&self.message(), out, model_json),
            Shape::Completions | Shape::Chat | Shape::Transcription => {}
        }
        self.open(out, model_json, false);
        out.extend_from_slice(b"\"choices\":[{\"index\":0,");
        out.extend_from_slice(if self.chat() {
            b"\"message\":{\"role\":\"assistant\",\"content\":\""
        } else {
            b"\"text\":\""
        });
        push_tokens(out, self.tokens);
        out.extend_from_slice(if self.chat() { b"\"}," } else { b"\"," });
        out.extend_from_slice(
            b"\"logprobs\":null,\"finish_reason\":\"length\",\"stop_reason\":null}]",
        );
        if self.usage {
            out.push(b',');
            self.usage_json(out);
        }
        out.push(b'}');
    }
}

use response::push_tokens;

/// The distinct events of one stream, each already framed as an HTTP chunk.
#[derive(Debug, Default)]
pub struct Script {
    buf: Vec<u8>,
    tmp: Vec<u8>,
    role: Range<usize>,
    /// Reasoning chunks: `k` tokens, and the last one's.
    think: Range<usize>,
    think_last: Range<usize>,
    /// Sent right before the first answer chunk after reasoning (Anthropic: the thinking
    /// block's stop and the text block's start); empty otherwise.
    switch: Range<usize>,
    mid: Range<usize>,
    last: Range<usize>,
    malformed: Range<usize>,
    /// A typed stream's `error` event and the end of the body (the `stream_error` fault).
    error: Range<usize>,
    tail: Range<usize>,
}

impl Script {
    /// Serializes the events of `g` (reusing this script's buffers).
    pub fn build(&mut self, g: &Generation, model_json: &str) {
        self.buf.clear();
        self.error = 0..0;
        self.switch = 0..0;
        match g.shape {
            Shape::Responses => return self.build_responses(g, model_json),
            Shape::Anthropic => return self.build_anthropic(g, model_json),
            Shape::Completions | Shape::Chat | Shape::Transcription => {}
        }
        self.role = self.event(|tmp| {
            if g.shape == Shape::Chat {
                g.open(tmp, model_json, true);
                tmp.extend_from_slice(
                    b"\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}]}",
                );
            }
        });
        // With nothing but reasoning, the last reasoning chunk carries the finish reason.
        let only_reasoning = g.reasoning == g.tokens;
        self.think = self.event(|tmp| g.content_event(tmp, model_json, g.per_chunk, false, true));
        self.think_last = self.event(|tmp| {
            let n = g.last_reasoning_tokens();
            g.content_event(tmp, model_json, n, only_reasoning, true);
        });
        self.mid = self.event(|tmp| g.content_event(tmp, model_json, g.per_chunk, false, false));
        self.last =
            self.event(|tmp| g.content_event(tmp, model_json, g.last_tokens(), true, false));
        self.malformed = self.event(|tmp| {
            // Cut off mid-object: not JSON.
            g.open(tmp, model_json, true);
            tmp.extend_from_slice(b"\"choices\":[{\"index\":0,\"text\": tok");
        });
        let start = self.buf.len();
        if g.usage {
            self.tmp.clear();
            g.open(&mut self.tmp, model_json, true);
            self.tmp.extend_from_slice(b"\"choices\":[],");
            g.usage_json(&mut self.tmp);
            self.tmp.push(b'}');
            response::sse_chunk(&mut self.buf, &self.tmp);
        }
        response::sse_chunk(&mut self.buf, b"[DONE]");
        self.buf.extend_from_slice(response::LAST_CHUNK);
        self.tail = start..self.buf.len();
    }

    /// The Responses events: `response.created` at the head, output-text deltas, the
    /// terminal `response.completed` (vLLM's, `status: "incomplete"` at the length limit)
    /// and no `[DONE]`, each with its `event:` line.
    fn build_responses(&mut self, g: &Generation, model_json: &str) {
        use responses::Event;
        let r = g.responses();
        self.role = self.named(Event::Created.name(), |tmp| r.created(tmp, model_json));
        self.think = self.named(Event::ReasoningDelta.name(), |tmp| {
            r.reasoning_delta(tmp, g.per_chunk);
        });
        self.think_last = self.named(Event::ReasoningDelta.name(), |tmp| {
            r.reasoning_delta(tmp, g.last_reasoning_tokens());
        });
        self.mid = self.named(Event::Delta.name(), |tmp| r.delta(tmp, g.per_chunk));
        self.last = self.named(Event::Delta.name(), |tmp| r.delta(tmp, g.last_tokens()));
        self.malformed = self.named(Event::Delta.name(), |tmp| {
            tmp.extend_from_slice(b"{\"type\":\"response.output_text.delta\",\"delta\": tok");
        });
        let start = self.buf.len();
        self.named(Event::Error.name(), |tmp| r.error(tmp));
        self.buf.extend_from_slice(response::LAST_CHUNK);
        self.error = start..self.buf.len();
        let start = self.buf.len();
        self.named(Event::Completed.name(), |tmp| r.completed(tmp, model_json));
        self.buf.extend_from_slice(response::LAST_CHUNK);
        self.tail = start..self.buf.len();
    }

    /// The Messages events: `message_start` and the text block's start at the head, text
    /// deltas, then the block's stop, `message_delta` and `message_stop`, each with its
    /// `event:` line.
    fn build_anthropic(&mut self, g: &Generation, model_json: &str) {
        use anthropic::Event;
        let m = g.message();
        let start = self.buf.len();
        self.named(Event::MessageStart.name(), |tmp| m.start(tmp, model_json));
        self.named(Event::BlockStart.name(), |tmp| m.block_start(tmp));
        self.role = start..self.buf.len();
        self.think = self.named(Event::BlockDelta.name(), |tmp| {
            m.thinking_delta(tmp, g.per_chunk);
        });
        self.think_last = self.named(Event::BlockDelta.name(), |tmp| {
            m.thinking_delta(tmp, g.last_reasoning_tokens());
        });
        if g.reasoning > 0 {
            let start = self.buf.len();
            self.named(Event::BlockStop.name(), |tmp| m.thinking_stop(tmp));
            self.named(Event::BlockStart.name(), |tmp| m.text_start(tmp));
            self.switch = start..self.buf.len();
        }
        self.mid = self.named(Event::BlockDelta.name(), |tmp| m.delta(tmp, g.per_chunk));
        self.last = self.named(Event::BlockDelta.name(), |tmp| {
            m.delta(tmp, g.last_tokens())
        });
        self.malformed = self.named(Event::BlockDelta.name(), |tmp| {
            tmp.extend_from_slice(b"{\"type\":\"content_block_delta\",\"delta\": tok");
        });
        let start = self.buf.len();
        self.named(Event::BlockStop.name(), |tmp| m.block_stop(tmp));
        self.named(Event::Error.name(), |tmp| m.error(tmp));
        self.buf.extend_from_slice(response::LAST_CHUNK);
        self.error = start..self.buf.len();
        let start = self.buf.len();
        self.named(Event::BlockStop.name(), |tmp| m.block_stop(tmp));
        self.named(Event::MessageDelta.name(), |tmp| m.message_delta(tmp));
        self.named(Event::MessageStop.name(), |tmp| m.message_stop(tmp));
        self.buf.extend_from_slice(response::LAST_CHUNK);
        self.tail = start..self.buf.len();
    }

    /// Frames the payload written by `fill` as one event; empty payload → empty range.
    fn event(&mut self, fill: impl FnOnce(&mut Vec<u8>)) -> Range<usize> {
        self.tmp.clear();
        fill(&mut self.tmp);
        let start = self.buf.len();
        if !self.tmp.is_empty() {
            response::sse_chunk(&mut self.buf, &self.tmp);
        }
        start..self.buf.len()
    }

    /// Frames the payload written by `fill` as one event named `event`.
    fn named(&mut self, event: &str, fill: impl FnOnce(&mut Vec<u8>)) -> Range<usize> {
        self.tmp.clear();
        fill(&mut self.tmp);
        let start = self.buf.len();
        response::sse_named_chunk(&mut self.buf, event, &self.tmp);
        start..self.buf.len()
    }

    fn get(&self, r: &Range<usize>) -> &[u8] {
        &self.buf[r.clone()]
    }
}

/// How a response ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// Fully sent; the connection may be reused.
    KeepAlive,
    /// Close the connection now (a disconnect, stall or close-after-head fault, or
    /// `close_after_response`).
    Close,
}

/// Content chunk after which a disconnect fault closes the socket.
fn disconnect_after(chunks: u64) -> u64 {
    (chunks / 2).min(3)
}

/// Sends a stream: head (and role chunk) now, content chunks on `schedule`, then the tail.
/// `End::KeepAlive` means the stream completed.
pub async fn stream(
    io: &mut Io,
    timers: &Timers,
    g: &Generation,
    script: &Script,
    schedule: &mut Schedule,
    opts: &HeadOpts<'_>,
    stall_for: Duration,
) -> io::Result<End> {
    response::head(&mut io.out, 200, "OK", Framing::Chunked, opts);
    if g.fault == Some(FaultKind::CloseAfterHead) {
        io.flush().await?;
        return Ok(End::Close);
    }
    io.out.extend_from_slice(script.get(&script.role));
    if g.fault == Some(FaultKind::Endless) {
        return endless(io, timers, script.get(&script.mid), Some(schedule)).await;
    }
    let chunks = g.chunks();
    let thinking = g.reasoning_chunks();
    for i in 0..chunks {
        if i == thinking && i > 0 {
            schedule.pause(g.thinking);
        }
        let deadline = schedule.next_deadline();
        if deadline > Instant::now() {
            io.flush().await?;
            timers.sleep_until(deadline).await;
        }
        if g.fault == Some(FaultKind::Disconnect) && i == disconnect_after(chunks) {
            io.flush().await?;
            return Ok(End::Close);
        }
        if g.fault == Some(FaultKind::StreamError) && i == chunks / 2 {
            // The error event ends the body: a complete response, the connection reusable.
            io.out.extend_from_slice(script.get(&script.error));
            return Ok(End::KeepAlive);
        }
        if i == thinking && i > 0 {
            io.out.extend_from_slice(script.get(&script.switch));
        }
        let event = match g.fault {
            Some(FaultKind::Malformed) if i == chunks / 2 => &script.malformed,
            _ if i + 1 == thinking => &script.think_last,
            _ if i < thinking => &script.think,
            _ if i + 1 == chunks => &script.last,
            _ => &script.mid,
        };
        io.out.extend_from_slice(script.get(event));
        if let Some(trace) = &mut io.trace {
            trace.queued(deadline);
        }
        if g.fault == Some(FaultKind::Stall) {
            io.flush().await?;
            timers.sleep(stall_for).await;
            return Ok(End::Close);
        }
        if io.out.len() >= FLUSH_AT {
            io.flush().await?;
        }
    }
    // The tail stays buffered: the caller writes it after counting the request.
    io.out.extend_from_slice(script.get(&script.tail));
    Ok(End::KeepAlive)
}

/// The endless fault: `framed` (one HTTP chunk) again and again, each at the schedule's next
/// deadline (`None`: back to back), until a write fails because the client closed the
/// connection; a server that stops drops the connection task at its next await. Nothing
/// is recorded per chunk, so the mock's memory stays flat however long it runs.
pub async fn endless(
    io: &mut Io,
    timers: &Timers,
    framed: &[u8],
    mut schedule: Option<&mut Schedule>,
) -> io::Result<End> {
    loop {
        if let Some(schedule) = schedule.as_deref_mut() {
            let deadline = schedule.next_deadline();
            if deadline > Instant::now() {
                io.flush().await?;
                timers.sleep_until(deadline).await;
            }
        }
        io.out.extend_from_slice(framed);
        if io.out.len() >= FLUSH_AT {
            io.flush().await?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gen(chat: bool, tokens: u64, per_chunk: u64, usage: bool) -> Generation {
        Generation {
            shape: if chat {
                Shape::Chat
            } else {
                Shape::Completions
            },
            tokens,
            per_chunk,
            reasoning: 0,
            thinking: Duration::ZERO,
            prompt_tokens: 7,
            cached_tokens: 0,
            usage,
            usage_completion_tokens: None,
            fault: None,
            id: 0xabc,
            created: 1_700_000_000,
            padding: 0,
        }
    }

    /// Splits framed events back into their JSON payloads.
    fn payloads(bytes: &[u8]) -> Vec<String> {
        let text = std::str::from_utf8(bytes).unwrap();
        let mut out = Vec::new();
        let mut rest = text;
        while let Some((size, after)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(size, 16).unwrap();
            if n == 0 {
                break;
            }
            let data = &after[..n];
            out.push(
                data.strip_prefix("data: ")
                    .unwrap()
                    .strip_suffix("\n\n")
                    .unwrap()
                    .to_string(),
            );
            rest = &after[n + 2..];
        }
        out
    }

    #[test]
    fn chunk_counts_follow_ceil_n_over_k() {
        assert_eq!(gen(false, 60, 3, true).chunks(), 20);
        assert_eq!(gen(false, 10, 3, true).chunks(), 4);
        assert_eq!(gen(false, 10, 3, true).last_tokens(), 1);
        assert_eq!(gen(false, 1, 5, true).chunks(), 1);
    }

    #[test]
    fn completion_events_look_like_vllm() {
        let g = gen(false, 5, 2, true);
        let mut s = Script::default();
        s.build(&g, "\"m\"");
        assert!(s.get(&s.role).is_empty());
        let mid: serde_json::Value = serde_json::from_str(&payloads(s.get(&s.mid))[0]).unwrap();
        assert_eq!(mid["object"], "text_completion");
        assert_eq!(mid["id"], format!("cmpl-{:032x}", 0xabc));
        assert_eq!(mid["model"], "m");
        assert_eq!(mid["choices"][0]["text"], " tok tok");
        assert_eq!(mid["choices"][0]["finish_reason"], serde_json::Value::Null);
        let last: serde_json::Value = serde_json::from_str(&payloads(s.get(&s.last))[0]).unwrap();
        assert_eq!(last["choices"][0]["text"], " tok");
        assert_eq!(last["choices"][0]["finish_reason"], "length");
        let tail = payloads(s.get(&s.tail));
        let usage: serde_json::Value = serde_json::from_str(&tail[0]).unwrap();
        assert_eq!(usage["choices"], serde_json::json!([]));
        assert_eq!(
            usage["usage"],
            serde_json::json!({"prompt_tokens":7,"total_tokens":12,"completion_tokens":5})
        );
        assert_eq!(tail[1], "[DONE]");
        assert!(s.get(&s.tail).ends_with(b"0\r\n\r\n"));
        assert!(
            serde_json::from_str::<serde_json::Value>(&payloads(s.get(&s.malformed))[0]).is_err()
        );
    }

    #[test]
    fn chat_events_have_role_and_delta() {
        let g = gen(true, 3, 1, false);
        let mut s = Script::default();
        s.build(&g, "\"m\"");
        let role: serde_json::Value = serde_json::from_str(&payloads(s.get(&s.role))[0]).unwrap();
        assert_eq!(role["object"], "chat.completion.chunk");
        assert_eq!(
            role["choices"][0]["delta"],
            serde_json::json!({"role":"assistant","content":""})
        );
        let mid: serde_json::Value = serde_json::from_str(&payloads(s.get(&s.mid))[0]).unwrap();
        assert_eq!(mid["choices"][0]["delta"]["content"], " tok");
        assert_eq!(
            payloads(s.get(&s.tail)),
            ["[DONE]"],
            "no usage chunk when usage is off"
        );
    }

    #[test]
    fn non_streaming_bodies() {
        let mut out = Vec::new();
        gen(true, 3, 1, true).body(&mut out, "\"m\"");
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["object"], "chat.completion");
        assert_eq!(v["choices"][0]["message"]["content"], " tok tok tok");
        assert_eq!(v["usage"]["completion_tokens"], 3);
        out.clear();
        gen(false, 2, 1, false).body(&mut out, "\"m\"");
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["choices"][0]["text"], " tok tok");
        assert!(v.get("usage").is_none());
    }

    #[test]
    fn disconnect_point_is_mid_stream() {
        assert_eq!(disconnect_after(1), 0);
        assert_eq!(disconnect_after(4), 2);
        assert_eq!(disconnect_after(100), 3);
    }
}
