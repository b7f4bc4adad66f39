//! Request bytes, built once before the clock starts.
//!
//! A [`PreparedRequest`] is the complete HTTP/1.1 request (head and body) as shared [`Bytes`]
//! parts: the engine writes them as they are, so sending costs no formatting, no JSON and no
//! copy. Several parts let later datasets share fragments between requests (trace replay
//! assembles prompts from shared blocks) without materializing each request.

use bytes::Bytes;

/// The HTTP method of a request: what the client sends and what the mock routes on (one
/// type for both). The client sends `GET` and `POST`; `HEAD` is here for the mock, which
/// serves it like `GET` without a body (the client's response decoder cannot know a body
/// is absent, so it never sends one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// `GET`
    Get,
    /// `POST`
    Post,
    /// `HEAD`
    Head,
}

impl Method {
    /// The method named by a request line; `None` for any other (the mock answers 405/404).
    pub fn parse(name: &str) -> Option<Method> {
        match name {
            "GET" => Some(Method::Get),
            "POST" => Some(Method::Post),
            "HEAD" => Some(Method::Head),
            _ => None,
        }
    }

    /// The method's name on the request line.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Head => "HEAD",
        }
    }
}

/// Headers common to every request of a run (everything but the per-request ones).
#[derive(Debug, Clone)]
pub struct HeadTemplate {
    /// `METHOD path HTTP/1.1\r\nHost: ...\r\n` + the fixed headers, each ending in `\r\n`.
    prefix: String,
}

impl HeadTemplate {
    /// `extra_headers` are `(name, value)` pairs (`--header`, `Authorization`, ...); they were
    /// validated by the caller (no CR/LF, none of the framing headers each request gets).
    /// One named `Host`, `User-Agent` or `Accept` replaces ours (sent once, in our place):
    /// a server behind a proxy may route by `Host`, and two `Host` lines are a request
    /// servers must refuse (RFC 9112 §3.2).
    pub fn new(
        method: Method,
        path: &str,
        host_header: &str,
        extra_headers: &[(String, String)],
    ) -> Self {
        let method = method.as_str();
        let ours = |name: &str, default: &str| -> String {
            let given = extra_headers
                .iter()
                .rev()
                .find(|(n, _)| n.eq_ignore_ascii_case(name));
            match given {
                Some((n, v)) => format!("{n}: {v}\r\n"),
                None => format!("{name}: {default}\r\n"),
            }
        };
        let mut prefix = format!("{method} {path} HTTP/1.1\r\n");
        prefix.push_str(&ours("Host", host_header));
        prefix.push_str(&ours(
            "User-Agent",
            concat!("vllm-bench/", env!("CARGO_PKG_VERSION")),
        ));
        prefix.push_str(&ours("Accept", "*/*"));
        let replaced = |name: &str| {
            ["Host", "User-Agent", "Accept"]
                .iter()
                .any(|ours| name.eq_ignore_ascii_case(ours))
        };
        for (name, value) in extra_headers.iter().filter(|(n, _)| !replaced(n)) {
            prefix.push_str(name);
            prefix.push_str(": ");
            prefix.push_str(value);
            prefix.push_str("\r\n");
        }
        HeadTemplate { prefix }
    }

    /// This template with one more fixed header (`name: value`, validated by the caller):
    /// a header that is the same for every request of a group (the agentic replay's
    /// per-stream `X-Correlation-ID`), built before the clock like the rest of the head.
    pub fn with_header(&self, name: &str, value: &str) -> HeadTemplate {
        let mut prefix = String::with_capacity(self.prefix.len() + name.len() + value.len() + 4);
        prefix.push_str(&self.prefix);
        prefix.push_str(name);
        prefix.push_str(": ");
        prefix.push_str(value);
        prefix.push_str("\r\n");
        HeadTemplate { prefix }
    }

