//! The bodies of vllm-bench's fuzz targets, one function per target, listed in [`TARGETS`].
//!
//! Two users, one copy: the cargo-fuzz binaries in `fuzz_targets/` (nightly, libFuzzer)
//! each call one of these functions, and `tests/fuzz_corpus.rs` in the main crate (stable,
//! part of the normal test run) includes this file with `#[path]` and replays every file of
//! `fuzz/corpus/<target>/` through the same function. So this file depends on nothing but
//! `vllm_bench` and `std`.
//!
//! A target fails by panicking: every parser must return an error, never panic, on any
//! input; and where a parser has a property that holds for every input (the same result
//! however the input is split across reads, a complete head parses the same on its own
//! bytes, a parsed integer prints back to itself), the target asserts it.

use vllm_bench::backends::openai_chunk::ChunkShape;
use vllm_bench::backends::tape::ChunkDecoder;
use vllm_bench::cli::pyvalue;
use vllm_bench::config::{parse_bucket_config, Config};
use vllm_bench::datasets::limits;
use vllm_bench::datasets::timed_trace::{
    OnMalformed, ReplayWindow, TimedTrace, TraceFormat, TraceOptions,
};
use vllm_bench::http::response::{
    parse_head, BodyDecoder, ChunkedDecoder, HttpError, MAX_HEAD_LEN,
};
use vllm_bench::server_metrics::exposition;
use vllm_bench::sse::{SseDecoder, SseError};

/// A target's body: one input in, a panic on failure.
pub type Target = fn(&[u8]);

/// Every target: its name (the `fuzz_targets/<name>.rs` binary and `corpus/<name>/`) and
/// its body.
pub const TARGETS: &[(&str, Target)] = &[
    ("http_head", http_head),
    ("chunked", chunked),
    ("sse_chunks", sse_chunks),
    ("trace_jsonl", trace_jsonl),
    ("trace_csv", trace_csv),
    ("cli_values", cli_values),
    ("cli_args", cli_args),
    ("limits", limits),
    ("prometheus_text", prometheus_text),
];

/// Splits `data` after its first byte, which picks the cut: `(cut, rest)` with
/// `cut <= rest.len()`. Lets one input also say where a read boundary falls.
fn cut(data: &[u8]) -> (usize, &[u8]) {
    match data.split_first() {
        Some((&b, rest)) => (usize::from(b) * rest.len() / 255, rest),
        None => (0, data),
    }
}

/// The response head parser ([`parse_head`]): errors, not panics; a complete head is
/// complete on its own bytes, not before them, and never over the cap; the body decoder its
/// framing selects takes the rest.
pub fn http_head(data: &[u8]) {
    match parse_head(data) {
        Ok(Some(head)) => {
            assert!(head.head_len <= data.len() && head.head_len <= MAX_HEAD_LEN);
            assert!(!(100..200).contains(&head.status), "a 1xx head is interim");
            let own = &data[..head.head_len];
            assert_eq!(parse_head(own), Ok(Some(head.clone())), "the head alone");
            assert_eq!(
                parse_head(&own[..own.len() - 1]),
                Ok(None),
                "one byte short"
            );
            let mut body = BodyDecoder::new(head.body);
            let _ = body.decode_all(&data[head.head_len..], |_| {});
            let _ = body.finish();
        }
        Ok(None) => assert!(data.len() <= MAX_HEAD_LEN, "incomplete beyond the cap"),
        Err(e) => {
            let _ = (e.kind(), e.to_string());
        }
    }
}

/// Decodes a chunked body fed in `pieces` (as reads deliver it): the payload, whether the
/// body ended, and the bytes consumed.
fn decode_chunked(pieces: &[&[u8]]) -> Result<(Vec<u8>, bool, usize), HttpError> {
    let mut decoder = ChunkedDecoder::new();
    let (mut payload, mut consumed) = (Vec::new(), 0);
    for piece in pieces {
        let mut rest = *piece;
        while !rest.is_empty() {
            let step = decoder.decode(rest)?;
            assert!(step.consumed <= rest.len());
            payload.extend_from_slice(step.data);
            consumed += step.consumed;
            if step.done {
                return Ok((payload, true, consumed));
            }
            assert!(step.consumed > 0, "no progress with input left");
            rest = &rest[step.consumed..];
        }
    }
    Ok((payload, false, consumed))
}

