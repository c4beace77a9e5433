//! Scatters: the output is the data with updates written at positions the indices name,
//! replacing the element or combined with it (add, mul, max, min). ScatterElements `(data,
//! indices, updates)` (and ONNX's older Scatter) moves one element per index, ScatterND one
//! slice per index tuple, TensorScatter `(past_cache, update, write_indices?)` a block of
//! rows per batch entry into a cache. Runtime kernels over dims given at run time
//! (`kernels::scatter`, `kernels::cache`) serve the interpreter and generated code; the
//! interpreter refuses an index out of range, generated code skips its update.
use super::gather::AlongAxis;
use super::{input, move_bytes, EmitCx, MoveBytes, OpDef, OpRef, OutType, ShapeCx, R};
use crate::codegen::CodegenError;
use crate::ir::axis::norm_axis;
use crate::ir::{DType, DimExpr, ScatterReduction};
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::cache::{tensor_scatter, CacheDims};
use burnc_runtime::kernels::scatter::{replace, scatter_elements, scatter_nd};
use burnc_runtime::Elem;
use std::cell::Cell;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScatterElements {
    pub axis: i64,
    pub reduction: ScatterReduction,
}

impl ScatterElements {
    /// The axis, with the indices' dims checked against the data's and the updates'.
    fn axis(&self, cx: &mut ShapeCx) -> R<usize> {
        let (xs, is, us) = (cx.arg(0)?.dims()?.to_vec(), cx.arg(1)?.dims()?.to_vec(), cx.arg(2)?.dims()?.to_vec());
        if xs.len() != is.len() || xs.is_empty() {
            return Err(format!("indices of rank {} for data of rank {}", is.len(), xs.len()));
        }
        if us.len() != is.len() {
            return Err(format!("updates of rank {} for indices of rank {}", us.len(), is.len()));
        }
        let a = norm_axis(self.axis, xs.len())?;
        for d in 0..xs.len() {
            cx.equal(&format!("the updates' and the indices' dim {d}"), &us[d], &is[d])?;
            if d != a {
                cx.at_most(&format!("the indices' and the data's dim {d}"), &is[d], &xs[d])?;
            }
        }
        Ok(a)
    }
}

