//! Tokenizers: HF tokenizer.json, tiktoken, server-side fallback.
