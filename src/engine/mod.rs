//! The thread-per-core engine.
