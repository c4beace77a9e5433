//! Reductions. `Reduce` (ReduceSum, ReduceMean, ReduceMax, … over a set of axes) and ArgMax /
//! ArgMin (the index of the extreme along one axis), both run by the runtime's
//! `kernels::reduce` over an `[outer, len, inner]` view of the input. Reduced axes that are not
//! adjacent are first moved to the end by a transpose (into scratch, in generated code).
use super::{around, input, view_sizes, EmitCx, GradCx, IntoOp, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::CodegenError;
use crate::ir::axis::{distinct_axes, norm_axis, norm_axis_or_scalar};
use crate::ir::{BinaryOp, DType, DimExpr, Op, ReduceOp, UnaryOp, ValueId};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::reduce::{self as k, ReduceKind};

/// A reduction over `axes` (ONNX's opset 18 takes them as input 1 instead: `axes` is then
/// `None` and the input's values decide). No axes reduce everything, or nothing with
/// `noop_with_empty_axes`.
#[derive(Debug, Clone, PartialEq)]
pub struct Reduce {
    pub op: ReduceOp,
    pub axes: Option<Vec<i64>>,
    pub keepdims: bool,
    pub noop_with_empty_axes: bool,
}

/// The one rule for which axes a reduction reduces: `axes` normalised (each named once) and
/// sorted; `None` when it reduces nothing (`noop` with no axes). A scalar has nothing to
/// reduce over, whatever the axes: `Some([])`.
pub(crate) fn reduced_axes(axes: &[i64], noop: bool, rank: usize) -> R<Option<Vec<usize>>> {
    if axes.is_empty() {
        return Ok(if noop { None } else { Some((0..rank).collect()) });
    }
    let mut v = distinct_axes(axes, rank, norm_axis_or_scalar)?;
    if rank == 0 {
        return Ok(Some(vec![]));
    }
    v.sort_unstable();
    Ok(Some(v))
}

/// Whether sorted `axes` are one run (reduced in place as outer × red × inner).
fn contiguous(axes: &[usize]) -> bool {
    axes.last().zip(axes.first()).is_none_or(|(hi, lo)| hi - lo + 1 == axes.len())
}

impl Reduce {
    /// The reduced axes at rank `rank`, the axes taken from the attribute or else from
    /// `given` (input 1's values).
    fn axes_at(&self, given: Option<&[i64]>, rank: usize) -> R<Option<Vec<usize>>> {
        reduced_axes(self.axes.as_deref().or(given).unwrap_or(&[]), self.noop_with_empty_axes, rank)
    }

    /// Whether input 1 gives the axes (absent attribute, present input).
    fn axes_from_input(&self, has_input_1: bool) -> bool {
        self.axes.is_none() && has_input_1
    }

    /// [`Self::axes_at`] where the axes must be known when the code is made: `input_1` is
    /// `None` when the node has no input 1, else its values where they are a constant; an
    /// input the op takes its axes from that is not a constant is refused with `why`.
    fn known_axes(&self, input_1: Option<Option<Vec<i64>>>, rank: usize, why: &str) -> R<Option<Vec<usize>>> {
        let given = match input_1 {
            Some(v) if self.axes.is_none() => Some(v.ok_or(why)?),
            _ => None,
        };
        self.axes_at(given.as_deref(), rank)
    }

    /// The GPU targets' form of the reduced axes: a flag per input axis.
    fn gpu_axes(&self, g: &crate::ir::Graph, input_1: Option<ValueId>, rank: usize) -> R<Vec<bool>> {
        let konst = input_1.map(|v| crate::autodiff::builder::const_ints(g, Some(v)));
        let ax = self.known_axes(konst, rank, "the reduction axes are not constant")?;
        Ok((0..rank).map(|a| ax.as_ref().is_some_and(|ax| ax.contains(&a))).collect())
    }
}

/// Node `n` as a reduction with the attribute holding what its axes input (opset 18) holds,
/// when that input is a constant: the op then knows its axes without reading values (scratch,
/// GPU kernels, gradients), and the input can go. Folding calls it, so it applies to constants
/// that only folding makes (axes computed from a rank).
pub(crate) fn with_constant_axes(g: &crate::ir::Graph, n: &crate::ir::Node) -> Option<Op> {
    let Op::Def(d) = &n.op else { return None };
    let r = d.get::<Reduce>().filter(|r| r.axes.is_none())?;
    let axes = g.const_value(n.inputs.get(1).copied().flatten()?)?.to_i64_vec()?;
    Some(Reduce { axes: Some(axes), ..r.clone() }.op())
}

impl OpDef for Reduce {
    none_of!(in_place, forwards_values);

    fn name(&self) -> &'static str {
        match self.op {
            ReduceOp::Sum => "ReduceSum",
            ReduceOp::Mean => "ReduceMean",
            ReduceOp::Max => "ReduceMax",
            ReduceOp::Min => "ReduceMin",
            ReduceOp::Prod => "ReduceProd",
            ReduceOp::L1 => "ReduceL1",
            ReduceOp::L2 => "ReduceL2",
            ReduceOp::LogSum => "ReduceLogSum",
            ReduceOp::LogSumExp => "ReduceLogSumExp",
            ReduceOp::SumSquare => "ReduceSumSquare",
        }
    }

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let x = cx.arg(0)?.clone();
        let given: Option<Option<Vec<i64>>> = if self.axes_from_input(cx.opt(1).is_some()) {
            // Known only where input 1's values are plain integers.
            Some(cx.ints(1).and_then(|v| v.iter().map(DimExpr::as_const).collect()))
        } else {
            None
        };
        let dims = match (&x.dims, given) {
            (None, _) => None,
            // Axes decided at run time: the rank stays with keepdims, the dims are unknown.
            (Some(d), Some(None)) => self.keepdims.then(|| (0..d.len()).map(|_| cx.unknown()).collect()),
            (Some(d), given) => Some(match self.axes_at(given.flatten().as_deref(), d.len())? {
                None => d.clone(),
                Some(ax) => {
                    let kept = |i: &usize| !ax.contains(i);
                    (0..d.len()).filter_map(|i| if kept(&i) { Some(d[i].clone()) } else { self.keepdims.then(|| DimExpr::constant(1)) }).collect()
                }
            }),
        };
        Ok(vec![OutType { dtype: x.dtype, dims }])
    }

    shape_inputs!(1);

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let x = input(ins, 0)?;
        let given = match ins.get(1).copied().flatten() {
            Some(t) => Some(t.to_i64_vec().ok_or("the axes must be integers")?),
            None => None,
        };
        Ok(vec![reduce(x, self.op, self.axes_at(given.as_deref(), x.rank())?, self.keepdims)?])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let (x, y) = (cx.input(0)?, cx.output(0)?);
        if cx.dtype(x)? == DType::Bool {
            return Err(cx.err("reductions over bool are not supported by codegen yet"));
        }
        let xs = cx.dims(x)?;
        let axes = self.known_axes(cx.opt_input(1).map(|_| cx.const_ints(1)), xs.len(), "the axes must be a constant for codegen (pin them with --const)");
        let (rx, wy) = (cx.read(x)?, cx.write(y)?);
        let Some(ax) = axes.map_err(|e| cx.err(e))? else {
            return Ok(format!("{wy}.copy_from_slice({rx});"));
        };
        let kind = kind(self.op);
        let p = super::product;
        let call = |src: &str, outer: String, red: String, inner: String| {
            format!("rt::kernels::reduce::reduce(rt::kernels::reduce::ReduceKind::{kind:?}, {src}, {outer}, {red}, {inner}, {wy});")
        };
        if ax.is_empty() {
            return Ok(call(&rx, "1".into(), cx.numel(x)?, "1".into()));
        }
        if contiguous(&ax) {
            let (lo, hi) = (ax[0], ax[ax.len() - 1]);
            return Ok(call(&rx, cx.size(&p(&xs[..lo]))?, cx.size(&p(&xs[lo..=hi]))?, cx.size(&p(&xs[hi + 1..]))?));
        }
        // Axes apart: the input permuted into scratch (kept axes first, then the reduced ones,
        // as the interpreter does), then reduced as one block.
        let perm: Vec<usize> = (0..xs.len()).filter(|d| !ax.contains(d)).chain(ax.iter().copied()).collect();
        let kept: Vec<DimExpr> = (0..xs.len()).filter(|d| !ax.contains(d)).map(|d| xs[d].clone()).collect();
        let red: Vec<DimExpr> = ax.iter().map(|&d| xs[d].clone()).collect();
        let pre = format!(
            "let sc = &mut {}[..{}];\nrt::kernels::permute::permute({rx}, &{}, &{perm:?}, sc);\n",
            cx.scratch(cx.dtype(x)?)?,
            cx.numel(x)?,
            cx.sizes(&xs)?
        );
        Ok(pre + &call("sc", cx.size(&p(&kept))?, cx.size(&p(&red))?, "1".into()))
    }

    fn cuda(&self, cx: &super::CudaCx) -> Result<Vec<super::CudaKernel>, CodegenError> {
        let (xv, out) = (cx.input(0)?, cx.output(0)?);
        let ((xd, xs), (od, ys)) = (cx.ty(xv)?, cx.ty(out)?);
        let red = self.gpu_axes(cx.cx.g, cx.opt_input(1), xs.len()).map_err(|e| cx.err(e))?;
        if !matches!(xd, DType::F32 | DType::F64 | DType::BF16 | DType::F16) || xd != od {
            return Err(cx.err(format!("reductions on {xd} are not supported by the CUDA target yet")));
        }
        let t = cx.acc(od)?;
        crate::codegen::cuda::kernels::reduce(cx, self.op, &xs, &red, &cx.ptr(xv)?, &cx.ptr(out)?, t, ys.iter().product())
    }

    fn wgsl(&self, cx: &super::WgslCx) -> Result<Vec<super::WgslKernel>, CodegenError> {
        let (x, y) = (cx.input(0)?, cx.output(0)?);
        let red = self.gpu_axes(cx.cx.g, cx.n.inputs.get(1).copied().flatten(), x.shape.len()).map_err(|e| cx.err(e))?;
        if !crate::codegen::wgsl::scalar::is_float(x.dtype) || !crate::codegen::wgsl::scalar::is_float(y.dtype) {
            return Err(cx.err(format!("reductions on {} are not supported by the wgpu target yet", x.dtype)));
        }
        Ok(vec![crate::codegen::wgsl::kernels::reduce(cx, self.op, &x, &y, &red)?])
    }

    // The input permuted into scratch where the reduced axes are not one run. Axes given by
    // input 1 are known only by value: the most it can need (a run needs no scratch, and at
    // rank 2 or less every set of axes is one run).
    fn scratch_bytes(&self, ins: &[Option<(DType, Vec<usize>)>]) -> usize {
        let Some(Some((dt, xs))) = ins.first() else { return 0 };
        let whole = xs.iter().product::<usize>() * dt.size();
        if self.axes_from_input(ins.get(1).is_some_and(Option::is_some)) {
            return if xs.len() > 2 { whole } else { 0 };
        }
        match self.axes_at(None, xs.len()) {
            Ok(Some(ax)) if !contiguous(&ax) => whole,
            _ => 0,
        }
    }

    // One step per input element.
    flops!(per_input 1);

    fn gradient(&self, cx: &mut GradCx) -> R<Vec<Option<ValueId>>> {
        let (x, y, dy) = (cx.input(0)?, cx.output(0)?, cx.dy()?);
        let konst = cx.n.inputs.get(1).copied().flatten().map(|v| crate::autodiff::builder::const_ints(cx.b.g, Some(v)));
        let axes = self.known_axes(konst, cx.b.rank(x)?, "the axes input must be a constant to differentiate")?;
        let mut out = vec![None; cx.n.inputs.len()];
        out[0] = Some(match axes {
            None if matches!(self.op, ReduceOp::Sum | ReduceOp::Mean | ReduceOp::Max | ReduceOp::Min) => dy,
            None => return Err(format!("{} with empty axes and noop_with_empty_axes has no gradient", self.name())),
            Some(ax) => grad(cx.b, self.op, x, y, dy, ax.iter().map(|&a| a as i64).collect(), self.keepdims)?,
        });
        Ok(out)
    }
}

