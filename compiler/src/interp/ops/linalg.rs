//! MatMul (numpy semantics) and Gemm.
use super::util::{arg, broadcast_shapes, numel, one, opt_arg};
use super::OpResult;
use crate::interp::RtValue;
use crate::ir::Op;
use crate::tensor::{Data, Tensor};
use burnc_runtime::kernels::gemm::{self, Layout};
use burnc_runtime::Elem;

pub fn eval(op: &Op, args: &[Option<RtValue>], _n: usize) -> OpResult {
    match op {
        Op::MatMul => one(matmul(arg(args, 0)?, arg(args, 1)?)?),
        Op::Gemm { alpha, beta, trans_a, trans_b } => {
            one(gemm_op(arg(args, 0)?, arg(args, 1)?, opt_arg(args, 2)?, *alpha, *beta, *trans_a, *trans_b)?)
        }
        _ => Err(format!("{} is not implemented in the interpreter yet", op.name())),
    }
}

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

fn mm<T: MatMulElem>(m: usize, k: usize, n: usize, a: &[T], la: Layout, b: &[T], lb: Layout, c: &mut [T]) {
    T::mm(m, k, n, a, la, b, lb, c)
}

fn batched<T: MatMulElem>(a: &[T], ash: &[usize], b: &[T], bsh: &[usize]) -> Result<(Vec<usize>, Vec<T>), String> {
    if ash.is_empty() || bsh.is_empty() {
        return Err("MatMul inputs must have rank >= 1".into());
    }
    // 1-D promotion: a → [1, k], b → [k, 1]; the added dim is removed after.
    let a_vec = ash.len() == 1;
    let b_vec = bsh.len() == 1;
    let ash2: Vec<usize> = if a_vec { vec![1, ash[0]] } else { ash.to_vec() };
    let bsh2: Vec<usize> = if b_vec { vec![bsh[0], 1] } else { bsh.to_vec() };
    let (m, k) = (ash2[ash2.len() - 2], ash2[ash2.len() - 1]);
    let (k2, n) = (bsh2[bsh2.len() - 2], bsh2[bsh2.len() - 1]);
    if k != k2 {
        return Err(format!("MatMul inner dims differ: {ash:?} @ {bsh:?}"));
    }
    let batch_a = &ash2[..ash2.len() - 2];
    let batch_b = &bsh2[..bsh2.len() - 2];
    let batch = broadcast_shapes(batch_a, batch_b)?;
    let nb = numel(&batch)?;
    let mut out = vec![T::zero(); numel(&[nb, m, n])?];
    let sa = super::util::broadcast_strides(batch_a, &batch);
    let sb = super::util::broadcast_strides(batch_b, &batch);
    let mut idx = vec![0usize; batch.len()];
    for bi in 0..nb {
        let (mut oa, mut ob) = (0, 0);
        for d in 0..batch.len() {
            oa += idx[d] * sa[d];
            ob += idx[d] * sb[d];
        }
        let a_off = oa * m * k;
        let b_off = ob * k * n;
        mm(
            m,
            k,
            n,
            &a[a_off..a_off + m * k],
            Layout::row_major(k),
            &b[b_off..b_off + k * n],
            Layout::row_major(n),
            &mut out[bi * m * n..(bi + 1) * m * n],
        );
        for d in (0..batch.len()).rev() {
            idx[d] += 1;
            if idx[d] < batch[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    let mut shape = batch;
    if !a_vec {
        shape.push(m);
    }
    if !b_vec {
        shape.push(n);
    }
    Ok((shape, out))
}

pub fn matmul(a: &Tensor, b: &Tensor) -> Result<Tensor, String> {
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

#[allow(clippy::too_many_arguments)]
fn gemm_op(a: &Tensor, b: &Tensor, c: Option<&Tensor>, alpha: f32, beta: f32, ta: bool, tb: bool) -> Result<Tensor, String> {
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
    // Start from beta*C broadcast to [m, n], then accumulate alpha*A@B.
    macro_rules! go {
        ($($variant:ident),*) => {
            match (&a.data, &b.data) {
                $((Data::$variant(x), Data::$variant(y)) => {
                    let mut prod = vec![Elem::zero(); m * n];
                    mm(m, k, n, x, la, y, lb, &mut prod);
                    let alpha_t = Elem::from_f64(alpha as f64);
                    let mut out: Vec<_> = prod.iter().map(|&p| if alpha == 1.0 { p } else { Elem::mul(p, alpha_t) }).collect();
                    if let Some(c) = c {
                        let Data::$variant(cv) = &c.data else { return Err(format!("C must be {}", a.dtype())) };
                        let cs = broadcast_shapes(&c.shape, &[m, n])?;
                        if cs != [m, n] {
                            return Err(format!("C {:?} does not broadcast to [{m}, {n}]", c.shape));
                        }
                        let st = super::util::broadcast_strides(&c.shape, &[m, n]);
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

