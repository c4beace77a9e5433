//! `burnc MODEL -o model.rs`: ahead-of-time compilation.
use super::CliError;
use std::path::Path;

pub fn compile(model: &Path, _output: Option<&Path>, _inputs: &[String]) -> Result<(), CliError> {
    // Load and check the model now so errors in it surface even before codegen exists.
    burnc_frontends::onnx::load(model)?;
    Err(CliError::Usage(
        "code generation (`burnc MODEL -o model.rs`) is not built yet; use `burnc run` or `burnc inspect`".into(),
    ))
}
