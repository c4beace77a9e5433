//! Ops defined in one place: each op is a type implementing [`OpDef`], whose methods are every
//! rule the compiler needs of it — output types and dims (one shape rule, over symbolic dim
//! expressions, so it serves fixed shapes, inference's named dims and bounded dims alike), the
//! interpreter's evaluation, generated code (one emitter for fixed and bounded dims), scratch
//! space, in-place behaviour, cost and the gradient. None has a default, so an op that forgets
//! one does not compile.
//!
//! The IR holds such an op as [`crate::ir::Op::Def`]; every pass has one arm for it that calls
//! the method. A new op is a type in a family file here (e.g. `activation.rs`), its kernel in
//! burnc-runtime, and its lowering in a frontend: three files. Ops still written as other `Op`
//! variants move here family by family (docs/DECISIONS.md, "One definition per op").
/// Implements the listed [`OpDef`] methods with their "none" answer, one line for what most
/// ops do not have: `cuda`, `wgsl` (the target does not run the op yet), `scratch_bytes` (0),
/// `in_place` (never), `decides_shapes` (no input's values do), `forwards_values` (none),
/// `flops` (no arithmetic: the op moves data), `gradient` (none yet: training through the op
/// is refused naming it). Methods not listed are written out, so every op still states every
/// rule.
macro_rules! none_of {
    ($($method:ident),+ $(,)?) => { $( none_of!(@ $method); )+ };
    (@ cuda) => {
        fn cuda(&self, cx: &$crate::ops::CudaCx) -> Result<Vec<$crate::ops::CudaKernel>, $crate::codegen::CodegenError> {
            Err(cx.unsupported())
        }
    };
    (@ wgsl) => {
        fn wgsl(&self, cx: &$crate::ops::WgslCx) -> Result<Vec<$crate::ops::WgslKernel>, $crate::codegen::CodegenError> {
            Err(cx.unsupported())
        }
    };
    (@ scratch_bytes) => {
        fn scratch_bytes(&self, _: &[Option<($crate::ir::DType, Vec<usize>)>]) -> usize {
            0
        }
    };
    (@ in_place) => {
        fn in_place(&self, _: usize) -> bool {
            false
        }
    };
    (@ decides_shapes) => {
        fn decides_shapes(&self, _: usize) -> bool {
            false
        }
    };
    (@ forwards_values) => {
        fn forwards_values(&self, _: &[Option<Vec<i64>>]) -> Option<usize> {
            None
        }
    };
    (@ flops) => {
        fn flops(&self, _: &[Option<Vec<usize>>], _: &[Option<Vec<usize>>]) -> Option<u64> {
            Some(0)
        }
    };
    (@ gradient) => {
        fn gradient(&self, _: &mut $crate::ops::GradCx) -> $crate::ops::R<Vec<Option<$crate::ir::ValueId>>> {
            Err(format!("{} has no gradient yet", $crate::ops::OpDef::name(self)))
        }
    };
}

/// [`OpDef::decides_shapes`] of an op whose inputs matching the pattern decide its output
/// shapes by their values (`shape_inputs!(1)`, `shape_inputs!(1 | 3)`, `shape_inputs!(1..)`;
/// `shape_inputs!(_)`: every input).
macro_rules! shape_inputs {
    ($inputs:pat) => {
        fn decides_shapes(&self, i: usize) -> bool {
            matches!(i, $inputs)
        }
    };
}

/// [`OpDef::flops`] of an op doing about `k` operations per element of its first input
/// (`flops!(per_input 5)`) or its first output (`flops!(per_output 1)`).
macro_rules! flops {
    (per_input $k:literal) => {
        fn flops(&self, ins: &[Option<Vec<usize>>], _: &[Option<Vec<usize>>]) -> Option<u64> {
            $crate::ops::numel(ins.first()?)?.checked_mul($k)
        }
    };
    (per_output $k:literal) => {
        fn flops(&self, _: &[Option<Vec<usize>>], outs: &[Option<Vec<usize>>]) -> Option<u64> {
            $crate::ops::numel(outs.first()?)?.checked_mul($k)
        }
    };
}

