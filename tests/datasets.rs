//! Integration tests: tokenizers (all three tiers) and the `random` dataset.
//!
//! Uses the tokenizer fixtures (`crate::util::fixture`, and Qwen3's from
//! `crate::util::fetched`); never the network: every load goes through options with
//! `offline = true`.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use vllm_bench::datasets::align::{align_to_server, Alignment};
use vllm_bench::datasets::random::{
    sample, FitStrategy, Generation, LengthRanges, RandomConfig, RangeRatio,
};
use vllm_bench::datasets::token_fit::Vocabulary;
use vllm_bench::datasets::walk_corpus::WalkCorpus;
use vllm_bench::datasets::{Prompt, SampleRequest};
use vllm_bench::tokenizer::{
    hub, TokenizeEndpoint, Tokenizer, TokenizerKind, TokenizerMode, TokenizerOptions,
};

use crate::util::{fetched, sonnet, QWEN3};

/// Options that never touch the network or the user's HF cache.
fn offline(id: impl Into<String>) -> TokenizerOptions {
    let mut opts = TokenizerOptions::new(id);
    opts.offline = true;
    opts.hub_cache = Some(temp_dir("empty-hub-cache"));
    opts
}

fn load(path: &Path) -> Tokenizer {
    Tokenizer::load(&offline(path.to_str().unwrap())).unwrap()
}

/// The Qwen3 tokenizer, `None` (the test then returns) when it has not been fetched.
/// Loaded once for every test of this module and its submodules: a load takes seconds in a
/// debug build, and what a test asserts is the tokenizer's output, not its loading (the
/// loading tests below load their own).
pub(crate) fn qwen3() -> Option<&'static Tokenizer> {
    static TOK: OnceLock<Tokenizer> = OnceLock::new();
    if let Some(tok) = TOK.get() {
        return Some(tok);
    }
    let dir = fetched(QWEN3)?;
    Some(TOK.get_or_init(|| load(&dir)))
}

/// The SmolLM2 fixture tokenizer, loaded once (as [`qwen3`]).
pub(crate) fn smollm2() -> &'static Tokenizer {
    static TOK: OnceLock<Tokenizer> = OnceLock::new();
    TOK.get_or_init(|| load(&crate::util::smollm2()))
}

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("vb-datasets-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn text(req: &SampleRequest) -> &str {
    match &req.prompt {
        Prompt::Text(t) => t,
        _ => panic!("expected a text prompt"),
    }
}

// ---------------------------------------------------------------------------------------
// Tier 1: HF tokenizer.json

#[test]
fn reference_ids_match_the_fixture_readme() {
    let line = "Shall I compare thee to a summer's day?";
    let Some(qwen3) = qwen3() else { return };
    for (tok, ids) in [
        (
            &qwen3,
            vec![2016, 541, 358, 9429, 39244, 311, 264, 7324, 594, 1899, 30],
        ),
        (
            &smollm2(),
            vec![4370, 449, 339, 6811, 20322, 288, 253, 4018, 506, 1194, 47],
        ),
    ] {
        assert_eq!(tok.kind(), TokenizerKind::HuggingFace);
        assert_eq!(tok.encode(line, false).unwrap(), ids, "{}", tok.id());
        assert_eq!(
            tok.encode(line, true).unwrap(),
            ids,
            "{} adds no BOS",
            tok.id()
        );
        assert_eq!(tok.decode(&ids, false).unwrap(), line);
    }
    let sonnet = std::fs::read_to_string(sonnet()).unwrap();
    assert_eq!(qwen3.count_tokens(&sonnet), 5569);
    assert_eq!(smollm2().count_tokens(&sonnet), 6042);
}