/// The gradient of a reduction over sorted `axes` (of `x`'s rank): dY broadcast back over them,
/// divided by the count for the mean, times the local derivative for the others (2x, sign x,
/// x/y, exp(x - y), …).
fn grad(b: &mut crate::autodiff::builder::B<'_>, op: ReduceOp, x: ValueId, y: ValueId, dy: ValueId, axes: Vec<i64>, keepdims: bool) -> R<ValueId> {
    use crate::ops::view::Unsqueeze;
    let scaled = match op {
        ReduceOp::Mean => {
            let dt = b.dtype(x)?;
            let dims = b.dims(x)?;
            let count: Option<usize> = axes.iter().map(|&a| dims[a as usize].fixed()).product();
            let k = match count {
                Some(c) => b.scalar(1.0 / c as f64, dt)?,
                None => {
                    // Unknown reduced dims: count = size(x) / size(y) at run time.
                    let sx = b.node(crate::ops::dim_values::Size.op(), &[x])?;
                    let sy = b.node(crate::ops::dim_values::Size.op(), &[dy])?;
                    let sx = b.node(crate::ops::cast::op(dt, false), &[sx])?;
                    let sy = b.node(crate::ops::cast::op(dt, false), &[sy])?;
                    b.div(sy, sx)?
                }
            };
            b.mul(dy, k)?
        }
        _ => dy,
    };
    // Restore the reduced axes as size-1 dims (Unsqueeze's axes index the output, x's rank),
    // then broadcast over them.
    let s = b.shape_of(x)?;
    let kept = if keepdims { scaled } else { b.node(Unsqueeze { axes: Some(axes.clone()) }.op(), &[scaled])? };
    let dyx = b.node(Op::Expand, &[kept, s])?;
    if matches!(op, ReduceOp::Sum | ReduceOp::Mean) {
        return Ok(dyx);
    }
    // The other reductions' local derivative, from x and y broadcast back to x's shape.
    let dt = b.dtype(x)?;
    let yk = if keepdims { y } else { b.node(Unsqueeze { axes: Some(axes.clone()) }.op(), &[y])? };
    let d = match op {
        ReduceOp::SumSquare => {
            let two = b.scalar(2.0, dt)?;
            b.mul(x, two)?
        }
        ReduceOp::L1 => b.un(UnaryOp::Sign, x)?,
        // x / ‖x‖
        ReduceOp::L2 => b.div(x, yk)?,
        // softmax over the reduced axes: exp(x - y)
        ReduceOp::LogSumExp => {
            let t = b.sub(x, yk)?;
            b.un(UnaryOp::Exp, t)?
        }
        // 1 / Σx = exp(-y)
        ReduceOp::LogSum => {
            let t = b.neg(yk)?;
            b.un(UnaryOp::Exp, t)?
        }
        // Π/x (undefined where an element is 0)
        ReduceOp::Prod => b.div(yk, x)?,
        // Shared evenly among the elements equal to the extreme, as PyTorch's amax/amin do.
        ReduceOp::Max | ReduceOp::Min => {
            let eq = b.bin(BinaryOp::Equal, x, yk)?;
            let m = b.node(crate::ops::cast::op(dt, false), &[eq])?;
            let cnt = b.reduce_sum(m, axes, true)?;
            b.div(m, cnt)?
        }
        ReduceOp::Sum | ReduceOp::Mean => return Ok(dyx),
    };
    b.mul(dyx, d)
}

