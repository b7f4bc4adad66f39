//! Model requests — completions, chat, responses, embeddings, pooling, rerank — from parsed body to
//! timed response: sequence number, in-flight gauge, toy prefix cache, fault decision,
//! schedule, and the response itself.
//!
//! Non-streaming answers are timed like the stream they replace: a generation answers at
//! the last chunk's deadline, embeddings/pooling/rerank after `first_token_delay`.

use std::io::Write;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use super::body::{
    self, Digest, GenerationBody, MessagesBody, PoolingBody, RerankBody, ResponsesBody,
};
use super::ctx::{unix_now, WorkerCtx};
use super::exchange::{self, Exchange, Request, Served};
use super::faults::{self, FaultKind};
use super::form;
use super::generation::{self, End, Generation, Shape};
use super::hash::SplitMix64;
use super::response::{self, HeadOpts};
use super::routes::Route;
use super::timing::Schedule;
use super::vllm_metrics::Finished;
use crate::runtime::timer::Timers;

/// Stream id of response ids, distinct from the fault and jitter streams.
const ID_STREAM: u64 = 0x1d;
/// Dimensions of the mock's embedding vectors.
pub const EMBEDDING_DIM: usize = 8;

/// A model request after its body was read.
struct Job {
    prompt: Digest,
    max_tokens: Option<u64>,
    kind: Kind,
}

enum Kind {
    Generate {
        gen: Generation,
        stream: bool,
    },
    /// Embeddings (`"embedding"` objects) or pooling (`"pooling"` objects).
    Pool {
        embeddings: bool,
    },
    Rerank {
        query: u64,
    },
}