#[test]
fn llama_server_cases_match_exactly() {
    let tok = smollm2();
    let cases = std::fs::read_to_string(crate::util::fixture(
        "tokenizers/smollm2/llama-server-tokenize-cases.jsonl",
    ))
    .unwrap();
    let mut n = 0;
    for line in cases.lines().filter(|l| !l.trim().is_empty()) {
        let case: serde_json::Value = serde_json::from_str(line).unwrap();
        let text = case["text"].as_str().unwrap();
        let ids: Vec<u32> = case["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect();
        assert_eq!(tok.encode(text, false).unwrap(), ids, "case {n}: {text:?}");
        assert_eq!(
            tok.encode(text, true).unwrap(),
            ids,
            "case {n} with specials"
        );
        assert_eq!(
            tok.decode(&ids, false).unwrap(),
            text,
            "case {n} round trip"
        );
        n += 1;
    }
    assert_eq!(n, 11);
}

#[test]
fn python_metadata_matches_transformers() {
    let Some(q) = qwen3() else { return };
    assert_eq!(q.vocab_size(), 151_643);
    assert_eq!(q.num_special_tokens_to_add(), 0);
    // eos <|im_end|>, pad <|endoftext|>, then the 13 additional special tokens.
    assert_eq!(&q.all_special_ids()[..3], &[151_645, 151_643, 151_644]);
    assert_eq!(q.all_special_ids().len(), 14);
    assert_eq!(q.control_token_ids().len(), 26, "every added token");

    let s = smollm2();
    assert_eq!(s.vocab_size(), 49_152);
    assert_eq!(s.all_special_ids(), &[1, 2, 0]);
    assert_eq!(
        s.control_token_ids(),
        (0..17).collect::<Vec<u32>>().as_slice()
    );

    let golden = load(&crate::util::fixture("golden/python-0.33/tok"));
    assert_eq!(golden.all_special_ids(), &[0]);
    assert_eq!(golden.num_special_tokens_to_add(), 0);
    assert_eq!(golden.count_tokens(" tok"), 1);
    assert_eq!(golden.count_tokens(&" tok".repeat(32)), 32);
}

#[test]
fn skip_special_tokens_on_decode() {
    let s = smollm2();
    let ids = s.encode("<|im_start|>user\nHi<|im_end|>", false).unwrap();
    assert_eq!(ids[0], 1);
    assert_eq!(
        s.decode(&ids, false).unwrap(),
        "<|im_start|>user\nHi<|im_end|>"
    );
    assert_eq!(s.decode(&ids, true).unwrap(), "user\nHi");
}

#[test]
fn encode_batch_keeps_order() {
    let Some(q) = qwen3() else { return };
    let texts = ["a b c", "Shall I compare thee", "", "日本語"];
    let batch = q.encode_batch(&texts, false).unwrap();
    for (t, ids) in texts.iter().zip(&batch) {
        assert_eq!(&q.encode(t, false).unwrap(), ids);
    }
}

#[test]
fn config_add_bos_token_adds_a_bos_when_the_json_does_not() {
    let dir = temp_dir("add-bos");
    std::fs::copy(
        crate::util::smollm2().join("tokenizer.json"),
        dir.join("tokenizer.json"),
    )
    .unwrap();
    std::fs::write(
        dir.join("tokenizer_config.json"),
        r#"{"add_bos_token": true, "bos_token": "<|im_start|>", "eos_token": "<|im_end|>"}"#,
    )
    .unwrap();
    let tok = load(&dir);
    assert_eq!(tok.num_special_tokens_to_add(), 1);
    assert_eq!(tok.encode("hi", true).unwrap()[0], 1);
    assert_eq!(
        tok.encode("hi", false).unwrap(),
        smollm2().encode("hi", false).unwrap()
    );
}

// ---------------------------------------------------------------------------------------
// Tier selection and errors

#[test]
fn tiers_are_selected_from_what_the_name_points_at() {
    assert_eq!(
        load(&crate::util::smollm2().join("tokenizer.json")).kind(),
        TokenizerKind::HuggingFace
    );
    let builtin = Tokenizer::load(&offline("cl100k_base")).unwrap();
    assert_eq!(builtin.kind(), TokenizerKind::Tiktoken);
    assert_eq!(builtin.id(), "cl100k_base");

    // A directory with only a tiktoken rank file is tier 2.
    let dir = tiny_tiktoken_dir("tier-select");
    assert_eq!(load(&dir).kind(), TokenizerKind::Tiktoken);
    // With a tokenizer.json beside it, tier 1 wins.
    std::fs::copy(
        crate::util::smollm2().join("tokenizer.json"),
        dir.join("tokenizer.json"),
    )
    .unwrap();
    assert_eq!(load(&dir).kind(), TokenizerKind::HuggingFace);
}

#[test]
fn missing_and_broken_tokenizers_give_one_clear_line() {
    let err = format!(
        "{:#}",
        Tokenizer::load(&offline("/nonexistent/model-dir")).unwrap_err()
    );
    assert!(
        err.contains("/nonexistent/model-dir") && err.contains("--tokenizer"),
        "{err}"
    );
    assert!(!err.contains('\n'), "{err}");

    let empty = temp_dir("empty-model");
    let err = format!(
        "{:#}",
        Tokenizer::load(&offline(empty.to_str().unwrap())).unwrap_err()
    );
    assert!(
        err.contains("no tokenizer.json") && err.contains(empty.to_str().unwrap()),
        "{err}"
    );

    let bad = temp_dir("bad-json");
    std::fs::write(bad.join("tokenizer.json"), "{\"model\": 42").unwrap();
    let err = format!(
        "{:#}",
        Tokenizer::load(&offline(bad.to_str().unwrap())).unwrap_err()
    );
    assert!(
        err.contains("not a valid tokenizer.json") && err.contains("bad-json"),
        "{err}"
    );

    let bad_cfg = temp_dir("bad-config");
    std::fs::copy(
        crate::util::smollm2().join("tokenizer.json"),
        bad_cfg.join("tokenizer.json"),
    )
    .unwrap();
    std::fs::write(bad_cfg.join("tokenizer_config.json"), "[1,").unwrap();
    let err = format!(
        "{:#}",
        Tokenizer::load(&offline(bad_cfg.to_str().unwrap())).unwrap_err()
    );
    assert!(
        err.contains("tokenizer_config.json is not valid JSON"),
        "{err}"
    );

    let err = format!(
        "{:#}",
        Tokenizer::load(&offline("some-org/not-cached-model")).unwrap_err()
    );
    assert!(
        err.contains("some-org/not-cached-model") && err.contains("HF_HUB_OFFLINE"),
        "{err}"
    );
}

#[test]
fn unsupported_modes_are_refused_when_loading() {
    for (mode, word) in [
        (TokenizerMode::Slow, "slow"),
        (TokenizerMode::Mistral, "mistral"),
    ] {
        let opts = offline(crate::util::smollm2().to_str().unwrap()).mode(mode);
        let err = Tokenizer::load(&opts).unwrap_err().to_string();
        assert!(
            err.contains(&format!("--tokenizer-mode {word} is not supported")),
            "{err}"
        );
    }
    let opts = offline(crate::util::smollm2().to_str().unwrap()).mode(TokenizerMode::Hf);
    assert!(Tokenizer::load(&opts).is_ok());
}

#[test]
fn hub_ids_resolve_from_the_local_cache_only() {
    let cache = temp_dir("hub-cache");
    let repo = hub::repo_dir(&cache, "HuggingFaceTB/SmolLM2-135M-Instruct");
    let snap = repo.join("snapshots/0123abcd");
    std::fs::create_dir_all(&snap).unwrap();
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs/main"), "0123abcd\n").unwrap();
    for f in ["tokenizer.json", "tokenizer_config.json"] {
        std::fs::copy(crate::util::smollm2().join(f), snap.join(f)).unwrap();
    }
    let mut opts = TokenizerOptions::new("HuggingFaceTB/SmolLM2-135M-Instruct");
    opts.offline = true;
    opts.hub_cache = Some(cache.clone());
    let tok = Tokenizer::load(&opts).unwrap();
    assert_eq!(tok.id(), "HuggingFaceTB/SmolLM2-135M-Instruct");
    assert_eq!(
        tok.all_special_ids(),
        &[1, 2, 0],
        "config read beside the cached json"
    );

    // Without refs/main (a hand-copied cache) the snapshot is still found...
    std::fs::remove_file(repo.join("refs/main")).unwrap();
    assert_eq!(Tokenizer::load(&opts).unwrap().vocab_size(), 49_152);
    // ...but another revision that is not cached is an offline error, not main's files.
    opts.revision = Some("v2".into());
    let err = format!("{:#}", Tokenizer::load(&opts).unwrap_err());
    assert!(err.contains("HF_HUB_OFFLINE"), "{err}");
}

// ---------------------------------------------------------------------------------------
// Tier 2: tiktoken

#[test]
fn tiktoken_builtin_round_trip() {
    let tok = Tokenizer::load(&offline("cl100k_base")).unwrap();
    assert_eq!(tok.encode("hello world", false).unwrap(), vec![15339, 1917]);
    assert_eq!(tok.vocab_size(), 100_256);
    assert!(tok.all_special_ids().contains(&100_257), "<|endoftext|>");
    for text in [
        "Shall I compare thee to a summer's day?",
        "日本語 ½ 😀\r\n  x",
        "",
    ] {
        let ids = tok.encode(text, false).unwrap();
        assert_eq!(tok.decode(&ids, false).unwrap(), text);
        assert_eq!(tok.count_tokens(text), ids.len());
    }
    assert_eq!(tok.encode("<|endoftext|>", false).unwrap(), vec![100_257]);
    assert_eq!(tok.decode(&[15339, 100_257], true).unwrap(), "hello");
}

/// A byte-level rank file (256 single bytes + a few merges), a `tokenization_x.py` with a
/// `pat_str` that splits on spaces only, and a config with one special token.
fn tiny_tiktoken_dir(tag: &str) -> PathBuf {
    fn b64(bytes: &[u8]) -> String {
        const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = String::new();
        for chunk in bytes.chunks(3) {
            let n = chunk
                .iter()
                .enumerate()
                .fold(0u32, |acc, (i, &b)| acc | (b as u32) << (16 - 8 * i));
            for i in 0..=chunk.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            }
            out.push_str(&"=".repeat(3 - chunk.len()));
        }
        out
    }
    let dir = temp_dir(tag);
    let mut lines: Vec<String> = (0..=255u8)
        .map(|b| format!("{} {}", b64(&[b]), b))
        .collect();
    for (i, tok) in ["ab", "abc", " a", "hello", " world"].iter().enumerate() {
        lines.push(format!("{} {}", b64(tok.as_bytes()), 256 + i));
    }
    std::fs::write(dir.join("tiny.tiktoken"), lines.join("\n")).unwrap();
    std::fs::write(
        dir.join("tokenization_tiny.py"),
        "class T:\n    def __init__(self):\n        pat_str = \"|\".join([r\"\"\" ?[^ ]+\"\"\", r\"\"\" +\"\"\"])\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("tokenizer_config.json"),
        r#"{"added_tokens_decoder": {"300": {"content": "<|end|>", "special": true}}, "eos_token": "<|end|>"}"#,
    )
    .unwrap();
    dir
}