/// [`OpDef::name`] for an op whose name is a constant, or one of two that a flag of the op
/// chooses (`name!(max ? "ArgMax" : "ArgMin")`: one type serving both ops).
macro_rules! name {
    ($name:literal) => {
        fn name(&self) -> &'static str {
            $name
        }
    };
    ($flag:ident ? $yes:literal : $no:literal) => {
        fn name(&self) -> &'static str {
            if self.$flag {
                $yes
            } else {
                $no
            }
        }
    };
}

/// A runtime kernel's dims struct made from an op's geometry: one list says where each
/// kernel field comes from, and both forms the op needs are made of it, so they cannot drift
/// apart: `fixed_dims`, the struct at fixed shapes (the interpreter), and `dims_lit`, the same
/// struct as a Rust literal (generated code). A field is `dim g` (geometry field `g`, a
/// `DimExpr`: a number, or the size `cx` writes), `same g` (a plain geometry field) or `arg a`
/// (a value the caller passes, declared in the parentheses).
macro_rules! kernel_dims {
    (@fixed $g:ident dim $d:ident) => { $crate::ops::fixed_size(&$g.$d)? };
    (@fixed $g:ident same $f:ident) => { $g.$f };
    (@fixed $g:ident arg $a:ident) => { $a };
    (@lit $cx:ident $g:ident dim $d:ident) => { $cx.size(&$g.$d)? };
    (@lit $cx:ident $g:ident same $f:ident) => { $g.$f };
    (@lit $cx:ident $g:ident arg $a:ident) => { $a };
    ($geom:ty => $($kernel:ident)::+, $lit:literal ($($arg:ident: $aty:ty),*) { $($field:ident: $src:ident $from:ident),+ $(,)? }) => {
        impl $geom {
            /// The kernel's struct at fixed shapes.
            fn fixed_dims(&self, $($arg: $aty),*) -> $crate::ops::R<$($kernel)::+> {
                Ok($($kernel)::+ { $($field: kernel_dims!(@fixed self $src $from),)+ })
            }

            /// The kernel's struct as a Rust literal, its dims as `cx` writes sizes.
            fn dims_lit(&self, cx: &$crate::ops::EmitCx, $($arg: $aty),*) -> Result<String, $crate::codegen::CodegenError> {
                let fields = [$(format!("{}: {}", stringify!($field), kernel_dims!(@lit cx self $src $from)),)+];
                Ok(format!("{} {{ {} }}", $lit, fields.join(", ")))
            }
        }
    };
}

pub mod activation;
pub mod attention;
pub mod cumulative;
pub mod depth_space;
pub mod detect;
pub mod dim_values;
pub mod einsum;
pub mod fused_attention;
pub mod gather;
pub mod grid;
pub mod image;
pub mod integer;
pub mod linalg;
pub mod linear_attention;
pub mod matmul;
pub mod loss;
pub mod ml;
pub mod nbits;
pub mod one_hot;
pub mod optim;
pub mod pad;
pub mod pool;
pub mod norm;
pub mod cast;
pub mod causal_conv;
pub mod channel_norm;
pub mod col2im;
pub mod compress;
pub mod conv_transpose;
mod cx;
pub mod quant;
pub mod range;
pub mod recurrent;
pub mod reduce;
pub mod resize;
pub mod reverse;
pub mod rotary;
mod regex;
pub mod scatter;
pub mod slice;
pub mod softmax;
pub mod select;
pub mod spectral;
pub mod split;
pub mod strings;
pub mod tile;
pub mod topk;
pub mod transpose;
pub mod unique;
pub mod unpool;
pub mod view;
pub mod window;

