//! Integration tests: mock_server — the mock LLM server over real loopback sockets, read by
//! a tiny blocking HTTP/1.1 client (below) that timestamps every HTTP chunk on arrival.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use serde_json::Value;
use vllm_bench::mock::{AfterCrash, Crash, FaultConfig, FaultKind, MockConfig, MockServer};
use vllm_bench::runtime::{resolve_driver, DriverChoice};
use vllm_bench::tokenizer::{Tokenizer, TokenizerOptions};

/// Every socket read gives up after this long, so no test can hang.
const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// One HTTP response as the client received it.
#[derive(Debug)]
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    /// Whole body (chunks concatenated).
    body: Vec<u8>,
    /// Each HTTP chunk with the instant its last byte arrived (chunked responses only).
    chunks: Vec<(Instant, Vec<u8>)>,
    /// The body ended properly (last chunk or full Content-Length).
    complete: bool,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("JSON body")
    }

    /// The SSE payload of every chunk, checking each chunk is exactly one event.
    fn events(&self) -> Vec<String> {
        self.chunks
            .iter()
            .map(|(_, c)| {
                let text = std::str::from_utf8(c).expect("utf-8 event");
                let data = text.strip_prefix("data: ").expect("chunk starts an event");
                let data = data.strip_suffix("\n\n").expect("chunk ends the event");
                assert!(!data.contains("\n\n"), "one event per chunk: {text:?}");
                data.to_string()
            })
            .collect()
    }

    /// Events parsed as JSON, `[DONE]` left out.
    fn json_events(&self) -> Vec<Value> {
        self.events()
            .iter()
            .filter(|e| *e != "[DONE]")
            .map(|e| serde_json::from_str(e).expect("event JSON"))
            .collect()
    }
}

/// A blocking HTTP/1.1 client on one connection.
struct Client {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).expect("connect to mock");
        stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        stream.set_nodelay(true).unwrap();
        Client {
            stream,
            buf: Vec::new(),
        }
    }

    fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write request");
    }

    fn post(&mut self, path: &str, body: &str, extra: &str) -> Instant {
        let req = format!(
            "POST {path} HTTP/1.1\r\nHost: mock\r\nContent-Type: application/json\r\n{extra}Content-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let sent = Instant::now();
        self.send_raw(req.as_bytes());
        sent
    }

    fn get(&mut self, path: &str) {
        self.send_raw(format!("GET {path} HTTP/1.1\r\nHost: mock\r\n\r\n").as_bytes());
    }

    /// Reads more bytes; false at end of stream (or reset).
    fn fill(&mut self) -> bool {
        let mut tmp = [0u8; 16 << 10];
        loop {
            match self.stream.read(&mut tmp) {
                Ok(0) => return false,
                Ok(n) => {
                    self.buf.extend_from_slice(&tmp[..n]);
                    return true;
                }
                // A socket read with a timeout is not restarted after an interruption (e.g.
                // io_uring task work queued to this thread when `drivers()` probed io_uring).
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    panic!("read timed out after {IO_TIMEOUT:?}")
                }
                Err(_) => return false,
            }
        }
    }

    /// Reads until the bytes received so far contain `needle`; panics if the connection
    /// ends first. For a test that must know the server got this far before it goes on.
    fn read_until(&mut self, needle: &[u8]) {
        while memchr::memmem::find(&self.buf, needle).is_none() {
            assert!(
                self.fill(),
                "connection closed before {:?} arrived",
                String::from_utf8_lossy(needle)
            );
        }
    }

    /// True when the server closed the connection (EOF with nothing pending).
    fn closed_by_server(&mut self) -> bool {
        !self.fill() && self.buf.is_empty()
    }

    fn read_response(&mut self) -> Response {
        let (status, headers, head_len) = loop {
            let mut hs = [httparse::EMPTY_HEADER; 32];
            let mut r = httparse::Response::new(&mut hs);
            if let httparse::Status::Complete(n) = r.parse(&self.buf).expect("valid response head")
            {
                let headers = r
                    .headers
                    .iter()
                    .map(|h| {
                        (
                            h.name.to_string(),
                            String::from_utf8_lossy(h.value).into_owned(),
                        )
                    })
                    .collect::<Vec<_>>();
                break (r.code.unwrap(), headers, n);
            }
            assert!(self.fill(), "connection closed before a response head");
        };
        self.buf.drain(..head_len);
        let mut resp = Response {
            status,
            headers,
            body: Vec::new(),
            chunks: Vec::new(),
            complete: false,
        };
        if resp
            .header("transfer-encoding")
            .is_some_and(|v| v.contains("chunked"))
        {
            self.read_chunks(&mut resp);
        } else {
            let len: usize = resp
                .header("content-length")
                .map_or(0, |v| v.parse().unwrap());
            while self.buf.len() < len {
                if !self.fill() {
                    resp.body = std::mem::take(&mut self.buf);
                    return resp;
                }
            }
            resp.body = self.buf.drain(..len).collect();
            resp.complete = true;
        }
        resp
    }

    fn read_chunks(&mut self, resp: &mut Response) {
        loop {
            match httparse::parse_chunk_size(&self.buf).expect("chunk size") {
                httparse::Status::Complete((n, 0)) => {
                    while self.buf.len() < n + 2 {
                        if !self.fill() {
                            return;
                        }
                    }
                    assert_eq!(&self.buf[n..n + 2], b"\r\n");
                    self.buf.drain(..n + 2);
                    resp.complete = true;
                    return;
                }
                httparse::Status::Complete((n, size)) => {
                    let end = n + size as usize + 2;
                    while self.buf.len() < end {
                        if !self.fill() {
                            return;
                        }
                    }
                    let data = self.buf[n..end - 2].to_vec();
                    assert_eq!(&self.buf[end - 2..end], b"\r\n");
                    self.buf.drain(..end);
                    resp.body.extend_from_slice(&data);
                    resp.chunks.push((Instant::now(), data));
                }
                httparse::Status::Partial => {
                    if !self.fill() {
                        return;
                    }
                }
            }
        }
    }
}

fn start(cfg: MockConfig) -> MockServer {
    MockServer::start(cfg).expect("mock server starts")
}

/// The drivers this machine can run: always epoll, io_uring when the kernel has it.
fn drivers() -> Vec<DriverChoice> {
    let mut d = vec![DriverChoice::Epoll];
    if resolve_driver(DriverChoice::IoUring).is_ok() {
        d.push(DriverChoice::IoUring);
    }
    d
}

fn request(server: &MockServer, path: &str, body: &str) -> Response {
    let mut c = Client::connect(server.addr());
    c.post(path, body, "");
    c.read_response()
}

