//! The server's control plane, outside the measured window: where the server (and each
//! replica) is, the headers every request carries, and the calls a run makes around its
//! requests: `/v1/models` (the model and whether the server lists it), `/tokenize` as a
//! tokenizer of last resort, `/metrics` (read with `server_metrics`' one Prometheus parser),
//! `/reset_prefix_cache`, `/start_profile` and `/stop_profile`, and the ready check's loop.
//!
//! Below `modes` and above `config`'s reach: it is given the connection settings, not the
//! configuration, so the orchestration decides what to call and this module only how.
//! Nothing here prints: a call that keeps the run waiting says so through the [`Notice`]
//! it was given. What goes wrong is a [`ControlPlaneError`], each variant its one line.

use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::http::conn::{tls_setup, Endpoint, TlsError};
use crate::http::control::{self, ControlError};
use crate::http::source::{SourceAddrs, SourceError};
use crate::http::url::{BaseUrl, ResolveError, Scheme};
use crate::runtime::ResolvedDriver;
use crate::server_metrics::exposition::{self, Scrape};
use crate::server_metrics::{HttpSource, ScrapeError, Source};
use crate::tokenizer::TokenizeEndpoint;
use crate::types::Backend;

/// Why a control-plane call failed: one line each, saying what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum ControlPlaneError {
    /// Nothing answers at the server's address: what to check, not a flag that would not
    /// help (`--model` or `--tokenizer` cannot make a missing server answer).
    #[error(
        "no server is reachable at {base} ({why}): start it, or point --base-url (or --host \
         and --port) at it; --mock-server runs a benchmark without one"
    )]
    Unreachable { base: BaseUrl, why: String },
    /// An `https://` server answered the TLS handshake in plain HTTP.
    #[error(
        "{base}: the server speaks HTTP, not HTTPS (it answered the TLS handshake with a \
         plain HTTP response); use http:// (--base-url {plain})"
    )]
    SpeaksHttp { base: BaseUrl, plain: BaseUrl },
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error(transparent)]
    Source(#[from] SourceError),
    /// A call that got no complete response.
    #[error(transparent)]
    Call(#[from] ControlError),
    /// `/v1/models` did not answer with a list (`why`: the call's error or the status).
    #[error("cannot list models at {url}: {why}; pass --model")]
    ModelsUnlisted { url: String, why: String },
    /// `/v1/models` answered with what is not JSON.
    #[error("{url} did not return JSON; pass --model")]
    ModelsNotJson {
        url: String,
        #[source]
        error: serde_json::Error,
    },
    #[error("{url} lists no model; pass --model")]
    NoModel { url: String },
    /// `--reset-prefix-cache`: the call got no answer.
    #[error("--reset-prefix-cache: POST {url}: {error}")]
    ResetUnanswered { url: String, error: ControlError },
    #[error(
        "--reset-prefix-cache: POST {url} returned HTTP {status} {reason}: vLLM serves it only \
         when started with VLLM_SERVER_DEV_MODE=1"
    )]
    ResetRefused {
        url: String,
        status: u16,
        reason: String,
    },
    #[error(
        "{url} returned HTTP {status} {reason}: is the server started with profiling enabled?"
    )]
    ProfileRefused {
        url: String,
        status: u16,
        reason: String,
    },
    /// The ready check's time passed; `why` is the last request's failure.
    #[error(
        "the endpoint is not ready after {secs}s: {why}; raise --ready-check-timeout-sec or \
         check the server"
    )]
    NotReady { secs: u64, why: String },
    /// `/tokenize` or `/detokenize` got no complete response.
    #[error("{url}: {error}")]
    TokenizeUnanswered { url: String, error: ControlError },
    #[error("{url}: HTTP {status} {reason}")]
    TokenizeRefused {
        url: String,
        status: u16,
        reason: String,
    },
    #[error("{url} did not return JSON")]
    TokenizeNotJson {
        url: String,
        #[source]
        error: serde_json::Error,
    },
    #[error("/tokenize returned no `tokens` list")]
    NoTokens,
    #[error("/tokenize returned a non-integer token")]
    NonIntegerToken,
    #[error("/detokenize returned neither `prompt` nor `content` text")]
    NoText,
}

