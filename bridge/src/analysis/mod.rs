//! Cross-rank analysis of a whole-job snapshot (being written).
