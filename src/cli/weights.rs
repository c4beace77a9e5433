//! `--weights FILE [--rename PATTERN=REPLACEMENT]... [--allow-unused-weights]`, shared by
//! compile, run and inspect.
use super::CliError;
use burnc::build::{apply_weights, Weights};
use burnc_compiler::ir::Graph;
use std::path::PathBuf;

#[derive(clap::Args, Debug, Default)]
pub struct WeightsArgs {
    /// Replace the model's initializers with the tensors of a .safetensors file or a PyTorch
    /// checkpoint (.pt/.pth: torch.save's zip or legacy format; nested dicts give dotted keys).
    #[arg(long, value_name = "FILE")]
    pub weights: Option<PathBuf>,
    /// Rename weights-file keys before matching: `*` in PATTERN matches anything and fills the
    /// `*`s of REPLACEMENT (`model.*=*`); first matching rule wins.
    #[arg(long = "rename", value_name = "PATTERN=REPLACEMENT", requires = "weights")]
    pub renames: Vec<String>,
    /// Ignore weights-file tensors that no parameter takes (default: an error).
    #[arg(long, requires = "weights")]
    pub allow_unused_weights: bool,
}

impl WeightsArgs {
    pub fn spec(&self) -> Result<Option<Weights>, CliError> {
        Ok(match &self.weights {
            Some(p) => Some(Weights::new(p, &self.renames, self.allow_unused_weights)?),
            None => None,
        })
    }

    /// Apply to `g` when `--weights` was given; notes the ignored tensors on stderr.
    pub fn apply(&self, g: &mut Graph) -> Result<(), CliError> {
        if let Some(w) = self.spec()? {
            let done = apply_weights(g, &w)?;
            if !done.unused.is_empty() {
                eprintln!("note: {} unused tensors in {}: {}", done.unused.len(), w.path.display(), done.unused.join(", "));
            }
        }
        Ok(())
    }
}