type Result<T, E = ControlPlaneError> = std::result::Result<T, E>;

/// Where a control call that keeps the run waiting says so (the app's console, a note).
pub type Notice = Arc<dyn Fn(&str) + Send + Sync>;

/// How the run reaches its servers: what [`Target::connect`] needs besides their URLs.
pub struct Reach {
    pub driver: ResolvedDriver,
    /// `--insecure`: TLS without certificate checks.
    pub insecure: bool,
    pub connect_timeout: Duration,
    /// `--local-addrs`: loopback source addresses to spread connections over.
    pub local_addrs: usize,
    /// The headers every request carries ([`request_headers`]).
    pub headers: Vec<(String, String)>,
    /// How long a control call may wait (see [`Target::control_timeout`]).
    pub control_timeout: Duration,
    pub notice: Notice,
}

/// A resolved server: where to connect, what to send in `Host`, and the headers every request
/// carries (`Authorization`, `--header`).
pub struct Target {
    pub base: BaseUrl,
    pub endpoint: Endpoint,
    /// The replicas after the first (`--base-url` repeated): where each is and how to reach
    /// it. Control calls (models, tokenizer, profiling) go to the first only.
    pub more_replicas: Vec<(BaseUrl, Endpoint)>,
    pub driver: ResolvedDriver,
    pub headers: Vec<(String, String)>,
    /// Where a control call that keeps the run waiting says so.
    pub notice: Notice,
    /// How long a control call (models, tokenize, metrics) may wait: [`CONTROL_TIMEOUT`],
    /// or the request timeout when that is shorter (a server that accepts and never answers
    /// must not hold the run longer on its control plane than on a request).
    pub control_timeout: Duration,
}

impl Target {
    /// Where `base` and the `more` replicas are (addresses resolved now, TLS set up), and how
    /// control calls reach them.
    pub fn connect(base: BaseUrl, more: &[BaseUrl], reach: Reach) -> Result<Target> {
        let endpoint = endpoint_of(&reach, &base)?;
        let more_replicas = more
            .iter()
            .map(|u| Ok((u.clone(), endpoint_of(&reach, u)?)))
            .collect::<Result<_>>()?;
        Ok(Target {
            base,
            endpoint,
            more_replicas,
            driver: reach.driver,
            headers: reach.headers,
            notice: reach.notice,
            control_timeout: reach.control_timeout,
        })
    }

    /// Every server the run's requests go to, `base` first: its URL and where it is.
    pub fn each_replica(&self) -> impl Iterator<Item = (&BaseUrl, &Endpoint)> {
        std::iter::once((&self.base, &self.endpoint))
            .chain(self.more_replicas.iter().map(|(u, e)| (u, e)))
    }

    /// Every server the run's requests go to, for the engine.
    pub fn replicas(&self) -> crate::engine::Replicas {
        crate::engine::Replicas::new(
            self.each_replica()
                .map(|(u, e)| (e.clone(), u.host_header()))
                .collect(),
        )
    }

    /// The base URL of every replica, the first's first, as the report names them.
    pub fn replica_urls(&self) -> Vec<String> {
        self.each_replica().map(|(u, _)| u.to_string()).collect()
    }

    /// `GET path` with the run's headers.
    pub fn get(&self, path: &str, timeout: Duration) -> Result<control::Response, ControlError> {
        control::get(
            self.driver,
            &self.endpoint,
            &self.base.host_header(),
            &self.base.request_path(path),
            &self.headers,
            control::Wait {
                timeout,
                notice: &*self.notice,
            },
        )
    }

    /// `POST path` with a JSON body and the run's headers.
    pub fn post(
        &self,
        path: &str,
        body: &Value,
        timeout: Duration,
    ) -> Result<control::Response, ControlError> {
        self.post_to((&self.base, &self.endpoint), path, body, timeout)
    }