#[test]
fn tiktoken_rank_file_with_pat_str_round_trips() {
    let dir = tiny_tiktoken_dir("rank-file");
    let tok = load(&dir);
    assert_eq!(tok.kind(), TokenizerKind::Tiktoken);
    assert_eq!(tok.vocab_size(), 261);
    assert_eq!(tok.all_special_ids(), &[300]);
    // " ?[^ ]+" keeps "hello" and " world" whole.
    assert_eq!(tok.encode("hello world", false).unwrap(), vec![259, 260]);
    assert_eq!(tok.encode("abc<|end|>", false).unwrap(), vec![257, 300]);
    for text in ["hello world", "abcab  a", "ünï 😀"] {
        let ids = tok.encode(text, false).unwrap();
        assert_eq!(tok.decode(&ids, false).unwrap(), text);
    }
    let err = tok.decode(&[999], false).unwrap_err().to_string();
    assert!(err.contains("999"), "{err}");
}

#[test]
fn broken_rank_file_is_a_clear_error() {
    let dir = temp_dir("bad-rank");
    std::fs::write(dir.join("x.tiktoken"), "not base64!! 1\n").unwrap();
    let err = format!(
        "{:#}",
        Tokenizer::load(&offline(dir.to_str().unwrap())).unwrap_err()
    );
    assert!(
        err.contains("x.tiktoken is not a tiktoken rank file") && err.contains("line 1"),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------
// Tier 3: server-side, through a fake endpoint

/// Whitespace "tokenizer" over a growing word table; id 0 is a BOS when asked.
#[derive(Default)]
struct FakeServer {
    words: Mutex<Vec<String>>,
    fail: bool,
}

impl FakeServer {
    fn id_of(&self, word: &str) -> u32 {
        let mut words = self.words.lock().unwrap();
        match words.iter().position(|w| w == word) {
            Some(i) => i as u32 + 1,
            None => {
                words.push(word.to_owned());
                words.len() as u32
            }
        }
    }
}

impl TokenizeEndpoint for FakeServer {
    fn tokenize(&self, text: &str, add_special: bool) -> anyhow::Result<Vec<u32>> {
        anyhow::ensure!(!self.fail, "connection refused");
        let mut ids: Vec<u32> = if add_special { vec![0] } else { vec![] };
        ids.extend(text.split_whitespace().map(|w| self.id_of(w)));
        Ok(ids)
    }

    fn detokenize(&self, ids: &[u32]) -> anyhow::Result<String> {
        let words = self.words.lock().unwrap();
        Ok(ids
            .iter()
            .filter(|&&i| i > 0)
            .map(|&i| words[i as usize - 1].as_str())
            .collect::<Vec<_>>()
            .join(" "))
    }
}

#[test]
fn server_tokenizer_uses_the_endpoint() {
    let tok = Tokenizer::server("remote-model", Arc::new(FakeServer::default())).unwrap();
    assert_eq!(tok.kind(), TokenizerKind::Server);
    assert_eq!(tok.num_special_tokens_to_add(), 1);
    let ids = tok.encode("a b a", false).unwrap();
    assert_eq!(ids, vec![1, 2, 1]);
    assert_eq!(tok.decode(&ids, false).unwrap(), "a b a");
    assert_eq!(tok.count_tokens("x y z"), 3);
    assert_eq!(tok.vocab_size(), 0, "the fake does not report one");
    assert!(tok.all_special_ids().is_empty());

    let down = Tokenizer::server(
        "m",
        Arc::new(FakeServer {
            fail: true,
            ..Default::default()
        }),
    );
    assert!(down.unwrap_err().to_string().contains("/tokenize"));
}

#[test]
fn server_fallback_only_when_nothing_local_exists() {
    let endpoint: Arc<dyn TokenizeEndpoint> = Arc::new(FakeServer::default());
    let (tok, note) =
        Tokenizer::load_or_server(&offline("org/only-on-server"), endpoint.clone()).unwrap();
    assert_eq!(tok.kind(), TokenizerKind::Server);
    assert!(note.unwrap().contains("using the server's /tokenize"));

    let (tok, note) = Tokenizer::load_or_server(
        &offline(crate::util::smollm2().to_str().unwrap()),
        endpoint.clone(),
    )
    .unwrap();
    assert_eq!(tok.kind(), TokenizerKind::HuggingFace);
    assert!(note.is_none());

    let bad = temp_dir("bad-json-fallback");
    std::fs::write(bad.join("tokenizer.json"), "nope").unwrap();
    assert!(
        Tokenizer::load_or_server(&offline(bad.to_str().unwrap()), endpoint).is_err(),
        "a broken file is an error"
    );
}

#[test]
fn a_random_dataset_needs_a_vocabulary() {
    let tok = Tokenizer::server("remote", Arc::new(FakeServer::default())).unwrap();
    let err = sample(
        &RandomConfig {
            num_prompts: 2,
            ..Default::default()
        },
        &tok,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("--tokenizer"), "{err}");
}

// ---------------------------------------------------------------------------------------
// The random dataset

fn cfg(input_len: usize, prefix_len: usize, range_ratio: f64, num_prompts: usize) -> RandomConfig {
    RandomConfig {
        num_prompts,
        input_len,
        output_len: 16,
        prefix_len,
        range_ratio: RangeRatio::both(range_ratio),
        seed: 7,
        ..Default::default()
    }
}

/// Re-encodes every prompt and checks the count, the range, the prefix and the vocabulary.
fn check_exact(tok: &Tokenizer, c: &RandomConfig) -> Vec<SampleRequest> {
    let sampled = sample(c, tok).unwrap();
    let expected = match c.fit {
        FitStrategy::Window => Generation::Window,
        _ => Generation::PerPrompt,
    };
    assert_eq!(sampled.generation, expected, "{}", tok.id());
    let reqs = sampled.requests;
    assert_eq!(reqs.len(), c.num_prompts);
    let ranges = LengthRanges::new(c, tok.num_special_tokens_to_add()).unwrap();
    let control: HashSet<u32> = tok.control_token_ids().iter().copied().collect();
    let mut prefix: Option<Vec<u32>> = None;
    for r in &reqs {
        let ids = tok.encode(text(r), false).unwrap();
        assert_eq!(
            ids.len(),
            r.prompt_len,
            "{}: exact count for input_len {}",
            tok.id(),
            c.input_len
        );
        let body = r.prompt_len - c.prefix_len;
        assert!(
            (ranges.input.0..=ranges.input.1).contains(&body),
            "body {body} outside {:?}",
            ranges.input
        );
        assert!((ranges.output.0..=ranges.output.1).contains(&r.expected_output_len));
        assert!(
            ids.iter().all(|id| !control.contains(id)),
            "{}: a control token in a prompt",
            tok.id()
        );
        let p = prefix.get_or_insert_with(|| ids[..c.prefix_len].to_vec());
        assert_eq!(
            &ids[..c.prefix_len],
            p.as_slice(),
            "prefix shared token for token"
        );
    }
    reqs
}

#[test]
fn exact_token_counts_qwen3() {
    let Some(tok) = qwen3() else { return };
    for (input_len, prefix, ratio, n) in [
        (1, 0, 0.0, 64),
        (7, 0, 0.5, 64),
        (128, 16, 0.3, 32),
        (1024, 0, 0.0, 8),
        (1024, 64, 0.2, 8),
    ] {
        check_exact(tok, &cfg(input_len, prefix, ratio, n));
    }
}

#[test]
fn exact_token_counts_smollm2() {
    let tok = smollm2();
    for (input_len, prefix, ratio, n) in [
        (1, 0, 0.0, 64),
        (7, 3, 0.5, 64),
        (128, 0, 0.3, 32),
        (1024, 32, 0.1, 8),
    ] {
        check_exact(tok, &cfg(input_len, prefix, ratio, n));
    }
}

#[test]
fn exact_token_counts_tiktoken() {
    let tok = Tokenizer::load(&offline("cl100k_base")).unwrap();
    check_exact(&tok, &cfg(128, 8, 0.5, 16));
    check_exact(
        &tok,
        &RandomConfig {
            fit: FitStrategy::Window,
            ..cfg(200, 8, 0.5, 300)
        },
    );
}

fn window(
    input_len: usize,
    prefix_len: usize,
    range_ratio: f64,
    num_prompts: usize,
) -> RandomConfig {
    RandomConfig {
        fit: FitStrategy::Window,
        ..cfg(input_len, prefix_len, range_ratio, num_prompts)
    }
}

#[test]
fn exact_token_counts_from_windows_qwen3() {
    let Some(tok) = qwen3() else { return };
    for c in [
        window(1, 0, 0.0, 300),
        window(7, 5, 0.5, 300),
        window(128, 16, 0.3, 300),
        window(1024, 64, 0.2, 100),
    ] {
        let reqs = check_exact(tok, &c);
        let distinct: HashSet<&str> = reqs.iter().map(text).collect();
        assert!(
            distinct.len() > reqs.len() * 9 / 10,
            "windows start at different places"
        );
    }
}

#[test]
fn exact_token_counts_from_windows_smollm2() {
    let tok = smollm2();
    for c in [
        window(1, 0, 0.0, 300),
        window(7, 3, 0.5, 300),
        window(128, 0, 0.3, 300),
        window(1024, 32, 0.1, 100),
    ] {
        check_exact(tok, &c);
    }
}

#[test]
fn corpus_encoded_in_pieces_equals_one_encode() {
    let Some(qwen3) = qwen3() else { return };
    for tok in [smollm2(), qwen3] {
        let vocab = Vocabulary::new(tok).unwrap();
        let corpus = WalkCorpus::build(tok, &vocab, 300).unwrap().unwrap();
        assert_eq!(
            corpus.ids(),
            tok.encode(corpus.text(), false).unwrap().as_slice(),
            "{}",
            tok.id()
        );
        assert!(corpus.cycle() > vocab.len() / 2 && corpus.cycle() < corpus.ids().len());
        assert!(
            corpus.pieces() > 1,
            "{}: encoded in pieces, not the one-encode fallback",
            tok.id()
        );
    }
}

#[test]
fn auto_strategy_uses_windows_only_for_large_datasets() {
    let tok = smollm2();
    // 49,135 allowed ids: windows pay off from about twice that many tokens.
    assert_eq!(
        sample(&cfg(64, 0, 0.0, 20), tok).unwrap().generation,
        Generation::PerPrompt
    );
    assert_eq!(
        sample(&cfg(1024, 0, 0.0, 100), tok).unwrap().generation,
        Generation::Window
    );
    let ids = RandomConfig {
        prompt_token_ids: true,
        ..cfg(1024, 0, 0.0, 100)
    };
    assert_eq!(sample(&ids, tok).unwrap().generation, Generation::TokenIds);
}

#[test]
fn prefix_text_is_shared_and_fixed_length_without_ratio() {
    let tok = smollm2();
    let reqs = check_exact(tok, &cfg(40, 24, 0.0, 16));
    assert!(reqs.iter().all(|r| r.prompt_len == 64));
    let prefix_text: String = {
        let ids = tok.encode(text(&reqs[0]), false).unwrap();
        tok.decode(&ids[..24], false).unwrap()
    };
    assert!(reqs.iter().all(|r| text(r).starts_with(&prefix_text)));
    let bodies: HashSet<&str> = reqs.iter().map(text).collect();
    assert_eq!(bodies.len(), reqs.len(), "bodies differ per request");
}

#[test]
fn deterministic_across_runs_and_thread_counts() {
    let Some(tok) = qwen3() else { return };
    let c = RandomConfig {
        request_id_prefix: Some("bench-x-".into()),
        ..cfg(64, 8, 0.5, 24)
    };
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| sample(&c, tok).unwrap().requests)
    };
    let one = run(1);
    assert_eq!(one, run(2));
    assert_eq!(one, run(3));
    assert_eq!(one[5].request_id.as_deref(), Some("bench-x-5"));
    let other_seed = sample(
        &RandomConfig {
            seed: 8,
            ..c.clone()
        },
        tok,
    )
    .unwrap()
    .requests;
    assert_ne!(one, other_seed);

    let w = RandomConfig {
        fit: FitStrategy::Window,
        num_prompts: 64,
        ..c.clone()
    };
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| sample(&w, tok).unwrap().requests)
    };
    assert_eq!(run(1), run(2));
}

