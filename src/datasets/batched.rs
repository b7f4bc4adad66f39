//! Requests that carry several inputs (Python 0.33's `batchsize`, embeddings and scoring
//! only): `--random-batch-size N` groups N random prompts into one request, and
//! `--dataset-name random-rerank` builds a query and documents (`RandomDatasetForReranking`).
//!
//! Random-rerank, as in Python: one query of `input_len / 2 - 1` tokens (range ratio
//! applied), then `--num-prompts` documents of `input_len - query - 1` tokens, grouped
//! `--random-batch-size` to a request: `[query, doc, doc, ...]`, the rerank backend sending
//! the query and the documents, a prompt length of `(query + 1) × documents + documents'
//! tokens` (the 1 is the separator a reranker adds per pair). With `--no-reranker` (an
//! embedding model scoring pairs) there is no separator, the query is one of the
//! `--num-prompts` inputs and one of each batch, and documents are `input_len` tokens.
//! Texts come from the random dataset's generator (exact lengths, our own randomness).

use std::sync::Arc;

use anyhow::{bail, Result};

use super::random::{self, RandomConfig};
use super::{Prompt, SampleRequest};
use crate::tokenizer::Tokenizer;

/// The text of a generated prompt.
fn text(r: &SampleRequest) -> Result<Arc<str>> {
    match &r.prompt {
        Prompt::Text(t) => Ok(t.clone()),
        _ => {
            bail!("--random-batch-size and random-rerank send text inputs; drop --prompt-token-ids")
        }
    }
}

/// `requests` grouped `size` to a request (the last may hold fewer), with ids
/// `prefix + batch index` and the summed prompt length, as Python's `batchsize` does.
pub fn batch(requests: &[SampleRequest], size: usize, prefix: &str) -> Result<Vec<SampleRequest>> {
    requests
        .chunks(size.max(1))
        .enumerate()
        .map(|(i, group)| {
            let texts = group.iter().map(text).collect::<Result<Arc<[_]>>>()?;
            Ok(SampleRequest {
                prompt: Prompt::Texts(texts),
                prompt_len: group.iter().map(|r| r.prompt_len).sum(),
                expected_output_len: 0,
                request_id: Some(format!("{prefix}{i}")),
            })
        })
        .collect()
}

/// Salt of the query's seed, so the query is not the first document's twin.
const QUERY_SEED_SALT: u64 = 0x5155_4552_5953_4545;

/// `--dataset-name random-rerank` over `base` (its input length, range ratio, seed,
/// `--num-prompts` and id prefix).
pub fn random_rerank(
    base: &RandomConfig,
    batch_size: usize,
    reranker: bool,
    tok: &Tokenizer,
) -> Result<Vec<SampleRequest>> {
    let sep = usize::from(reranker);
    let (mut docs, mut per_request) = (base.num_prompts, batch_size.max(1));
    if !reranker {
        if docs < 2 || per_request < 2 {
            bail!(
                "random-rerank with --no-reranker needs --num-prompts and --random-batch-size \
                 of at least 2 (the query is one of each batch)"
            );
        }
        docs -= 1;
        per_request -= 1;
    }
    let query_len = if reranker {
        (base.input_len / 2).saturating_sub(sep)
    } else {
        base.input_len
    };
    let one = |num_prompts, input_len, seed| RandomConfig {
        num_prompts,
        input_len,
        output_len: 1,
        prefix_len: 0,
        seed,
        prompt_token_ids: false,
        max_model_len: None,
        request_id_prefix: None,
        ..base.clone()
    };
    let query = random::sample(&one(1, query_len, base.seed ^ QUERY_SEED_SALT), tok)?.requests;
    let query = query
        .first()
        .ok_or_else(|| anyhow::anyhow!("no query generated"))?;
    let doc_len = if reranker {
        base.input_len.saturating_sub(query.prompt_len + sep)
    } else {
        base.input_len
    };
    if doc_len == 0 {
        bail!(
            "--random-input-len {} leaves no room for documents after a {}-token query; \
             increase it",
            base.input_len,
            query.prompt_len
        );
    }
    let documents = random::sample(&one(docs, doc_len, base.seed), tok)?.requests;
    let query_text = text(query)?;
    let prefix = base.request_id_prefix.clone().unwrap_or_default();
    documents
        .chunks(per_request)
        .enumerate()
        .map(|(i, group)| {
            let mut texts = Vec::with_capacity(group.len() + 1);
            texts.push(query_text.clone());
            for d in group {
                texts.push(text(d)?);
            }
            let query_part = if reranker {
                (query.prompt_len + sep) * group.len()
            } else {
                query.prompt_len
            };
            Ok(SampleRequest {
                prompt: Prompt::Texts(texts.into()),
                prompt_len: query_part + group.iter().map(|d| d.prompt_len).sum::<usize>(),
                expected_output_len: 0,
                request_id: Some(format!("{prefix}{i}")),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text_request(t: &str, len: usize) -> SampleRequest {
        SampleRequest {
            prompt: Prompt::Text(t.into()),
            prompt_len: len,
            expected_output_len: 8,
            request_id: None,
        }
    }

    #[test]
    fn batches_sum_their_lengths_and_take_python_ids() {
        let r: Vec<SampleRequest> = (0..5).map(|i| text_request("x", i + 1)).collect();
        let b = batch(&r, 2, "p-").unwrap();
        assert_eq!(b.len(), 3);
        assert_eq!(
            b.iter().map(|x| x.prompt_len).collect::<Vec<_>>(),
            vec![3, 7, 5]
        );
        assert_eq!(b[2].request_id.as_deref(), Some("p-2"));
        let Prompt::Texts(t) = &b[0].prompt else {
            panic!("texts")
        };
        assert_eq!(t.len(), 2);
        let ids = SampleRequest {
            prompt: Prompt::TokenIds(Arc::from(vec![1u32])),
            ..text_request("", 1)
        };
        assert!(batch(&[ids], 2, "").is_err());
    }
}
