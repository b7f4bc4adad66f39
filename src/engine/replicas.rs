//! Several servers of one model behind no common balancer (`--base-url` repeated): where each
//! replica is, and how a request prepared for the first one is sent to another.
//!
//! Requests are built once, before the clock, with the first replica's `Host` line. Sending
//! one to another replica swaps that line for the replica's own, precomputed, without copying
//! the request: the parts written are `[request line, replica's Host line, rest of the head,
//! body parts…]`, slices of the shared `Bytes` (reference counts, no allocation once the
//! worker's scratch list has grown). With one replica, or replicas that share a `Host`
//! value, the request goes out as it was built.

use bytes::Bytes;

use crate::http::conn::{Connection, Endpoint};
use crate::http::request::PreparedRequest;

/// A core's kept-alive connections, by replica (one list with one server).
pub type Pool = Vec<Vec<Connection>>;

/// The servers a run spreads its sessions over; index 0 is the one the requests were built
/// for. Never empty.
#[derive(Clone)]
pub struct Replicas {
    endpoints: Vec<Endpoint>,
    /// `Host: …\r\n` of each replica.
    host_lines: Vec<Bytes>,
    /// Some replica's `Host` line differs from the first's: heads are rewritten for it.
    rewrite: bool,
}

impl Replicas {
    /// `replicas`: each replica's endpoint and `Host` header value, the first being the one
    /// requests are built for.
    ///
    /// # Panics
    /// When `replicas` is empty (a caller's bug: a run has a server).
    pub fn new(replicas: Vec<(Endpoint, String)>) -> Replicas {
        assert!(!replicas.is_empty(), "a run has at least one server");
        let host_lines: Vec<Bytes> = replicas
            .iter()
            .map(|(_, host)| Bytes::from(format!("Host: {host}\r\n")))
            .collect();
        let rewrite = host_lines.iter().any(|h| *h != host_lines[0]);
        Replicas {
            endpoints: replicas.into_iter().map(|(e, _)| e).collect(),
            host_lines,
            rewrite,
        }
    }

    /// How many replicas.
    pub fn len(&self) -> usize {
        self.endpoints.len()
    }

    /// Always false: a run has at least one server.
    pub fn is_empty(&self) -> bool {
        self.endpoints.is_empty()
    }

    /// Where replica `r` is.
    pub fn endpoint(&self, r: usize) -> &Endpoint {
        &self.endpoints[r]
    }

    /// The parts to write for `req` sent to replica `r`: the request's own, or (for a
    /// replica with another `Host`) the same bytes with that replica's `Host` line, put
    /// together in `scratch`. A head without the first replica's `Host` line right after the
    /// request line is sent as built.
    pub fn parts<'a>(
        &self,
        r: usize,
        req: &'a PreparedRequest,
        scratch: &'a mut Vec<Bytes>,
    ) -> &'a [Bytes] {
        if !self.rewrite || r == 0 || self.host_lines[r] == self.host_lines[0] {
            return &req.parts;
        }
        let Some(head) = req.parts.first() else {
            return &req.parts;
        };
        let Some(line_end) = memchr::memmem::find(head, b"\r\n") else {
            return &req.parts;
        };
        let host_at = line_end + 2;
        if !head[host_at..].starts_with(&self.host_lines[0]) {
            return &req.parts;
        }
        scratch.clear();
        scratch.push(head.slice(..host_at));
        scratch.push(self.host_lines[r].clone());
        scratch.push(head.slice(host_at + self.host_lines[0].len()..));
        scratch.extend(req.parts[1..].iter().cloned());
        scratch
    }
}

impl From<Endpoint> for Replicas {
    /// One server (its `Host` line is never rewritten).
    fn from(endpoint: Endpoint) -> Replicas {
        Replicas::new(vec![(endpoint, String::new())])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::request::{HeadTemplate, Method};
    use std::time::Duration;

    fn endpoint() -> Endpoint {
        Endpoint {
            addr: "127.0.0.1:1".parse().unwrap(),
            tls: None,
            connect_timeout: Duration::from_secs(1),
            source: Default::default(),
        }
    }

    fn joined(parts: &[Bytes]) -> Vec<u8> {
        parts.iter().flat_map(|p| p.iter().copied()).collect()
    }

    #[test]
    fn another_replica_gets_its_own_host_line_and_the_same_bytes_otherwise() {
        let head = HeadTemplate::new(Method::Post, "/v1/completions", "a:1", &[]);
        let req = head.build(Some("id-1"), Some("application/json"), b"{\"p\":1}");
        let other = HeadTemplate::new(Method::Post, "/v1/completions", "b:22", &[]);
        let want = other.build(Some("id-1"), Some("application/json"), b"{\"p\":1}");
        let replicas = Replicas::new(vec![
            (endpoint(), "a:1".into()),
            (endpoint(), "b:22".into()),
        ]);
        let mut scratch = Vec::new();
        assert_eq!(joined(replicas.parts(0, &req, &mut scratch)), req.to_vec());
        assert_eq!(joined(replicas.parts(1, &req, &mut scratch)), want.to_vec());
    }
}
