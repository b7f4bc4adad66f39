//! OpenAI completions (`vllm`, `openai`: `/v1/completions`): Python's
//! `async_request_openai_completions` body, streamed as OpenAI chunks with the text in
//! `choices[0].text`.

use serde_json::{json, Map, Value};

use super::openai_chunk::{ChunkReader, ChunkShape};
use super::{ApiSpec, BodyOptions, StreamReader};

/// The completions API.
pub struct Completions;

impl ApiSpec for Completions {
    fn fields(
        &self,
        prompt: Value,
        output_len: usize,
        opts: &BodyOptions,
        body: &mut Map<String, Value>,
    ) {
        body.insert("prompt".into(), prompt);
        body.insert("repetition_penalty".into(), json!(1.0));
        body.insert("max_tokens".into(), json!(output_len));
        body.insert("logprobs".into(), json!(opts.logprobs));
        body.insert("stream".into(), json!(true));
        body.insert("stream_options".into(), json!({ "include_usage": true }));
    }

    fn reader(&self) -> Option<&'static dyn StreamReader> {
        Some(&ChunkReader(ChunkShape::Completions))
    }
}
