//! Where requests go: the backend, the server (a base URL, `--host`/`--port`, or the embedded
//! mock) and the endpoint path.
//!
//! The base URL is parsed by [`crate::http::url::BaseUrl`] (the HTTP client owns what a URL
//! is); this module decides which flags give it and puts the flag in front of its errors.

use super::ConfigError;
use crate::cli::{Backend, Cli, ReplicaAffinity};
use crate::http::url::{self, BaseUrl};
use crate::safe_text::redact_url;

/// Where the server is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerLocation {
    /// A real server.
    Url(BaseUrl),
    /// `--mock-server`: the embedded mock, whose loopback address is known only once it runs.
    EmbeddedMock,
}

/// The resolved server connection.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    pub backend: Backend,
    pub location: ServerLocation,
    /// Endpoint path, starting with `/` (per-backend default when `--endpoint` is absent).
    pub endpoint: String,
    /// `--insecure`: do not verify TLS certificates.
    pub insecure: bool,
    /// `--mock-slots`: requests the embedded mock serves at once (`None`: no limit).
    pub mock_slots: Option<usize>,
    /// `--base-url` repeated (or `@FILE`): the replicas after the first (which is
    /// `location`), each with the first's scheme and path; empty for one server.
    pub more_replicas: Vec<BaseUrl>,
    /// `--replica-affinity`: how sessions are spread over the replicas.
    pub replica_affinity: ReplicaAffinity,
    /// `--mock-reasoning-tokens` / `--mock-thinking-ms`: the embedded mock thinks first.
    pub mock_reasoning: MockReasoning,
}

/// How the embedded mock reasons before it answers (none by default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MockReasoning {
    /// Output tokens sent as reasoning first.
    pub tokens: u64,
    /// The pause after the reasoning, before the answer.
    pub thinking: std::time::Duration,
}

impl ServerConfig {
    /// The request target of benchmark requests: the base URL's path prefix plus the endpoint.
    pub fn request_path(&self) -> String {
        match &self.location {
            ServerLocation::Url(u) => u.request_path(&self.endpoint),
            ServerLocation::EmbeddedMock => self.endpoint.clone(),
        }
    }

    /// The base URL, unless the server is the embedded mock.
    pub fn base_url(&self) -> Option<&BaseUrl> {
        match &self.location {
            ServerLocation::Url(u) => Some(u),
            ServerLocation::EmbeddedMock => None,
        }
    }
}

/// Resolves the server connection; `warnings` gets a note when `--base-url` overrides
/// `--host`/`--port`.
pub(super) fn resolve(cli: &Cli, warnings: &mut Vec<String>) -> Result<ServerConfig, ConfigError> {
    let s = &cli.server;
    let host_port_given = cli.was_given("--host") || cli.was_given("--port");
    // Read (a file's) and parsed once, after the conflict with --mock-server is said.
    let mut urls = Vec::new();
    let location = if s.mock_server {
        if let Some(url) = s.base_url.first() {
            return Err(ConfigError::value(
                "--base-url",
                redact_url(url),
                "conflicts with --mock-server (the embedded mock picks its own loopback address)",
            ));
        }
        if host_port_given {
            return Err(ConfigError::flag(
                "--host/--port",
                "conflict with --mock-server (the embedded mock picks its own loopback address)",
            ));
        }
        ServerLocation::EmbeddedMock
    } else if let Some(url) = {
        urls = base_urls(&s.base_url)?;
        urls.first()
    } {
        if host_port_given {
            warnings.push("--base-url is given, so --host and --port are ignored".to_owned());
        }
        ServerLocation::Url(url.clone())
    } else {
        check_host(&s.host)?;
        ServerLocation::Url(BaseUrl::http(s.host.clone(), s.port))
    };
    match s.mock_slots {
        Some(_) if !s.mock_server => {
            return Err(ConfigError::flag("--mock-slots", "needs --mock-server"))
        }
        Some(0) => return Err(ConfigError::value("--mock-slots", 0, "must be at least 1")),
        _ => {}
    }
    let endpoint = endpoint(s.backend, s.endpoint.as_deref())?;
    if let ServerLocation::Url(url) = &location {
        check_prefix(url, &endpoint, cli.was_given("--endpoint"))?;
    }
    Ok(ServerConfig {
        mock_slots: s.mock_slots,
        backend: s.backend,
        location,
        endpoint,
        insecure: s.insecure,
        more_replicas: urls.into_iter().skip(1).collect(),
        replica_affinity: s.replica_affinity,
        mock_reasoning: mock_reasoning(cli)?,
    })
}

