//! Index arithmetic both GPU targets print: expressions over a flat index of literals, `/`,
//! `%`, `*` and `+` only, so the same text is valid CUDA C and WGSL (with `i` an `int` or a
//! `u32`).
pub use crate::interp::ops::util::strides;

/// The expression (C and WGSL alike) of the flat index into an input of shape `ins` broadcast (numpy rules) to
/// `out`, at flat output index `i`.
pub fn broadcast_index(ins: &[usize], out: &[usize], i: &str) -> String {
    // Leading ones past the output's rank say nothing.
    let ins = &ins[ins.len().saturating_sub(out.len()).min(ins.iter().take_while(|&&d| d == 1).count())..];
    let n: usize = ins.iter().product();
    if ins == out || n == out.iter().product::<usize>() && ins.iter().filter(|&&d| d != 1).eq(out.iter().filter(|&&d| d != 1)) {
        return i.to_string();
    }
    if n == 1 {
        return "0".into();
    }
    let (os, off) = (strides(out), out.len() - ins.len());
    let is = strides(ins);
    let mut terms = Vec::new();
    for (k, &d) in ins.iter().enumerate() {
        if d == 1 {
            continue;
        }
        let od = off + k;
        let coord = if od == 0 { format!("({i} / {})", os[od]) } else { format!("(({i} / {}) % {})", os[od], out[od]) };
        terms.push(if is[k] == 1 { coord } else { format!("{coord} * {}", is[k]) });
    }
    if terms.is_empty() {
        "0".into()
    } else {
        terms.join(" + ")
    }
}

/// A MatMul's dims after numpy's rules: 1-D operands promoted ([k] as [1, k] on the left,
/// [k, 1] on the right), batch dims padded to one rank (`pa`, `pb`) and broadcast (`obat`).
pub struct MatMulDims {
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub pa: Vec<usize>,
    pub pb: Vec<usize>,
    pub obat: Vec<usize>,
    pub batches: usize,
}

pub fn matmul_dims(ash: &[usize], bsh: &[usize]) -> MatMulDims {
    let a2: Vec<usize> = if ash.len() == 1 { vec![1, ash[0]] } else { ash.to_vec() };
    let b2: Vec<usize> = if bsh.len() == 1 { vec![bsh[0], 1] } else { bsh.to_vec() };
    let (m, k, n) = (a2[a2.len() - 2], a2[a2.len() - 1], b2[b2.len() - 1]);
    let (abat, bbat) = (&a2[..a2.len() - 2], &b2[..b2.len() - 2]);
    let rank = abat.len().max(bbat.len());
    let pad = |s: &[usize]| -> Vec<usize> { std::iter::repeat_n(1, rank - s.len()).chain(s.iter().copied()).collect() };
    let (pa, pb) = (pad(abat), pad(bbat));
    let obat: Vec<usize> = pa.iter().zip(&pb).map(|(&x, &y)| x.max(y)).collect();
    let batches = obat.iter().product();
    MatMulDims { m, k, n, pa, pb, obat, batches }
}

/// The element offset of batch `z`'s matrix (`mat` elements) in an operand with batch dims
/// `p` broadcast to `obat`.
pub fn batch_offset(p: &[usize], obat: &[usize], mat: usize) -> String {
    match broadcast_index(p, obat, "z").as_str() {
        "0" => "0".into(),
        idx => format!("({idx}) * {mat}"),
    }
}
