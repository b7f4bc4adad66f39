//! Python-exact `calculate_metrics`.
