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
    /// Where the module runs: `cpu` (plain Rust, no_std), `cuda` (NVIDIA GPUs: kernels
    /// compiled to PTX now, embedded in the module; the binary links no CUDA library) or `wgpu`
    /// (any Vulkan, Metal or DX12 device: WGSL kernels validated now, embedded in the module).
    #[arg(long, value_name = "TARGET", default_value = "cpu")]
    pub target: TargetArg,
    /// The dtype the model's f32 weights and activations run in (`--target cuda`): `f32`, or
    /// `bf16`/`f16`, stored in 16 bits with f32 arithmetic; inputs and outputs stay f32.
    #[arg(long, value_name = "DTYPE", default_value = "f32")]
    pub dtype: DTypeArg,
    /// The NVIDIA architecture of `--target cuda` kernels: `sm90a` (Hopper's wgmma for deep
    /// products; such a module loads on H100/H200 only) or `sm90` (Hopper and later GPUs).
    #[arg(long, value_name = "ARCH", default_value = "sm90a")]
    pub gpu_arch: GpuArchArg,
    /// With `--target cuda --dtype f32`: matrix products and convolutions on tensor cores with
    /// TF32 inputs (10-bit mantissas) and f32 sums, as PyTorch's `allow_tf32`.
    #[arg(long)]
    pub tf32: bool,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum GpuArchArg {
    #[default]
    Sm90a,
    Sm90,
}

impl GpuArchArg {
    pub fn arch(self) -> burnc::build::GpuArch {
        match self {
            GpuArchArg::Sm90a => burnc::build::GpuArch::Sm90a,
            GpuArchArg::Sm90 => burnc::build::GpuArch::Sm90,
        }
    }
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum DTypeArg {
    #[default]
    F32,
    Bf16,
    F16,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TargetArg {
    #[default]
    Cpu,
    Cuda,
    Wgpu,
}

impl DTypeArg {
    pub fn dtype(self) -> burnc_compiler::ir::DType {
        match self {
            DTypeArg::F32 => burnc_compiler::ir::DType::F32,
            DTypeArg::Bf16 => burnc_compiler::ir::DType::BF16,
            DTypeArg::F16 => burnc_compiler::ir::DType::F16,
        }
    }
}

impl CodegenFlags {
    pub fn options(&self) -> CompileOptions {
        let defaults = CompileOptions::default();
        let target = match self.target {
            TargetArg::Cpu => burnc::build::Target::Cpu,
            TargetArg::Cuda => burnc::build::Target::Cuda,
            TargetArg::Wgpu => burnc::build::Target::Wgpu,
        };
        CompileOptions { winograd: !self.no_winograd, max_arena: self.max_arena.unwrap_or(defaults.max_arena), target, floats: self.dtype.dtype(), gpu_arch: self.gpu_arch.arch(), tf32: self.tf32, link: None }
    }
}