/// The runtime kernel's name for a reduction.
fn kind(op: ReduceOp) -> ReduceKind {
    match op {
        ReduceOp::Sum => ReduceKind::Sum,
        ReduceOp::Mean => ReduceKind::Mean,
        ReduceOp::Max => ReduceKind::Max,
        ReduceOp::Min => ReduceKind::Min,
        ReduceOp::Prod => ReduceKind::Prod,
        ReduceOp::L1 => ReduceKind::L1,
        ReduceOp::L2 => ReduceKind::L2,
        ReduceOp::LogSum => ReduceKind::LogSum,
        ReduceOp::LogSumExp => ReduceKind::LogSumExp,
        ReduceOp::SumSquare => ReduceKind::SumSquare,
    }
}

/// `[outer, red, inner]` sizes of `x` (maybe after a transpose) for reducing `axes` (sorted).
fn view(x: &Tensor, axes: &[usize]) -> R<(Option<Tensor>, usize, usize, usize)> {
    let prod = |s: &[usize]| s.iter().product::<usize>();
    if axes.is_empty() {
        return Ok((None, x.numel(), 1, 1));
    }
    let (a, b) = (axes[0], axes[axes.len() - 1]);
    if contiguous(axes) {
        return Ok((None, prod(&x.shape[..a]), prod(&x.shape[a..=b]), prod(&x.shape[b + 1..])));
    }
    let kept: Vec<usize> = (0..x.rank()).filter(|d| !axes.contains(d)).collect();
    let perm: Vec<usize> = kept.iter().chain(axes).copied().collect();
    let t = crate::interp::ops::shape::transpose(x, &perm)?;
    let outer = kept.iter().map(|&d| x.shape[d]).product();
    let red = axes.iter().map(|&d| x.shape[d]).product();
    Ok((Some(t), outer, red, 1))
}

