//! The APIs that answer with one JSON document: OpenAI embeddings (and its chat, CLIP and
//! VLM2Vec variants), Infinity's embeddings, vLLM's pooling and rerank. Only the end time
//! and the prompt count matter.

use serde_json::{json, Map, Value};

use super::chat::user_messages;
use super::reader::{ApiFailure, StreamFacts};
use super::{prompt_value, ApiSpec, BodyError, BodyOptions, MmPosition, StreamReader};
use crate::datasets::Prompt;

/// The APIs answering with one JSON document, one object each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolingApi {
    /// `openai-embeddings`: `/v1/embeddings` with `input`.
    Embeddings,
    /// `openai-embeddings-chat`: `/v1/embeddings` with `messages`.
    EmbeddingsChat,
    /// `openai-embeddings-clip`: the chat body; Python empties the text of a request that
    /// carries an image.
    EmbeddingsClip,
    /// `openai-embeddings-vlm2vec`: the chat body; Python rewrites the text of a request
    /// that carries an image, and puts the image first.
    EmbeddingsVlm2vec,
    /// `infinity-embeddings`: Infinity's `/embeddings` with `input` (no
    /// `truncate_prompt_tokens`).
    Infinity,
    /// `infinity-embeddings-clip`: the same for text; a request with images is refused.
    InfinityClip,
    /// `vllm-pooling`: `/pooling`.
    Pooling,
    /// `vllm-rerank`: `/rerank`, the prompt's first text as the query and the rest as the
    /// documents.
    Rerank,
}

impl ApiSpec for PoolingApi {
    fn fields(&self, prompt: Value, _: usize, _: &BodyOptions, body: &mut Map<String, Value>) {
        match self {
            PoolingApi::Embeddings => {
                body.insert("input".into(), prompt);
                body.insert("truncate_prompt_tokens".into(), json!(-1));
            }
            // A text-only request: Python's clip and vlm2vec preprocessing only touch
            // requests with multimodal content, so all three send the embeddings-chat body.
            PoolingApi::EmbeddingsChat
            | PoolingApi::EmbeddingsClip
            | PoolingApi::EmbeddingsVlm2vec => {
                body.insert("messages".into(), user_messages(prompt));
                body.insert("truncate_prompt_tokens".into(), json!(-1));
            }
            PoolingApi::Infinity | PoolingApi::InfinityClip => {
                body.insert("input".into(), prompt);
            }
            PoolingApi::Pooling => {
                body.insert("truncate_prompt_tokens".into(), json!(-1));
                body.insert("input".into(), prompt);
            }
            PoolingApi::Rerank => {
                // Python sends prompt[0] as the query and the rest as documents; a single
                // text prompt is the query and `--extra-body '{"documents": [...]}'`
                // supplies documents.
                match prompt {
                    Value::Array(mut items) if !items.is_empty() => {
                        let query = items.remove(0);
                        body.insert("query".into(), query);
                        body.insert("documents".into(), Value::Array(items));
                    }
                    query => {
                        body.insert("query".into(), query);
                    }
                }
                body.insert("truncate_prompt_tokens".into(), json!(-1));
            }
        }
    }

    fn sends_ignore_eos(&self) -> bool {
        *self != PoolingApi::Rerank
    }

    /// A rerank request's documents (its prompt is the query and the documents).
    fn input_sequences(&self, prompt: &Prompt) -> u32 {
        match (self, prompt) {
            (PoolingApi::Rerank, Prompt::Texts(t)) => t.len().saturating_sub(1) as u32,
            (_, Prompt::Texts(t)) => t.len() as u32,
            _ => 1,
        }
    }

    fn media_layout(
        &self,
        prompt: &Prompt,
        request_id: Option<&str>,
    ) -> Result<Option<(Value, MmPosition)>, BodyError> {
        Ok(match self {
            PoolingApi::EmbeddingsChat => Some((prompt_value(prompt), MmPosition::Last)),
            // _preprocess_clip: an image request's text is empty.
            PoolingApi::EmbeddingsClip => Some((Value::String(String::new()), MmPosition::Last)),
            PoolingApi::EmbeddingsVlm2vec => {
                Some((vlm2vec_text(prompt, request_id), MmPosition::First))
            }
            PoolingApi::InfinityClip => return Err(BodyError::InfinityImages),
            // Python drops the items (and infinity sends the text when there is one).
            PoolingApi::Embeddings
            | PoolingApi::Infinity
            | PoolingApi::Pooling
            | PoolingApi::Rerank => None,
        })
    }

    fn takes_content(&self) -> bool {
        matches!(
            self,
            PoolingApi::EmbeddingsChat | PoolingApi::EmbeddingsClip | PoolingApi::EmbeddingsVlm2vec
        )
    }

    /// One JSON document, read by [`read_body`].
    fn reader(&self) -> Option<&'static dyn StreamReader> {
        None
    }
}

/// _preprocess_vlm2vec: even request numbers (or none) send the image-only prompt.
fn vlm2vec_text(prompt: &Prompt, request_id: Option<&str>) -> Value {
    let text = match request_id.and_then(trailing_number) {
        Some(i) if i % 2 == 1 => {
            let prompt = match prompt {
                Prompt::Text(t) => t.to_string(),
                Prompt::TokenIds(_) | Prompt::Texts(_) | Prompt::Chat(_) => {
                    prompt_value(prompt).to_string()
                }
            };
            format!("Represent the given image with the following question: {prompt}")
        }
        _ => "Represent the given image.".to_string(),
    };
    Value::String(text)
}

/// The number a request id ends with (Python's `_try_extract_request_idx`).
fn trailing_number(id: &str) -> Option<u64> {
    let digits = id.len() - id.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    id[id.len() - digits..].parse().ok()
}

/// Reads a whole body's `usage.prompt_tokens`, if present. A body that is not JSON fails
/// the request, as in Python (`await response.json()` raises there): a truncated or garbled
/// answer is not a success.
pub fn read_body(body: &mut [u8], facts: &mut StreamFacts) -> Result<(), ApiFailure> {
    #[derive(serde::Deserialize)]
    struct Usage {
        prompt_tokens: Option<u64>,
    }
    #[derive(serde::Deserialize)]
    struct Body {
        usage: Option<Usage>,
    }
    let parsed = simd_json::serde::from_slice::<Body>(body).map_err(|e| {
        let msg = format!("response body is not valid JSON: {e}");
        ApiFailure::new("malformed_body", msg.clone(), &msg)
    })?;
    facts.usage_prompt_tokens = parsed.usage.and_then(|u| u.prompt_tokens);
    Ok(())
}
