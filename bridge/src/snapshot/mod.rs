//! The snapshot: its serde model, and what is known only once a process's
//! communicators are all read. The library's raw structs become the model
//! in `dump`; the text and JSON of it are `render`'s.

pub mod model;
pub(crate) mod normalize;
pub mod recorder;