pub use crate::codegen::cuda::kernels::{Kernel as CudaKernel, NodeCx as CudaCx};
pub use crate::codegen::wgsl::kernels::{Kernel as WgslKernel, NodeCx as WgslCx};
pub use cx::{Arg, EmitCx, GradCx, OutType, ShapeCx};
pub(crate) use cx::{is_unknown, Sym};

use crate::codegen::CodegenError;
use crate::ir::{DType, Op};
use crate::tensor::Tensor;
use std::fmt;
use std::sync::Arc;

/// Result of a rule: the reason on failure (the caller names the node and op).
pub type R<T> = Result<T, String>;

/// Everything the compiler knows of one op.
pub trait OpDef: AsAny + fmt::Debug + Send + Sync {
    /// The op's name in messages, printed graphs and op counts.
    fn name(&self) -> &'static str;

    /// Output dtypes and dims from the inputs' (and the values of constant inputs, for
    /// operands that decide shapes). Dims are expressions: constants for fixed shapes,
    /// named dims and expressions of them otherwise. Dims that must agree are declared with
    /// [`ShapeCx::equal`]: constants that differ are an error, others become checks.
    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>>;

    /// The interpreter: the outputs for the inputs (`None` for an absent optional input).
    fn eval(&self, inputs: &[Option<&Tensor>]) -> R<Vec<Tensor>>;

    /// Generated code for one node. Sizes come from [`EmitCx::size`], which writes a literal
    /// for a fixed dim and reads the run-time size table for a bounded one, so one emitter
    /// serves both.
    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError>;

    /// The node's CUDA kernels (`--target cuda`, static shapes); an op the target does not run
    /// yet answers [`CudaCx::unsupported`].
    fn cuda(&self, cx: &CudaCx) -> Result<Vec<CudaKernel>, CodegenError>;

    /// The node's WGSL kernels (`--target wgpu`, static shapes); an op the target does not run
    /// yet answers [`WgslCx::unsupported`].
    fn wgsl(&self, cx: &WgslCx) -> Result<Vec<WgslKernel>, CodegenError>;

    /// Scratch bytes the emitted code needs, at the given input shapes (for bounded dims, the
    /// shapes at the bounds: the need may not grow as a dim shrinks).
    fn scratch_bytes(&self, inputs: &[Option<(DType, Vec<usize>)>]) -> usize;

    /// Whether output 0 may be written over input `i` (same shape and type, each element read
    /// before the same element is written).
    fn in_place(&self, i: usize) -> bool;

    /// FLOPs at static shapes (multiply-adds count 2); `None` when they depend on values.
    fn flops(&self, inputs: &[Option<Vec<usize>>], outputs: &[Option<Vec<usize>>]) -> Option<u64>;

    /// The input gradients from the output gradients, built from ops (one entry per input,
    /// `None` where not needed). An op without one says so in its error.
    fn gradient(&self, cx: &mut GradCx) -> R<Vec<Option<crate::ir::ValueId>>>;

    /// Whether input `i`'s values (not only its dims) decide the outputs' shapes or layout (a
    /// count, an axis, pads): such an input must be a constant, or a shape value, for code
    /// generation; tools that pin a model's inputs bake it in.
    fn decides_shapes(&self, i: usize) -> bool;

    /// For shape computations (`Shape → Cast → Concat → Reshape`): the input whose integer
    /// values output 0 repeats unchanged, if any, so named dims flow through the op. `known`
    /// holds the inputs' values where they are known integers (a Where's decided condition).
    /// The caller checks that the input has as many values as the output.
    fn forwards_values(&self, known: &[Option<Vec<i64>>]) -> Option<usize>;

    /// Whether output 0 is input 0's bytes (a reshape, an inference Dropout): the memory plan
    /// then lets output 0 share input 0's buffer where their sizes agree, and the op's emitters
    /// copy only where it did not ([`view::copy_unless_alias`]). The one rule with a default,
    /// as few ops are views.
    fn is_view(&self) -> bool {
        false
    }

