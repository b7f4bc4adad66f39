//! BurstGPT against Python: `tests/data/burstgpt/expected.json` (written by
//! `tests/data/burstgpt/make_fixture.py` with pandas and numpy) holds numpy `RandomState`
//! draws and the rows vllm 0.33's `BurstGPTDataset` picks from `burstgpt_sample.csv` for
//! several seeds and sizes, with and without replacement.

use std::path::PathBuf;

use serde_json::Value;
use vllm_bench::datasets::burstgpt::BurstGpt;
use vllm_bench::datasets::np_random::NpRandomState;
use vllm_bench::datasets::{Prompt, Sampling};

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/burstgpt")
        .join(name)
}

fn expected() -> Value {
    serde_json::from_str(&std::fs::read_to_string(data("expected.json")).unwrap()).unwrap()
}

fn usizes(v: &Value) -> Vec<usize> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as usize)
        .collect()
}

fn sampling(seed: u64, n: usize) -> Sampling {
    Sampling {
        num_requests: n,
        seed,
        shuffle: true,
        oversample: true,
        request_id_prefix: String::new(),
    }
}

#[test]
fn random_state_matches_numpy() {
    let doc = expected();
    for case in doc["random_state"].as_array().unwrap() {
        let seed = case["seed"].as_u64().unwrap();
        let perm = NpRandomState::new(seed).unwrap().permutation(37);
        assert_eq!(perm, usizes(&case["permutation_37"]), "seed {seed}");
        let ints = NpRandomState::new(seed).unwrap().randint(1000, 20);
        assert_eq!(ints, usizes(&case["randint_1000"]), "seed {seed}");
    }
    assert!(NpRandomState::new(1 << 32).is_none());
}

#[test]
fn picks_pythons_rows() {
    let doc = expected();
    let b = BurstGpt::load(&data("burstgpt_sample.csv")).unwrap();
    for case in doc["cases"].as_array().unwrap() {
        let (seed, n) = (
            case["seed"].as_u64().unwrap(),
            case["num"].as_u64().unwrap() as usize,
        );
        assert_eq!(b.len() as u64, case["valid"].as_u64().unwrap());
        let want: Vec<(usize, usize)> = case["pairs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p[0].as_u64().unwrap() as usize,
                    p[1].as_u64().unwrap() as usize,
                )
            })
            .collect();
        assert_eq!(
            b.pick(&sampling(seed, n)).unwrap(),
            want,
            "seed {seed} n {n}"
        );
    }
}

#[test]
fn prompts_decode_the_shifted_id_walk() {
    let Some(tok) = super::qwen3() else { return };
    let b = BurstGpt::load(&data("burstgpt_sample.csv")).unwrap();
    let s = sampling(0, 3);
    let reqs = b.sample(&s, tok).unwrap();
    let picked = b.pick(&s).unwrap();
    for (i, (r, (input, output))) in reqs.iter().zip(picked).enumerate() {
        assert_eq!((r.prompt_len, r.expected_output_len), (input, output));
        let ids: Vec<u32> = (0..input).map(|j| (i + j) as u32).collect();
        let Prompt::Text(text) = &r.prompt else {
            panic!()
        };
        assert_eq!(**text, tok.decode(&ids, false).unwrap());
        assert_eq!(r.request_id.as_deref(), Some(i.to_string().as_str()));
    }
}
