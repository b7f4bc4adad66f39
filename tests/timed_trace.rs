//! Timed-trace replay (`vllm_bench::datasets::timed_trace`): every format from fixtures,
//! malformed lines, timing options, prompt reconstruction (determinism, exact lengths,
//! prefix sharing, JSON parts, text), and the real Mooncake conversation trace (its first
//! 1,000 records, `tests/fixtures/data/`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use vllm_bench::datasets::timed_trace::{
    OnMalformed, PromptBuilder, ReplayWindow, TextPrompter, TimedTrace, TokenSpace, TraceError,
    TraceFormat, TraceOptions, TraceRecord, TraceStats,
};
use vllm_bench::datasets::Prompt;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/traces")
        .join(name)
}

/// The first 1,000 records of the Mooncake conversation trace (tests/fixtures).
fn mooncake_trace() -> PathBuf {
    crate::util::fixture(crate::util::MOONCAKE)
}

fn load(name: &str, opts: &TraceOptions) -> TimedTrace {
    TimedTrace::load(fixture(name), opts).unwrap_or_else(|e| panic!("{e}"))
}

fn load_err(name: &str, opts: &TraceOptions) -> String {
    match TimedTrace::load(fixture(name), opts) {
        Ok(t) => panic!("{name} loaded {} records, expected an error", t.len()),
        Err(e) => e.to_string(),
    }
}

/// A large vocabulary (Qwen's size) so that unrelated blocks essentially never share a
/// first token by chance: the prefix tests then see exactly the designed sharing.
fn big_builder(chunk: u32) -> PromptBuilder {
    PromptBuilder::new(
        TokenSpace::new(151_936, &[151_643, 151_644, 151_645]).unwrap(),
        chunk,
    )
    .unwrap()
}

fn small_builder(chunk: u32) -> PromptBuilder {
    PromptBuilder::new(TokenSpace::new(4096, &[0, 1, 2]).unwrap(), chunk).unwrap()
}

fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

fn parse_parts(parts: &[bytes::Bytes]) -> Vec<u32> {
    let bytes = parts.concat();
    serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&bytes)))
}

#[test]
fn block_tokens_are_pinned() {
    // Expected values computed by an independent Python implementation of the documented
    // mixer (splitmix64 stream, multiply-shift onto the allowed ids): a change of mixer,
    // seeding or mapping is caught here, and replays stay comparable across versions.
    let b = small_builder(512);
    assert_eq!(
        b.block_tokens(0, 8),
        vec![2442, 3456, 929, 18, 2572, 3974, 3967, 2920]
    );
    assert_eq!(
        b.block_tokens(182_789, 8),
        vec![4051, 1587, 1292, 3053, 413, 2211, 192, 3949]
    );
    let tail_only = TraceRecord {
        index: 3,
        line: 4,
        timestamp: 0.0,
        trace_time_s: 0.0,
        arrival_s: 0.0,
        input_len: 4,
        output_len: 1,
        hash_ids: Box::default(),
        chat: None,
    };
    assert_eq!(b.prompt_ids(&tail_only), vec![443, 2137, 150, 3198]);
    // Same ids from a fresh builder, and never a special id.
    let again = small_builder(512);
    assert_eq!(again.block_tokens(0, 512), b.block_tokens(0, 512));
    assert!(b
        .block_tokens(7, 512)
        .iter()
        .all(|&t| (3..4096).contains(&t)));
    // The chunk size is part of the block's identity.
    assert_ne!(small_builder(16).block_tokens(0, 8), b.block_tokens(0, 8));
}

#[test]
fn prompts_are_identical_across_loads() {
    let opts = TraceOptions::default();
    let ids = |t: &TimedTrace, b: &PromptBuilder| {
        t.records
            .iter()
            .map(|r| b.prompt_ids(r))
            .collect::<Vec<_>>()
    };
    let first = ids(&load("mooncake_small.jsonl", &opts), &small_builder(4));
    let second = ids(&load("mooncake_small.jsonl", &opts), &small_builder(4));
    assert_eq!(first, second);
}

