//! Output: the console block (byte-compatible with Python) and the result JSON.

pub mod console;
pub mod json;
