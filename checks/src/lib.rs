//! Checks of the repository's structure against ARCHITECTURE.md: the layers
//! of `bridge/src` and `cli/src`, no import circle between the files of a
//! crate, where `unsafe` may appear, and the size of every source file.
//!
//! The checks are tests only: `tests/structure.rs` (run with
//! `cargo test --release -p mpiq-checks`). This library is empty.
