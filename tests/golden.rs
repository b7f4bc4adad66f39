//! Integration tests: golden.
