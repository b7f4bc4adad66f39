//! Criterion benchmark: building a conversation's later turns (`multi_turn` group).
//!
//! A turn's request is the previous turn's message parts plus the answer and the new user
//! message, so building turn k costs the two new messages, not the history: the per-turn time
//! of a 20-turn conversation of 2k-token turns must equal that of a 5-turn one. Run with
//! `cargo bench --bench conversation -- --quick`; figures in bench-overhead/results/HISTORY.md.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use vllm_bench::backends::conversation::ChatBody;
use vllm_bench::backends::{Api, BodyOptions};
use vllm_bench::datasets::conversations::{Conversation, Conversations, History, UserTurn};
use vllm_bench::engine::session::{Reply, SessionSource};
use vllm_bench::http::request::{HeadTemplate, Method};
use vllm_bench::modes::multi_turn::ConversationPlan;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// About 2,000 tokens of English-like text (~4 bytes per token), with characters JSON must
/// escape.
fn text_2k(seed: usize) -> String {
    let words = [
        "the",
        "model",
        "\"quoted\"",
        "answer",
        "line\n",
        "tab\t",
        "cache",
        "token",
    ];
    (0..2000)
        .map(|i| words[(i * 7 + seed) % words.len()])
        .collect::<Vec<_>>()
        .join(" ")
}

fn plan(turns: usize) -> ConversationPlan {
    let conversation = Conversation {
        id: "bench-conv-0".into(),
        turns: (0..turns)
            .map(|t| UserTurn {
                text: text_2k(t).into(),
                prompt_len: 2000,
                output_len: 2000,
            })
            .collect(),
    };
    let conversations = Conversations {
        list: vec![conversation],
        history: History::Full,
    };
    let head = HeadTemplate::new(Method::Post, "/v1/chat/completions", "127.0.0.1:8000", &[]);
    let opts = BodyOptions {
        model: "m".into(),
        ..BodyOptions::default()
    };
    let body = ChatBody::new(Api::Chat, &opts, true).expect("chat body");
    ConversationPlan::new(&conversations, head, vec![body], Duration::ZERO)
}

fn multi_turn(c: &mut Criterion) {
    let mut group = c.benchmark_group("multi_turn");
    let answer = text_2k(99);
    let reply = Reply {
        text: &answer,
        prompt_tokens: None,
        completion_tokens: Some(2000),
        finish_reason: None,
    };
    for turns in [5usize, 20] {
        let plan = plan(turns);
        // Per turn built: the figure that must not grow with the conversation.
        group.throughput(Throughput::Elements(turns as u64 - 1));
        group.bench_with_input(
            BenchmarkId::new("build_later_turns_2k", turns),
            &plan,
            |b, plan| {
                b.iter(|| {
                    let mut follow = plan.follow(0);
                    let mut wire = 0;
                    while let Some(next) = follow.next(&reply) {
                        wire += next.request.len();
                    }
                    wire
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, multi_turn);
criterion_main!(benches);
