//! The APIs we speak (completions, chat, responses, Anthropic messages, embeddings, pooling,
//! rerank, audio): one object per API, each in its own file, that builds the API's request
//! body exactly as Python `vllm bench serve` 0.33 sends it and reads its responses
//! ([`ApiSpec`]); and the registry that lists them ([`Api::for_backend`], [`Api::spec`]).
//! Bodies are built once, before the clock starts; a run's reader is picked from the
//! registry before the clock too ([`ResponseMode`]), so the engine never names an API.
//!
//! The body assembly every API shares lives here: the fields in Python's order then
//! `ignore_eos` and `--extra-body` ([`build_body`]), a body around shared multimodal items
//! ([`build_body_parts`]) or around a prompt given as shared fragments ([`BodyTemplate`]);
//! a conversation's chat bodies are [`conversation::ChatBody`], an audio upload's form
//! [`audio::audio_body`].
//!
//! The backend names and the facts about them (default endpoint, pooling or not) live once,
//! on [`crate::types::Backend`]; this module only maps them to an [`Api`].

pub mod anthropic;
pub mod audio;
pub mod chat;
pub mod chunk_template;
pub mod completions;
pub mod conversation;
pub mod openai_chunk;
pub mod pooling;
pub mod reader;
pub mod responses;
pub mod tape;

use bytes::Bytes;
use serde_json::{json, Map, Value};

use crate::datasets::media::{ChatMedia, ContentPart};
use crate::datasets::Prompt;
use crate::types::Backend;
use pooling::PoolingApi;
pub use reader::{ApiFailure, FinishReason, Scratch, StreamFacts, StreamReader, Token};

/// One API: the fields of its request body and the reading of its responses. Each API is
/// one object in its own file, listed once in the registry ([`Api::spec`]); the defaults are
/// what most APIs do.
pub trait ApiSpec: Sync {
    /// The body's fields after `model`, in Python's order, with `prompt` as the prompt's
    /// JSON value (`ignore_eos` and `--extra-body` follow, added by the assembly).
    fn fields(
        &self,
        prompt: Value,
        output_len: usize,
        opts: &BodyOptions,
        body: &mut Map<String, Value>,
    );

    /// Whether the body carries `ignore_eos` when asked (Python's rerank body does not).
    fn sends_ignore_eos(&self) -> bool {
        true
    }

    /// Inputs a request carries, as Python counts them for `total_input_sequences`: the
    /// texts of a batched request, else 1.
    fn input_sequences(&self, prompt: &Prompt) -> u32 {
        match prompt {
            Prompt::Texts(t) => t.len() as u32,
            _ => 1,
        }
    }

    /// The text part and the item position of a request with multimodal items, as Python's
    /// request functions arrange them; `None` when the API does not send the items (Python
    /// drops them).
    fn media_layout(
        &self,
        _prompt: &Prompt,
        _request_id: Option<&str>,
    ) -> Result<Option<(Value, MmPosition)>, BodyError> {
        Ok(None)
    }

    /// Whether a chat content list (custom_image's interleaved parts) can be the whole
    /// prompt: the chat-like APIs.
    fn takes_content(&self) -> bool {
        false
    }

    /// One chat content part as this API's content block, as shared byte strings.
    fn content_parts(&self, item: &ContentPart) -> Result<Vec<Bytes>, BodyError> {
        Ok(item.parts.clone())
    }

    /// A conversation body's output-token limit field.
    fn output_limit(&self) -> &'static str {
        "max_completion_tokens"
    }

    /// Whether a conversation body may carry `min_tokens`.
    fn takes_min_tokens(&self) -> bool {
        true
    }

    /// The reader of its streamed responses; `None` for an API answering with one JSON
    /// document ([`pooling::read_body`]).
    fn reader(&self) -> Option<&'static dyn StreamReader>;
}

/// How a response body is read: streamed events, read by the API's reader, or one JSON
/// document. Picked from the registry before the clock; the engine's exchange follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseMode {
    /// SSE events, each read by the API's [`StreamReader`].
    Stream(Api),
    /// One JSON document (embeddings, pooling, rerank): only the end time and the prompt
    /// count matter.
    Whole,
}

