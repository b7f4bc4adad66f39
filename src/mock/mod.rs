//! The mock OpenAI-compatible LLM server.