fn out_shape(shape: &[usize], axes: &[usize], keepdims: bool) -> Vec<usize> {
    shape.iter().enumerate().filter_map(|(d, &n)| if axes.contains(&d) { keepdims.then_some(1) } else { Some(n) }).collect()
}

/// The interpreter's reduction over `axes` (from [`reduced_axes`]; `None`: a copy).
fn reduce(x: &Tensor, op: ReduceOp, axes: Option<Vec<usize>>, keepdims: bool) -> R<Tensor> {
    let Some(axes) = axes else { return Ok(x.clone()) };
    let shape = out_shape(&x.shape, &axes, keepdims);
    let (moved, outer, red, inner) = view(x, &axes)?;
    let src = moved.as_ref().unwrap_or(x);
    let n = crate::interp::ops::util::numel(&shape)?;
    let kd = kind(op);
    macro_rules! go {
        ($($variant:ident),*) => {
            match &src.data {
                $(Data::$variant(v) => {
                    let mut out = vec![Default::default(); n];
                    k::reduce(kd, v, outer, red, inner, &mut out);
                    Data::$variant(out)
                })*
                Data::Bool(v) if matches!(op, ReduceOp::Max | ReduceOp::Min) => {
                    let mut out = vec![false; n];
                    k::reduce(kd, v, outer, red, inner, &mut out);
                    Data::Bool(out)
                }
                d => return Err(format!("Reduce{op:?} is not defined on {}", d.dtype())),
            }
        };
    }
    let data = go!(F32, F64, F16, BF16, I8, I16, I32, I64, U8, U16, U32, U64);
    Ok(Tensor::new(shape, data))
}

