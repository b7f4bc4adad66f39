//! Response head and body decoders (pure, push-style; no I/O).
//!
//! The connection code owns the socket and the read buffer; this module only looks at bytes.
//! [`parse_head`] finds the end of the head with memchr before handing it to httparse (so a
//! growing buffer is not re-parsed header by header), skips `1xx` interim responses and
//! resolves how the body is delimited ([`BodyKind`]) and whether the connection can be
//! reused. [`BodyDecoder`] (over [`LengthDecoder`], [`ChunkedDecoder`] and until-close) is a
//! small state machine fed arbitrary slices: each step reports the bytes it consumed and
//! yields a payload sub-slice of its input, never copying body bytes. Bad input is an
//! [`HttpError`] with a stable [`kind`](HttpError::kind), never a panic; every size is capped.

use std::borrow::Cow;

/// Largest accepted response head, interim `1xx` heads included.
pub const MAX_HEAD_LEN: usize = 64 * 1024;
/// Header fields parsed per head (a stack array of this many httparse headers).
pub const MAX_HEADERS: usize = 64;
/// Largest accepted chunk-size line (size, extensions, CRLF).
pub const MAX_CHUNK_LINE: usize = 4 * 1024;
/// Largest accepted trailer section of a chunked body.
pub const MAX_TRAILERS_LEN: usize = 64 * 1024;

/// Why a response could not be decoded. Small and `Copy`: it is counted, not carried around.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    /// No blank line ends the head within the limit.
    #[error(
        "response head exceeds {limit} bytes without a blank line; \
         the peer is not an HTTP/1.1 server or sends oversized headers"
    )]
    HeadTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// More header fields than the parser's array holds.
    #[error("response head has more than {limit} header fields; the peer sends too many headers")]
    TooManyHeaders {
        /// The limit in fields.
        limit: usize,
    },
    /// httparse rejected the status line or a header.
    #[error("malformed response head ({0}); the peer is not speaking HTTP/1.1")]
    MalformedHead(httparse::Error),
    /// `Content-Length` is not a decimal number, or several values disagree.
    #[error("invalid or conflicting Content-Length header in the response; the server is broken")]
    InvalidContentLength,
    /// A transfer coding other than `chunked`, or `chunked` not last.
    #[error(
        "unsupported Transfer-Encoding in the response (only chunked is supported); \
         disable compression on the server or a proxy in between"
    )]
    UnsupportedTransferEncoding,
    /// A `Content-Encoding` other than `identity`. The client never sends `Accept-Encoding`
    /// and decodes no compression, so a compressed body could only be misread (as malformed
    /// events, or as a success with garbage in it).
    #[error(
        "compressed response (Content-Encoding other than identity), which vllm-bench does not \
         decode; it asks for no compression, so disable it on the server or a proxy in between"
    )]
    UnsupportedContentEncoding,
    /// `101 Switching Protocols`: the connection is no longer HTTP/1.1.
    #[error("unexpected 101 Switching Protocols response; the client never asks for an upgrade")]
    UnexpectedUpgrade,
    /// A chunk-size line that is not hex digits (optionally with extensions) and CRLF.
    #[error(
        "invalid chunk size line in a chunked body; the server sent malformed chunked framing"
    )]
    InvalidChunkSize,
    /// A chunk-size line longer than the limit.
    #[error("chunk size line longer than {limit} bytes in a chunked body; the server is broken")]
    ChunkLineTooLong {
        /// The limit in bytes.
        limit: usize,
    },
    /// Chunk data or a trailer line not followed by CRLF.
    #[error("chunk data or trailer not followed by CRLF in a chunked body; the server is broken")]
    MissingChunkCrlf,
    /// Trailer section larger than the limit.
    #[error("trailers of a chunked body exceed {limit} bytes; the server is broken")]
    TrailersTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// The connection closed before the body was complete.
    #[error("connection closed before the response body was complete")]
    IncompleteBody,
}

impl HttpError {
    /// A stable short name for counting failures by cause.
    pub fn kind(&self) -> &'static str {
        match self {
            HttpError::HeadTooLarge { .. } => "head_too_large",
            HttpError::TooManyHeaders { .. } => "too_many_headers",
            HttpError::MalformedHead(_) => "malformed_head",
            HttpError::InvalidContentLength => "invalid_content_length",
            HttpError::UnsupportedTransferEncoding => "unsupported_transfer_encoding",
            HttpError::UnsupportedContentEncoding => "unsupported_content_encoding",
            HttpError::UnexpectedUpgrade => "unexpected_upgrade",
            HttpError::InvalidChunkSize => "invalid_chunk_size",
            HttpError::ChunkLineTooLong { .. } => "chunk_line_too_long",
            HttpError::MissingChunkCrlf => "missing_chunk_crlf",
            HttpError::TrailersTooLarge { .. } => "trailers_too_large",
            HttpError::IncompleteBody => "incomplete_body",
        }
    }
}

/// How the body after a head is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    /// Exactly this many bytes (never 0: that is [`BodyKind::Empty`]).
    ContentLength(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Everything until the server closes the connection.
    UntilClose,
    /// No body: `204`, `304` or `Content-Length: 0`.
    Empty,
}

/// A parsed final (non-`1xx`) response head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHead {
    /// Status code, e.g. 200.
    pub status: u16,
    /// Reason phrase as sent, or the canonical phrase when the server sent none (Python
    /// reports a failed request by this text, e.g. `Internal Server Error`). Borrowed (no
    /// allocation) whenever it is the canonical phrase.
    pub reason: Cow<'static, str>,
    /// Bytes of the buffer taken by the head, interim `1xx` heads before it included; the
    /// body starts right after.
    pub head_len: usize,
    /// How the body is delimited.
    pub body: BodyKind,
    /// The connection may carry another request after this body.
    pub keep_alive: bool,
    /// `Content-Type: text/event-stream`.
    pub is_event_stream: bool,
}