#[test]
fn completion_stream_has_the_golden_shape() {
    for driver in drivers() {
        let server = start(MockConfig {
            tokens_per_chunk: 2,
            driver,
            ..MockConfig::default()
        });
        assert_eq!(
            DriverChoice::from(server.driver()),
            driver,
            "runs on the asked driver"
        );
        let body = r#"{"model":"mock-model","prompt":"one two three","max_tokens":5,"stream":true,
                       "stream_options":{"include_usage":true}}"#;
        let resp = request(&server, "/v1/completions", body);
        assert_eq!(resp.status, 200, "{driver:?}");
        assert!(resp
            .header("content-type")
            .unwrap()
            .starts_with("text/event-stream"));
        assert!(resp.complete, "stream ends with the last chunk");
        let events = resp.events();
        assert_eq!(events.last().unwrap(), "[DONE]");
        let json = resp.json_events();
        // ceil(5 / 2) = 3 content chunks, then usage.
        assert_eq!(json.len(), 4, "{events:?}");
        let texts: Vec<&str> = json[..3]
            .iter()
            .map(|e| e["choices"][0]["text"].as_str().unwrap())
            .collect();
        assert_eq!(texts, [" tok tok", " tok tok", " tok"]);
        let finish: Vec<&Value> = json[..3]
            .iter()
            .map(|e| &e["choices"][0]["finish_reason"])
            .collect();
        assert_eq!(finish, [&Value::Null, &Value::Null, &Value::from("length")]);
        for e in &json[..3] {
            assert_eq!(e["object"], "text_completion");
            assert_eq!(e["model"], "mock-model");
            assert!(e["id"].as_str().unwrap().starts_with("cmpl-"));
            assert_eq!(e["choices"][0]["logprobs"], Value::Null);
            assert_eq!(e["choices"][0]["index"], 0);
        }
        assert_eq!(json[3]["choices"], serde_json::json!([]));
        assert_eq!(
            json[3]["usage"],
            serde_json::json!({"prompt_tokens": 3, "total_tokens": 8, "completion_tokens": 5})
        );
        server.shutdown();
    }
}

#[test]
fn chat_stream_opens_with_the_role_chunk() {
    let server = start(MockConfig {
        tokens_per_chunk: 3,
        ..MockConfig::default()
    });
    let body = r#"{"messages":[{"role":"user","content":[{"type":"text","text":"a b c d"}]}],
                   "max_completion_tokens":7,"stream":true,"stream_options":{"include_usage":true}}"#;
    let resp = request(&server, "/v1/chat/completions", body);
    let json = resp.json_events();
    assert_eq!(
        json[0]["choices"][0]["delta"],
        serde_json::json!({"role":"assistant","content":""})
    );
    assert_eq!(json[0]["object"], "chat.completion.chunk");
    let contents: Vec<&str> = json[1..4]
        .iter()
        .map(|e| e["choices"][0]["delta"]["content"].as_str().unwrap())
        .collect();
    assert_eq!(contents, [" tok tok tok", " tok tok tok", " tok"]);
    assert_eq!(json[3]["choices"][0]["finish_reason"], "length");
    // List content counts the words of its text.
    assert_eq!(json[4]["usage"]["prompt_tokens"], 4);
    assert_eq!(json[4]["usage"]["completion_tokens"], 7);

    // Without include_usage there is no usage chunk; max_tokens works for chat too.
    let body =
        r#"{"messages":[{"role":"user","content":"hi there"}],"max_tokens":2,"stream":true}"#;
    let json = request(&server, "/v1/chat/completions", body).json_events();
    assert_eq!(json.len(), 1 + 1, "role + one chunk of 2 tokens (k = 3)");
    assert!(json.iter().all(|e| e.get("usage").is_none()));
}

#[test]
fn no_usage_config_suppresses_the_usage_chunk() {
    let server = start(MockConfig {
        usage: false,
        ..MockConfig::default()
    });
    let body =
        r#"{"prompt":"x","max_tokens":2,"stream":true,"stream_options":{"include_usage":true}}"#;
    let json = request(&server, "/v1/completions", body).json_events();
    assert_eq!(json.len(), 2);
    assert!(json.iter().all(|e| e.get("usage").is_none()));
}

#[test]
fn default_token_count_applies_without_max_tokens() {
    let server = start(MockConfig {
        num_tokens: 4,
        ..MockConfig::default()
    });
    let json = request(
        &server,
        "/v1/completions",
        r#"{"prompt":"x","stream":true}"#,
    )
    .json_events();
    assert_eq!(json.len(), 4);
}

#[test]
fn non_streaming_answers_are_content_length_json() {
    let server = start(MockConfig::default());
    let resp = request(
        &server,
        "/v1/completions",
        r#"{"prompt":"a b","max_tokens":3}"#,
    );
    assert_eq!(resp.status, 200);
    assert!(resp.header("content-length").is_some());
    let v = resp.json();
    assert_eq!(v["choices"][0]["text"], " tok tok tok");
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    assert_eq!(v["usage"]["prompt_tokens"], 2);
    let resp = request(
        &server,
        "/v1/chat/completions",
        r#"{"messages":[{"role":"user","content":"q"}],"max_tokens":2}"#,
    );
    let v = resp.json();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(
        v["choices"][0]["message"],
        serde_json::json!({"role":"assistant","content":" tok tok"})
    );
}

#[test]
fn keep_alive_serves_requests_in_sequence_and_pipelined() {
    for driver in drivers() {
        let server = start(MockConfig {
            driver,
            ..MockConfig::default()
        });
        let mut c = Client::connect(server.addr());
        for _ in 0..2 {
            c.post(
                "/v1/completions",
                r#"{"prompt":"p","max_tokens":2,"stream":true}"#,
                "",
            );
            let r = c.read_response();
            assert_eq!((r.status, r.complete), (200, true));
        }
        // Two requests in one write: both answered, in order.
        let one = "POST /v1/completions HTTP/1.1\r\nContent-Length: 29\r\n\r\n{\"prompt\":\"p\",\"max_tokens\":1}";
        c.send_raw(format!("{one}GET /health HTTP/1.1\r\n\r\n").as_bytes());
        assert_eq!(c.read_response().json()["choices"][0]["text"], " tok");
        assert_eq!(c.read_response().status, 200);
        let stats = server.stats();
        assert_eq!(stats.connections_accepted, 1, "{driver:?}");
        assert_eq!(stats.requests_total, 4);
        assert_eq!(stats.by_path["/v1/completions"], 3);
        assert_eq!(stats.by_path["/health"], 1);
    }
}

#[test]
fn connection_close_is_honoured_and_announced() {
    let server = start(MockConfig::default());
    let mut c = Client::connect(server.addr());
    c.post(
        "/v1/completions",
        r#"{"prompt":"p","max_tokens":1}"#,
        "Connection: close\r\n",
    );
    let r = c.read_response();
    assert_eq!(r.header("connection"), Some("close"));
    assert!(c.closed_by_server());
}

/// A connection the mock closes is closed even when a process spawned while it was open is
/// still running: accepted sockets are close-on-exec on every driver. (On io_uring they
/// were not: the child kept the connection open, the client saw no end until it exited,
/// and the fault-matrix runs, which start the binary beside live mocks, timed out.)
#[test]
fn a_closed_connection_does_not_leak_into_child_processes() {
    for driver in drivers() {
        let server = start(MockConfig {
            driver,
            ..MockConfig::default()
        });
        let mut c = Client::connect(server.addr());
        c.get("/health");
        c.read_response();
        // Outlives the IO_TIMEOUT of the read below; killed (by its pid) at the end.
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .expect("spawn sleep");
        c.post(
            "/v1/completions",
            r#"{"prompt":"p","max_tokens":1}"#,
            "Connection: close\r\n",
        );
        c.read_response();
        let closed = c.closed_by_server();
        let _ = child.kill();
        let _ = child.wait();
        assert!(closed, "{driver:?}: the connection ended");
    }
}

