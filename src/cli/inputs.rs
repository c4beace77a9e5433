//! Reading input values (`.pb`, `.npy`) and pinning input dims: shared with the library.
pub use burnc::build::{pin_inputs, read_value};