impl ResponseMode {
    /// The reader of a streamed API's events; `None` for an API that answers with one JSON
    /// document (read by [`ResponseMode::read_whole`]).
    pub fn stream_reader(self) -> Option<&'static dyn StreamReader> {
        match self {
            ResponseMode::Stream(api) => api.spec().reader(),
            ResponseMode::Whole => None,
        }
    }

    /// Reads a whole (non-streamed) response body into `facts`.
    pub fn read_whole(self, body: &mut [u8], facts: &mut StreamFacts) -> Result<(), ApiFailure> {
        pooling::read_body(body, facts)
    }
}

/// The APIs we speak. Which `--backend` names use which API is [`Api::for_backend`]; every
/// other fact about a backend name (endpoint, pooling or not) is on [`Backend`], the one list of backend names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `vllm` / `openai`: `/v1/completions`, streamed.
    Completions,
    /// `openai-chat`: `/v1/chat/completions`, streamed.
    Chat,
    /// `openai-responses`: `/v1/responses`, streamed as typed events.
    Responses,
    /// `anthropic-messages`: Anthropic's `/v1/messages`, streamed as typed events.
    AnthropicMessages,
    /// `openai-embeddings`: `/v1/embeddings` with `input`.
    Embeddings,
    /// `openai-embeddings-chat`: `/v1/embeddings` with `messages`.
    EmbeddingsChat,
    /// `openai-embeddings-clip`: `/v1/embeddings` with `messages` (Python empties the text
    /// of a request that carries an image).
    EmbeddingsClip,
    /// `openai-embeddings-vlm2vec`: `/v1/embeddings` with `messages` (Python rewrites the
    /// text of a request that carries an image, and puts the image first).
    EmbeddingsVlm2vec,
    /// `openai-audio`: `/v1/audio/transcriptions`, a multipart form with the audio file,
    /// streamed (see [`audio`]).
    Audio,
    /// `infinity-embeddings`: Infinity's `/embeddings` with `input`.
    Infinity,
    /// `infinity-embeddings-clip`: the same for text; Python's client fails a request that
    /// carries a list of images (it asserts one image dict), so those are refused.
    InfinityClip,
    /// `vllm-pooling`: `/pooling`.
    Pooling,
    /// `vllm-rerank`: `/rerank`.
    Rerank,
}

impl Api {
    /// The API a `--backend` speaks; `None` for the backends not implemented yet.
    pub fn for_backend(backend: Backend) -> Option<Api> {
        match backend {
            Backend::Vllm | Backend::Openai => Some(Api::Completions),
            Backend::OpenaiChat => Some(Api::Chat),
            Backend::OpenaiResponses => Some(Api::Responses),
            Backend::AnthropicMessages => Some(Api::AnthropicMessages),
            Backend::OpenaiEmbeddings => Some(Api::Embeddings),
            Backend::OpenaiEmbeddingsChat => Some(Api::EmbeddingsChat),
            Backend::OpenaiEmbeddingsClip => Some(Api::EmbeddingsClip),
            Backend::OpenaiEmbeddingsVlm2vec => Some(Api::EmbeddingsVlm2vec),
            Backend::InfinityEmbeddings => Some(Api::Infinity),
            Backend::InfinityEmbeddingsClip => Some(Api::InfinityClip),
            Backend::VllmPooling => Some(Api::Pooling),
            Backend::VllmRerank => Some(Api::Rerank),
            Backend::OpenaiAudio => Some(Api::Audio),
        }
    }

