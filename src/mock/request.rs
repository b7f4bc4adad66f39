//! HTTP/1.1 request framing for the mock (pure, push-style; no I/O): the request head via
//! httparse, then the body by `Content-Length` or `Transfer-Encoding: chunked`.
//!
//! The head is described by offsets into the connection's read buffer rather than borrowed
//! slices, because the buffer keeps growing (and may move) while the body is read.

use std::ops::Range;

use crate::http::request::Method;
use crate::http::response::{list_items, parse_decimal, ChunkedDecoder, HttpError};

/// Largest request head accepted; beyond it the answer is `431`.
pub const MAX_HEAD_BYTES: usize = 64 << 10;
/// Headers parsed per request at most; more is answered with `431`.
const MAX_HEADERS: usize = 64;

/// How the request body is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFraming {
    /// Exactly this many bytes follow the head.
    Length(usize),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// A parsed request head; ranges index the buffer it was parsed from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// Bytes of the head including the blank line.
    pub len: usize,
    /// Request method; `None` for one the mock does not know (answered with 405 or 404).
    pub method: Option<Method>,
    /// The path without the query string.
    pub path: Range<usize>,
    /// The `X-Request-Id` header value, if any.
    pub request_id: Option<Range<usize>>,
    /// The `X-Session-ID` header value (a conversation's id), if any.
    pub session_id: Option<Range<usize>>,
    /// Body framing.
    pub body: BodyFraming,
    /// The client asked to close after this response (`Connection: close` or HTTP/1.0
    /// without `keep-alive`).
    pub close: bool,
    /// `Expect: 100-continue` was sent.
    pub expect_continue: bool,
}

/// Why a request cannot be served; each maps to one status code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FramingError {
    /// `400 Bad Request`, with the reason.
    Bad(&'static str),
    /// `431 Request Header Fields Too Large`.
    HeadTooLarge,
    /// `413 Payload Too Large`.
    BodyTooLarge,
}

impl FramingError {
    /// Status code and reason phrase of the error response.
    pub fn status(&self) -> (u16, &'static str) {
        match self {
            FramingError::Bad(_) => (400, "Bad Request"),
            FramingError::HeadTooLarge => (431, "Request Header Fields Too Large"),
            FramingError::BodyTooLarge => (413, "Payload Too Large"),
        }
    }

    /// A one-line explanation for the JSON error body.
    pub fn message(&self) -> &'static str {
        match self {
            FramingError::Bad(why) => why,
            FramingError::HeadTooLarge => "request head too large (limit 64 KiB, 64 headers)",
            FramingError::BodyTooLarge => "request body larger than the server's limit",
        }
    }
}

/// Parses the head at the start of `buf`: `Ok(None)` means "need more bytes".
pub fn parse_head(buf: &[u8], max_body: usize) -> Result<Option<Head>, FramingError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD_BYTES => {
            return Err(FramingError::HeadTooLarge)
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(FramingError::HeadTooLarge),
        Err(_) => return Err(FramingError::Bad("malformed request head")),
    };
    if len > MAX_HEAD_BYTES {
        return Err(FramingError::HeadTooLarge);
    }
    let base = buf.as_ptr() as usize;
    let offset = |s: &[u8]| {
        let start = s.as_ptr() as usize - base;
        start..start + s.len()
    };
    let method = Method::parse(req.method.unwrap_or(""));
    let target = req.path.unwrap_or("/").as_bytes();
    let path_end = memchr::memchr(b'?', target).unwrap_or(target.len());
    let path = offset(&target[..path_end]);
    let http10 = req.version == Some(0);

    let mut content_length: Option<usize> = None;
    let mut chunked = false;
    let mut close = http10;
    let mut expect_continue = false;
    let mut request_id = None;
    let mut session_id = None;
    for h in req.headers.iter() {
        let name = h.name;
        if name.eq_ignore_ascii_case("content-length") {
            let n = parse_content_length(h.value)?;
            if content_length.is_some_and(|c| c != n) {
                return Err(FramingError::Bad("conflicting Content-Length headers"));
            }
            content_length = Some(n);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            if has_token(h.value, b"chunked") {
                chunked = true;
            } else {
                return Err(FramingError::Bad(
                    "unsupported Transfer-Encoding (only chunked)",
                ));
            }
        } else if name.eq_ignore_ascii_case("connection") {
            if has_token(h.value, b"close") {
                close = true;
            } else if has_token(h.value, b"keep-alive") {
                close = false;
            }
        } else if name.eq_ignore_ascii_case("expect") {
            expect_continue = has_token(h.value, b"100-continue");
        } else if name.eq_ignore_ascii_case("x-request-id") {
            request_id = Some(offset(h.value));
        } else if name.eq_ignore_ascii_case("x-session-id") {
            session_id = Some(offset(h.value));
        }
    }
    let body = match (chunked, content_length) {
        (true, Some(_)) => {
            return Err(FramingError::Bad(
                "both Content-Length and Transfer-Encoding given",
            ))
        }
        (true, None) => BodyFraming::Chunked,
        (false, n) => {
            let n = n.unwrap_or(0);
            if n > max_body {
                return Err(FramingError::BodyTooLarge);
            }
            BodyFraming::Length(n)
        }
    };
    Ok(Some(Head {
        len,
        method,
        path,
        request_id,
        session_id,
        body,
        close,
        expect_continue,
    }))
}

