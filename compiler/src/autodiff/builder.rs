//! Appending backward nodes: each node is typed as soon as it is added (by the same per-node
//! inference the `infer` pass runs), so later rules can read the dims of gradients built
//! before them without re-running inference over the whole graph.
use crate::ir::{DType, Dim, Graph, Op, ReduceOp, ValueId, ValueKind, ValueType};
use crate::ops::IntoOp;
use crate::passes::infer::{infer_node, merge};
use crate::tensor::{Data, Tensor};
use std::collections::HashSet;

/// Result of a rule: a reason on failure (the driver adds the node and op).
pub type R<T> = Result<T, String>;

pub struct B<'g> {
    pub g: &'g mut Graph,
    names: HashSet<String>,
    counter: usize,
    /// Name of the forward node whose rule is running: backward nodes are named after it, so
    /// errors and `burnc inspect --graph` point back at the forward op.
    pub label: String,
}

impl<'g> B<'g> {
    pub fn new(g: &'g mut Graph) -> Self {
        let names = g.values.iter().map(|v| v.name.clone()).collect();
        B { g, names, counter: 0, label: String::new() }
    }

    /// A value name no other value has (generated code derives identifiers from names).
    fn fresh(&mut self) -> String {
        loop {
            self.counter += 1;
            let name = format!("{}/grad_{}", self.label, self.counter);
            if self.names.insert(name.clone()) {
                return name;
            }
        }
    }

    /// Append `op` with `n_out` outputs and type them.
    pub fn node_n(&mut self, op: Op, inputs: Vec<Option<ValueId>>, n_out: usize) -> R<Vec<ValueId>> {
        let names: Vec<String> = (0..n_out).map(|_| self.fresh()).collect();
        let label = format!("{}/grad", self.label);
        let (nid, outs) = self.g.add_node(label, op, inputs, &names);
        let tys = infer_node(self.g, self.g.node(nid))?;
        for (&o, t) in outs.iter().zip(tys) {
            let v = self.g.value_mut(o);
            v.ty = merge(&v.ty, t);
        }
        Ok(outs)
    }

    pub fn node(&mut self, op: Op, inputs: &[ValueId]) -> R<ValueId> {
        let outs = self.node_n(op, inputs.iter().map(|&v| Some(v)).collect(), 1)?;
        outs.first().copied().ok_or_else(|| "internal: a node without outputs".to_string())
    }

    pub fn konst(&mut self, t: Tensor) -> ValueId {
        let name = self.fresh();
        self.g.add_const(name, t)
    }

    pub fn ints(&mut self, v: &[i64]) -> ValueId {
        self.konst(Tensor::from_i64s(vec![v.len()], v.to_vec()))
    }

    /// A scalar constant of a float dtype.
    pub fn scalar(&mut self, v: f64, dtype: DType) -> R<ValueId> {
        Ok(self.konst(scalar_tensor(v, dtype)?))
    }

    pub fn dtype(&self, v: ValueId) -> R<DType> {
        self.g.tensor_type(v).map(|t| t.dtype).ok_or_else(|| format!("the type of `{}` is not known", self.g.value(v).name))
    }

    /// Dims of `v`; the rank must be known.
    pub fn dims(&self, v: ValueId) -> R<Vec<Dim>> {
        self.g
            .tensor_type(v)
            .and_then(|t| t.shape.as_ref())
            .map(|s| s.0.clone())
            .ok_or_else(|| format!("the rank of `{}` is not known", self.g.value(v).name))
    }

    pub fn rank(&self, v: ValueId) -> R<usize> {
        Ok(self.dims(v)?.len())
    }