#[test]
fn prompt_token_ids_are_exact_by_construction() {
    let Some(tok) = qwen3() else { return };
    let c = RandomConfig {
        prompt_token_ids: true,
        ..cfg(100, 10, 0.5, 50)
    };
    let reqs = sample(&c, tok).unwrap().requests;
    let control: HashSet<u32> = tok.control_token_ids().iter().copied().collect();
    let prefix = match &reqs[0].prompt {
        Prompt::TokenIds(ids) => ids[..10].to_vec(),
        _ => panic!("expected ids"),
    };
    for r in &reqs {
        let Prompt::TokenIds(ids) = &r.prompt else {
            panic!("expected ids")
        };
        assert_eq!(ids.len(), r.prompt_len);
        assert!((50..=150).contains(&(r.prompt_len - 10)));
        assert_eq!(&ids[..10], prefix.as_slice());
        assert!(ids
            .iter()
            .all(|&id| (id as usize) < tok.vocab_size() && !control.contains(&id)));
    }
}

#[test]
fn special_tokens_never_appear_even_when_the_walk_crosses_them() {
    // SmolLM2's 17 special tokens sit at ids 0..=16: offsets near the end of the vocabulary
    // make walks wrap around through them.
    let tok = smollm2();
    let c = RandomConfig {
        prompt_token_ids: true,
        ..cfg(60_000, 0, 0.0, 2)
    };
    for r in sample(&c, tok).unwrap().requests {
        let Prompt::TokenIds(ids) = &r.prompt else {
            panic!("expected ids")
        };
        assert!(
            ids.iter().all(|&id| id > 16),
            "the walk wrapped over the specials"
        );
    }
    let reqs = check_exact(tok, &cfg(256, 0, 0.0, 32));
    for r in &reqs {
        assert!(!text(r).contains("<|im_"), "special token text in a prompt");
    }
}