impl OpDef for ScatterElements {
    name!("ScatterElements");
    none_of!(cuda, wgsl, scratch_bytes, in_place, decides_shapes, forwards_values, flops, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        like_data(cx, |cx| self.axis(cx).map(drop))
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let (x, ind, upd) = (input(ins, 0)?, input(ins, 1)?, input(ins, 2)?);
        let a = self.axis(&mut ShapeCx::of_tensors(ins))?;
        let iv = in_range(ind, &[x.shape[a]])?;
        let k = AlongAxis { dims: &x.shape, idx: &iv, idx_dims: &ind.shape, axis: a };
        Ok(vec![apply(self.name(), x, upd, self.reduction, &k)?])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let a = self.axis(&mut cx.shape_cx()?).map_err(|e| cx.err(e))?;
        emit_scatter(cx, "scatter_elements", &format!("{a}, "), self.reduction)
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScatterNd {
    pub reduction: ScatterReduction,
}

impl ScatterNd {
    /// The index tuples' length, with the updates' dims checked: the indices' leading dims,
    /// then the data's past the tuple.
    fn tuple_len(cx: &mut ShapeCx) -> R<usize> {
        let (xs, is, us) = (cx.arg(0)?.dims()?.to_vec(), cx.arg(1)?.dims()?.to_vec(), cx.arg(2)?.dims()?.to_vec());
        let Some((m, lead)) = is.split_last() else { return Err("indices of rank 0".into()) };
        // The tuples' length decides the updates' rank: it must be known.
        let m = m.as_const().ok_or_else(|| format!("the indices' last dim {m} must be fixed"))?;
        let m = usize::try_from(m).ok().filter(|&m| m <= xs.len()).ok_or_else(|| format!("index tuples of {m} for data of rank {}", xs.len()))?;
        let want: Vec<DimExpr> = lead.iter().chain(&xs[m..]).cloned().collect();
        if us.len() != want.len() {
            return Err(format!("updates of rank {} where {} is needed", us.len(), want.len()));
        }
        for (d, (u, w)) in us.iter().zip(&want).enumerate() {
            cx.equal(&format!("the updates' dim {d}"), u, w)?;
        }
        Ok(m)
    }
}

impl OpDef for ScatterNd {
    name!("ScatterND");
    none_of!(cuda, wgsl, scratch_bytes, in_place, decides_shapes, forwards_values, flops, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        like_data(cx, |cx| Self::tuple_len(cx).map(drop))
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let (x, ind, upd) = (input(ins, 0)?, input(ins, 1)?, input(ins, 2)?);
        let m = Self::tuple_len(&mut ShapeCx::of_tensors(ins))?;
        let iv = in_range(ind, &x.shape[..m])?;
        let k = Nd { dims: &x.shape, idx: &iv, idx_dims: &ind.shape };
        Ok(vec![apply(self.name(), x, upd, self.reduction, &k)?])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        Self::tuple_len(&mut cx.shape_cx()?).map_err(|e| cx.err(e))?;
        emit_scatter(cx, "scatter_nd", "", self.reduction)
    }
}

/// ScatterElements' and ScatterND's shape rule: the output is typed and shaped like the data;
/// the indices must be int32 or int64 and the updates of the data's type; once every input's
/// dims are known, `check` declares how the indices' and the updates' dims fit the data's.
fn like_data(cx: &mut ShapeCx, check: impl FnOnce(&mut ShapeCx) -> R<()>) -> R<Vec<OutType>> {
    let (x, i, u) = (cx.arg(0)?, cx.arg(1)?, cx.arg(2)?);
    if !matches!(i.dtype, DType::I32 | DType::I64) {
        return Err(format!("indices must be int32 or int64, got {}", i.dtype));
    }
    if u.dtype != x.dtype {
        return Err(format!("updates of type {} for data of {}", u.dtype, x.dtype));
    }
    let out = OutType { dtype: x.dtype, dims: x.dims.clone() };
    if x.dims.is_some() && i.dims.is_some() && u.dims.is_some() {
        check(cx)?;
    }
    Ok(vec![out])
}

/// The indices' values, each in range for its dim (`lens` cycled: one dim for
/// ScatterElements, a tuple's dims for ScatterND).
fn in_range(ind: &Tensor, lens: &[usize]) -> R<Vec<i64>> {
    let iv = ind.to_i64_vec().ok_or("indices must be integers")?;
    for (&v, &len) in iv.iter().zip(lens.iter().cycle()) {
        let len = len as i64;
        if v < -len || v >= len {
            return Err(format!("index {v} is out of range for a dim of {len}"));
        }
    }
    Ok(iv)
}

/// The runtime function combining an element with its update, in generated code.
fn combine(r: ScatterReduction, d: DType) -> R<&'static str> {
    Ok(match (r, d) {
        (ScatterReduction::None, _) => "rt::kernels::scatter::replace",
        (_, d) if d.is_small() || d == DType::Str => return Err(format!("scatter with reduction {r:?} on {d} is not supported")),
        // Bools are 0/1 bytes here: or is their max, and their min.
        (ScatterReduction::Add, DType::Bool) | (ScatterReduction::Max, _) => "rt::Elem::max_of",
        (ScatterReduction::Mul, DType::Bool) | (ScatterReduction::Min, _) => "rt::Elem::min_of",
        (ScatterReduction::Add, _) => "rt::Elem::add",
        (ScatterReduction::Mul, _) => "rt::Elem::mul",
    })
}

/// A scatter kernel on the output (holding a copy of the data) and the updates.
trait Kernel {
    fn run<T: Copy>(&self, out: &mut [T], upd: &[T], f: impl Fn(T, T) -> T);
}

impl Kernel for AlongAxis<'_> {
    fn run<T: Copy>(&self, out: &mut [T], upd: &[T], f: impl Fn(T, T) -> T) {
        scatter_elements(out, self.dims, self.idx, self.idx_dims, upd, self.axis, f);
    }
}

