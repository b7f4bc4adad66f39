//! Decoding of streamed JSON chunks (completions / chat) with simd-json, in place.
