//! Passes over the IR. Each is `fn(&mut Graph) -> Result<(), PassError>`, followed by the
//! verifier in debug builds.
pub mod attention;
pub mod cost;
pub mod dce;
pub mod dim_values;
pub mod fold;
pub mod fuse;
mod fuse_chain;
pub mod infer;
pub mod precision;
pub mod qdq;
pub mod symbolic;
pub mod unseq;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod symbolic_tests;

use crate::ir::{verify, Graph};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum PassError {
    #[error("after pass {pass}: {err}")]
    Verify { pass: &'static str, err: verify::VerifyError },
    #[error("node `{node}` ({op}): {reason}")]
    Node { node: String, op: String, reason: String },
}

/// Run `pass`, then the verifier in debug builds.
pub fn run_pass(g: &mut Graph, name: &'static str, pass: fn(&mut Graph) -> Result<(), PassError>) -> Result<(), PassError> {
    pass(g)?;
    if cfg!(debug_assertions) {
        verify::verify(g).map_err(|err| PassError::Verify { pass: name, err })?;
    }
    Ok(())
}

/// The passes every entry point runs before using a graph's types: inference, folding to a
/// fixed point (with inference after each sweep), dead code elimination, inference.
pub fn prepare(g: &mut Graph) -> Result<(), PassError> {
    run_pass(g, "infer", infer::infer)?;
    run_pass(g, "fold", fold::fold)?;
    run_pass(g, "dce", dce::dce)?;
    run_pass(g, "infer", infer::infer)?;
    Ok(())
}
