//! Where each rank is: call stacks of every thread, fused with the queues
//! (issue 12; the design is docs/design/stacks.md). So far: which MPI call
//! a frame is in and what such a call waits for (`names`), where a thread
//! is, from its stack alone (`position`); what the arguments of each
//! thread's call say (`args`); and every rank's stacks merged into one
//! tree, as STAT draws them (`tree`, with rank ranges in `ranks`).

/// How mpiq's flight recorder's library file is named (`libmpiq_recorder.so`,
/// also the control builds' copies): how its frames and mappings are told.
pub const RECORDER_LIBRARY_PREFIX: &str = "libmpiq_recorder";

pub mod args;
pub mod names;
pub mod position;
pub mod python;
pub mod ranks;
pub mod state;
pub mod tree;

pub use names::{canonical, classify, CallClass, Collective, Completion};
pub use position::{position, where_words, where_words_calls, Position};
pub use ranks::{rank_ranges, ranks_text};
pub use tree::{Mode, StackNode, StackTree};