fn arg_reduce(x: &Tensor, max: bool, axis: i64, keepdims: bool, last: bool) -> R<Tensor> {
    let ax = norm_axis_or_scalar(axis, x.rank())?;
    let axes = if x.rank() == 0 { vec![] } else { vec![ax] };
    let shape = out_shape(&x.shape, &axes, keepdims);
    let (_, outer, red, inner) = view(x, &axes)?;
    let n = crate::interp::ops::util::numel(&shape)?;
    if red == 0 && n > 0 {
        return Err(format!("cannot take Arg{} over the empty axis {ax}", if max { "Max" } else { "Min" }));
    }
    let mut out = vec![0i64; n];
    macro_rules! go {
        ($($variant:ident),*) => {
            match &x.data {
                $(Data::$variant(v) => k::arg_reduce(v, outer, red, inner, max, last, &mut out),)*
                d => return Err(format!("ArgMax/ArgMin is not defined on {}", d.dtype())),
            }
        };
    }
    go!(F32, F64, F16, BF16, I8, I16, I32, I64, U8, U16, U32, U64, Bool);
    Ok(Tensor::from_i64s(shape, out))
}

/// `max`: ArgMax, else ArgMin. `select_last_index`: the last of equal extremes, else the first.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ArgReduce {
    pub max: bool,
    pub axis: i64,
    pub keepdims: bool,
    pub select_last_index: bool,
}

