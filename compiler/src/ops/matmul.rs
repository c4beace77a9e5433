//! The matrix products. MatMul has numpy's rules: batched over leading dims that broadcast, a
//! 1-D A a row `[1, k]` and a 1-D B a column `[k, 1]` (the added dim left out of the result).
//! Gemm is `alpha · op(A) · op(B) + beta · C` of 2-D operands, each `op` an optional transpose,
//! C broadcast to the output one way. Both run on the packed SIMD GEMM of the runtime
//! (`kernels::gemm`) for f32 and f64 and on its generic loop for other types, in the
//! interpreter and generated code alike; the GPU targets' kernels are in their own modules
//! (`codegen::cuda::kernels::tiled_product`, `codegen::wgsl::kernels::{matmul, gemm}`), and the
//! CUDA target takes a tensor-core path for both before it asks the op.
use super::{input, numel, EmitCx, GradCx, OpDef, OutType, ShapeCx, R};
use crate::autodiff::builder::B;
use crate::codegen::emit::{f32_lit, f64_lit};
use crate::codegen::CodegenError;
use crate::interp::ops::util::{broadcast_shapes, broadcast_strides, numel as checked_numel};
use crate::ir::{DType, DimExpr, ValueId};
use crate::ops::view::Unsqueeze;
use crate::ops::IntoOp;
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::gemm::{self, Layout};
use burnc_runtime::Elem;

/// numpy's matrix product (batched, broadcasting, 1-D operands promoted).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MatMul;

/// `alpha · op(A) · op(B) + beta · C` of 2-D A and B; C (optional) broadcasts to the output.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gemm {
    pub alpha: f32,
    pub beta: f32,
    pub trans_a: bool,
    pub trans_b: bool,
}

fn c(v: i64) -> DimExpr {
    DimExpr::constant(v)
}

/// The dims of the product of inputs `ai` and `bi` under MatMul's rules (also those of
/// MatMulInteger and QLinearMatMul), the inner dims declared equal; `None` while a rank is
/// not known.
pub(crate) fn matmul_dims(cx: &mut ShapeCx, ai: usize, bi: usize) -> R<Option<Vec<DimExpr>>> {
    let (Some(a), Some(b)) = (cx.opt(ai).and_then(|a| a.dims.clone()), cx.opt(bi).and_then(|b| b.dims.clone())) else { return Ok(None) };
    if a.is_empty() || b.is_empty() {
        return Err("MatMul inputs must have rank >= 1".into());
    }
    let a2 = if a.len() == 1 { vec![c(1), a[0].clone()] } else { a.clone() };
    let b2 = if b.len() == 1 { vec![b[0].clone(), c(1)] } else { b.clone() };
    cx.equal("the inner dims of A and B", &a2[a2.len() - 1], &b2[b2.len() - 2])?;
    let mut out = cx.broadcast(&a2[..a2.len() - 2], &b2[..b2.len() - 2])?;
    if a.len() > 1 {
        out.push(a2[a2.len() - 2].clone());
    }
    if b.len() > 1 {
        out.push(b2[b2.len() - 1].clone());
    }
    Ok(Some(out))
}

/// 2 FLOPs per multiply-add of a product whose depth is A's last dim.
pub(crate) fn matmul_flops(ins: &[Option<Vec<usize>>], outs: &[Option<Vec<usize>>]) -> Option<u64> {
    Some(2u64.saturating_mul(numel(outs.first()?)?).saturating_mul(*ins.first()?.as_ref()?.last()? as u64))
}

impl Gemm {
    /// `(m, k, n)` of `op(A) · op(B)` for A and B of dims `a` and `b`.
    fn mkn<'d>(&self, a: &'d [DimExpr], b: &'d [DimExpr]) -> R<(&'d DimExpr, [&'d DimExpr; 2], &'d DimExpr)> {
        let ([a0, a1], [b0, b1]) = (a, b) else { return Err(format!("Gemm needs 2-D A and B, got ranks {} and {}", a.len(), b.len())) };
        let (m, ka) = if self.trans_a { (a1, a0) } else { (a0, a1) };
        let (kb, n) = if self.trans_b { (b1, b0) } else { (b0, b1) };
        Ok((m, [ka, kb], n))
    }
}

