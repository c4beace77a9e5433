//! burnc: an ahead-of-time model compiler. This crate is the facade: the `burnc` command line
//! (the binary), the [`Build`] API for build scripts, and re-exports of the parts.
//!
//! ```ignore
//! // build.rs
//! fn main() -> Result<(), burnc::BuildError> {
//!     burnc::Build::new("model.onnx").input("x", [1, 3, 224, 224]).name("model").compile()?;
//!     Ok(())
//! }
//! // src/main.rs (with burnc-runtime as a dependency)
//! mod model {
//!     burnc::include_model!("model");
//! }
//! ```
pub use burnc_compiler as compiler;
pub use burnc_frontends as frontends;
pub use burnc_runtime as runtime;

/// `include_model!("name")` includes `$OUT_DIR/name.rs`, written by [`Build::compile`]. Defined
/// in burnc-runtime so firmware crates need not depend on burnc; re-exported here.
pub use burnc_runtime::include_model;

pub mod build;
pub mod clib;
pub mod harness;
pub mod weights_object;

pub use build::{Build, BuildError, Report, Target, TrainReport};
/// Training options for [`Build::train`].
pub use burnc_compiler::train::{Loss, TrainSpec};
/// Optimizer rules for [`TrainSpec`].
pub use burnc_runtime::train::optim::Rule as Optimizer;