    /// [`Target::post`] to one replica (`base` and where it is).
    fn post_to(
        &self,
        (base, endpoint): (&BaseUrl, &Endpoint),
        path: &str,
        body: &Value,
        timeout: Duration,
    ) -> Result<control::Response, ControlError> {
        // A `Value` always serializes: its map keys are strings.
        let bytes = serde_json::to_vec(body).expect("a JSON value serializes");
        control::post_json(
            self.driver,
            endpoint,
            &base.host_header(),
            &base.request_path(path),
            &self.headers,
            &bytes,
            control::Wait {
                timeout,
                notice: &*self.notice,
            },
        )
    }

    /// The one line for a server that nothing answers at: what to check, not a flag that
    /// would not help (`--model` or `--tokenizer` cannot make a missing server answer).
    fn unreachable(&self, error: impl std::fmt::Display) -> ControlPlaneError {
        unreachable_at(&self.base, error)
    }

    /// Fails with [`Target::unreachable`]'s line when nothing accepts a connection at the
    /// server's address (checked once before the dataset is built, so a missing server is
    /// said first, not as a hint about --model or a block of failures).
    /// With several replicas, every one is checked.
    /// An `https://` replica that answers the TLS handshake in plain HTTP is said here too
    /// (at once, not after the handshake's timeout).
    pub fn check_reachable(&self) -> Result<()> {
        for (base, ep) in self.each_replica() {
            if let Err(e) = std::net::TcpStream::connect_timeout(&ep.addr, ep.connect_timeout) {
                let why = format_args!("cannot connect to {}: {e}", ep.addr);
                return Err(unreachable_at(base, why));
            }
            let wait = TLS_PROBE_WAIT.min(ep.connect_timeout);
            if base.scheme == Scheme::Https
                && crate::http::conn::answers_tls_with_http(ep.addr, &base.host, wait)
            {
                let plain = BaseUrl {
                    scheme: Scheme::Http,
                    ..base.clone()
                };
                return Err(ControlPlaneError::SpeaksHttp {
                    base: base.clone(),
                    plain,
                });
            }
        }
        Ok(())
    }

    /// The first model the server lists at `/v1/models` (Python's model auto-detection).
    pub fn first_model(&self) -> Result<String> {
        let url = self.base.url_of("/v1/models");
        let resp = self
            .get("/v1/models", self.control_timeout)
            .map_err(|e| match e {
                ControlError::Connect { .. } => self.unreachable(e),
                e => ControlPlaneError::ModelsUnlisted {
                    url: url.clone(),
                    why: e.to_string(),
                },
            })?;
        if !resp.is_success() {
            return Err(ControlPlaneError::ModelsUnlisted {
                url,
                why: format!("HTTP {} {}", resp.status, resp.reason),
            });
        }
        let v: Value = serde_json::from_slice(&resp.body).map_err(|error| {
            ControlPlaneError::ModelsNotJson {
                url: url.clone(),
                error,
            }
        })?;
        v["data"][0]["id"]
            .as_str()
            .map(str::to_string)
            .ok_or(ControlPlaneError::NoModel { url })
    }

    /// The server's `/metrics` now, read with `server_metrics`' parser; `None` when it does
    /// not answer within `timeout`, answers with an error or with what is not Prometheus
    /// text.
    pub fn metrics(&self, timeout: Duration) -> Option<Scrape> {
        let resp = self.get("/metrics", timeout).ok()?;
        if !resp.is_success() {
            return None;
        }
        exposition::parse(std::str::from_utf8(&resp.body).ok()?).ok()
    }

    /// Each replica's own `/metrics` (the first replica's first), for the scrape.
    pub fn metrics_sources(&self) -> Vec<Arc<dyn Source>> {
        let t = self;
        t.each_replica()
            .map(|(base, endpoint)| {
                Arc::new(HttpSource {
                    driver: t.driver,
                    endpoint: endpoint.clone(),
                    host: base.host_header(),
                    path: base.request_path("/metrics"),
                    headers: t.headers.clone(),
                    url: base.url_of("/metrics"),
                }) as Arc<dyn Source>
            })
            .collect()
    }