impl ResponseHead {
    /// A `2xx` status.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// Parse the response head at the start of `buf`.
///
/// `Ok(None)` means the head is not complete yet: read more and call again with the whole
/// buffer. Interim `1xx` heads are skipped (their bytes are part of
/// [`head_len`](ResponseHead::head_len)); empty lines before a status line are ignored.
pub fn parse_head(buf: &[u8]) -> Result<Option<ResponseHead>, HttpError> {
    let mut offset = 0;
    // Each pass consumes at least one byte or returns, so this ends within `buf.len()` passes.
    loop {
        offset += buf[offset..]
            .iter()
            .take_while(|&&b| b == b'\r' || b == b'\n')
            .count();
        // Search no further than the cap: a body after the head is not scanned.
        let window = buf
            .get(offset..buf.len().min(MAX_HEAD_LEN + 1))
            .unwrap_or(&[]);
        let Some(end) = find_head_end(window) else {
            return if buf.len() > MAX_HEAD_LEN {
                Err(HttpError::HeadTooLarge {
                    limit: MAX_HEAD_LEN,
                })
            } else {
                Ok(None)
            };
        };
        let head_len = offset + end;
        if head_len > MAX_HEAD_LEN {
            return Err(HttpError::HeadTooLarge {
                limit: MAX_HEAD_LEN,
            });
        }
        match parse_one_head(&window[..end])? {
            ParsedHead::Interim => offset = head_len,
            ParsedHead::Final(head) => return Ok(Some(ResponseHead { head_len, ..head })),
        }
    }
}

/// Length of the head (through its blank line), accepting CRLF and bare LF line ends.
fn find_head_end(buf: &[u8]) -> Option<usize> {
    memchr::memchr_iter(b'\n', buf).find_map(|i| match &buf[i + 1..] {
        [b'\n', ..] => Some(i + 2),
        [b'\r', b'\n', ..] => Some(i + 3),
        _ => None,
    })
}

enum ParsedHead {
    Interim,
    Final(ResponseHead),
}

/// Parse one complete head (`head` ends with its blank line).
fn parse_one_head(head: &[u8]) -> Result<ParsedHead, HttpError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    match response.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        // The blank line was found, so httparse cannot need more: the head is malformed.
        Ok(httparse::Status::Partial) => {
            return Err(HttpError::MalformedHead(httparse::Error::NewLine))
        }
        Err(httparse::Error::TooManyHeaders) => {
            return Err(HttpError::TooManyHeaders { limit: MAX_HEADERS })
        }
        Err(e) => return Err(HttpError::MalformedHead(e)),
    }
    let (Some(status), Some(minor)) = (response.code, response.version) else {
        return Err(HttpError::MalformedHead(httparse::Error::Status));
    };
    match status {
        101 => return Err(HttpError::UnexpectedUpgrade),
        100..=199 => return Ok(ParsedHead::Interim),
        _ => {}
    }
    let fields = HeaderFields::scan(response.headers)?;
    let body = match status {
        204 | 304 => BodyKind::Empty,
        _ if fields.chunked => BodyKind::Chunked,
        _ => match fields.content_length {
            Some(0) => BodyKind::Empty,
            Some(n) => BodyKind::ContentLength(n),
            None => BodyKind::UntilClose,
        },
    };
    let keep_alive = minor == 1 && !fields.close && body != BodyKind::UntilClose;
    Ok(ParsedHead::Final(ResponseHead {
        status,
        reason: reason_phrase(status, response.reason.unwrap_or("")),
        head_len: head.len(),
        body,
        keep_alive,
        is_event_stream: fields.event_stream,
    }))
}

/// What the client needs from the header fields.
#[derive(Default)]
struct HeaderFields {
    content_length: Option<u64>,
    chunked: bool,
    close: bool,
    event_stream: bool,
}

impl HeaderFields {
    fn scan(headers: &[httparse::Header<'_>]) -> Result<Self, HttpError> {
        let mut fields = HeaderFields::default();
        // Codings across all Transfer-Encoding fields, in order: `chunked` must be last.
        let mut chunked_seen = false;
        let mut coding_after_chunked = false;
        for header in headers {
            let name = header.name.as_bytes();
            if name.eq_ignore_ascii_case(b"content-length") {
                for value in list_items(header.value) {
                    let n = parse_decimal(value).ok_or(HttpError::InvalidContentLength)?;
                    if fields.content_length.is_some_and(|seen| seen != n) {
                        return Err(HttpError::InvalidContentLength);
                    }
                    fields.content_length = Some(n);
                }
            } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
                for coding in list_items(header.value) {
                    if coding.eq_ignore_ascii_case(b"chunked") {
                        if chunked_seen {
                            return Err(HttpError::UnsupportedTransferEncoding);
                        }
                        chunked_seen = true;
                    } else if !coding.eq_ignore_ascii_case(b"identity") {
                        return Err(HttpError::UnsupportedTransferEncoding);
                    } else if chunked_seen {
                        coding_after_chunked = true;
                    }
                }
            } else if name.eq_ignore_ascii_case(b"content-encoding") {
                if list_items(header.value).any(|c| !c.eq_ignore_ascii_case(b"identity")) {
                    return Err(HttpError::UnsupportedContentEncoding);
                }
            } else if name.eq_ignore_ascii_case(b"connection") {
                fields.close |= list_items(header.value).any(|t| t.eq_ignore_ascii_case(b"close"));
            } else if name.eq_ignore_ascii_case(b"content-type") {
                let media_type = header.value.split(|&b| b == b';').next().unwrap_or(b"");
                fields.event_stream = media_type
                    .trim_ascii()
                    .eq_ignore_ascii_case(b"text/event-stream");
            }
        }
        if coding_after_chunked {
            return Err(HttpError::UnsupportedTransferEncoding);
        }
        fields.chunked = chunked_seen;
        Ok(fields)
    }
}