/// Serves one model request (leaving the response's last bytes unwritten, see
/// [`endpoints::serve`]); it counts as in flight until this returns.
pub async fn serve(ctx: &WorkerCtx, ex: &mut Exchange, route: Route, req: &Request<'_>) -> Served {
    let shared = &ctx.shared;
    let cfg = &shared.cfg;
    let seq = shared.seq.fetch_add(1, Relaxed);
    if let Some(crash) = cfg.crash.filter(|c| c.at_request == seq) {
        // A crashed server never answers: the connection waits, unanswered, for the crash's
        // stop or cut to close it (after the listener, when the server stays down).
        ctx.crash(crash.then);
        return std::future::pending().await;
    }
    let _running = shared.stats.enter();
    let mut job = match parse(ctx, route, req.body, seq) {
        Ok(job) => job,
        Err(e) => {
            let mut served = exchange::error(ex, req, 400, &e.to_string(), None);
            served.seq = Some(seq);
            return served;
        }
    };
    let cached_tokens = shared.prefix.observe(&job.prompt);
    let fault = faults::decide(&cfg.faults, cfg.seed, seq);
    if let Some(kind) = fault {
        ctx.counters().fault(kind);
    }
    if let Kind::Generate { gen, .. } = &mut job.kind {
        gen.fault = fault;
        gen.cached_tokens = cached_tokens;
    }
    let mut served = Served {
        seq: Some(seq),
        fault,
        prompt: Some((job.prompt.hash, job.prompt.tokens)),
        max_tokens: job.max_tokens,
        ..Served::new(200)
    };
    let error_event = matches!(
        &job.kind,
        Kind::Generate { gen, stream: true } if gen.shape.has_error_event()
    );
    let rejected_by_fault = match fault {
        Some(FaultKind::Error500) => {
            Some((500, "injected fault: the mock server failed this request"))
        }
        Some(FaultKind::StreamError) if !error_event => {
            Some((500, "injected fault: the mock server failed this request"))
        }
        Some(FaultKind::Error429) => {
            Some((429, "injected fault: the mock server is rate limiting"))
        }
        _ => None,
    };
    if let Some((status, msg)) = rejected_by_fault {
        let e = exchange::error(ex, req, status, msg, None);
        served.status = e.status;
        return served;
    }
    // With slots, the request waits for one, and its timing starts when it has it.
    let (_slot, start) = match &shared.slots {
        Some(slots) => match slots.try_take() {
            Some(slot) => (Some(slot), req.arrival),
            None => (Some(slots.take(&ctx.timers).await), Instant::now()),
        },
        None => (None, req.arrival),
    };
    let mut schedule = Schedule::new(
        start,
        cfg.first_token_delay,
        cfg.token_interval,
        cfg.jitter,
        cfg.seed,
        seq,
    );
    let opts = HeadOpts {
        request_id: req.request_id,
        close: req.close,
        extra: &cfg.response_headers,
        ..HeadOpts::default()
    };
    let generated = match &job.kind {
        Kind::Generate { gen, .. } if fault.is_none() => Some(gen.tokens),
        _ => None,
    };
    let first_token = schedule.clone().next_deadline();
    served.end = match job.kind {
        Kind::Generate { gen, stream: true } => {
            ex.script.build(&gen, &shared.model_json);
            let opts = HeadOpts {
                content_type: response::SSE,
                ..opts
            };
            if let Some(trace) = &mut ex.io.trace {
                let chunks = usize::try_from(gen.chunks()).unwrap_or(0);
                trace.begin(req.arrival, chunks);
            }
            let end = generation::stream(
                &mut ex.io,
                &ctx.timers,
                &gen,
                &ex.script,
                &mut schedule,
                &opts,
                cfg.stall_for,
            )
            .await
            // The client went away mid-stream: still a request served (and counted).
            .unwrap_or_else(|_| {
                served.client_closed = true;
                End::Close
            });
            if let Some(trace) = &mut ex.io.trace {
                // Only what a client counts as a success belongs in the emitted timeline.
                trace.end(end == End::KeepAlive && gen.fault.is_none());
            }
            if cfg.close_after_response {
                End::Close
            } else {
                end
            }
        }
        Kind::Generate { gen, stream: false } => {
            let first = schedule.next_deadline();
            schedule.pause(gen.thinking);
            let done = (1..gen.chunks()).fold(first, |_, _| schedule.next_deadline());
            let model = &shared.model_json;
            let fill = |out: &mut Vec<u8>| gen.body(out, model);
            delayed_json(
                ex,
                &ctx.timers,
                &opts,
                fault,
                (first, done),
                cfg.stall_for,
                fill,
            )
            .await
        }
        Kind::Pool { embeddings } => {
            let at = schedule.next_deadline();
            let fill = |out: &mut Vec<u8>| pooling_body(out, ctx, seq, &job.prompt, embeddings);
            delayed_json(ex, &ctx.timers, &opts, fault, (at, at), cfg.stall_for, fill).await
        }
        Kind::Rerank { query } => {
            let at = schedule.next_deadline();
            let fill = |out: &mut Vec<u8>| rerank_body(out, ctx, seq, query, &job.prompt);
            delayed_json(ex, &ctx.timers, &opts, fault, (at, at), cfg.stall_for, fill).await
        }
    };
    if let Some(generated_tokens) = generated {
        ctx.counters().vllm.finished(&Finished {
            prompt_tokens: job.prompt.tokens,
            cached_tokens,
            generated_tokens,
            arrival: req.arrival,
            first_token,
            end: Instant::now(),
        });
    }
    served
}

/// What is wrong with a model request: the one line of its 400 answer.
#[derive(Debug, thiserror::Error)]
enum BadRequest {
    #[error(transparent)]
    Body(#[from] body::InvalidBody),
    #[error(transparent)]
    Form(#[from] form::FormError),
    #[error("{0} request without {1}")]
    Missing(&'static str, &'static str),
    #[error("max_tokens must be at least 1")]
    NoTokens,
    #[error("max_tokens {tokens} exceeds max_model_len {max}")]
    TooManyTokens { tokens: u64, max: usize },
    /// vLLM's words (its serving layer's check of prompt plus completion).
    #[error(
        "This model's maximum context length is {max} tokens. However, you requested \
         {} tokens ({prompt} in the messages, {tokens} in the completion). Please reduce the \
         length of the messages or completion.",
        prompt + tokens
    )]
    PastContext {
        prompt: u64,
        tokens: u64,
        max: usize,
    },
}

