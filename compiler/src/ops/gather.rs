//! GatherElements and GatherND. GatherElements `(data, indices)`: the output has the indices' shape; each element is the
//! data's at the same position with the coordinate along `axis` taken from the index. One
//! runtime kernel, `kernels::gather::gather_elements`, for the interpreter and generated code;
//! the interpreter refuses an index out of range, generated code reads a zero for it.
use super::{input, move_bytes, EmitCx, GradCx, MoveBytes, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::CodegenError;
use crate::ir::axis::norm_axis;
use crate::interp::ops::shape::take;
use crate::ir::{DType, DimExpr, ValueId};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::gather::{gather_elements, gather_nd};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GatherElements {
    pub axis: i64,
}

impl GatherElements {
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
    name!("GatherElements");
    none_of!(cuda, scratch_bytes, in_place, decides_shapes, forwards_values, flops);

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
        let k = AlongAxis { dims: &x.shape, idx: &iv, idx_dims: &ind.shape, axis: a };
        Ok(vec![move_bytes("GatherElements", x, None, ind.shape.clone(), &k)?])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let a = self.axis(&mut cx.shape_cx()?).map_err(|e| cx.err(e))?;
        emit_gather(cx, "gather_elements", a)
    }

    // The picked elements' gradients scattered back (added where one was picked twice).
    fn gradient(&self, cx: &mut GradCx) -> R<Vec<Option<ValueId>>> {
        crate::autodiff::shape::picked(cx)
    }
}

/// GatherND `(data, indices)`: the last dim of the indices is a tuple length `k`; each tuple
/// picks the slice of the data at those coordinates (after `batch_dims` leading dims that the
/// data and the indices share). The output is `indices.dims[..-1] ++ data.dims[batch_dims + k..]`.
/// One runtime kernel, `kernels::gather::gather_nd`, moves the elements in generated code and,
/// on their indices, in the interpreter; the interpreter refuses an index out of range,
/// generated code gives zeros for it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GatherNd {
    pub batch_dims: usize,
}

impl GatherNd {
    /// The tuple length and the output dims, with the batch dims checked equal.
    fn geometry(&self, cx: &mut ShapeCx) -> R<(usize, Vec<DimExpr>)> {
        let (xs, is) = (cx.arg(0)?.dims()?.to_vec(), cx.arg(1)?.dims()?.to_vec());
        let b = self.batch_dims;
        let Some(last) = is.last() else { return Err("indices must have rank >= 1".into()) };
        let k = last.as_const().ok_or_else(|| format!("the indices' last dim {last} must be fixed (it is the tuple length)"))? as usize;
        if b >= is.len() || b >= xs.len() || b + k > xs.len() {
            return Err(format!("index tuples of length {k} with batch_dims {b} do not fit data of rank {}", xs.len()));
        }
        for d in 0..b {
            cx.equal(&format!("the data's and the indices' batch dim {d}"), &xs[d], &is[d])?;
        }
        let mut out = is[..is.len() - 1].to_vec();
        out.extend_from_slice(&xs[b + k..]);
        Ok((k, out))
    }
}

impl OpDef for GatherNd {
    name!("GatherND");
    none_of!(cuda, wgsl, scratch_bytes, in_place, decides_shapes, forwards_values, flops);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let (x, i) = (cx.arg(0)?.clone(), cx.arg(1)?.clone());
        if !i.dtype.is_int() {
            return Err(format!("indices must be integers, got {}", i.dtype));
        }
        let dims = match (&x.dims, &i.dims) {
            (Some(_), Some(_)) => Some(self.geometry(cx)?.1),
            _ => None,
        };
        Ok(vec![OutType { dtype: x.dtype, dims }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let (x, ind) = (input(ins, 0)?, input(ins, 1)?);
        let (k, out) = self.geometry(&mut ShapeCx::of_shapes(ins.iter().map(|t| t.map(|t| (t.dtype(), &t.shape[..])))))?;
        let iv = ind.to_i64_vec().filter(|_| ind.dtype().is_int()).ok_or("indices must be integers")?;
        // Entry j of each tuple indexes the data's dim batch_dims + j.
        for (p, &v) in iv.iter().enumerate() {
            let d = x.shape[self.batch_dims + p % k.max(1)] as i64;
            if v < -d || v >= d {
                return Err(format!("index {v} is out of range for a dim of {d}"));
            }
        }
        let shape: Vec<usize> = out.iter().map(|d| d.as_const().unwrap_or(0).max(0) as usize).collect();
        let iota: Vec<usize> = (0..x.numel()).collect();
        let mut idx = vec![0; shape.iter().product()];
        gather_nd(&iota, &x.shape, &iv, &ind.shape, self.batch_dims, 0, &mut idx);
        Ok(vec![Tensor::new(shape, take(&x.data, &idx))])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        self.geometry(&mut cx.shape_cx()?).map_err(|e| cx.err(e))?;
        emit_gather(cx, "gather_nd", self.batch_dims)
    }

    // The picked slices' gradients scattered back (added where one was picked twice).
    fn gradient(&self, cx: &mut GradCx) -> R<Vec<Option<ValueId>>> {
        crate::autodiff::shape::picked(cx)
    }
}

/// The runtime's `kernel(data, dims, indices, index dims, extra, zero, y)` (GatherElements'
/// `extra` is its axis, GatherND's its batch_dims; an index out of range reads zero).
fn emit_gather(cx: &EmitCx, kernel: &str, extra: usize) -> Result<String, CodegenError> {
    let (x, ind) = (cx.input(0)?, cx.input(1)?);
    Ok(format!(
        "rt::kernels::gather::{kernel}({}, &{}, {}, &{}, {extra}, Default::default(), {});",
        cx.read(x)?,
        cx.sizes(&cx.dims(x)?)?,
        cx.read(ind)?,
        cx.sizes(&cx.dims(ind)?)?,
        cx.write(cx.output(0)?)?
    ))
}

/// GatherElements' and ScatterElements' geometry: the data's dims, the indices and their dims,
/// and the axis the indices run along.
pub(crate) struct AlongAxis<'a> {
    pub dims: &'a [usize],
    pub idx: &'a [i64],
    pub idx_dims: &'a [usize],
    pub axis: usize,
}

/// The kernel on raw elements (see [`move_bytes`]).
impl MoveBytes for AlongAxis<'_> {
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
        super::Example { consts: vec![], op: op(0), inputs: vec![x.clone(), along0] },
        // Rows by 1-tuples, the first and last (in range at every size of the data).
        super::Example { consts: vec![], op: OpRef::new(GatherNd { batch_dims: 0 }), inputs: vec![x.clone(), Tensor::from_i64s(vec![2, 1], vec![0, -1])] },
        // Elements by 2-tuples.
        super::Example { consts: vec![], op: OpRef::new(GatherNd { batch_dims: 0 }), inputs: vec![x, Tensor::from_i64s(vec![4, 2], vec![0, 2, -1, 0, 0, -1, -1, 3])] },
        // One batch dim shared by data and indices.
        super::Example {
            consts: vec![],
            op: OpRef::new(GatherNd { batch_dims: 1 }),
            inputs: vec![Tensor::from_i64s(vec![2, 3, 2], (0..12).collect()), Tensor::new(vec![2, 1], Data::I32(vec![2, 0]))],
        },
    ]
}
