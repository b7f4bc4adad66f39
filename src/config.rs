//! Validated configuration resolved from the CLI.