impl ArgReduce {
    /// The reduced axis of an input of rank `rank` (none for a scalar).
    fn axis_of(&self, rank: usize) -> R<Option<usize>> {
        if rank == 0 {
            return Ok(None);
        }
        norm_axis(self.axis, rank).map(Some)
    }
}

impl OpDef for ArgReduce {
    none_of!(cuda, scratch_bytes, in_place, decides_shapes, forwards_values);

    // One invocation per output: the first (or last) index of the extreme value; NaN wins, as
    // in the interpreter's comparison.
    fn wgsl(&self, cx: &super::WgslCx) -> Result<Vec<super::WgslKernel>, CodegenError> {
        let (x, y) = (cx.input(0)?, cx.output(0)?);
        if !crate::codegen::wgsl::scalar::is_float(x.dtype) {
            return Err(cx.err(format!("{} on {} is not supported by the wgpu target yet", self.name(), x.dtype)));
        }
        let (outer, len, inner): (usize, usize, usize) = match self.axis_of(x.shape.len()).map_err(|e| cx.err(e))? {
            None => (1, 1, 1),
            Some(a) => (x.shape[..a].iter().product(), x.shape[a], x.shape[a + 1..].iter().product()),
        };
        let _ = outer;
        let (cmp, eq) = (if self.max { ">" } else { "<" }, if self.select_last_index { "||  v == best" } else { "" });
        Ok(vec![cx.pointwise(&y, |i| {
            let at = |k: &str| x.load(&format!("({i} / {inner}u * {len}u + {k}) * {inner}u + {i} % {inner}u"));
            Ok((
                format!("var best = {};\nvar arg = 0;\nfor (var k = 1u; k < {len}u; k++) {{ let v = {}; if (!is_nan(best) && (v {cmp} best {eq} || is_nan(v))) {{ best = v; arg = i32(k); }} }}\n", at("0u"), at("k")),
                "arg".into(),
            ))
        })?])
    }