#[test]
fn every_prompt_has_exactly_input_length_tokens_and_json_parts_match() {
    let b = big_builder(4);
    let t = load("mooncake_small.jsonl", &TraceOptions::default());
    assert_eq!(t.len(), 10);
    for r in &t.records {
        let ids = b.prompt_ids(r);
        assert_eq!(ids.len(), r.input_len as usize, "line {}", r.line);
        assert_eq!(parse_parts(&b.prompt_json_parts(r)), ids, "line {}", r.line);
    }
    // Short hash-id lists (line 4: one id for 14 tokens; line 5: none) get unique tails.
    let short = b.prompt_ids(&t.records[3]);
    let none = b.prompt_ids(&t.records[4]);
    assert_eq!(short[..4], b.block_tokens(0, 4)[..]);
    assert_eq!(common_prefix(&short[4..], &none), 0);
}

#[test]
fn records_share_exactly_their_common_leading_blocks() {
    let chunk = 4;
    let b = big_builder(chunk);
    let t = load("mooncake_small.jsonl", &TraceOptions::default());
    let prompts: Vec<Vec<u32>> = t.records.iter().map(|r| b.prompt_ids(r)).collect();
    for (i, a) in t.records.iter().enumerate() {
        for (j, c) in t.records.iter().enumerate().skip(i + 1) {
            let common_ids = a
                .hash_ids
                .iter()
                .zip(c.hash_ids.iter())
                .take_while(|(x, y)| x == y)
                .count();
            let expected = (common_ids * chunk as usize)
                .min(a.input_len as usize)
                .min(c.input_len as usize);
            assert_eq!(
                common_prefix(&prompts[i], &prompts[j]),
                expected,
                "lines {} and {}",
                a.line,
                c.line
            );
        }
    }
}

#[test]
fn shared_blocks_are_shared_memory() {
    let b = small_builder(4);
    let t = load("mooncake_small.jsonl", &TraceOptions::default());
    let p0 = b.prompt_json_parts(&t.records[0]);
    let p1 = b.prompt_json_parts(&t.records[1]);
    // Part 0 is "[", part 2 is block 1 in both prompts: the very same bytes.
    assert_eq!(p0[2].as_ptr(), p1[2].as_ptr());
    // The cut block of line 3 (7 tokens: block 1 cut to 3) points into block 1's fragment.
    let p2 = b.prompt_json_parts(&t.records[2]);
    assert_eq!(p2[2].as_ptr(), p0[2].as_ptr());
    assert!(p2[2].len() < p0[2].len());
    let stats = b.cache_stats();
    assert_eq!(stats.blocks, 4); // ids 0, 1, 2, 3
    assert_eq!(stats.misses, 4);
}

#[test]
fn mooncake_timing_multiplier_window_and_rebase() {
    let mut opts = TraceOptions {
        sec_multiplier: 0.001,
        ..Default::default()
    };
    let t = load("mooncake_small.jsonl", &opts);
    assert_eq!(t.format, TraceFormat::Mooncake);
    assert_eq!(
        t.arrival_offsets(),
        vec![0.0, 0.0, 0.25, 0.5, 1.5, 1.6, 2.5, 3.1, 3.2, 62.0]
    );
    assert!(t.records[4].hash_ids.is_empty());

    // Python's semantics exactly: float(timestamp) * multiplier.
    opts.sec_multiplier = 0.0001;
    let t = load("mooncake_small.jsonl", &opts);
    assert_eq!(t.records[7].arrival_s, 3100.0 * 0.0001);

    opts.sec_multiplier = 0.001;
    opts.window = ReplayWindow {
        start_s: 1.0,
        duration_s: Some(2.15),
        rebase: false,
    };
    let t = load("mooncake_small.jsonl", &opts);
    let lines: Vec<u64> = t.records.iter().map(|r| r.line).collect();
    assert_eq!(lines, vec![5, 6, 7, 8]);
    let expect = [0.5, 0.6, 1.5, 2.1];
    for (got, want) in t.arrival_offsets().iter().zip(expect) {
        assert!((got - want).abs() < 1e-12, "{got} vs {want}");
    }
    assert_eq!(t.report.outside_window, 6);

    opts.window.rebase = true;
    let t = load("mooncake_small.jsonl", &opts);
    assert_eq!(t.origin_s, 1.5);
    assert_eq!(t.records[0].arrival_s, 0.0);
    assert!((t.records[3].arrival_s - 1.6).abs() < 1e-12);

    // num_prompts takes the first N records of the window in file order.
    opts.num_prompts = Some(2);
    let t = load("mooncake_small.jsonl", &opts);
    assert_eq!(
        t.records.iter().map(|r| r.line).collect::<Vec<_>>(),
        vec![5, 6]
    );
    assert!(t.report.stopped_at_num_prompts);
}

