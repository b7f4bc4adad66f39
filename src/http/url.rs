//! Server addresses: a base URL (`--base-url`, or `--host` + `--port`) parsed once, before
//! the clock starts, into the parts the HTTP client needs (scheme, host, port, path prefix),
//! with the request target, `Host` header and socket addresses derived from them.
//!
//! Python builds `api_url = base_url + endpoint` by string concatenation and lets aiohttp parse
//! it; our client needs the parts, so anything that cannot be a base URL (no scheme,
//! credentials, a query string, a bad port) is refused here with a one-phrase reason that the
//! configuration puts after the flag.

use std::net::{Ipv6Addr, SocketAddr, ToSocketAddrs};

use crate::safe_text::redact_url;

/// Why a string is not a usable base URL or host: one phrase, which the configuration puts
/// after the flag and its value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error("only http:// and https:// URLs are supported")]
    Scheme,
    #[error("missing scheme; did you mean http://{0}?")]
    MissingScheme(String),
    #[error("a URL cannot contain spaces or control characters")]
    Whitespace,
    #[error("a base URL cannot have a query string or fragment")]
    QueryOrFragment,
    #[error("credentials in the URL are not supported; use --header or OPENAI_API_KEY")]
    Credentials,
    #[error("unclosed '[' in the host")]
    UnclosedBracket,
    #[error("'{0}' is not an IPv6 address")]
    BracketedNotIpv6(String),
    #[error("unexpected '{0}' after the host")]
    AfterHost(String),
    #[error("IPv6 addresses must be written in brackets, e.g. http://[::1]:8000")]
    UnbracketedIpv6,
    #[error("the host is empty")]
    EmptyHost,
    #[error("'{0}' is not a valid host name")]
    HostName(String),
    #[error("'{0}' is not a valid port (1-65535)")]
    Port(String),
    /// `--host` with a colon that is not an IPv6 address.
    #[error("not a valid IPv6 address")]
    HostIpv6,
    /// `--host` that is neither a name nor an address.
    #[error("not a valid host name or IP address")]
    Host,
}

