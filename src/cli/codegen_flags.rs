//! Code generation flags shared by `burnc MODEL -o` and `burnc inspect`, so inspect reports the
//! plan of exactly the module `-o` would write.
use burnc::build::CompileOptions;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct CodegenFlags {
    /// Keep 3×3 convolutions as GEMMs instead of Winograd F(4×4, 3×3): slower, but their
    /// weights take a quarter of the space (for flash-limited targets).
    #[arg(long)]
    pub no_winograd: bool,
    /// The most bytes the arena may take (default 1 TiB, 1099511627776): a model that needs
    /// more is refused, naming the node with the largest buffer.
    #[arg(long, value_name = "BYTES")]
    pub max_arena: Option<usize>,
    /// Where the module runs: `cpu` (plain Rust, no_std) or `cuda` (NVIDIA GPUs: kernels
    /// compiled to PTX now, embedded in the module; the binary links no CUDA library).
    #[arg(long, value_name = "TARGET", default_value = "cpu")]
    pub target: TargetArg,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TargetArg {
    #[default]
    Cpu,
    Cuda,
}

impl CodegenFlags {
    pub fn options(&self) -> CompileOptions {
        let defaults = CompileOptions::default();
        let target = match self.target {
            TargetArg::Cpu => burnc::build::Target::Cpu,
            TargetArg::Cuda => burnc::build::Target::Cuda,
        };
        CompileOptions { winograd: !self.no_winograd, max_arena: self.max_arena.unwrap_or(defaults.max_arena), target }
    }
}