#[test]
fn custom_json_labels() {
    let mut opts = TraceOptions::default();
    opts.labels.timestamp = "ts".into();
    opts.labels.input_length = "prompt_tokens".into();
    opts.labels.output_length = "completion_tokens".into();
    opts.labels.hash_ids = "blocks".into();
    let t = load("mooncake_labels.jsonl", &opts);
    assert_eq!(t.arrival_offsets(), vec![1.5, 2.25]);
    assert_eq!(&*t.records[0].hash_ids, &[1, 2]);
    assert_eq!((t.records[1].input_len, t.records[1].output_len), (3, 1));

    let e = load_err("mooncake_labels.jsonl", &TraceOptions::default());
    assert!(e.contains("mooncake_labels.jsonl:1: field \"timestamp\" is missing (fields present: ts, prompt_tokens"), "{e}");
    assert!(e.contains("--timed-trace-label-timestamp"), "{e}");
}

#[test]
fn malformed_lines_error_with_file_and_line() {
    let e = load_err("mooncake_malformed.jsonl", &TraceOptions::default());
    assert!(
        e.contains("mooncake_malformed.jsonl:2: \"input_length\" is not a non-negative integer"),
        "{e}"
    );
    assert!(
        e.ends_with("fix the line, or skip malformed lines (they are counted and reported)"),
        "{e}"
    );

    let e = load_err("burstgpt_malformed.csv", &TraceOptions::default());
    assert!(e.contains("burstgpt_malformed.csv:3: \"Request tokens\" is not a non-negative integer (got \"-3\")"), "{e}");
    let e = load_err("azure_malformed.csv", &TraceOptions::default());
    assert!(e.contains("azure_malformed.csv:3: \"TIMESTAMP\" \"2023-11-16 18:15:4x.0000000\" is not a datetime"), "{e}");
}

#[test]
fn malformed_lines_skip_and_count() {
    let opts = TraceOptions {
        on_malformed: OnMalformed::Skip,
        ..Default::default()
    };
    let t = load("mooncake_malformed.jsonl", &opts);
    assert_eq!(
        t.records.iter().map(|r| r.line).collect::<Vec<_>>(),
        vec![1, 5, 7]
    );
    // Indices count every data line (blank line 3 is not one), so they do not depend on
    // which lines parsed.
    assert_eq!(
        t.records.iter().map(|r| r.index).collect::<Vec<_>>(),
        vec![0, 3, 5]
    );
    assert_eq!(t.report.malformed_skipped, 3);
    assert_eq!(t.report.data_lines, 6);
    let ex = &t.report.malformed_examples;
    assert_eq!(ex.len(), 3);
    assert!(ex[0].contains(":2: "), "{ex:?}");
    assert!(ex[1].contains(":4: not a JSON object"), "{ex:?}");
    assert!(
        ex[2].contains(":6: field \"input_length\" is missing"),
        "{ex:?}"
    );
    let stats = TraceStats::compute(&t, 4).to_string();
    assert!(
        stats.contains("Skipped malformed lines:                 3"),
        "{stats}"
    );

    let t = load("azure_malformed.csv", &opts);
    assert_eq!(t.len(), 2);
    assert_eq!(t.report.malformed_skipped, 1);
}

