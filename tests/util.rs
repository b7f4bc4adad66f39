//! Integration tests: util.
