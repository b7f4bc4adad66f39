//! floor-client: the least work a streaming benchmark client can do on this machine and
//! kernel, so bench-overhead can show every client's CPU per event as a ratio to it.
//!
//! It keeps N kept-alive connections busy with one fixed request each (closed loop, the
//! harness's `--num-prompts` / `--max-concurrency`), takes one monotonic timestamp per
//! completed read, counts `data: ` lines (no JSON, no HTTP parsing beyond the end of a
//! chunked response) and writes the few result keys the harness reads. Three receive
//! paths (`--floor-mode`):
//! - `epoll`: non-blocking sockets, `epoll_wait`, `read` until `EAGAIN`;
//! - `uring`: io_uring, one single-shot `recv` per connection in flight, default setup flags;
//! - `uring-defer`: the same with `IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN`
//!   (completions are posted only when the issuer enters the ring to wait for them).
//!
//! With an embeddings or pooling endpoint (`--endpoint` containing `embeddings` or
//! `pooling`) each request is a non-streamed pooling request and a response ends with its
//! `Content-Length` body: the head is searched for once per response, nothing is parsed
//! beyond that length, and no events are counted (the harness compares requests per second).
//!
//! It accepts the `vllm bench serve` flags the harness passes and ignores the ones that do
//! not apply (tokenizer, dataset, percentiles).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::Instant;

/// Flags that take no value.
const SWITCHES: [&str; 4] = [
    "--ignore-eos",
    "--disable-tqdm",
    "--save-result",
    "--save-detailed",
];

#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    Epoll,
    Uring,
    UringDefer,
}

struct Args {
    host: String,
    port: u16,
    path: String,
    model: String,
    num_prompts: usize,
    concurrency: usize,
    output_tokens: usize,
    input_words: usize,
    result: Option<std::path::PathBuf>,
    mode: Mode,
    /// A pooling endpoint: one JSON answer per request, framed by `Content-Length`.
    pooling: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        host: "127.0.0.1".into(),
        port: 8000,
        path: "/v1/completions".into(),
        model: "mock-model".into(),
        num_prompts: 1000,
        concurrency: 0,
        output_tokens: 100,
        input_words: 32,
        result: None,
        mode: Mode::Epoll,
        pooling: false,
    };
    let (mut dir, mut file) = (None, None);
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if SWITCHES.contains(&flag.as_str()) {
            continue;
        }
        let value = it.next().ok_or(format!("{flag}: a value is expected"))?;
        let number = |v: &str| {
            v.parse::<usize>()
                .map_err(|_| format!("{flag} {v}: not a number"))
        };
        match flag.as_str() {
            "--host" => a.host = value,
            "--port" => a.port = number(&value)? as u16,
            "--endpoint" => a.path = value,
            "--model" => a.model = value,
            "--num-prompts" => a.num_prompts = number(&value)?,
            "--max-concurrency" => a.concurrency = number(&value)?,
            "--random-output-len" => a.output_tokens = number(&value)?,
            "--random-input-len" => a.input_words = number(&value)?,
            "--result-dir" => dir = Some(value),
            "--result-filename" => file = Some(value),
            "--request-rate" if value != "inf" => {
                return Err("--request-rate: the floor client runs closed loops only".into())
            }
            "--floor-mode" => {
                a.mode = match value.as_str() {
                    "epoll" => Mode::Epoll,
                    "uring" => Mode::Uring,
                    "uring-defer" => Mode::UringDefer,
                    other => {
                        return Err(format!("--floor-mode {other}: epoll, uring or uring-defer"))
                    }
                }
            }
            _ => {}
        }
    }
    a.pooling = a.path.contains("embeddings") || a.path.contains("pooling");
    if a.concurrency == 0 {
        a.concurrency = a.num_prompts;
    }
    a.concurrency = a.concurrency.min(a.num_prompts).max(1);
    if let Some(f) = file {
        a.result = Some(std::path::Path::new(&dir.unwrap_or_else(|| ".".into())).join(f));
    }
    Ok(a)
}