    /// Asks `/v1/models`, on a thread of its own (its wait overlaps the run's preparation),
    /// whether the server lists `model` (the name the requests carry); see
    /// [`ModelCheck::warning`].
    pub fn check_model(self: &Arc<Self>, model: &str) -> ModelCheck {
        let (tx, rx) = std::sync::mpsc::channel();
        let (target, model) = (self.clone(), model.to_string());
        let deadline = Instant::now() + self.control_timeout + Duration::from_millis(100);
        let _ = std::thread::Builder::new()
            .name("model-check".into())
            .spawn(move || {
                let _ = tx.send(target.unlisted_model(&model));
            });
        ModelCheck { rx, deadline }
    }

    /// The warning for a `model` the server does not list at `/v1/models`, naming what it
    /// serves; `None` when it lists it, or does not answer `/v1/models` with a list.
    fn unlisted_model(&self, model: &str) -> Option<String> {
        let resp = control::get(
            self.driver,
            &self.endpoint,
            &self.base.host_header(),
            &self.base.request_path("/v1/models"),
            &self.headers,
            control::Wait::quietly(self.control_timeout),
        )
        .ok()?;
        if !resp.is_success() {
            return None;
        }
        let v: Value = serde_json::from_slice(&resp.body).ok()?;
        let served: Vec<&str> = v["data"]
            .as_array()?
            .iter()
            .filter_map(|m| m["id"].as_str())
            .collect();
        if served.is_empty() || served.contains(&model) {
            return None;
        }
        const SHOWN: usize = 5;
        let mut list = served[..served.len().min(SHOWN)].join(", ");
        if served.len() > SHOWN {
            list += &format!(" and {} more", served.len() - SHOWN);
        }
        Some(format!(
            "the server at {} does not list the model {model} at /v1/models (it serves {list}): \
             requests name a model it may not have; pass --model (or --served-model-name) \
             with one it serves",
            self.base
        ))
    }

    /// `POST /reset_prefix_cache` (`--reset-prefix-cache`, before each sweep point).
    /// With several replicas, every one's.
    pub fn reset_prefix_cache(&self) -> Result<()> {
        let path = "/reset_prefix_cache";
        for replica in self.each_replica() {
            let url = replica.0.url_of(path);
            let resp = self
                .post_to(
                    replica,
                    path,
                    &Value::Object(Default::default()),
                    self.control_timeout,
                )
                .map_err(|error| ControlPlaneError::ResetUnanswered {
                    url: url.clone(),
                    error,
                })?;
            if !resp.is_success() {
                return Err(ControlPlaneError::ResetRefused {
                    url,
                    status: resp.status,
                    reason: resp.reason,
                });
            }
        }
        Ok(())
    }

    /// Starts or stops server-side profiling (`/start_profile`, `/stop_profile`).
    pub fn profile(&self, action: &str) -> Result<()> {
        let path = format!("/{action}_profile");
        let resp = self.post(
            &path,
            &Value::Object(Default::default()),
            Duration::from_secs(600),
        )?;
        if !resp.is_success() {
            return Err(ControlPlaneError::ProfileRefused {
                url: self.base.url_of(&path),
                status: resp.status,
                reason: resp.reason,
            });
        }
        Ok(())
    }

    /// The server's `/tokenize` + `/detokenize` as a tokenizer endpoint.
    pub fn tokenize_endpoint(self: &Arc<Self>, model: &str) -> Arc<dyn TokenizeEndpoint> {
        Arc::new(ServerTokenize {
            target: self.clone(),
            model: model.to_string(),
            llama_dialect: Default::default(),
        })
    }
}

/// One scrape of the server's own `/metrics`, asked in the background while the run is
/// prepared (tokenizer, `/tokenize`, prompts): a server that accepts and never answers then
/// costs its wait once, beside the others, instead of again before the run.
pub struct EarlyProbe {
    pub url: String,
    answer: Mutex<Option<mpsc::Receiver<Result<(), ScrapeError>>>>,
}