impl OpDef for MatMul {
    name!("MatMul");
    none_of!(scratch_bytes, in_place, decides_shapes, forwards_values);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let dtype = cx.arg(0)?.dtype;
        Ok(vec![OutType { dtype, dims: matmul_dims(cx, 0, 1)? }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        Ok(vec![matmul(input(ins, 0)?, input(ins, 1)?)?])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        emit_matmul(cx)
    }

    fn cuda(&self, cx: &super::CudaCx) -> Result<Vec<super::CudaKernel>, CodegenError> {
        crate::codegen::cuda::kernels::tiled_product(cx, None)
    }

    fn wgsl(&self, cx: &super::WgslCx) -> Result<Vec<super::WgslKernel>, CodegenError> {
        crate::codegen::wgsl::kernels::matmul(cx)
    }

    fn flops(&self, ins: &[Option<Vec<usize>>], outs: &[Option<Vec<usize>>]) -> Option<u64> {
        matmul_flops(ins, outs)
    }

    /// dA = dY·Bᵀ and dB = Aᵀ·dY on the operands promoted to matrices, each summed over the
    /// batch dims its operand was broadcast along and shaped back like it.
    fn gradient(&self, cx: &mut GradCx) -> R<Vec<Option<ValueId>>> {
        let (a, bm, dy) = (cx.input(0)?, cx.input(1)?, cx.dy()?);
        let (want_a, want_b) = (cx.wants(0), cx.wants(1));
        let b = &mut *cx.b;
        let (ra, rb) = (b.rank(a)?, b.rank(bm)?);
        if ra == 0 || rb == 0 {
            return Err("MatMul operands must have rank >= 1".into());
        }
        // Promote to matrices: A [k] → [1, k], B [k] → [k, 1]; dY gains the matching unit dims.
        let a2 = if ra == 1 { b.node(Unsqueeze { axes: Some(vec![0]) }.op(), &[a])? } else { a };
        let b2 = if rb == 1 { b.node(Unsqueeze { axes: Some(vec![1]) }.op(), &[bm])? } else { bm };
        let mut dy2 = dy;
        if ra == 1 {
            let r = b.rank(dy2)?;
            dy2 = b.node(Unsqueeze { axes: Some(vec![r as i64 - if rb == 1 { 0 } else { 1 }]) }.op(), &[dy2])?;
        }
        if rb == 1 {
            let r = b.rank(dy2)?;
            dy2 = b.node(Unsqueeze { axes: Some(vec![r as i64]) }.op(), &[dy2])?;
        }
        let da = if want_a {
            let bt = swap_last2(b, b2)?;
            Some(operand_grad(b, dy2, bt, a2, a)?)
        } else {
            None
        };
        let db = if want_b {
            let at = swap_last2(b, a2)?;
            Some(operand_grad(b, at, dy2, b2, bm)?)
        } else {
            None
        };
        Ok(vec![da, db])
    }
}

/// The gradient `lhs · rhs` of the operand `x` (promoted to the matrix `m`): summed over the
/// batch dims `m` was broadcast along, and shaped back like `x`.
fn operand_grad(b: &mut B<'_>, lhs: ValueId, rhs: ValueId, m: ValueId, x: ValueId) -> R<ValueId> {
    let d = b.node(MatMul.op(), &[lhs, rhs])?;
    let d = b.sum_to(d, m)?;
    if m == x {
        Ok(d)
    } else {
        b.reshape_like(d, x)
    }
}

fn swap_last2(b: &mut B<'_>, v: ValueId) -> R<ValueId> {
    let r = b.rank(v)?;
    let mut perm: Vec<usize> = (0..r).collect();
    perm.swap(r - 2, r - 1);
    b.transpose(v, perm)
}

impl OpDef for Gemm {
    name!("Gemm");
    none_of!(scratch_bytes, in_place, decides_shapes, forwards_values);

