//! Request dispatch and the endpoints that are not model requests: `/v1/models`,
//! `/health`, `/metrics`, `/tokenize`, `/detokenize`, the profiler switches,
//! `/reset_prefix_cache`, and the JSON error answers (400/404/405/429/500).

use std::io::Write;

use super::body::{self, DetokenizeBody, TokenizeBody};
use super::ctx::{Shared, WorkerCtx};
use super::exchange::{error, Exchange, Request, Served};
use super::model;
use super::response::{self, HeadOpts};
use super::routes::Route;
use super::vllm_metrics;

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
        Route::Detokenize if shared.cfg.tokenize_endpoints => detokenize(shared, ex, req),
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
        extra: &[],
    };
    response::full(&mut ex.io.out, 200, "OK", body, &opts, req.head_only);
    Served::new(200)
}

/// `POST /tokenize`: `{"tokens":[…],"count":N,"max_model_len":M,"token_strs":null}`.
fn tokenize(shared: &Shared, ex: &mut Exchange, req: &Request<'_>) -> Served {
    let body = match body::parse::<TokenizeBody>(req.body) {
        Ok(b) => b,
        Err(e) => return error(ex, req, 400, &e.to_string(), None),
    };
    let add_special = body.add_special_tokens.or(body.add_special).unwrap_or(true);
    let Some(text) = body.prompt.or(body.text).or(body.content) else {
        return error(
            ex,
            req,
            400,
            "tokenize request without \"prompt\" (or \"text\")",
            None,
        );
    };
    let ids = match shared.tokenizer.encode(&text, add_special) {
        Ok(ids) => ids,
        Err(e) => return error(ex, req, 400, &e.to_string(), None),
    };
    let mut out = std::mem::take(&mut ex.scratch);
    out.clear();
    out.extend_from_slice(b"{\"tokens\":[");
    for (i, id) in ids.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let _ = write!(out, "{id}");
    }
    let _ = write!(
        out,
        "],\"count\":{},\"max_model_len\":{},\"token_strs\":null}}",
        ids.len(),
        shared.cfg.max_model_len
    );
    let served = ok(ex, req, response::JSON, &out);
    ex.scratch = out;
    served
}

/// `POST /detokenize`: `{"prompt":"…"}`.
fn detokenize(shared: &Shared, ex: &mut Exchange, req: &Request<'_>) -> Served {
    let tokens = match body::parse::<DetokenizeBody>(req.body) {
        Ok(b) => b.tokens,
        Err(e) => return error(ex, req, 400, &e.to_string(), None),
    };
    let Some(tokens) = tokens else {
        return error(ex, req, 400, "detokenize request without \"tokens\"", None);
    };
    let text = match shared.tokenizer.decode(&tokens) {
        Ok(text) => text,
        Err(e) => return error(ex, req, 400, &e.to_string(), None),
    };
    let body = serde_json::json!({ "prompt": text }).to_string();
    ok(ex, req, response::JSON, body.as_bytes())
}

/// Prometheus text with vLLM's names (see `vllm_metrics`).
fn metrics_text(shared: &Shared, out: &mut Vec<u8>) {
    vllm_metrics::render(
        out,
        &prometheus_label(&shared.cfg.model),
        shared.stats.in_flight(),
        shared.prefix.counters(),
        shared.stats.workers().iter().map(|w| &w.vllm),
    );
    if shared.cfg.dcgm_gpus > 0 {
        let generated = shared
            .stats
            .workers()
            .iter()
            .map(|w| w.vllm.generated_tokens())
            .sum();
        super::dcgm::render(out, shared.cfg.dcgm_gpus, generated);
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
