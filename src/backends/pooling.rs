//! The APIs that answer with one JSON document: OpenAI embeddings (and its chat, CLIP and
//! VLM2Vec variants), Infinity's embeddings, vLLM's pooling and rerank. Only the end time
//! and the prompt count matter.

use super::reader::{ApiFailure, StreamFacts};

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
