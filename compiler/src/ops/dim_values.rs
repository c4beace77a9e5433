//! Integers computed from the inputs' dims: DimValues, written when the model runs, Size and
//! Shape.
//!
//! With fixed shapes a shape computation (`Shape → Gather → Cast …`) folds to constants. With
//! bounded dims the graph is pinned at the bounds before folding, so a dim's value that
//! reaches data — a graph output, a Cast to float (`1/√head_size`), a comparison — would be
//! its bound. Bounded codegen gives such a value this op instead (`passes::dim_values`): the
//! expressions the bounded analysis found for it, evaluated from the run-time dims.
use super::{input, product, EmitCx, GradCx, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::CodegenError;
use crate::interp::ops::cast::cast;
use crate::ir::{DType, DimExpr, ValueId};
use crate::tensor::Tensor;

/// `values` over named dims, each read from an input: `dims[k] = (name, input, axis)`. The
/// output is `[values.len()]`, or a scalar when `scalar`, of an integer type, f32 or f64 (a
/// shape cast to float: `1/√head_size`).
#[derive(Debug, Clone, PartialEq)]
pub struct DimValues {
    pub values: Vec<DimExpr>,
    pub dims: Vec<(String, usize, usize)>,
    pub scalar: bool,
    pub dtype: DType,
}

impl DimValues {
    fn out_dims(&self) -> Vec<DimExpr> {
        if self.scalar {
            vec![]
        } else {
            vec![DimExpr::constant(self.values.len() as i64)]
        }
    }

    /// Whether values of `dtype` can hold dims (as generated code writes them with `as`).
    pub fn holds(dtype: DType) -> bool {
        (dtype.is_int() && dtype.bits() >= 8) || matches!(dtype, DType::F32 | DType::F64)
    }

    /// Input and axis of named dim `name`.
    fn source(&self, name: &str) -> Option<(usize, usize)> {
        self.dims.iter().find(|(n, _, _)| n == name).map(|&(_, i, a)| (i, a))
    }
}

impl OpDef for DimValues {
    name!("DimValues");
    none_of!(cuda, wgsl, scratch_bytes, in_place, decides_shapes, forwards_values, flops);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        if !Self::holds(self.dtype) {
            return Err(format!("dim values as {}: an integer type, f32 or f64 is needed", self.dtype));
        }
        if self.scalar && self.values.len() != 1 {
            return Err(format!("a scalar of {} values", self.values.len()));
        }
        if let Some(name) = self.values.iter().flat_map(|e| e.vars()).find(|n| self.source(n).is_none()) {
            return Err(format!("dim `{name}` is read from no input"));
        }
        for (name, i, a) in &self.dims {
            let rank = cx.arg(*i)?.dims()?.len();
            if *a >= rank {
                return Err(format!("dim `{name}` is axis {a} of input #{i}, of rank {rank}"));
            }
        }
        Ok(vec![OutType { dtype: self.dtype, dims: Some(self.out_dims()) }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let dim = |name: &str| {
            let (i, a) = self.source(name)?;
            let d = *input(ins, i).ok()?.shape.get(a)?;
            i64::try_from(d).ok()
        };
        let values = self.values.iter().map(|e| e.eval(&dim).ok_or_else(|| format!("cannot evaluate {e} from the inputs' dims"))).collect::<R<Vec<i64>>>()?;
        let shape = if self.scalar { vec![] } else { vec![values.len()] };
        Ok(vec![cast(&Tensor::from_i64s(shape, values), self.dtype, false)?])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let mut sizes = Vec::with_capacity(self.dims.len());
        for (name, i, a) in &self.dims {
            let d = cx.dims(cx.input(*i)?)?.get(*a).cloned().ok_or_else(|| cx.err(format!("dim `{name}`: input #{i} has no axis {a}")))?;
            sizes.push((name.as_str(), cx.size(&d)?));
        }
        let var = |n: &str| sizes.iter().find(|(s, _)| *s == n).map_or_else(|| "0i64".to_string(), |(_, e)| format!("({e} as i64)"));
        let elem = cx.elem(cx.output(0)?)?;
        let values: Vec<String> = self.values.iter().map(|e| format!("{} as {elem}", crate::ir::rust_operand(e.to_rust(&var)))).collect();
        Ok(format!("{}.copy_from_slice(&[{}]);", cx.write(cx.output(0)?)?, values.join(", ")))
    }

    fn gradient(&self, _: &mut GradCx) -> R<Vec<Option<ValueId>>> {
        Err("DimValues has no gradient: its values are integers".into())
    }
}

/// Size: the input's element count, an int64 scalar. The shape rule gives its value as the
/// product of the input's dims, so a fixed-shape input folds it to a constant and the bounded
/// analysis follows it through shape computations; the emitter writes the run-time count.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Size;

impl OpDef for Size {
    name!("Size");
    none_of!(cuda, wgsl, scratch_bytes, in_place, decides_shapes, forwards_values, flops);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        if let Some(xs) = cx.arg(0)?.dims.clone() {
            cx.set_out_ints(0, vec![product(&xs)]);
        }
        Ok(vec![OutType { dtype: DType::I64, dims: Some(vec![]) }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        Ok(vec![Tensor::scalar_i64(input(ins, 0)?.numel() as i64)])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        Ok(format!("{}[0] = {} as i64;", cx.write(cx.output(0)?)?, cx.numel(cx.input(0)?)?))
    }

    fn gradient(&self, _: &mut GradCx) -> R<Vec<Option<ValueId>>> {
        Err("Size has no gradient: its value is an integer".into())
    }
}

/// Shape: dims `start..end` of the input (negative from the end, both clamped to the rank), an
/// int64 vector. The shape rule gives its values as the input's dims, so fixed dims fold to
/// constants and named dims flow through shape computations (`Shape → Gather → Concat →
/// Reshape`) in inference and in the bounded analysis; under bounded dims a Shape whose
/// values reach data becomes a [`DimValues`] (`passes::dim_values`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shape {
    pub start: i64,
    pub end: Option<i64>,
}

impl Shape {
    /// The axes `start..end` selects of a rank-`rank` input.
    pub fn axes(&self, rank: usize) -> std::ops::Range<usize> {
        let r = rank as i64;
        let clamp = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
        let (a, b) = (clamp(self.start), clamp(self.end.unwrap_or(r)));
        a..b.max(a)
    }
}

impl OpDef for Shape {
    name!("Shape");
    none_of!(cuda, wgsl, scratch_bytes, in_place, decides_shapes, forwards_values, flops);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let len = match cx.arg(0)?.dims.clone() {
            Some(xs) => {
                let values = xs[self.axes(xs.len())].to_vec();
                let len = DimExpr::constant(values.len() as i64);
                cx.set_out_ints(0, values);
                len
            }
            None => cx.unknown(),
        };
        Ok(vec![OutType { dtype: DType::I64, dims: Some(vec![len]) }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let x = input(ins, 0)?;
        let dims: Vec<i64> = x.shape[self.axes(x.rank())].iter().map(|&d| d as i64).collect();
        Ok(vec![Tensor::from_i64s(vec![dims.len()], dims)])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let xs = cx.dims(cx.input(0)?)?;
        let values = xs[self.axes(xs.len())].iter().map(|d| Ok(format!("{} as i64", cx.size(d)?))).collect::<Result<Vec<_>, CodegenError>>()?;
        Ok(format!("{}.copy_from_slice(&[{}]);", cx.write(cx.output(0)?)?, values.join(", ")))
    }

    fn gradient(&self, _: &mut GradCx) -> R<Vec<Option<ValueId>>> {
        Err("Shape has no gradient: its values are integers".into())
    }
}

/// Examples: a shape's tail and an element count, fixed and bounded.
pub fn examples() -> Vec<super::Example> {
    let x = Tensor::from_f32s(vec![2, 3, 4], (0..24).map(|v| v as f32).collect());
    let y = Tensor::from_f32s(vec![5], vec![0.0; 5]);
    let (a, b, k) = (DimExpr::var("a"), DimExpr::var("b"), DimExpr::var("k"));
    let dims = vec![("a".to_string(), 0, 1), ("b".to_string(), 0, 2), ("k".to_string(), 1, 0)];
    vec![
        super::Example { consts: vec![], op: OpRef::new(DimValues { values: vec![a.clone(), b.clone()], dims: dims[..2].to_vec(), scalar: false, dtype: DType::I64 }), inputs: vec![x.clone()] },
        super::Example { consts: vec![], op: OpRef::new(DimValues { values: vec![a.mul(&b).add(&k).floor_div(2)], dims, scalar: true, dtype: DType::I32 }), inputs: vec![x.clone(), y] },
        super::Example { consts: vec![], op: OpRef::new(Size), inputs: vec![x.clone()] },
        super::Example { consts: vec![], op: OpRef::new(Shape { start: 1, end: None }), inputs: vec![x.clone()] },
        super::Example { consts: vec![], op: OpRef::new(Shape { start: -2, end: Some(-1) }), inputs: vec![x] },
        super::Example { consts: vec![], op: OpRef::new(Size), inputs: vec![Tensor::from_i64s(vec![3, 1], vec![4, 5, 6])] },
    ]
}

