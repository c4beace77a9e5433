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
}

impl CodegenFlags {
    pub fn options(&self) -> CompileOptions {
        let defaults = CompileOptions::default();
        CompileOptions { winograd: !self.no_winograd, max_arena: self.max_arena.unwrap_or(defaults.max_arena) }
    }
}
