//! Zero-copy Server-Sent Events framing.
//!
//! [`SseDecoder`] turns the decoded body bytes of a `text/event-stream` response into events.
//! It is a pure push parser in the style of httparse: the engine [`push`](SseDecoder::push)es
//! whatever a read delivered and drains [`next_event`](SseDecoder::next_event) until it says
//! "need more" (`None`). It never reads a clock (the engine stamps the read that completed an
//! event) and never allocates per event: bytes live in one reusable buffer, an event's `data`
//! is a mutable slice of it (simd-json parses in place), and multi-line `data:` fields are
//! joined inside that buffer.
//!
//! Framing follows the WHATWG event-stream rules: lines end in `\n`, `\r\n` or a lone `\r`
//! (also mixed, and split across pushes); a blank line ends an event; `:` lines are comments;
//! `data:` and `event:` fields are kept (one leading space stripped), any other field (`id:`,
//! `retry:`) is ignored; an event without a `data` line is not emitted; a leading UTF-8 BOM
//! is skipped. At end of body ([`finish`](SseDecoder::finish)) a trailing event without its
//! blank line is still emitted, as Python's client does.
//!
//! **Early completion** (on by default) mirrors Python's `StreamedResponseHandler`: when the
//! bytes pending after the last complete event are one `data:` line whose payload is already
//! a complete JSON object/array (or `[DONE]`), the event is emitted before its terminating
//! blank line arrives, so it counts as received when its last payload byte did. The late
//! terminator is then swallowed without producing an empty or duplicate event. Completeness is
//! judged by a cheap bracket-balance scan (strings and escapes respected), not a JSON parse.
//! This assumes single-line `data:` events, which is what every OpenAI-compatible server
//! sends; should a multi-line event's first line already be complete JSON and its line end
//! arrive in a later read, the later lines come out as a separate event, as in Python.

use std::ops::Range;

/// Default cap on buffered, not yet consumed bytes (one partial event plus the current push).
/// The engine uses it as is: the largest SSE event a run accepts is a fixed 16 MiB.
pub const DEFAULT_MAX_PENDING: usize = 16 << 20;

/// The UTF-8 byte order mark, which a stream may start with and which is not part of a field.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Why the decoder refused bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    /// The stream kept growing without completing an event.
    #[error(
        "SSE stream buffered {pending} bytes without completing an event (limit {limit}, \
         fixed: no setting raises it); the server is not sending blank-line-terminated \
         events, or one event is larger than any real answer"
    )]
    TooLarge {
        /// Bytes that would have been buffered.
        pending: usize,
        /// The configured limit.
        limit: usize,
    },
}

impl SseError {
    /// A stable short name for counting failures.
    pub fn kind(&self) -> &'static str {
        match self {
            SseError::TooLarge { .. } => "sse_too_large",
        }
    }
}

/// One event: its `event:` name (if any) and its `data:` lines joined with `\n`.
///
/// Both borrow the decoder's buffer; `data` is mutable so a JSON parser may work in place.
#[derive(Debug, PartialEq, Eq)]
pub struct SseEvent<'a> {
    /// The `event:` field value, if the event had one.
    pub event: Option<&'a [u8]>,
    /// All `data:` field values, joined with `\n`.
    pub data: &'a mut [u8],
}

/// What [`SseDecoder::push_known`] did with a push.
#[derive(Debug)]
pub enum Pushed<'a, K> {
    /// The bytes were one whole event that the caller's reader knew: its answer.
    Known(K),
    /// The bytes were one whole single-line event, returned at once.
    Event(SseEvent<'a>),
    /// The bytes were buffered: drain [`SseDecoder::next_event`].
    Bytes,
}

impl SseEvent<'_> {
    /// True for the OpenAI end-of-stream sentinel `data: [DONE]`.
    #[inline]
    pub fn is_done(&self) -> bool {
        self.data.trim_ascii() == b"[DONE]"
    }
}

/// Incremental SSE decoder; one per connection, [`reset`](Self::reset) between responses.
///
/// Buffer layout (all offsets index `buf`):
/// `[consumed | joined data of the current event | … | current line (incomplete) ]`.
/// Everything before `data_start` (or `line_start` when the event has no data yet) is dead
/// and dropped by the next [`push`](Self::push).
#[derive(Debug)]
pub struct SseDecoder {
    buf: Vec<u8>,
    /// Start of the line being parsed.
    line_start: usize,
    /// Where the search for the current line's end resumes (`line_start <= scan`).
    scan: usize,
    /// Joined data of the current event: `buf[data_start..data_start + data_len]`.
    data_start: usize,
    data_len: usize,
    /// The current event has had at least one `data` line.
    has_data: bool,
    /// Non-blank lines seen in the current event (saturating), for the early-completion rule.
    lines_in_event: u32,
    /// `event:` value of the current event. Kept apart because joining data lines in place
    /// may overwrite the line it came from; it is reused, so it allocates only while growing.
    event_name: Vec<u8>,
    has_event_name: bool,
    /// The last line ended with `\r`: an `\n` right after it belongs to that line ending.
    skip_lf: bool,
    /// The current line was already delivered by early completion; ignore the rest of it.
    skip_line: bool,
    /// The current event already delivered its data early.
    early_taken: bool,
    /// An event was returned; its state is cleared at the next call (its slice is dead then).
    settle_pending: bool,
    /// No byte of the stream has been examined yet (BOM check pending).
    at_stream_start: bool,
    /// [`finish`](Self::finish) was called: no more bytes will come.
    eof: bool,
    early_completion: bool,
    max_pending: usize,
}

