//! Criterion benchmarks: the Python-exact metric calculation on a large run.
//!
//! 100k synthetic requests with 128 ITL samples each (12.8M ITLs): the size of a long
//! high-concurrency run. Measures `calculate_metrics` end to end (sorting, pairwise sums,
//! peaks) and the result-JSON serialization of the same run.
//!
//! The `merge` group times what happens after the engine joins its cores: adding the per-core
//! HDR histograms, and the full merge of worker logs (records + ITL arenas) into request order.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use vllm_bench::engine::recorder::{self, Histograms, Record, WorkerLog};
use vllm_bench::metrics::calculator::calculate_metrics;
use vllm_bench::metrics::goodput::GoodputConfig;
use vllm_bench::metrics::metric_stats::MetricKind;
use vllm_bench::metrics::report::{BenchmarkReport, ReportSettings, TaskKind};
use vllm_bench::metrics::RequestOutput;
use vllm_bench::output::json::{build_result, RunInfo};

const REQUESTS: usize = 100_000;
const TOKENS: usize = 129;

/// Deterministic pseudo-random requests: 64 in flight, ~20 ms TTFT, ~5 ms ITL.
fn synthetic_outputs() -> Vec<RequestOutput> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    (0..REQUESTS)
        .map(|i| {
            let ttft = 0.015 + 0.01 * next();
            let itl: Vec<f64> = (1..TOKENS).map(|_| 0.004 + 0.002 * next()).collect();
            let latency = ttft + itl.iter().sum::<f64>();
            RequestOutput {
                success: i % 1000 != 0,
                latency,
                output_tokens: TOKENS as u64,
                ttft,
                itl: itl.into(),
                prompt_len: 512,
                start_time: 1000.0 + (i / 64) as f64 * 0.7 + 0.01 * next(),
                client_queue_time: 0.001 * next(),
                ..Default::default()
            }
        })
        .collect()
}

fn bench_metrics(c: &mut Criterion) {
    let outputs = synthetic_outputs();
    let percentiles = [50.0, 90.0, 99.0, 99.9];
    let goodput = GoodputConfig::parse(&["ttft:25", "tpot:6"]).expect("valid SLOs");
    let never = |_: &str| 0usize;

    let mut group = c.benchmark_group("metrics");
    group.sample_size(10);
    group.throughput(Throughput::Elements(REQUESTS as u64));
    group.bench_function("calculate_metrics_100k", |b| {
        b.iter(|| calculate_metrics(black_box(&outputs), 1500.0, &never, &percentiles, &goodput))
    });

    let settings = ReportSettings {
        duration_s: 1500.0,
        task: TaskKind::Generation,
        count_tokens: Some(&never),
        percentiles: percentiles.to_vec(),
        percentile_metrics: MetricKind::ALL.to_vec(),
        goodput: goodput.clone(),
        max_concurrency: Some(64),
        request_rate: 100.0,
    };
    let report = BenchmarkReport::compute(&outputs, &settings);
    let run = RunInfo {
        date: "20260101-000000".into(),
        backend: "vllm".into(),
        label: None,
        model_id: "bench/model".into(),
        tokenizer_id: Some("bench/model".into()),
        num_prompts: REQUESTS as u64,
        metadata: Vec::new(),
        request_rate: 100.0,
        burstiness: 1.0,
        max_concurrency: Some(64),
        ramp_up: None,
    };
    group.bench_function("result_json_detailed_100k", |b| {
        b.iter(|| {
            build_result(&run, &report, black_box(&outputs), &[], true)
                .to_json_string()
                .len()
        })
    });
    group.finish();
}

/// Workers per simulated run in the merge group (1000 streams on 2 cores).
const MERGE_WORKERS: usize = 1000;
const MERGE_CORES: usize = 2;

/// Per-core logs of a synthetic run: `REQUESTS` requests of `TOKENS` token events, spread over
/// `MERGE_WORKERS` workers, each core's histograms fed through the real `WorkerLog::push`.
fn synthetic_logs() -> (Vec<WorkerLog>, Vec<Histograms>) {
    let per_worker = REQUESTS / MERGE_WORKERS;
    let mut hists: Vec<Histograms> = (0..MERGE_CORES).map(|_| Histograms::default()).collect();
    let mut logs = Vec::with_capacity(MERGE_WORKERS);
    for w in 0..MERGE_WORKERS {
        let h = &mut hists[w % MERGE_CORES];
        let mut log = WorkerLog::with_capacity(per_worker, TOKENS, false);
        for r in 0..per_worker {
            let index = (r * MERGE_WORKERS + w) as u32;
            let start_ns = u64::from(index) * 10_000;
            let (itl_start, _) = log.arena_marks();
            log.itl_ns.extend(
                (0..TOKENS as u64 - 1).map(|t| 9_000_000 + (t * 7919 + w as u64) % 2_000_000),
            );
            let first = start_ns + 50_000_000;
            let last = first + 10_000_000 * (TOKENS as u64 - 1);
            let rec = Record {
                index,
                scheduled_ns: start_ns,
                start_ns,
                first_token_ns: Some(recorder::nonzero_ns(first)),
                last_token_ns: last,
                itl: itl_start..log.itl_ns.len() as u32,
                client_prompt_len: 512,
                end_ns: last,
                ..Record::default()
            };
            log.push(rec, h);
        }
        logs.push(log);
    }
    (logs, hists)
}

fn bench_merge(c: &mut Criterion) {
    let (logs, hists) = synthetic_logs();
    let mut group = c.benchmark_group("merge");
    group.sample_size(10);
    group.throughput(Throughput::Elements(MERGE_CORES as u64));
    group.bench_function("core_histograms_2", |b| {
        b.iter(|| recorder::merge(Vec::new(), black_box(hists.clone()), 0).last_end_ns)
    });
    group.throughput(Throughput::Elements(REQUESTS as u64));
    group.bench_function("worker_logs_100k", |b| {
        b.iter_batched(
            || (clone_logs(&logs), hists.clone()),
            |(l, h)| {
                recorder::merge(vec![recorder::outputs(l)], h, REQUESTS)
                    .outputs
                    .len()
            },
            criterion::BatchSize::LargeInput,
        )
    });
    group.finish();
}

/// `WorkerLog` is not `Clone` (the engine never needs it); the bench rebuilds inputs per batch.
fn clone_logs(logs: &[WorkerLog]) -> Vec<WorkerLog> {
    logs.iter()
        .map(|l| WorkerLog {
            records: l.records.clone(),
            itl_ns: l.itl_ns.clone(),
            text: l.text.clone(),
            session_ended: l.session_ended,
            cancelled: l.cancelled,
            cancelled_end_ns: l.cancelled_end_ns,
            session_cancelled: l.session_cancelled,
        })
        .collect()
}

criterion_group!(benches, bench_metrics, bench_merge);
criterion_main!(benches);
