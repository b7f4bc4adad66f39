//! Integration tests: datasets.