impl Default for SseDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl SseDecoder {
    /// A decoder with a small initial buffer, early completion on, the default byte cap.
    pub fn new() -> Self {
        Self::with_capacity(8 * 1024)
    }

    /// A decoder whose buffer starts with room for `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> Self {
        SseDecoder {
            buf: Vec::with_capacity(capacity),
            line_start: 0,
            scan: 0,
            data_start: 0,
            data_len: 0,
            has_data: false,
            lines_in_event: 0,
            event_name: Vec::new(),
            has_event_name: false,
            skip_lf: false,
            skip_line: false,
            early_taken: false,
            settle_pending: false,
            at_stream_start: true,
            eof: false,
            early_completion: true,
            max_pending: DEFAULT_MAX_PENDING,
        }
    }

    /// Turn early completion (see the module docs) on or off; on by default.
    pub fn set_early_completion(&mut self, on: bool) {
        self.early_completion = on;
    }

    /// Cap the buffered, not yet consumed bytes; [`push`](Self::push) fails beyond it.
    pub fn set_max_pending(&mut self, limit: usize) {
        self.max_pending = limit;
    }

    /// Bytes buffered and not yet consumed by a returned event.
    pub fn pending_len(&self) -> usize {
        self.buf.len() - self.keep_from()
    }

    /// Forget everything about the current response (keeps the buffer's capacity and the
    /// settings), ready for the next response on the same connection.
    pub fn reset(&mut self) {
        let (early, limit) = (self.early_completion, self.max_pending);
        let mut buf = std::mem::take(&mut self.buf);
        let mut event_name = std::mem::take(&mut self.event_name);
        buf.clear();
        event_name.clear();
        *self = SseDecoder {
            buf,
            event_name,
            early_completion: early,
            max_pending: limit,
            ..SseDecoder::with_capacity(0)
        };
    }

    /// Append decoded body bytes. The consumed prefix is dropped first, so the buffer only
    /// ever holds the current partial event plus these bytes.
    pub fn push(&mut self, body_bytes: &[u8]) -> Result<(), SseError> {
        self.settle();
        self.compact();
        let pending = self.buf.len() + body_bytes.len();
        if pending > self.max_pending {
            return Err(SseError::TooLarge {
                pending,
                limit: self.max_pending,
            });
        }
        self.buf.extend_from_slice(body_bytes);
        Ok(())
    }

    /// [`push`](Self::push) with a shortcut for the shape nearly every server streams:
    /// when nothing is pending (the last event was complete) and `body_bytes` is exactly one
    /// event of one `data: ` line ended by a blank line (`data: X\n\n`, `X` without a line
    /// end), that event is returned at once, without walking its lines: the same event that
    /// `push` and [`next_event`](Self::next_event) would give, and nothing is left pending.
    /// Otherwise the bytes are pushed and `None` returned: drain `next_event` as after `push`.
    pub fn push_event(&mut self, body_bytes: &[u8]) -> Result<Option<SseEvent<'_>>, SseError> {
        Ok(match self.push_known(body_bytes, |_| None::<()>)? {
            Pushed::Event(event) => Some(event),
            Pushed::Known(()) | Pushed::Bytes => None,
        })
    }

    /// [`push_event`](Self::push_event), first offering a whole event's data `X` to `known`,
    /// a reader that recognises some events from their bytes alone. When it does (`Some`),
    /// the event is consumed as `push_event` would have returned it, nothing is copied, and
    /// its answer comes back as [`Pushed::Known`]. `known` sees `X` before the decoder looked
    /// for a line end in it: it may answer `Some` only for bytes that hold no `\n` or `\r`
    /// (a template that holds none matched them whole, for instance). Why: that search, and
    /// the copy into the decoder's buffer, were a fifth of the reading of a token event.
    pub fn push_known<'b, K>(
        &mut self,
        body_bytes: &'b [u8],
        known: impl FnOnce(&'b [u8]) -> Option<K>,
    ) -> Result<Pushed<'_, K>, SseError> {
        self.settle();
        let Some(value) = self.single_data_line(body_bytes) else {
            self.push(body_bytes)?;
            return Ok(Pushed::Bytes);
        };
        if let Some(answer) = known(value) {
            debug_assert!(
                memchr::memchr2(b'\n', b'\r', value).is_none(),
                "a known event holds a line break"
            );
            // As after the event had been returned and settled: nothing pending.
            self.buf.clear();
            (self.line_start, self.scan, self.data_start) = (0, 0, 0);
            self.clear_event();
            self.at_stream_start = false;
            self.skip_lf = false;
            return Ok(Pushed::Known(answer));
        }
        if memchr::memchr2(b'\n', b'\r', value).is_some() {
            self.push(body_bytes)?;
            return Ok(Pushed::Bytes);
        }
        // As if the line and its blank line had been read: the event is returned, so the
        // next call settles it, and nothing before the buffer's end is pending.
        self.buf.clear();
        self.buf.extend_from_slice(value);
        let len = self.buf.len();
        (self.line_start, self.scan) = (len, len);
        (self.data_start, self.data_len) = (0, len);
        self.has_data = true;
        self.settle_pending = true;
        self.at_stream_start = false;
        self.skip_lf = false;
        Ok(Pushed::Event(SseEvent {
            event: None,
            data: &mut self.buf[..len],
        }))
    }

    /// The `X` of `body_bytes` when the decoder is idle (between events, nothing pending)
    /// and the bytes are `data: X\n\n` (`X` not yet searched for a line end).
    fn single_data_line<'b>(&self, body_bytes: &'b [u8]) -> Option<&'b [u8]> {
        let idle = self.line_start == self.buf.len()
            && !self.has_data
            && self.lines_in_event == 0
            && !self.has_event_name
            && !self.skip_line
            && !self.early_taken
            && !self.eof;
        if !idle || body_bytes.len() > self.max_pending {
            return None;
        }
        body_bytes.strip_prefix(b"data: ")?.strip_suffix(b"\n\n")
    }

    /// The next complete event, or `None` when more bytes are needed.
    pub fn next_event(&mut self) -> Option<SseEvent<'_>> {
        let data = self.advance()?;
        Some(SseEvent {
            event: self.has_event_name.then_some(&self.event_name[..]),
            data: &mut self.buf[data],
        })
    }

    /// Signal the end of the body and return the next remaining event: complete events
    /// still buffered first, then a trailing event that lacked its blank line. Call it until
    /// it returns `None`; [`reset`](Self::reset) before reusing the decoder.
    pub fn finish(&mut self) -> Option<SseEvent<'_>> {
        self.eof = true;
        self.next_event()
    }

    /// Offset before which every byte is dead (a returned event's data is dead too).
    fn keep_from(&self) -> usize {
        if self.has_data && !self.settle_pending {
            self.data_start
        } else {
            self.line_start
        }
    }

    /// Drop the dead prefix of the buffer and rebase the offsets.
    fn compact(&mut self) {
        let keep = self.keep_from();
        if keep == 0 {
            return;
        }
        self.buf.copy_within(keep.., 0);
        self.buf.truncate(self.buf.len() - keep);
        self.line_start -= keep;
        self.scan -= keep;
        if self.has_data {
            self.data_start -= keep;
        } else {
            self.data_start = 0;
        }
    }

    /// Clear the state of the event returned last (its slice can no longer be borrowed).
    fn settle(&mut self) {
        if self.settle_pending {
            self.clear_event();
        }
    }

    /// Start a new event.
    fn clear_event(&mut self) {
        self.has_data = false;
        self.data_len = 0;
        self.lines_in_event = 0;
        self.event_name.clear();
        self.has_event_name = false;
        self.early_taken = false;
        self.settle_pending = false;
    }

    /// Parse complete lines until an event is ready (its data range) or bytes run out.
    fn advance(&mut self) -> Option<Range<usize>> {
        self.settle();
        if !self.skip_bom() {
            return None;
        }
        loop {
            if self.skip_lf {
                match self.buf.get(self.line_start) {
                    None => break,
                    Some(&b'\n') => {
                        self.line_start += 1;
                        self.scan = self.scan.max(self.line_start);
                    }
                    Some(_) => {}
                }
                self.skip_lf = false;
            }
            let Some(offset) = memchr::memchr2(b'\n', b'\r', &self.buf[self.scan..]) else {
                self.scan = self.buf.len();
                break;
            };
            let eol = self.scan + offset;
            self.skip_lf = self.buf[eol] == b'\r';
            let line = self.line_start..eol;
            self.line_start = eol + 1;
            self.scan = self.line_start;
            if let Some(data) = self.process_line(line) {
                return Some(data);
            }
        }
        if self.eof {
            self.end_of_stream()
        } else {
            self.try_early()
        }
    }

    /// Skip a UTF-8 BOM at the very start of the stream; false while it cannot be decided.
    fn skip_bom(&mut self) -> bool {
        if !self.at_stream_start {
            return true;
        }
        let head = &self.buf[self.line_start..];
        if head.len() < BOM.len() && BOM.starts_with(head) && !self.eof {
            return false;
        }
        if head.starts_with(BOM) {
            self.line_start += BOM.len();
            self.scan = self.scan.max(self.line_start);
        }
        self.at_stream_start = false;
        true
    }

    /// Interpret one complete line (without its line ending); a blank line may yield an event.
    fn process_line(&mut self, line: Range<usize>) -> Option<Range<usize>> {
        if self.skip_line {
            self.skip_line = false;
            return None;
        }
        if line.is_empty() {
            return self.dispatch();
        }
        self.lines_in_event = self.lines_in_event.saturating_add(1);
        if self.buf[line.start] == b':' {
            return None;
        }
        let (name, value) = split_field(&self.buf, line);
        match &self.buf[name] {
            b"data" => self.append_data(value),
            b"event" => {
                self.event_name.clear();
                self.event_name.extend_from_slice(&self.buf[value]);
                self.has_event_name = true;
            }
            _ => {}
        }
        None
    }

    /// Add one `data` value to the current event, joining in place with `\n`.
    fn append_data(&mut self, value: Range<usize>) {
        if !self.has_data {
            self.has_data = true;
            self.data_start = value.start;
            self.data_len = value.len();
            return;
        }
        // The joined data ends before the previous line's terminator, so the write position
        // stays strictly before `value.start`: copying left never overwrites unread bytes.
        let at = self.data_start + self.data_len;
        self.buf[at] = b'\n';
        let len = value.len();
        self.buf.copy_within(value, at + 1);
        self.data_len += 1 + len;
    }

    /// End of event: emit it if it carried data, else just start a new one.
    fn dispatch(&mut self) -> Option<Range<usize>> {
        if self.has_data {
            self.settle_pending = true;
            Some(self.data_start..self.data_start + self.data_len)
        } else {
            self.clear_event();
            None
        }
    }

    /// No more bytes will come: the unterminated last line ends the last event.
    fn end_of_stream(&mut self) -> Option<Range<usize>> {
        let len = self.buf.len();
        if self.line_start < len {
            let line = self.line_start..len;
            self.line_start = len;
            self.scan = len;
            self.skip_lf = false;
            // A non-empty line never dispatches by itself.
            let _ = self.process_line(line);
        }
        self.skip_line = false;
        self.dispatch()
    }

    /// Early completion: emit a pending single `data:` line whose payload is complete.
    fn try_early(&mut self) -> Option<Range<usize>> {
        if !self.early_completion || self.early_taken || self.skip_line {
            return None;
        }
        let len = self.buf.len();
        if self.lines_in_event == 1 && self.has_data && self.line_start == len {
            // The only line so far is a finished `data:` line; its blank line is missing.
            let data = self.data_start..self.data_start + self.data_len;
            if !is_complete_payload(&self.buf[data.clone()]) {
                return None;
            }
            self.has_data = false;
            self.data_len = 0;
            self.early_taken = true;
            return Some(data);
        }
        if self.lines_in_event == 0 && self.line_start < len {
            // The only bytes pending are an unterminated line: is it a complete `data:` line?
            let (name, value) = split_field(&self.buf, self.line_start..len);
            if &self.buf[name] != b"data" || !is_complete_payload(&self.buf[value.clone()]) {
                return None;
            }
            self.lines_in_event = 1;
            self.early_taken = true;
            self.skip_line = true;
            self.line_start = len;
            self.scan = len;
            return Some(value);
        }
        None
    }
}

