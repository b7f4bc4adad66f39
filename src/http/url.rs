//! Server addresses: `--base-url` / `--host` + `--port` parsed and resolved once, before the
//! clock starts, into a [`Target`] the connections use.

use std::net::{SocketAddr, ToSocketAddrs};

/// `http` or `https`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

/// A parsed base URL: where to connect, what to put in `Host`, and the path prefix that
/// endpoints are appended to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseUrl {
    pub scheme: Scheme,
    /// Host as written (name or IP literal, without brackets for IPv6).
    pub host: String,
    pub port: u16,
    /// Path prefix without a trailing slash (`""` for `http://h:p` or `http://h:p/`).
    pub path: String,
}

impl BaseUrl {
    /// Parses `http[s]://host[:port][/path]`.
    pub fn parse(url: &str) -> Result<Self, String> {
        let (scheme, rest) = if let Some(r) = url.strip_prefix("http://") {
            (Scheme::Http, r)
        } else if let Some(r) = url.strip_prefix("https://") {
            (Scheme::Https, r)
        } else {
            return Err(format!(
                "invalid URL '{url}': it must start with http:// or https:// (e.g. http://127.0.0.1:8000)"
            ));
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
            None => (rest, ""),
        };
        if authority.contains('@') {
            return Err(format!(
                "invalid URL '{url}': credentials in URLs are not supported; use --header"
            ));
        }
        let default_port = match scheme {
            Scheme::Http => 80,
            Scheme::Https => 443,
        };
        let (host, port) = split_host_port(authority, default_port)
            .map_err(|why| format!("invalid URL '{url}': {why}"))?;
        Ok(BaseUrl {
            scheme,
            host,
            port,
            path: path.to_string(),
        })
    }

    /// `http://host:port` from `--host`/`--port` (Python's default when no `--base-url`).
    pub fn from_host_port(host: &str, port: u16) -> Self {
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        BaseUrl {
            scheme: Scheme::Http,
            host,
            port,
            path: String::new(),
        }
    }

    /// The value of the `Host` header (port omitted when it is the scheme's default).
    pub fn host_header(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        match (self.scheme, self.port) {
            (Scheme::Http, 80) | (Scheme::Https, 443) => host,
            _ => format!("{host}:{}", self.port),
        }
    }

    /// The full URL of an endpoint path (for messages and the result file).
    pub fn url_of(&self, endpoint: &str) -> String {
        let scheme = match self.scheme {
            Scheme::Http => "http",
            Scheme::Https => "https",
        };
        format!("{scheme}://{}{}{}", self.host_header(), self.path, endpoint)
    }

    /// The request-target of an endpoint (`/prefix/v1/completions`).
    pub fn request_path(&self, endpoint: &str) -> String {
        format!("{}{}", self.path, endpoint)
    }

    /// Resolves the host to socket addresses (blocking DNS, done once before the run).
    /// IPv4 addresses come first: servers such as vLLM often listen on IPv4 only.
    pub fn resolve(&self) -> Result<Vec<SocketAddr>, String> {
        let mut addrs: Vec<SocketAddr> = (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve host '{}': {e}", self.host))?
            .collect();
        addrs.sort_by_key(|a| a.is_ipv6());
        if addrs.is_empty() {
            return Err(format!("host '{}' resolved to no address", self.host));
        }
        Ok(addrs)
    }
}

fn split_host_port(authority: &str, default_port: u16) -> Result<(String, u16), String> {
    if authority.is_empty() {
        return Err("the host is empty".into());
    }
    if let Some(rest) = authority.strip_prefix('[') {
        let end = rest
            .find(']')
            .ok_or("unterminated '[' in an IPv6 address")?;
        let host = &rest[..end];
        let port = match &rest[end + 1..] {
            "" => default_port,
            p => parse_port(p.strip_prefix(':').ok_or("expected ':' after ']'")?)?,
        };
        return Ok((host.to_string(), port));
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => Ok((host.to_string(), parse_port(port)?)),
        Some(_) => Err("IPv6 addresses must be written in brackets, e.g. http://[::1]:8000".into()),
        None => Ok((authority.to_string(), default_port)),
    }
}

fn parse_port(p: &str) -> Result<u16, String> {
    p.parse::<u16>().map_err(|_| format!("invalid port '{p}'"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_common_forms() {
        let u = BaseUrl::parse("http://127.0.0.1:8000").unwrap();
        assert_eq!(
            (u.scheme, u.host.as_str(), u.port, u.path.as_str()),
            (Scheme::Http, "127.0.0.1", 8000, "")
        );
        let u = BaseUrl::parse("https://example.com/api/").unwrap();
        assert_eq!(
            (u.scheme, u.port, u.path.as_str()),
            (Scheme::Https, 443, "/api")
        );
        assert_eq!(u.host_header(), "example.com");
        assert_eq!(u.request_path("/v1/completions"), "/api/v1/completions");
        let u = BaseUrl::parse("http://[::1]:9000").unwrap();
        assert_eq!((u.host.as_str(), u.port), ("::1", 9000));
        assert_eq!(u.host_header(), "[::1]:9000");
        assert_eq!(u.url_of("/v1/models"), "http://[::1]:9000/v1/models");
    }

    #[test]
    fn rejects_bad_urls_with_a_reason() {
        assert!(BaseUrl::parse("127.0.0.1:8000")
            .unwrap_err()
            .contains("http://"));
        assert!(BaseUrl::parse("http://h:notaport")
            .unwrap_err()
            .contains("invalid port"));
        assert!(BaseUrl::parse("http://").unwrap_err().contains("empty"));
        assert!(BaseUrl::parse("http://::1:80")
            .unwrap_err()
            .contains("brackets"));
    }

    #[test]
    fn resolves_loopback_ipv4_first() {
        let u = BaseUrl::from_host_port("localhost", 8000);
        let addrs = u.resolve().unwrap();
        assert!(addrs[0].ip().is_loopback());
    }
}