struct Nd<'a> {
    dims: &'a [usize],
    idx: &'a [i64],
    idx_dims: &'a [usize],
}

impl Kernel for Nd<'_> {
    fn run<T: Copy>(&self, out: &mut [T], upd: &[T], f: impl Fn(T, T) -> T) {
        scatter_nd(out, self.dims, self.idx, self.idx_dims, upd, f);
    }
}

/// The data with `k` scattering the updates: a plain scatter on the elements' bytes (every
/// dtype; strings by number), a reduction on typed elements.
fn apply(name: &str, x: &Tensor, u: &Tensor, r: ScatterReduction, k: &impl Kernel) -> R<Tensor> {
    if x.dtype() != u.dtype() {
        return Err(format!("updates of type {} for data of {}", u.dtype(), x.dtype()));
    }
    if r == ScatterReduction::None {
        if let (Data::Str(xs), Data::Str(us)) = (&x.data, &u.data) {
            let mut y: Vec<usize> = (0..xs.len()).collect();
            k.run(&mut y, &(xs.len()..xs.len() + us.len()).collect::<Vec<_>>(), replace);
            let pick = |i: usize| xs.get(i).or_else(|| us.get(i - xs.len())).cloned().unwrap_or_default();
            return Ok(Tensor::new(x.shape.clone(), Data::Str(y.into_iter().map(pick).collect())));
        }
        return move_bytes(name, x, None, x.shape.clone(), &Plain { k, upd: u.data.to_le_bytes() });
    }
    fn go<T: Elem>(k: &impl Kernel, x: &[T], u: &[T], r: ScatterReduction) -> Vec<T> {
        let mut y = x.to_vec();
        match r {
            ScatterReduction::None => k.run(&mut y, u, replace),
            ScatterReduction::Add => k.run(&mut y, u, <T as Elem>::add),
            ScatterReduction::Mul => k.run(&mut y, u, <T as Elem>::mul),
            ScatterReduction::Max => k.run(&mut y, u, <T as Elem>::max_of),
            ScatterReduction::Min => k.run(&mut y, u, <T as Elem>::min_of),
        }
        y
    }
    macro_rules! typed {
        ($($v:ident),*) => {
            match (&x.data, &u.data) {
                $((Data::$v(xv), Data::$v(uv)) => Data::$v(go(k, xv, uv, r)),)*
                _ => return Err(format!("{name} with reduction {r:?} on {} is not supported", x.dtype())),
            }
        };
    }
    let data = typed!(F32, F64, F16, BF16, I8, I16, I32, I64, U8, U16, U32, U64, Bool);
    Ok(Tensor::new(x.shape.clone(), data))
}

/// A plain scatter on raw elements (see [`move_bytes`]); the updates as bytes.
struct Plain<'a, K> {
    k: &'a K,
    upd: Vec<u8>,
}

impl<K: Kernel> MoveBytes for Plain<'_, K> {
    fn run<const W: usize>(&self, x: &[[u8; W]], _: [u8; W]) -> Vec<[u8; W]> {
        let upd: Vec<[u8; W]> = self.upd.chunks_exact(W).map(|c| c.try_into().unwrap_or([0; W])).collect();
        let mut y = x.to_vec();
        self.k.run(&mut y, &upd, replace);
        y
    }
}

/// TensorScatter: `update` written into the cache along `axis` (not the batch axis) from row
/// `write_indices[b]` of each batch entry `b` (0 without them), wrapping around the cache
/// when `circular`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TensorScatter {
    pub axis: i64,
    pub circular: bool,
}