    /// Inputs the op overwrites when generated code runs it in place (an optimizer step over
    /// the caller's state buffer): the scheduler runs every other reader of them first. Also
    /// a default, as only the optimizer step does this.
    fn mutated_inputs(&self) -> &'static [usize] {
        &[]
    }
}

/// An op definition as `Any`, for the few passes that rewrite one op by its type (the train
/// step's Dropout switch).
pub trait AsAny {
    fn as_any(&self) -> &dyn std::any::Any;
}

impl<T: std::any::Any> AsAny for T {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// A shared handle to an op definition, as the IR stores it.
#[derive(Clone)]
pub struct OpRef(pub Arc<dyn OpDef>);

impl OpRef {
    pub fn new(op: impl OpDef + 'static) -> OpRef {
        OpRef(Arc::new(op))
    }

    /// The op as type `T`, when it is one.
    pub fn get<T: OpDef + 'static>(&self) -> Option<&T> {
        // Through the trait object, not the handle (which is `Any` itself).
        AsAny::as_any(&*self.0).downcast_ref::<T>()
    }
}

/// An op as the IR holds it: `Tile { .. }.op()` is `Op::Def(OpRef::new(Tile { .. }))`, for
/// every op type at once.
pub trait IntoOp {
    fn op(self) -> Op;
}

impl<T: OpDef + 'static> IntoOp for T {
    fn op(self) -> Op {
        Op::Def(OpRef::new(self))
    }
}

impl std::ops::Deref for OpRef {
    type Target = dyn OpDef;
    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

impl fmt::Debug for OpRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// An op and inputs to run it on. `tests/op_defs.rs` runs every example through the
/// interpreter, generated code with fixed shapes and bounded-dims code, so an op listed here
/// is checked end to end without a test of its own.
pub struct Example {
    /// The inputs given as constants (an axis, a count): the others are graph inputs.
    pub consts: Vec<usize>,
    pub op: OpRef,
    pub inputs: Vec<Tensor>,
}

/// Every family's examples.
pub fn examples() -> Vec<Example> {
    let mut v = activation::examples();
    v.extend(cast::examples());
    v.extend(select::examples());
    v.extend(reduce::examples());
    v.extend(attention::examples());
    v.extend(loss::examples());
    v.extend(norm::examples());
    v.extend(softmax::examples());
    v.extend(pool::examples());
    v.extend(transpose::examples());
    v.extend(channel_norm::examples());
    v.extend(cumulative::examples());
    v.extend(grid::examples());
    v.extend(pad::examples());
    v.extend(split::examples());
    v.extend(gather::examples());
    v.extend(scatter::examples());
    v.extend(depth_space::examples());
    v.extend(recurrent::examples());
    v.extend(causal_conv::examples());
    v.extend(linear_attention::examples());
    v.extend(rotary::examples());
    v.extend(quant::examples());
    v.extend(one_hot::examples());
    v.extend(nbits::examples());
    v.extend(strings::examples());
    v.extend(resize::examples());
    v.extend(dim_values::examples());
    v.extend(col2im::examples());
    v.extend(compress::examples());
    v.extend(reverse::examples());
    v.extend(tile::examples());
    v.extend(slice::examples());
    v.extend(linalg::examples());
    v.extend(matmul::examples());
    v.extend(optim::examples());
    v.extend(topk::examples());
    v.extend(unpool::examples());
    v.extend(ml::examples());
    v.extend(einsum::examples());
    v.extend(spectral::examples());
    v.extend(detect::examples());
    v.extend(conv_transpose::examples());
    v.extend(range::examples());
    v.extend(view::examples());
    v
}

/// Input `i` of an evaluation, which the op requires.
pub(crate) fn input<'a>(ins: &[Option<&'a Tensor>], i: usize) -> R<&'a Tensor> {
    ins.get(i).copied().flatten().ok_or_else(|| format!("input #{i} is missing"))
}

