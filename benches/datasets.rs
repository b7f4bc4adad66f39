//! Criterion benchmarks: dataset generation (`dataset_generation` group).
//!
//! The headline case is Python's default shape at scale: 100k random prompts of exactly 1024
//! tokens as text with the Qwen3 tokenizer (the window path of `datasets::walk_corpus`), and
//! the same as token ids. Run with `cargo bench --bench datasets -- --quick`, after
//! `scripts/fetch-fixtures.sh` (the Qwen3 tokenizer, into `$VLLM_BENCH_CACHE/fixtures`,
//! default `~/.cache/vllm-bench/fixtures`).

use std::path::PathBuf;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, SamplingMode, Throughput};
use vllm_bench::datasets::random::{sample, RandomConfig};
use vllm_bench::tokenizer::{Tokenizer, TokenizerOptions};

/// The allocator the `vllm-bench` binary runs with (DESIGN.md), so allocation costs match.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A tokenizer `scripts/fetch-fixtures.sh` fetched (`tokenizers/<name>` of its cache).
fn tokenizer(name: &str) -> Tokenizer {
    let cache = std::env::var_os("VLLM_BENCH_CACHE").map_or_else(
        || PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/vllm-bench"),
        PathBuf::from,
    );
    let path = cache.join("fixtures/tokenizers").join(name);
    let mut opts = TokenizerOptions::new(path.to_string_lossy().into_owned());
    opts.offline = true;
    Tokenizer::load(&opts)
        .unwrap_or_else(|e| panic!("{e} (fetch it first: scripts/fetch-fixtures.sh)"))
}

fn dataset_generation(c: &mut Criterion) {
    let mut group = c.benchmark_group("dataset_generation");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(1));

    for (name, num_prompts, prompt_token_ids) in [
        ("random_text_100k_x1024_qwen3", 100_000, false),
        ("random_ids_100k_x1024_qwen3", 100_000, true),
        ("random_text_1k_x1024_qwen3", 1_000, false),
    ] {
        let cfg = RandomConfig {
            num_prompts,
            input_len: 1024,
            output_len: 128,
            prompt_token_ids,
            ..Default::default()
        };
        group.throughput(Throughput::Elements(num_prompts as u64));
        group.measurement_time(Duration::from_secs(
            if num_prompts > 10_000 && !prompt_token_ids {
                60
            } else {
                5
            },
        ));
        group.bench_function(name, |b| {
            // A freshly loaded tokenizer per iteration (not timed): its word caches start
            // cold, as in a real run that generates its dataset once.
            b.iter_batched(
                || tokenizer("qwen3"),
                |qwen3| sample(&cfg, &qwen3).expect("generation"),
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, dataset_generation);
criterion_main!(benches);