    /// The request head (ending in the blank line) for a body of `body_len` bytes, with
    /// `Content-Length` (and `x-request-id` when given); `extra` bytes of capacity are left
    /// for a body appended in place.
    fn head(
        &self,
        ids: Ids<'_>,
        content_type: Option<&str>,
        body_len: usize,
        extra: usize,
    ) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.prefix.len() + 96 + extra);
        out.extend_from_slice(self.prefix.as_bytes());
        if let Some(ct) = content_type {
            out.extend_from_slice(b"Content-Type: ");
            out.extend_from_slice(ct.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        if let Some(id) = ids.request {
            out.extend_from_slice(b"x-request-id: ");
            out.extend_from_slice(id.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        if let Some(id) = ids.session {
            out.extend_from_slice(b"X-Session-ID: ");
            out.extend_from_slice(id.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        if body_len > 0 || content_type.is_some() {
            out.extend_from_slice(b"Content-Length: ");
            out.extend_from_slice(body_len.to_string().as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"\r\n");
        out
    }

    /// The complete request: head with `Content-Length` (and `x-request-id` when given), then
    /// the body, in one contiguous buffer (one write per request).
    pub fn build(
        &self,
        request_id: Option<&str>,
        content_type: Option<&str>,
        body: &[u8],
    ) -> PreparedRequest {
        let ids = Ids {
            request: request_id,
            session: None,
        };
        let mut out = self.head(ids, content_type, body.len(), body.len());
        out.extend_from_slice(body);
        PreparedRequest {
            parts: vec![Bytes::from(out)].into_boxed_slice(),
        }
    }

    /// The complete request with its body given as shared parts (trace replay: prompt
    /// blocks shared between requests): the head, then the parts as they are (no copy;
    /// the connection writes them with one vectored write).
    pub fn build_parts(
        &self,
        request_id: Option<&str>,
        content_type: Option<&str>,
        body: Vec<Bytes>,
    ) -> PreparedRequest {
        let ids = Ids {
            request: request_id,
            session: None,
        };
        self.build_parts_with(ids, content_type, body)
    }

    /// [`HeadTemplate::build_parts`] with the request's ids: a conversation's turns carry
    /// its session id (`X-Session-ID`, which vLLM and session-affine routers read).
    pub fn build_parts_with(
        &self,
        ids: Ids<'_>,
        content_type: Option<&str>,
        body: Vec<Bytes>,
    ) -> PreparedRequest {
        let len = body.iter().map(Bytes::len).sum();
        let mut parts = Vec::with_capacity(body.len() + 1);
        parts.push(Bytes::from(self.head(ids, content_type, len, 0)));
        parts.extend(body.into_iter().filter(|p| !p.is_empty()));
        PreparedRequest {
            parts: parts.into_boxed_slice(),
        }
    }
}

/// The per-request ids written into a head.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ids<'a> {
    /// `x-request-id`.
    pub request: Option<&'a str>,
    /// `X-Session-ID`: the conversation the request belongs to.
    pub session: Option<&'a str>,
}

/// A complete request ready to be written.
#[derive(Debug, Clone)]
pub struct PreparedRequest {
    pub parts: Box<[Bytes]>,
}

impl PreparedRequest {
    /// Total bytes on the wire.
    pub fn len(&self) -> usize {
        self.parts.iter().map(Bytes::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// All parts joined (tests and logs; never on the hot path).
    pub fn to_vec(&self) -> Vec<u8> {
        self.parts.iter().flat_map(|p| p.iter().copied()).collect()
    }

    /// FNV-1a over the request's bytes on the wire but its `Host` line: the same request
    /// sent to one server through different addresses (several loopback addresses, a node's
    /// own name for a load balancer) hashes the same. Before the clock only.
    pub fn hash_without_host(&self) -> u64 {
        let bytes = self.to_vec();
        let mut h = crate::mix::Fnv64::new();
        match host_line(&bytes) {
            Some(host) => {
                h.write(&bytes[..host.start]);
                h.write(&bytes[host.end..]);
            }
            None => h.write(&bytes),
        }
        h.finish()
    }
}

/// Where the `Host: ...\r\n` line right after the request line is.
fn host_line(bytes: &[u8]) -> Option<std::ops::Range<usize>> {
    let start = memchr::memmem::find(bytes, b"\r\n")? + 2;
    if !bytes[start..].starts_with(b"Host: ") {
        return None;
    }
    let len = memchr::memmem::find(&bytes[start..], b"\r\n")? + 2;
    Some(start..start + len)
}

/// A header that would break the request framing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("invalid header name '{0}'")]
    Name(String),
    #[error("invalid value for header '{0}': it contains a line break")]
    LineBreak(String),
}

/// Rejects header names/values that would break the request framing.
pub fn validate_header(name: &str, value: &str) -> Result<(), HeaderError> {
    let bad_name = name.is_empty() || name.bytes().any(|b| !(b.is_ascii_graphic()) || b == b':');
    if bad_name {
        return Err(HeaderError::Name(name.to_string()));
    }
    if value.bytes().any(|b| b == b'\r' || b == b'\n') {
        return Err(HeaderError::LineBreak(name.to_string()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_a_request_reaches_the_server_by_does_not_change_its_hash() {
        let build = |host: &str, body: &[u8]| {
            HeadTemplate::new(Method::Post, "/v1/completions", host, &[]).build(
                Some("id-1"),
                None,
                body,
            )
        };
        let a = build("127.0.0.1:8000", b"x").hash_without_host();
        assert_eq!(a, build("127.0.0.2:8000", b"x").hash_without_host());
        assert_ne!(a, build("127.0.0.1:8000", b"y").hash_without_host());
    }

    #[test]
    fn builds_a_complete_post() {
        let t = HeadTemplate::new(
            Method::Post,
            "/v1/completions",
            "127.0.0.1:8000",
            &[("Authorization".into(), "Bearer k".into())],
        );
        let req = t.build(Some("bench-1"), Some("application/json"), br#"{"a":1}"#);
        let text = String::from_utf8(req.to_vec()).unwrap();
        assert!(text.starts_with("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:8000\r\n"));
        assert!(text.contains("Authorization: Bearer k\r\n"));
        assert!(text.contains("x-request-id: bench-1\r\n"));
        assert!(text.contains("Content-Length: 7\r\n"));
        assert!(text.ends_with("\r\n\r\n{\"a\":1}"));
        let mut headers = [httparse::EMPTY_HEADER; 16];
        let mut parsed = httparse::Request::new(&mut headers);
        let n = parsed.parse(text.as_bytes()).unwrap().unwrap();
        assert_eq!(&text.as_bytes()[n..], br#"{"a":1}"#);
    }

    #[test]
    fn parts_build_the_same_request_without_joining_the_body() {
        let t = HeadTemplate::new(Method::Post, "/v1/completions", "h", &[]);
        let body = br#"{"p":[1,2,3]}"#;
        let whole = t.build(Some("r"), Some("application/json"), body);
        let pieces = vec![
            Bytes::from_static(br#"{"p":"#),
            Bytes::from_static(b"[1,2"),
            Bytes::new(),
            Bytes::from_static(b",3]}"),
        ];
        let parts = t.build_parts(Some("r"), Some("application/json"), pieces);
        assert_eq!(parts.to_vec(), whole.to_vec());
        assert_eq!(parts.parts.len(), 4, "empty parts are dropped");
    }

    #[test]
    fn a_host_header_given_replaces_ours_and_is_sent_once() {
        let given = [
            ("host".to_owned(), "api.example.com".to_owned()),
            ("User-Agent".to_owned(), "mine/1".to_owned()),
            ("X-A".to_owned(), "1".to_owned()),
        ];
        let req = HeadTemplate::new(Method::Post, "/v1/completions", "10.0.0.1:8000", &given)
            .build(None, Some("application/json"), b"{}");
        let text = String::from_utf8(req.to_vec()).unwrap();
        assert!(text.starts_with("POST /v1/completions HTTP/1.1\r\nhost: api.example.com\r\n"));
        let count = |name: &str| {
            text.lines()
                .filter(|l| l.to_ascii_lowercase().starts_with(&format!("{name}:")))
                .count()
        };
        for name in ["host", "user-agent", "accept", "x-a", "content-length"] {
            assert_eq!(count(name), 1, "{name} in {text}");
        }
        assert!(!text.contains("10.0.0.1"));
        assert!(text.contains("User-Agent: mine/1\r\n"));
    }

    #[test]
    fn get_has_no_body_headers() {
        let req = HeadTemplate::new(Method::Get, "/v1/models", "h", &[]).build(None, None, b"");
        let text = String::from_utf8(req.to_vec()).unwrap();
        assert!(!text.contains("Content-Length"));
        assert!(text.ends_with("\r\n\r\n"));
    }

    #[test]
    fn header_validation() {
        assert!(validate_header("X-A", "b").is_ok());
        assert!(validate_header("X A", "b").is_err());
        assert!(validate_header("X-A", "b\r\nEvil: 1").is_err());
    }
}
