//! Layer marker types for models written in Rust with `#[derive(Model)]` / `#[model]`
//! (burnc-macros). They hold nothing: the field type names the layer and its sizes, the macro
//! reads them at compile time, and the compiled model keeps its weights in the generated module.
//! They live here, not in the macro crate, so a `no_std` crate can name them.
//!
//! ```ignore
//! use burnc_macros::{model, Model};
//! use burnc_runtime::nn::{Conv2d, Linear};
//! #[derive(Model)]
//! struct Net {
//!     #[layer(padding = 1)]
//!     conv: Conv2d<1, 8, 3>,
//!     fc: Linear<6272, 10>,
//! }
//! ```
//!
//! Tensors in a `#[model]` forward signature are written `Tensor<1, 1, 28, 28>` (f32) or
//! `Tensor<i64, 1, 8>`; only the macro reads them, so there is no `Tensor` type here.
macro_rules! marker {
    ($(#[$doc:meta])* $name:ident < $($c:ident),* >) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct $name<$(const $c: usize),*>;
    };
}

marker! {
    /// `y = x Wᵀ + b` over the last dim: weight `[OUT, IN]`, bias `[OUT]` (PyTorch's layout).
    /// `#[layer(bias = false)]` drops the bias.
    Linear<IN, OUT>
}
marker! {
    /// 2-D convolution, NCHW: weight `[OUT, IN / groups, K, K]`, bias `[OUT]`. Attributes:
    /// `#[layer(stride = 1, padding = 0, dilation = 1, groups = 1, bias = true)]`.
    Conv2d<IN, OUT, K>
}
marker! {
    /// 1-D convolution, NCL: weight `[OUT, IN / groups, K]`, bias `[OUT]`; same attributes as
    /// [`Conv2d`].
    Conv1d<IN, OUT, K>
}
marker! {
    /// Inference batch normalization over dim 1: `weight`, `bias`, `running_mean`,
    /// `running_var`, each `[C]`. `#[layer(eps = 1e-5)]`.
    BatchNorm2d<C>
}
marker! {
    /// Same as [`BatchNorm2d`] for `[N, C]` / `[N, C, L]` inputs.
    BatchNorm1d<C>
}
marker! {
    /// Layer normalization over the last dim (`D` wide): `weight`, `bias` `[D]`. `#[layer(eps = 1e-5)]`.
    LayerNorm<D>
}
marker! {
    /// Lookup table: `weight` `[N, D]`; the input holds integer ids.
    Embedding<N, D>
}
marker! {
    /// Identity at inference.
    Dropout<>
}
marker! {
    /// `nn.MultiheadAttention(EMBED, HEADS, batch_first=True)`: `in_proj_weight` `[3·EMBED, EMBED]`,
    /// `in_proj_bias` `[3·EMBED]`, `out_proj.weight`, `out_proj.bias`. Called as `self.attn(x)`
    /// (self-attention) or `self.attn(q, k, v)` on `[batch, seq, EMBED]` tensors.
    /// `#[layer(causal = true)]` masks later positions; `bias = false` drops the biases.
    MultiHeadAttention<EMBED, HEADS>
}