#[test]
fn bailian_keeps_parent_links() {
    let t = load("bailian_small.jsonl", &TraceOptions::default());
    assert_eq!(t.format, TraceFormat::Bailian);
    assert_eq!(t.arrival_offsets(), vec![61.114, 61.5, 62.5, 63.25, 64.0]);
    let chat = |i: usize| t.records[i].chat.clone().unwrap();
    assert_eq!(
        (chat(0).chat_id, chat(0).parent_chat_id, chat(0).parent),
        (100, None, None)
    );
    assert_eq!(
        (chat(2).parent_chat_id, chat(2).parent, chat(2).turn),
        (Some(100), Some(0), Some(2))
    );
    assert_eq!((chat(3).parent_chat_id, chat(3).parent), (Some(999), None)); // parent not in the trace
    assert_eq!(chat(4).parent, Some(2));

    // With a window that leaves the first turn out, its child is no longer linked.
    let opts = TraceOptions {
        window: ReplayWindow {
            start_s: 61.2,
            duration_s: None,
            rebase: true,
        },
        ..Default::default()
    };
    let t = load("bailian_small.jsonl", &opts);
    assert_eq!(t.records[1].chat.as_ref().unwrap().parent, None);
    assert_eq!(t.records[3].chat.as_ref().unwrap().parent, Some(1));
    assert_eq!(t.records[0].arrival_s, 0.0);

    // 16-token blocks: the conversation's turns share their history's blocks.
    let b = big_builder(TraceFormat::Bailian.default_chunk_size());
    let t = load("bailian_small.jsonl", &TraceOptions::default());
    let turn1 = b.prompt_ids(&t.records[0]);
    let turn2 = b.prompt_ids(&t.records[2]);
    let turn3 = b.prompt_ids(&t.records[4]);
    assert_eq!(common_prefix(&turn1, &turn2), 40);
    assert_eq!(common_prefix(&turn2, &turn3), 70);
    assert_eq!(turn3.len(), 90);
}

#[test]
fn azure_trace_has_unique_prompts_and_relative_seconds() {
    let t = load("azure_small.csv", &TraceOptions::default());
    assert_eq!(t.format, TraceFormat::Azure);
    let want = [0.0, 3.5, 4.22, 60.5];
    for (got, w) in t.arrival_offsets().iter().zip(want) {
        assert!((got - w).abs() < 1e-9, "{got} vs {w}");
    }
    assert_eq!(
        t.records.iter().map(|r| r.input_len).collect::<Vec<_>>(),
        vec![374, 396, 879, 91]
    );
    assert_eq!(
        t.records.iter().map(|r| r.output_len).collect::<Vec<_>>(),
        vec![44, 109, 19, 1]
    );
    let b = small_builder(512);
    let a = b.prompt_ids(&t.records[0]);
    let c = b.prompt_ids(&t.records[1]);
    assert_eq!((a.len(), c.len()), (374, 396));
    assert!(common_prefix(&a, &c) < 2);
    assert_eq!(
        parse_parts(&b.prompt_json_parts(&t.records[2])),
        b.prompt_ids(&t.records[2])
    );
    let s = TraceStats::compute(&t, 512);
    assert_eq!((s.blocks, s.token_hits), (0, 0));
}

#[test]
fn burstgpt_drops_failures_and_filters_models() {
    let t = load("burstgpt_small.csv", &TraceOptions::default());
    assert_eq!(t.format, TraceFormat::BurstGpt);
    assert_eq!(t.arrival_offsets(), vec![5.0, 45.0, 118.0, 1129.0, 4574.0]);
    assert_eq!(t.report.failed_dropped, 2);
    assert_eq!(
        t.records.iter().map(|r| r.index).collect::<Vec<_>>(),
        vec![0, 1, 2, 4, 6]
    );

    let opts = TraceOptions {
        burstgpt_model: Some("GPT-4".into()),
        ..Default::default()
    };
    let t = load("burstgpt_small.csv", &opts);
    assert_eq!(t.len(), 1);
    assert_eq!(
        (t.records[0].input_len, t.records[0].output_len),
        (417, 276)
    );
    assert_eq!(
        (t.report.other_model_dropped, t.report.failed_dropped),
        (5, 1)
    );

    let opts = TraceOptions {
        burstgpt_model: Some("GPT-5".into()),
        ..Default::default()
    };
    let e = load_err("burstgpt_small.csv", &opts);
    assert!(
        e.contains(
            "no request to replay (7 data lines read, 7 rows of other models than \"GPT-5\")"
        ),
        "{e}"
    );
}

