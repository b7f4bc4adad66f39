//! Tier 3: tokenizing on the server under test (`POST /tokenize`, `/detokenize`).
//!
//! For models whose repo ships neither `tokenizer.json` nor a tiktoken file. The HTTP side
//! belongs to the engine; this module only needs something that can ask the server, the
//! [`TokenizeEndpoint`] trait, so it is testable with a fake and has no socket code.
//!
//! What the server cannot tell us: `all_special_ids` (reported empty) and the vocabulary
//! size (only if the endpoint knows it, see [`TokenizeEndpoint::vocab_size`]).
//! `num_special_tokens_to_add` is measured once by tokenizing the empty string with special
//! tokens. `skip_special_tokens` on decode is not forwarded (vLLM's `/detokenize` has no
//! such field).

use std::sync::Arc;

use super::{Result, TokenizerError};

/// Something that can call a server's tokenizer. The engine implements it over HTTP
/// (`POST {base}/tokenize` with `{"model", "prompt", "add_special_tokens"}` and
/// `POST {base}/detokenize` with `{"model", "tokens"}`); tests use a fake.
pub trait TokenizeEndpoint: Send + Sync {
    /// Token ids of `text`.
    fn tokenize(&self, text: &str, add_special: bool) -> anyhow::Result<Vec<u32>>;
    /// Text of `ids`.
    fn detokenize(&self, ids: &[u32]) -> anyhow::Result<String>;
    /// The model's base vocabulary size, when the implementation knows it (needed to build
    /// random prompts from token ids). Default: unknown.
    fn vocab_size(&self) -> Option<usize> {
        None
    }
}

/// A tokenizer that asks the server.
pub struct ServerTokenizer {
    endpoint: Arc<dyn TokenizeEndpoint>,
    num_special: usize,
}

impl ServerTokenizer {
    /// Wraps `endpoint`; one `/tokenize` call measures how many special tokens it adds.
    pub fn new(endpoint: Arc<dyn TokenizeEndpoint>) -> Result<Self> {
        let with = endpoint
            .tokenize("", true)
            .map_err(|source| TokenizerError::Server {
                what: "the server's /tokenize endpoint does not answer; pass --tokenizer <local \
                       tokenizer>",
                source,
            })?;
        Ok(Self {
            num_special: with.len(),
            endpoint,
        })
    }

    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>> {
        self.endpoint
            .tokenize(text, add_special_tokens)
            .map_err(|source| TokenizerError::Server {
                what: "server /tokenize failed",
                source,
            })
    }

    pub fn decode(&self, ids: &[u32], _skip_special_tokens: bool) -> Result<String> {
        self.endpoint
            .detokenize(ids)
            .map_err(|source| TokenizerError::Server {
                what: "server /detokenize failed",
                source,
            })
    }

    pub fn vocab_size(&self) -> Option<usize> {
        self.endpoint.vocab_size()
    }

    pub fn num_special_tokens_to_add(&self) -> usize {
        self.num_special
    }
}