#[test]
fn max_model_len_drops_requests_that_do_not_fit() {
    let Some(tok) = qwen3() else { return };
    let base = RandomConfig {
        prompt_token_ids: true,
        output_len: 50,
        ..cfg(100, 0, 0.5, 200)
    };
    let all = sample(&base, tok).unwrap();
    assert_eq!(all.filtered, 0);
    let limit = 150;
    let expected: Vec<SampleRequest> = all
        .requests
        .iter()
        .filter(|r| r.prompt_len + r.expected_output_len <= limit)
        .cloned()
        .collect();
    assert!(!expected.is_empty() && expected.len() < all.requests.len());
    let filtered = sample(
        &RandomConfig {
            max_model_len: Some(limit),
            ..base
        },
        tok,
    )
    .unwrap();
    assert_eq!(filtered.requests, expected);
    assert_eq!(filtered.filtered, 200 - expected.len());
    assert_eq!(filtered.stats().filtered, filtered.filtered);
}

#[test]
fn input_and_output_len_overrides_apply() {
    let tok = smollm2();
    let c = cfg(999, 0, 0.0, 4).with_overrides(Some(12), Some(3));
    let reqs = check_exact(tok, &c);
    assert!(reqs
        .iter()
        .all(|r| r.prompt_len == 12 && r.expected_output_len == 3));
}