impl EarlyProbe {
    /// Starts the probe, which waits `timeout` at most (`None` without a thread to spare).
    pub fn start(target: &Target, timeout: Duration) -> Option<EarlyProbe> {
        let source = target.metrics_sources().into_iter().next()?;
        let (tx, rx) = mpsc::channel();
        let url = source.url();
        std::thread::Builder::new()
            .name("metrics-probe".into())
            .spawn(move || {
                let answer = source.fetch(timeout).map(drop);
                let _ = tx.send(answer);
            })
            .ok()?;
        Some(EarlyProbe {
            url,
            answer: Mutex::new(Some(rx)),
        })
    }

    /// Whether the probe got no answer in its time (it is waited for at most `timeout`):
    /// then the run's scrape leaves the endpoint out. Asked once; `false` after.
    pub fn went_unanswered(&self, timeout: Duration) -> bool {
        let rx = self.answer.lock().ok().and_then(|mut a| a.take());
        let answer = rx.map(|rx| rx.recv_timeout(timeout));
        matches!(
            answer,
            Some(Ok(Err(ScrapeError::NoAnswer(_)))) | Some(Err(_))
        )
    }
}

/// A `/v1/models` check in progress ([`Target::check_model`]).
pub struct ModelCheck {
    rx: std::sync::mpsc::Receiver<Option<String>>,
    deadline: Instant,
}

impl ModelCheck {
    /// The warning, if the server lists other models only; waits for the answer at most
    /// until the control timeout from the check's start has passed.
    pub fn warning(self) -> Option<String> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        self.rx.recv_timeout(left).ok().flatten()
    }
}

/// The one line for a server that nothing answers at (see [`Target::unreachable`]).
fn unreachable_at(base: &BaseUrl, error: impl std::fmt::Display) -> ControlPlaneError {
    ControlPlaneError::Unreachable {
        base: base.clone(),
        why: error.to_string(),
    }
}

/// Where `base` is and how to connect to it (address resolved now, TLS set up).
fn endpoint_of(reach: &Reach, base: &BaseUrl) -> Result<Endpoint> {
    let addrs = base.resolve()?;
    let tls = match base.scheme {
        Scheme::Http => None,
        Scheme::Https => Some(tls_setup(&base.host, reach.insecure)?),
    };
    Ok(Endpoint {
        addr: addrs[0],
        tls,
        connect_timeout: reach.connect_timeout,
        source: SourceAddrs::loopback(reach.local_addrs, addrs[0])?,
    })
}

/// The Messages API version every `anthropic-messages` request names (the one vLLM's
/// `/v1/messages` and Anthropic's API serve).
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// `Authorization: Bearer $OPENAI_API_KEY`; for `anthropic-messages` also
/// `x-api-key: $ANTHROPIC_API_KEY` (else `$OPENAI_API_KEY`: vLLM's `--api-key` reads the
/// bearer token, Anthropic's API the `x-api-key`) and `anthropic-version`; then `--header`
/// pairs (a later one with the same name wins, as Python's dict update). `env` gives a
/// variable's non-empty value.
pub fn request_headers(
    backend: Backend,
    env: impl Fn(&str) -> Option<String>,
    extra: &[(String, String)],
) -> Vec<(String, String)> {
    let mut headers: Vec<(String, String)> = Vec::new();
    let openai_key = env("OPENAI_API_KEY");
    if let Some(key) = &openai_key {
        headers.push(("Authorization".into(), format!("Bearer {key}")));
    }
    if backend == Backend::AnthropicMessages {
        if let Some(key) = env("ANTHROPIC_API_KEY").or(openai_key) {
            headers.push(("x-api-key".into(), key));
        }
        headers.push(("anthropic-version".into(), ANTHROPIC_VERSION.into()));
    }
    for (k, v) in extra {
        headers.retain(|(name, _)| !name.eq_ignore_ascii_case(k));
        headers.push((k.clone(), v.clone()));
    }
    headers
}