/// The product of dims (an element count).
pub(crate) fn product(dims: &[crate::ir::DimExpr]) -> crate::ir::DimExpr {
    dims.iter().fold(crate::ir::DimExpr::constant(1), |a, d| a.mul(d))
}

/// `[outer, len, inner]` around axis `a` of `dims`: the products before it, it, and after it.
pub(crate) fn around(dims: &[crate::ir::DimExpr], a: usize) -> [crate::ir::DimExpr; 3] {
    [product(&dims[..a]), dims[a].clone(), product(&dims[a + 1..])]
}

/// A per-spatial-dim attribute (strides, pads…): `attr`, or `n` copies of `d` when it is empty.
pub(crate) fn or_fill(attr: &[usize], n: usize, d: usize, what: &str) -> R<Vec<usize>> {
    match attr.len() {
        0 => Ok(vec![d; n]),
        l if l == n => Ok(attr.to_vec()),
        l => Err(format!("{what} has {l} entries, expected {n}")),
    }
}

/// A dim an evaluation needs as a number (its shapes are constants, so every dim is).
pub(crate) fn fixed_size(d: &crate::ir::DimExpr) -> R<usize> {
    d.as_const().and_then(|c| usize::try_from(c).ok()).ok_or_else(|| format!("size {d} is not fixed"))
}

/// The sizes of an `[outer, len, inner]` view (see [`around`]) as three kernel arguments.
pub(crate) fn view_sizes(cx: &EmitCx, [outer, len, inner]: &[crate::ir::DimExpr; 3]) -> Result<String, CodegenError> {
    Ok(format!("{}, {}, {}", cx.size(outer)?, cx.size(len)?, cx.size(inner)?))
}

/// A data-movement kernel run on elements as raw `W`-byte values, so one generic kernel serves
/// every dtype in the interpreter. `fill` is one element's bytes (zeros when absent).
pub(crate) trait MoveBytes {
    fn run<const W: usize>(&self, x: &[[u8; W]], fill: [u8; W]) -> Vec<[u8; W]>;
}

/// `k` over `x`'s elements, the result a tensor of `x`'s dtype and `shape`.
pub(crate) fn move_bytes(name: &str, x: &Tensor, fill: Option<&Tensor>, shape: Vec<usize>, k: &impl MoveBytes) -> R<Tensor> {
    fn go<const W: usize>(xb: &[u8], fb: &[u8], k: &impl MoveBytes) -> Vec<u8> {
        let x: Vec<[u8; W]> = xb.chunks_exact(W).map(|c| c.try_into().unwrap_or([0; W])).collect();
        let fill: [u8; W] = fb.get(..W).and_then(|c| c.try_into().ok()).unwrap_or([0; W]);
        k.run(&x, fill).concat()
    }
    let unsupported = || format!("{name} on {} is not supported", x.dtype());
    let xb = x.data.to_le_bytes();
    let fb = fill.map(|f| f.data.to_le_bytes()).unwrap_or_default();
    // Bytes per element as stored (an empty tensor: the dtype's).
    let w = xb.len().checked_div(x.numel()).unwrap_or(x.dtype().size());
    let bytes = match w {
        1 => go::<1>(&xb, &fb, k),
        2 => go::<2>(&xb, &fb, k),
        4 => go::<4>(&xb, &fb, k),
        8 => go::<8>(&xb, &fb, k),
        16 => go::<16>(&xb, &fb, k),
        _ => return Err(unsupported()),
    };
    Ok(Tensor::new(shape, crate::tensor::Data::from_le_bytes(x.dtype(), &bytes).ok_or_else(unsupported)?))
}

/// The element count of a static shape (for `flops`), saturating.
pub(crate) fn numel(shape: &Option<Vec<usize>>) -> Option<u64> {
    shape.as_ref().map(|s| s.iter().fold(1u64, |a, &d| a.saturating_mul(d as u64)))
}

#[cfg(test)]
pub(crate) mod testing;