#[test]
fn close_after_response_closes_each_stream_unannounced() {
    let server = start(MockConfig {
        close_after_response: true,
        ..MockConfig::default()
    });
    let mut c = Client::connect(server.addr());
    c.post(
        "/v1/completions",
        r#"{"prompt":"p","max_tokens":2,"stream":true}"#,
        "",
    );
    let r = c.read_response();
    assert!(r.complete);
    assert_eq!(r.header("connection"), None);
    assert!(c.closed_by_server());
    // Non-streaming answers keep the connection (only streams are closed).
    let mut c = Client::connect(server.addr());
    c.post("/v1/completions", r#"{"prompt":"p","max_tokens":2}"#, "");
    c.read_response();
    c.get("/health");
    assert_eq!(c.read_response().status, 200);
}

#[test]
fn chunked_and_large_request_bodies_are_read() {
    let server = start(MockConfig::default());
    // ~2.4 MB prompt of 400k words, Content-Length framed.
    let prompt = "word ".repeat(400_000);
    let body = format!(r#"{{"prompt":"{prompt}","max_tokens":1}}"#);
    let v = request(&server, "/v1/completions", &body).json();
    assert_eq!(v["usage"]["prompt_tokens"], 400_000);
    // The same body, chunked in odd pieces.
    let mut c = Client::connect(server.addr());
    let mut raw = b"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for piece in body.as_bytes().chunks(70_001) {
        raw.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        raw.extend_from_slice(piece);
        raw.extend_from_slice(b"\r\n");
    }
    raw.extend_from_slice(b"0\r\n\r\n");
    c.send_raw(&raw);
    assert_eq!(c.read_response().json()["usage"]["prompt_tokens"], 400_000);
}

#[test]
fn chunked_request_body_with_a_bare_lf_after_chunk_data_is_refused() {
    let server = start(MockConfig::default());
    let mut c = Client::connect(server.addr());
    c.send_raw(
        b"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n\
          5\r\n{\"a\":\n0\r\n\r\n",
    );
    let r = c.read_response();
    assert_eq!(r.status, 400);
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("chunk data not followed by CRLF"));
    assert!(c.closed_by_server());
}