/// The chunked decoder ([`ChunkedDecoder`]): the same payload, end and error whether the
/// body comes in one read or two.
pub fn chunked(data: &[u8]) {
    let (at, body) = cut(data);
    let whole = decode_chunked(&[body]);
    let split = decode_chunked(&[&body[..at], &body[at..]]);
    assert_eq!(whole, split, "split at {at}");
}

/// One SSE event, copied out of the decoder: its `event:` name and its data.
type Event = (Option<Vec<u8>>, Vec<u8>);

/// The events of a body fed in `pieces`, the stream's end included.
fn sse_events(decoder: &mut SseDecoder, pieces: &[&[u8]]) -> Result<Vec<Event>, SseError> {
    let mut events = Vec::new();
    for piece in pieces {
        decoder.push(piece)?;
        while let Some(ev) = decoder.next_event() {
            events.push((ev.event.map(<[u8]>::to_vec), ev.data.to_vec()));
        }
    }
    while let Some(ev) = decoder.finish() {
        events.push((ev.event.map(<[u8]>::to_vec), ev.data.to_vec()));
    }
    Ok(events)
}

/// The SSE framer ([`SseDecoder`]) and the chunk JSON decoder ([`ChunkDecoder`]) behind it:
/// without early completion the events do not depend on where reads end, a reset decoder
/// is a new one, and every event decodes (or fails) as both APIs' chunk.
pub fn sse_chunks(data: &[u8]) {
    let (at, body) = cut(data);
    let plain = || {
        let mut d = SseDecoder::new();
        d.set_early_completion(false);
        d
    };
    let whole = sse_events(&mut plain(), &[body]);
    let mut reused = plain();
    let split = sse_events(&mut reused, &[&body[..at], &body[at..]]);
    assert_eq!(whole, split, "split at {at}");
    reused.reset();
    assert_eq!(sse_events(&mut reused, &[body]), whole, "after reset");
    // As the engine reads: early completion on, each event decoded in place.
    let Ok(events) = sse_events(&mut SseDecoder::new(), &[&body[..at], &body[at..]]) else {
        return;
    };
    let mut json = ChunkDecoder::new();
    for (_, payload) in events {
        for api in [ChunkShape::Completions, ChunkShape::Chat] {
            let mut in_place = payload.clone();
            if let Ok(chunk) = json.decode(api, &mut in_place) {
                let _ = chunk.is_token(api);
            }
        }
    }
}

/// Reads a trace with options picked by the first byte, in each of `formats` and both
/// malformed-line policies: an error or records whose times are usable.
fn trace(data: &[u8], formats: &[Option<TraceFormat>]) {
    let Some((&bits, file)) = data.split_first() else {
        return;
    };
    let bit = |i: u8| bits & (1 << i) != 0;
    for &format in formats {
        for on_malformed in [OnMalformed::Error, OnMalformed::Skip] {
            let opts = TraceOptions {
                format,
                on_malformed,
                sec_multiplier: if bit(0) { 0.001 } else { 1.0 },
                window: ReplayWindow {
                    start_s: if bit(1) { 1.0 } else { 0.0 },
                    duration_s: bit(2).then_some(10.0),
                    rebase: bit(3),
                },
                num_prompts: bit(4).then_some(3),
                burstgpt_model: bit(5).then(|| "GPT-4".to_string()),
                ..TraceOptions::default()
            };
            let trace = match TimedTrace::from_reader(file, "fuzz", &opts) {
                Ok(t) => t,
                Err(e) => {
                    let _ = e.to_string();
                    continue;
                }
            };
            assert!(trace.records.len() as u64 <= trace.report.data_lines);
            assert!(trace.len() <= opts.num_prompts.unwrap_or(usize::MAX));
            for r in &trace.records {
                assert!(r.trace_time_s.is_finite(), "{r:?}");
                assert!(r.arrival_s.is_finite() && r.arrival_s >= 0.0, "{r:?}");
            }
            assert_eq!(trace.arrival_offsets().len(), trace.len());
        }
    }
}