/// Reads the body of a model request, or says in one line what is wrong with it.
fn parse(ctx: &WorkerCtx, route: Route, body: &[u8], seq: u64) -> Result<Job, BadRequest> {
    match route {
        Route::Completions | Route::ChatCompletions => {
            let chat = route == Route::ChatCompletions;
            let b: GenerationBody = body::parse_prompts(body, &ctx.shared.tokenizer)?;
            let prompt = if chat {
                b.messages
                    .ok_or(BadRequest::Missing("chat", "\"messages\""))?
                    .0
            } else {
                b.prompt
                    .ok_or(BadRequest::Missing("completion", "\"prompt\""))?
                    .0
            };
            let asked = if chat {
                b.max_completion_tokens.or(b.max_tokens)
            } else {
                b.max_tokens.or(b.max_completion_tokens)
            };
            let stream = b.stream.unwrap_or(false);
            let include_usage = b
                .stream_options
                .and_then(|o| o.include_usage)
                .unwrap_or(false);
            let shape = if chat {
                Shape::Chat
            } else {
                Shape::Completions
            };
            let wanted = Wanted {
                asked,
                stream,
                usage: include_usage || !stream,
            };
            generation_job(ctx, seq, shape, prompt, wanted)
        }
        Route::Responses => {
            let b: ResponsesBody = body::parse_prompts(body, &ctx.shared.tokenizer)?;
            let prompt = b
                .input
                .ok_or(BadRequest::Missing("responses", "\"input\""))?
                .0;
            let wanted = Wanted {
                asked: b.max_output_tokens,
                stream: b.stream.unwrap_or(false),
                // The Responses API always reports usage (in the terminal event).
                usage: true,
            };
            generation_job(ctx, seq, Shape::Responses, prompt, wanted)
        }
        Route::Messages => {
            let b: MessagesBody = body::parse_prompts(body, &ctx.shared.tokenizer)?;
            let asked = b
                .max_tokens
                .ok_or(BadRequest::Missing("messages", "\"max_tokens\""))?;
            let stream = b.stream.unwrap_or(false);
            let prompt = b
                .prompt()
                .ok_or(BadRequest::Missing("messages", "\"messages\""))?;
            let wanted = Wanted {
                asked: Some(asked),
                stream,
                // The Messages API always reports usage.
                usage: true,
            };
            generation_job(ctx, seq, Shape::Anthropic, prompt, wanted)
        }
        Route::Transcriptions => {
            let form = form::parse(body)?;
            let number = |name| form.field(name).and_then(|v| v.trim().parse::<u64>().ok());
            // The uploaded audio stands for the prompt: one token per KiB, at least one.
            let file_len = form
                .file_len
                .ok_or(BadRequest::Missing("transcription", "a file"))?;
            let prompt = Digest {
                tokens: (file_len as u64 / 1024).max(1),
                hash: file_len as u64,
                items: vec![file_len as u64],
                blocks: Vec::new(),
            };
            let stream =
                form.field("stream") == Some("True") || form.field("stream") == Some("true");
            let usage = matches!(form.field("stream_include_usage"), Some("True" | "true"));
            let wanted = Wanted {
                asked: number("max_completion_tokens"),
                stream,
                usage: usage || !stream,
            };
            generation_job(ctx, seq, Shape::Transcription, prompt, wanted)
        }
        Route::Embeddings | Route::EmbeddingsInfinity | Route::Pooling | Route::PoolingV1 => {
            let b: PoolingBody = body::parse_prompts(body, &ctx.shared.tokenizer)?;
            let prompt = match (b.input, b.messages) {
                (Some(t), _) => t.0,
                (None, Some(m)) => m.0,
                (None, None) => {
                    return Err(BadRequest::Missing("pooling", "\"input\" or \"messages\""))
                }
            };
            Ok(Job {
                prompt,
                max_tokens: None,
                kind: Kind::Pool {
                    embeddings: matches!(route, Route::Embeddings | Route::EmbeddingsInfinity),
                },
            })
        }
        _ => {
            let b: RerankBody = body::parse_prompts(body, &ctx.shared.tokenizer)?;
            let query = b.query.ok_or(BadRequest::Missing("rerank", "\"query\""))?.0;
            let docs = b
                .documents
                .ok_or(BadRequest::Missing("rerank", "\"documents\""))?
                .0;
            let prompt = Digest {
                tokens: query.tokens + docs.tokens,
                ..docs
            };
            Ok(Job {
                prompt,
                max_tokens: None,
                kind: Kind::Rerank { query: query.hash },
            })
        }
    }
}