#[test]
fn bad_requests_get_json_errors() {
    let server = start(MockConfig {
        max_body_bytes: 1000,
        ..MockConfig::default()
    });
    let r = request(&server, "/v1/nope", "{}");
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["error"]["code"], 404);
    let mut c = Client::connect(server.addr());
    c.get("/v1/completions");
    let r = c.read_response();
    assert_eq!(r.status, 405);
    assert_eq!(r.header("allow"), Some("POST"));
    let r = request(&server, "/v1/completions", "{not json");
    assert_eq!(r.status, 400);
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("invalid JSON body"));
    let r = request(&server, "/v1/completions", r#"{"max_tokens":2}"#);
    assert_eq!(r.status, 400, "prompt is required");
    let r = request(
        &server,
        "/v1/completions",
        r#"{"prompt":"x","max_tokens":0}"#,
    );
    assert_eq!(r.status, 400);
    let r = request(
        &server,
        "/v1/completions",
        &format!(r#"{{"prompt":"{}"}}"#, "x".repeat(2000)),
    );
    assert_eq!(r.status, 413);
    let mut c = Client::connect(server.addr());
    c.send_raw(b"NOT HTTP\r\n\r\n");
    assert_eq!(c.read_response().status, 400);
    assert!(c.closed_by_server());
    assert_eq!(server.stats().rejected, 7);
}

#[test]
fn stream_timing_follows_ttft_and_itl() {
    let ttft = Duration::from_millis(50);
    let itl = Duration::from_millis(10);
    let slack = Duration::from_millis(40);
    for driver in drivers() {
        let server = start(MockConfig {
            first_token_delay: ttft,
            token_interval: itl,
            driver,
            ..MockConfig::default()
        });
        let mut c = Client::connect(server.addr());
        let sent = c.post(
            "/v1/completions",
            r#"{"prompt":"p","max_tokens":6,"stream":true}"#,
            "",
        );
        let r = c.read_response();
        let content: Vec<Instant> = r.chunks.iter().take(6).map(|(t, _)| *t).collect();
        assert_eq!(content.len(), 6);
        for (i, t) in content.iter().enumerate() {
            let due = ttft + itl * i as u32;
            let got = *t - sent;
            assert!(got >= due, "{driver:?} chunk {i} at {got:?}, due {due:?}");
            assert!(
                got < due + slack,
                "{driver:?} chunk {i} at {got:?}, due {due:?}"
            );
        }
    }
}

#[test]
fn timing_report_describes_the_emitted_timeline() {
    let (ttft_ms, itl_ms, tokens) = (20.0, 5.0, 5u64);
    // Upper bounds only catch gross errors: a loaded 2-core machine can be late.
    let slack_ms = 200.0;
    for driver in drivers() {
        let server = start(MockConfig {
            first_token_delay: Duration::from_millis(20),
            token_interval: Duration::from_millis(5),
            num_tokens: tokens as usize,
            timing_report: true,
            driver,
            ..MockConfig::default()
        });
        // Three streams on one keep-alive connection (the trace is reused), one chat
        // stream (its role chunk is not content), one on a second connection, and a
        // non-streaming request that must not count.
        let mut c = Client::connect(server.addr());
        for body in [
            r#"{"prompt":"a","stream":true}"#,
            r#"{"prompt":"b","stream":true,"stream_options":{"include_usage":true}}"#,
            r#"{"prompt":"c","stream":false}"#,
        ] {
            c.post("/v1/completions", body, "");
            assert!(c.read_response().complete);
        }
        c.post(
            "/v1/chat/completions",
            r#"{"messages":[{"role":"user","content":"d"}],"stream":true}"#,
            "",
        );
        assert!(c.read_response().complete);
        let other = request(
            &server,
            "/v1/completions",
            r#"{"prompt":"e","stream":true}"#,
        );
        assert!(other.complete);

        let r = server.timing_report();
        let streams = 4;
        assert_eq!(r.streams, streams, "{driver:?} {r:?}");
        assert_eq!(r.chunks, streams * tokens, "{driver:?} {r:?}");
        // Each chunk is handed off no earlier than it was due.
        assert!(r.ttft_ms.mean >= ttft_ms, "{driver:?} {r:?}");
        assert!(r.ttft_ms.mean < ttft_ms + slack_ms, "{driver:?} {r:?}");
        assert!(r.ttft_ms.median >= ttft_ms && r.ttft_ms.p99 >= r.ttft_ms.median);
        // Per stream, TTFT + the sum of its ITLs is the last hand-off, due at 20 + 4 * 5 ms;
        // averaged: mean TTFT + 4 * mean ITL >= 40 ms (up to rounding).
        let span = r.ttft_ms.mean + (tokens - 1) as f64 * r.itl_ms.mean;
        assert!(span >= ttft_ms + 4.0 * itl_ms - 1e-6, "{driver:?} {r:?}");
        // A single ITL is the next wake-up's latency minus this one's, so it can fall a
        // hair under 5 ms; 1 ms covers timer noise while 0 (chunks batched) would fail.
        assert!(r.itl_ms.p50 >= itl_ms - 1.0, "{driver:?} {r:?}");
        assert_eq!(r.itl_ms.p50, r.itl_ms.median);
        assert!(r.itl_ms.p99 < itl_ms + slack_ms, "{driver:?} {r:?}");
        assert!(r.lateness_ms.p50 >= 0.0 && r.lateness_ms.max >= r.lateness_ms.p99);
        assert!(r.lateness_ms.max < slack_ms, "{driver:?} {r:?}");

        server.reset_stats();
        assert_eq!(server.timing_report().streams, 0);
    }
}

#[test]
fn timing_report_leaves_out_faulty_streams_and_is_off_by_default() {
    let faulty = start(MockConfig {
        timing_report: true,
        faults: FaultConfig {
            malformed: 1.0,
            ..FaultConfig::default()
        },
        ..MockConfig::default()
    });
    assert!(
        request(
            &faulty,
            "/v1/completions",
            r#"{"prompt":"a","stream":true}"#
        )
        .complete
    );
    assert_eq!(faulty.timing_report().streams, 0);
    let off = start(MockConfig::default());
    assert!(request(&off, "/v1/completions", r#"{"prompt":"a","stream":true}"#).complete);
    let r = off.timing_report();
    assert_eq!((r.streams, r.chunks), (0, 0));
}

#[test]
fn chat_role_chunk_is_sent_at_arrival_before_ttft() {
    // The first token is a minute away, far past the client's 10 s read timeout: the role
    // chunk arriving at all shows it does not wait for the first token.
    let server = start(MockConfig {
        first_token_delay: Duration::from_secs(60),
        ..MockConfig::default()
    });
    let mut c = Client::connect(server.addr());
    let sent = c.post(
        "/v1/chat/completions",
        r#"{"messages":[],"max_tokens":1,"stream":true}"#,
        "",
    );
    c.read_until(b"\"role\":\"assistant\"");
    assert!(sent.elapsed() < Duration::from_secs(60));
}

#[test]
fn peak_in_flight_counts_parallel_streams() {
    let n = 8;
    let server = start(MockConfig {
        first_token_delay: Duration::from_millis(300),
        ..MockConfig::default()
    });
    let addr = server.addr();
    let barrier = Arc::new(Barrier::new(n));
    let clients: Vec<_> = (0..n)
        .map(|_| {
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                let mut c = Client::connect(addr);
                barrier.wait();
                c.post(
                    "/v1/completions",
                    r#"{"prompt":"p","max_tokens":2,"stream":true}"#,
                    "",
                );
                c.read_response().complete
            })
        })
        .collect();
    for c in clients {
        assert!(c.join().unwrap());
    }
    let stats = server.stats();
    assert_eq!(stats.peak_in_flight, n as u64);
    assert_eq!(stats.in_flight, 0);
    server.reset_stats();
    let stats = server.stats();
    assert_eq!((stats.requests_total, stats.peak_in_flight), (0, 0));
}

fn metric(server: &MockServer, name: &str) -> f64 {
    let mut c = Client::connect(server.addr());
    c.get("/metrics");
    let r = c.read_response();
    let text = String::from_utf8(r.body).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("{name}{{model_name=\"mock-model\"}} ")))
        .unwrap_or_else(|| panic!("{name} in {text}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

#[test]
fn a_client_leaving_mid_stream_is_still_counted() {
    let server = start(MockConfig {
        token_interval: Duration::from_millis(5),
        ..MockConfig::default()
    });
    let mut c = Client::connect(server.addr());
    c.post(
        "/v1/completions",
        r#"{"prompt":"p","max_tokens":1000,"stream":true}"#,
        "",
    );
    assert!(c.fill(), "the stream started");
    drop(c);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let s = server.stats();
        if s.requests_total == 1 && s.in_flight == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "abandoned stream never accounted: {s:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn metrics_show_running_requests_and_prefix_cache() {
    let server = start(MockConfig {
        first_token_delay: Duration::from_millis(400),
        ..MockConfig::default()
    });
    assert_eq!(metric(&server, "vllm:num_requests_running"), 0.0);
    let addr = server.addr();
    let stream = std::thread::spawn(move || {
        let mut c = Client::connect(addr);
        c.post(
            "/v1/completions",
            r#"{"prompt":"p","max_tokens":1,"stream":true}"#,
            "",
        );
        c.read_response().complete
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    while metric(&server, "vllm:num_requests_running") != 1.0 {
        assert!(Instant::now() < deadline, "running never reached 1");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(stream.join().unwrap());
    assert_eq!(metric(&server, "vllm:num_requests_running"), 0.0);
    assert_eq!(metric(&server, "vllm:num_requests_waiting"), 0.0);

    // 40 words = 2 full blocks of 16; the second identical prompt hits both blocks.
    let prompt = (0..40)
        .map(|i| format!("w{i}"))
        .collect::<Vec<_>>()
        .join(" ");
    let q0 = metric(&server, "vllm:prefix_cache_queries_total");
    for _ in 0..2 {
        request(
            &server,
            "/v1/completions",
            &format!(r#"{{"prompt":"{prompt}","max_tokens":1}}"#),
        );
    }
    assert_eq!(
        metric(&server, "vllm:prefix_cache_queries_total") - q0,
        80.0
    );
    assert_eq!(metric(&server, "vllm:prefix_cache_hits_total"), 32.0);
    let mut c = Client::connect(server.addr());
    c.post("/reset_prefix_cache", "", "");
    assert_eq!(c.read_response().status, 200);
    request(
        &server,
        "/v1/completions",
        &format!(r#"{{"prompt":"{prompt}","max_tokens":1}}"#),
    );
    assert_eq!(
        metric(&server, "vllm:prefix_cache_hits_total"),
        32.0,
        "cache was emptied"
    );
}

fn faulty(faults: FaultConfig) -> MockServer {
    start(MockConfig {
        faults,
        stall_for: Duration::from_millis(300),
        ..MockConfig::default()
    })
}

const STREAM_10: &str = r#"{"prompt":"p","max_tokens":10,"stream":true}"#;

#[test]
fn fault_500_and_429_are_json_errors() {
    for (faults, status, kind) in [
        (
            FaultConfig {
                error_500: 1.0,
                ..Default::default()
            },
            500,
            FaultKind::Error500,
        ),
        (
            FaultConfig {
                error_429: 1.0,
                ..Default::default()
            },
            429,
            FaultKind::Error429,
        ),
    ] {
        let server = faulty(faults);
        let r = request(&server, "/v1/completions", STREAM_10);
        assert_eq!(r.status, status);
        assert_eq!(r.json()["error"]["code"], status);
        let stats = server.stats();
        assert_eq!(stats.faults.total(), 1);
        match kind {
            FaultKind::Error500 => assert_eq!(stats.faults.error_500, 1),
            _ => assert_eq!(stats.faults.error_429, 1),
        }
    }
}

#[test]
fn fault_disconnect_cuts_the_stream() {
    let server = faulty(FaultConfig {
        disconnect: 1.0,
        ..Default::default()
    });
    let mut c = Client::connect(server.addr());
    c.post("/v1/completions", STREAM_10, "");
    let r = c.read_response();
    assert_eq!(r.status, 200);
    assert!(!r.complete, "no last chunk");
    assert_eq!(
        r.chunks.len(),
        3,
        "a few content chunks, then the socket closes"
    );
    assert!(!r.events().contains(&"[DONE]".to_string()));
    assert_eq!(server.stats().faults.disconnect, 1);
}

#[test]
fn fault_stall_goes_silent_then_closes() {
    let server = faulty(FaultConfig {
        stall: 1.0,
        ..Default::default()
    });
    let mut c = Client::connect(server.addr());
    let sent = c.post("/v1/completions", STREAM_10, "");
    let r = c.read_response();
    assert!(!r.complete);
    assert_eq!(r.chunks.len(), 1, "only the first content chunk");
    assert!(
        sent.elapsed() >= Duration::from_millis(300),
        "closed only after stall_for"
    );
    assert_eq!(server.stats().faults.stall, 1);
}

#[test]
fn fault_malformed_sends_one_invalid_event() {
    let server = faulty(FaultConfig {
        malformed: 1.0,
        ..Default::default()
    });
    let r = request(&server, "/v1/completions", STREAM_10);
    assert!(r.complete);
    let events = r.events();
    let invalid = events
        .iter()
        .filter(|e| *e != "[DONE]" && serde_json::from_str::<Value>(e).is_err())
        .count();
    assert_eq!(invalid, 1);
    assert_eq!(events.last().unwrap(), "[DONE]");
    assert_eq!(server.stats().faults.malformed, 1);
}

/// A 200 head, then the socket closes: nothing of the body, streamed or not.
#[test]
fn fault_close_after_head_sends_the_head_alone() {
    let server = faulty(FaultConfig {
        close_after_head: 1.0,
        ..Default::default()
    });
    for (path, body) in [
        ("/v1/completions", STREAM_10),
        ("/v1/embeddings", r#"{"input":"a b"}"#),
    ] {
        let mut c = Client::connect(server.addr());
        c.post(path, body, "");
        let r = c.read_response();
        assert_eq!(r.status, 200, "{path}");
        assert!(!r.complete && r.body.is_empty(), "{path}: {r:?}");
        assert!(c.closed_by_server(), "{path}: closed after the head");
    }
    assert_eq!(server.stats().faults.close_after_head, 2);
}

#[test]
fn faults_are_reproducible_from_the_seed() {
    let run = |seed| {
        let server = start(MockConfig {
            seed,
            faults: FaultConfig {
                error_500: 0.3,
                error_429: 0.3,
                ..Default::default()
            },
            ..MockConfig::default()
        });
        let mut c = Client::connect(server.addr());
        (0..40)
            .map(|_| {
                c.post("/v1/completions", r#"{"prompt":"p","max_tokens":1}"#, "");
                c.read_response().status
            })
            .collect::<Vec<u16>>()
    };
    let a = run(7);
    assert_eq!(a, run(7));
    assert_ne!(a, run(8));
    assert!(a.contains(&200) && a.contains(&500) && a.contains(&429));
}

#[test]
fn request_log_records_prompt_hashes_and_ids() {
    let server = start(MockConfig {
        request_log: true,
        ..MockConfig::default()
    });
    let mut c = Client::connect(server.addr());
    for (prompt, id) in [
        ("same words", "r-1"),
        ("same words", "r-2"),
        ("other words", "r-3"),
    ] {
        let body = format!(r#"{{"prompt":"{prompt}","max_tokens":3}}"#);
        c.post("/v1/completions", &body, &format!("X-Request-Id: {id}\r\n"));
        let r = c.read_response();
        assert_eq!(r.header("x-request-id"), Some(id));
    }
    let log = server.request_log();
    assert_eq!(log.len(), 3);
    assert_eq!(log[0].prompt_hash, log[1].prompt_hash);
    assert_ne!(log[0].prompt_hash, log[2].prompt_hash);
    assert!(log[0].prompt_hash.is_some());
    assert_eq!(log[2].request_id.as_deref(), Some("r-3"));
    assert_eq!(log[0].max_tokens, Some(3));
    assert_eq!(log[0].prompt_tokens, Some(2));
    assert_eq!(
        (log[0].method, log[0].path.as_str(), log[0].status),
        ("POST", "/v1/completions", 200)
    );
    assert!(log.windows(2).all(|w| w[0].arrival <= w[1].arrival));
    assert_eq!(
        log.iter().map(|l| l.seq.unwrap()).collect::<Vec<_>>(),
        [0, 1, 2]
    );
}

#[test]
fn shutdown_is_prompt_with_streams_in_flight() {
    for driver in drivers() {
        let server = start(MockConfig {
            workers: 2,
            driver,
            faults: FaultConfig {
                stall: 1.0,
                ..Default::default()
            },
            stall_for: Duration::from_secs(60),
            ..MockConfig::default()
        });
        // One stalled stream (its head and first event received, so it is being served)
        // and one idle keep-alive connection.
        let mut stalled = Client::connect(server.addr());
        stalled.post("/v1/completions", STREAM_10, "");
        stalled.read_until(b"data: ");
        let mut idle = Client::connect(server.addr());
        idle.get("/health");
        idle.read_response();
        let t0 = Instant::now();
        server.shutdown();
        // The property is that shutdown does not wait out the 60 s stall; the bound leaves
        // room for a descheduled machine.
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{driver:?}: shutdown took {:?}",
            t0.elapsed()
        );
        let r = stalled.read_response();
        assert!(!r.complete);
        assert!(idle.closed_by_server());
    }
}

/// A crash at request 1 cuts every open connection (on both workers), the triggering
/// request's included; after `Down` new connections are refused, after `Restart` served.
#[test]
fn a_crash_cuts_every_connection_then_stays_down_or_serves_again() {
    for then in [AfterCrash::Down, AfterCrash::Restart] {
        let server = start(MockConfig {
            workers: 2,
            first_token_delay: Duration::from_secs(60),
            crash: Some(Crash {
                at_request: 1,
                then,
            }),
            ..MockConfig::default()
        });
        let mut idle = Client::connect(server.addr());
        idle.get("/health");
        idle.read_response();
        let mut streaming = Client::connect(server.addr());
        streaming.post("/v1/completions", STREAM_10, "");
        streaming.read_until(b"\r\n\r\n");
        let mut crashing = Client::connect(server.addr());
        crashing.post("/v1/completions", STREAM_10, "");
        assert!(crashing.closed_by_server(), "{then:?}: no answer at all");
        let cut = streaming.read_response();
        assert!(!cut.complete && cut.chunks.is_empty(), "{then:?}: {cut:?}");
        let t0 = Instant::now();
        assert!(
            idle.closed_by_server(),
            "{then:?}: the idle connection is closed"
        );
        eprintln!("{then:?}: idle closed after {:?}", t0.elapsed());
        assert_eq!(server.stats().crashes, 1);
        match then {
            AfterCrash::Down => {
                // The listeners close at the workers' next stop check: wait for that.
                let until = Instant::now() + IO_TIMEOUT;
                while TcpStream::connect(server.addr()).is_ok() {
                    assert!(Instant::now() < until, "still accepting after the crash");
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            AfterCrash::Restart => {
                // Served again: the next stream starts (its first token is a minute away).
                let mut again = Client::connect(server.addr());
                again.post("/v1/completions", STREAM_10, "");
                again.read_until(b"HTTP/1.1 200 OK\r\n");
                assert_eq!(server.stats().model_requests, 3);
            }
        }
    }
}

/// `padding` grows every event and body by a member no client reads; `response_headers`
/// appear on 200 model responses only.
#[test]
fn padding_and_extra_headers_shape_model_responses() {
    let server = start(MockConfig {
        padding: 1 << 20,
        response_headers: vec![("content-encoding".into(), "gzip".into())],
        ..MockConfig::default()
    });
    let stream = request(&server, "/v1/completions", STREAM_10);
    assert!(stream.complete);
    assert_eq!(stream.header("content-encoding"), Some("gzip"));
    for event in stream
        .json_events()
        .iter()
        .filter(|e| e["choices"] != Value::Array(vec![]))
    {
        assert_eq!(event["padding"].as_str().map(str::len), Some(1 << 20));
        assert_eq!(event["choices"][0]["text"], " tok");
    }
    let embedding = request(&server, "/v1/embeddings", r#"{"input":"a"}"#);
    assert_eq!(
        embedding.json()["padding"].as_str().map(str::len),
        Some(1 << 20)
    );
    let mut c = Client::connect(server.addr());
    c.get("/v1/models");
    assert_eq!(c.read_response().header("content-encoding"), None);
}

#[test]
fn several_workers_share_one_port() {
    let server = start(MockConfig {
        workers: 2,
        ..MockConfig::default()
    });
    assert_eq!(server.workers(), 2);
    for _ in 0..20 {
        let r = request(
            &server,
            "/v1/completions",
            r#"{"prompt":"p","max_tokens":1,"stream":true}"#,
        );
        assert!(r.complete);
    }
    let stats = server.stats();
    assert_eq!((stats.connections_accepted, stats.requests_total), (20, 20));
}

#[test]
fn firehose_streams_many_events_one_per_chunk() {
    let server = start(MockConfig::default());
    let r = request(
        &server,
        "/v1/completions",
        r#"{"prompt":"p","max_tokens":5000,"stream":true}"#,
    );
    assert!(r.complete);
    assert_eq!(r.json_events().len(), 5000);
}

#[test]
fn tokenize_and_detokenize_round_trip() {
    let server = start(MockConfig {
        max_model_len: 4096,
        ..MockConfig::default()
    });
    let v = request(&server, "/tokenize", r#"{"prompt":"the cat sat"}"#).json();
    assert_eq!(v["count"], 3);
    assert_eq!(v["max_model_len"], 4096);
    let tokens = v["tokens"].clone();
    let v = request(
        &server,
        "/detokenize",
        &serde_json::json!({ "tokens": tokens }).to_string(),
    )
    .json();
    assert_eq!(v["prompt"], "the cat sat");
    let off = start(MockConfig {
        tokenize_endpoints: false,
        metrics_endpoint: false,
        ..MockConfig::default()
    });
    assert_eq!(request(&off, "/tokenize", r#"{"prompt":"x"}"#).status, 404);
    let mut c = Client::connect(off.addr());
    c.get("/metrics");
    assert_eq!(c.read_response().status, 404);
}

#[test]
fn embeddings_pooling_and_rerank() {
    let server = start(MockConfig::default());
    let v = request(
        &server,
        "/v1/embeddings",
        r#"{"model":"mock-model","input":["a b","c d e"]}"#,
    )
    .json();
    assert_eq!(v["data"].as_array().unwrap().len(), 2);
    assert_eq!(v["data"][1]["index"], 1);
    assert_eq!(v["data"][0]["embedding"].as_array().unwrap().len(), 8);
    assert_eq!(v["usage"]["prompt_tokens"], 5);
    let again = request(&server, "/v1/embeddings", r#"{"input":["a b","c d e"]}"#).json();
    assert_eq!(v["data"], again["data"], "deterministic vectors");
    for path in ["/pooling", "/v1/pooling"] {
        let v = request(&server, path, r#"{"input":"x y"}"#).json();
        assert_eq!(v["data"][0]["data"].as_array().unwrap().len(), 8, "{path}");
    }
    for path in ["/rerank", "/v1/rerank"] {
        let v = request(
            &server,
            path,
            r#"{"query":"q","documents":["a","b c","d"]}"#,
        )
        .json();
        let results = v["results"].as_array().unwrap();
        assert_eq!(results.len(), 3);
        let scores: Vec<f64> = results
            .iter()
            .map(|r| r["relevance_score"].as_f64().unwrap())
            .collect();
        assert!(scores.windows(2).all(|w| w[0] >= w[1]), "best first");
        assert_eq!(v["usage"]["prompt_tokens"], 1 + 4);
    }
    let stats = server.stats();
    assert_eq!(stats.by_path["/v1/embeddings"], 2);
    assert_eq!(stats.by_path["/rerank"], 1);
}

#[test]
fn service_endpoints_answer_and_are_counted() {
    let server = start(MockConfig {
        model: "m-1".into(),
        ..MockConfig::default()
    });
    let mut c = Client::connect(server.addr());
    c.get("/v1/models");
    let v = c.read_response().json();
    assert_eq!(v["object"], "list");
    assert_eq!(v["data"][0]["id"], "m-1");
    assert_eq!(v["data"][0]["object"], "model");
    c.get("/health");
    assert_eq!(c.read_response().status, 200);
    for path in ["/start_profile", "/stop_profile", "/reset_prefix_cache"] {
        c.post(path, "", "");
        assert_eq!(c.read_response().status, 200, "{path}");
    }
    let stats = server.stats();
    for path in [
        "/v1/models",
        "/health",
        "/start_profile",
        "/stop_profile",
        "/reset_prefix_cache",
    ] {
        assert_eq!(stats.by_path[path], 1, "{path}");
    }
    assert_eq!(
        server.base_url(),
        format!("http://127.0.0.1:{}", server.addr().port())
    );
}

#[test]
fn invalid_config_is_refused_before_binding() {
    let err = MockServer::start(MockConfig {
        tokens_per_chunk: 0,
        ..MockConfig::default()
    })
    .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("tokens_per_chunk"));
}

#[test]
fn binary_serves_until_sigterm_and_writes_the_request_log() {
    use std::io::BufRead;
    use std::process::{Command, Stdio};

    let bin = env!("CARGO_BIN_EXE_mock-llm-server");
    let out = Command::new(bin).args(["--workers", "0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    let out = Command::new(bin)
        .args(["--fail-500", "1.5"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(Command::new(bin)
        .arg("--help")
        .output()
        .unwrap()
        .status
        .success());

    let log = std::env::temp_dir().join(format!("mock-log-{}.jsonl", std::process::id()));
    let timing = std::env::temp_dir().join(format!("mock-timing-{}.json", std::process::id()));
    let mut child = Command::new(bin)
        .args(["--port", "0", "--io-driver", "epoll", "--request-log"])
        .arg(&log)
        .arg("--timing-report")
        .arg(&timing)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    assert!(line.ends_with("(1 workers, epoll)\n"), "{line}");
    let addr: SocketAddr = line
        .strip_prefix("listening on http://")
        .and_then(|l| l.split(' ').next())
        .unwrap()
        .parse()
        .unwrap();
    let mut c = Client::connect(addr);
    c.post(
        "/v1/completions",
        r#"{"prompt":"a b","max_tokens":2,"stream":true}"#,
        "",
    );
    assert!(c.read_response().complete);
    // SAFETY: sending a signal to our own child process.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "mock-llm-server did not stop on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success());
    let text = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    let entries: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0]["path"], "/v1/completions");
    assert_eq!(entries[0]["prompt_tokens"], 2);
    let text = std::fs::read_to_string(&timing).unwrap();
    let _ = std::fs::remove_file(&timing);
    let report: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(report["streams"], 1);
    assert_eq!(report["chunks"], 2);
    for (group, keys) in [
        ("ttft_ms", &["mean", "median", "p99"][..]),
        ("itl_ms", &["mean", "median", "p50", "p99"]),
        ("lateness_ms", &["mean", "p50", "p99", "max"]),
    ] {
        for key in keys {
            assert!(report[group][key].is_f64(), "{group}.{key} in {text}");
        }
    }
}

/// The Qwen3 tokenizer (fetched by scripts/fetch-fixtures.sh): its directory and the
/// tokenizer itself; `None` (the test returns) when it has not been fetched.
/// The fetched Qwen3 tokenizer's directory and the tokenizer, loaded once for the module (a
/// load takes seconds in a debug build); `None` (the test returns) when it is not fetched.
fn qwen3() -> Option<(std::path::PathBuf, Arc<Tokenizer>)> {
    static TOK: std::sync::OnceLock<Arc<Tokenizer>> = std::sync::OnceLock::new();
    let dir = crate::util::fetched(crate::util::QWEN3)?;
    let tok = TOK.get_or_init(|| {
        let opts = TokenizerOptions::new(dir.to_str().unwrap());
        Arc::new(Tokenizer::load(&opts).expect("qwen3 loads"))
    });
    Some((dir, Arc::clone(tok)))
}

#[test]
fn a_real_tokenizer_counts_prompts_and_serves_tokenize_and_detokenize() {
    let Some((_, tok)) = qwen3() else { return };
    let server = start(MockConfig {
        tokenizer: Some(Arc::clone(&tok)),
        ..MockConfig::default()
    });
    let text = "Tokenizers disagree, don't they? Ünïcode and    spaces\n too.";
    let n = tok.count_tokens(text) as u64;
    assert_ne!(
        n,
        text.split_whitespace().count() as u64,
        "a text the toy counts differently"
    );
    let quoted = serde_json::to_string(text).unwrap();
    let chat = format!(
        r#"{{"messages":[{{"role":"user","content":[{{"type":"text","text":{quoted}}},
            {{"type":"image_url","image_url":{{"url":"data:image/png;base64,AAAA"}}}}]}}],"max_completion_tokens":2}}"#
    );
    let v = request(&server, "/v1/chat/completions", &chat).json();
    assert_eq!(
        v["usage"]["prompt_tokens"], n,
        "content parts: their text, images 0"
    );
    let completion = format!(r#"{{"prompt":{quoted},"max_tokens":2}}"#);
    let v = request(&server, "/v1/completions", &completion).json();
    assert_eq!(v["usage"]["prompt_tokens"], n);
    let v = request(&server, "/v1/completions", &completion).json();
    assert_eq!(
        v["usage"]["prompt_tokens"], n,
        "a cached count is the same count"
    );
    let embed = format!(r#"{{"input":[{quoted},"one more"]}}"#);
    let v = request(&server, "/v1/embeddings", &embed).json();
    assert_eq!(
        v["usage"]["prompt_tokens"],
        n + tok.count_tokens("one more") as u64
    );

    let body = format!(r#"{{"prompt":{quoted},"add_special_tokens":false}}"#);
    let v = request(&server, "/tokenize", &body).json();
    let ids: Vec<u32> = serde_json::from_value(v["tokens"].clone()).unwrap();
    assert_eq!(ids, tok.encode(text, false).unwrap());
    assert_eq!(v["count"], n);
    let body = serde_json::json!({ "tokens": ids }).to_string();
    let v = request(&server, "/detokenize", &body).json();
    assert_eq!(v["prompt"], text);
    let resp = request(&server, "/detokenize", r#"{"tokens":[1,-1]}"#);
    assert_eq!(resp.status, 400);
    let err = String::from_utf8_lossy(&resp.body);
    assert!(err.contains("token id -1 is out of range"), "{err}");
}

#[test]
fn counted_ahead_prompts_are_served_with_the_same_counts() {
    let Some((_, tok)) = qwen3() else { return };
    let server = start(MockConfig {
        tokenizer: Some(Arc::clone(&tok)),
        ..MockConfig::default()
    });
    let texts = ["first prompt, counted ahead", "second: ünïcode"];
    let requests: Vec<Vec<u8>> = texts
        .iter()
        .map(|t| {
            let body = serde_json::json!({
                "messages": [{"role": "user", "content": [{"type": "text", "text": t}]}],
                "max_completion_tokens": 1,
            })
            .to_string();
            format!(
                "POST /v1/chat/completions HTTP/1.1\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .into_bytes()
        })
        .chain([
            b"GET /health HTTP/1.1\r\n\r\n".to_vec(),
            b"not http".to_vec(),
        ])
        .collect();
    use rayon::prelude::*;
    server.count_ahead(requests.par_iter());
    for t in texts {
        let body = serde_json::json!({
            "messages": [{"role": "user", "content": [{"type": "text", "text": t}]}],
            "max_completion_tokens": 1,
        })
        .to_string();
        let v = request(&server, "/v1/chat/completions", &body).json();
        assert_eq!(
            v["usage"]["prompt_tokens"],
            tok.count_tokens(t) as u64,
            "{t}"
        );
    }
}

#[test]
fn binary_tokenizer_flag_counts_with_that_tokenizer_and_refuses_a_bad_path() {
    use std::io::BufRead;
    use std::process::{Command, Stdio};

    let bin = env!("CARGO_BIN_EXE_mock-llm-server");
    let Some((dir, tok)) = qwen3() else { return };
    let missing = dir.join("no-such-dir");
    let out = Command::new(bin)
        .arg("--tokenizer")
        .arg(&missing)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--tokenizer") && err.contains("no-such-dir"),
        "{err}"
    );

    // Both forms: the directory, and the tokenizer.json in it.
    for path in [dir.clone(), dir.join("tokenizer.json")] {
        let mut child = Command::new(bin)
            .args(["--port", "0", "--io-driver", "epoll", "--tokenizer"])
            .arg(&path)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        stderr.read_line(&mut line).unwrap();
        let addr: SocketAddr = line
            .strip_prefix("listening on http://")
            .and_then(|l| l.split(' ').next())
            .unwrap_or_else(|| panic!("{line}"))
            .parse()
            .unwrap();
        let text = "Hello, world: counted by Qwen3's tokenizer.";
        let mut c = Client::connect(addr);
        c.post(
            "/v1/completions",
            &serde_json::json!({ "prompt": text, "max_tokens": 1 }).to_string(),
            "",
        );
        let v = c.read_response().json();
        assert_eq!(v["usage"]["prompt_tokens"], tok.count_tokens(text) as u64);
        // SAFETY: sending a signal to our own child process.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "mock-llm-server did not stop");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// `vllm-bench --mock-server` for each backend, with the mock's toy tokenizer or the
/// client's `--tokenizer`: "Total input tokens" (and the saved total) is what the client
/// planned, and the prompts are not re-aligned.
fn input_totals_are_the_planned_ones(tokenizer: Option<(&std::path::Path, &Tokenizer)>) {
    let dir = crate::util::TempDir::new("mock-totals");
    let rows = [
        (
            "How many blocks are there?",
            r#"{"prompt": "How many blocks are there?", "image_files": ["a.png", "https://h/b.jpg"]}"#,
        ),
        (
            "Compare and contrast, please.",
            r#"{"content": [{"type": "text", "text": "Compare "}, {"type": "image", "image": "c.png"}, {"type": "text", "text": "and contrast, please."}]}"#,
        ),
    ];
    let jsonl = dir.path().join("images.jsonl");
    let lines: Vec<&str> = rows.iter().map(|r| r.1).collect();
    std::fs::write(&jsonl, lines.join("\n") + "\n").unwrap();
    let count = |t: &str| match tokenizer {
        Some((_, tok)) => tok.count_tokens(t),
        None => t.split_whitespace().count(),
    };
    let image_tokens: usize = rows.iter().map(|r| count(r.0)).sum();
    let (n, len, out) = (3usize, 24usize, 4usize);
    let jsonl = jsonl.to_str().unwrap();
    let cases: [(&str, &[&str], usize); 7] = [
        ("completions", &["--backend", "openai"], n * len),
        ("chat", &["--backend", "openai-chat"], n * len),
        ("embeddings", &["--backend", "openai-embeddings"], n * len),
        (
            "embeddings-chat",
            &["--backend", "openai-embeddings-chat"],
            n * len,
        ),
        (
            "random-mm",
            &["--backend", "openai-chat", "--dataset-name", "random-mm"],
            n * len,
        ),
        (
            "custom_image",
            &[
                "--backend",
                "openai-chat",
                "--dataset-name",
                "custom_image",
                "--dataset-path",
                jsonl,
                "--num-prompts",
                "2",
            ],
            image_tokens,
        ),
        // 3 turns with full history: turn k sends k user messages and k - 1 answers.
        (
            "multi-turn",
            &["--backend", "openai-chat", "--multi-turn"],
            n * (6 * len + 3 * out),
        ),
    ];
    for (name, args, expected) in cases {
        let (n, len, out) = (n.to_string(), len.to_string(), out.to_string());
        let mut argv = vec![
            "--mock-server",
            "--num-prompts",
            &n,
            "--random-input-len",
            &len,
            "--random-output-len",
            &out,
            "--save-result",
            "--result-dir",
            dir.arg(),
            "--result-filename",
            "r.json",
        ];
        argv.extend_from_slice(args);
        let tok_path;
        if let Some((path, _)) = tokenizer {
            tok_path = path.to_str().unwrap().to_string();
            argv.extend(["--tokenizer", &tok_path]);
        }
        let run = crate::util::run_in_process(&argv);
        assert_eq!(run.code, 0, "{name}: {}", run.stderr);
        for stream in [&run.stdout, &run.stderr] {
            assert!(!stream.contains("mismatch"), "{name}: {stream}");
        }
        let line = run
            .stdout
            .lines()
            .find(|l| l.starts_with("Total input tokens:"))
            .unwrap_or_else(|| panic!("{name}: {}", run.stdout));
        assert_eq!(
            line.split_whitespace().nth(3),
            Some(&*expected.to_string()),
            "{name}: {line}"
        );
        let saved: Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("r.json")).unwrap()).unwrap();
        assert_eq!(saved["total_input_tokens"], expected, "{name}");
    }
}

#[test]
fn mock_input_token_totals_are_the_planned_ones_for_every_backend() {
    input_totals_are_the_planned_ones(None);
}

#[test]
fn mock_input_token_totals_are_the_planned_ones_with_the_clients_tokenizer() {
    let Some((dir, tok)) = qwen3() else { return };
    input_totals_are_the_planned_ones(Some((&dir, &tok)));
}

/// `MockConfig::tls` (`mock-llm-server --tls`): the mock serves HTTPS with a certificate it
/// made at start; the engine streams every request through it with `--insecure`, and without
/// it refuses the self-signed certificate in one line, on both I/O drivers.
#[test]
fn the_mock_serves_https_with_a_self_signed_certificate_an_insecure_client_accepts() {
    use vllm_bench::cli::Backend;
    use vllm_bench::engine;
    use vllm_bench::http::conn::tls_setup;
    use vllm_bench::http::url::BaseUrl;

    for driver in drivers() {
        let server = start(MockConfig {
            tls: true,
            driver,
            num_tokens: 3,
            ..MockConfig::default()
        });
        assert!(
            server.base_url().starts_with("https://127.0.0.1:"),
            "{}",
            server.base_url()
        );
        let url = BaseUrl::parse(&server.base_url()).expect("the mock's URL parses");
        let run = |insecure: bool, n: usize| {
            let mut endpoint = crate::util::endpoint(&url);
            endpoint.tls = Some(tls_setup("127.0.0.1", insecure).expect("tls setup"));
            let w = crate::util::workload(&url, Backend::Vllm, "mock-model", n, 3);
            let mut o = crate::util::options(1, crate::util::auto_driver());
            o.request_timeout = Duration::from_secs(10);
            engine::run(endpoint, w, o, |_| {}).expect("engine run")
        };
        let r = run(true, 6);
        assert_eq!(r.merged.outputs.len(), 6);
        for o in &r.merged.outputs {
            assert!(o.success, "{driver:?}: {}", o.error);
            assert_eq!(
                o.output_tokens, 3,
                "{driver:?}: usage read from the decrypted stream"
            );
        }
        let r = run(false, 2);
        for o in &r.merged.outputs {
            assert!(
                !o.success && o.error.contains("invalid peer certificate"),
                "{driver:?}: a self-signed certificate is refused without --insecure: {}",
                o.error
            );
        }
    }
}