/// The base URLs of `--base-url` (repeated, or `@FILE`: one URL a line, blank lines and `#`
/// comments skipped), each parsed, each after the first with its scheme and path (replicas
/// of one model differ in host and port only), no two alike.
fn base_urls(given: &[String]) -> Result<Vec<BaseUrl>, ConfigError> {
    let mut urls: Vec<BaseUrl> = Vec::new();
    for arg in given {
        let (texts, origin) = match arg.strip_prefix('@') {
            Some(path) => {
                // A list of URLs: a megabyte holds tens of thousands.
                let text =
                    crate::whole_file::read_to_string(path.as_ref(), 1 << 20).map_err(|e| {
                        let why = match e {
                            crate::whole_file::WholeFileError::Read { error, .. } => {
                                format!("cannot read the file: {error}")
                            }
                            other => other.to_string(),
                        };
                        ConfigError::value("--base-url", arg, why)
                    })?;
                let lines: Vec<String> = text
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty() && !l.starts_with('#'))
                    .map(str::to_owned)
                    .collect();
                if lines.is_empty() {
                    return Err(ConfigError::value(
                        "--base-url",
                        arg,
                        "the file lists no URL (one a line)",
                    ));
                }
                (lines, Some(path))
            }
            None => (vec![arg.clone()], None),
        };
        for text in texts {
            let flag = match origin {
                Some(path) => format!("--base-url @{path}:"),
                None => "--base-url".to_owned(),
            };
            let url = BaseUrl::parse(&text)
                .map_err(|why| ConfigError::value(&flag, redact_url(&text), why))?;
            if let Some(first) = urls.first() {
                if url.scheme != first.scheme || url.path_prefix != first.path_prefix {
                    return Err(ConfigError::value(
                        &flag,
                        redact_url(&text),
                        format!(
                            "every replica needs the first one's scheme and path ({first}): \
                             replicas of one model differ in host and port only"
                        ),
                    ));
                }
            }
            if urls.contains(&url) {
                return Err(ConfigError::value(
                    &flag,
                    redact_url(&text),
                    "given twice: each replica once",
                ));
            }
            urls.push(url);
        }
    }
    Ok(urls)
}

/// `--mock-reasoning-tokens N` and `--mock-thinking-ms MS`: only with `--mock-server`, and
/// a thinking pause only with reasoning tokens to pause after.
fn mock_reasoning(cli: &Cli) -> Result<MockReasoning, ConfigError> {
    let s = &cli.server;
    if !s.mock_server {
        for (flag, given) in [
            ("--mock-reasoning-tokens", s.mock_reasoning_tokens.is_some()),
            ("--mock-thinking-ms", s.mock_thinking_ms.is_some()),
        ] {
            if given {
                return Err(ConfigError::flag(
                    flag,
                    "configures the embedded mock; add --mock-server (a real server reasons \
                     as its model does)",
                ));
            }
        }
    }
    let tokens = s.mock_reasoning_tokens.unwrap_or(0);
    let thinking = match s.mock_thinking_ms {
        None => std::time::Duration::ZERO,
        Some(ms) if tokens == 0 => {
            return Err(ConfigError::value(
                "--mock-thinking-ms",
                crate::pyfmt::float_repr(ms),
                "the pause follows the reasoning; add --mock-reasoning-tokens N (N > 0)",
            ));
        }
        Some(ms) if ms.is_finite() && (0.0..=3_600_000.0).contains(&ms) => {
            std::time::Duration::from_secs_f64(ms / 1000.0)
        }
        Some(ms) => {
            return Err(ConfigError::value(
                "--mock-thinking-ms",
                crate::pyfmt::float_repr(ms),
                "must be between 0 and 3600000 ms",
            ));
        }
    };
    Ok(MockReasoning { tokens, thinking })
}

