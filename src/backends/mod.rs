//! Backends: one per API (completions, chat, embeddings, pooling, rerank). Each builds the
//! request body before the clock starts and interprets the response events.

pub mod stream_chunk;
