//! The prefix-repetition dataset: exact lengths, shared prefixes token for token, Python's
//! request count and shuffle order.

use vllm_bench::datasets::prefix_repetition::{sample, PrefixRepetitionOptions};
use vllm_bench::datasets::pyrandom::PyRandom;
use vllm_bench::datasets::{Prompt, SampleRequest, Sampling};

// The Qwen3 tokenizer, loaded once for the `datasets` module; `None` (the test returns)
// when it has not been fetched.
use super::qwen3;

fn sampling(n: usize, shuffle: bool) -> Sampling {
    Sampling {
        num_requests: n,
        seed: 3,
        shuffle,
        oversample: true,
        request_id_prefix: String::new(),
    }
}

fn text(r: &SampleRequest) -> &str {
    match &r.prompt {
        Prompt::Text(t) => t,
        _ => panic!("text expected"),
    }
}

const OPTS: PrefixRepetitionOptions = PrefixRepetitionOptions {
    prefix_len: 40,
    suffix_len: 24,
    num_prefixes: 3,
    output_len: 17,
};

#[test]
fn prefixes_are_shared_exactly_and_lengths_are_exact() {
    let Some(tok) = qwen3() else { return };
    // 11 // 3 = 3 per prefix: 9 requests, as Python.
    let reqs = sample(&sampling(11, false), OPTS, tok).unwrap();
    assert_eq!(reqs.len(), 9);
    let ids: Vec<Vec<u32>> = reqs
        .iter()
        .map(|r| tok.encode(text(r), false).unwrap())
        .collect();
    for (r, ids) in reqs.iter().zip(&ids) {
        assert_eq!(r.prompt_len, 64);
        assert_eq!(ids.len(), 64);
        assert_eq!(r.expected_output_len, 17);
        assert_eq!(r.request_id, None);
    }
    let prefix = |i: usize| &ids[i][..40];
    for group in 0..3 {
        for k in 1..3 {
            assert_eq!(prefix(group * 3), prefix(group * 3 + k), "group {group}");
            assert_ne!(ids[group * 3], ids[group * 3 + k], "suffixes differ");
        }
    }
    assert_ne!(prefix(0), prefix(3));
    assert_ne!(prefix(3), prefix(6));
}

#[test]
fn shuffle_is_pythons_and_the_seed_is_deterministic() {
    let Some(tok) = qwen3() else { return };
    let mut plain = sample(&sampling(9, false), OPTS, tok).unwrap();
    let shuffled = sample(&sampling(9, true), OPTS, tok).unwrap();
    PyRandom::new(3).shuffle(&mut plain);
    assert_eq!(plain, shuffled);
}

#[test]
fn fewer_prompts_than_prefixes_is_one_clear_error() {
    let Some(tok) = qwen3() else { return };
    let e = sample(&sampling(2, true), OPTS, tok).unwrap_err();
    assert_eq!(
        e.to_string(),
        "--num-prompts (2) must be at least --prefix-repetition-num-prefixes (3)"
    );
}