/// The one request every connection sends, again and again.
fn request(a: &Args) -> Vec<u8> {
    let prompt: Vec<String> = (0..a.input_words).map(|i| format!("w{i}")).collect();
    let body = if a.pooling {
        format!(
            "{{\"model\":\"{}\",\"input\":\"{}\"}}",
            a.model,
            prompt.join(" ")
        )
    } else {
        format!(
            "{{\"model\":\"{}\",\"prompt\":\"{}\",\"max_tokens\":{},\"stream\":true,\"ignore_eos\":true}}",
            a.model,
            prompt.join(" "),
            a.output_tokens
        )
    };
    format!(
        "POST {} HTTP/1.1\r\nHost: {}:{}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        a.path,
        a.host,
        a.port,
        body.len()
    )
    .into_bytes()
}

/// Occurrences of `pat` in `tail ++ chunk` that end inside `chunk` (`tail` holds the last
/// `pat.len() - 1` bytes before it, so a match split by a read counts once).
fn count(tail: &[u8], chunk: &[u8], pat: &[u8]) -> usize {
    let tail = &tail[tail.len().saturating_sub(pat.len() - 1)..];
    let mut seam = Vec::with_capacity(tail.len() + pat.len());
    seam.extend_from_slice(tail);
    seam.extend_from_slice(&chunk[..chunk.len().min(pat.len() - 1)]);
    // The seam's chunk part is shorter than `pat`: its matches all start in the tail.
    let across = memchr::memmem::find_iter(&seam, pat).count();
    across + memchr::memmem::find_iter(chunk, pat).count()
}

const DATA: &[u8] = b"data: ";
const DONE: &[u8] = b"[DONE]";
/// The end of a chunked body.
const END: &[u8] = b"\r\n0\r\n\r\n";
const TAIL: usize = 8;

/// One connection's current request.
struct Stream {
    sent: Instant,
    first: Option<Instant>,
    last: Option<Instant>,
    done: bool,
    tail: Vec<u8>,
    /// A pooling response's head while it is incomplete (rare: it comes in one read).
    head: Vec<u8>,
    /// A pooling response's body bytes still to come, once its head was read.
    left: Option<usize>,
}

impl Stream {
    fn new() -> Stream {
        Stream {
            sent: Instant::now(),
            first: None,
            last: None,
            done: false,
            tail: Vec::with_capacity(TAIL),
            head: Vec::new(),
            left: None,
        }
    }
}

const HEAD_END: &[u8] = b"\r\n\r\n";

/// The `Content-Length` of a response head (`None`: it has none).
fn content_length(head: &[u8]) -> Option<usize> {
    const NAME: &[u8] = b"content-length:";
    head.split(|&b| b == b'\n').find_map(|line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.len() > NAME.len() && line[..NAME.len()].eq_ignore_ascii_case(NAME) {
            std::str::from_utf8(&line[NAME.len()..])
                .ok()?
                .trim()
                .parse()
                .ok()
        } else {
            None
        }
    })
}

/// What the run measured.
#[derive(Default)]
struct Tally {
    /// Pooling responses (`Content-Length` bodies), not streams.
    pooling: bool,
    completed: usize,
    started: usize,
    events: usize,
    ttft_ms: Vec<f64>,
    itl_ms: Vec<f64>,
}

impl Tally {
    /// Takes one read of `s`'s response at `at`; true when the response is complete.
    fn read(&mut self, s: &mut Stream, chunk: &[u8], at: Instant) -> std::io::Result<bool> {
        if self.pooling {
            return self.read_whole(s, chunk, at);
        }
        let data = count(&s.tail, chunk, DATA);
        if data > 0 {
            match s.last {
                None => self.ttft_ms.push((at - s.sent).as_secs_f64() * 1e3),
                Some(prev) => self.itl_ms.push((at - prev).as_secs_f64() * 1e3),
            }
            s.first.get_or_insert(at);
            s.last = Some(at);
        }
        // `[DONE]` and the chunked end come once per response: only looked for in a read
        // that has the closing bytes' first character, or right after `[DONE]`.
        let done = if memchr::memchr(b'[', chunk).is_some() || s.tail.contains(&b'[') {
            count(&s.tail, chunk, DONE)
        } else {
            0
        };
        self.events += data - done.min(data);
        s.done |= done > 0;
        let end = s.done && count(&s.tail, chunk, END) > 0;
        let keep = &chunk[chunk.len().saturating_sub(TAIL)..];
        s.tail.extend_from_slice(keep);
        let excess = s.tail.len().saturating_sub(TAIL);
        s.tail.drain(..excess);
        Ok(end)
    }

