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
        Op::Einsum { equation } => {
            let xs: Vec<&Tensor> = args.iter().flatten().map(|v| v.as_tensor()).collect::<Result<_, _>>()?;
            one(einsum(equation, &xs)?)
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

/// Label ids: letters by their char code, ellipsis dims as `ELL + k` (k counted right-aligned
/// over the widest ellipsis).
const ELL: u32 = 1 << 16;

/// One einsum term: letters and at most one ellipsis.
fn parse_term(term: &str) -> Result<(Vec<u32>, Option<usize>), String> {
    let mut labels = Vec::new();
    let mut ell = None;
    let mut rest = term;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("...") {
            if ell.is_some() {
                return Err(format!("term `{term}` has more than one ellipsis"));
            }
            ell = Some(labels.len());
            rest = r;
            continue;
        }
        let c = rest.chars().next().unwrap_or(' ');
        if !c.is_ascii_alphabetic() {
            return Err(format!("bad character `{c}` in einsum term `{term}`"));
        }
        labels.push(c as u32);
        rest = &rest[1..];
    }
    Ok((labels, ell))
}

/// An einsum resolved against its input shapes: every label's size (output labels first),
/// each input's stride per label (`[input][label]`) and the output shape. Depends only on
/// shapes, so codegen resolves it at compile time.
pub struct EinsumPlan {
    pub dims: Vec<usize>,
    pub strides: Vec<usize>,
    pub out_shape: Vec<usize>,
}

/// General einsum (explicit or implicit output, ellipsis, repeated labels for diagonals,
/// sums) by a direct loop over every label (the runtime's kernel); f64 accumulation for
/// floats, i64 for integers.
pub fn einsum(equation: &str, xs: &[&Tensor]) -> Result<Tensor, String> {
    let dtype = xs.first().ok_or("Einsum needs at least one input")?.dtype();
    if let Some(x) = xs.iter().find(|x| x.dtype() != dtype) {
        return Err(format!("Einsum inputs must share a type, got {dtype} and {}", x.dtype()));
    }
    let shapes: Vec<&[usize]> = xs.iter().map(|x| &x.shape[..]).collect();
    let p = einsum_plan(equation, &shapes)?;
    let out_n = numel(&p.out_shape)?;
    let n_out = p.out_shape.len();
    let kern = |e: &'static str| e.to_string();
    let t = if dtype.is_float() {
        let vals: Vec<Vec<f64>> = xs.iter().map(|x| x.to_f64_vec()).collect();
        let refs: Vec<&[f64]> = vals.iter().map(|v| &v[..]).collect();
        let mut out = vec![0f64; out_n];
        burnc_runtime::kernels::einsum::einsum(&refs, &p.strides, &p.dims, n_out, &mut out).map_err(kern)?;
        Tensor::new(p.out_shape, Data::F64(out))
    } else {
        let vals: Vec<Vec<i64>> = xs.iter().map(|x| x.to_i64_vec().ok_or("Einsum: unsupported input type")).collect::<Result<_, _>>()?;
        let refs: Vec<&[i64]> = vals.iter().map(|v| &v[..]).collect();
        let mut out = vec![0i64; out_n];
        burnc_runtime::kernels::einsum::einsum(&refs, &p.strides, &p.dims, n_out, &mut out).map_err(kern)?;
        Tensor::new(p.out_shape, Data::I64(out))
    };
    super::cast::cast(&t, dtype, false)
}