fn parse_content_length(v: &[u8]) -> Result<usize, FramingError> {
    let n = parse_decimal(v.trim_ascii()).ok_or(FramingError::Bad("invalid Content-Length"))?;
    usize::try_from(n).map_err(|_| FramingError::BodyTooLarge)
}

/// True when the comma-separated header value contains `token` (case-insensitive).
fn has_token(value: &[u8], token: &[u8]) -> bool {
    list_items(value).any(|t| t.eq_ignore_ascii_case(token))
}

/// A chunked request body read with the client's strict decoder
/// ([`crate::http::response::ChunkedDecoder`], CRLF after chunk data as RFC 9112 requires):
/// call [`ChunkedBody::decode`] with the bytes after the head each time more arrive; it
/// resumes where it stopped. The mock refuses what the client would refuse, so it cannot
/// hide a framing bug that a real server would answer with an error.
#[derive(Debug, Default)]
pub struct ChunkedBody {
    decoder: ChunkedDecoder,
    /// Bytes of `src` already fed to the decoder.
    consumed: usize,
}

impl ChunkedBody {
    /// Decodes from `src` (all body bytes received so far, from the first chunk-size line)
    /// into `out`. Returns the total bytes of `src` the body occupies once the last chunk
    /// and trailers are in, `Ok(None)` while more bytes are needed. A chunk that would take
    /// the body past `max_body` is refused as soon as its size line is in.
    pub fn decode(
        &mut self,
        src: &[u8],
        out: &mut Vec<u8>,
        max_body: usize,
    ) -> Result<Option<usize>, FramingError> {
        // Each pass consumes at least one byte or returns.
        loop {
            let step = self
                .decoder
                .decode(&src[self.consumed..])
                .map_err(framing_error)?;
            self.consumed += step.consumed;
            out.extend_from_slice(step.data);
            if out.len() as u64 + self.decoder.announced_remaining() > max_body as u64 {
                return Err(FramingError::BodyTooLarge);
            }
            if step.done {
                return Ok(Some(self.consumed));
            }
            if self.consumed == src.len() || step.consumed == 0 {
                return Ok(None);
            }
        }
    }
}