    fn shapes(&self, cx: &mut ShapeCx) -> R<Vec<OutType>> {
        let dtype = cx.arg(0)?.dtype;
        let (Some(a), Some(b)) = (cx.arg(0)?.dims.clone(), cx.arg(1)?.dims.clone()) else { return Ok(vec![OutType { dtype, dims: None }]) };
        let (m, [ka, kb], n) = self.mkn(&a, &b)?;
        cx.equal("the inner dims of A and B", ka, kb)?;
        let y = vec![m.clone(), n.clone()];
        // C broadcasts to the output one way: each of its dims is 1 or the output's.
        if let Some(cs) = cx.opt(2).and_then(|c| c.dims.clone()) {
            if cs.len() > 2 || cx.broadcast(&cs, &y)? != y {
                return Err(format!("C of rank {} does not broadcast to the output [{m}, {n}]", cs.len()));
            }
        }
        Ok(vec![OutType { dtype, dims: Some(y) }])
    }

    fn eval(&self, ins: &[Option<&Tensor>]) -> R<Vec<Tensor>> {
        Ok(vec![gemm_eval(self, input(ins, 0)?, input(ins, 1)?, ins.get(2).copied().flatten())?])
    }

    fn emit(&self, cx: &EmitCx) -> Result<String, CodegenError> {
        emit_gemm(self, cx)
    }

    fn cuda(&self, cx: &super::CudaCx) -> Result<Vec<super::CudaKernel>, CodegenError> {
        crate::codegen::cuda::kernels::tiled_product(cx, Some(self))
    }

    fn wgsl(&self, cx: &super::WgslCx) -> Result<Vec<super::WgslKernel>, CodegenError> {
        crate::codegen::wgsl::kernels::gemm(cx, self)
    }

    fn flops(&self, ins: &[Option<Vec<usize>>], outs: &[Option<Vec<usize>>]) -> Option<u64> {
        let a = ins.first()?.as_ref()?;
        let k = if self.trans_a { *a.first()? } else { *a.get(1)? };
        Some(2u64.saturating_mul(numel(outs.first()?)?).saturating_mul(k as u64))
    }