    /// [`Tally::read`] for a pooling response: its first byte is its "first token" (the
    /// TTFT column), it ends with the `Content-Length` bytes after its head.
    fn read_whole(&mut self, s: &mut Stream, chunk: &[u8], at: Instant) -> std::io::Result<bool> {
        if s.first.is_none() {
            self.ttft_ms.push((at - s.sent).as_secs_f64() * 1e3);
            s.first = Some(at);
        }
        let left = match s.left {
            Some(left) => left.saturating_sub(chunk.len()),
            None => {
                // The head is looked for where it came (one read, as a rule), else joined.
                let joined;
                let bytes = if s.head.is_empty() {
                    chunk
                } else {
                    s.head.extend_from_slice(chunk);
                    joined = std::mem::take(&mut s.head);
                    &joined[..]
                };
                let Some(end) = memchr::memmem::find(bytes, HEAD_END) else {
                    s.head = bytes.to_vec();
                    return Ok(false);
                };
                let len = content_length(&bytes[..end]).ok_or_else(|| {
                    std::io::Error::other("a pooling response without Content-Length")
                })?;
                len.saturating_sub(bytes.len() - end - HEAD_END.len())
            }
        };
        s.left = Some(left);
        Ok(left == 0)
    }

    /// The response on `s` ended: counts it; true when another request should follow.
    fn finish(&mut self, s: &mut Stream, total: usize) -> bool {
        self.completed += 1;
        *s = Stream::new();
        if self.started < total {
            self.started += 1;
            true
        } else {
            false
        }
    }
}

fn connect(a: &Args) -> std::io::Result<Vec<TcpStream>> {
    (0..a.concurrency)
        .map(|_| {
            let c = TcpStream::connect((a.host.as_str(), a.port))?;
            c.set_nodelay(true)?;
            Ok(c)
        })
        .collect()
}

fn run_epoll(
    a: &Args,
    mut conns: Vec<TcpStream>,
    req: &[u8],
    t: &mut Tally,
) -> std::io::Result<()> {
    // SAFETY: plain syscalls on descriptors this function owns.
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if ep < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut streams: Vec<Stream> = (0..conns.len()).map(|_| Stream::new()).collect();
    for (i, c) in conns.iter_mut().enumerate() {
        c.set_nonblocking(true)?;
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: i as u64,
        };
        // SAFETY: a valid epoll fd, socket fd and event.
        if unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, c.as_raw_fd(), &mut ev) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        t.started += 1;
        streams[i].sent = Instant::now();
        c.write_all(req)?;
    }
    let mut buf = vec![0u8; 64 * 1024];
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
    let mut open = conns.len();
    while open > 0 {
        // SAFETY: `events` has room for the 1024 entries asked for.
        let n = unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), 1024, -1) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        for ev in &events[..n as usize] {
            let i = ev.u64 as usize;
            loop {
                match conns[i].read(&mut buf) {
                    Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
                    Ok(len) => {
                        let at = Instant::now();
                        if t.read(&mut streams[i], &buf[..len], at)? {
                            if t.finish(&mut streams[i], a.num_prompts) {
                                conns[i].write_all(req)?;
                            } else {
                                open -= 1;
                            }
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) => return Err(e),
                }
            }
        }
    }
    Ok(())
}

fn run_uring(
    a: &Args,
    mut conns: Vec<TcpStream>,
    req: &[u8],
    t: &mut Tally,
    defer: bool,
) -> std::io::Result<()> {
    use io_uring::{opcode, types, IoUring};

    let entries = (conns.len() as u32 * 2).next_power_of_two().max(64);
    let mut builder = IoUring::builder();
    if defer {
        builder.setup_single_issuer().setup_defer_taskrun();
    }
    let mut ring = builder.build(entries)?;
    const BUF: usize = 16 * 1024;
    let mut bufs = vec![0u8; BUF * conns.len()];
    let mut streams: Vec<Stream> = (0..conns.len()).map(|_| Stream::new()).collect();
    let recv = |i: usize, fd: i32, bufs: &mut [u8]| {
        opcode::Recv::new(types::Fd(fd), bufs[i * BUF..].as_mut_ptr(), BUF as u32)
            .build()
            .user_data(i as u64)
    };
    for (i, c) in conns.iter_mut().enumerate() {
        t.started += 1;
        streams[i].sent = Instant::now();
        c.write_all(req)?;
        let sqe = recv(i, c.as_raw_fd(), &mut bufs);
        // SAFETY: the buffer outlives the operation (it lives until the function returns,
        // after every completion was reaped).
        unsafe { ring.submission().push(&sqe) }.expect("the ring has an entry per connection");
    }
    let mut open = conns.len();
    while open > 0 {
        ring.submit_and_wait(1)?;
        let done: Vec<(usize, i32)> = ring
            .completion()
            .map(|c: io_uring::cqueue::Entry| (c.user_data() as usize, c.result()))
            .collect();
        for (i, res) in done {
            let at = Instant::now();
            if res <= 0 {
                return Err(std::io::Error::from_raw_os_error(-res.clamp(-4095, -1)));
            }
            let chunk = &bufs[i * BUF..i * BUF + res as usize];
            let end = t.read(&mut streams[i], chunk, at)?;
            if end {
                if t.finish(&mut streams[i], a.num_prompts) {
                    conns[i].write_all(req)?;
                } else {
                    open -= 1;
                    continue;
                }
            }
            let sqe = recv(i, conns[i].as_raw_fd(), &mut bufs);
            // SAFETY: as above.
            unsafe { ring.submission().push(&sqe) }.expect("one entry per connection");
        }
    }
    Ok(())
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let rank = p / 100.0 * (v.len() - 1) as f64;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (rank - lo as f64)
}