/// Non-empty, trimmed items of a comma-separated header value (shared with the mock's
/// request parser).
pub(crate) fn list_items(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(<[u8]>::trim_ascii)
        .filter(|item| !item.is_empty())
}

/// Strict decimal (digits only, no sign), without overflow (shared with the mock's request
/// parser).
pub(crate) fn parse_decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &b| {
        let digit = b.checked_sub(b'0').filter(|d| *d <= 9)?;
        n.checked_mul(10)?.checked_add(u64::from(digit))
    })
}

/// The phrase sent, or the canonical one when the server sent none (or non-ASCII bytes,
/// which httparse reports as empty).
fn reason_phrase(status: u16, sent: &str) -> Cow<'static, str> {
    let canonical = canonical_reason(status);
    match (sent, canonical) {
        ("", Some(phrase)) => Cow::Borrowed(phrase),
        ("", None) => Cow::Borrowed(""),
        (sent, Some(phrase)) if sent == phrase => Cow::Borrowed(phrase),
        (sent, _) => Cow::Owned(sent.to_owned()),
    }
}

/// Canonical reason phrases, as Python's `http.HTTPStatus` spells them.
pub fn canonical_reason(status: u16) -> Option<&'static str> {
    Some(match status {
        100 => "Continue",
        101 => "Switching Protocols",
        102 => "Processing",
        103 => "Early Hints",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        203 => "Non-Authoritative Information",
        204 => "No Content",
        205 => "Reset Content",
        206 => "Partial Content",
        207 => "Multi-Status",
        300 => "Multiple Choices",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        402 => "Payment Required",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        407 => "Proxy Authentication Required",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        411 => "Length Required",
        412 => "Precondition Failed",
        413 => "Request Entity Too Large",
        414 => "Request-URI Too Long",
        415 => "Unsupported Media Type",
        416 => "Requested Range Not Satisfiable",
        417 => "Expectation Failed",
        421 => "Misdirected Request",
        422 => "Unprocessable Entity",
        423 => "Locked",
        424 => "Failed Dependency",
        425 => "Too Early",
        426 => "Upgrade Required",
        428 => "Precondition Required",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        451 => "Unavailable For Legal Reasons",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        507 => "Insufficient Storage",
        508 => "Loop Detected",
        511 => "Network Authentication Required",
        _ => return None,
    })
}

/// One step of body decoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decoded<'a> {
    /// Input bytes used by this step (framing and payload); drop them.
    pub consumed: usize,
    /// Payload bytes: a sub-slice of the input, possibly empty.
    pub data: &'a [u8],
    /// The body is complete; bytes after `consumed` belong to the next response.
    pub done: bool,
}

impl<'a> Decoded<'a> {
    fn more(consumed: usize) -> Self {
        Decoded {
            consumed,
            data: &[],
            done: false,
        }
    }

    fn done(consumed: usize) -> Self {
        Decoded {
            consumed,
            data: &[],
            done: true,
        }
    }
}

/// A `Content-Length` body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LengthDecoder {
    remaining: u64,
}

impl LengthDecoder {
    /// A body of exactly `len` bytes.
    pub fn new(len: u64) -> Self {
        LengthDecoder { remaining: len }
    }

    /// Bytes still expected.
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// Take the payload bytes of `input` that belong to the body.
    pub fn decode<'a>(&mut self, input: &'a [u8]) -> Decoded<'a> {
        let n = usize::try_from(self.remaining).map_or(input.len(), |r| r.min(input.len()));
        self.remaining -= n as u64;
        Decoded {
            consumed: n,
            data: &input[..n],
            done: self.remaining == 0,
        }
    }
}

/// Where a chunked body stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChunkState {
    /// Reading a chunk-size line.
    Size,
    /// Inside chunk data.
    Data {
        remaining: u64,
    },
    /// After chunk data: expecting `\r`, then `\n`.
    DataCr,
    DataLf,
    /// After the last chunk: trailer lines until a blank line.
    Trailers {
        line_len: usize,
        prev_cr: bool,
    },
    Done,
}

impl ChunkState {
    /// The state after a chunk-size line announcing `size` bytes (0: the last chunk).
    fn after_size(size: u64) -> ChunkState {
        match size {
            0 => ChunkState::Trailers {
                line_len: 0,
                prev_cr: false,
            },
            remaining => ChunkState::Data { remaining },
        }
    }
}

/// A `Transfer-Encoding: chunked` body: a state machine fed arbitrary slices.
///
/// Chunk-size lines go through `httparse::parse_chunk_size` (extensions allowed); a line split
/// across reads is kept in a small reused buffer so the caller can always drop what a step
/// reports as consumed.
#[derive(Debug, Clone)]
pub struct ChunkedDecoder {
    state: ChunkState,
    /// Partial chunk-size line carried over from the previous input.
    line: Vec<u8>,
    trailers_len: usize,
}