    /// The registry: every API's object. Adding an API is its file, its variant here and
    /// its line in [`Api::for_backend`].
    pub fn spec(self) -> &'static dyn ApiSpec {
        match self {
            Api::Completions => &completions::Completions,
            Api::Chat => &chat::Chat,
            Api::Responses => &responses::Responses,
            Api::AnthropicMessages => &anthropic::Messages,
            Api::Audio => &audio::Transcriptions,
            Api::Embeddings => &PoolingApi::Embeddings,
            Api::EmbeddingsChat => &PoolingApi::EmbeddingsChat,
            Api::EmbeddingsClip => &PoolingApi::EmbeddingsClip,
            Api::EmbeddingsVlm2vec => &PoolingApi::EmbeddingsVlm2vec,
            Api::Infinity => &PoolingApi::Infinity,
            Api::InfinityClip => &PoolingApi::InfinityClip,
            Api::Pooling => &PoolingApi::Pooling,
            Api::Rerank => &PoolingApi::Rerank,
        }
    }

    /// Generation APIs stream tokens; the others answer with one JSON document.
    pub fn is_generation(self) -> bool {
        self.spec().reader().is_some()
    }

    /// How the engine reads this API's responses.
    pub fn response_mode(self) -> ResponseMode {
        match self.is_generation() {
            true => ResponseMode::Stream(self),
            false => ResponseMode::Whole,
        }
    }
}

/// Per-run request options (everything but the prompt).
#[derive(Debug, Clone, Default)]
pub struct BodyOptions {
    /// The `model` field (`--served-model-name`, else `--model`; LoRA rewrites it per request).
    pub model: String,
    pub logprobs: Option<i64>,
    pub ignore_eos: bool,
    /// Sampling parameters merged with `--extra-body` (extra body wins), Python's
    /// `{**sampling_params, **extra_body}`.
    pub extra_body: Map<String, Value>,
}

fn prompt_value(prompt: &Prompt) -> Value {
    match prompt {
        Prompt::Text(t) => Value::String(t.to_string()),
        Prompt::TokenIds(ids) => Value::Array(ids.iter().map(|&i| Value::from(i)).collect()),
        Prompt::Texts(texts) => {
            Value::Array(texts.iter().map(|t| Value::String(t.to_string())).collect())
        }
        Prompt::Chat(c) => c.messages.clone(),
    }
}

/// Inputs a request carries, as Python counts them for `total_input_sequences` (a rerank
/// request's documents, a batched request's texts, else 1).
pub fn input_sequences(api: Api, prompt: &Prompt) -> u32 {
    api.spec().input_sequences(prompt)
}

/// The body's fields in Python's order, with `prompt` as the prompt's JSON value: `model`,
/// the API's own fields, `ignore_eos`, then `--extra-body` (Python's
/// `_update_payload_common`). Every body builder serializes it.
fn body_fields(
    api: Api,
    prompt: Value,
    output_len: usize,
    opts: &BodyOptions,
) -> Map<String, Value> {
    let spec = api.spec();
    let mut body = Map::new();
    body.insert("model".into(), Value::String(opts.model.clone()));
    spec.fields(prompt, output_len, opts, &mut body);
    if opts.ignore_eos && spec.sends_ignore_eos() {
        body.insert("ignore_eos".into(), json!(true));
    }
    for (k, v) in &opts.extra_body {
        body.insert(k.clone(), v.clone());
    }
    body
}

/// Why a request body cannot be built from the run's options. Built before the clock, so
/// the run stops with the message; it names the option at fault.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("cannot serialize a request body: {0}")]
    Serialize(serde_json::Error),
    #[error(
        "--extra-body replaces the prompt field, which a trace replay builds itself; remove it \
         from --extra-body"
    )]
    ExtraBodyPrompt,
    #[error(
        "--extra-body sets messages, which a multi-turn conversation builds itself; remove it \
         from --extra-body"
    )]
    ExtraBodyMessages,
    #[error(
        "--backend infinity-embeddings-clip cannot send a list of images: Python's client \
         asserts a single image and fails every such request; use infinity-embeddings or \
         openai-embeddings-clip"
    )]
    InfinityImages,
    #[error(
        "custom_image rows with \"content\" need a chat backend (openai-chat, \
         anthropic-messages or an openai-embeddings-chat variant): Python sends the part list \
         as the prompt, which only chat servers read"
    )]
    ContentNeedsChat,
    #[error(
        "--backend anthropic-messages sends text and images only: a request carries a \
         {0} part, which the Messages API has no content block for; use openai-chat"
    )]
    AnthropicMedia(String),
}

