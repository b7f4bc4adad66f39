//! Criterion benchmarks: SSE framing, response-head and chunked parsing, chunk JSON decoding.
//!
//! Inputs are shaped like a real vLLM stream (the nginx-sse tool's chunks: one SSE event per
//! HTTP chunk, `"usage":null` on every token chunk, a usage chunk, `[DONE]`). Run with
//! `cargo bench --bench parsers` (add `-- --quick` for a fast check).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use vllm_bench::backends::chunk_template::ChunkTemplate;
use vllm_bench::backends::openai_chunk::ChunkShape;
use vllm_bench::backends::tape::ChunkDecoder;
use vllm_bench::backends::{Api, Scratch, StreamFacts};
use vllm_bench::http::response::{parse_head, BodyDecoder, BodyKind};
use vllm_bench::sse::{Pushed, SseDecoder};

/// Token events per benchmark stream.
const TOKENS: usize = 256;

const WORDS: [&str; 8] = [
    " Shall", " I", " compare", " thee", " to", " a", " summer", " day",
];

fn completion_chunk(i: usize) -> String {
    format!(
        r#"{{"id":"cmpl-0f1e2d3c4b5a69788796a5b4c3d2e1f0","object":"text_completion","created":1700000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{{"index":0,"text":"{}","logprobs":null,"finish_reason":null,"stop_reason":null}}],"usage":null}}"#,
        WORDS[i % WORDS.len()]
    )
}

fn chat_chunk(i: usize) -> String {
    format!(
        r#"{{"id":"chatcmpl-0f1e2d3c4b5a69788796a5b4c3d2e1f0","object":"chat.completion.chunk","created":1700000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{{"index":0,"delta":{{"content":"{}"}},"logprobs":null,"finish_reason":null}}]}}"#,
        WORDS[i % WORDS.len()]
    )
}

const USAGE_CHUNK: &str = r#"{"id":"cmpl-0f1e2d3c4b5a69788796a5b4c3d2e1f0","object":"text_completion","created":1700000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[],"usage":{"prompt_tokens":128,"total_tokens":384,"completion_tokens":256}}"#;

/// The SSE events of one completions stream, each `data: …\n\n`.
fn sse_events() -> Vec<Vec<u8>> {
    let mut events: Vec<Vec<u8>> = (0..TOKENS)
        .map(|i| format!("data: {}\n\n", completion_chunk(i)).into_bytes())
        .collect();
    events.push(format!("data: {USAGE_CHUNK}\n\n").into_bytes());
    events.push(b"data: [DONE]\n\n".to_vec());
    events
}

/// Group events into pushes of 1, 2, 3, 1, 2, 3, … events.
fn pushes_of_1_to_3(events: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut pushes = Vec::new();
    let mut rest = events;
    for n in (1..=3).cycle() {
        if rest.is_empty() {
            break;
        }
        let take = n.min(rest.len());
        pushes.push(rest[..take].concat());
        rest = &rest[take..];
    }
    pushes
}

/// Every event cut in two inside its JSON (what a slow proxy or TCP segmentation does).
fn pushes_mid_event(events: &[Vec<u8>]) -> Vec<Vec<u8>> {
    events
        .iter()
        .flat_map(|e| {
            let (a, b) = e.split_at(e.len() / 2);
            [a.to_vec(), b.to_vec()]
        })
        .collect()
}

/// Push `pushes` into `dec` and count the events (framing only).
fn frame(dec: &mut SseDecoder, pushes: &[Vec<u8>]) -> usize {
    dec.reset();
    let mut events = 0;
    for push in pushes {
        dec.push(push).expect("under the cap");
        while let Some(ev) = dec.next_event() {
            black_box(&ev);
            events += 1;
        }
    }
    events
}

fn bench_sse(c: &mut Criterion) {
    let events = sse_events();
    let whole = vec![events.concat()];
    let bytes = whole[0].len() as u64;
    let cases = [
        ("whole_buffer", whole),
        ("1_to_3_events_per_push", pushes_of_1_to_3(&events)),
        ("split_mid_event", pushes_mid_event(&events)),
    ];
    let mut group = c.benchmark_group("sse");
    let mut dec = SseDecoder::new();
    for (name, pushes) in &cases {
        assert_eq!(frame(&mut dec, pushes), events.len());
        group.throughput(Throughput::Bytes(bytes));
        group.bench_with_input(BenchmarkId::new("bytes", name), pushes, |b, p| {
            b.iter(|| frame(&mut dec, p))
        });
        group.throughput(Throughput::Elements(events.len() as u64));
        group.bench_with_input(BenchmarkId::new("events", name), pushes, |b, p| {
            b.iter(|| frame(&mut dec, p))
        });
    }
    group.finish();
}