impl Default for ChunkedDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl ChunkedDecoder {
    /// A decoder at the start of a chunked body.
    pub fn new() -> Self {
        ChunkedDecoder {
            state: ChunkState::Size,
            line: Vec::new(),
            trailers_len: 0,
        }
    }

    /// Start over for the next body (keeps the line buffer's capacity).
    pub fn reset(&mut self) {
        self.state = ChunkState::Size;
        self.line.clear();
        self.trailers_len = 0;
    }

    /// The terminating chunk and trailers have been read.
    pub fn is_done(&self) -> bool {
        self.state == ChunkState::Done
    }

    /// Payload bytes the current chunk's size line announced that no step has yielded yet
    /// (0 between chunks). A reader with a body limit adds it to what it holds to refuse an
    /// oversized chunk as soon as its size line is in, before its data arrives.
    pub fn announced_remaining(&self) -> u64 {
        match self.state {
            ChunkState::Data { remaining } => remaining,
            _ => 0,
        }
    }

    /// Decode from `input` until one payload slice is available, the input is used up, or the
    /// body ends. Call again with `&input[consumed..]` while input remains and not `done`.
    pub fn decode<'a>(&mut self, input: &'a [u8]) -> Result<Decoded<'a>, HttpError> {
        let mut pos = 0;
        // Each pass consumes at least one byte or returns.
        loop {
            let rest = &input[pos..];
            match self.state {
                ChunkState::Done => return Ok(Decoded::done(pos)),
                _ if rest.is_empty() => return Ok(Decoded::more(pos)),
                // The line every server sends (`d9\r\n`) is read in place when no part of
                // it came before.
                ChunkState::Size if self.line.is_empty() => match plain_size_line(rest) {
                    Some((used, size)) => {
                        self.state = ChunkState::after_size(size);
                        pos += used;
                    }
                    None => pos += self.size_line(rest)?,
                },
                ChunkState::Size => pos += self.size_line(rest)?,
                ChunkState::Data { remaining } => {
                    let n = usize::try_from(remaining).map_or(rest.len(), |r| r.min(rest.len()));
                    let remaining = remaining - n as u64;
                    self.state = if remaining == 0 {
                        ChunkState::DataCr
                    } else {
                        ChunkState::Data { remaining }
                    };
                    return Ok(Decoded {
                        consumed: pos + n,
                        data: &rest[..n],
                        done: false,
                    });
                }
                ChunkState::DataCr if rest.starts_with(b"\r\n") => {
                    self.state = ChunkState::Size;
                    pos += 2;
                }
                ChunkState::DataCr => {
                    self.state = expect_byte(rest[0], b'\r', ChunkState::DataLf)?;
                    pos += 1;
                }
                ChunkState::DataLf => {
                    self.state = expect_byte(rest[0], b'\n', ChunkState::Size)?;
                    pos += 1;
                }
                ChunkState::Trailers { line_len, prev_cr } => {
                    pos += self.trailers(rest, line_len, prev_cr)?;
                }
            }
        }
    }

    /// Consume (part of) a chunk-size line; on its end, move to data or trailers.
    fn size_line(&mut self, rest: &[u8]) -> Result<usize, HttpError> {
        let too_long = HttpError::ChunkLineTooLong {
            limit: MAX_CHUNK_LINE,
        };
        let Some(lf) = memchr::memchr(b'\n', rest) else {
            if self.line.len() + rest.len() > MAX_CHUNK_LINE {
                return Err(too_long);
            }
            self.line.extend_from_slice(rest);
            return Ok(rest.len());
        };
        let used = lf + 1;
        if self.line.len() + used > MAX_CHUNK_LINE {
            return Err(too_long);
        }
        let size = if self.line.is_empty() {
            parse_size_line(&rest[..used])?
        } else {
            self.line.extend_from_slice(&rest[..used]);
            let size = parse_size_line(&self.line);
            self.line.clear();
            size?
        };
        self.state = ChunkState::after_size(size);
        Ok(used)
    }

    /// Consume trailer lines (ignored) up to and including the blank line.
    /// `line_len` and `prev_cr` describe the trailer line read so far.
    fn trailers(
        &mut self,
        rest: &[u8],
        mut line_len: usize,
        mut prev_cr: bool,
    ) -> Result<usize, HttpError> {
        for (i, &byte) in rest.iter().enumerate() {
            self.trailers_len += 1;
            if self.trailers_len > MAX_TRAILERS_LEN {
                return Err(HttpError::TrailersTooLarge {
                    limit: MAX_TRAILERS_LEN,
                });
            }
            if byte == b'\n' {
                if !prev_cr {
                    return Err(HttpError::MissingChunkCrlf);
                }
                if line_len == 1 {
                    self.state = ChunkState::Done;
                    return Ok(i + 1);
                }
                (line_len, prev_cr) = (0, false);
            } else {
                (line_len, prev_cr) = (line_len + 1, byte == b'\r');
            }
        }
        self.state = ChunkState::Trailers { line_len, prev_cr };
        Ok(rest.len())
    }
}

/// The next state if `byte` is the expected framing byte.
fn expect_byte(byte: u8, expected: u8, next: ChunkState) -> Result<ChunkState, HttpError> {
    if byte == expected {
        Ok(next)
    } else {
        Err(HttpError::MissingChunkCrlf)
    }
}

/// Hex digits at most in a [`plain_size_line`]: 15 cannot overflow a `u64`.
const PLAIN_SIZE_DIGITS: usize = 15;

