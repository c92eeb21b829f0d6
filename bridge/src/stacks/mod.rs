//! Where each rank is: call stacks of every thread, fused with the queues
//! (issue 12; the design is docs/design/stacks.md). So far: which MPI call
//! a frame is in and what such a call waits for (`names`), and where a
//! thread is, from its stack alone (`position`); what the arguments of
//! each thread's call say (`args`).

pub mod args;
pub mod names;
pub mod position;

pub use names::{canonical, classify, CallClass, Collective, Completion};
pub use position::{position, where_words, Position};
