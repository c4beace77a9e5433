//! burnc's core op set. The ONNX frontend lowers onto these (Sum/Mean/Max/Min → binary chains,
//! Clip → Max/Min, GlobalAveragePool → mean reduction …), so the
//! interpreter, passes and later the gradient rules exist once per core op.
//!
//! Operands that decide output shapes (Reshape's shape, Slice's starts, Pad's pads …) stay
//! inputs: the interpreter reads them at run time, and constant folding turns them into
//! constants where the compiler can know them.
use super::{DType, Graph};
use crate::tensor::Tensor;
/// The activation of a fused op, as the runtime applies it.
pub use burnc_runtime::kernels::conv::Act;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum UnaryOp {
    Identity,
    Abs,
    Neg,
    Exp,
    Log,
    Sqrt,
    Reciprocal,
    Floor,
    Ceil,
    /// Round half to even.
    Round,
    Sign,
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Asinh,
    Acosh,
    Atanh,
    Erf,
    Relu,
    Sigmoid,
    Tanh,
    Softplus,
    Softsign,
    Not,
    BitwiseNot,
    IsNaN,
    IsInf { detect_negative: bool, detect_positive: bool },
    LeakyRelu { alpha: f32 },
    Elu { alpha: f32 },
    Selu { alpha: f32, gamma: f32 },
    Celu { alpha: f32 },
    HardSigmoid { alpha: f32, beta: f32 },
    HardSwish,
    ThresholdedRelu { alpha: f32 },
    Gelu { tanh_approx: bool },
    Mish,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    /// Integer modulo with the sign of the divisor (Python), or C fmod when `fmod`.
    Mod { fmod: bool },
    Max,
    Min,
    And,
    Or,
    Xor,
    Equal,
    Less,
    LessOrEqual,
    Greater,
    GreaterOrEqual,
    BitShiftLeft,
    BitShiftRight,
    BitAnd,
    BitOr,
    BitXor,
    /// x if x >= 0 else slope * x (slope broadcast to x).
    PRelu,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
    L1,
    L2,
    LogSum,
    LogSumExp,
    SumSquare,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AutoPad {
    NotSet,
    SameUpper,
    SameLower,
    Valid,
}

/// Geometry shared by convolution and pooling. Empty vectors mean "derive from the input"
/// (all ones for strides/dilations, zeros for pads).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Window {
    pub kernel_shape: Vec<usize>,
    pub strides: Vec<usize>,
    /// ONNX layout: all begins, then all ends.
    pub pads: Vec<usize>,
    pub dilations: Vec<usize>,
    pub auto_pad: AutoPad,
    pub ceil_mode: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PoolKind {
    Max,
    Avg { count_include_pad: bool },
    Lp { p: f32 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScatterReduction {
    None,
    Add,
    Mul,
    Max,
    Min,
}

#[derive(Debug, Clone)]
pub enum Op {
    /// An op defined in one place, `crate::ops` (its shape rule, evaluation, emission, cost
    /// and gradient are methods of its type).
    Def(crate::ops::OpRef),

    // ---- elementwise
    Unary(UnaryOp),
    /// Two inputs, numpy broadcasting. Comparison and logic ops produce bool.
    Binary(BinaryOp),

    // ---- neural-network ops
    /// (X, W, B?) grouped N-d convolution.
    Conv { window: Window, group: usize },
    /// Generated code only (`passes::fuse`): (X, W, B?, R?, M?, A?) a Conv whose output loop
    /// also multiplies by M and adds A (per channel, `[C]`), adds the residual R (the output's
    /// shape) and applies `act`: `act((conv(X, W) + B) · M + A + R)`, in that order.
    FusedConv { window: Window, group: usize, act: Act },
    /// Generated code only (`passes::fuse`): a group of f32 elementwise nodes computed in one
    /// loop. Each input has the output's shape or one element; the program gives each output
    /// element from the inputs' elements at the same index.
    Elementwise(Box<super::scalar::ScalarProgram>),

    // ---- shape and data movement
    Reshape { allowzero: bool },
    Concat { axis: i64 },
    Gather { axis: i64 },
    Expand,
    /// (data, pads, constant_value?, axes?).
    ConstantOfShape { value: Tensor },

    // ---- sequences and optionals (interpreter-level values)
    Seq(SeqOp),


    // ---- control flow (subgraphs read outer values by name)
    If { then_branch: Box<Graph>, else_branch: Box<Graph> },
    Loop { body: Box<Graph> },
    /// (sequence, additional inputs…): runs `body` once per element; each output is a sequence.
    SequenceMap { body: Box<Graph> },
    Scan { body: Box<Graph>, num_scan_inputs: usize, input_axes: Vec<i64>, output_axes: Vec<i64>, input_directions: Vec<i64>, output_directions: Vec<i64> },
}

#[derive(Debug, Clone, PartialEq)]
pub enum SeqOp {
    Construct,
    Empty { dtype: DType },
    At,
    Insert,
    Erase,
    Length,
    ConcatFrom { axis: i64, new_axis: bool },
    SplitTo { axis: i64, keepdims: bool },
    /// Wrap a value (or, with no input, an empty optional of `ty`'s type) into an optional.
    OptionalMake,
    OptionalHasElement,
    OptionalGetElement,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LossReduction {
    None,
    Sum,
    Mean,
}

/// Attributes of the recurrent ops; the cell, direction and activations are the runtime
/// kernel's own types, so codegen writes them out as they are.
#[derive(Debug, Clone, PartialEq)]
pub struct RnnAttrs {
    pub cell: burnc_runtime::kernels::rnn::Cell,
    pub direction: burnc_runtime::kernels::rnn::Direction,
    /// `hidden_size`, when given (else R's last dim).
    pub hidden_size: Option<usize>,
    /// `cell.acts()` per direction, forward first, alpha/beta resolved.
    pub activations: Vec<burnc_runtime::kernels::rnn::Act>,
    pub clip: Option<f32>,
    /// layout = 1.
    pub batch_first: bool,
}

/// The subgraphs of op `$op`, each taken by `$r` (`as_ref` or `as_mut`). Every variant is
/// named (no `_`), so a new op that carries a graph is not missed.
macro_rules! bodies {
    ($op:expr, $r:ident) => {
        match $op {
            Op::If { then_branch, else_branch } => vec![then_branch.$r(), else_branch.$r()],
            Op::Loop { body } | Op::Scan { body, .. } | Op::SequenceMap { body } => vec![body.$r()],
            Op::Def(_) | Op::Unary(_) | Op::Binary(_) | Op::Conv { .. } | Op::FusedConv { .. }
            | Op::Elementwise(_)
            | Op::Reshape { .. }
            | Op::Concat { .. } | Op::Gather { .. } | Op::Expand | Op::ConstantOfShape { .. } | Op::Seq(_) => vec![],
        }
    };
}

impl Op {
    /// The subgraphs the op carries (If branches, Loop/Scan/SequenceMap bodies).
    pub fn subgraphs(&self) -> Vec<&Graph> {
        bodies!(self, as_ref)
    }

    /// [`Op::subgraphs`], to change.
    pub fn subgraphs_mut(&mut self) -> Vec<&mut Graph> {
        bodies!(self, as_mut)
    }

    /// Inputs the op overwrites when it runs in place (generated training code): every other
    /// reader of them must run first.
    pub fn mutated_inputs(&self) -> &'static [usize] {
        match self {
            Op::Def(d) => d.mutated_inputs(),
            // Every other variant, named so that a new one is decided here.
            Op::Unary(_) | Op::Binary(_) | Op::Conv { .. } | Op::FusedConv { .. }
            | Op::Elementwise(_)
            | Op::Reshape { .. }
            | Op::Concat { .. } | Op::Gather { .. } | Op::Expand | Op::ConstantOfShape { .. } | Op::Seq(_) | Op::If { .. }
            | Op::Loop { .. } | Op::SequenceMap { .. } | Op::Scan { .. } => &[],
        }
    }

    /// Whether output 0 is input 0's bytes (see [`crate::ops::OpDef::is_view`]): Reshape,
    /// Identity, and the ops whose definition says so.
    pub fn is_view(&self) -> bool {
        match self {
            Op::Reshape { .. } | Op::Unary(UnaryOp::Identity) => true,
            Op::Def(d) => d.is_view(),
            // Every other variant, named so that a new one is decided here.
            Op::Unary(_) | Op::Binary(_) | Op::Conv { .. } | Op::FusedConv { .. }
            | Op::Elementwise(_) 
            | Op::Concat { .. } | Op::Gather { .. } | Op::Expand
            | Op::ConstantOfShape { .. } | Op::Seq(_) | Op::If { .. } | Op::Loop { .. }
            | Op::SequenceMap { .. } | Op::Scan { .. } => false,
        }
    }

    /// The op's definition when it is a `T` (`crate::ops`).
    pub fn get<T: crate::ops::OpDef + 'static>(&self) -> Option<&T> {
        match self {
            Op::Def(d) => d.get::<T>(),
            _ => None,
        }
    }

    /// Short name for printing and op counts.
    pub fn name(&self) -> String {
        match self {
            Op::Unary(u) => format!("{u:?}").split([' ', '{']).next().unwrap_or("Unary").to_string(),
            Op::Binary(b) => format!("{b:?}").split([' ', '{']).next().unwrap_or("Binary").to_string(),
            Op::Def(d) => d.name().into(),
            other => format!("{other:?}").split([' ', '{', '(']).next().unwrap_or("?").to_string(),
        }
    }
}