/// The JSONL trace readers (Mooncake, Bailian, and format detection).
pub fn trace_jsonl(data: &[u8]) {
    trace(
        data,
        &[
            None,
            Some(TraceFormat::Mooncake),
            Some(TraceFormat::Bailian),
        ],
    );
}

/// The CSV trace readers (Azure, BurstGPT, and format detection).
pub fn trace_csv(data: &[u8]) {
    trace(
        data,
        &[None, Some(TraceFormat::Azure), Some(TraceFormat::BurstGpt)],
    );
}

/// The scalar CLI value parsers (Python's `int()`/`float()`, human-readable ints, dotted
/// values, ports) and the `--random-mm-bucket-config` literal: no panic, and a parsed
/// number prints back to itself.
pub fn cli_values(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    if let Some(v) = pyvalue::py_int(s) {
        assert_eq!(pyvalue::py_int(&v.to_string()), Some(v), "{s:?}");
    }
    if let Some(f) = pyvalue::py_float(s) {
        if !f.is_nan() {
            assert_eq!(pyvalue::py_float(&format!("{f:?}")), Some(f), "{s:?}");
        }
    }
    let _ = pyvalue::human_readable_int(s);
    let _ = pyvalue::dotted_value(s);
    let _ = pyvalue::parse_int::<u8>(s);
    let _ = pyvalue::parse_int::<i64>(s);
    let _ = pyvalue::parse_int::<usize>(s);
    let _ = pyvalue::parse_float(s);
    let _ = pyvalue::parse_port(s);
    if let Ok(buckets) = parse_bucket_config(s) {
        for (i, (key, _)) in buckets.iter().enumerate() {
            assert!(
                buckets[..i].iter().all(|(k, _)| k != key),
                "a repeated key: {s:?}"
            );
        }
    }
}