/// Split a field line into name and value ranges (`name:value`, one leading space of the value
/// stripped; a line without `:` is a name with an empty value).
fn split_field(buf: &[u8], line: Range<usize>) -> (Range<usize>, Range<usize>) {
    match memchr::memchr(b':', &buf[line.clone()]) {
        Some(colon) => {
            let name = line.start..line.start + colon;
            let mut value_start = name.end + 1;
            if value_start < line.end && buf[value_start] == b' ' {
                value_start += 1;
            }
            (name, value_start..line.end)
        }
        None => (line.clone(), line.end..line.end),
    }
}

/// True when a `data:` payload is `[DONE]` or a complete JSON object or array (with only
/// whitespace around). Cheap: a bracket-balance scan, so malformed JSON may pass; the JSON
/// parser reports that later, exactly as for an event framed normally.
fn is_complete_payload(value: &[u8]) -> bool {
    let value = value.trim_ascii();
    if value == b"[DONE]" {
        return true;
    }
    // Scalars are never completed early: a number may still be growing.
    matches!(
        (value.first(), value.last()),
        (Some(&b'{'), Some(&b'}')) | (Some(&b'['), Some(&b']'))
    ) && closes_at_end(value)
}

/// True when the bracket nesting opened by `value[0]` closes exactly at its last byte.
fn closes_at_end(value: &[u8]) -> bool {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (i, &byte) in value.iter().enumerate() {
        if in_string {
            if escaped {
                escaped = false;
            } else if byte == b'\\' {
                escaped = true;
            } else if byte == b'"' {
                in_string = false;
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                if depth <= 1 {
                    return depth == 1 && i + 1 == value.len();
                }
                depth -= 1;
            }
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An owned copy of an event, for comparisons.
    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Ev {
        event: Option<Vec<u8>>,
        data: Vec<u8>,
    }

    impl Ev {
        fn data(data: &str) -> Ev {
            Ev {
                event: None,
                data: data.as_bytes().to_vec(),
            }
        }
        fn named(event: &str, data: &str) -> Ev {
            Ev {
                event: Some(event.as_bytes().to_vec()),
                data: data.as_bytes().to_vec(),
            }
        }
    }

    fn own(ev: SseEvent<'_>) -> Ev {
        Ev {
            event: ev.event.map(<[u8]>::to_vec),
            data: ev.data.to_vec(),
        }
    }

    fn drain(dec: &mut SseDecoder, out: &mut Vec<Ev>) {
        // Bounded: every returned event consumes at least one byte of the buffer.
        for _ in 0..100_000 {
            match dec.next_event() {
                Some(ev) => out.push(own(ev)),
                None => return,
            }
        }
        panic!("decoder did not run out of events");
    }

    fn finish(dec: &mut SseDecoder, out: &mut Vec<Ev>) {
        for _ in 0..100_000 {
            match dec.finish() {
                Some(ev) => out.push(own(ev)),
                None => return,
            }
        }
        panic!("finish did not run out of events");
    }

    /// Decode `stream` delivered in `pieces` (cut positions), draining after every push.
    fn decode_split(stream: &[u8], cuts: &[usize], early: bool) -> Vec<Ev> {
        decode_pieces(stream, cuts, early, Via::Push)
    }

    /// How [`decode_pieces`] hands each piece to the decoder.
    #[derive(Clone, Copy)]
    enum Via {
        Push,
        PushEvent,
        /// [`SseDecoder::push_known`] with a reader that knows every whole event of even
        /// length without a line break (as a template would: some events, not all).
        PushKnown,
    }

    /// A reader's answer for [`Via::PushKnown`]: the event it knew.
    fn knows_even(data: &[u8]) -> Option<Ev> {
        let one_line = memchr::memchr2(b'\n', b'\r', data).is_none();
        (one_line && data.len().is_multiple_of(2)).then(|| Ev {
            event: None,
            data: data.to_vec(),
        })
    }

    /// [`decode_split`], each piece through the decoder's entry `via`.
    fn decode_pieces(stream: &[u8], cuts: &[usize], early: bool, via: Via) -> Vec<Ev> {
        let mut dec = SseDecoder::new();
        dec.set_early_completion(early);
        let mut out = Vec::new();
        let mut from = 0;
        for &cut in cuts.iter().chain(std::iter::once(&stream.len())) {
            let cut = cut.clamp(from, stream.len());
            let piece = &stream[from..cut];
            match via {
                Via::Push => dec.push(piece).expect("under the cap"),
                Via::PushEvent => {
                    if let Some(ev) = dec.push_event(piece).expect("under the cap") {
                        out.push(own(ev));
                    }
                }
                Via::PushKnown => match dec.push_known(piece, knows_even).expect("under the cap") {
                    Pushed::Known(ev) => out.push(ev),
                    Pushed::Event(ev) => out.push(own(ev)),
                    Pushed::Bytes => {}
                },
            }
            drain(&mut dec, &mut out);
            from = cut;
        }
        finish(&mut dec, &mut out);
        out
    }

    fn decode(stream: &[u8], early: bool) -> Vec<Ev> {
        decode_split(stream, &[], early)
    }

    /// [`decode_split`] through [`SseDecoder::push_event`], checked to give what
    /// [`SseDecoder::push_known`] gives.
    fn decode_split_events(stream: &[u8], cuts: &[usize], early: bool) -> Vec<Ev> {
        let events = decode_pieces(stream, cuts, early, Via::PushEvent);
        let known = decode_pieces(stream, cuts, early, Via::PushKnown);
        assert_eq!(known, events, "push_known vs push_event, cuts {cuts:?}");
        events
    }

    /// The cut positions after every blank line of `stream` (`\n\n`): where a server
    /// sending one event per HTTP chunk would cut it.
    fn event_ends(stream: &[u8]) -> Vec<usize> {
        memchr::memmem::find_iter(stream, b"\n\n")
            .map(|at| at + 2)
            .collect()
    }

    #[test]
    fn a_whole_data_event_is_returned_at_once_and_anything_else_is_pushed() {
        let mut dec = SseDecoder::new();
        let ev = dec.push_event(b"data: {\"a\":1}\n\n").unwrap().unwrap();
        assert_eq!(own(ev), Ev::data("{\"a\":1}"));
        assert_eq!(dec.pending_len(), 0);
        assert!(dec.next_event().is_none());
        let ev = dec.push_event(b"data: [DONE]\n\n").unwrap().unwrap();
        assert!(ev.is_done());
        for other in [
            &b"data: {}\r\n\r\n"[..],
            b"data:{}\n\n",
            b"event: x\ndata: {}\n\n",
            b"data: a\ndata: b\n\n",
            b"data: {}\n\ndata: {}\n\n",
            b"data: {}\n",
        ] {
            let mut dec = SseDecoder::new();
            let mut via_push = SseDecoder::new();
            assert!(dec.push_event(other).unwrap().is_none(), "{other:?}");
            via_push.push(other).unwrap();
            let (mut a, mut b) = (Vec::new(), Vec::new());
            drain(&mut dec, &mut a);
            drain(&mut via_push, &mut b);
            assert_eq!(a, b, "{other:?}");
        }
        // A whole event its reader knows is consumed without being returned.
        let mut dec = SseDecoder::new();
        let mut asked = Vec::new();
        let mut ask = |data: &[u8]| {
            asked.push(data.to_vec());
            (data == b"{\"a\":1}").then_some(7)
        };
        assert!(matches!(
            dec.push_known(b"data: {\"a\":1}\n\n", &mut ask).unwrap(),
            Pushed::Known(7)
        ));
        assert_eq!(dec.pending_len(), 0);
        assert!(dec.next_event().is_none());
        // One it does not know comes back as an event; a line break inside, or anything
        // but one whole event, is never offered: pushed.
        assert!(matches!(
            dec.push_known(b"data: [DONE]\n\n", &mut ask).unwrap(),
            Pushed::Event(ev) if ev.is_done()
        ));
        assert!(matches!(
            dec.push_known(b"data: {\"a\":\r1}\n\n", &mut ask).unwrap(),
            Pushed::Bytes
        ));
        assert!(matches!(
            dec.push_known(b"event: x\ndata: {}\n\n", &mut ask).unwrap(),
            Pushed::Bytes
        ));
        assert_eq!(asked, [&b"{\"a\":1}"[..], b"[DONE]", b"{\"a\":\r1}"]);
        let mut out = Vec::new();
        drain(&mut dec, &mut out);
        assert_eq!(out, [Ev::data("{\"a\":"), Ev::named("x", "{}")]);

        // Mid-event (a partial line pending), a whole-looking piece is the rest of that event.
        let mut dec = SseDecoder::new();
        assert!(dec.push_event(b"data: {\"a\":").unwrap().is_none());
        assert!(dec.push_event(b"data: 1}\n\n").unwrap().is_none());
        let mut out = Vec::new();
        drain(&mut dec, &mut out);
        assert_eq!(out, [Ev::data("{\"a\":data: 1}")]);
        // Over the cap it fails as `push` does.
        let mut dec = SseDecoder::new();
        dec.set_max_pending(8);
        assert!(dec.push_event(b"data: {\"a\":1}\n\n").is_err());
    }

    #[test]
    fn lf_events() {
        let s = b"data: {\"a\":1}\n\ndata: [DONE]\n\n";
        assert_eq!(
            decode(s, false),
            vec![Ev::data("{\"a\":1}"), Ev::data("[DONE]")]
        );
    }

    #[test]
    fn crlf_cr_and_mixed_line_ends() {
        let expect = vec![Ev::data("one"), Ev::data("two"), Ev::data("three")];
        for s in [
            &b"data: one\r\n\r\ndata: two\r\n\r\ndata: three\r\n\r\n"[..],
            b"data: one\r\rdata: two\r\rdata: three\r\r",
            b"data: one\n\r\ndata: two\r\n\ndata: three\r\r\n",
        ] {
            assert_eq!(decode(s, false), expect, "{:?}", String::from_utf8_lossy(s));
            assert_eq!(decode(s, true), expect, "{:?}", String::from_utf8_lossy(s));
        }
    }

    #[test]
    fn comments_and_unknown_fields_are_skipped() {
        let s = b": ping\n\n:another\nid: 7\nretry: 10\ndata: x\nfoo: bar\n\nid: 8\n\n";
        assert_eq!(decode(s, false), vec![Ev::data("x")]);
    }

    #[test]
    fn event_without_data_is_not_emitted_but_empty_data_is() {
        assert_eq!(decode(b"event: ping\n\n", false), vec![]);
        assert_eq!(decode(b"data:\n\n", false), vec![Ev::data("")]);
        assert_eq!(decode(b"data\n\n", false), vec![Ev::data("")]);
    }

    #[test]
    fn exactly_one_space_is_stripped() {
        assert_eq!(
            decode(b"data:x\n\ndata: x\n\ndata:  x\n\n", false),
            vec![Ev::data("x"), Ev::data("x"), Ev::data(" x")]
        );
        assert_eq!(decode(b"data: \n\n", false), vec![Ev::data("")]);
    }

    #[test]
    fn multi_line_data_is_joined_in_place() {
        let s = b"data: {\"a\":\ndata:1,\ndata: \"b\":2}\n\n";
        assert_eq!(decode(s, false), vec![Ev::data("{\"a\":\n1,\n\"b\":2}")]);
    }

    #[test]
    fn event_names_survive_joined_data() {
        // The `event:` line sits between data lines that are joined over it.
        let s = b"data: a\nevent: delta\ndata: bbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\n\ndata: c\n\n";
        assert_eq!(
            decode(s, false),
            vec![
                Ev::named("delta", "a\nbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"),
                Ev::data("c")
            ]
        );
    }

    #[test]
    fn is_done() {
        let mut dec = SseDecoder::new();
        dec.push(b"data: [DONE]\n\ndata: [DONE] \n\ndata: [DONE]x\n\n")
            .unwrap();
        assert!(dec.next_event().unwrap().is_done());
        assert!(dec.next_event().unwrap().is_done());
        assert!(!dec.next_event().unwrap().is_done());
    }

    #[test]
    fn bom_is_skipped_even_when_split() {
        let s = b"\xEF\xBB\xBFdata: x\n\n";
        assert_eq!(decode(s, false), vec![Ev::data("x")]);
        for cut in 0..s.len() {
            assert_eq!(decode_split(s, &[cut], true), vec![Ev::data("x")]);
        }
        // Only at the very start.
        assert_eq!(
            decode(b"data: a\n\n\xEF\xBB\xBFdata: b\n\n", false),
            vec![Ev::data("a")]
        );
    }

    #[test]
    fn finish_emits_trailing_event_once() {
        assert_eq!(decode(b"data: tail", false), vec![Ev::data("tail")]);
        assert_eq!(decode(b"data: a\ndata: b\n", false), vec![Ev::data("a\nb")]);
        // Already delivered early: nothing more at the end.
        assert_eq!(decode(b"data: {}", true), vec![Ev::data("{}")]);
        assert_eq!(decode(b"data: {}\n", true), vec![Ev::data("{}")]);
        assert_eq!(decode(b"", true), vec![]);
        assert_eq!(decode(b": only a comment", true), vec![]);
    }

    /// Push pieces one at a time and record after which piece each event appeared.
    fn arrival(pieces: &[&[u8]], early: bool) -> Vec<(usize, Ev)> {
        let mut dec = SseDecoder::new();
        dec.set_early_completion(early);
        let mut out = Vec::new();
        for (i, piece) in pieces.iter().enumerate() {
            dec.push(piece).unwrap();
            let mut evs = Vec::new();
            drain(&mut dec, &mut evs);
            out.extend(evs.into_iter().map(|ev| (i, ev)));
        }
        let mut evs = Vec::new();
        finish(&mut dec, &mut evs);
        out.extend(evs.into_iter().map(|ev| (pieces.len(), ev)));
        out
    }

    #[test]
    fn early_completion_emits_before_the_blank_line_and_swallows_it() {
        let pieces: [&[u8]; 4] = [b"data: {\"a\":\"}\"}", b"\n", b"\n", b"data: [DONE]\n"];
        let early = arrival(&pieces, true);
        assert_eq!(
            early,
            vec![(0, Ev::data("{\"a\":\"}\"}")), (3, Ev::data("[DONE]"))]
        );
        let late = arrival(&pieces, false);
        assert_eq!(
            late,
            vec![(2, Ev::data("{\"a\":\"}\"}")), (4, Ev::data("[DONE]"))]
        );
    }

    #[test]
    fn early_completion_with_crlf_and_first_terminator_present() {
        let pieces: [&[u8]; 3] = [b"data: {\"x\":[1,{}]}\r", b"\n\r", b"\ndata: {}\r\n\r\n"];
        assert_eq!(
            arrival(&pieces, true),
            vec![(0, Ev::data("{\"x\":[1,{}]}")), (2, Ev::data("{}"))]
        );
    }

    #[test]
    fn early_completion_waits_for_incomplete_json() {
        for partial in [
            &b"data: {\"a\":\"}"[..], // brace inside a string
            b"data: {\"a\":\"\\\"}",  // escaped quote keeps the string open
            b"data: {\"a\":[1,2]",    // unbalanced
            b"data: [DONE",           // sentinel not finished
            b"data: 12",              // scalars never complete early
            b"data: {}}",             // closes before the end
            b"dat",                   // field name not complete
        ] {
            let mut dec = SseDecoder::new();
            dec.push(partial).unwrap();
            assert!(
                dec.next_event().is_none(),
                "{:?}",
                String::from_utf8_lossy(partial)
            );
        }
        let mut dec = SseDecoder::new();
        dec.push(b"data: {\"a\":\"\\\\\"}").unwrap();
        assert_eq!(own(dec.next_event().unwrap()), Ev::data("{\"a\":\"\\\\\"}"));
    }

    #[test]
    fn early_completion_needs_a_lone_data_line() {
        // Python only completes early when the pending bytes start with the data line.
        for pending in [
            &b"event: x\ndata: {}\n"[..],
            b": c\ndata: {}",
            b"data: {}\nid: 1\n",
            b"data: {}\ndata: {}\n",
        ] {
            let mut dec = SseDecoder::new();
            dec.push(pending).unwrap();
            assert!(
                dec.next_event().is_none(),
                "{:?}",
                String::from_utf8_lossy(pending)
            );
        }
    }

    #[test]
    fn lines_after_an_early_event_form_their_own_event() {
        let pieces: [&[u8]; 2] = [b"data: {}\n", b"data: {\"b\":1}\n\n"];
        assert_eq!(
            arrival(&pieces, true),
            vec![(0, Ev::data("{}")), (1, Ev::data("{\"b\":1}"))]
        );
        assert_eq!(
            arrival(&pieces, false),
            vec![(1, Ev::data("{}\n{\"b\":1}"))]
        );
    }

    #[test]
    fn the_rest_of_an_early_line_is_ignored() {
        // Bytes after an early-delivered payload still belong to its line (no line end came
        // between), so they are not a new field.
        let pieces: [&[u8]; 3] = [b"data: {}", b"data: x\n", b"\ndata: {\"b\":1}\n\n"];
        assert_eq!(
            arrival(&pieces, true),
            vec![(0, Ev::data("{}")), (2, Ev::data("{\"b\":1}"))]
        );
        assert_eq!(
            arrival(&pieces, false),
            vec![(2, Ev::data("{}data: x")), (2, Ev::data("{\"b\":1}"))]
        );
    }

    #[test]
    fn early_payload_can_be_mutated_in_place() {
        let mut dec = SseDecoder::new();
        dec.push(b"data: {\"a\":1}").unwrap();
        let ev = dec.next_event().unwrap();
        ev.data.fill(b'#');
        dec.push(b"\n\ndata: {\"b\":2}\n\n").unwrap();
        assert_eq!(own(dec.next_event().unwrap()), Ev::data("{\"b\":2}"));
        assert!(dec.next_event().is_none());
    }

    #[test]
    fn cap_on_pending_bytes() {
        let mut dec = SseDecoder::new();
        dec.set_max_pending(16);
        dec.push(b"data: 0123456").unwrap();
        let err = dec.push(b"789abcdef").unwrap_err();
        assert_eq!(
            err,
            SseError::TooLarge {
                pending: 22,
                limit: 16
            }
        );
        assert_eq!(err.kind(), "sse_too_large");
        // Consumed events do not count against the cap.
        let mut dec = SseDecoder::new();
        dec.set_max_pending(16);
        for _ in 0..10 {
            dec.push(b"data: 0123\n\n").unwrap();
            assert_eq!(own(dec.next_event().unwrap()), Ev::data("0123"));
        }
        assert_eq!(dec.pending_len(), 0);
    }

    #[test]
    fn reset_reuses_capacity_and_keeps_settings() {
        let mut dec = SseDecoder::with_capacity(64);
        dec.set_early_completion(false);
        dec.push(b"data: {}\n\ndata: partial").unwrap();
        assert!(dec.next_event().is_some());
        let cap = dec.buf.capacity();
        dec.reset();
        assert_eq!(dec.buf.capacity(), cap);
        assert_eq!(dec.pending_len(), 0);
        dec.push(b"data: {}").unwrap();
        assert!(dec.next_event().is_none(), "early completion stays off");
        assert_eq!(own(dec.finish().unwrap()), Ev::data("{}"));
    }

    #[test]
    fn split_at_every_position_gives_the_same_events() {
        let stream = realistic_stream();
        for early in [false, true] {
            let whole = decode(&stream, early);
            assert_eq!(whole.len(), 7);
            for cut in 0..=stream.len() {
                assert_eq!(decode_split(&stream, &[cut], early), whole, "cut {cut}");
                let events = decode_split_events(&stream, &[cut], early);
                assert_eq!(events, whole, "cut {cut}, push_event");
            }
            assert_eq!(
                decode_split_events(&stream, &event_ends(&stream), early),
                whole
            );
            let every_byte: Vec<usize> = (0..stream.len()).collect();
            assert_eq!(decode_split(&stream, &every_byte, early), whole);
        }
    }

    /// A vLLM-like chat stream with CRLF, a comment ping, UTF-8 text and a usage chunk.
    fn realistic_stream() -> Vec<u8> {
        let mut s = Vec::new();
        s.extend_from_slice(b": ping\r\n\r\n");
        s.extend_from_slice(
            b"data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
        );
        for text in ["caf\u{e9}", " \u{6f22}\u{5b57}", " \u{1f600}", " \\\"}"] {
            s.extend_from_slice(b"data: {\"choices\":[{\"delta\":{\"content\":\"");
            s.extend_from_slice(text.as_bytes());
            s.extend_from_slice(b"\"}}]}\r\n\r\n");
        }
        s.extend_from_slice(b"data: {\"choices\":[],\"usage\":{\"completion_tokens\":4}}\n\n");
        s.extend_from_slice(b"data: [DONE]\n\n");
        s
    }

    // ---- property tests -------------------------------------------------------------------

    /// How one generated event looks on the wire.
    #[derive(Debug, Clone)]
    enum Body {
        /// One `data:` line holding a JSON object (eligible for early completion).
        Json(String),
        /// Several `data:` lines of text that never start with `{`/`[` (never early).
        Text(Vec<String>),
        Done,
    }

    #[derive(Debug, Clone)]
    struct GenEvent {
        comment: bool,
        name: Option<String>,
        id: bool,
        body: Body,
        /// Line-end style per line: 0 LF, 1 CRLF, 2 CR.
        ends: Vec<u8>,
    }

    fn text_piece() -> impl Strategy<Value = String> {
        proptest::string::string_regex("[a-z \u{e9}\u{6f22}\u{1f600}\"\\\\}]{0,12}")
            .expect("valid regex")
            .prop_map(|s| format!("t{s}"))
    }

    fn gen_event() -> impl Strategy<Value = GenEvent> {
        let body = prop_oneof![
            text_piece().prop_map(|t| Body::Json(format!(
                "{{\"choices\":[{{\"text\":{}}}]}}",
                serde_json::to_string(&t).expect("string serializes")
            ))),
            proptest::collection::vec(text_piece(), 1..4).prop_map(Body::Text),
            Just(Body::Done),
        ];
        (
            any::<bool>(),
            proptest::option::of("[a-z]{1,6}"),
            any::<bool>(),
            body,
            proptest::collection::vec(0u8..3, 8),
        )
            .prop_map(|(comment, name, id, body, ends)| GenEvent {
                comment,
                name,
                id,
                body,
                ends,
            })
    }

    /// Render events; returns the bytes and the events a correct decoder must produce.
    fn render(events: &[GenEvent]) -> (Vec<u8>, Vec<Ev>) {
        let mut out = Vec::new();
        let mut expect = Vec::new();
        let mut prev_cr = false;
        for ev in events {
            let mut lines: Vec<String> = Vec::new();
            if ev.comment {
                lines.push(": keep-alive".into());
            }
            if let Some(name) = &ev.name {
                lines.push(format!("event: {name}"));
            }
            if ev.id {
                lines.push("id: 42".into());
            }
            let data = match &ev.body {
                Body::Json(json) => {
                    lines.push(format!("data: {json}"));
                    json.clone()
                }
                Body::Text(parts) => {
                    lines.extend(parts.iter().map(|p| format!("data:{p}")));
                    parts.join("\n")
                }
                Body::Done => {
                    lines.push("data: [DONE]".into());
                    "[DONE]".into()
                }
            };
            lines.push(String::new());
            for (i, line) in lines.iter().enumerate() {
                out.extend_from_slice(line.as_bytes());
                let mut end = ev.ends[i % ev.ends.len()];
                if prev_cr && line.is_empty() && end == 0 {
                    end = 1; // CR then LF would be one CRLF line end, not a blank line
                }
                out.extend_from_slice(match end {
                    0 => b"\n".as_slice(),
                    1 => b"\r\n",
                    _ => b"\r",
                });
                prev_cr = end == 2;
            }
            expect.push(Ev {
                event: ev.name.as_ref().map(|n| n.as_bytes().to_vec()),
                data: data.into_bytes(),
            });
        }
        (out, expect)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn any_split_gives_the_model_events(
            events in proptest::collection::vec(gen_event(), 0..8),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..12),
            early in any::<bool>(),
        ) {
            let (stream, expect) = render(&events);
            let mut cuts: Vec<usize> = cuts.iter().map(|c| c.index(stream.len() + 1)).collect();
            cuts.sort_unstable();
            prop_assert_eq!(decode(&stream, early), expect.clone());
            prop_assert_eq!(decode_split(&stream, &cuts, early), expect.clone());
            prop_assert_eq!(decode_split_events(&stream, &cuts, early), expect.clone());
            // Cut where each event ends, as one event per HTTP chunk arrives.
            let ends = event_ends(&stream);
            prop_assert_eq!(decode_split_events(&stream, &ends, early), expect);
        }

        #[test]
        fn arbitrary_bytes_never_panic_and_split_does_not_matter(
            stream in proptest::collection::vec(
                prop_oneof![
                    Just(b'\n'), Just(b'\r'), Just(b':'), Just(b' '), Just(b'{'), Just(b'}'),
                    Just(b'"'), Just(b'\\'), Just(b'd'), Just(b'a'), Just(b't'), any::<u8>()
                ],
                0..200,
            ),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..12),
        ) {
            let mut cuts: Vec<usize> = cuts.iter().map(|c| c.index(stream.len() + 1)).collect();
            cuts.sort_unstable();
            // Without early completion framing is split-invariant for any bytes at all.
            prop_assert_eq!(decode_split(&stream, &cuts, false), decode(&stream, false));
            // With it, arbitrary input must at least never panic.
            let _ = decode_split(&stream, &cuts, true);
            // The whole-event shortcut gives what pushing gives, at any cuts, either way.
            for early in [false, true] {
                prop_assert_eq!(
                    decode_split_events(&stream, &cuts, early),
                    decode_split(&stream, &cuts, early)
                );
                let ends = event_ends(&stream);
                prop_assert_eq!(
                    decode_split_events(&stream, &ends, early),
                    decode_split(&stream, &ends, early)
                );
            }
        }
    }
}
