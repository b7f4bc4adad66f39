//! OpenAI chat completions (`openai-chat`: `/v1/chat/completions`): Python's
//! `async_request_openai_chat_completions` body (one user message with list content, the
//! request's images after its text), streamed as OpenAI chunks with the text in
//! `choices[0].delta.content`. A conversation's bodies are built by
//! [`super::conversation::ChatBody`] from the same fields.

use serde_json::{json, Map, Value};

use super::openai_chunk::{ChunkReader, ChunkShape};
use super::{prompt_value, ApiSpec, BodyError, BodyOptions, MmPosition, StreamReader};
use crate::datasets::Prompt;

/// The chat completions API.
pub struct Chat;

/// Chat `messages` as Python builds them: one user message with list content (also the
/// Messages API's and the embeddings-chat APIs' messages).
pub(super) fn user_messages(prompt: Value) -> Value {
    json!([{ "role": "user", "content": [{ "type": "text", "text": prompt }] }])
}

impl ApiSpec for Chat {
    fn fields(
        &self,
        prompt: Value,
        output_len: usize,
        _: &BodyOptions,
        body: &mut Map<String, Value>,
    ) {
        body.insert("messages".into(), user_messages(prompt));
        body.insert("max_completion_tokens".into(), json!(output_len));
        body.insert("stream".into(), json!(true));
        body.insert("stream_options".into(), json!({ "include_usage": true }));
    }

    fn media_layout(
        &self,
        prompt: &Prompt,
        _: Option<&str>,
    ) -> Result<Option<(Value, MmPosition)>, BodyError> {
        Ok(Some((prompt_value(prompt), MmPosition::Last)))
    }

    fn takes_content(&self) -> bool {
        true
    }

    fn reader(&self) -> Option<&'static dyn StreamReader> {
        Some(&ChunkReader(ChunkShape::Chat))
    }
}
