//! The console result block.
