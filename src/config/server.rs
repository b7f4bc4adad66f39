//! Where requests go: the backend, the server (a base URL, `--host`/`--port`, or the embedded
//! mock) and the endpoint path.
//!
//! Python builds `api_url = base_url + endpoint` by string concatenation and lets aiohttp parse
//! it; our HTTP client needs the parts, so the base URL is parsed here, once, with a clear error
//! for anything it cannot be (no scheme, credentials, query string, bad port).

use std::net::Ipv6Addr;

use super::ConfigError;
use crate::cli::{Backend, Cli};

/// `http` or `https`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    /// `"http"` or `"https"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }

    /// 80 or 443.
    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }
}

/// A parsed server base URL: `scheme://host:port/path-prefix`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseUrl {
    pub scheme: Scheme,
    /// Host name or IP address, without brackets.
    pub host: String,
    pub port: u16,
    /// Path before the endpoint: empty or `/prefix` (no trailing slash).
    pub path_prefix: String,
}

impl BaseUrl {
    /// Plain HTTP to `host:port` (Python's `--host`/`--port` form and the embedded mock).
    pub fn http(host: impl Into<String>, port: u16) -> Self {
        let host = host.into();
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .map(str::to_owned)
            .unwrap_or(host);
        BaseUrl {
            scheme: Scheme::Http,
            host,
            port,
            path_prefix: String::new(),
        }
    }

    /// Parses `http[s]://host[:port][/prefix]`; the reason on failure is one phrase.
    pub fn parse(url: &str) -> Result<Self, String> {
        let lower = url.to_ascii_lowercase();
        let (scheme, rest) = if lower.starts_with("http://") {
            (Scheme::Http, &url[7..])
        } else if lower.starts_with("https://") {
            (Scheme::Https, &url[8..])
        } else if url.contains("://") {
            return Err("only http:// and https:// URLs are supported".to_owned());
        } else {
            return Err(format!("missing scheme; did you mean http://{url}?"));
        };
        if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err("a URL cannot contain spaces or control characters".to_owned());
        }
        let (authority, path) = match rest.find(['/', '?', '#']) {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        if path.contains(['?', '#']) {
            return Err("a base URL cannot have a query string or fragment".to_owned());
        }
        if authority.contains('@') {
            return Err(
                "credentials in the URL are not supported; use --header or OPENAI_API_KEY"
                    .to_owned(),
            );
        }
        let (host, port) = split_host_port(authority)?;
        let port = match port {
            Some(p) => parse_port(p)?,
            None => scheme.default_port(),
        };
        Ok(BaseUrl {
            scheme,
            host: host.to_owned(),
            port,
            path_prefix: path.trim_end_matches('/').to_owned(),
        })
    }

    /// `host:port` with IPv6 addresses in brackets (Python's `join_host_port`), as used in the
    /// `Host` header.
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

impl std::fmt::Display for BaseUrl {
    /// Python's `base_url`: `http://host:port` plus the path prefix.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}://{}{}",
            self.scheme.as_str(),
            self.authority(),
            self.path_prefix
        )
    }
}

fn split_host_port(authority: &str) -> Result<(&str, Option<&str>), String> {
    if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6
            .split_once(']')
            .ok_or_else(|| "unclosed '[' in the host".to_owned())?;
        host.parse::<Ipv6Addr>()
            .map_err(|_| format!("'{host}' is not an IPv6 address"))?;
        return match after {
            "" => Ok((host, None)),
            p => p
                .strip_prefix(':')
                .map(|p| (host, Some(p)))
                .ok_or_else(|| format!("unexpected '{p}' after the host")),
        };
    }
    let (host, port) = match authority.split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (authority, None),
    };
    check_host_name(host)?;
    Ok((host, port))
}

fn check_host_name(host: &str) -> Result<(), String> {
    if host.is_empty() {
        return Err("the host is empty".to_owned());
    }
    if !host
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
    {
        return Err(format!("'{host}' is not a valid host name"));
    }
    Ok(())
}

fn parse_port(p: &str) -> Result<u16, String> {
    match p.parse::<u32>() {
        Ok(n) if (1..=65535).contains(&n) => Ok(n as u16),
        _ => Err(format!("'{p}' is not a valid port (1-65535)")),
    }
}

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
}

impl ServerConfig {
    /// The request target of benchmark requests: the base URL's path prefix plus the endpoint.
    pub fn request_path(&self) -> String {
        match &self.location {
            ServerLocation::Url(u) => format!("{}{}", u.path_prefix, self.endpoint),
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
    let location = if s.mock_server {
        if let Some(url) = &s.base_url {
            return Err(ConfigError::value(
                "--base-url",
                url,
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
    } else if let Some(url) = &s.base_url {
        if host_port_given {
            warnings.push("--base-url is given, so --host and --port are ignored".to_owned());
        }
        ServerLocation::Url(
            BaseUrl::parse(url).map_err(|why| ConfigError::value("--base-url", url, why))?,
        )
    } else {
        check_host(&s.host)?;
        ServerLocation::Url(BaseUrl::http(s.host.clone(), s.port))
    };
    Ok(ServerConfig {
        backend: s.backend,
        location,
        endpoint: endpoint(s.backend, s.endpoint.as_deref())?,
        insecure: s.insecure,
    })
}

fn check_host(host: &str) -> Result<(), ConfigError> {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let ok = if bare.contains(':') {
        bare.parse::<Ipv6Addr>()
            .map(|_| ())
            .map_err(|_| "not a valid IPv6 address".to_owned())
    } else {
        check_host_name(bare).map_err(|_| "not a valid host name or IP address".to_owned())
    };
    ok.map_err(|why| ConfigError::value("--host", host, why))
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
    fn base_urls_parse_into_parts() {
        let u = BaseUrl::parse("http://127.0.0.1:8000").unwrap();
        assert_eq!(u, BaseUrl::http("127.0.0.1", 8000));
        assert_eq!(u.to_string(), "http://127.0.0.1:8000");
        let u = BaseUrl::parse("HTTPS://api.example.com/v2/").unwrap();
        assert_eq!(u.scheme, Scheme::Https);
        assert_eq!(u.port, 443);
        assert_eq!(u.path_prefix, "/v2");
        assert_eq!(u.to_string(), "https://api.example.com:443/v2");
        let u = BaseUrl::parse("http://[::1]:9000").unwrap();
        assert_eq!(u.host, "::1");
        assert_eq!(u.authority(), "[::1]:9000");
        assert_eq!(BaseUrl::parse("http://localhost").unwrap().port, 80);
    }

    #[test]
    fn bad_base_urls_say_why() {
        let cases = [
            (
                "127.0.0.1:8000",
                "missing scheme; did you mean http://127.0.0.1:8000?",
            ),
            ("ftp://h", "only http:// and https:// URLs are supported"),
            ("http://h:0", "'0' is not a valid port (1-65535)"),
            ("http://h:99999", "'99999' is not a valid port (1-65535)"),
            ("http://h:x", "'x' is not a valid port (1-65535)"),
            (
                "http://u:p@h",
                "credentials in the URL are not supported; use --header or OPENAI_API_KEY",
            ),
            (
                "http://h/a?b=1",
                "a base URL cannot have a query string or fragment",
            ),
            ("http://", "the host is empty"),
            ("http://[::1", "unclosed '[' in the host"),
            (
                "http://h h",
                "a URL cannot contain spaces or control characters",
            ),
        ];
        for (url, why) in cases {
            assert_eq!(BaseUrl::parse(url).unwrap_err(), why, "{url}");
        }
    }

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
}
