//! The result JSON (Python schema, key order, float repr).