pub fn einsum_plan(equation: &str, shapes: &[&[usize]]) -> Result<EinsumPlan, String> {
    let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (eq.as_str(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    if terms.len() != shapes.len() {
        return Err(format!("equation `{equation}` has {} operands, the node has {} inputs", terms.len(), shapes.len()));
    }
    // Per input: the label of each dim.
    let mut dim_labels: Vec<Vec<u32>> = Vec::new();
    let mut n_ell = 0usize;
    let mut parsed = Vec::new();
    for (t, x) in terms.iter().zip(shapes) {
        let (labels, ell) = parse_term(t)?;
        let e = match ell {
            Some(_) => x.len().checked_sub(labels.len()).ok_or_else(|| format!("term `{t}` has more labels than input rank {}", x.len()))?,
            None => {
                if labels.len() != x.len() {
                    return Err(format!("term `{t}` has {} labels for an input of rank {}", labels.len(), x.len()));
                }
                0
            }
        };
        n_ell = n_ell.max(e);
        parsed.push((labels, ell, e));
    }
    for (labels, ell, e) in &parsed {
        let mut dl: Vec<u32> = Vec::new();
        for (i, &l) in labels.iter().enumerate() {
            if *ell == Some(i) {
                dl.extend((n_ell - e..n_ell).map(|k| ELL + k as u32));
            }
            dl.push(l);
        }
        if *ell == Some(labels.len()) {
            dl.extend((n_ell - e..n_ell).map(|k| ELL + k as u32));
        }
        dim_labels.push(dl);
    }
    // Label sizes (ellipsis dims broadcast; letters must agree).
    let mut sizes: std::collections::BTreeMap<u32, usize> = Default::default();
    for (dl, x) in dim_labels.iter().zip(shapes) {
        for (&l, &d) in dl.iter().zip(x.iter()) {
            match sizes.get(&l).copied() {
                None => {
                    sizes.insert(l, d);
                }
                Some(s) if s == d => {}
                Some(s) if l >= ELL && (s == 1 || d == 1) => {
                    sizes.insert(l, s.max(d));
                }
                Some(s) => return Err(format!("label `{}` has sizes {s} and {d}", char::from_u32(l).unwrap_or('?'))),
            }
        }
    }
    let ell_labels: Vec<u32> = (0..n_ell as u32).map(|k| ELL + k).collect();
    let out_labels: Vec<u32> = match rhs {
        Some(r) => {
            let (labels, ell) = parse_term(r)?;
            // Ellipsis dims the output omits are summed (as numpy does).
            let mut out = Vec::new();
            for (i, &l) in labels.iter().enumerate() {
                if ell == Some(i) {
                    out.extend(&ell_labels);
                }
                if !sizes.contains_key(&l) {
                    return Err(format!("output label `{}` is not in any input", char::from_u32(l).unwrap_or('?')));
                }
                if out.contains(&l) {
                    return Err(format!("output label `{}` is repeated", char::from_u32(l).unwrap_or('?')));
                }
                out.push(l);
            }
            if ell == Some(labels.len()) {
                out.extend(&ell_labels);
            }
            out
        }
        None => {
            let mut count: std::collections::BTreeMap<u32, usize> = Default::default();
            for dl in &dim_labels {
                for &l in dl.iter().filter(|&&l| l < ELL) {
                    *count.entry(l).or_insert(0) += 1;
                }
            }
            let mut out = ell_labels.clone();
            out.extend(count.into_iter().filter(|&(_, c)| c == 1).map(|(l, _)| l));
            out
        }
    };
    let sum_labels: Vec<u32> = sizes.keys().copied().filter(|l| !out_labels.contains(l)).collect();
    let all: Vec<u32> = out_labels.iter().chain(&sum_labels).copied().collect();
    let dims: Vec<usize> = all.iter().map(|l| sizes[l]).collect();
    let out_shape: Vec<usize> = dims[..out_labels.len()].to_vec();
    let out_n = numel(&out_shape)?;
    let inner_n = numel(&dims[out_labels.len()..])?;
    numel(&[out_n, inner_n])?;
    // Per input, its stride along each label of `all` (summed over repeats; 0 when broadcast).
    let mut strides = Vec::with_capacity(all.len() * shapes.len());
    for (dl, x) in dim_labels.iter().zip(shapes) {
        let st = super::util::strides(x);
        for l in &all {
            strides.push(dl.iter().enumerate().filter(|(i, d)| *d == l && x[*i] != 1).map(|(i, _)| st[i]).sum());
        }
    }
    Ok(EinsumPlan { dims, strides, out_shape })
}