/// A command line through the whole CLI: argv rewriting (underscores, prefixes, dotted
/// `--extra-body.KEY`), clap, and [`Config::from_cli`]. The first byte picks the shape:
/// free arguments (split at NUL), or one value for `--extra-body`, a dotted
/// `--extra-body.KEY VALUE`, `--random-mm-bucket-config` or `--header`.
pub fn cli_args(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let mut argv: Vec<String> = vec!["vllm-bench".into()];
    match mode % 5 {
        0 => argv.extend(text.split('\0').map(str::to_string)),
        1 => argv.extend(["--extra-body".into(), text.into_owned()]),
        2 => {
            let (key, value) = text.split_once('\0').unwrap_or((&text, ""));
            argv.extend([format!("--extra-body.{key}"), value.to_string()]);
        }
        3 => argv.extend([
            "--dataset-name".into(),
            "random-mm".into(),
            "--random-mm-bucket-config".into(),
            text.into_owned(),
        ]),
        _ => argv.extend(["--header".into(), text.into_owned()]),
    }
    match vllm_bench::cli::parse_from(argv) {
        Ok(cli) => {
            if let Err(e) = Config::from_cli(cli) {
                let _ = e.to_string();
            }
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
}

/// `limits::duration_from_secs` on `secs`: a `Duration` exactly for the seconds in
/// `[0, MAX_SECONDS]`, an error for every other `f64` (NaN, negative, too long), never a panic.
fn seconds(secs: f64) {
    match limits::duration_from_secs(secs) {
        Ok(d) => {
            assert!((0.0..=limits::MAX_SECONDS).contains(&secs), "{secs:?}");
            assert!(d.as_secs_f64() <= limits::MAX_SECONDS, "{secs:?} -> {d:?}");
        }
        Err(_) => assert!(!(0.0..=limits::MAX_SECONDS).contains(&secs), "{secs:?}"),
    }
}

/// The flags whose value is a time, a rate or a size, each given the input's text, with
/// the flags it needs to be read at all.
const SIZED_FLAGS: &[(&str, &[&str])] = &[
    ("--request-rate", &[]),
    ("--probe-request-rate", &[]),
    ("--sweep-request-rate", &[]),
    ("--start-at", &[]),
    (
        "--profile-duration",
        &["--profile", "--profile-batch-threshold", "1"],
    ),
    (
        "--timed-trace-sec-multiplier",
        &["--dataset-name", "timed_trace", "--dataset-path", "t.jsonl"],
    ),
    ("--num-prompts", &[]),
    ("--num-warmups", &[]),
    ("--random-input-len", &[]),
    ("--random-output-len", &[]),
    ("--random-prefix-len", &[]),
    ("--random-range-ratio", &["--random-input-len", "1000000"]),
    ("--max-model-len", &["--random-input-len", "2000000"]),
    (
        "--sweep-num-prompts-factor",
        &["--sweep-max-concurrency", "1,1000"],
    ),
    ("--result-filename", &["--sweep-request-rate", "1,inf"]),
    ("--request-id-prefix", &[]),
];

/// The checked conversions of time and size ([`limits`]) on any numbers (the input's bytes
/// read as `f64`/`u64` words, and its text as a Python float), then the flags that feed them
/// through [`Config::from_cli`]: an error or a value in range, never a panic.
pub fn limits(data: &[u8]) {
    let word = |i: usize| {
        let mut b = [0u8; 8];
        for (j, slot) in b.iter_mut().enumerate() {
            *slot = data.get(i * 8 + j).copied().unwrap_or(0);
        }
        u64::from_le_bytes(b)
    };
    seconds(f64::from_bits(word(0)));
    let (count, rate) = (word(1), f64::from_bits(word(2)));
    if let Ok(span) = limits::schedule_span(count, rate) {
        assert!(
            span.as_secs_f64() <= limits::MAX_SECONDS,
            "{count} at {rate:?}"
        );
    }
    let _ = limits::min_rate(count);
    let (len, ratio) = (word(3) as usize, f64::from_bits(word(4)));
    assert!(limits::jittered_max(len, ratio) >= len as u64);
    let mml = (word(5) != 0).then_some(word(6) as usize);
    let tokens = word(7);
    assert_eq!(
        limits::check_tokens(tokens, mml).is_ok(),
        tokens <= limits::token_limit(mml)
    );
    assert_eq!(
        limits::check_requests(count).is_ok(),
        count <= limits::MAX_REQUESTS
    );
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Some(f) = pyvalue::py_float(text) {
        seconds(f);
    }
    let pick = data.first().map_or(0, |b| usize::from(*b)) % SIZED_FLAGS.len();
    let (flag, needs) = SIZED_FLAGS[pick];
    let value = text.get(1..).unwrap_or("");
    let mut argv = vec!["vllm-bench", "--model", "m", flag, value];
    argv.extend_from_slice(needs);
    match vllm_bench::cli::parse_from(argv) {
        Ok(cli) => {
            if let Err(e) = Config::from_cli(cli) {
                assert!(!e.message().contains('\n'), "{}", e.message());
            }
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
}

/// The Prometheus text parser (`server_metrics::exposition`): an error with a line number
/// inside the text, not a panic; a parsed histogram's bounds ascend, and a body parses the
/// same with its lines ended by `\r\n`.
pub fn prometheus_text(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match exposition::parse(text) {
        Ok(scrape) => {
            for h in scrape.histograms.values() {
                assert!(h.buckets.windows(2).all(|w| w[0].0 < w[1].0), "{h:?}");
            }
            if !text.contains('\r') {
                let crlf = text.replace('\n', "\r\n");
                let again = exposition::parse(&crlf).expect("CRLF lines parse too");
                assert_eq!(format!("{again:?}"), format!("{scrape:?}"));
            }
        }
        Err(e) => assert!(e.line >= 1 && e.line <= text.lines().count().max(1), "{e}"),
    }
}