fn serialize(body: &impl serde::Serialize) -> Result<Vec<u8>, BodyError> {
    serde_json::to_vec(body).map_err(BodyError::Serialize)
}

/// Builds the JSON body of one request (`max_tokens` = the request's output length).
pub fn build_body(
    api: Api,
    prompt: &Prompt,
    output_len: usize,
    opts: &BodyOptions,
) -> Result<Vec<u8>, BodyError> {
    let mut body = body_fields(api, prompt_value(prompt), output_len, opts);
    if let Prompt::Chat(c) = prompt {
        // Python: the request's own messages, then `{**extra_body, **request_overrides}`.
        if body.contains_key("messages") && !opts.extra_body.contains_key("messages") {
            body.insert("messages".into(), c.messages.clone());
        }
        for (k, v) in &c.overrides {
            body.insert(k.clone(), v.clone());
        }
    }
    serialize(&body)
}

/// Stands for the multimodal items in a chat content list while the body is serialized.
const MM_SLOT: &str = "\0vllm-bench-mm\0";

/// Where the multimodal items go in a chat `content` list (Python's `mm_position`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum MmPosition {
    First,
    Last,
    /// The items are the whole content.
    Only,
}

/// The body of a request with multimodal content `mm` (chat content parts, each a JSON
/// object as shared byte strings), as parts: the items are never copied into the body.
/// Without items, or for an API that does not send them, it is [`build_body`]'s body.
pub fn build_body_parts(
    api: Api,
    prompt: &Prompt,
    output_len: usize,
    opts: &BodyOptions,
    media: &ChatMedia,
    request_id: Option<&str>,
) -> Result<Vec<Bytes>, BodyError> {
    let mm = &media.parts[..];
    let spec = api.spec();
    let layout = match (mm.is_empty(), media.replaces_text) {
        (true, _) => None,
        // Python's prompt is the part list: chat-like APIs send it as the content.
        (false, true) if spec.takes_content() => Some((Value::Null, MmPosition::Only)),
        (false, true) => return Err(BodyError::ContentNeedsChat),
        (false, false) => spec.media_layout(prompt, request_id)?,
    };
    let Some((text, position)) = layout.filter(|_| !opts.extra_body.contains_key("messages"))
    else {
        return Ok(vec![Bytes::from(build_body(
            api, prompt, output_len, opts,
        )?)]);
    };
    let text = json!({ "type": "text", "text": text });
    let content = match position {
        MmPosition::First => json!([MM_SLOT, text]),
        MmPosition::Last => json!([text, MM_SLOT]),
        MmPosition::Only => json!([MM_SLOT]),
    };
    let mut fields = body_fields(api, prompt_value(prompt), output_len, opts);
    fields.insert(
        "messages".into(),
        json!([{ "role": "user", "content": content }]),
    );
    let body = Bytes::from(serialize(&fields)?);
    let slot = serialize(&json!(MM_SLOT))?;
    let at = memchr::memmem::find(&body, &slot).ok_or(BodyError::ExtraBodyMessages)?;
    let mut out = Vec::with_capacity(mm.len() * 5 + 2);
    out.push(body.slice(..at));
    for (i, item) in mm.iter().enumerate() {
        if i > 0 {
            out.push(Bytes::from_static(b","));
        }
        out.extend(spec.content_parts(item)?);
    }
    out.push(body.slice(at + slot.len()..));
    Ok(out)
}

/// Stands for the prompt while the rest of a fragment-built body is serialized. The NUL
/// bytes serialize as `\u0000`, which no model name or option serializes to by accident.
const PROMPT_SLOT: &str = "\0vllm-bench-prompt\0";