/// Why a host has no socket address (DNS, before the run).
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// (The OS error is part of the message, not a `source`: it would be printed twice.)
    #[error("cannot resolve host '{host}': {error}")]
    Lookup { host: String, error: std::io::Error },
    #[error("host '{0}' resolved to no address")]
    NoAddress(String),
}

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
    /// An IPv6 host may be given with or without brackets.
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
    pub fn parse(url: &str) -> Result<Self, UrlError> {
        let lower = url.to_ascii_lowercase();
        let (scheme, rest) = if lower.starts_with("http://") {
            (Scheme::Http, &url[7..])
        } else if lower.starts_with("https://") {
            (Scheme::Https, &url[8..])
        } else if url.contains("://") {
            return Err(UrlError::Scheme);
        } else {
            return Err(UrlError::MissingScheme(redact_url(url).into_owned()));
        };
        if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(UrlError::Whitespace);
        }
        let (authority, path) = match rest.find(['/', '?', '#']) {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        if path.contains(['?', '#']) {
            return Err(UrlError::QueryOrFragment);
        }
        if authority.contains('@') {
            return Err(UrlError::Credentials);
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

    /// `host:port` with IPv6 addresses in brackets (Python's `join_host_port`): the port is
    /// always named, as in the `base_url` Python builds from `--host`/`--port`.
    pub fn authority(&self) -> String {
        format!("{}:{}", self.bracketed_host(), self.port)
    }

    /// The value of the `Host` header: like [`authority`](Self::authority), but without the
    /// port when it is the scheme's default, as aiohttp sends it.
    pub fn host_header(&self) -> String {
        if self.port == self.scheme.default_port() {
            self.bracketed_host()
        } else {
            self.authority()
        }
    }

    /// The request target of an endpoint: the path prefix plus the endpoint
    /// (`/prefix/v1/completions`).
    pub fn request_path(&self, endpoint: &str) -> String {
        format!("{}{}", self.path_prefix, endpoint)
    }

    /// The full URL of an endpoint (Python's `api_url`, for messages and the result file).
    pub fn url_of(&self, endpoint: &str) -> String {
        format!("{self}{endpoint}")
    }

    /// Resolves the host to socket addresses (blocking DNS, done once before the run).
    /// IPv4 addresses come first: servers such as vLLM often listen on IPv4 only.
    pub fn resolve(&self) -> Result<Vec<SocketAddr>, ResolveError> {
        let mut addrs: Vec<SocketAddr> = (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|error| ResolveError::Lookup {
                host: self.host.clone(),
                error,
            })?
            .collect();
        addrs.sort_by_key(|a| a.is_ipv6());
        if addrs.is_empty() {
            return Err(ResolveError::NoAddress(self.host.clone()));
        }
        Ok(addrs)
    }

    /// The host, in brackets when it is an IPv6 address.
    fn bracketed_host(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
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

/// Checks a `--host` value: a host name, an IPv4 address, or an IPv6 address with or without
/// brackets. The reason on failure is one phrase.
pub fn check_host(host: &str) -> Result<(), UrlError> {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if bare.contains(':') {
        bare.parse::<Ipv6Addr>()
            .map(|_| ())
            .map_err(|_| UrlError::HostIpv6)
    } else {
        check_host_name(bare).map_err(|_| UrlError::Host)
    }
}

fn split_host_port(authority: &str) -> Result<(&str, Option<&str>), UrlError> {
    if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6.split_once(']').ok_or(UrlError::UnclosedBracket)?;
        host.parse::<Ipv6Addr>()
            .map_err(|_| UrlError::BracketedNotIpv6(host.to_owned()))?;
        return match after {
            "" => Ok((host, None)),
            p => p
                .strip_prefix(':')
                .map(|p| (host, Some(p)))
                .ok_or_else(|| UrlError::AfterHost(p.to_owned())),
        };
    }
    let bare_v6 = |h: &str| h.parse::<Ipv6Addr>().is_ok();
    if bare_v6(authority) || authority.rsplit_once(':').is_some_and(|(h, _)| bare_v6(h)) {
        return Err(UrlError::UnbracketedIpv6);
    }
    let (host, port) = match authority.split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (authority, None),
    };
    check_host_name(host)?;
    Ok((host, port))
}

fn check_host_name(host: &str) -> Result<(), UrlError> {
    if host.is_empty() {
        return Err(UrlError::EmptyHost);
    }
    if !host
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
    {
        return Err(UrlError::HostName(host.to_owned()));
    }
    Ok(())
}

fn parse_port(p: &str) -> Result<u16, UrlError> {
    match p.parse::<u32>() {
        Ok(n) if (1..=65535).contains(&n) => Ok(n as u16),
        _ => Err(UrlError::Port(p.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_parse_into_parts() {
        let u = BaseUrl::parse("http://127.0.0.1:8000").unwrap();
        assert_eq!(u, BaseUrl::http("127.0.0.1", 8000));
        assert_eq!(
            (u.scheme, u.host.as_str(), u.port, u.path_prefix.as_str()),
            (Scheme::Http, "127.0.0.1", 8000, "")
        );
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
    fn host_header_request_path_and_url_of_an_endpoint() {
        let u = BaseUrl::parse("https://example.com/api/").unwrap();
        assert_eq!(
            (u.scheme, u.port, u.path_prefix.as_str()),
            (Scheme::Https, 443, "/api")
        );
        assert_eq!(u.host_header(), "example.com");
        assert_eq!(u.request_path("/v1/completions"), "/api/v1/completions");
        let u = BaseUrl::parse("http://[::1]:9000").unwrap();
        assert_eq!((u.host.as_str(), u.port), ("::1", 9000));
        assert_eq!(u.host_header(), "[::1]:9000");
        assert_eq!(u.url_of("/v1/models"), "http://[::1]:9000/v1/models");
        assert_eq!(BaseUrl::http("[::1]", 8000).host, "::1");
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
            assert_eq!(BaseUrl::parse(url).unwrap_err().to_string(), why, "{url}");
        }
        assert!(BaseUrl::parse("127.0.0.1:8000")
            .unwrap_err()
            .to_string()
            .contains("http://"));
        assert!(BaseUrl::parse("http://h:notaport")
            .unwrap_err()
            .to_string()
            .contains("not a valid port"));
        assert!(BaseUrl::parse("http://")
            .unwrap_err()
            .to_string()
            .contains("empty"));
        assert!(BaseUrl::parse("http://::1:80")
            .unwrap_err()
            .to_string()
            .contains("brackets"));
    }

    #[test]
    fn host_values_are_checked() {
        assert_eq!(check_host("localhost"), Ok(()));
        assert_eq!(check_host("::1"), Ok(()));
        assert_eq!(check_host("[::1]"), Ok(()));
        assert_eq!(check_host(":::"), Err(UrlError::HostIpv6));
        assert_eq!(check_host("a b"), Err(UrlError::Host));
    }

    #[test]
    fn resolves_loopback_ipv4_first() {
        let u = BaseUrl::http("localhost", 8000);
        let addrs = u.resolve().unwrap();
        assert!(addrs[0].ip().is_loopback());
    }
}
