//! `PyRandom` against CPython: the fixture `tests/data/pyrandom/pyrandom.json` is written by
//! `tests/data/pyrandom/make_fixture.py` (standard library only) from `random.seed`,
//! `random.shuffle`, `random.choice` and `random.getrandbits`.

use serde_json::Value;
use vllm_bench::datasets::pyrandom::PyRandom;

fn fixture() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/pyrandom/pyrandom.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn ints(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect()
}

fn cases() -> Vec<(u64, Value)> {
    let doc = fixture();
    let cases = doc["cases"].as_array().unwrap().clone();
    assert!(cases.len() >= 5, "the fixture covers several seeds");
    cases
        .into_iter()
        .map(|c| (c["seed"].as_u64().unwrap(), c))
        .collect()
}

#[test]
fn shuffle_matches_cpython() {
    for (seed, case) in cases() {
        for (n, want) in case["shuffle"].as_object().unwrap() {
            let n: u64 = n.parse().unwrap();
            let mut got: Vec<u64> = (0..n).collect();
            PyRandom::new(seed).shuffle(&mut got);
            assert_eq!(got, ints(want), "seed {seed}, shuffle of {n}");
        }
    }
}

#[test]
fn choice_matches_cpython() {
    for (seed, case) in cases() {
        for (n, want) in case["choice"].as_object().unwrap() {
            let n: usize = n.parse().unwrap();
            let mut r = PyRandom::new(seed);
            let got: Vec<u64> = (0..want.as_array().unwrap().len())
                .map(|_| r.choice_index(n).unwrap() as u64)
                .collect();
            assert_eq!(got, ints(want), "seed {seed}, choice of {n}");
        }
    }
}

#[test]
fn getrandbits_matches_cpython() {
    for (seed, case) in cases() {
        let mut r = PyRandom::new(seed);
        for pair in case["getrandbits"].as_array().unwrap() {
            let (k, want) = (pair[0].as_u64().unwrap(), pair[1].as_u64().unwrap());
            assert_eq!(
                r.getrandbits(k as u32),
                want,
                "seed {seed}, getrandbits({k})"
            );
        }
    }
}

#[test]
fn reseeded_choice_after_shuffle_matches_cpython() {
    for (seed, case) in cases() {
        let c = &case["shuffle_then_choice"];
        let mut x: Vec<u64> = (0..300).collect();
        PyRandom::new(seed).shuffle(&mut x);
        assert_eq!(x, ints(&c["shuffled"]), "seed {seed}");
        let mut r = PyRandom::new(seed);
        let got: Vec<u64> = (0..40).map(|_| x[r.choice_index(17).unwrap()]).collect();
        assert_eq!(got, ints(&c["choices"]), "seed {seed}");
    }
}

#[test]
fn random_and_choices_match_cpython() {
    for (seed, case) in cases() {
        let mut r = PyRandom::new(seed);
        for want in case["random"].as_array().unwrap() {
            assert_eq!(r.random(), want.as_f64().unwrap(), "seed {seed}");
        }
        // One generator across the three sizes, as the fixture's script draws them.
        let mut r = PyRandom::new(seed);
        for n in ["1", "7", "518"] {
            let want = ints(&case["choices"][n]);
            let got: Vec<u64> = (0..want.len())
                .map(|_| r.choices_index(n.parse().unwrap()) as u64)
                .collect();
            assert_eq!(got, want, "seed {seed}, choices of {n}");
        }
    }
}