impl TensorScatter {
    /// The cache's and the update's dims as (batch, mid, max_seq, seq, inner), checked.
    fn geometry(&self, cx: &mut ShapeCx) -> R<[DimExpr; 5]> {
        let (cs, us) = (cx.arg(0)?.dims()?.to_vec(), cx.arg(1)?.dims()?.to_vec());
        let a = norm_axis(self.axis, cs.len())?;
        if a == 0 || us.len() != cs.len() {
            return Err(format!("an update of rank {} on axis {} of a cache of rank {}", us.len(), self.axis, cs.len()));
        }
        for d in 0..cs.len() {
            let what = format!("the update's and the cache's dim {d}");
            if d == a {
                cx.at_most(&what, &us[d], &cs[d])?;
            } else {
                cx.equal(&what, &us[d], &cs[d])?;
            }
        }
        if let Some(w) = cx.opt(2).cloned() {
            if w.dtype != DType::I64 {
                return Err(format!("write_indices must be int64, got {}", w.dtype));
            }
            cx.equal("write_indices' count and the batch", &super::product(w.dims()?), &cs[0])?;
        }
        Ok([cs[0].clone(), super::product(&cs[1..a]), cs[a].clone(), us[a].clone(), super::product(&cs[a + 1..])])
    }
}

impl OpDef for TensorScatter {
    name!("TensorScatter");
    none_of!(cuda, wgsl, scratch_bytes, in_place, decides_shapes, forwards_values, flops, gradient);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let (c, u) = (cx.arg(0)?.clone(), cx.arg(1)?);
        if u.dtype != c.dtype {
            return Err(format!("an update of type {} for a cache of {}", u.dtype, c.dtype));
        }
        if c.dims.is_some() && u.dims.is_some() && cx.opt(2).is_none_or(|w| w.dims.is_some()) {
            self.geometry(cx)?;
        }
        Ok(vec![OutType { dtype: c.dtype, dims: c.dims }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        let (past, upd) = (input(ins, 0)?, input(ins, 1)?);
        if upd.dtype() != past.dtype() {
            return Err(format!("an update of type {} for a cache of {}", upd.dtype(), past.dtype()));
        }
        let g = self.geometry(&mut ShapeCx::of_tensors(ins))?;
        let [batch, mid, max_seq, seq, inner] = g.map(|d| d.as_const().unwrap_or(0) as usize);
        let d = CacheDims { batch, mid, max_seq, seq, inner };
        let wi = ins.get(2).copied().flatten().map(|w| w.to_i64_vec().ok_or("write_indices must be integers")).transpose()?;
        let k = Cache { d, wi: wi.as_deref(), circular: self.circular, upd: upd.data.to_le_bytes(), ok: Cell::new(true) };
        let y = move_bytes(self.name(), past, None, past.shape.clone(), &k)?;
        if !k.ok.get() {
            return Err("a write index puts the update outside the cache".into());
        }
        Ok(vec![y])
    }

    // A write index that puts rows outside the cache skips them (the interpreter refuses it).
    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        let (past, upd) = (cx.input(0)?, cx.input(1)?);
        let g = self.geometry(&mut cx.shape_cx()?).map_err(|e| cx.err(e))?;
        let [batch, mid, max_seq, seq, inner] = g.each_ref().map(|d| cx.size(d));
        let wi = match cx.opt_input(2) {
            Some(w) => format!("Some({})", cx.read(w)?),
            None => "None".into(),
        };
        Ok(format!(
            "let d = rt::kernels::cache::CacheDims {{ batch: {}, mid: {}, max_seq: {}, seq: {}, inner: {} }};\n\
             let _ = rt::kernels::cache::tensor_scatter({}, {}, {wi}, &d, {}, {});",
            batch?,
            mid?,
            max_seq?,
            seq?,
            inner?,
            cx.read(past)?,
            cx.read(upd)?,
            self.circular,
            cx.write(cx.output(0)?)?
        ))
    }
}

/// TensorScatter's kernel on raw elements; `ok` records whether every row fit.
struct Cache<'a> {
    d: CacheDims,
    wi: Option<&'a [i64]>,
    circular: bool,
    upd: Vec<u8>,
    ok: Cell<bool>,
}

impl MoveBytes for Cache<'_> {
    fn run<const W: usize>(&self, x: &[[u8; W]], _: [u8; W]) -> Vec<[u8; W]> {
        let upd: Vec<[u8; W]> = self.upd.chunks_exact(W).map(|c| c.try_into().unwrap_or([0; W])).collect();
        let mut y = x.to_vec();
        self.ok.set(tensor_scatter(x, &upd, self.wi, &self.d, self.circular, &mut y));
        y
    }
}