/// Waits until the benchmark endpoint answers one real request (`--ready-check-timeout-sec`),
/// retrying every 5 s as Python does. `send_one` runs one request and says whether it
/// succeeded (with the error otherwise).
/// Also returns, early, once `stopped()` holds (Ctrl-C, SIGTERM, `timeout`): the measured
/// run then stops at once and reports every request as not sent, instead of the process
/// waiting out the check.
pub fn wait_until_ready<E: std::fmt::Display>(
    timeout: Duration,
    mut send_one: impl FnMut() -> Result<(), E>,
    stopped: impl Fn() -> bool,
) -> Result<()> {
    let attempt = || Ok::<_, std::convert::Infallible>(send_one().err());
    match retry_until_ready(timeout, attempt, stopped) {
        Ok(None) => Ok(()),
        Ok(Some(err)) => Err(ControlPlaneError::NotReady {
            secs: timeout.as_secs(),
            why: err.to_string(),
        }),
        Err(never) => match never {},
    }
}

/// The ready check's loop, for one server and for several replicas: `attempt` returns
/// `None` when ready, else why not (tried again 5 s later, as Python does), or an error
/// that ends the wait at once (`X`, the caller's). Returns `None` when ready or stopped
/// (`stopped()`, checked in slices of 50 ms), and the last reason when `timeout` passed first.
pub fn retry_until_ready<E, X>(
    timeout: Duration,
    mut attempt: impl FnMut() -> Result<Option<E>, X>,
    stopped: impl Fn() -> bool,
) -> Result<Option<E>, X> {
    let deadline = Instant::now() + timeout;
    loop {
        let Some(why) = attempt()? else {
            return Ok(None);
        };
        let retry = Instant::now() + Duration::from_secs(5);
        loop {
            if stopped() {
                return Ok(None);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(Some(why));
            }
            if now >= retry {
                break;
            }
            std::thread::sleep(Duration::from_millis(50).min(deadline - now));
        }
    }
}

struct ServerTokenize {
    target: Arc<Target>,
    model: String,
    /// The server speaks llama.cpp's dialect (`content`/`add_special`, and `content` in the
    /// detokenize answer) rather than vLLM's (`prompt`/`add_special_tokens`). Learned on the
    /// first request whose vLLM form came back empty for a non-empty text.
    llama_dialect: std::sync::atomic::AtomicBool,
}

/// How long a control-plane call (models, tokenize/detokenize, metrics) may take: seconds,
/// not minutes; a server that accepts and never answers is reported as such, not waited on.
/// Each call also says what it waits for after [`control::NOTICE_AFTER`].
pub const CONTROL_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the check before the run waits for an `https://` server's first bytes (a TLS
/// server answers a ClientHello within milliseconds).
const TLS_PROBE_WAIT: Duration = Duration::from_secs(1);
/// Vocabulary assumed for a server-side tokenizer whose server does not report one.
const ASSUMED_VOCAB: usize = 32_000;

impl TokenizeEndpoint for ServerTokenize {
    fn tokenize(&self, text: &str, add_special: bool) -> anyhow::Result<Vec<u32>> {
        use std::sync::atomic::Ordering::Relaxed;
        if !self.llama_dialect.load(Relaxed) {
            let body = serde_json::json!({ "model": self.model, "prompt": text, "add_special_tokens": add_special });
            let tokens = token_list(&self.call("/tokenize", &body)?)?;
            if !tokens.is_empty() || text.trim().is_empty() {
                return Ok(tokens);
            }
        }
        let body = serde_json::json!({ "content": text, "add_special": add_special });
        let tokens = token_list(&self.call("/tokenize", &body)?)?;
        if !tokens.is_empty() {
            self.llama_dialect.store(true, Relaxed);
        }
        Ok(tokens)
    }

