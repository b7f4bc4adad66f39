//! Request dispatch and the endpoints that are not model requests: `/v1/models`,
//! `/health`, `/metrics`, `/tokenize`, `/detokenize`, the profiler switches,
//! `/reset_prefix_cache`, and the JSON error answers (400/404/405/429/500).

use std::io::Write;

use super::body::{self, DetokenizeBody, TokenizeBody};
use super::conn::Exchange;
use super::faults::FaultKind;
use super::generation::End;
use super::model;
use super::response::{self, HeadOpts};
use super::routes::Route;
use super::server::{Shared, WorkerCtx};
use super::toy_tokenizer;

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
        }
    }
}

/// Serves a routed request. Like every handler, it leaves the last bytes of the response
/// in `ex.io.out`: the connection counts the request first and then writes them, so a
/// client that has read its whole response also sees it in the statistics.
pub async fn serve(ctx: &WorkerCtx, ex: &mut Exchange, route: Route, req: &Request<'_>) -> Served {
    let shared = &ctx.shared;
    if route.is_model() {
        return model::serve(ctx, ex, route, req).await;
    }
    match route {
        Route::Models => ok(ex, req, response::JSON, &shared.models_body),
        Route::Metrics if shared.cfg.metrics_endpoint => {
            let mut text = std::mem::take(&mut ex.scratch);
            text.clear();
            metrics_text(shared, &mut text);
            let served = ok(ex, req, response::PROMETHEUS, &text);
            ex.scratch = text;
            served
        }
        Route::Tokenize if shared.cfg.tokenize_endpoints => tokenize(shared, ex, req),
        Route::Detokenize if shared.cfg.tokenize_endpoints => detokenize(ex, req),
        Route::Metrics | Route::Tokenize | Route::Detokenize => error(
            ex,
            req,
            404,
            "not found: this endpoint is disabled on this mock server",
            None,
        ),
        Route::ResetPrefixCache => {
            shared.prefix.clear();
            ok(ex, req, "", b"")
        }
        // /health, /start_profile, /stop_profile: 200 with an empty body, as vLLM answers.
        _ => ok(ex, req, "", b""),
    }
}

/// Answers 200 with `body`.
fn ok(ex: &mut Exchange, req: &Request<'_>, content_type: &str, body: &[u8]) -> Served {
    let opts = HeadOpts {
        content_type,
        request_id: req.request_id,
        close: req.close,
        allow: None,
    };
    response::full(&mut ex.io.out, 200, "OK", body, &opts, req.head_only);
    Served::new(200)
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

/// `POST /tokenize`: `{"count":N,"max_model_len":M,"tokens":[…],"token_strs":null}`.
fn tokenize(shared: &Shared, ex: &mut Exchange, req: &Request<'_>) -> Served {
    let text = match body::parse::<TokenizeBody>(req.body) {
        Ok(b) => b.prompt.or(b.text).or(b.content),
        Err(msg) => return error(ex, req, 400, &msg, None),
    };
    let Some(text) = text else {
        return error(
            ex,
            req,
            400,
            "tokenize request without \"prompt\" (or \"text\")",
            None,
        );
    };
    let mut out = std::mem::take(&mut ex.scratch);
    out.clear();
    out.extend_from_slice(b"{\"tokens\":[");
    let mut count = 0u64;
    for id in toy_tokenizer::tokenize(&text) {
        if count > 0 {
            out.push(b',');
        }
        let _ = write!(out, "{id}");
        count += 1;
    }
    let _ = write!(
        out,
        "],\"count\":{count},\"max_model_len\":{},\"token_strs\":null}}",
        shared.cfg.max_model_len
    );
    let served = ok(ex, req, response::JSON, &out);
    ex.scratch = out;
    served
}

/// `POST /detokenize`: `{"prompt":"…"}`.
fn detokenize(ex: &mut Exchange, req: &Request<'_>) -> Served {
    let tokens = match body::parse::<DetokenizeBody>(req.body) {
        Ok(b) => b.tokens,
        Err(msg) => return error(ex, req, 400, &msg, None),
    };
    let Some(tokens) = tokens else {
        return error(ex, req, 400, "detokenize request without \"tokens\"", None);
    };
    let text = toy_tokenizer::detokenize(&tokens);
    let body = serde_json::json!({ "prompt": text }).to_string();
    ok(ex, req, response::JSON, body.as_bytes())
}

/// Prometheus text: running/waiting gauges and the toy prefix-cache counters.
fn metrics_text(shared: &Shared, out: &mut Vec<u8>) {
    let label = prometheus_label(&shared.cfg.model);
    let (queries, hits) = shared.prefix.counters();
    let series: [(&str, &str, &str, f64); 4] = [
        (
            "vllm:num_requests_running",
            "gauge",
            "Number of requests in model execution batches.",
            shared.stats.in_flight() as f64,
        ),
        (
            "vllm:num_requests_waiting",
            "gauge",
            "Number of requests waiting to be processed.",
            0.0,
        ),
        (
            "vllm:prefix_cache_queries",
            "counter",
            "Prefix cache queries, in terms of number of queried tokens.",
            queries as f64,
        ),
        (
            "vllm:prefix_cache_hits",
            "counter",
            "Prefix cache hits, in terms of number of cached tokens.",
            hits as f64,
        ),
    ];
    for (name, kind, help, value) in series {
        let sample = if kind == "counter" {
            format!("{name}_total")
        } else {
            name.to_string()
        };
        let _ = write!(
            out,
            "# HELP {sample} {help}\n# TYPE {sample} {kind}\n{sample}{{model_name=\"{label}\"}} {value:?}\n"
        );
    }
}

/// Escapes a Prometheus label value (`\`, `"`, newline).
fn prometheus_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_escaping() {
        assert_eq!(prometheus_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