/// Refuses a base URL whose path ends with the segment the endpoint starts with
/// (`--base-url http://host:8000/v1`, the OpenAI SDK's habit, before `/v1/completions`):
/// Python joins them into `/v1/v1/completions`, which 404s every request, and the server's
/// `/v1/models` is not found either. Says what to drop.
fn check_prefix(url: &BaseUrl, endpoint: &str, endpoint_given: bool) -> Result<(), ConfigError> {
    let Some(last) = url.path_prefix.rsplit('/').next().filter(|s| !s.is_empty()) else {
        return Ok(());
    };
    let first = endpoint.trim_start_matches('/').split('/').next();
    if first != Some(last) {
        return Ok(());
    }
    let bare = BaseUrl {
        path_prefix: url.path_prefix[..url.path_prefix.len() - last.len() - 1].to_owned(),
        ..url.clone()
    };
    let whose = if endpoint_given {
        "--endpoint"
    } else {
        "the endpoint"
    };
    Err(ConfigError::value(
        "--base-url",
        url,
        format!(
            "ends with /{last}, and {whose} {endpoint} starts with it: requests would go to \
             {}; drop the /{last} (--base-url {bare})",
            url.url_of(endpoint)
        ),
    ))
}

fn check_host(host: &str) -> Result<(), ConfigError> {
    url::check_host(host).map_err(|why| ConfigError::value("--host", host, why))
}

/// The endpoint: the backend's default, or `--endpoint` checked the way Python's request
/// functions check the URL (a wrong ending fails every request there).
fn endpoint(backend: Backend, given: Option<&str>) -> Result<String, ConfigError> {
    let Some(ep) = given else {
        return Ok(backend.default_endpoint().to_owned());
    };
    if !ep.starts_with('/') {
        return Err(ConfigError::value("--endpoint", ep, "must start with '/'"));
    }
    if ep.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(ConfigError::value(
            "--endpoint",
            ep,
            "cannot contain spaces or control characters",
        ));
    }
    let suffixes = backend.endpoint_suffixes();
    if !suffixes.iter().any(|s| ep.ends_with(s)) {
        return Err(ConfigError::value(
            "--endpoint",
            ep,
            format!(
                "the {backend} backend needs a path ending in '{}' (e.g. {})",
                suffixes.join("' or '"),
                backend.default_endpoint()
            ),
        ));
    }
    Ok(ep.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_default_per_backend_and_are_checked() {
        assert_eq!(
            endpoint(Backend::OpenaiChat, None).unwrap(),
            "/v1/chat/completions"
        );
        assert_eq!(endpoint(Backend::VllmPooling, None).unwrap(), "/pooling");
        assert_eq!(
            endpoint(Backend::Vllm, Some("/v1/chat/completions")).unwrap(),
            "/v1/chat/completions"
        );
        assert_eq!(
            endpoint(Backend::OpenaiChat, Some("/v1/completions"))
                .unwrap_err()
                .to_string(),
            "--endpoint /v1/completions: the openai-chat backend needs a path ending in \
             'chat/completions' (e.g. /v1/chat/completions)"
        );
        assert_eq!(
            endpoint(Backend::Vllm, Some("v1/completions"))
                .unwrap_err()
                .to_string(),
            "--endpoint v1/completions: must start with '/'"
        );
    }

    #[test]
    fn a_base_url_ending_in_v1_says_to_drop_it() {
        // Issue 36: `--base-url http://host:port/v1` (the OpenAI SDK's habit) 404'd every
        // request at /v1/v1/completions after a hint to pass --tokenizer.
        let url = BaseUrl::parse("http://gpu:8000/v1").unwrap();
        assert_eq!(
            check_prefix(&url, "/v1/completions", false)
                .unwrap_err()
                .to_string(),
            "--base-url http://gpu:8000/v1: ends with /v1, and the endpoint /v1/completions \
             starts with it: requests would go to http://gpu:8000/v1/v1/completions; drop the \
             /v1 (--base-url http://gpu:8000)"
        );
        let nested = BaseUrl::parse("http://gw/openai/v1/").unwrap();
        let e = check_prefix(&nested, "/v1/chat/completions", true).unwrap_err();
        assert!(
            e.to_string()
                .contains("--endpoint /v1/chat/completions starts with it")
                && e.to_string().ends_with("(--base-url http://gw:80/openai)"),
            "{e}"
        );
        // A prefix that is not the endpoint's first segment is a proxy's path: kept.
        let proxied = BaseUrl::parse("http://gw/openai").unwrap();
        assert!(check_prefix(&proxied, "/v1/completions", false).is_ok());
        assert!(check_prefix(&url, "/pooling", false).is_ok());
    }
}