#[test]
fn too_small_input_is_python_s_error() {
    let Some(tok) = qwen3() else { return };
    let err = sample(&cfg(1, 0, 0.5, 2), tok).unwrap_err().to_string();
    assert!(err.contains("--random-input-len 1 is too small"), "{err}");
    let err = sample(&cfg(10, 0, 1.0, 2), tok).unwrap_err().to_string();
    assert!(err.contains("--random-range-ratio 1"), "{err}");
}

#[test]
fn stats_summarise_the_dataset() {
    let tok = smollm2();
    let s = sample(&cfg(20, 0, 0.0, 10), tok).unwrap().stats();
    assert_eq!(s.count, 10);
    assert_eq!(
        (s.prompt_len.min, s.prompt_len.max, s.prompt_len.total),
        (20, 20, 200)
    );
    assert!(s.to_string().contains("Requests: 10 (text prompts)"));
}

// ---------------------------------------------------------------------------------------
// Alignment to the server's tokenizer (Python 0.33, before the run)

#[test]
fn alignment_cuts_prompts_the_server_counts_longer() {
    let tok = smollm2();
    let mut reqs = sample(&cfg(30, 0, 0.0, 6), tok).unwrap().requests;
    let server = FakeServer::default();
    // Whitespace words are fewer than BPE tokens: the server agrees on no prompt's count.
    let outcome = align_to_server(&mut reqs, &server);
    match outcome {
        Alignment::Realigned { expected, .. } => assert_eq!(expected, 30),
        other => panic!("unexpected {other:?}"),
    }
    assert!(outcome
        .message()
        .unwrap()
        .starts_with("WARNING: tokenizer mismatch (server="));

    let mut long = vec![SampleRequest {
        prompt: Prompt::Text(Arc::from("a b c d e")),
        prompt_len: 3,
        expected_output_len: 1,
        request_id: None,
    }];
    assert_eq!(
        align_to_server(&mut long, &server),
        Alignment::Realigned {
            server: 5,
            expected: 3,
            changed: 1
        }
    );
    assert_eq!(text(&long[0]), "a b c");
    assert_eq!(long[0].prompt_len, 3);

    let down = FakeServer {
        fail: true,
        ..Default::default()
    };
    let outcome = align_to_server(&mut long, &down);
    assert_eq!(outcome, Alignment::Unavailable);
    assert_eq!(
        outcome.message().unwrap(),
        "WARNING: /tokenize unavailable, skipping alignment."
    );
    assert_eq!(align_to_server(&mut long, &server), Alignment::Matched);
}

