//! Control-plane requests outside the measured window: `/v1/models`, `/tokenize`, `/metrics`,
//! `/start_profile`, the ready check. Blocking calls for the orchestration code, run on a
//! small monoio runtime of their own over the same connection code as the engine.

use std::time::Duration;

use crate::engine::runtime::{build_runtime, ResolvedDriver};

use super::conn::{Connection, Endpoint};
use super::request::{HeadTemplate, Method};
use super::response::{parse_head, BodyDecoder};

/// A complete response.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub reason: String,
    pub body: Vec<u8>,
}

impl Response {
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Bodies of control responses are small; anything larger is an error.
const MAX_BODY: usize = 32 << 20;

/// Sends one request and reads the whole response, within `timeout`.
pub fn request(
    driver: ResolvedDriver,
    ep: &Endpoint,
    head: &HeadTemplate,
    body: Option<&[u8]>,
    timeout: Duration,
) -> Result<Response, String> {
    let mut rt = build_runtime(driver).map_err(|e| format!("cannot start a runtime: {e}"))?;
    rt.block_on(async {
        match monoio::time::timeout(timeout, exchange(ep, head, body)).await {
            Ok(r) => r,
            Err(_) => Err(format!("no response within {timeout:?}")),
        }
    })
}

/// `GET path` convenience.
pub fn get(
    driver: ResolvedDriver,
    ep: &Endpoint,
    host: &str,
    path: &str,
    headers: &[(String, String)],
    timeout: Duration,
) -> Result<Response, String> {
    request(
        driver,
        ep,
        &HeadTemplate::new(Method::Get, path, host, headers),
        None,
        timeout,
    )
}

/// `POST path` with a JSON body.
pub fn post_json(
    driver: ResolvedDriver,
    ep: &Endpoint,
    host: &str,
    path: &str,
    headers: &[(String, String)],
    body: &[u8],
    timeout: Duration,
) -> Result<Response, String> {
    request(
        driver,
        ep,
        &HeadTemplate::new(Method::Post, path, host, headers),
        Some(body),
        timeout,
    )
}

async fn exchange(
    ep: &Endpoint,
    head: &HeadTemplate,
    body: Option<&[u8]>,
) -> Result<Response, String> {
    let mut conn = Connection::open(ep)
        .await
        .map_err(|e| format!("cannot connect to {}: {e}", ep.addr))?;
    let req = match body {
        Some(b) => head.build(None, Some("application/json"), b),
        None => head.build(None, None, b""),
    };
    conn.write_parts(&req.parts)
        .await
        .map_err(|e| format!("write failed: {e}"))?;
    let mut raw = Vec::new();
    let mut buf = Vec::with_capacity(16 * 1024);
    loop {
        buf.clear();
        let (res, b) = conn.read(buf).await;
        buf = b;
        let n = res.map_err(|e| format!("read failed: {e}"))?;
        raw.extend_from_slice(&buf[..n]);
        if raw.len() > MAX_BODY {
            return Err("response too large".into());
        }
        if let Some(resp) = try_complete(&raw, n == 0)? {
            return Ok(resp);
        }
        if n == 0 {
            return Err("the server closed the connection before the response was complete".into());
        }
    }
}

/// Parses `raw` as a whole response when it is complete.
fn try_complete(raw: &[u8], eof: bool) -> Result<Option<Response>, String> {
    let Some(head) = parse_head(raw).map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    let rest = &raw[head.head_len..];
    let mut decoder = BodyDecoder::new(head.body);
    let mut out = Vec::new();
    let (_, mut done) = decoder
        .decode_all(rest, |p| out.extend_from_slice(p))
        .map_err(|e| e.to_string())?;
    if !done && eof {
        decoder.finish().map_err(|e| e.to_string())?;
        done = true;
    }
    let body = done.then_some(out);
    Ok(body.map(|body| Response {
        status: head.status,
        reason: head.reason.to_string(),
        body,
    }))
}