/// A body whose prompt is given as pre-serialized JSON parts (shared [`Bytes`] fragments
/// whose concatenation is one JSON value: a token-id array or a string literal), built
/// around them without joining them: the body is `[head, prompt parts…, tail]`.
#[derive(Debug, Clone)]
pub struct BodyTemplate {
    head: Bytes,
    tail: Bytes,
}

impl BodyTemplate {
    /// The body of every request of a run but its prompt and output length (computed once
    /// per distinct output length by the caller, or once per request: it is cheap).
    pub fn new(api: Api, output_len: usize, opts: &BodyOptions) -> Result<Self, BodyError> {
        let body = serialize(&body_fields(
            api,
            Value::String(PROMPT_SLOT.into()),
            output_len,
            opts,
        ))?;
        let slot = serialize(&Value::String(PROMPT_SLOT.into()))?;
        let at = memchr::memmem::find(&body, &slot).ok_or(BodyError::ExtraBodyPrompt)?;
        let body = Bytes::from(body);
        Ok(Self {
            head: body.slice(..at),
            tail: body.slice(at + slot.len()..),
        })
    }

    /// The body's parts around `prompt_parts`.
    pub fn parts(&self, prompt_parts: Vec<Bytes>) -> Vec<Bytes> {
        let mut out = Vec::with_capacity(prompt_parts.len() + 2);
        out.push(self.head.clone());
        out.extend(prompt_parts);
        out.push(self.tail.clone());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasets::media::ContentPart;
    use std::sync::Arc;

    #[test]
    fn several_inputs_are_python_lists_and_a_rerank_query_with_documents() {
        let texts = Prompt::Texts(Arc::from(vec![
            Arc::from("q"),
            Arc::from("d1"),
            Arc::from("d2"),
        ]));
        let plain = BodyOptions {
            extra_body: Map::new(),
            ..opts()
        };
        let rerank: Value =
            serde_json::from_slice(&build_body(Api::Rerank, &texts, 0, &plain).unwrap()).unwrap();
        assert_eq!(rerank["query"], "q");
        assert_eq!(rerank["documents"], json!(["d1", "d2"]));
        let emb: Value =
            serde_json::from_slice(&build_body(Api::Embeddings, &texts, 0, &plain).unwrap())
                .unwrap();
        assert_eq!(emb["input"], json!(["q", "d1", "d2"]));
        assert_eq!(input_sequences(Api::Rerank, &texts), 2);
        assert_eq!(input_sequences(Api::Embeddings, &texts), 3);
        assert_eq!(
            input_sequences(Api::Embeddings, &Prompt::Text("x".into())),
            1
        );
    }

    fn opts() -> BodyOptions {
        let mut extra = Map::new();
        extra.insert("temperature".into(), json!(0.0));
        BodyOptions {
            model: "m".into(),
            logprobs: None,
            ignore_eos: true,
            extra_body: extra,
        }
    }

    fn parse(b: &[u8]) -> Value {
        serde_json::from_slice(b).unwrap()
    }

    #[test]
    fn completions_body_matches_python_fields_and_order() {
        let b = build_body(Api::Completions, &Prompt::Text(Arc::from("hi")), 7, &opts()).unwrap();
        let text = String::from_utf8(b.clone()).unwrap();
        assert!(text.starts_with(r#"{"model":"m","prompt":"hi","repetition_penalty":1.0,"max_tokens":7,"logprobs":null,"stream":true,"stream_options":{"include_usage":true},"ignore_eos":true,"temperature":0.0}"#), "{text}");
        let ids = build_body(
            Api::Completions,
            &Prompt::TokenIds(Arc::from(vec![1u32, 2])),
            1,
            &opts(),
        )
        .unwrap();
        assert_eq!(parse(&ids)["prompt"], json!([1, 2]));
    }

    #[test]
    fn chat_uses_list_content_and_max_completion_tokens() {
        let v = parse(&build_body(Api::Chat, &Prompt::Text(Arc::from("q")), 3, &opts()).unwrap());
        assert_eq!(
            v["messages"][0]["content"][0],
            json!({"type": "text", "text": "q"})
        );
        assert_eq!(v["max_completion_tokens"], json!(3));
        assert!(v.get("max_tokens").is_none());
    }

    #[test]
    fn responses_body_matches_python_fields_and_order() {
        // async_request_openai_responses: model, input, max_output_tokens, stream, store,
        // then ignore_eos and the extra body (`_update_payload_common`).
        let b = build_body(Api::Responses, &Prompt::Text(Arc::from("hi")), 9, &opts()).unwrap();
        assert_eq!(
            String::from_utf8(b).unwrap(),
            r#"{"model":"m","input":"hi","max_output_tokens":9,"stream":true,"store":false,"ignore_eos":true,"temperature":0.0}"#
        );
        assert_eq!(
            Api::Responses.response_mode(),
            ResponseMode::Stream(Api::Responses)
        );
    }

    #[test]
    fn anthropic_body_has_the_messages_api_fields_in_order() {
        // model, max_tokens, messages, stream; then ignore_eos (only when asked) and the
        // extra body, where a `system` prompt goes.
        let mut o = opts();
        o.extra_body.insert("system".into(), json!("be brief"));
        let b = build_body(
            Api::AnthropicMessages,
            &Prompt::Text(Arc::from("hi")),
            9,
            &o,
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(b).unwrap(),
            r#"{"model":"m","max_tokens":9,"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"stream":true,"ignore_eos":true,"temperature":0.0,"system":"be brief"}"#
        );
        assert_eq!(
            Api::for_backend(Backend::AnthropicMessages),
            Some(Api::AnthropicMessages)
        );
        assert_eq!(
            Api::AnthropicMessages.response_mode(),
            ResponseMode::Stream(Api::AnthropicMessages)
        );
        assert_eq!(
            Backend::AnthropicMessages.default_endpoint(),
            "/v1/messages"
        );
    }

    #[test]
    fn anthropic_images_are_base64_or_url_image_blocks_and_videos_are_refused() {
        // random-mm's shared parts: the data is referenced, not copied.
        let mm = ChatMedia::beside_text(vec![image("AAAA")]);
        let parts = build_body_parts(
            Api::AnthropicMessages,
            &Prompt::Text(Arc::from("q")),
            3,
            &opts(),
            &mm,
            None,
        )
        .unwrap();
        assert!(parts
            .iter()
            .any(|p| p.as_ptr() == mm.parts[0].parts[1].as_ptr()));
        let v: Value = serde_json::from_slice(&parts.concat()).unwrap();
        assert_eq!(
            v["messages"][0]["content"],
            json!([
                {"type": "text", "text": "q"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "AAAA"}}
            ])
        );
        assert_eq!(v["max_tokens"], json!(3));
        // custom_image / sharegpt parts (one serialized value each), interleaved content.
        let content = ChatMedia {
            parts: vec![
                ContentPart::from_json(&json!({"type": "text", "text": "Compare "})),
                ContentPart::from_json(
                    &json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}}),
                ),
                ContentPart::from_json(
                    &json!({"type": "image_url", "image_url": {"url": "https://h/b.jpg"}}),
                ),
            ],
            replaces_text: true,
        };
        let parts = build_body_parts(
            Api::AnthropicMessages,
            &Prompt::Text(Arc::from("Compare ")),
            2,
            &opts(),
            &content,
            None,
        )
        .unwrap();
        let v: Value = serde_json::from_slice(&parts.concat()).unwrap();
        assert_eq!(
            v["messages"][0]["content"],
            json!([
                {"type": "text", "text": "Compare "},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}},
                {"type": "image", "source": {"type": "url", "url": "https://h/b.jpg"}}
            ])
        );
        let video = ChatMedia::beside_text(vec![ContentPart::from_json(
            &json!({"type": "video_url", "video_url": {"url": "file://v.mp4"}}),
        )]);
        let err = build_body_parts(
            Api::AnthropicMessages,
            &Prompt::Text(Arc::from("q")),
            2,
            &opts(),
            &video,
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("video_url") && err.contains("openai-chat"),
            "{err}"
        );
    }

    #[test]
    fn embedding_variant_bodies_match_python() {
        // async_request_openai_embeddings_chat (clip and vlm2vec without an image are it):
        // model, messages, truncate_prompt_tokens, then ignore_eos and the extra body.
        let chat = r#"{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"truncate_prompt_tokens":-1,"ignore_eos":true,"temperature":0.0}"#;
        for api in [
            Api::EmbeddingsChat,
            Api::EmbeddingsClip,
            Api::EmbeddingsVlm2vec,
        ] {
            let b = build_body(api, &Prompt::Text(Arc::from("hi")), 1, &opts()).unwrap();
            assert_eq!(String::from_utf8(b).unwrap(), chat, "{api:?}");
            assert_eq!(api.response_mode(), ResponseMode::Whole);
        }
        // async_request_infinity_embeddings: model, input, then the common fields.
        let b = build_body(Api::Infinity, &Prompt::Text(Arc::from("hi")), 1, &opts()).unwrap();
        assert_eq!(
            String::from_utf8(b).unwrap(),
            r#"{"model":"m","input":"hi","ignore_eos":true,"temperature":0.0}"#
        );
    }

    fn image(tag: &'static str) -> ContentPart {
        ContentPart {
            parts: vec![
                Bytes::from_static(
                    br#"{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,"#,
                ),
                Bytes::from_static(tag.as_bytes()),
                Bytes::from_static(br#""}}"#),
            ],
        }
    }

    fn mm_body(api: Api, id: Option<&str>) -> Value {
        let mm = ChatMedia::beside_text(vec![image("AAAA"), image("BBBB")]);
        let parts =
            build_body_parts(api, &Prompt::Text(Arc::from("q")), 3, &opts(), &mm, id).unwrap();
        serde_json::from_slice(&parts.concat()).unwrap()
    }

    fn img(tag: &str) -> Value {
        json!({"type": "image_url", "image_url": {"url": format!("data:image/jpeg;base64,{tag}")}})
    }

    #[test]
    fn multimodal_content_follows_python_per_backend() {
        // openai-chat / embeddings-chat: text first, images after (_get_chat_content "last").
        let chat = mm_body(Api::Chat, Some("r-3"));
        assert_eq!(
            chat["messages"],
            json!([{"role": "user", "content": [{"type": "text", "text": "q"}, img("AAAA"), img("BBBB")]}])
        );
        assert_eq!(chat["max_completion_tokens"], json!(3));
        // clip: the text of an image request is empty.
        let clip = mm_body(Api::EmbeddingsClip, None);
        assert_eq!(
            clip["messages"][0]["content"][0],
            json!({"type": "text", "text": ""})
        );
        // vlm2vec: images first; even (or no) request number → image-only prompt.
        let even = mm_body(Api::EmbeddingsVlm2vec, Some("bench-12"));
        assert_eq!(even["messages"][0]["content"][0], img("AAAA"));
        assert_eq!(
            even["messages"][0]["content"][2],
            json!({"type": "text", "text": "Represent the given image."})
        );
        let odd = mm_body(Api::EmbeddingsVlm2vec, Some("bench-7"));
        assert_eq!(
            odd["messages"][0]["content"][2]["text"],
            "Represent the given image with the following question: q"
        );
        // Completions drop the items, as Python's payload has no place for them.
        let plain = mm_body(Api::Completions, None);
        assert_eq!(plain["prompt"], "q");
        let err = build_body_parts(
            Api::InfinityClip,
            &Prompt::Text(Arc::from("q")),
            1,
            &opts(),
            &ChatMedia::beside_text(vec![image("A")]),
            None,
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("infinity-embeddings-clip"),
            "{err}"
        );
        // custom_image's interleaved content is the whole content list.
        let content = ChatMedia {
            parts: vec![image("A"), image("B")],
            replaces_text: true,
        };
        let parts = build_body_parts(
            Api::Chat,
            &Prompt::Text(Arc::from("ab")),
            2,
            &opts(),
            &content,
            None,
        )
        .unwrap();
        let v: Value = serde_json::from_slice(&parts.concat()).unwrap();
        assert_eq!(v["messages"][0]["content"], json!([img("A"), img("B")]));
        let err = build_body_parts(
            Api::Completions,
            &Prompt::Text(Arc::from("ab")),
            2,
            &opts(),
            &content,
            None,
        )
        .unwrap_err();
        assert!(err.to_string().contains("chat backend"), "{err}");
    }

    #[test]
    fn multimodal_items_are_shared_not_copied() {
        let mm = ChatMedia::beside_text(vec![image("AAAA")]);
        let parts = build_body_parts(
            Api::Chat,
            &Prompt::Text(Arc::from("q")),
            3,
            &opts(),
            &mm,
            None,
        )
        .unwrap();
        assert!(parts
            .iter()
            .any(|p| p.as_ptr() == mm.parts[0].parts[1].as_ptr()));
    }

    #[test]
    fn fragment_bodies_equal_whole_bodies() {
        let ids = Prompt::TokenIds(Arc::from(vec![7u32, 8, 9]));
        let parts: Vec<Bytes> = ["[", "7,8", ",9", "]"]
            .iter()
            .map(|s| Bytes::from_static(s.as_bytes()))
            .collect();
        for api in [
            Api::Completions,
            Api::Chat,
            Api::Responses,
            Api::AnthropicMessages,
            Api::Embeddings,
        ] {
            let t = BodyTemplate::new(api, 5, &opts()).unwrap();
            let joined: Vec<u8> = t.parts(parts.clone()).concat();
            assert_eq!(
                joined,
                build_body(api, &ids, 5, &opts()).unwrap(),
                "{api:?}"
            );
        }
        let text = Prompt::Text(Arc::from("a \"b\""));
        let quoted: Vec<Bytes> = [r#"""#, r#"a "#, r#"\"b\""#, r#"""#]
            .iter()
            .map(|s| Bytes::from_static(s.as_bytes()))
            .collect();
        let t = BodyTemplate::new(Api::Chat, 2, &opts()).unwrap();
        assert_eq!(
            t.parts(quoted).concat(),
            build_body(Api::Chat, &text, 2, &opts()).unwrap()
        );
    }

    #[test]
    fn fragment_body_refuses_an_extra_body_prompt() {
        let mut o = opts();
        o.extra_body.insert("prompt".into(), json!("x"));
        let e = BodyTemplate::new(Api::Completions, 1, &o)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--extra-body"), "{e}");
    }

    #[test]
    fn extra_body_overrides_defaults() {
        let mut o = opts();
        o.extra_body.insert("repetition_penalty".into(), json!(1.2));
        let v = parse(&build_body(Api::Completions, &Prompt::Text(Arc::from("x")), 1, &o).unwrap());
        assert_eq!(v["repetition_penalty"], json!(1.2));
    }

    #[test]
    fn registry_and_endpoints() {
        use clap::ValueEnum;
        assert_eq!(Api::for_backend(Backend::Vllm), Some(Api::Completions));
        assert_eq!(
            Backend::from_str("openai-chat", false)
                .unwrap()
                .default_endpoint(),
            "/v1/chat/completions"
        );
        assert_eq!(
            Backend::from_str("vllm-pooling", false)
                .unwrap()
                .default_endpoint(),
            "/pooling"
        );
        assert!(Backend::from_str("tgi", false).is_err());
        assert_eq!(Api::for_backend(Backend::OpenaiAudio), Some(Api::Audio));
        assert_eq!(
            Api::for_backend(Backend::InfinityEmbeddingsClip),
            Some(Api::InfinityClip)
        );
        assert!(!Api::Embeddings.is_generation());
        assert!(Api::Chat.is_generation());
    }

    #[test]
    fn every_backend_the_config_accepts_has_an_api() {
        let refused = crate::cli::unimplemented::backends();
        for b in Backend::all() {
            if !refused.contains(&b.name()) {
                assert!(Api::for_backend(*b).is_some(), "{b}");
            }
        }
    }
}
