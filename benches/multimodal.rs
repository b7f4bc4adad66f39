//! Criterion benchmark: `random-mm` preparation (`multimodal` group), the target of
//! 1,000 requests with one 1024×800 image each prepared in under 2 s: the images (item
//! plans, noise JPEGs, base64) and every request's chat body around them. Run with
//! `cargo bench --bench multimodal -- --quick`.

use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};
use rayon::prelude::*;
use vllm_bench::backends::{build_body_parts, Api, BodyOptions};
use vllm_bench::datasets::media::ChatMedia;
use vllm_bench::datasets::random_mm::{items, RandomMmParams};
use vllm_bench::datasets::Prompt;

/// The allocator the `vllm-bench` binary runs with (DESIGN.md), so allocation costs match.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn multimodal(c: &mut Criterion) {
    let mut group = c.benchmark_group("multimodal");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(1));
    let params = RandomMmParams {
        base_items_per_request: 1,
        num_mm_items_range_ratio: 0.0,
        limit_mm_per_prompt: vec![("image".into(), 1), ("video".into(), 0)],
        bucket_config: vec![((1024, 800, 1), 1.0)],
    };
    let opts = BodyOptions {
        model: "Qwen/Qwen2.5-VL-7B-Instruct".into(),
        ..BodyOptions::default()
    };
    let prompt = Prompt::Text(Arc::from("word ".repeat(512)));
    let n = 1000;
    group.throughput(Throughput::Elements(n as u64));
    group.bench_function("random_mm_1k_x_1024x800_prepared", |b| {
        b.iter(|| {
            let images = items(&params, n, 0).expect("images");
            let bodies: Vec<_> = images
                .into_par_iter()
                .map(|mm| {
                    let media = ChatMedia::beside_text(mm);
                    build_body_parts(Api::Chat, &prompt, 128, &opts, &media, None).unwrap()
                })
                .collect();
            bodies.len()
        })
    });
    group.finish();
}

criterion_group!(benches, multimodal);
criterion_main!(benches);