#[test]
fn explicit_format_and_detection_errors() {
    // Forcing the wrong format shows the first bad line, not a silent empty run.
    let opts = TraceOptions {
        format: Some(TraceFormat::Mooncake),
        ..Default::default()
    };
    let e = load_err("azure_small.csv", &opts);
    assert!(e.contains("azure_small.csv:1: not a JSON object"), "{e}");
    let opts = TraceOptions {
        format: Some(TraceFormat::Azure),
        ..Default::default()
    };
    let e = load_err("burstgpt_small.csv", &opts);
    assert!(e.contains("burstgpt_small.csv:1: azure header: the header lacks column(s) TIMESTAMP, ContextTokens, GeneratedTokens"), "{e}");

    let e = TimedTrace::from_reader(&b"id,len\n1,2\n"[..], "x.csv", &TraceOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("x.csv: the first line is neither a JSON object"),
        "{e}"
    );
    assert!(
        e.ends_with("choose the trace format explicitly (mooncake, bailian, azure, burstgpt)"),
        "{e}"
    );

    let e =
        TimedTrace::load(fixture("does_not_exist.jsonl"), &TraceOptions::default()).unwrap_err();
    assert!(matches!(e, TraceError::Io { .. }));
    assert!(e.to_string().starts_with("cannot read trace "), "{e}");
}

#[test]
fn text_mode_decodes_block_by_block() {
    let b = small_builder(4);
    let t = load("mooncake_small.jsonl", &TraceOptions::default());
    let calls = std::sync::atomic::AtomicUsize::new(0);
    let decode = |ids: &[u32]| {
        calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        ids.iter().map(|i| format!(" t{i}\"\\")).collect::<String>()
    };
    let text = TextPrompter::new();
    for r in &t.records {
        let whole = text.text(&b, r, &decode);
        assert_eq!(whole, decode(&b.prompt_ids(r)), "line {}", r.line);
        let json = text.text_json_parts(&b, r, &decode).concat();
        let parsed: String = serde_json::from_slice(&json).unwrap();
        assert_eq!(parsed, whole);
    }
    // Lines 1 and 2 share blocks 0 and 1: the same Arc, decoded once.
    let a = text.text_parts(&b, &t.records[0], &decode);
    let c = text.text_parts(&b, &t.records[1], &decode);
    assert!(Arc::ptr_eq(&a[0], &c[0]) && Arc::ptr_eq(&a[1], &c[1]));
    assert!(text.cached_blocks() > 0);
}

#[test]
fn stats_of_the_small_trace() {
    let opts = TraceOptions {
        sec_multiplier: 0.001,
        ..Default::default()
    };
    let t = load("mooncake_small.jsonl", &opts);
    let s = TraceStats::compute(&t, 4);
    assert_eq!(s.requests, 10);
    assert_eq!(
        (
            s.total_input_tokens,
            s.total_output_tokens,
            s.max_input_tokens
        ),
        (96, 33, 16)
    );
    assert_eq!((s.peak_requests_1s, s.peak_requests_60s), (4, 9));
    // Blocks used: 3+3+2+1+0+4+2+1+3+0 = 19; prefixes 0, 0-1, 0-1-2, 0-1-3, 4, 4-1, 4-1-2,
    // 4-1-2-5 are new (8), the other 11 hit.
    assert_eq!((s.blocks, s.distinct_blocks, s.block_hits), (19, 8, 11));
    // Hit tokens: line 2: 4+4, line 3: 4+3, line 4: 4, line 7: 4+4, line 8: 3, line 9: 4+4+4.
    assert_eq!(s.token_hits, 42);
    assert_eq!(
        s.to_string(),
        "================= Trace Summary ==================\n\
         Trace format:                            mooncake  \n\
         Requests:                                10        \n\
         First arrival (s):                       0.00      \n\
         Arrival span (s):                        62.00     \n\
         Mean arrival rate (req/s):               0.16      \n\
         Peak requests in 1 s:                    4         \n\
         Peak requests in 60 s:                   9         \n\
         Total input tokens:                      96        \n\
         Total output tokens:                     33        \n\
         Mean input tokens:                       9.60      \n\
         Max input tokens:                        16        \n\
         Prefix blocks (4 tokens each):           19        \n\
         Distinct prefix blocks:                  8         \n\
         Ideal prefix cache hit (blocks, %):      57.89     \n\
         Ideal prefix cache hit (tokens, %):      43.75     \n\
         ==================================================\n"
    );
}