mod burstgpt;
mod chat;
mod e2e;
mod prefix_repetition;
mod pyrandom;
mod sharegpt;

/// Synthetic multi-turn conversations (`--multi-turn`).
mod conversations {
    use vllm_bench::datasets::conversations::{synthetic, History, SyntheticOptions};
    use vllm_bench::datasets::random::RandomConfig;

    use super::smollm2;

    fn options() -> SyntheticOptions {
        SyntheticOptions {
            conversations: 6,
            turns: (2, 5),
            random: RandomConfig {
                input_len: 40,
                output_len: 8,
                seed: 3,
                ..RandomConfig::default()
            },
            per_turn_input_len: 12,
            prefix_ratios: (0.0, 0.0),
            id_prefix: "bench-".into(),
        }
    }

    #[test]
    fn turns_are_drawn_in_range_with_their_lengths() {
        let tok = smollm2();
        let c = synthetic(&options(), tok).unwrap();
        assert_eq!(c.history, History::Full);
        assert_eq!(c.list.len(), 6);
        assert_eq!(c.list[2].id, "bench-conv-2");
        let counts: Vec<usize> = c.list.iter().map(|c| c.turns.len()).collect();
        assert!(counts.iter().all(|n| (2..=5).contains(n)), "{counts:?}");
        assert!(
            counts.iter().any(|&n| n != counts[0]),
            "counts vary: {counts:?}"
        );
        let special = tok.num_special_tokens_to_add();
        for conv in &c.list {
            assert_eq!(conv.turns[0].prompt_len, 40 - special);
            for t in &conv.turns[1..] {
                assert_eq!(t.prompt_len, 12 - special);
                assert_eq!(tok.count_tokens(&t.text), 12 - special, "{:?}", t.text);
            }
            assert!(conv.turns.iter().all(|t| t.output_len == 8));
        }
        assert_eq!(synthetic(&options(), tok).unwrap(), c, "seeded");
    }

