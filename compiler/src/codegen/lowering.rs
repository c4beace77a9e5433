//! Choices that change how ops are computed and how their weights are stored. They are decided
//! once per module and passed to the emitters, the memory plan's scratch sizes and the weights
//! layout, so the three always agree (and `burnc inspect` plans exactly what `-o` compiles).

/// How a module computes its convolutions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lowering {
    /// f32 convolution weights known at compile time are stored packed for the GEMM. Off in
    /// train modules: the caller may replace frozen weights in the plain layout at run time.
    pub prepack: bool,
    /// 3×3 stride-1 convolutions that pay for it run by Winograd F(4×4, 3×3). It changes
    /// rounding, so never in code that must equal the interpreter, and never with bounded dims
    /// (their convolutions take their sizes at run time).
    pub winograd: bool,
}

impl Lowering {
    /// Plain weights, direct convolutions: train modules.
    pub const PLAIN: Lowering = Lowering { prepack: false, winograd: false };
    /// Packed weights, no Winograd: code that rounds as the interpreter does, bounded dims.
    pub const EXACT: Lowering = Lowering { prepack: true, winograd: false };
}

impl Default for Lowering {
    fn default() -> Self {
        Lowering::EXACT
    }
}
