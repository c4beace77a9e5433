//! GatherElements `(data, indices)`: the output has the indices' shape; each element is the
//! data's at the same position with the coordinate along `axis` taken from the index. One
//! runtime kernel, `kernels::gather::gather_elements`, for the interpreter and generated code;
//! the interpreter refuses an index out of range, generated code reads a zero for it.
use super::{input, move_bytes, EmitCx, GradCx, MoveBytes, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::CodegenError;
use crate::ir::axis::norm_axis;
use crate::ir::{DType, Op, ValueId};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::gather::gather_elements;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GatherElements {
    pub axis: i64,
}

impl GatherElements {
    pub fn op(self) -> Op {
        Op::Def(OpRef::new(self))
    }

    /// The axis, with the indices' dims checked against the data's.
    fn axis(&self, cx: &mut ShapeCx) -> R<usize> {
        let (xs, is) = (cx.arg(0)?.dims()?.to_vec(), cx.arg(1)?.dims()?.to_vec());
        if xs.len() != is.len() || xs.is_empty() {
            return Err(format!("indices of rank {} for data of rank {}", is.len(), xs.len()));
        }
        let a = norm_axis(self.axis, xs.len())?;
        for d in (0..xs.len()).filter(|&d| d != a) {
            cx.at_most(&format!("the indices' and the data's dim {d}"), &is[d], &xs[d])?;
        }
        Ok(a)
    }
}

impl OpDef for GatherElements {
    none_of!(cuda, scratch_bytes, in_place, decides_shapes, forwards_values);

    // Output element i: the data's element at i's coordinates (over the indices' shape), the
    // one along the axis from the index; out of range reads zero, as the CPU code does.
    fn wgsl(&self, cx: &super::WgslCx) -> Result<Vec<super::WgslKernel>, CodegenError> {
        use crate::codegen::index::strides;
        let (x, ix, y) = (cx.input(0)?, cx.input(1)?, cx.output(0)?);
        let a = norm_axis(self.axis, x.shape.len()).map_err(|e| cx.err(e))?;
        let (ys, xs) = (strides(&y.shape), strides(&x.shape));
        let len = x.shape[a];
        let zero = if crate::codegen::wgsl::scalar::is_float(x.dtype) { "0.0" } else if x.dtype.size() >= 4 { "0i" } else { "0u" };
        Ok(vec![cx.pointwise(&y, |i| {
            let rest: Vec<String> = (0..y.shape.len()).filter(|&d| d != a && y.shape[d] != 1).map(|d| format!("(({i} / {}u) % {}u) * {}u", ys[d], y.shape[d], xs[d])).collect();
            let rest = if rest.is_empty() { "0u".to_string() } else { rest.join(" + ") };
            Ok((
                format!("var k = {};\nif (k < 0) {{ k += {len}; }}\nvar v = {zero};\nif (k >= 0 && k < {len}) {{ v = {}; }}\n", ix.load(i), x.load(&format!("{rest} + u32(k) * {}u", xs[a]))),
                "v".into(),
            ))
        })?])
    }

    fn name(&self) -> &'static str {
        "GatherElements"
    }

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let (x, i) = (cx.arg(0)?.clone(), cx.arg(1)?.clone());
        if !matches!(i.dtype, DType::I32 | DType::I64) {
            return Err(format!("indices must be int32 or int64, got {}", i.dtype));
        }
        if x.dims.is_some() && i.dims.is_some() {
            self.axis(cx)?;
        }
        Ok(vec![OutType { dtype: x.dtype, dims: i.dims }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let (x, ind) = (input(ins, 0)?, input(ins, 1)?);
        let a = self.axis(&mut ShapeCx::of_shapes(ins.iter().map(|t| t.map(|t| (t.dtype(), &t.shape[..])))))?;
        let iv = ind.to_i64_vec().ok_or("indices must be integers")?;
        let len = x.shape[a] as i64;
        if let Some(v) = iv.iter().find(|&&v| v < -len || v >= len) {
            return Err(format!("index {v} is out of range for an axis of {len}"));
        }
        let k = GatherBytes { dims: &x.shape, idx: &iv, idx_dims: &ind.shape, axis: a };
        Ok(vec![move_bytes("GatherElements", x, None, ind.shape.clone(), &k)?])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let (x, ind) = (cx.input(0)?, cx.input(1)?);
        let a = self.axis(&mut cx.shape_cx()?).map_err(|e| cx.err(e))?;
        Ok(format!(
            "rt::kernels::gather::gather_elements({}, &{}, {}, &{}, {a}, Default::default(), {});",
            cx.read(x)?,
            cx.sizes(&cx.dims(x)?)?,
            cx.read(ind)?,
            cx.sizes(&cx.dims(ind)?)?,
            cx.write(cx.output(0)?)?
        ))
    }

    fn flops(&self, _: &[Option<Vec<usize>>], _: &[Option<Vec<usize>>]) -> Option<u64> {
        Some(0)
    }

    // The picked elements' gradients scattered back (added where one was picked twice).
    fn gradient(&self, cx: &mut GradCx) -> R<Vec<Option<ValueId>>> {
        let dy = cx.dy()?;
        crate::autodiff::shape::picked(cx.b, cx.n, dy)
    }
}

/// The kernel on raw elements (see [`move_bytes`]).
struct GatherBytes<'a> {
    dims: &'a [usize],
    idx: &'a [i64],
    idx_dims: &'a [usize],
    axis: usize,
}

impl MoveBytes for GatherBytes<'_> {
    fn run<const W: usize>(&self, x: &[[u8; W]], zero: [u8; W]) -> Vec<[u8; W]> {
        let mut y = vec![zero; self.idx.len()];
        gather_elements(x, self.dims, self.idx, self.idx_dims, self.axis, zero, &mut y);
        y
    }
}

pub fn examples() -> Vec<super::Example> {
    let x = Tensor::from_f32s(vec![3, 4], (0..12).map(|i| i as f32 * 1.5 - 4.0).collect());
    let along1 = Tensor::from_i64s(vec![3, 2], vec![3, 0, -1, 1, 2, 2]);
    // First and last rows only: in range whatever the data's first dim (the bounded run
    // shrinks it).
    let along0 = Tensor::new(vec![2, 4], Data::I32(vec![0, -1, 0, -1, -1, 0, 0, -1]));
    let op = |axis| OpRef::new(GatherElements { axis });
    vec![
        super::Example { consts: vec![], op: op(1), inputs: vec![x.clone(), along1] },
        super::Example { consts: vec![], op: op(0), inputs: vec![x, along0] },
    ]
}
