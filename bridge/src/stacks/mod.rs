//! Where each rank is: call stacks of every thread, fused with the queues
//! (issue 12; the design is docs/design/stacks.md). So far: which MPI call
//! a frame is in, and what such a call waits for (`names`).

pub mod names;

pub use names::{canonical, classify, CallClass, Collective, Completion};
