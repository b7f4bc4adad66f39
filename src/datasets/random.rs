//! The `random` dataset (Python `RandomDataset` semantics).