    /// Y = alpha op(A) op(B) + beta C: dop(A) = alpha dY op(B)ᵀ, dop(B) = alpha op(A)ᵀ dY, each
    /// a Gemm whose flags do the transposes (a transposed operand's gradient is the product
    /// swapped); dC = beta dY summed to C's shape.
    fn gradient(&self, cx: &mut GradCx) -> R<Vec<Option<ValueId>>> {
        let (a, bm, dy) = (cx.input(0)?, cx.input(1)?, cx.dy()?);
        let (want_a, want_b, want_c) = (cx.wants(0), cx.wants(1), cx.wants(2));
        let cv = cx.n.inputs.get(2).copied().flatten();
        let Gemm { alpha, beta, trans_a, trans_b } = *self;
        let b = &mut *cx.b;
        let gemm = |trans_a, trans_b| Gemm { alpha, beta: 0.0, trans_a, trans_b }.op();
        let da = match (want_a, trans_a) {
            (false, _) => None,
            (true, true) => Some(b.node(gemm(trans_b, true), &[bm, dy])?),
            (true, false) => Some(b.node(gemm(false, !trans_b), &[dy, bm])?),
        };
        let db = match (want_b, trans_b) {
            (false, _) => None,
            (true, true) => Some(b.node(gemm(true, trans_a), &[dy, a])?),
            (true, false) => Some(b.node(gemm(!trans_a, false), &[a, dy])?),
        };
        let dc = match cv {
            Some(c) if want_c => {
                let k = b.scalar(beta as f64, b.dtype(c)?)?;
                let t = b.mul(dy, k)?;
                Some(b.sum_to(t, c)?)
            }
            _ => None,
        };
        Ok(vec![da, db, dc])
    }
}

// ---- evaluation

/// One 2-D product into `c` (row-major m×n): f32/f64 through the packed SIMD GEMM, other
/// types through the generic loop.
pub trait MatMulElem: Elem {
    #[allow(clippy::too_many_arguments)]
    fn mm(m: usize, k: usize, n: usize, a: &[Self], la: Layout, b: &[Self], lb: Layout, c: &mut [Self]) {
        gemm::gemm_generic(m, k, n, a, la, b, lb, c, Layout::row_major(n));
    }
}
impl MatMulElem for f32 {
    fn mm(m: usize, k: usize, n: usize, a: &[f32], la: Layout, b: &[f32], lb: Layout, c: &mut [f32]) {
        gemm::sgemm(m, k, n, 1.0, a, la, b, lb, 0.0, c, Layout::row_major(n));
    }
}
impl MatMulElem for f64 {
    fn mm(m: usize, k: usize, n: usize, a: &[f64], la: Layout, b: &[f64], lb: Layout, c: &mut [f64]) {
        gemm::dgemm(m, k, n, 1.0, a, la, b, lb, 0.0, c, Layout::row_major(n));
    }
}
macro_rules! generic_mm {
    ($($t:ty),*) => { $(impl MatMulElem for $t {})* };
}
generic_mm!(half::f16, half::bf16, i8, i16, i32, i64, u8, u16, u32, u64);

/// MatMul of `a` (dims `ash`) and `b` (dims `bsh`): the output's dims and elements.
fn batched<T: MatMulElem>(a: &[T], ash: &[usize], b: &[T], bsh: &[usize]) -> R<(Vec<usize>, Vec<T>)> {
    if ash.is_empty() || bsh.is_empty() {
        return Err("MatMul inputs must have rank >= 1".into());
    }
    // 1-D promotion: a → [1, k], b → [k, 1]; the added dim is removed after.
    let ash2: Vec<usize> = if ash.len() == 1 { vec![1, ash[0]] } else { ash.to_vec() };
    let bsh2: Vec<usize> = if bsh.len() == 1 { vec![bsh[0], 1] } else { bsh.to_vec() };
    let (m, k) = (ash2[ash2.len() - 2], ash2[ash2.len() - 1]);
    let (k2, n) = (bsh2[bsh2.len() - 2], bsh2[bsh2.len() - 1]);
    if k != k2 {
        return Err(format!("MatMul inner dims differ: {ash:?} @ {bsh:?}"));
    }
    let (batch_a, batch_b) = (&ash2[..ash2.len() - 2], &bsh2[..bsh2.len() - 2]);
    let batch = broadcast_shapes(batch_a, batch_b)?;
    let nb = checked_numel(&batch)?;
    let mut out = vec![T::zero(); checked_numel(&[nb, m, n])?];
    let (sa, sb) = (broadcast_strides(batch_a, &batch), broadcast_strides(batch_b, &batch));
    let mut idx = vec![0usize; batch.len()];
    for bi in 0..nb {
        let oa: usize = idx.iter().zip(&sa).map(|(i, s)| i * s).sum::<usize>() * m * k;
        let ob: usize = idx.iter().zip(&sb).map(|(i, s)| i * s).sum::<usize>() * k * n;
        T::mm(m, k, n, &a[oa..oa + m * k], Layout::row_major(k), &b[ob..ob + k * n], Layout::row_major(n), &mut out[bi * m * n..(bi + 1) * m * n]);
        // The next batch entry's coordinates.
        for d in (0..batch.len()).rev() {
            idx[d] += 1;
            if idx[d] < batch[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    let mut shape = batch;
    if ash.len() > 1 {
        shape.push(m);
    }
    if bsh.len() > 1 {
        shape.push(n);
    }
    Ok((shape, out))
}

/// MatMul of two tensors of one numeric type.
pub fn matmul(a: &Tensor, b: &Tensor) -> R<Tensor> {
    macro_rules! go {
        ($($variant:ident),*) => {
            match (&a.data, &b.data) {
                $((Data::$variant(x), Data::$variant(y)) => {
                    let (s, v) = batched(x, &a.shape, y, &b.shape)?;
                    Tensor::new(s, Data::$variant(v))
                })*
                _ => return Err(format!("MatMul needs equal numeric types, got {} and {}", a.dtype(), b.dtype())),
            }
        };
    }
    Ok(go!(F32, F64, F16, BF16, I8, I16, I32, I64, U8, U16, U32, U64))
}

/// Gemm: `y = op(A) @ op(B)`, then `y *= alpha`, then `y += beta * C` (the order generated
/// code follows, so both give the same bits).
fn gemm_eval(g: &Gemm, a: &Tensor, b: &Tensor, c: Option<&Tensor>) -> R<Tensor> {
    let &Gemm { alpha, beta, trans_a: ta, trans_b: tb } = g;
    if a.rank() != 2 || b.rank() != 2 {
        return Err(format!("Gemm needs 2-D A and B, got {:?} and {:?}", a.shape, b.shape));
    }
    let (m, k) = if ta { (a.shape[1], a.shape[0]) } else { (a.shape[0], a.shape[1]) };
    let (k2, n) = if tb { (b.shape[1], b.shape[0]) } else { (b.shape[0], b.shape[1]) };
    if k != k2 {
        return Err(format!("Gemm inner dims differ: A {:?} (transA={ta}) B {:?} (transB={tb})", a.shape, b.shape));
    }
    let la = if ta { Layout::col_major(m) } else { Layout::row_major(k) };
    let lb = if tb { Layout::col_major(k) } else { Layout::row_major(n) };
    macro_rules! go {
        ($($variant:ident),*) => {
            match (&a.data, &b.data) {
                $((Data::$variant(x), Data::$variant(y)) => {
                    let mut out = vec![Elem::zero(); checked_numel(&[m, n])?];
                    MatMulElem::mm(m, k, n, x, la, y, lb, &mut out);
                    if alpha != 1.0 {
                        let alpha_t = Elem::from_f64(alpha as f64);
                        out.iter_mut().for_each(|p| *p = Elem::mul(*p, alpha_t));
                    }
                    if let Some(c) = c {
                        let Data::$variant(cv) = &c.data else { return Err(format!("C must be {}", a.dtype())) };
                        if c.rank() > 2 || broadcast_shapes(&c.shape, &[m, n])? != [m, n] {
                            return Err(format!("C {:?} does not broadcast to [{m}, {n}]", c.shape));
                        }
                        let st = broadcast_strides(&c.shape, &[m, n]);
                        let beta_t = Elem::from_f64(beta as f64);
                        for i in 0..m {
                            for j in 0..n {
                                let cval = cv[i * st[0] + j * st[1]];
                                let cval = if beta == 1.0 { cval } else { Elem::mul(cval, beta_t) };
                                out[i * n + j] = Elem::add(out[i * n + j], cval);
                            }
                        }
                    }
                    Tensor::new(vec![m, n], Data::$variant(out))
                })*
                _ => return Err(format!("Gemm needs equal numeric types, got {} and {}", a.dtype(), b.dtype())),
            }
        };
    }
    Ok(go!(F32, F64, F16, BF16, I32, I64, U32, U64))
}

// ---- generated code

/// A `gemm::Layout` literal; a size that is not a plain number is converted to `isize`.
fn layout(row: &str, col: &str) -> String {
    let s = |e: &str| if e.parse::<usize>().is_ok() { e.to_string() } else { format!("{e} as isize") };
    format!("rt::kernels::gemm::Layout {{ row_stride: {}, col_stride: {} }}", s(row), s(col))
}

fn emit_gemm(g: &Gemm, cx: &EmitCx) -> Result<String, CodegenError> {
    let (a, b, out) = (cx.input(0)?, cx.input(1)?, cx.output(0)?);
    let od = cx.dtype(out)?;
    let (ash, bsh, osh) = (cx.dims(a)?, cx.dims(b)?, cx.dims(out)?);
    if osh.len() != 2 || !matches!(od, DType::F32 | DType::F64) {
        return Err(cx.err("Gemm needs 2-D float operands"));
    }
    let (m_d, [k_d, _], _) = g.mkn(&ash, &bsh).map_err(|e| cx.err(e))?;
    let nn_d = osh[1].clone();
    let (m, k, nn) = (cx.size(m_d)?, cx.size(k_d)?, cx.size(&nn_d)?);
    let la = if g.trans_a { layout("1", "m") } else { layout("k", "1") };
    let lb = if g.trans_b { layout("1", "k") } else { layout("nn", "1") };
    let (gemm, lit): (&str, fn(f32) -> String) = if od == DType::F32 { ("sgemm", f32_lit) } else { ("dgemm", |v| f64_lit(v as f64)) };
    // As the interpreter: y = A @ B, then y *= alpha, then y += beta * C, so both give the
    // same bits.
    let mut s = format!(
        "let (m, k, nn) = ({m}, {k}, {nn});\nlet y = {};\n\
         rt::kernels::gemm::{gemm}(m, k, nn, 1.0, {}, {la}, {}, {lb}, 0.0, y, {});\n",
        cx.write(out)?,
        cx.read(a)?,
        cx.read(b)?,
        layout("nn", "1")
    );
    if g.alpha != 1.0 {
        s += &format!("for v in y.iter_mut() {{ *v *= {}; }}\n", lit(g.alpha));
    }
    if let Some(c) = cx.opt_input(2) {
        let st = cx.broadcast_strides(&cx.dims(c)?, &[m_d.clone(), nn_d])?;
        let scaled = if g.beta == 1.0 { "c[i * s0 + j * s1]".to_string() } else { format!("c[i * s0 + j * s1] * {}", lit(g.beta)) };
        s += &format!(
            "let c = {};\nlet (s0, s1): (usize, usize) = ({}, {});\n\
             for i in 0..m {{ for j in 0..nn {{ y[i * nn + j] += {scaled}; }} }}\n",
            cx.read(c)?,
            st[0],
            st[1]
        );
    }
    Ok(s)
}

/// MatMul with numpy semantics: 1-D operands promoted (and the added dim dropped again), the
/// batch dims broadcast; one GEMM per batch entry at offsets from the broadcast strides.
fn emit_matmul(cx: &EmitCx) -> Result<String, CodegenError> {
    let (a, b, out) = (cx.input(0)?, cx.input(1)?, cx.output(0)?);
    let od = cx.dtype(out)?;
    let (ash, bsh, osh) = (cx.dims(a)?, cx.dims(b)?, cx.dims(out)?);
    if ash.is_empty() || bsh.is_empty() {
        return Err(cx.err("MatMul of scalars"));
    }
    let a2: Vec<DimExpr> = if ash.len() == 1 { vec![c(1), ash[0].clone()] } else { ash.clone() };
    let b2: Vec<DimExpr> = if bsh.len() == 1 { vec![bsh[0].clone(), c(1)] } else { bsh.clone() };
    let (m, k, nn) = (&a2[a2.len() - 2], &a2[a2.len() - 1], &b2[b2.len() - 1]);
    // The output is the batch dims, then m unless A was 1-D, then n unless B was 1-D.
    let kept = usize::from(ash.len() >= 2) + usize::from(bsh.len() >= 2);
    let batch = osh.get(..osh.len().checked_sub(kept).ok_or_else(|| cx.err("output rank too small"))?).unwrap_or(&[]);
    let (ba, bb) = (&a2[..a2.len() - 2], &b2[..b2.len() - 2]);
    let (sa, sb) = (cx.broadcast_strides(ba, batch)?, cx.broadcast_strides(bb, batch)?);
    let args = "&a[oa..oa + m * k], rt::kernels::gemm::Layout { row_stride: k as isize, col_stride: 1 }, \
                &b[ob..ob + k * nn], rt::kernels::gemm::Layout { row_stride: nn as isize, col_stride: 1 }";
    let y = "yb, rt::kernels::gemm::Layout { row_stride: nn as isize, col_stride: 1 }";
    let call = match od {
        DType::F32 => format!("rt::kernels::gemm::sgemm(m, k, nn, 1.0, {args}, 0.0, {y})"),
        DType::F64 => format!("rt::kernels::gemm::dgemm(m, k, nn, 1.0, {args}, 0.0, {y})"),
        _ => format!("rt::kernels::gemm::gemm_generic(m, k, nn, {args}, {y})"),
    };
    let head = format!(
        "let (a, b, y) = ({}, {}, {});\nlet (m, k, nn): (usize, usize, usize) = ({}, {}, {});\n",
        cx.read(a)?,
        cx.read(b)?,
        cx.write(out)?,
        cx.size(m)?,
        cx.size(k)?,
        cx.size(nn)?
    );
    if batch.iter().all(|d| d.as_const() == Some(1)) {
        return Ok(format!("{head}let (oa, ob, yb) = (0usize, 0usize, &mut y[..m * nn]);\n{call};"));
    }
    let nb = batch.len();
    // One batch entry: the operands' entries under broadcasting, and its GEMM.
    let entry = |y_at: &str| {
        format!(
            "// The operands' batch entries under broadcasting.\n\
             let (mut rest, mut oa, mut ob) = (bi, 0usize, 0usize);\n\
             for d in (0..{nb}).rev() {{ let ix = rest % batch[d]; rest /= batch[d]; oa += ix * sa[d]; ob += ix * sb[d]; }}\n\
             let (oa, ob) = (oa * m * k, ob * k * nn);\n\
             let yb = &mut y[{y_at} * m * nn..][..m * nn];\n\
             {call};\n"
        )
    };
    let head = format!(
        "{head}let batch: [usize; {nb}] = {};\nlet (sa, sb): ([usize; {nb}], [usize; {nb}]) = ([{}], [{}]);\n\
         let entries: usize = batch.iter().product();\n",
        cx.sizes(batch)?,
        sa.join(", "),
        sb.join(", ")
    );
    let macs = [m, k, nn].into_iter().chain(batch).try_fold(1usize, |acc, d| Some(acc.saturating_mul(usize::try_from(d.as_const()?).ok()?)));
    if macs.is_some_and(|w| w < burnc_runtime::PARALLEL_WORK) {
        // Too little work to split: one loop.
        return Ok(format!("{head}for bi in 0..entries {{\n{}}}", entry("bi")));
    }
    // Ranges of batch entries over the thread pool (a GEMM inside a task runs on its thread).
    Ok(format!(
        "{head}rt::for_plane_ranges(entries, m * nn, entries * m * k * nn, y, &|b0, b1, y| {{\nfor bi in b0..b1 {{\n{}}}\n}});",
        entry("(bi - b0)")
    ))
}

pub fn examples() -> Vec<super::Example> {
    let t = |shape: Vec<usize>, seed: usize| {
        let n = shape.iter().product::<usize>();
        Tensor::from_f32s(shape, (0..n).map(|i| (((i + seed) * 7 % 13) as f32 - 6.0) / 4.0).collect())
    };
    let ex = |op: super::OpRef, inputs: Vec<Tensor>| super::Example { consts: vec![], op, inputs };
    vec![
        // Batch dims broadcast (A's 3 against B's 1), and 1-D operands on either side.
        ex(super::OpRef::new(MatMul), vec![t(vec![3, 2, 4], 0), t(vec![1, 4, 5], 1)]),
        ex(super::OpRef::new(MatMul), vec![t(vec![4], 2), t(vec![2, 4, 3], 3)]),
        ex(super::OpRef::new(MatMul), vec![t(vec![2, 3, 4], 4), t(vec![4], 5)]),
        ex(super::OpRef::new(Gemm { alpha: 0.5, beta: 2.0, trans_a: true, trans_b: false }), vec![t(vec![4, 3], 6), t(vec![4, 5], 7), t(vec![5], 8)]),
        ex(super::OpRef::new(Gemm { alpha: 1.0, beta: 1.0, trans_a: false, trans_b: true }), vec![t(vec![3, 4], 9), t(vec![5, 4], 10), t(vec![3, 1], 11)]),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_refuse_inner_dims_that_differ_and_a_c_that_does_not_broadcast() {
        let shapes = |op: &dyn OpDef, ins: &[&[usize]]| op.shapes(&mut ShapeCx::of_shapes(ins.iter().map(|s| Some((DType::F32, *s))))).map(|o| o[0].dims.clone());
        let d = |v: &[i64]| Some(Some(v.iter().map(|&x| c(x)).collect::<Vec<_>>()));
        assert_eq!(shapes(&MatMul, &[&[3, 2, 4], &[1, 4, 5]]).ok(), d(&[3, 2, 5]));
        assert_eq!(shapes(&MatMul, &[&[4], &[2, 4, 3]]).ok(), d(&[2, 3]));
        assert!(shapes(&MatMul, &[&[2, 4], &[5, 3]]).is_err());
        let g = Gemm { alpha: 1.0, beta: 1.0, trans_a: true, trans_b: true };
        assert_eq!(shapes(&g, &[&[4, 3], &[5, 4], &[5]]).ok(), d(&[3, 5]));
        assert!(shapes(&g, &[&[4, 3], &[5, 4], &[3]]).is_err());
        assert!(shapes(&g, &[&[4, 3], &[5, 4], &[2, 3, 5]]).is_err());
        assert!(shapes(&g, &[&[4, 3], &[4, 5]]).is_err());
    }
}
