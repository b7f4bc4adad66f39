//! Requests carrying several inputs: `--random-batch-size` for pooling backends and the
//! random-rerank dataset, against the mock (bodies as Python sends them, Python's
//! `total_input_sequences`), and their refusals.

use serde_json::Value;

use crate::e2e::{assert_refused, mock};
use crate::util::{run_against_mock, TempDir};

fn run(extra: &[&str]) -> (Value, Vec<Value>) {
    let server = mock(|c| c.request_log_bodies = true);
    let dir = TempDir::new("batched");
    let mut args = vec!["--result-filename", "r.json", "--random-input-len", "48"];
    args.extend(extra);
    run_against_mock(&server.base_url(), &dir, &args);
    let text = std::fs::read_to_string(dir.path().join("r.json")).unwrap();
    let bodies = server
        .request_log()
        .into_iter()
        .filter_map(|q| q.body)
        // The model requests' bodies (a GET /metrics scrape has an empty one).
        .filter(|b| !b.is_empty())
        .map(|b| serde_json::from_str(&b).unwrap())
        .collect();
    (serde_json::from_str(&text).unwrap(), bodies)
}

#[test]
fn embedding_batches_send_lists_and_count_every_input() {
    let (r, bodies) = run(&[
        "--backend",
        "openai-embeddings",
        "--num-prompts",
        "10",
        "--random-batch-size",
        "4",
    ]);
    assert_eq!(r["completed"], 3, "10 inputs in batches of 4");
    assert_eq!(r["total_input_sequences"], 10);
    let sizes: Vec<usize> = bodies
        .iter()
        .filter_map(|b| b["input"].as_array().map(Vec::len))
        .collect();
    let mut sorted = sizes.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, vec![2, 4, 4], "{bodies:?}");
}

#[test]
fn rerank_requests_are_a_query_and_its_documents() {
    let (r, bodies) = run(&[
        "--backend",
        "vllm-rerank",
        "--dataset-name",
        "random-rerank",
        "--num-prompts",
        "9",
        "--random-batch-size",
        "3",
    ]);
    assert_eq!(
        (r["completed"].as_u64(), r["total_input_sequences"].as_u64()),
        (Some(3), Some(9))
    );
    let queries: Vec<&Value> = bodies.iter().map(|b| &b["query"]).collect();
    assert!(
        queries.iter().all(|q| q.is_string() && *q == queries[0]),
        "one query: {queries:?}"
    );
    for b in &bodies {
        assert_eq!(b["documents"].as_array().map(Vec::len), Some(3), "{b}");
        let keys: Vec<&str> = b.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            ["model", "query", "documents", "truncate_prompt_tokens"]
        );
    }
}

#[test]
fn scoring_with_an_embedding_model_puts_the_query_in_each_batch() {
    let (r, bodies) = run(&[
        "--backend",
        "openai-embeddings",
        "--dataset-name",
        "random-rerank",
        "--no-reranker",
        "--num-prompts",
        "7",
        "--random-batch-size",
        "4",
    ]);
    // 6 documents, 3 per request, each request the query and its 3 documents.
    assert_eq!(
        (r["completed"].as_u64(), r["total_input_sequences"].as_u64()),
        (Some(2), Some(8))
    );
    assert!(bodies
        .iter()
        .all(|b| b["input"].as_array().map(Vec::len) == Some(4)));
}

#[test]
fn batches_need_a_pooling_backend() {
    let base = [
        "--base-url",
        "http://127.0.0.1:9",
        "--model",
        "m",
        "--num-prompts",
        "4",
    ];
    let with = |extra: &[&'static str]| [base.as_slice(), extra].concat();
    assert_refused(
        &with(&["--random-batch-size", "2"]),
        "--random-batch-size 2: batches inputs for pooling backends",
    );
    assert_refused(
        &with(&["--dataset-name", "random-rerank"]),
        "--dataset-name random-rerank: builds scoring requests",
    );
}
