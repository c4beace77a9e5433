//! Subcommands of the CLI, one module each.
pub mod bench;
pub mod codegen_flags;
pub mod compile;
pub mod inputs;
pub mod inspect;
pub mod run;
pub mod train;
mod train_codegen;
pub mod weights;

use thiserror::Error;

#[derive(Debug, Error)]
pub enum CliError {
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Onnx(#[from] burnc_frontends::onnx::OnnxError),
    #[error(transparent)]
    Interp(#[from] burnc_compiler::interp::InterpError),
    #[error("{path}: {reason}")]
    File { path: String, reason: String },
    #[error(transparent)]
    Pass(#[from] burnc_compiler::passes::PassError),
    #[error(transparent)]
    Codegen(#[from] burnc_compiler::codegen::CodegenError),
    #[error(transparent)]
    Harness(#[from] burnc::harness::HarnessError),
    #[error(transparent)]
    Build(#[from] burnc::BuildError),
    #[error(transparent)]
    Train(#[from] burnc_compiler::train::TrainError),
}
