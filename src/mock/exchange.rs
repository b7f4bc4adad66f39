//! What a request handler works with and returns: the [`Exchange`] it writes into, the
//! [`Request`] it answers, the [`Served`] summary it hands back, and the JSON error answer
//! every handler may give. Shared by the connection, the endpoints and the model handlers,
//! which import it and not each other.

use super::faults::FaultKind;
use super::generation::{End, Script};
use super::io::Io;
use super::response::{self, HeadOpts};

/// What the endpoints write with: the socket plus per-connection scratch space.
#[derive(Debug)]
pub struct Exchange {
    /// Socket and write buffer.
    pub io: Io,
    /// Pre-serialized events of the current stream.
    pub script: Script,
    /// Scratch for bodies built before their length is known.
    pub scratch: Vec<u8>,
}

/// One request, as the endpoints see it.
#[derive(Debug)]
pub struct Request<'a> {
    /// The request body (decoded if it was chunked).
    pub body: &'a [u8],
    /// When the whole request had been received: every delay is measured from here.
    pub arrival: std::time::Instant,
    /// `X-Request-Id`, echoed in the response.
    pub request_id: Option<&'a [u8]>,
    /// The client asked to close after this response.
    pub close: bool,
    /// `HEAD`: send the head only.
    pub head_only: bool,
}

/// What serving a request produced, for statistics and the request log.
#[derive(Debug, Clone)]
pub struct Served {
    /// Status sent (200 for streams, also those cut short by a fault).
    pub status: u16,
    /// Keep the connection or close it.
    pub end: End,
    /// Rejected because of the request itself (400/404/405).
    pub rejected: bool,
    /// Sequence number (model requests).
    pub seq: Option<u64>,
    /// Injected fault.
    pub fault: Option<FaultKind>,
    /// `(hash, tokens)` of the prompt.
    pub prompt: Option<(u64, u64)>,
    /// Requested output tokens.
    pub max_tokens: Option<u64>,
    /// A write of the response failed: the client had closed the connection.
    pub client_closed: bool,
}

impl Served {
    /// A plain answer with `status` on a connection that stays open.
    pub fn new(status: u16) -> Served {
        Served {
            status,
            end: End::KeepAlive,
            rejected: false,
            seq: None,
            fault: None,
            prompt: None,
            max_tokens: None,
            client_closed: false,
        }
    }
}

/// The reason phrase of the statuses the mock sends.
fn reason(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        429 => "Too Many Requests",
        _ => "Internal Server Error",
    }
}

/// Answers with a vLLM-style JSON error; `allow` adds an `Allow` header (405).
pub fn error(
    ex: &mut Exchange,
    req: &Request<'_>,
    status: u16,
    message: &str,
    allow: Option<&str>,
) -> Served {
    ex.scratch.clear();
    response::error_body(&mut ex.scratch, status, message);
    let opts = HeadOpts {
        content_type: response::JSON,
        request_id: req.request_id,
        close: req.close,
        allow,
        extra: &[],
    };
    response::full(
        &mut ex.io.out,
        status,
        reason(status),
        &ex.scratch,
        &opts,
        req.head_only,
    );
    Served {
        rejected: matches!(status, 400 | 404 | 405),
        ..Served::new(status)
    }
}
