//! Python-exact statistics (numpy pairwise sum, linear percentiles).