const VLLM_HEAD: &[u8] = b"HTTP/1.1 200 OK\r\n\
    date: Tue, 14 Jan 2025 10:00:00 GMT\r\n\
    server: uvicorn\r\n\
    content-type: text/event-stream; charset=utf-8\r\n\
    x-request-id: 0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0\r\n\
    transfer-encoding: chunked\r\n\r\n";

fn bench_head(c: &mut Criterion) {
    let mut group = c.benchmark_group("http_head");
    group.throughput(Throughput::Bytes(VLLM_HEAD.len() as u64));
    group.bench_function("vllm_sse_head", |b| {
        b.iter(|| parse_head(black_box(VLLM_HEAD)))
    });
    group.finish();
}

/// One HTTP chunk per SSE event, as vLLM (uvicorn) and nginx flush them.
fn chunked_body(events: &[Vec<u8>]) -> Vec<u8> {
    let mut body = Vec::new();
    for event in events {
        body.extend_from_slice(format!("{:x}\r\n", event.len()).as_bytes());
        body.extend_from_slice(event);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(b"0\r\n\r\n");
    body
}

fn bench_chunked(c: &mut Criterion) {
    let body = chunked_body(&sse_events());
    let mut group = c.benchmark_group("chunked");
    group.throughput(Throughput::Bytes(body.len() as u64));
    group.bench_function("vllm_stream", |b| {
        b.iter(|| {
            let mut decoder = BodyDecoder::new(BodyKind::Chunked);
            let mut payload = 0;
            let (used, done) = decoder
                .decode_all(black_box(&body), |d| payload += d.len())
                .expect("valid body");
            assert!(done && used == body.len());
            payload
        })
    });
    group.finish();
}

fn bench_chunk_json(c: &mut Criterion) {
    let mut group = c.benchmark_group("chunk_json");
    group.throughput(Throughput::Elements(1));
    let cases = [
        ("completions", ChunkShape::Completions, completion_chunk(1)),
        ("chat", ChunkShape::Chat, chat_chunk(1)),
        ("usage", ChunkShape::Completions, USAGE_CHUNK.to_owned()),
    ];
    for (name, api, json) in cases {
        let source = json.into_bytes();
        let mut buf = source.clone();
        let mut dec = ChunkDecoder::new();
        // simd-json rewrites the payload in place, so each iteration starts from a fresh
        // copy (a memcpy of ~250 bytes, included in the time).
        group.bench_function(name, |b| {
            b.iter(|| {
                buf.copy_from_slice(&source);
                let fields = dec.decode(api, &mut buf).expect("valid chunk");
                fields.is_token(api)
            })
        });
    }
    group.finish();
}

/// The whole client-side parse of one streamed response: chunked → SSE → JSON.
fn bench_full_stream(c: &mut Criterion) {
    let events = sse_events();
    let mut response = VLLM_HEAD.to_vec();
    response.extend_from_slice(&chunked_body(&events));
    let reads: Vec<&[u8]> = response.chunks(16 * 1024).collect();
    let mut group = c.benchmark_group("full_stream");
    group.throughput(Throughput::Elements(events.len() as u64));
    let mut sse = SseDecoder::new();
    let mut json = ChunkDecoder::new();
    group.bench_function("completions_256_tokens", |b| {
        b.iter(|| {
            let head = parse_head(reads[0]).expect("valid").expect("complete");
            let mut body = BodyDecoder::new(head.body);
            sse.reset();
            let mut tokens = 0;
            for (i, read) in reads.iter().enumerate() {
                let read = if i == 0 { &read[head.head_len..] } else { read };
                body.decode_all(read, |d| sse.push(d).expect("under the cap"))
                    .expect("valid body");
                while let Some(ev) = sse.next_event() {
                    if ev.is_done() {
                        continue;
                    }
                    let fields = json
                        .decode(ChunkShape::Completions, ev.data)
                        .expect("valid chunk");
                    tokens += usize::from(fields.is_token(ChunkShape::Completions));
                }
            }
            assert_eq!(tokens, TOKENS);
            tokens
        })
    });
    group.finish();
}

/// The per-event reading of one streamed completions response (256 token chunks, the usage
/// chunk) through the registry's reader, as the engine's exchange calls it for each SSE
/// event's data: decode, token or not, counts and finish reason into the facts.
fn bench_stream_events(c: &mut Criterion) {
    let chunks: Vec<Vec<u8>> = (0..TOKENS)
        .map(|i| completion_chunk(i).into_bytes())
        .chain([USAGE_CHUNK.as_bytes().to_vec()])
        .collect();
    let mut bufs = chunks.clone();
    let mut group = c.benchmark_group("stream_events");
    group.throughput(Throughput::Elements(chunks.len() as u64));
    let mut json = ChunkDecoder::new();
    let mut template = ChunkTemplate::default();
    let reader = Api::Completions
        .response_mode()
        .stream_reader()
        .expect("completions stream");
    group.bench_function("completions_257", |b| {
        b.iter(|| {
            let mut facts = StreamFacts::default();
            let mut scratch = Scratch {
                json: &mut json,
                template: &mut template,
            };
            let mut tokens = 0;
            for (buf, src) in bufs.iter_mut().zip(&chunks) {
                buf.copy_from_slice(src);
                let token = reader
                    .event(buf, &mut scratch, &mut facts)
                    .expect("valid chunk");
                tokens += usize::from(token.is_some());
            }
            assert_eq!(tokens, TOKENS);
            black_box(&facts);
            tokens
        })
    });
    group.finish();
}

/// What the engine's exchange does with each read of a streamed completions response, as in
/// the firehose (the whole response in 16 KiB reads): chunked framing, one payload per HTTP
/// chunk into `SseDecoder::push_known` (a chunk the reader's template knows is read from the
/// payload; any other whole event is copied and parsed; any other shape drains
/// `next_event`). Beside `full_stream` (the line-by-line SSE path and a full parse per
/// chunk), this is the path a real server's stream takes after its first token.
fn bench_exchange_read(c: &mut Criterion) {
    let events = sse_events();
    let body = chunked_body(&events);
    let reads: Vec<&[u8]> = body.chunks(16 * 1024).collect();
    let reader = Api::Completions
        .response_mode()
        .stream_reader()
        .expect("completions stream");
    let mut group = c.benchmark_group("exchange_read");
    group.throughput(Throughput::Elements(events.len() as u64));
    let mut sse = SseDecoder::new();
    let mut json = ChunkDecoder::new();
    let mut template = ChunkTemplate::default();
    // The token count of one parsed event (`[DONE]` is none).
    let parsed = |data: &mut [u8], scratch: &mut Scratch<'_>, facts: &mut StreamFacts| {
        let token = reader.event(data, scratch, facts).expect("valid chunk");
        usize::from(token.is_some())
    };
    group.bench_function("completions_256_tokens", |b| {
        b.iter(|| {
            let mut body_decoder = BodyDecoder::new(BodyKind::Chunked);
            let mut facts = StreamFacts::default();
            let mut scratch = Scratch {
                json: &mut json,
                template: &mut template,
            };
            sse.reset();
            let mut tokens = 0;
            for read in &reads {
                body_decoder
                    .decode_all(read, |payload| {
                        let template = &*scratch.template;
                        let pushed = sse
                            .push_known(payload, |data| reader.known_event(data, template))
                            .expect("under the cap");
                        match pushed {
                            Pushed::Known(token) => tokens += usize::from(token.is_some()),
                            Pushed::Event(ev) if ev.is_done() => {}
                            Pushed::Event(ev) => {
                                tokens += parsed(ev.data, &mut scratch, &mut facts)
                            }
                            Pushed::Bytes => {
                                while let Some(ev) = sse.next_event() {
                                    if !ev.is_done() {
                                        tokens += parsed(ev.data, &mut scratch, &mut facts);
                                    }
                                }
                            }
                        }
                    })
                    .expect("valid body");
            }
            assert_eq!(tokens, TOKENS);
            black_box(&facts);
            tokens
        })
    });
    group.finish();
}

criterion_group!(
    benches,
    bench_sse,
    bench_head,
    bench_chunked,
    bench_chunk_json,
    bench_full_stream,
    bench_stream_events,
    bench_exchange_read
);
criterion_main!(benches);