/// `(bytes used, size)` when `rest` starts with a whole chunk-size line of hex digits alone
/// (`d9\r\n`: no extension, no whitespace, at most [`PLAIN_SIZE_DIGITS`] digits); `None`
/// for anything else, which the general reader ([`parse_size_line`]) then takes, errors
/// included. Why: it is the line of every chunk of every stream, and reading it here skips a
/// line search and a general parser per event.
fn plain_size_line(rest: &[u8]) -> Option<(usize, u64)> {
    let mut size: u64 = 0;
    for (i, &byte) in rest.iter().take(PLAIN_SIZE_DIGITS + 1).enumerate() {
        let digit = match byte {
            b'0'..=b'9' => byte - b'0',
            b'a'..=b'f' => byte - b'a' + 10,
            b'A'..=b'F' => byte - b'A' + 10,
            b'\r' if i > 0 => {
                return (rest.get(i + 1) == Some(&b'\n')).then_some((i + 2, size));
            }
            _ => return None,
        };
        size = (size << 4) | u64::from(digit);
    }
    None
}

/// Size of one complete chunk-size line (through its `\n`).
fn parse_size_line(line: &[u8]) -> Result<u64, HttpError> {
    // httparse treats an empty size (`\r\n`, `;ext\r\n`) as 0; that is not a size.
    if !line.first().is_some_and(u8::is_ascii_hexdigit) {
        return Err(HttpError::InvalidChunkSize);
    }
    match httparse::parse_chunk_size(line) {
        Ok(httparse::Status::Complete((used, size))) if used == line.len() => Ok(size),
        _ => Err(HttpError::InvalidChunkSize),
    }
}

/// The body decoder for one response, chosen by its [`BodyKind`].
#[derive(Debug, Clone)]
pub enum BodyDecoder {
    /// No body.
    Empty,
    /// `Content-Length`.
    Length(LengthDecoder),
    /// `Transfer-Encoding: chunked`.
    Chunked(ChunkedDecoder),
    /// Until the connection closes; `closed` once [`finish`](BodyDecoder::finish) was called.
    UntilClose {
        /// The connection has closed.
        closed: bool,
    },
}

impl BodyDecoder {
    /// The decoder for a body of this kind.
    pub fn new(kind: BodyKind) -> Self {
        match kind {
            BodyKind::Empty => BodyDecoder::Empty,
            BodyKind::ContentLength(n) => BodyDecoder::Length(LengthDecoder::new(n)),
            BodyKind::Chunked => BodyDecoder::Chunked(ChunkedDecoder::new()),
            BodyKind::UntilClose => BodyDecoder::UntilClose { closed: false },
        }
    }

    /// The whole body has been read.
    pub fn is_done(&self) -> bool {
        match self {
            BodyDecoder::Empty => true,
            BodyDecoder::Length(d) => d.remaining() == 0,
            BodyDecoder::Chunked(d) => d.is_done(),
            BodyDecoder::UntilClose { closed } => *closed,
        }
    }