pub fn examples() -> Vec<super::Example> {
    use ScatterReduction as Red;
    let x = Tensor::from_f32s(vec![3, 5], (0..15).map(|i| i as f32 * 0.5 - 3.0).collect());
    // Along the rows: any index of 5 columns, whatever the data's first dim.
    let cols = Tensor::from_i64s(vec![2, 3], vec![4, 0, -1, 1, 1, 2]);
    let row_upd = Tensor::from_f32s(vec![2, 3], vec![1.5, -2.0, 3.0, 7.0, -1.0, 0.25]);
    // Along the first dim: only the first and the last row, in range at every size.
    let rows = Tensor::new(vec![2, 2], Data::I32(vec![0, -1, -1, 0]));
    let col_upd = Tensor::from_f32s(vec![2, 2], vec![9.0, 8.0, 7.0, 6.0]);
    let el = |axis, reduction| OpRef::new(ScatterElements { axis, reduction });
    let mut v: Vec<super::Example> = [Red::None, Red::Add, Red::Mul, Red::Max, Red::Min]
        .into_iter()
        .map(|r| super::Example { consts: vec![], op: el(1, r), inputs: vec![x.clone(), cols.clone(), row_upd.clone()] })
        .collect();
    v.push(super::Example { consts: vec![], op: el(0, Red::Add), inputs: vec![x.clone(), rows, col_upd] });
    let ints = Tensor::new(vec![4, 2], Data::I32(vec![1, 2, 3, 4, 5, 6, 7, 8]));
    let int_upd = Tensor::new(vec![2, 3], Data::I32(vec![10, 20, 30, 40, 50, 60]));
    let int_cols = Tensor::from_i64s(vec![2, 3], vec![1, 0, 1, -1, -2, -2]);
    v.push(super::Example { consts: vec![], op: el(1, Red::Mul), inputs: vec![ints.clone(), int_cols, int_upd] });

    // Slices of rows 0 and -1 (in range at every size), and single elements.
    let nd = |reduction| OpRef::new(ScatterNd { reduction });
    let tuples = Tensor::from_i64s(vec![3, 1], vec![0, -1, 0]);
    let slices = Tensor::from_f32s(vec![3, 5], (0..15).map(|i| 4.0 - i as f32).collect());
    for r in [Red::None, Red::Add, Red::Max] {
        v.push(super::Example { consts: vec![], op: nd(r), inputs: vec![x.clone(), tuples.clone(), slices.clone()] });
    }
    let pairs = Tensor::from_i64s(vec![2, 2], vec![0, 4, -1, 1]);
    v.push(super::Example { consts: vec![], op: nd(Red::Min), inputs: vec![x, pairs, Tensor::from_f32s(vec![2], vec![-9.0, 9.0])] });

    // Caches [batch, heads, rows, width]: the batch shared by the three inputs.
    let ts = |axis, circular| OpRef::new(TensorScatter { axis, circular });
    let cache = Tensor::from_f32s(vec![2, 2, 5, 3], (0..60).map(|i| i as f32).collect());
    let update = Tensor::from_f32s(vec![2, 2, 2, 3], (0..24).map(|i| -1.0 - i as f32).collect());
    let at = Tensor::from_i64s(vec![2], vec![3, 1]);
    v.push(super::Example { consts: vec![], op: ts(-2, false), inputs: vec![cache.clone(), update.clone(), at] });
    let wrap = Tensor::from_i64s(vec![2], vec![4, 2]);
    v.push(super::Example { consts: vec![], op: ts(2, true), inputs: vec![cache.clone(), update.clone(), wrap] });
    let bytes = Tensor::new(vec![2, 4], Data::U8((0..8).collect()));
    v.push(super::Example { consts: vec![], op: ts(1, false), inputs: vec![bytes, Tensor::new(vec![2, 1], Data::U8(vec![100, 200]))] });
    v
}

