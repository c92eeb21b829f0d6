//! The snapshot: its serde model, the normalisation of what a library
//! returns, and the one text renderer every front end uses.

pub mod model;
pub(crate) mod normalize;
pub mod render;