    /// One decoding step (see [`ChunkedDecoder::decode`] for the calling convention).
    pub fn decode<'a>(&mut self, input: &'a [u8]) -> Result<Decoded<'a>, HttpError> {
        match self {
            BodyDecoder::Empty => Ok(Decoded::done(0)),
            BodyDecoder::Length(d) => Ok(d.decode(input)),
            BodyDecoder::Chunked(d) => d.decode(input),
            BodyDecoder::UntilClose { closed: true } => Ok(Decoded::done(0)),
            BodyDecoder::UntilClose { closed: false } => Ok(Decoded {
                consumed: input.len(),
                data: input,
                done: false,
            }),
        }
    }

    /// Decode all of `input`, handing every payload slice to `on_data`. Returns the bytes
    /// consumed and whether the body is complete (bytes after it are not consumed).
    pub fn decode_all(
        &mut self,
        input: &[u8],
        mut on_data: impl FnMut(&[u8]),
    ) -> Result<(usize, bool), HttpError> {
        let mut offset = 0;
        // Each pass consumes at least one byte or returns.
        loop {
            let step = self.decode(&input[offset..])?;
            offset += step.consumed;
            if !step.data.is_empty() {
                on_data(step.data);
            }
            if step.done || offset == input.len() || step.consumed == 0 {
                return Ok((offset, step.done));
            }
        }
    }

    /// The connection closed: fine for an until-close body (which is then complete),
    /// an [`HttpError::IncompleteBody`] for any other body not yet complete.
    pub fn finish(&mut self) -> Result<(), HttpError> {
        if let BodyDecoder::UntilClose { closed } = self {
            *closed = true;
        }
        if self.is_done() {
            Ok(())
        } else {
            Err(HttpError::IncompleteBody)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn head(bytes: &[u8]) -> ResponseHead {
        parse_head(bytes)
            .expect("valid head")
            .expect("complete head")
    }

    const SSE_HEAD: &[u8] = b"HTTP/1.1 200 OK\r\n\
        content-type: text/event-stream; charset=utf-8\r\n\
        Transfer-Encoding: chunked\r\n\
        Connection: keep-alive\r\n\r\n";

    #[test]
    fn event_stream_head() {
        let mut buf = SSE_HEAD.to_vec();
        buf.extend_from_slice(b"5\r\nhello\r\n");
        assert_eq!(
            head(&buf),
            ResponseHead {
                status: 200,
                reason: Cow::Borrowed("OK"),
                head_len: SSE_HEAD.len(),
                body: BodyKind::Chunked,
                keep_alive: true,
                is_event_stream: true,
            }
        );
    }

    #[test]
    fn body_kinds() {
        let cases: &[(&[u8], BodyKind)] = &[
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n",
                BodyKind::ContentLength(12),
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
                BodyKind::Empty,
            ),
            (
                b"HTTP/1.1 200 OK\r\ncontent-length: 7, 7\r\nContent-Length: 7\r\n\r\n",
                BodyKind::ContentLength(7),
            ),
            // chunked wins over Content-Length
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
                BodyKind::Chunked,
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: identity, Chunked\r\n\r\n",
                BodyKind::Chunked,
            ),
            (
                b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
                BodyKind::Empty,
            ),
            (
                b"HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n",
                BodyKind::Empty,
            ),
            (b"HTTP/1.1 200 OK\r\n\r\n", BodyKind::UntilClose),
        ];
        for (bytes, kind) in cases {
            assert_eq!(
                head(bytes).body,
                *kind,
                "{}",
                String::from_utf8_lossy(bytes)
            );
        }
    }

    #[test]
    fn keep_alive_rules() {
        let cases: &[(&[u8], bool)] = &[
            (b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n", true),
            (
                b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\n",
                false,
            ),
            (
                b"HTTP/1.1 200 OK\r\nConnection: Keep-Alive, CLOSE\r\nContent-Length: 1\r\n\r\n",
                false,
            ),
            (b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", false),
            (
                b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\n",
                false,
            ),
            // a body delimited by close cannot be followed by another response
            (b"HTTP/1.1 200 OK\r\n\r\n", false),
        ];
        for (bytes, keep_alive) in cases {
            assert_eq!(
                head(bytes).keep_alive,
                *keep_alive,
                "{}",
                String::from_utf8_lossy(bytes)
            );
        }
    }

    #[test]
    fn reason_phrases() {
        let cases: &[(&[u8], &str)] = &[
            (
                b"HTTP/1.1 500 Internal Server Error\r\n\r\n",
                "Internal Server Error",
            ),
            (b"HTTP/1.1 500 \r\n\r\n", "Internal Server Error"),
            (b"HTTP/1.1 429\r\n\r\n", "Too Many Requests"),
            (b"HTTP/1.1 503 Custom Overload\r\n\r\n", "Custom Overload"),
            (b"HTTP/1.1 404 Nicht gefunden \xE4\r\n\r\n", "Not Found"),
            (b"HTTP/1.1 599 \r\n\r\n", ""),
        ];
        for (bytes, reason) in cases {
            assert_eq!(
                head(bytes).reason,
                *reason,
                "{}",
                String::from_utf8_lossy(bytes)
            );
        }
        assert!(matches!(head(cases[0].0).reason, Cow::Borrowed(_)));
        assert!(!head(cases[0].0).is_success());
    }

    #[test]
    fn content_type_detection() {
        for (value, expect) in [
            ("text/event-stream", true),
            ("Text/Event-Stream ; charset=utf-8", true),
            ("application/json", false),
            ("text/event-streams", false),
        ] {
            let bytes = format!("HTTP/1.1 200 OK\r\nContent-Type: {value}\r\n\r\n");
            assert_eq!(head(bytes.as_bytes()).is_event_stream, expect, "{value}");
        }
    }

    #[test]
    fn interim_responses_are_skipped() {
        let bytes = b"HTTP/1.1 100 Continue\r\n\r\n\
            HTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\n\
            HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi";
        let parsed = head(bytes);
        assert_eq!(parsed.status, 200);
        assert_eq!(parsed.head_len, bytes.len() - 2);
        // Only the interim head so far: need more.
        assert_eq!(parse_head(b"HTTP/1.1 100 Continue\r\n\r\n"), Ok(None));
        assert_eq!(
            parse_head(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 2"),
            Ok(None)
        );
        assert_eq!(
            parse_head(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n"),
            Err(HttpError::UnexpectedUpgrade)
        );
    }

    #[test]
    fn leading_empty_lines_and_bare_lf() {
        let parsed = head(b"\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx");
        assert_eq!((parsed.status, parsed.head_len), (200, 42));
        let parsed = head(b"HTTP/1.1 200 OK\nContent-Length: 1\n\nx");
        assert_eq!(
            (parsed.body, parsed.head_len),
            (BodyKind::ContentLength(1), 35)
        );
    }

    #[test]
    fn every_prefix_is_incomplete() {
        let bytes = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
        for end in 0..bytes.len() {
            assert_eq!(parse_head(&bytes[..end]), Ok(None), "prefix {end}");
        }
        assert_eq!(head(bytes).head_len, bytes.len());
    }

    #[test]
    fn head_errors() {
        let cases: &[(&[u8], HttpError)] = &[
            (b"HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\n", HttpError::InvalidContentLength),
            (b"HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\n", HttpError::InvalidContentLength),
            (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", HttpError::InvalidContentLength),
            (b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n", HttpError::InvalidContentLength),
            (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", HttpError::InvalidContentLength),
            (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", HttpError::UnsupportedTransferEncoding),
            (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, identity\r\n\r\n", HttpError::UnsupportedTransferEncoding),
            (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", HttpError::UnsupportedTransferEncoding),
            (b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 3\r\n\r\n", HttpError::UnsupportedContentEncoding),
            (b"HTTP/1.1 200 OK\r\ncontent-encoding: identity, br\r\n\r\n", HttpError::UnsupportedContentEncoding),
            (b"HTTP/1.1 2x0 OK\r\n\r\n", HttpError::MalformedHead(httparse::Error::Status)),
            (b"HTTX/1.1 200 OK\r\n\r\n", HttpError::MalformedHead(httparse::Error::Version)),
            (b"HTTP/1.1 200 OK\r\nBad Header: x\r\n\r\n", HttpError::MalformedHead(httparse::Error::HeaderName)),
        ];
        for (bytes, err) in cases {
            assert_eq!(
                parse_head(bytes),
                Err(*err),
                "{}",
                String::from_utf8_lossy(bytes)
            );
        }
        let mut many = b"HTTP/1.1 200 OK\r\n".to_vec();
        for i in 0..=MAX_HEADERS {
            many.extend_from_slice(format!("X-H{i}: v\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        assert_eq!(
            parse_head(&many),
            Err(HttpError::TooManyHeaders { limit: MAX_HEADERS })
        );
    }

    #[test]
    fn identity_content_encoding_is_no_encoding() {
        let h = head(b"HTTP/1.1 200 OK\r\nContent-Encoding: identity\r\nContent-Length: 2\r\n\r\n");
        assert_eq!(h.body, BodyKind::ContentLength(2));
    }

    #[test]
    fn head_size_is_capped() {
        let mut big = b"HTTP/1.1 200 OK\r\nX-Big: ".to_vec();
        big.resize(MAX_HEAD_LEN, b'a');
        assert_eq!(parse_head(&big), Ok(None));
        big.push(b'a');
        let err = parse_head(&big).unwrap_err();
        assert_eq!(
            err,
            HttpError::HeadTooLarge {
                limit: MAX_HEAD_LEN
            }
        );
        assert_eq!(err.kind(), "head_too_large");
        big.extend_from_slice(b"\r\n\r\n");
        assert_eq!(
            parse_head(&big),
            Err(HttpError::HeadTooLarge {
                limit: MAX_HEAD_LEN
            })
        );
    }

    /// Run a body decoder over `pieces`, collecting payload; returns payload, done, consumed.
    fn run(
        decoder: &mut BodyDecoder,
        pieces: &[&[u8]],
    ) -> Result<(Vec<u8>, bool, usize), HttpError> {
        let mut payload = Vec::new();
        let mut consumed = 0;
        let mut carry = Vec::new();
        for piece in pieces {
            carry.extend_from_slice(piece);
            let (used, done) = decoder.decode_all(&carry, |d| payload.extend_from_slice(d))?;
            consumed += used;
            carry.drain(..used);
            if done {
                return Ok((payload, true, consumed));
            }
            assert!(
                carry.is_empty(),
                "an unfinished body consumes all its input"
            );
        }
        Ok((payload, false, consumed))
    }

    fn chunked(pieces: &[&[u8]]) -> Result<(Vec<u8>, bool, usize), HttpError> {
        run(&mut BodyDecoder::new(BodyKind::Chunked), pieces)
    }

    #[test]
    fn chunked_table() {
        let ok: &[(&[u8], &[u8])] = &[
            (b"5\r\nhello\r\n0\r\n\r\n", b"hello"),
            (b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", b"hello world"),
            (b"A\r\n0123456789\r\n0\r\n\r\n", b"0123456789"),
            (
                b"a;name=value;x\r\n0123456789\r\n0;last\r\n\r\n",
                b"0123456789",
            ),
            (b"3 ; ext\r\nabc\r\n0\r\n\r\n", b"abc"),
            (
                b"003\r\nabc\r\n0\r\nX-Trailer: 1\r\nX-Other: two\r\n\r\n",
                b"abc",
            ),
            (b"0\r\n\r\n", b""),
        ];
        for (body, payload) in ok {
            assert_eq!(
                chunked(&[body]),
                Ok((payload.to_vec(), true, body.len())),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn plain_size_lines_are_read_in_place_and_anything_else_is_left_to_the_general_reader() {
        // (line, (bytes used, size) when read in place)
        type Case = (&'static [u8], Option<(usize, u64)>);
        let plain: &[Case] = &[
            (b"d9\r\ndata", Some((4, 0xd9))),
            (b"D9\r\n", Some((4, 0xd9))),
            (b"0\r\n\r\n", Some((3, 0))),
            (b"fffffffffffffff\r\n", Some((17, 0xfff_ffff_ffff_ffff))),
            // Sixteen digits, an extension, a space, a bare LF, a cut line, no digit: the
            // general reader's.
            (b"0000000000000001\r\n", None),
            (b"d9;x=1\r\n", None),
            (b"d9 \r\n", None),
            (b"d9\n", None),
            (b"d9\r", None),
            (b"d9", None),
            (b"d9\rx", None),
            (b"\r\n", None),
            (b"", None),
        ];
        for (line, expect) in plain {
            assert_eq!(
                plain_size_line(line),
                *expect,
                "{}",
                String::from_utf8_lossy(line)
            );
        }
    }

    #[test]
    fn chunked_stops_at_the_end_of_the_body() {
        let body = b"2\r\nok\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n";
        let mut decoder = BodyDecoder::new(BodyKind::Chunked);
        let mut payload = Vec::new();
        let (used, done) = decoder
            .decode_all(body, |d| payload.extend_from_slice(d))
            .unwrap();
        assert_eq!((payload.as_slice(), used, done), (&b"ok"[..], 12, true));
        assert_eq!(decoder.decode(b"more").unwrap(), Decoded::done(0));
        assert_eq!(decoder.finish(), Ok(()));
    }

    #[test]
    fn chunked_errors() {
        let cases: &[(&[u8], HttpError)] = &[
            (b"zz\r\n", HttpError::InvalidChunkSize),
            (b"\r\n", HttpError::InvalidChunkSize),
            (b";ext\r\n", HttpError::InvalidChunkSize),
            (b"5\n", HttpError::InvalidChunkSize),
            (b"5 6\r\n", HttpError::InvalidChunkSize),
            (b"10000000000000000\r\n", HttpError::InvalidChunkSize),
            (b"5\r\nhelloX", HttpError::MissingChunkCrlf),
            (b"5\r\nhello\rX", HttpError::MissingChunkCrlf),
            (b"0\r\nX-T: 1\n", HttpError::MissingChunkCrlf),
            (b"0\r\n\n", HttpError::MissingChunkCrlf),
        ];
        for (body, err) in cases {
            assert_eq!(
                chunked(&[body]),
                Err(*err),
                "{}",
                String::from_utf8_lossy(body)
            );
            assert!(!err.kind().is_empty());
        }
        let long = vec![b'1'; MAX_CHUNK_LINE + 1];
        assert_eq!(
            chunked(&[&long[..10], &long[10..]]),
            Err(HttpError::ChunkLineTooLong {
                limit: MAX_CHUNK_LINE
            })
        );
        let mut trailers = b"0\r\n".to_vec();
        trailers.extend(
            std::iter::repeat_n(b"X-T: 1\r\n".as_slice(), MAX_TRAILERS_LEN / 8 + 1).flatten(),
        );
        assert_eq!(
            chunked(&[&trailers]),
            Err(HttpError::TrailersTooLarge {
                limit: MAX_TRAILERS_LEN
            })
        );
    }

    #[test]
    fn truncated_bodies_fail_at_close() {
        let mut decoder = BodyDecoder::new(BodyKind::Chunked);
        assert_eq!(
            run(&mut decoder, &[b"5\r\nhel"]),
            Ok((b"hel".to_vec(), false, 6))
        );
        assert_eq!(decoder.finish(), Err(HttpError::IncompleteBody));
        let mut decoder = BodyDecoder::new(BodyKind::ContentLength(4));
        assert_eq!(run(&mut decoder, &[b"ab"]), Ok((b"ab".to_vec(), false, 2)));
        assert_eq!(decoder.finish(), Err(HttpError::IncompleteBody));
        let mut decoder = BodyDecoder::new(BodyKind::UntilClose);
        assert_eq!(
            run(&mut decoder, &[b"ab", b"cd"]),
            Ok((b"abcd".to_vec(), false, 4))
        );
        assert_eq!(decoder.finish(), Ok(()));
        assert!(decoder.is_done());
        let mut decoder = BodyDecoder::new(BodyKind::Empty);
        assert_eq!(
            run(&mut decoder, &[b"next response"]),
            Ok((vec![], true, 0))
        );
    }

    #[test]
    fn length_decoder_splits_and_stops() {
        let mut decoder = BodyDecoder::new(BodyKind::ContentLength(5));
        assert_eq!(
            run(&mut decoder, &[b"he", b"l", b"loEXTRA"]),
            Ok((b"hello".to_vec(), true, 5))
        );
        let mut length = LengthDecoder::new(3);
        assert_eq!(
            length.decode(b"abcd"),
            Decoded {
                consumed: 3,
                data: b"abc",
                done: true
            }
        );
        assert_eq!(length.remaining(), 0);
    }

    #[test]
    fn chunk_boundaries_at_every_position() {
        let body = b"4;x=y\r\nwiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nExpires: never\r\n\r\n";
        let expect = b"wikipedia in\r\n\r\nchunks.".to_vec();
        for a in 0..=body.len() {
            for b in a..=body.len() {
                let got = chunked(&[&body[..a], &body[a..b], &body[b..]]);
                assert_eq!(got, Ok((expect.clone(), true, body.len())), "cuts {a} {b}");
            }
        }
    }

    /// Encode `chunks` as a chunked body with assorted hex case and extensions.
    fn encode(chunks: &[Vec<u8>], trailers: bool) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, chunk) in chunks.iter().filter(|c| !c.is_empty()).enumerate() {
            match i % 3 {
                0 => out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes()),
                1 => out.extend_from_slice(format!("{:X};ext=1\r\n", chunk.len()).as_bytes()),
                _ => out.extend_from_slice(format!("00{:x} \r\n", chunk.len()).as_bytes()),
            }
            out.extend_from_slice(chunk);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"0\r\n");
        if trailers {
            out.extend_from_slice(b"X-Checksum: abc\r\n");
        }
        out.extend_from_slice(b"\r\n");
        out
    }

    proptest! {
        #[test]
        fn chunked_round_trips_under_any_split(
            chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..6),
            trailers in any::<bool>(),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..10),
        ) {
            let body = encode(&chunks, trailers);
            let mut cuts: Vec<usize> = cuts.iter().map(|c| c.index(body.len() + 1)).collect();
            cuts.sort_unstable();
            cuts.push(body.len());
            let mut pieces = Vec::new();
            let mut from = 0;
            for cut in cuts {
                pieces.push(&body[from..cut]);
                from = cut;
            }
            pieces.push(b"NEXT");
            let expect: Vec<u8> = chunks.concat();
            prop_assert_eq!(chunked(&pieces), Ok((expect, true, body.len())));
        }

        #[test]
        fn arbitrary_bytes_never_panic(
            bytes in proptest::collection::vec(
                prop_oneof![Just(b'\r'), Just(b'\n'), Just(b'0'), Just(b'a'), Just(b';'), any::<u8>()],
                0..200,
            ),
            cut in any::<prop::sample::Index>(),
        ) {
            let cut = cut.index(bytes.len() + 1);
            let _ = chunked(&[&bytes[..cut], &bytes[cut..]]);
            let mut with_head = b"HTTP/1.1 200 OK\r\n".to_vec();
            with_head.extend_from_slice(&bytes);
            let _ = parse_head(&bytes);
            let _ = parse_head(&with_head);
        }
    }
}