/// `y = data`, then the runtime's `kernel(y, dims, indices, index dims, updates, {extra}combine)`
/// (ScatterElements passes its axis in `extra`).
fn emit_scatter(cx: &EmitCx, kernel: &str, extra: &str, reduction: ScatterReduction) -> Result<String, CodegenError> {
    let (x, ind, upd) = (cx.input(0)?, cx.input(1)?, cx.input(2)?);
    let f = combine(reduction, cx.dtype(x)?).map_err(|e| cx.err(e))?;
    Ok(format!(
        "let y = {};\ny.copy_from_slice({});\nrt::kernels::scatter::{kernel}(y, &{}, {}, &{}, {}, {extra}{f});",
        cx.write(cx.output(0)?)?,
        cx.read(x)?,
        cx.sizes(&cx.dims(x)?)?,
        cx.read(ind)?,
        cx.sizes(&cx.dims(ind)?)?,
        cx.read(upd)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::{f, i};

    fn run(op: &dyn OpDef, ins: &[&Tensor]) -> R<Tensor> {
        Ok(op.eval(&ins.iter().copied().map(Some).collect::<Vec<_>>())?.remove(0))
    }

    #[test]
    fn elements_and_nd_with_duplicates() {
        let x = f(&[1, 5], &[1., 2., 3., 4., 5.]);
        let plain = ScatterElements { axis: 1, reduction: ScatterReduction::None };
        assert_eq!(run(&plain, &[&x, &i(&[1, 2], &[1, -2]), &f(&[1, 2], &[1.1, 2.1])]), Ok(f(&[1, 5], &[1., 1.1, 3., 2.1, 5.])));
        assert!(run(&plain, &[&x, &i(&[1, 1], &[5]), &f(&[1, 1], &[0.])]).is_err());
        assert!(run(&plain, &[&x, &i(&[2, 1], &[0, 0]), &f(&[2, 1], &[0., 0.])]).is_err(), "indices longer than the data off the axis");

        let x = f(&[4], &[1., 2., 3., 4.]);
        let add = ScatterNd { reduction: ScatterReduction::Add };
        assert_eq!(run(&add, &[&x, &i(&[2, 1], &[1, 1]), &f(&[2], &[10., 20.])]), Ok(f(&[4], &[1., 32., 3., 4.])));
        assert!(run(&add, &[&x, &i(&[1, 1], &[4]), &f(&[1], &[0.])]).is_err());
        assert!(run(&add, &[&x, &i(&[1, 1], &[0]), &f(&[2], &[0., 0.])]).is_err(), "updates of the wrong shape");
    }

    #[test]
    fn every_dtype_plain_and_strings() {
        let x = Tensor::new(vec![3], Data::Str(vec!["a".into(), "b".into(), "c".into()]));
        let u = Tensor::new(vec![2], Data::Str(vec!["x".into(), "y".into()]));
        let y = run(&ScatterElements { axis: 0, reduction: ScatterReduction::None }, &[&x, &i(&[2], &[2, 0]), &u]).expect("strings");
        assert_eq!(y.data, Data::Str(vec!["y".into(), "b".into(), "x".into()]));
        let b = Tensor::new(vec![3], Data::Bool(vec![false, true, false]));
        let ub = Tensor::new(vec![1], Data::Bool(vec![true]));
        let y = run(&ScatterNd { reduction: ScatterReduction::Add }, &[&b, &i(&[1, 1], &[0]), &ub]).expect("bools");
        assert_eq!(y.data, Data::Bool(vec![true, true, false]));
    }

    #[test]
    fn cache_rows_linear_and_circular() {
        let cache = f(&[2, 3, 1], &[0.; 6]);
        let upd = f(&[2, 2, 1], &[1., 2., 3., 4.]);
        let linear = TensorScatter { axis: 1, circular: false };
        assert_eq!(run(&linear, &[&cache, &upd, &i(&[2], &[0, 1])]), Ok(f(&[2, 3, 1], &[1., 2., 0., 0., 3., 4.])));
        assert!(run(&linear, &[&cache, &upd, &i(&[2], &[2, 0])]).is_err());
        let circular = TensorScatter { axis: 1, circular: true };
        assert_eq!(run(&circular, &[&cache, &upd, &i(&[2], &[2, 1])]), Ok(f(&[2, 3, 1], &[2., 0., 1., 0., 3., 4.])));
    }
}