/// The mock's answer to a chunked framing error of the request body.
fn framing_error(e: HttpError) -> FramingError {
    match e {
        HttpError::TrailersTooLarge { .. } => FramingError::HeadTooLarge,
        HttpError::MissingChunkCrlf => FramingError::Bad("chunk data not followed by CRLF"),
        _ => FramingError::Bad("invalid chunk size line"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: usize = 1 << 20;

    fn head(raw: &str) -> Head {
        parse_head(raw.as_bytes(), MAX)
            .expect("valid")
            .expect("complete")
    }

    #[test]
    fn every_prefix_of_a_head_is_partial() {
        let raw = b"POST /v1/completions?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n";
        for end in 0..raw.len() {
            assert_eq!(parse_head(&raw[..end], MAX), Ok(None), "prefix {end}");
        }
        let h = parse_head(raw, MAX).unwrap().unwrap();
        assert_eq!(h.len, raw.len());
        assert_eq!(&raw[h.path.clone()], b"/v1/completions");
        assert_eq!(h.method, Some(Method::Post));
        assert_eq!(h.body, BodyFraming::Length(5));
        assert!(!h.close);
    }

    #[test]
    fn connection_and_version_decide_close() {
        assert!(head("GET / HTTP/1.1\r\nConnection: close\r\n\r\n").close);
        assert!(head("GET / HTTP/1.0\r\n\r\n").close);
        assert!(!head("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").close);
        assert!(!head("GET / HTTP/1.1\r\n\r\n").close);
    }

    #[test]
    fn request_id_and_expect_are_found() {
        let raw = "POST /x HTTP/1.1\r\nx-request-id: abc-1\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n";
        let h = head(raw);
        assert_eq!(&raw.as_bytes()[h.request_id.unwrap()], b"abc-1");
        assert!(h.expect_continue);
    }

    #[test]
    fn bad_framing_is_rejected() {
        let cases: [(&str, FramingError); 5] = [
            (
                "POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n",
                FramingError::Bad("invalid Content-Length"),
            ),
            (
                "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                FramingError::Bad("conflicting Content-Length headers"),
            ),
            (
                "POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
                FramingError::Bad("both Content-Length and Transfer-Encoding given"),
            ),
            (
                "POST / HTTP/1.1\r\nContent-Length: 2000000\r\n\r\n",
                FramingError::BodyTooLarge,
            ),
            (
                "GARBAGE\r\n\r\n",
                FramingError::Bad("malformed request head"),
            ),
        ];
        for (raw, want) in cases {
            assert_eq!(parse_head(raw.as_bytes(), MAX), Err(want), "{raw:?}");
        }
    }

    #[test]
    fn oversized_heads_are_431() {
        let mut raw = b"GET / HTTP/1.1\r\nX-Big: ".to_vec();
        raw.resize(MAX_HEAD_BYTES + 10, b'a');
        assert_eq!(parse_head(&raw, MAX), Err(FramingError::HeadTooLarge));
        let mut many = String::from("GET / HTTP/1.1\r\n");
        for i in 0..100 {
            many.push_str(&format!("X-{i}: v\r\n"));
        }
        many.push_str("\r\n");
        assert_eq!(
            parse_head(many.as_bytes(), MAX),
            Err(FramingError::HeadTooLarge)
        );
    }

    #[test]
    fn chunked_body_decodes_incrementally_from_any_split() {
        let raw = b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: x\r\n\r\nNEXT";
        let body_end = raw.len() - 4;
        // Feed growing prefixes to one decoder, as the connection does.
        for step in 1..=7 {
            let mut dec = ChunkedBody::default();
            let mut out = Vec::new();
            let mut end = 0;
            let mut done = None;
            while done.is_none() {
                end = (end + step).min(raw.len());
                done = dec.decode(&raw[..end], &mut out, MAX).expect("valid");
                assert!(end < raw.len() || done.is_some());
            }
            assert_eq!(done, Some(body_end), "step {step}");
            assert_eq!(out, b"hello world");
        }
    }

    #[test]
    fn chunked_errors() {
        let mut out = Vec::new();
        assert_eq!(
            ChunkedBody::default().decode(b"zz\r\n", &mut out, MAX),
            Err(FramingError::Bad("invalid chunk size line"))
        );
        assert_eq!(
            ChunkedBody::default().decode(b"2\r\nabX", &mut out, MAX),
            Err(FramingError::Bad("chunk data not followed by CRLF"))
        );
        out.clear();
        assert_eq!(
            ChunkedBody::default().decode(b"10\r\n", &mut out, 8),
            Err(FramingError::BodyTooLarge)
        );
    }

    #[test]
    fn chunked_body_with_a_bare_lf_after_chunk_data_is_refused() {
        // RFC 9112 §7.1: chunk data ends in CRLF; a bare LF is a framing error (400).
        for raw in [&b"5\r\nhello\n0\r\n\r\n"[..], b"5\r\nhello\r\n0\r\n\n"] {
            let mut out = Vec::new();
            assert_eq!(
                ChunkedBody::default().decode(raw, &mut out, MAX),
                Err(FramingError::Bad("chunk data not followed by CRLF")),
                "{:?}",
                String::from_utf8_lossy(raw)
            );
        }
    }
}