    fn detokenize(&self, ids: &[u32]) -> anyhow::Result<String> {
        let body = serde_json::json!({ "model": self.model, "tokens": ids });
        let v = self.call("/detokenize", &body)?;
        let text = v["prompt"].as_str().or_else(|| v["content"].as_str());
        Ok(text.map(str::to_string).ok_or(ControlPlaneError::NoText)?)
    }

    /// vLLM's `/tokenize` does not report the vocabulary size; use it when a server does,
    /// else walk the first 32,000 ids, a range every current LLM vocabulary covers.
    fn vocab_size(&self) -> Option<usize> {
        let reported = self
            .call(
                "/tokenize",
                &serde_json::json!({ "model": self.model, "prompt": "" }),
            )
            .ok();
        Some(
            reported
                .and_then(|v| v["vocab_size"].as_u64())
                .map_or(ASSUMED_VOCAB, |n| n as usize),
        )
    }
}

/// The `tokens` list of a `/tokenize` answer.
fn token_list(v: &Value) -> Result<Vec<u32>> {
    let tokens = v["tokens"].as_array().ok_or(ControlPlaneError::NoTokens)?;
    tokens
        .iter()
        .map(|t| {
            t.as_u64()
                .map(|t| t as u32)
                .ok_or(ControlPlaneError::NonIntegerToken)
        })
        .collect()
}

impl ServerTokenize {
    fn call(&self, path: &str, body: &Value) -> Result<Value> {
        let url = self.target.base.url_of(path);
        let resp = self
            .target
            .post(path, body, self.target.control_timeout)
            .map_err(|error| ControlPlaneError::TokenizeUnanswered {
                url: url.clone(),
                error,
            })?;
        if !resp.is_success() {
            return Err(ControlPlaneError::TokenizeRefused {
                url,
                status: resp.status,
                reason: resp.reason,
            });
        }
        serde_json::from_slice(&resp.body)
            .map_err(|error| ControlPlaneError::TokenizeNotJson { url, error })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        }
    }

    fn pairs(headers: &[(String, String)]) -> Vec<(&str, &str)> {
        headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }

    #[test]
    fn a_ready_check_out_of_time_is_one_typed_line_with_the_last_failure() {
        let e = wait_until_ready(Duration::ZERO, || Err("HTTP 503"), || false).unwrap_err();
        assert!(
            matches!(e, ControlPlaneError::NotReady { secs: 0, .. }),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "the endpoint is not ready after 0s: HTTP 503; raise --ready-check-timeout-sec or \
             check the server"
        );
        let ready = wait_until_ready(Duration::ZERO, || Ok::<_, &str>(()), || false);
        assert!(ready.is_ok());
    }

    #[test]
    fn anthropic_requests_carry_the_api_key_and_version_headers() {
        let h = request_headers(
            Backend::AnthropicMessages,
            env(&[
                ("ANTHROPIC_API_KEY", "sk-ant"),
                ("OPENAI_API_KEY", "sk-oai"),
            ]),
            &[],
        );
        assert_eq!(
            pairs(&h),
            [
                ("Authorization", "Bearer sk-oai"),
                ("x-api-key", "sk-ant"),
                ("anthropic-version", "2023-06-01")
            ]
        );
        // Without ANTHROPIC_API_KEY, OPENAI_API_KEY is the x-api-key too.
        let h = request_headers(
            Backend::AnthropicMessages,
            env(&[("OPENAI_API_KEY", "sk-oai")]),
            &[],
        );
        assert_eq!(pairs(&h)[1], ("x-api-key", "sk-oai"));
        // No key at all: the version alone; a --header overrides it.
        let h = request_headers(
            Backend::AnthropicMessages,
            env(&[]),
            &[("Anthropic-Version".into(), "2024-01-01".into())],
        );
        assert_eq!(pairs(&h), [("Anthropic-Version", "2024-01-01")]);
        // Other backends get neither.
        let h = request_headers(
            Backend::OpenaiChat,
            env(&[("ANTHROPIC_API_KEY", "sk-ant")]),
            &[],
        );
        assert!(h.is_empty(), "{h:?}");
    }
}
