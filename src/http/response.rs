//! Response head and body decoders (pure, push-style; no I/O).