/// What a generation request asks for.
struct Wanted {
    /// Output tokens asked for (`None`: the mock's default).
    asked: Option<u64>,
    stream: bool,
    /// The client asked for usage (the mock's `usage` switch still applies).
    usage: bool,
}

/// A generation job, or why its output length is refused.
fn generation_job(
    ctx: &WorkerCtx,
    seq: u64,
    shape: Shape,
    prompt: Digest,
    wanted: Wanted,
) -> Result<Job, BadRequest> {
    let cfg = &ctx.shared.cfg;
    let tokens = wanted.asked.unwrap_or(cfg.num_tokens as u64);
    if tokens == 0 {
        return Err(BadRequest::NoTokens);
    }
    if tokens > cfg.max_model_len as u64 {
        return Err(BadRequest::TooManyTokens {
            tokens,
            max: cfg.max_model_len,
        });
    }
    if cfg.refuse_past_context && prompt.tokens + tokens > cfg.max_model_len as u64 {
        return Err(BadRequest::PastContext {
            prompt: prompt.tokens,
            tokens,
            max: cfg.max_model_len,
        });
    }
    // Only the APIs with a reasoning field think.
    let reasons = matches!(shape, Shape::Chat | Shape::Responses | Shape::Anthropic);
    let reasoning = if reasons {
        tokens.min(cfg.reasoning_tokens as u64)
    } else {
        0
    };
    let gen = Generation {
        shape,
        tokens,
        per_chunk: cfg.tokens_per_chunk as u64,
        reasoning,
        thinking: if reasoning > 0 {
            cfg.thinking_delay
        } else {
            Duration::ZERO
        },
        prompt_tokens: prompt.tokens,
        cached_tokens: 0,
        usage: cfg.usage && wanted.usage,
        usage_completion_tokens: cfg.usage_completion_tokens,
        fault: None,
        id: response_id(cfg.seed, seq),
        created: unix_now(),
        padding: cfg.padding,
    };
    Ok(Job {
        prompt,
        max_tokens: wanted.asked,
        kind: Kind::Generate {
            gen,
            stream: wanted.stream,
        },
    })
}

/// The 128-bit response id of request `seq`.
fn response_id(seed: u64, seq: u64) -> u128 {
    let mut g = SplitMix64::new(seed ^ ID_STREAM, seq);
    (u128::from(g.next_u64()) << 64) | u128::from(g.next_u64())
}

/// A non-streaming 200 JSON answer at `at.1`; faults act at `at.0` (the first token's
/// time): disconnect closes, stall waits `stall_for` and closes, endless sends a body that
/// never ends; or at `at.1`: malformed truncates the body, close-after-head sends the head
/// (announcing the whole body) alone.
async fn delayed_json(
    ex: &mut Exchange,
    timers: &Timers,
    opts: &HeadOpts<'_>,
    fault: Option<FaultKind>,
    at: (Instant, Instant),
    stall_for: Duration,
    fill: impl FnOnce(&mut Vec<u8>),
) -> End {
    timers.sleep_until(at.0).await;
    match fault {
        Some(FaultKind::Disconnect) => return End::Close,
        Some(FaultKind::Endless) => return endless_body(ex, timers, opts).await,
        Some(FaultKind::Stall) => {
            timers.sleep(stall_for).await;
            return End::Close;
        }
        _ => {}
    }
    timers.sleep_until(at.1).await;
    ex.scratch.clear();
    fill(&mut ex.scratch);
    if fault == Some(FaultKind::Malformed) {
        ex.scratch.truncate(ex.scratch.len() / 2);
    }
    let opts = HeadOpts {
        content_type: response::JSON,
        ..*opts
    };
    let head_only = fault == Some(FaultKind::CloseAfterHead);
    response::full(&mut ex.io.out, 200, "OK", &ex.scratch, &opts, head_only);
    if head_only {
        End::Close
    } else {
        End::KeepAlive
    }
}

/// The endless fault of a non-streaming answer: a chunked JSON head, then blank chunks
/// (16 KiB of spaces each) until the client closes the connection.
async fn endless_body(ex: &mut Exchange, timers: &Timers, opts: &HeadOpts<'_>) -> End {
    const FILL: usize = 16 << 10;
    let opts = HeadOpts {
        content_type: response::JSON,
        ..*opts
    };
    response::head(&mut ex.io.out, 200, "OK", response::Framing::Chunked, &opts);
    ex.scratch.clear();
    ex.scratch
        .extend_from_slice(format!("{FILL:x}\r\n").as_bytes());
    ex.scratch.resize(ex.scratch.len() + FILL, b' ');
    ex.scratch.extend_from_slice(b"\r\n");
    let _ = generation::endless(&mut ex.io, timers, &ex.scratch, None).await;
    End::Close
}