#[test]
fn first_500_records_of_the_mooncake_trace() {
    let path = mooncake_trace();
    let opts = TraceOptions {
        sec_multiplier: 0.001,
        num_prompts: Some(500),
        ..Default::default()
    };
    let t = TimedTrace::load(&path, &opts).unwrap();
    assert_eq!((t.len(), t.format), (500, TraceFormat::Mooncake));
    assert!(t.report.stopped_at_num_prompts);

    // The same numbers computed independently from the raw JSON.
    let raw: Vec<Value> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .take(500)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let field = |v: &Value, k: &str| v[k].as_u64().unwrap();
    let arrivals: Vec<f64> = raw
        .iter()
        .map(|v| field(v, "timestamp") as f64 * 0.001)
        .collect();
    assert_eq!(t.arrival_offsets(), arrivals);
    let (mut seen, mut blocks, mut hits) = (std::collections::HashSet::new(), 0u64, 0u64);
    for v in &raw {
        for h in v["hash_ids"].as_array().unwrap() {
            blocks += 1;
            hits += u64::from(!seen.insert(h.as_u64().unwrap()));
        }
    }
    let peak = |w: f64| {
        arrivals
            .iter()
            .map(|&s| arrivals.iter().filter(|&&x| x >= s && x < s + w).count())
            .max()
            .unwrap()
    };

    let s = TraceStats::compute(&t, 512);
    assert_eq!(
        s.total_input_tokens,
        raw.iter().map(|v| field(v, "input_length")).sum::<u64>()
    );
    assert_eq!(
        s.total_output_tokens,
        raw.iter().map(|v| field(v, "output_length")).sum::<u64>()
    );
    assert_eq!(
        (s.blocks, s.block_hits, s.distinct_blocks),
        (blocks, hits, seen.len() as u64)
    );
    assert_eq!(
        (s.peak_requests_1s, s.peak_requests_60s),
        (peak(1.0), peak(60.0))
    );
    assert_eq!(s.out_of_order, 0);
    // Facts of the (checksummed) file, for the record: 14,162 blocks, 11,879 distinct,
    // so an ideal prefix cache hits 16.1% of the blocks of the first 500 requests.
    assert_eq!(
        (s.total_input_tokens, s.blocks, s.distinct_blocks),
        (7_124_855, 14_162, 11_879)
    );
    assert_eq!(
        (s.duration_s(), s.peak_requests_1s, s.peak_requests_60s),
        (165.0, 16, 199)
    );

    // Every prompt is exact and its JSON parts are the same ids.
    let b = small_builder(512);
    for r in t.records.iter().step_by(7) {
        let ids = b.prompt_ids(r);
        assert_eq!(ids.len(), r.input_len as usize);
        assert_eq!(parse_parts(&b.prompt_json_parts(r)), ids);
    }
}