fn main() {
    let a = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    let req = request(&a);
    let conns = match connect(&a) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: cannot connect to {}:{}: {e}", a.host, a.port);
            std::process::exit(1);
        }
    };
    println!("Starting main benchmark run...");
    let _ = std::io::stdout().flush();
    let mut t = Tally {
        pooling: a.pooling,
        ..Tally::default()
    };
    let start = Instant::now();
    let ran = match a.mode {
        Mode::Epoll => run_epoll(&a, conns, &req, &mut t),
        Mode::Uring => run_uring(&a, conns, &req, &mut t, false),
        Mode::UringDefer => run_uring(&a, conns, &req, &mut t, true),
    };
    let duration = start.elapsed().as_secs_f64();
    if let Err(e) = ran {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
    let mean_ttft = t.ttft_ms.iter().sum::<f64>() / t.ttft_ms.len().max(1) as f64;
    let (p50, p99) = (
        percentile(&mut t.itl_ms, 50.0),
        percentile(&mut t.itl_ms, 99.0),
    );
    let doc = format!(
        "{{\"completed\": {}, \"failed\": {}, \"total_output_tokens\": {}, \"duration\": {duration}, \
         \"request_throughput\": {}, \"mean_ttft_ms\": {mean_ttft}, \"median_itl_ms\": {p50}, \
         \"p99_itl_ms\": {p99}, \"floor_mode\": \"{:?}\"}}",
        t.completed,
        a.num_prompts - t.completed,
        t.events,
        t.completed as f64 / duration,
        a.mode
    );
    println!(
        "{} requests, {} events in {duration:.2} s",
        t.completed, t.events
    );
    if let Some(path) = a.result {
        if let Err(e) = std::fs::write(&path, doc) {
            eprintln!("error: {}: {e}", path.display());
            std::process::exit(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_split_by_a_read_counts_once() {
        assert_eq!(count(b"", b"data: a\ndata: b", DATA), 2);
        assert_eq!(count(b"xxdat", b"a: b", DATA), 1);
        assert_eq!(count(b"data: ", b"x", DATA), 0);
        assert_eq!(count(b"da", b"ta: data: ", DATA), 2);
        assert_eq!(count(b"", b"\r\n0\r\n\r\n", END), 1);
    }

    #[test]
    fn a_pooling_response_ends_with_its_content_length() {
        let mut t = Tally {
            pooling: true,
            ..Tally::default()
        };
        let mut s = Stream::new();
        let at = Instant::now();
        // The head split across two reads, the body across two more.
        assert!(!t
            .read(&mut s, b"HTTP/1.1 200 OK\r\nconTent-Length: 10\r", at)
            .unwrap());
        assert!(!t.read(&mut s, b"\n\r\n0123", at).unwrap());
        assert!(!t.read(&mut s, b"4567", at).unwrap());
        assert!(t.read(&mut s, b"89", at).unwrap());
        let mut s = Stream::new();
        assert!(t
            .read(
                &mut s,
                b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}",
                at
            )
            .unwrap());
        let mut s = Stream::new();
        assert!(t.read(&mut s, b"HTTP/1.1 200 OK\r\n\r\n{}", at).is_err());
        assert_eq!(t.ttft_ms.len(), 3);
    }
}