    #[test]
    fn prefix_sharing_shares_exact_token_counts() {
        let tok = smollm2();
        let mut o = options();
        o.prefix_ratios = (0.25, 0.5);
        o.per_turn_input_len = 0;
        let c = synthetic(&o, tok).unwrap();
        assert_eq!(c.history, History::None);
        let special = tok.num_special_tokens_to_add();
        let len = 40 - special;
        let (g, cv) = ((len as f64 * 0.25) as usize, (len as f64 * 0.5) as usize);
        let texts: Vec<Vec<&str>> = c
            .list
            .iter()
            .map(|c| c.turns.iter().map(|t| &*t.text).collect())
            .collect();
        // The longest common prefix of everything, and of one conversation.
        let common =
            |a: &str, b: &str| a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
        let global = texts
            .iter()
            .flatten()
            .fold(texts[0][0].len(), |n, t| n.min(common(texts[0][0], t)));
        assert!(tok.count_tokens(&texts[0][0][..global]) >= g);
        for conv in &texts {
            let within = conv
                .iter()
                .fold(conv[0].len(), |n, t| n.min(common(conv[0], t)));
            assert!(tok.count_tokens(&conv[0][..within]) >= g + cv);
        }
        for conv in &c.list {
            assert!(conv.turns.iter().all(|t| t.prompt_len == len));
        }
        // Later turns of 30 tokens cannot hold the 10 + 20 shared ones and a unique part.
        o.per_turn_input_len = 30 + tok.num_special_tokens_to_add();
        assert!(synthetic(&o, tok)
            .unwrap_err()
            .to_string()
            .contains("no unique part"));
    }
}