    /// Dims of `v`, all fixed (rules that pick kernel geometry need them).
    pub fn fixed_dims(&self, v: ValueId) -> R<Vec<usize>> {
        let d = self.dims(v)?;
        d.iter()
            .map(|d| d.fixed())
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| format!("the shape of `{}` must be static, got {:?}", self.g.value(v).name, d))
    }

    /// `v`'s shape as a 1-D i64 value: a constant when static (so inference sees the dims),
    /// else a Shape node (folded later once the dims are pinned).
    pub fn shape_of(&mut self, v: ValueId) -> R<ValueId> {
        match self.fixed_dims(v) {
            Ok(d) => Ok(self.ints(&d.iter().map(|&x| x as i64).collect::<Vec<_>>())),
            Err(_) => self.node(crate::ops::dim_values::Shape { start: 0, end: None }.op(), &[v]),
        }
    }

    pub fn reshape_like(&mut self, v: ValueId, like: ValueId) -> R<ValueId> {
        if self.dims(v).ok() == Some(self.dims(like)?) && self.fixed_dims(like).is_ok() {
            return Ok(v);
        }
        let s = self.shape_of(like)?;
        self.node(Op::Reshape { allowzero: false }, &[v, s])
    }

    pub fn bin(&mut self, op: crate::ir::BinaryOp, a: ValueId, b: ValueId) -> R<ValueId> {
        self.node(Op::Binary(op), &[a, b])
    }
    pub fn add(&mut self, a: ValueId, b: ValueId) -> R<ValueId> {
        self.bin(crate::ir::BinaryOp::Add, a, b)
    }
    pub fn sub(&mut self, a: ValueId, b: ValueId) -> R<ValueId> {
        self.bin(crate::ir::BinaryOp::Sub, a, b)
    }
    pub fn mul(&mut self, a: ValueId, b: ValueId) -> R<ValueId> {
        self.bin(crate::ir::BinaryOp::Mul, a, b)
    }
    pub fn div(&mut self, a: ValueId, b: ValueId) -> R<ValueId> {
        self.bin(crate::ir::BinaryOp::Div, a, b)
    }
    pub fn un(&mut self, u: crate::ir::UnaryOp, a: ValueId) -> R<ValueId> {
        self.node(Op::Unary(u), &[a])
    }
    pub fn neg(&mut self, a: ValueId) -> R<ValueId> {
        self.node(Op::Unary(crate::ir::UnaryOp::Neg), &[a])
    }

    pub fn reduce_sum(&mut self, v: ValueId, axes: Vec<i64>, keepdims: bool) -> R<ValueId> {
        self.node(crate::ops::reduce::Reduce { op: ReduceOp::Sum, axes: Some(axes), keepdims, noop_with_empty_axes: false }.op(), &[v])
    }

    pub fn transpose(&mut self, v: ValueId, perm: Vec<usize>) -> R<ValueId> {
        self.node(crate::ops::transpose::Transpose { perm: Some(perm) }.op(), &[v])
    }

    /// Zeros shaped like `like`, of its dtype.
    pub fn zeros_like(&mut self, like: ValueId) -> R<ValueId> {
        let dt = self.dtype(like)?;
        let s = self.shape_of(like)?;
        self.node(Op::ConstantOfShape { value: scalar_tensor(0.0, dt)? }, &[s])
    }

    /// Undo numpy broadcasting: sum `grad` (shaped like the op's output) down to the shape of
    /// operand `like`. Leading dims the operand lacks are summed away, and so are dims where
    /// the operand has a fixed 1; the reduction keeps dims and a Reshape drops the leading ones.
    pub fn sum_to(&mut self, grad: ValueId, like: ValueId) -> R<ValueId> {
        let gd = self.dims(grad)?;
        let ld = self.dims(like)?;
        if gd == ld {
            return Ok(grad);
        }
        let lead = gd.len().checked_sub(ld.len()).ok_or_else(|| {
            format!("gradient of rank {} cannot be summed to operand `{}` of rank {}", gd.len(), self.g.value(like).name, ld.len())
        })?;
        let mut axes: Vec<i64> = (0..lead as i64).collect();
        for (i, l) in ld.iter().enumerate() {
            let o = &gd[lead + i];
            if l == o {
                continue;
            }
            match l {
                Dim::Fixed(1) => axes.push((lead + i) as i64),
                // An unknown operand dim next to a different output dim may or may not have
                // broadcast; summing or not would each be wrong in one case.
                _ => {
                    return Err(format!(
                        "cannot tell whether dim {i} of `{}` ({l}) broadcasts to {o}; pin the input shapes",
                        self.g.value(like).name
                    ))
                }
            }
        }
        let r = if axes.is_empty() { grad } else { self.reduce_sum(grad, axes, true)? };
        if lead == 0 {
            Ok(r)
        } else {
            self.reshape_like(r, like)
        }
    }
}

/// A scalar of a float dtype holding `v`.
pub fn scalar_tensor(v: f64, dtype: DType) -> R<Tensor> {
    filled(v, dtype, vec![])
}

/// A tensor of a float dtype with every element `v`.
pub fn filled(v: f64, dtype: DType, shape: Vec<usize>) -> R<Tensor> {
    let n: usize = shape.iter().product();
    let data = match dtype {
        DType::F32 => Data::F32(vec![v as f32; n]),
        DType::F64 => Data::F64(vec![v; n]),
        DType::F16 => Data::F16(vec![half::f16::from_f64(v); n]),
        DType::BF16 => Data::BF16(vec![half::bf16::from_f64(v); n]),
        other => return Err(format!("gradients of {other} values are not supported (floats only)")),
    };
    Ok(Tensor::new(shape, data))
}

/// Whether gradients flow through values of this type (floats; indices and shapes do not).
pub fn differentiable(ty: &ValueType) -> bool {
    matches!(ty, ValueType::Tensor(t) if matches!(t.dtype, DType::F32 | DType::F64 | DType::F16 | DType::BF16))
}

/// Constant content of a value, for rules that need attribute-like inputs (axes, perms).
pub fn const_ints(g: &Graph, v: Option<ValueId>) -> Option<Vec<i64>> {
    let v = v?;
    match &g.value(v).kind {
        ValueKind::Const(t) => t.to_i64_vec(),
        ValueKind::Param(p) => p.to_tensor()?.to_i64_vec(),
        _ => None,
    }
}

/// Normalise a possibly negative axis against `rank`.
pub use crate::ir::axis::norm_axis;