#[test]
fn first_40_records_match_the_python_golden_run() {
    // Golden 04: --num-prompts 40 --timed-trace-chunk-hash-size 512
    // --timed-trace-sec-multiplier 0.0001; the mock reports prompt_tokens = list length.
    let trace = mooncake_trace();
    let golden =
        crate::util::fixture("golden/python-0.33/04-timed-trace-conversation40/result.json");
    let result: Value = serde_json::from_str(&std::fs::read_to_string(&golden).unwrap()).unwrap();
    let lens = |k: &str| -> Vec<usize> {
        result[k]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as usize)
            .collect()
    };
    let opts = TraceOptions {
        sec_multiplier: 0.0001,
        num_prompts: Some(40),
        ..Default::default()
    };
    let t = TimedTrace::load(&trace, &opts).unwrap();
    let b = small_builder(512);
    let samples: Vec<_> = (0..t.len()).map(|i| t.sample_request(i, &b, "")).collect();
    let ids_len: Vec<usize> = samples
        .iter()
        .map(|s| match &s.prompt {
            Prompt::TokenIds(ids) => ids.len(),
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(ids_len, lens("input_lens"));
    assert_eq!(ids_len.iter().sum::<usize>(), 506_280);
    let expected_out: Vec<usize> = samples.iter().map(|s| s.expected_output_len).collect();
    assert_eq!(expected_out, lens("output_lens"));
    assert_eq!(samples[39].request_id.as_deref(), Some("39"));
    let last = t.arrival_offsets()[39];
    assert!((1.1..=1.2).contains(&last), "{last}");
}

/// Reads and assembles the whole Mooncake trace once, reporting time and memory. Run with
/// `VLLM_BENCH_FULL_TRACE=conversation_trace.jsonl cargo test --test tests
/// timed_trace::full_trace -- --ignored --nocapture` (the 12,031-request file).
#[test]
#[ignore = "measurement: reads and assembles the full trace ($VLLM_BENCH_FULL_TRACE)"]
fn full_trace_memory_and_time() {
    fn rss_kib(key: &str) -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }
    let start = std::time::Instant::now();
    let rss0 = rss_kib("VmRSS:");
    let opts = TraceOptions {
        sec_multiplier: 0.001,
        ..Default::default()
    };
    let t = TimedTrace::load(crate::util::full_mooncake_trace(), &opts).unwrap();
    let read_s = start.elapsed().as_secs_f64();
    let rss_read = rss_kib("VmRSS:");
    let stats = TraceStats::compute(&t, 512);
    println!("{stats}");
    let mib = |b: usize| b as f64 / 1048576.0;
    for (vocab, specials) in [
        (4096u32, vec![0u32, 1, 2]),
        (151_936, vec![151_643, 151_644, 151_645]),
    ] {
        let space = TokenSpace::new(vocab, &specials).unwrap();
        // Just in time: each prompt assembled, "sent" (its JSON bytes counted), dropped.
        let b = PromptBuilder::new(space.clone(), 512)
            .unwrap()
            .with_reuse_plan(&t.records);
        let t0 = std::time::Instant::now();
        let (mut peak, mut body) = (0usize, 0usize);
        for (i, r) in t.records.iter().enumerate() {
            body += b
                .prompt_json_parts(r)
                .iter()
                .map(|p| p.len())
                .sum::<usize>();
            if i % 16 == 0 {
                peak = peak.max(b.cache_stats().bytes);
            }
        }
        let c = b.cache_stats();
        println!(
            "vocab {vocab}, reuse plan, just-in-time: {} prompts in {:.2} s (debug); prompt JSON \
             {:.1} MiB in total; cache peak {:.1} MiB, end {} blocks; {} uncached, {} released; \
             RSS {:.1} MiB",
            t.len(),
            t0.elapsed().as_secs_f64(),
            mib(body),
            mib(peak),
            c.blocks,
            c.uncached,
            c.released,
            rss_kib("VmRSS:") as f64 / 1024.0,
        );
        assert_eq!(c.blocks, 0);
        drop(b);
        // Everything assembled up front and held (what a pre-built request list costs).
        let b = PromptBuilder::new(space, 512).unwrap();
        let t0 = std::time::Instant::now();
        let prompts: Vec<Vec<bytes::Bytes>> =
            t.records.iter().map(|r| b.prompt_json_parts(r)).collect();
        let parts: usize = prompts.iter().map(Vec::len).sum();
        let c = b.cache_stats();
        println!(
            "vocab {vocab}, all held: {} prompts in {:.2} s (debug); {parts} parts; fragment \
             cache {} blocks {:.1} MiB; RSS {:.1} MiB (after read {:.1}, before {:.1}), peak {:.1} MiB",
            prompts.len(),
            t0.elapsed().as_secs_f64(),
            c.blocks,
            mib(c.bytes),
            rss_kib("VmRSS:") as f64 / 1024.0,
            rss_read as f64 / 1024.0,
            rss0 as f64 / 1024.0,
            rss_kib("VmHWM:") as f64 / 1024.0,
        );
        assert_eq!(c.blocks, 182_790);
    }
    println!("read {} records in {read_s:.2} s", t.len());
}
