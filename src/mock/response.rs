//! Response bytes: status line and headers, JSON error bodies, and the HTTP chunk framing
//! of SSE events. Everything appends to a caller-owned buffer (the connection's write
//! buffer), so nothing here allocates once the buffers have grown.

use std::io::Write;

/// Header lines every response carries.
const SERVER: &[u8] = b"server: mock-llm-server\r\n";

/// How the response body is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// `Content-Length: n`.
    Length(usize),
    /// `Transfer-Encoding: chunked` (streams).
    Chunked,
}

/// Response head options besides status and framing.
#[derive(Debug, Clone, Copy, Default)]
pub struct HeadOpts<'a> {
    /// `Content-Type` value (omitted when empty).
    pub content_type: &'a str,
    /// Echoed `X-Request-Id`.
    pub request_id: Option<&'a [u8]>,
    /// Announce `Connection: close`.
    pub close: bool,
    /// `Allow` header (405 responses).
    pub allow: Option<&'a str>,
    /// Further header lines, written as given (`MockConfig::response_headers`).
    pub extra: &'a [(String, String)],
}

/// JSON content type.
pub const JSON: &str = "application/json";
/// SSE content type (as uvicorn/vLLM send it).
pub const SSE: &str = "text/event-stream; charset=utf-8";
/// Prometheus text exposition format.
pub const PROMETHEUS: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Appends a status line and headers, up to and including the blank line.
pub fn head(out: &mut Vec<u8>, status: u16, reason: &str, framing: Framing, opts: &HeadOpts<'_>) {
    // Writing into a Vec cannot fail.
    let _ = write!(out, "HTTP/1.1 {status} {reason}\r\n");
    out.extend_from_slice(SERVER);
    if !opts.content_type.is_empty() {
        out.extend_from_slice(b"content-type: ");
        out.extend_from_slice(opts.content_type.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    match framing {
        Framing::Length(n) => {
            let _ = write!(out, "content-length: {n}\r\n");
        }
        Framing::Chunked => out.extend_from_slice(b"transfer-encoding: chunked\r\n"),
    }
    if let Some(id) = opts.request_id {
        out.extend_from_slice(b"x-request-id: ");
        out.extend_from_slice(id);
        out.extend_from_slice(b"\r\n");
    }
    if let Some(allow) = opts.allow {
        let _ = write!(out, "allow: {allow}\r\n");
    }
    if opts.close {
        out.extend_from_slice(b"connection: close\r\n");
    }
    for (name, value) in opts.extra {
        let _ = write!(out, "{name}: {value}\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// Appends a complete response with a `Content-Length` body (omitted for `HEAD`).
pub fn full(
    out: &mut Vec<u8>,
    status: u16,
    reason: &str,
    body: &[u8],
    opts: &HeadOpts<'_>,
    head_only: bool,
) {
    head(out, status, reason, Framing::Length(body.len()), opts);
    if !head_only {
        out.extend_from_slice(body);
    }
}

/// The OpenAI/vLLM error type name of a status code.
pub fn error_type(status: u16) -> &'static str {
    match status {
        400 => "BadRequestError",
        404 => "NotFoundError",
        405 => "MethodNotAllowedError",
        413 => "PayloadTooLargeError",
        429 => "RateLimitError",
        431 => "RequestHeaderFieldsTooLargeError",
        _ => "InternalServerError",
    }
}

/// Appends a vLLM-style error body:
/// `{"error":{"message":…,"type":…,"param":null,"code":status}}`.
pub fn error_body(out: &mut Vec<u8>, status: u16, message: &str) {
    out.extend_from_slice(b"{\"error\":{\"message\":");
    // A &str always serializes.
    let _ = serde_json::to_writer(&mut *out, message);
    let _ = write!(
        out,
        ",\"type\":\"{}\",\"param\":null,\"code\":{status}}}}}",
        error_type(status)
    );
}

/// Text of one generated token.
const TOKEN_TEXT: &str = " tok";

/// Appends the text of `n` generated tokens (inside a JSON string).
pub fn push_tokens(out: &mut Vec<u8>, n: u64) {
    for _ in 0..n {
        out.extend_from_slice(TOKEN_TEXT.as_bytes());
    }
}

/// Appends one SSE event (`data: <payload>\n\n`) as one HTTP chunk.
pub fn sse_chunk(out: &mut Vec<u8>, payload: &[u8]) {
    const PREFIX: &[u8] = b"data: ";
    const SUFFIX: &[u8] = b"\n\n";
    let _ = write!(out, "{:x}\r\n", PREFIX.len() + payload.len() + SUFFIX.len());
    out.extend_from_slice(PREFIX);
    out.extend_from_slice(payload);
    out.extend_from_slice(SUFFIX);
    out.extend_from_slice(b"\r\n");
}

/// Appends one named SSE event (`event: <name>\ndata: <payload>\n\n`) as one HTTP chunk, as
/// the Responses API frames its events.
pub fn sse_named_chunk(out: &mut Vec<u8>, name: &str, payload: &[u8]) {
    let _ = write!(
        out,
        "{:x}\r\nevent: {name}\ndata: ",
        "event: \ndata: ".len() + name.len() + payload.len() + 2
    );
    out.extend_from_slice(payload);
    out.extend_from_slice(b"\n\n\r\n");
}

/// Appends `"padding":"xx…x",` (`n` filler bytes; nothing for 0): a JSON member that makes an
/// event or body as large as a test needs without changing what a client reads from it.
pub fn padding_member(out: &mut Vec<u8>, n: usize) {
    if n == 0 {
        return;
    }
    out.extend_from_slice(b"\"padding\":\"");
    out.resize(out.len() + n, b'x');
    out.extend_from_slice(b"\",");
}

/// The last HTTP chunk of a chunked body.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_lists_the_requested_headers() {
        let mut out = Vec::new();
        let opts = HeadOpts {
            content_type: JSON,
            request_id: Some(b"r-1"),
            close: true,
            allow: None,
            extra: &[("x-extra".into(), "1".into())],
        };
        head(&mut out, 200, "OK", Framing::Length(12), &opts);
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"));
        for line in [
            "content-type: application/json\r\n",
            "content-length: 12\r\n",
            "x-request-id: r-1\r\n",
            "connection: close\r\n",
            "x-extra: 1\r\n",
        ] {
            assert!(text.contains(line), "{line:?} in {text:?}");
        }
        assert!(text.ends_with("\r\n\r\n"));
    }

    #[test]
    fn error_body_is_valid_json() {
        let mut out = Vec::new();
        error_body(&mut out, 429, "slow \"down\"");
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["error"]["code"], 429);
        assert_eq!(v["error"]["type"], "RateLimitError");
        assert_eq!(v["error"]["message"], "slow \"down\"");
    }

    #[test]
    fn padding_is_a_json_member_of_the_asked_size() {
        let mut out = b"{".to_vec();
        padding_member(&mut out, 5);
        out.extend_from_slice(b"\"a\":1}");
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["padding"], "xxxxx");
        let mut none = Vec::new();
        padding_member(&mut none, 0);
        assert!(none.is_empty());
    }

    #[test]
    fn sse_chunk_is_framed() {
        let mut out = Vec::new();
        sse_chunk(&mut out, b"[DONE]");
        assert_eq!(out, b"e\r\ndata: [DONE]\n\n\r\n");
    }
}