/// A deterministic unit vector for one input.
fn embedding(seed: u64, item: u64) -> [f32; EMBEDDING_DIM] {
    let mut g = SplitMix64::new(seed, item);
    let mut v = [0.0; EMBEDDING_DIM];
    for x in &mut v {
        *x = g.next_signed_unit();
    }
    let norm = v
        .iter()
        .map(|x| x * x)
        .sum::<f64>()
        .sqrt()
        .max(f64::MIN_POSITIVE);
    v.map(|x| (x / norm) as f32)
}

fn usage_no_completion(out: &mut Vec<u8>, prompt_tokens: u64) {
    let _ = write!(
        out,
        "\"usage\":{{\"prompt_tokens\":{prompt_tokens},\"total_tokens\":{prompt_tokens},\"completion_tokens\":0}}"
    );
}

/// `/v1/embeddings` (`"object":"embedding","embedding":[…]`) or pooling
/// (`"object":"pooling","data":[…]`) body: one vector per input.
fn pooling_body(out: &mut Vec<u8>, ctx: &WorkerCtx, seq: u64, prompt: &Digest, embeddings: bool) {
    let (prefix, object, field) = if embeddings {
        ("embd", "embedding", "embedding")
    } else {
        ("pool", "pooling", "data")
    };
    let seed = ctx.shared.cfg.seed;
    let _ = write!(
        out,
        "{{\"id\":\"{prefix}-{:032x}\",\"object\":\"list\",\"created\":{},\"model\":{},",
        response_id(seed, seq),
        unix_now(),
        ctx.shared.model_json
    );
    response::padding_member(out, ctx.shared.cfg.padding);
    out.extend_from_slice(b"\"data\":[");
    for (i, &item) in prompt.items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let _ = write!(out, "{{\"index\":{i},\"object\":\"{object}\",\"{field}\":");
        let _ = serde_json::to_writer(&mut *out, &embedding(seed, item));
        out.push(b'}');
    }
    out.extend_from_slice(b"],");
    usage_no_completion(out, prompt.tokens);
    out.push(b'}');
}

/// `/rerank` body: every document scored in `[0, 1)` from the query and document hashes,
/// best first.
fn rerank_body(out: &mut Vec<u8>, ctx: &WorkerCtx, seq: u64, query: u64, docs: &Digest) {
    let seed = ctx.shared.cfg.seed;
    let mut scored: Vec<(usize, f64)> = docs
        .items
        .iter()
        .enumerate()
        .map(|(i, &d)| (i, SplitMix64::new(seed ^ query, d).next_f64()))
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let _ = write!(
        out,
        "{{\"id\":\"rerank-{:032x}\",\"model\":{},",
        response_id(seed, seq),
        ctx.shared.model_json
    );
    response::padding_member(out, ctx.shared.cfg.padding);
    usage_no_completion(out, docs.tokens);
    out.extend_from_slice(b",\"results\":[");
    for (n, (i, score)) in scored.iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        let _ = write!(out, "{{\"index\":{i},\"relevance_score\":");
        let _ = serde_json::to_writer(&mut *out, score);
        out.push(b'}');
    }
    out.extend_from_slice(b"]}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embeddings_are_deterministic_unit_vectors() {
        let a = embedding(1, 42);
        assert_eq!(a, embedding(1, 42));
        assert_ne!(a, embedding(2, 42));
        assert_ne!(a, embedding(1, 43));
        let norm: f64 = a
            .iter()
            .map(|&x| f64::from(x) * f64::from(x))
            .sum::<f64>()
            .sqrt();
        assert!((norm - 1.0).abs() < 1e-6, "{norm}");
    }

    #[test]
    fn response_ids_differ_per_request() {
        assert_eq!(response_id(5, 1), response_id(5, 1));
        assert_ne!(response_id(5, 1), response_id(5, 2));
    }
}
