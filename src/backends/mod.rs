//! The APIs we speak (completions, chat, embeddings, pooling, rerank): which `--backend` uses
//! which, how each API's response is read, and how to build a request body exactly as Python
//! `vllm bench serve` 0.33 sends it. Bodies are built once, before the clock starts.
//!
//! The backend names and the facts about them (default endpoint, pooling or not) live once,
//! on [`crate::cli::Backend`]; this module only maps them to an [`Api`].

pub mod conversation;
pub mod stream_chunk;

use bytes::Bytes;
use serde_json::{json, Map, Value};

use crate::cli::Backend;
use crate::datasets::Prompt;
use stream_chunk::StreamApi;

/// How a response body is read: what each API's answer looks like on the wire, which the
/// engine's exchange follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseMode {
    /// SSE stream of completions/chat chunks.
    Stream(StreamApi),
    /// One JSON document (embeddings, pooling, rerank): only the end time matters.
    Whole,
}

/// The APIs we speak. Which `--backend` names use which API is [`Api::for_backend`]; every
/// other fact about a backend name (endpoint, pooling or not) is on [`Backend`], the one list of backend names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `vllm` / `openai`: `/v1/completions`, streamed.
    Completions,
    /// `openai-chat`: `/v1/chat/completions`, streamed.
    Chat,
    /// `openai-embeddings`: `/v1/embeddings` with `input`.
    Embeddings,
    /// `openai-embeddings-chat`: `/v1/embeddings` with `messages`.
    EmbeddingsChat,
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
            Backend::OpenaiEmbeddings => Some(Api::Embeddings),
            Backend::OpenaiEmbeddingsChat => Some(Api::EmbeddingsChat),
            Backend::VllmPooling => Some(Api::Pooling),
            Backend::VllmRerank => Some(Api::Rerank),
            Backend::OpenaiResponses
            | Backend::OpenaiAudio
            | Backend::OpenaiEmbeddingsClip
            | Backend::OpenaiEmbeddingsVlm2vec
            | Backend::InfinityEmbeddings
            | Backend::InfinityEmbeddingsClip => None,
        }
    }

    /// Generation APIs stream tokens; the others answer with one JSON document.
    pub fn is_generation(self) -> bool {
        matches!(self.response_mode(), ResponseMode::Stream(_))
    }

    /// How the engine reads this API's responses.
    pub fn response_mode(self) -> ResponseMode {
        match self {
            Api::Completions => ResponseMode::Stream(StreamApi::Completions),
            Api::Chat => ResponseMode::Stream(StreamApi::Chat),
            Api::Embeddings | Api::EmbeddingsChat | Api::Pooling | Api::Rerank => {
                ResponseMode::Whole
            }
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
    }
}

/// Inputs a request carries, as Python counts them for `total_input_sequences`: the
/// documents of a rerank request (its prompt is the query and the documents), the texts of
/// a batched pooling request, else 1.
pub fn input_sequences(api: Api, prompt: &Prompt) -> u32 {
    match (api, prompt) {
        (Api::Rerank, Prompt::Texts(t)) => t.len().saturating_sub(1) as u32,
        (_, Prompt::Texts(t)) => t.len() as u32,
        _ => 1,
    }
}

/// Chat `messages` as Python builds them: one user message with list content.
fn chat_messages(prompt: Value) -> Value {
    json!([{ "role": "user", "content": [{ "type": "text", "text": prompt }] }])
}

/// The body's fields in Python's order, with `prompt` as the prompt's JSON value (the one
/// place the per-API field logic lives; both body builders serialize it).
fn body_fields(api: Api, prompt: Value, output_len: usize, opts: &BodyOptions) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), Value::String(opts.model.clone()));
    match api {
        Api::Completions => {
            body.insert("prompt".into(), prompt);
            body.insert("repetition_penalty".into(), json!(1.0));
            body.insert("max_tokens".into(), json!(output_len));
            body.insert("logprobs".into(), json!(opts.logprobs));
            body.insert("stream".into(), json!(true));
            body.insert("stream_options".into(), json!({ "include_usage": true }));
        }
        Api::Chat => {
            body.insert("messages".into(), chat_messages(prompt));
            body.insert("max_completion_tokens".into(), json!(output_len));
            body.insert("stream".into(), json!(true));
            body.insert("stream_options".into(), json!({ "include_usage": true }));
        }
        Api::Embeddings => {
            body.insert("input".into(), prompt);
            body.insert("truncate_prompt_tokens".into(), json!(-1));
        }
        Api::EmbeddingsChat => {
            body.insert("messages".into(), chat_messages(prompt));
            body.insert("truncate_prompt_tokens".into(), json!(-1));
        }
        Api::Pooling => {
            body.insert("truncate_prompt_tokens".into(), json!(-1));
            body.insert("input".into(), prompt);
        }
        Api::Rerank => {
            // Python sends prompt[0] as the query and the rest as documents; a single text
            // prompt is the query and `--extra-body '{"documents": [...]}'` supplies documents.
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
    if opts.ignore_eos && api != Api::Rerank {
        body.insert("ignore_eos".into(), json!(true));
    }
    for (k, v) in &opts.extra_body {
        body.insert(k.clone(), v.clone());
    }
    Value::Object(body)
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
}

fn serialize(body: &Value) -> Result<Vec<u8>, BodyError> {
    serde_json::to_vec(body).map_err(BodyError::Serialize)
}

/// Builds the JSON body of one request (`max_tokens` = the request's output length).
pub fn build_body(
    api: Api,
    prompt: &Prompt,
    output_len: usize,
    opts: &BodyOptions,
) -> Result<Vec<u8>, BodyError> {
    serialize(&body_fields(api, prompt_value(prompt), output_len, opts))
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
    fn fragment_bodies_equal_whole_bodies() {
        let ids = Prompt::TokenIds(Arc::from(vec![7u32, 8, 9]));
        let parts: Vec<Bytes> = ["[", "7,8", ",9", "]"]
            .iter()
            .map(|s| Bytes::from_static(s.as_bytes()))
            .collect();
        for api in [Api::Completions, Api::Chat, Api::Embeddings] {
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
        assert!(Api::for_backend(Backend::OpenaiAudio).is_none());
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
