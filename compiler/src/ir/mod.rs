//! burnc's intermediate representation: one graph type for every frontend.
pub mod axis;
mod dimexpr;
mod dtype;
mod graph;
mod op;
mod printer;
pub mod scalar;
mod shape;
pub mod verify;

pub use dtype::{onnx_code_name, DType};
pub use graph::{unique_name, Graph, Node, NodeId, Param, TensorType, Value, ValueId, ValueKind, ValueType};
pub use op::{Act, AutoPad, LossReduction, BinaryOp, Op, PoolKind, ReduceOp, RnnAttrs, ScatterReduction, SeqOp, UnaryOp, Window};
pub use burnc_runtime::kernels::rnn::{Act as RnnAct, Cell as RnnCell, Direction as RnnDirection};
/// The ML kernels' mode and layout constants, for frontends building their tables.
pub use burnc_runtime::kernels::ml as ml_kernel;
pub use shape::{Dim, Shape};
pub use dimexpr::{rust_operand, Atom, Constraint, DimExpr, Rel};
/// GridSample's modes are the runtime kernel's own.
pub use burnc_runtime::kernels::grid::{GridMode, GridPadding};
pub use burnc_runtime::kernels::pad::PadMode;