    name!(max ? "ArgMax" : "ArgMin");

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let x = cx.arg(0)?;
        let dims = match &x.dims {
            None => None,
            Some(d) => Some(match self.axis_of(d.len())? {
                None => vec![],
                Some(a) if self.keepdims => {
                    let mut v = d.clone();
                    v[a] = DimExpr::constant(1);
                    v
                }
                Some(a) => d.iter().enumerate().filter(|&(i, _)| i != a).map(|(_, e)| e.clone()).collect(),
            }),
        };
        Ok(vec![OutType { dtype: DType::I64, dims }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let x = super::input(ins, 0)?;
        Ok(vec![arg_reduce(x, self.max, self.axis, self.keepdims, self.select_last_index)?])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let (x, out) = (cx.input(0)?, cx.output(0)?);
        let xs = cx.dims(x)?;
        let view = match self.axis_of(xs.len()).map_err(|e| cx.err(e))? {
            None => [DimExpr::constant(1), DimExpr::constant(1), DimExpr::constant(1)],
            Some(a) => around(&xs, a),
        };
        Ok(format!(
            "rt::kernels::reduce::arg_reduce({}, {}, {}, {}, {});",
            cx.read(x)?,
            view_sizes(cx, &view)?,
            self.max,
            self.select_last_index,
            cx.write(out)?
        ))
    }

    // One comparison per input element.
    flops!(per_input 1);

    fn gradient(&self, _: &mut GradCx) -> R<Vec<Option<ValueId>>> {
        Err(format!("{} has no gradient: its output is an index", self.name()))
    }
}

pub fn examples() -> Vec<super::Example> {
    let x = Tensor::from_f32s(vec![2, 3, 4], (0..24).map(|i| ((i * 7) % 11) as f32 - 4.0).collect());
    let pos = Tensor::from_f32s(vec![2, 3, 4], (0..24).map(|i| ((i * 5) % 7) as f32 * 0.25 + 0.5).collect());
    let a = |max, axis, keepdims, select_last_index| OpRef::new(ArgReduce { max, axis, keepdims, select_last_index });
    let r = |op, axes: Option<Vec<i64>>, keepdims, noop_with_empty_axes| OpRef::new(Reduce { op, axes, keepdims, noop_with_empty_axes });
    let ex = |op, inputs: Vec<Tensor>| super::Example { consts: vec![], op, inputs };
    vec![
        ex(a(true, 1, true, false), vec![x.clone()]),
        ex(a(false, -1, false, true), vec![x.clone()]),
        // Axes apart (a permute into scratch), one run, all, none.
        ex(r(ReduceOp::Sum, Some(vec![0, -1]), false, false), vec![x.clone()]),
        ex(r(ReduceOp::Mean, Some(vec![1, 2]), true, false), vec![x.clone()]),
        ex(r(ReduceOp::Max, None, false, false), vec![x.clone()]),
        ex(r(ReduceOp::Min, Some(vec![]), true, true), vec![x.clone()]),
        ex(r(ReduceOp::L2, Some(vec![0]), false, false), vec![pos.clone()]),
        ex(r(ReduceOp::LogSumExp, Some(vec![-1]), true, false), vec![x]),
        // Axes as input 1 (opset 18), a constant.
        super::Example { consts: vec![1], op: r(ReduceOp::Prod, None, true, false), inputs: vec![pos, Tensor::from_i64s(vec![2], vec![2, 0])] },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(shape: &[usize], v: &[f32]) -> Tensor {
        Tensor::from_f32s(shape.to_vec(), v.to_vec())
    }

    fn run(op: ReduceOp, axes: Option<Vec<i64>>, keepdims: bool, noop: bool, x: &Tensor) -> R<Tensor> {
        let mut y = Reduce { op, axes, keepdims, noop_with_empty_axes: noop }.eval(&[Some(x)])?;
        Ok(y.remove(0))
    }

    #[test]
    fn reduce_non_adjacent_axes() {
        // [2, 2, 2] summed over axes 0 and 2.
        let x = t(&[2, 2, 2], &[1., 2., 3., 4., 5., 6., 7., 8.]);
        assert_eq!(run(ReduceOp::Sum, Some(vec![0, -1]), false, false, &x), Ok(t(&[2], &[14., 22.])));
        assert_eq!(run(ReduceOp::Max, None, true, false, &x), Ok(t(&[1, 1, 1], &[8.])));
        assert_eq!(run(ReduceOp::Sum, Some(vec![]), true, true, &x), Ok(x.clone()));
        // Axes from input 1.
        let axes = Tensor::from_i64s(vec![1], vec![1]);
        let y = Reduce { op: ReduceOp::Sum, axes: None, keepdims: false, noop_with_empty_axes: false }.eval(&[Some(&x), Some(&axes)]);
        assert_eq!(y, Ok(vec![t(&[2, 2], &[4., 6., 12., 14.])]));
    }

    #[test]
    fn reduce_empty_set_is_identity() {
        let x = t(&[2, 0, 4], &[]);
        assert_eq!(run(ReduceOp::Prod, Some(vec![1]), true, false, &x), Ok(t(&[2, 1, 4], &[1.0; 8])));
    }

    #[test]
    fn bad_or_repeated_axes_are_errors() {
        let x = t(&[2], &[1., 2.]);
        assert!(run(ReduceOp::Sum, Some(vec![3]), true, false, &x).is_err());
        assert!(run(ReduceOp::Sum, Some(vec![0, -1]), true, false, &x).is_err());
        let arg = Some(crate::ops::Arg { dtype: DType::F32, dims: Some(vec![DimExpr::constant(2)]), value: None });
        let r = Reduce { op: ReduceOp::Sum, axes: Some(vec![0, 0]), keepdims: true, noop_with_empty_axes: false };
        assert!(r.shapes(&mut ShapeCx::new(vec![arg])).is_err());
    }

    #[test]
    fn shapes_keep_named_dims_and_rank_when_axes_are_unknown() {
        let arg = Some(crate::ops::Arg { dtype: DType::F32, dims: Some(vec![DimExpr::var("n"), DimExpr::constant(3), DimExpr::constant(4)]), value: None });
        let r = |axes, keepdims| Reduce { op: ReduceOp::Mean, axes, keepdims, noop_with_empty_axes: false };
        let out = r(Some(vec![-1]), false).shapes(&mut ShapeCx::new(vec![arg.clone()])).expect("shapes");
        assert_eq!(out[0].dims, Some(vec![DimExpr::var("n"), DimExpr::constant(3)]));
        // Axes from a run-time input: rank kept with keepdims, nothing known without.
        let axes = Some(crate::ops::Arg { dtype: DType::I64, dims: Some(vec![DimExpr::constant(1)]), value: None });
        let out = r(None, true).shapes(&mut ShapeCx::new(vec![arg.clone(), axes.clone()])).expect("shapes");
        assert_eq!(out[0].dims.as_ref().map(Vec::len), Some(3));
        assert_eq!(r(None, false).shapes(&mut ShapeCx::new(vec![arg, axes])).expect("shapes")[0].dims, None);
    }

    #[test]
    fn scratch_only_for_axes_apart() {
        let ins = [Some((DType::F32, vec![2, 3, 4]))];
        let r = |axes: Vec<i64>| Reduce { op: ReduceOp::Sum, axes: Some(axes), keepdims: false, noop_with_empty_axes: false }.scratch_bytes(&ins);
        assert_eq!(r(vec![1, 2]), 0);
        assert_eq!(r(vec![0, 2]), 96);
        assert_eq!(r(vec![]), 0);
    }

    #[test]
    fn arg_max_and_min_pick_the_first_or_last_extreme() {
        let x = Tensor::from_f32s(vec![2, 3], vec![1.0, 5.0, 5.0, 0.0, -2.0, 0.0]);
        let run = |max, last, keepdims| {
            let y = ArgReduce { max, axis: 1, keepdims, select_last_index: last }.eval(&[Some(&x)]).expect("eval");
            (y[0].shape.clone(), y[0].to_i64_vec().unwrap_or_default())
        };
        assert_eq!(run(true, false, true), (vec![2, 1], vec![1, 0]));
        assert_eq!(run(true, true, false), (vec![2], vec![2, 2]));
        assert_eq!(run(false, false, false), (vec![2], vec![0, 1]));
        let arg = Some(crate::ops::Arg { dtype: DType::F32, dims: Some(vec![DimExpr::var("n"), DimExpr::constant(3)]), value: None });
        let out = ArgReduce { max: true, axis: -1, keepdims: false, select_last_index: false }.shapes(&mut ShapeCx::new(vec![arg.clone()])).expect("shapes");
        assert_eq!(out[0], OutType { dtype: DType::I64, dims: Some(vec![DimExpr::var("n")]) });
        assert!(ArgReduce { max: true, axis: 2, keepdims: false, select_last_index: false }.shapes(&mut ShapeCx::new(vec![arg])).is_err());
    }
}
