//! Quantization kernels (QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger,
//! QLinearMatMul, ConvInteger, QLinearConv), shared by the interpreter and
//! generated code. Integer products and sums stay in integers; floats only for scales.
use crate::elem::Elem;
use crate::small::{self, Small};

/// Where the scale / zero point of element `i` lives: per tensor (`d == 0`), per axis
/// (`block == 0`: index along an axis of size `d` with `inner` elements after it) or blocked
/// (same rank as x, `block` elements per scale along the axis).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QParam {
    pub d: usize,
    pub inner: usize,
    pub block: usize,
}

impl QParam {
    pub const TENSOR: QParam = QParam { d: 0, inner: 1, block: 0 };
    #[inline]
    pub fn index(&self, i: usize) -> usize {
        if self.d == 0 {
            return 0;
        }
        let inner = self.inner.max(1);
        let a = (i / inner) % self.d;
        if self.block == 0 {
            return a;
        }
        let o = i / (inner * self.d);
        (o * self.d.div_ceil(self.block) + a / self.block) * inner + i % inner
    }
}

#[inline]
fn rint(v: f64) -> f64 {
    libm::rint(v)
}

/// `clamp(round_half_even(r) + z, lo, hi)` for a range within ±2^16, NaN to `z`: branch-free
/// f32 steps (the rounding by adding and taking back 1.5·2^23, exact for |r| ≤ 2^22) that
/// vectorize on any x86-64, where `round_ties_even` is a library call without SSE4.1.
#[inline]
fn quantize_f32(r: f32, z: f32, lo: f32, hi: f32) -> i32 {
    const LIMIT: f32 = 4_194_304.0; // 2^22: past it every value saturates anyway
    const MAGIC: f32 = 12_582_912.0; // 1.5 · 2^23
    let r = if r.is_nan() { 0.0 } else { r.clamp(-LIMIT, LIMIT) };
    let v = ((r + MAGIC) - MAGIC + z).clamp(lo, hi);
    // SAFETY: `v` is finite and within ±2^17 after the clamps.
    unsafe { v.to_int_unchecked::<i32>() }
}

/// Clamp to `Q`'s range and store.
#[inline]
fn sat<Q: Elem>(v: i64) -> Q {
    Q::from_i64(v.clamp(Q::lowest().to_i64(), Q::highest().to_i64()))
}

/// x / scale in x's precision (f32 unless `wide`), as the ONNX reference does.
#[inline]
fn ratio(x: f64, s: f64, wide: bool) -> f64 {
    if wide {
        x / s
    } else {
        (x as f32 / s as f32) as f64
    }
}

/// `f(x_part, y_part)` over matching runs of `x` and `y` (the shorter length), the runs split
/// over the thread pool where there are enough elements (a quantized model's quantizers are
/// its largest single-threaded loops otherwise).
fn split_elementwise<A: Sync, B: Send>(x: &[A], y: &mut [B], f: &(dyn Fn(&[A], &mut [B]) + Sync)) {
    const RUN: usize = 1 << 14;
    let n = x.len().min(y.len());
    let full = n / RUN;
    let (head, tail) = y[..n].split_at_mut(full * RUN);
    crate::for_plane_ranges(full, RUN, n, head, &|p0, p1, out| f(&x[p0 * RUN..p1 * RUN], out));
    f(&x[full * RUN..n], tail);
}

/// QuantizeLinear to an integer type: round(x / scale) + zp, saturated. `zp` empty: zero.
pub fn quantize<X: Elem, S: Elem, Q: Elem>(x: &[X], scale: &[S], zp: &[Q], p: QParam, wide: bool, y: &mut [Q]) {
    // One scale, f32 arithmetic and a type of at most 16 bits (whose range f32 holds exactly):
    // the same steps in f32, a loop that vectorizes (this runs on every activation of a
    // quantized model).
    if p.d == 0 && !wide && Q::highest().to_i64() <= 1 << 16 && !scale.is_empty() {
        let s = scale[0].to_f64() as f32;
        let z = zp.first().map_or(0, |z| z.to_i64()) as f32;
        let (lo, hi) = (Q::lowest().to_i64() as f32, Q::highest().to_i64() as f32);
        split_elementwise(x, y, &|x, y| {
            for (o, &xv) in y.iter_mut().zip(x) {
                *o = Q::from_i64(quantize_f32(xv.to_f64() as f32 / s, z, lo, hi) as i64);
            }
        });
        return;
    }
    for (i, (o, &xv)) in y.iter_mut().zip(x).enumerate() {
        let j = p.index(i);
        // `as` saturates (NaN → 0); the zero point is added before clamping to the range.
        let r = rint(ratio(xv.to_f64(), scale[j].to_f64(), wide)) as i64;
        let z = zp.get(j).map(|z| z.to_i64()).unwrap_or(0);
        *o = sat(r.saturating_add(z));
    }
}

/// QuantizeLinear to a small type: float8, float4 or a 2/4-bit int (`zp` raw bits, empty: zero).
#[allow(clippy::too_many_arguments)]
pub fn quantize_small<X: Elem, S: Elem>(x: &[X], scale: &[S], zp: &[u8], p: QParam, wide: bool, to: Small, saturate: bool, y: &mut [u8]) {
    for (i, (o, &xv)) in y.iter_mut().zip(x).enumerate() {
        let j = p.index(i);
        let z = zp.get(j).map(|&b| small::small_to_f64(to, b)).unwrap_or(0.0);
        let r = ratio(xv.to_f64(), scale[j].to_f64(), wide);
        *o = match to {
            // 2/4-bit ints: round, add the zero point, clamp to the type's range.
            Small::U4 | Small::I4 | Small::U2 | Small::I2 => {
                let (lo, hi) = small_int_range(to);
                let q = (rint(r) as i64).saturating_add(z as i64);
                small::small_from_i64(to, q.clamp(lo, hi))
            }
            // float4 has no infinity or NaN: it always saturates.
            Small::F4E2M1 => small::small_from_f64(to, ((r as f32) + z as f32) as f64, true),
            _ => small::from_f32(to, (r + z) as f32, saturate),
        };
    }
}

fn small_int_range(d: Small) -> (i64, i64) {
    match d {
        Small::U4 => (0, 15),
        Small::I4 => (-8, 7),
        Small::U2 => (0, 3),
        _ => (-2, 1),
    }
}

#[inline]
fn deq(d: f64, s: f64, wide: bool) -> f64 {
    if wide {
        d * s
    } else {
        (d as f32 * s as f32) as f64
    }
}

/// DequantizeLinear from an integer type: (x - zp) * scale, the difference in integers.
pub fn dequantize<Q: Elem, S: Elem, Y: Elem>(x: &[Q], scale: &[S], zp: &[Q], p: QParam, wide: bool, y: &mut [Y]) {
    // One scale and a type of at most 16 bits: the same f32 product in a loop that vectorizes
    // (differences of 16-bit values are exact in i32 and f32).
    if p.d == 0 && !wide && Q::highest().to_i64() <= 1 << 16 && Q::lowest().to_i64() >= -(1 << 16) && !scale.is_empty() {
        let s = scale[0].to_f64() as f32;
        let z = zp.first().map_or(0, |z| z.to_i64()) as i32;
        split_elementwise(x, y, &|x, y| {
            for (o, &xv) in y.iter_mut().zip(x) {
                *o = Y::from_f64(((xv.to_i64() as i32 - z) as f32 * s) as f64);
            }
        });
        return;
    }
    for (i, (o, &xv)) in y.iter_mut().zip(x).enumerate() {
        let j = p.index(i);
        let z = zp.get(j).map(|z| z.to_i64()).unwrap_or(0);
        *o = Y::from_f64(deq((xv.to_i64() - z) as f64, scale[j].to_f64(), wide));
    }
}

/// DequantizeLinear from a small type (raw bits): float8, float4 or a 2/4-bit int.
#[allow(clippy::too_many_arguments)]
pub fn dequantize_small<S: Elem, Y: Elem>(x: &[u8], from: Small, scale: &[S], zp: &[u8], p: QParam, wide: bool, y: &mut [Y]) {
    for (i, (o, &xv)) in y.iter_mut().zip(x).enumerate() {
        let j = p.index(i);
        let z = zp.get(j).map(|&b| small::small_to_f64(from, b)).unwrap_or(0.0);
        *o = Y::from_f64(deq(small::small_to_f64(from, xv) - z, scale[j].to_f64(), wide));
    }
}

/// DynamicQuantizeLinear: uint8 quantization over the range of x (widened to hold 0).
/// Returns (scale, zero point) and writes `y`.
pub fn dynamic_quantize(x: &[f32], y: &mut [u8]) -> (f32, u8) {
    let lo = x.iter().copied().fold(0f32, f32::min);
    let hi = x.iter().copied().fold(0f32, f32::max);
    let scale = (hi - lo) / 255.0;
    if scale == 0.0 || !scale.is_finite() {
        y.iter_mut().for_each(|v| *v = 0);
        return (scale, 0);
    }
    let zp = libm::rintf(0.0 - lo / scale).clamp(0.0, 255.0) as u8;
    for (o, &v) in y.iter_mut().zip(x) {
        let r = libm::rintf(v / scale);
        *o = (if r.is_nan() { 0.0 } else { r } + zp as f32).clamp(0.0, 255.0) as u8;
    }
    (scale, zp)
}

/// Precision of the scale product of QLinearMatMul / QLinearConv (the scales' type).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScalePrec {
    F16,
    F32,
    F64,
}

/// a * b / y in the scales' own precision, as the reference does.
pub fn scale_ratio(a: f64, b: f64, y: f64, p: ScalePrec) -> f64 {
    match p {
        ScalePrec::F64 => a * b / y,
        ScalePrec::F16 => {
            let h = half::f16::from_f64;
            (h(a) * h(b) / h(y)).to_f64()
        }
        ScalePrec::F32 => (a as f32 * b as f32 / y as f32) as f64,
    }
}

/// round(acc * mult) + zp, saturated to `Q`. With f32 scales the product is an f32 one, as
/// onnxruntime's requantization (MLAS) and the ONNX reference (float32 arrays) compute it: a
/// product in f64 rounds the other way where the f32 one lands on a half.
#[inline]
pub fn requantize_one<Q: Elem>(acc: i64, mult: f64, zp: i64, prec: ScalePrec) -> Q {
    let v = match prec {
        ScalePrec::F32 => (acc as f32 * mult as f32) as f64,
        _ => acc as f64 * mult,
    };
    sat((rint(v) as i64).saturating_add(zp))
}

#[inline]
fn per<T: Elem>(v: &[T], i: usize) -> T {
    if v.len() == 1 {
        v[0]
    } else {
        v.get(i).copied().unwrap_or_default()
    }
}

/// Integer matrix product of (a - az) [m, k] by (b - bz) [k, n] per batch, i32 wrapping
/// arithmetic. `a_base` / `b_base`: element offset of each batch's matrices (broadcasting).
/// `az`: empty, one value or one per row; `bz`: empty, one or one per column.
#[allow(clippy::too_many_arguments)]
pub fn matmul_integer<A: Elem, B: Elem>(
    a: &[A],
    b: &[B],
    az: &[A],
    bz: &[B],
    a_base: &[u32],
    b_base: &[u32],
    m: usize,
    k: usize,
    n: usize,
    y: &mut [i32],
) {
    for (bi, (&ab, &bb)) in a_base.iter().zip(b_base).enumerate() {
        let (ab, bb) = (ab as usize, bb as usize);
        // Row by row of B (contiguous, so the inner loop vectorizes); B's zero points come
        // off at the end of each output row: Σ_t x_t·(b_tc − zb_c) = Σ_t x_t·b_tc − zb_c·Σ_t x_t,
        // the same in wrapping i32 arithmetic.
        for r in 0..m {
            let za = if az.is_empty() { 0 } else { per(az, r).to_i64() as i32 };
            let row = &mut y[(bi * m + r) * n..(bi * m + r + 1) * n];
            row.fill(0);
            let mut xsum = 0i32;
            for t in 0..k {
                let x = (a[ab + r * k + t].to_i64() as i32).wrapping_sub(za);
                if x == 0 {
                    // Activations at their zero point (after a ReLU, often most of them).
                    continue;
                }
                xsum = xsum.wrapping_add(x);
                for (o, w) in row.iter_mut().zip(&b[bb + t * n..bb + (t + 1) * n]) {
                    *o = o.wrapping_add(x.wrapping_mul(w.to_i64() as i32));
                }
            }
            if !bz.is_empty() {
                for (c, o) in row.iter_mut().enumerate() {
                    *o = o.wrapping_sub(xsum.wrapping_mul(per(bz, c).to_i64() as i32));
                }
            }
        }
    }
}

/// QLinearMatMul's requantization of the integer product `acc` ([batch, m, n]) plus `bias` (i32,
/// one per column, or empty: the QGemm form QDQ rewrites produce); `a_scale`: one or one per
/// row, `b_scale`: one or one per column, `y_scale` one, `y_zp` one or empty (zero).
#[allow(clippy::too_many_arguments)]
pub fn qlinear_matmul_requant<S: Elem, Q: Elem>(
    acc: &[i32],
    bias: &[i32],
    a_scale: &[S],
    b_scale: &[S],
    y_scale: &[S],
    y_zp: &[Q],
    prec: ScalePrec,
    m: usize,
    n: usize,
    y: &mut [Q],
) {
    let ys = first_f64(y_scale);
    let yz = y_zp.first().map(|z| z.to_i64()).unwrap_or(0);
    for (i, (o, &c)) in y.iter_mut().zip(acc).enumerate() {
        let (col, row) = (i % n.max(1), (i / n.max(1)) % m.max(1));
        let mult = scale_ratio(per(a_scale, row).to_f64(), per(b_scale, col).to_f64(), ys, prec);
        *o = requantize_one(c as i64 + bias.get(col).map_or(0, |&b| b as i64), mult, yz, prec);
    }
}

/// The first value as f64 (NaN when empty, which callers rule out).
#[inline]
fn first_f64<T: Elem>(v: &[T]) -> f64 {
    v.first().map(|s| s.to_f64()).unwrap_or(f64::NAN)
}

/// Most spatial dimensions of an integer convolution.
pub const MAX_SPATIAL: usize = 8;

/// Geometry of an N-d convolution x [nb, c, ins…] * w [m, c/group, ks…] → [nb, m, outs…].
#[derive(Clone, Copy, Debug)]
pub struct ConvGeom<'a> {
    pub nb: usize,
    pub c: usize,
    pub m: usize,
    pub group: usize,
    pub ins: &'a [usize],
    pub outs: &'a [usize],
    pub ks: &'a [usize],
    pub strides: &'a [usize],
    pub dil: &'a [usize],
    pub pad_begin: &'a [usize],
}

/// Integer convolution of (x - xz) by (w - wz) (xz: empty or one value; wz: empty, one or one per
/// output channel), sums in i64, plus an optional per-channel bias; `f` maps each (output index,
/// channel, sum) to the stored value.
pub fn conv_integer<X: Elem, W: Elem, Y>(
    x: &[X],
    w: &[W],
    xz: &[X],
    wz: &[W],
    g: &ConvGeom,
    y: &mut [Y],
    mut f: impl FnMut(usize, usize, i64) -> Y,
) {
    let sp = g.ins.len().min(MAX_SPATIAL);
    let group = g.group.max(1);
    let (ckg, mg) = (g.c / group, g.m / group);
    let mut xs = [0usize; MAX_SPATIAL + 2];
    let mut ws = [0usize; MAX_SPATIAL + 2];
    xs[sp + 1] = 1;
    ws[sp + 1] = 1;
    for d in (0..sp).rev() {
        xs[d + 1] = xs[d + 2] * g.ins[d];
        ws[d + 1] = ws[d + 2] * g.ks[d];
    }
    if sp == 0 {
        xs[1] = 1;
        ws[1] = 1;
    }
    let (xs1, ws1) = (xs[1], ws[1]);
    let (xs0, ws0) = (xs1 * g.c, ws1 * ckg);
    // xs[d + 2] is the stride of spatial dim d.
    let xzv = xz.first().map(|z| z.to_i64()).unwrap_or(0);
    let kn: usize = g.ks[..sp].iter().product();
    let on: usize = g.outs[..sp].iter().product();
    let mut opos = [0usize; MAX_SPATIAL];
    let mut kpos = [0usize; MAX_SPATIAL];
    let mut o = 0;
    for nn in 0..g.nb {
        for mo in 0..g.m {
            let gi = mo / mg.max(1);
            let wzv = if wz.is_empty() { 0 } else { per(wz, mo).to_i64() };
            for oi in 0..on {
                let mut r = oi;
                for d in (0..sp).rev() {
                    opos[d] = r % g.outs[d];
                    r /= g.outs[d];
                }
                let mut sum = 0i64;
                for ki in 0..kn {
                    let mut r = ki;
                    for d in (0..sp).rev() {
                        kpos[d] = r % g.ks[d];
                        r /= g.ks[d];
                    }
                    let mut xoff = nn * xs0;
                    let mut inside = true;
                    for d in 0..sp {
                        let p = (opos[d] * g.strides[d] + kpos[d] * g.dil[d]) as i64 - g.pad_begin[d] as i64;
                        if p < 0 || p >= g.ins[d] as i64 {
                            inside = false;
                            break;
                        }
                        xoff += p as usize * xs[d + 2];
                    }
                    if !inside {
                        continue;
                    }
                    let mut woff = mo * ws0;
                    for d in 0..sp {
                        woff += kpos[d] * ws[d + 2];
                    }
                    for ci in 0..ckg {
                        let xi = x[xoff + (gi * ckg + ci) * xs1].to_i64() - xzv;
                        let wi = w[woff + ci * ws1].to_i64() - wzv;
                        sum += xi * wi;
                    }
                }
                y[o] = f(o, mo, sum);
                o += 1;
            }
        }
    }
}

/// ConvInteger: the sums as i32.
pub fn conv_integer_i32<X: Elem, W: Elem>(x: &[X], w: &[W], xz: &[X], wz: &[W], g: &ConvGeom, y: &mut [i32]) {
    conv_integer(x, w, xz, wz, g, y, |_, _, s| s as i32);
}

/// QLinearConv: integer convolution plus bias, requantized with x_scale * w_scale / y_scale
/// (`x_scale`, `y_scale` one value, `w_scale` one or per output channel; `y_zp` one or empty).
#[allow(clippy::too_many_arguments)]
pub fn qlinear_conv<X: Elem, W: Elem, S: Elem, Q: Elem>(
    x: &[X],
    w: &[W],
    xz: &[X],
    wz: &[W],
    bias: &[i32],
    x_scale: &[S],
    w_scale: &[S],
    y_scale: &[S],
    y_zp: &[Q],
    prec: ScalePrec,
    g: &ConvGeom,
    y: &mut [Q],
) {
    let (xs, ys) = (first_f64(x_scale), first_f64(y_scale));
    let yz = y_zp.first().map(|z| z.to_i64()).unwrap_or(0);
    conv_integer(x, w, xz, wz, g, y, |_, mo, s| {
        let acc = s + bias.get(mo).map(|&b| b as i64).unwrap_or(0);
        requantize_one(acc, scale_ratio(xs, per(w_scale, mo).to_f64(), ys, prec), yz, prec)
    });
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec;
    use std::vec::Vec;

    /// The per-tensor f32 loop against the definition: halves round to even, NaN lands on the
    /// zero point, infinities and large values saturate; u8, i8, u16 and i16.
    #[test]
    fn per_tensor_quantize_matches_the_definition() {
        let mut x: Vec<f32> = (0..4000).map(|i| (i as f32 - 2000.0) * 0.25).collect();
        x.extend([f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1e30, -1e30, 2.5, 3.5, -2.5, 0.5, -0.5, 1e7 + 0.5]);
        fn check<Q: Elem + core::fmt::Debug + PartialEq>(x: &[f32], s: f32, z: Q) {
            let mut y = vec![Q::default(); x.len()];
            quantize(x, &[s], &[z], QParam::TENSOR, false, &mut y);
            for (&xv, &got) in x.iter().zip(&y) {
                let r = libm::rint((xv / s) as f64) as i64;
                let want = Q::from_i64(r.saturating_add(z.to_i64()).clamp(Q::lowest().to_i64(), Q::highest().to_i64()));
                assert_eq!(got, want, "x {xv} scale {s} zero point {z:?}");
            }
        }
        check::<u8>(&x, 0.5, 7);
        check::<i8>(&x, 0.25, -3);
        check::<u16>(&x, 0.01, 300);
        check::<i16>(&x, 0.003, -5);
    }

    /// The per-tensor loop against the definition `(x − z) · s` in f32, for each 8- and 16-bit
    /// type over its whole range.
    #[test]
    fn per_tensor_dequantize_matches_the_definition() {
        fn check<Q: Elem + core::fmt::Debug>(z: Q, s: f32) {
            let (lo, hi) = (Q::lowest().to_i64(), Q::highest().to_i64());
            let x: Vec<Q> = (lo..=hi).map(Q::from_i64).collect();
            let mut y = vec![0f32; x.len()];
            dequantize(&x, &[s], &[z], QParam::TENSOR, false, &mut y);
            for (&xv, &got) in x.iter().zip(&y) {
                let want = (xv.to_i64() - z.to_i64()) as f32 * s;
                assert_eq!(got.to_bits(), want.to_bits(), "x {xv:?} scale {s} zero point {z:?}");
            }
        }
        check::<u8>(200, 0.037);
        check::<i8>(-3, 1.5e-3);
        check::<u16>(40000, 0.25);
        check::<i16>(-7, 3.1e-5);
    }

    /// matmul_integer against the definition, per-row and per-column zero points, two batches
    /// sharing B, and values that make the i32 sums wrap.
    #[test]
    fn matmul_integer_matches_the_definition() {
        let (m, k, n) = (3, 70, 5);
        let a: Vec<u8> = (0..2 * m * k).map(|i| (i * 37 % 256) as u8).collect();
        let b: Vec<i8> = (0..k * n).map(|i| (i * 53 % 256) as u8 as i8).collect();
        for (az, bz) in [(vec![], vec![]), (vec![7u8], vec![-3i8]), (vec![1u8, 200, 0], vec![5i8, -128, 0, 127, 1])] {
            let mut y = vec![0i32; 2 * m * n];
            matmul_integer(&a, &b, &az, &bz, &[0, (m * k) as u32], &[0, 0], m, k, n, &mut y);
            for bi in 0..2 {
                for r in 0..m {
                    for c in 0..n {
                        let za = if az.is_empty() { 0 } else { az[r % az.len()] as i64 };
                        let zb = if bz.is_empty() { 0 } else { bz[c % bz.len()] as i64 };
                        let want: i64 = (0..k).map(|t| (a[bi * m * k + r * k + t] as i64 - za) * (b[t * n + c] as i64 - zb)).sum();
                        assert_eq!(y[(bi * m + r) * n + c], want as i32, "batch {bi} [{r}][{c}] az {az:?} bz {bz:?}");
                    }
                }
            }
        }
        // Sums past i32 wrap as i32 arithmetic does.
        let (a, b) = (vec![255u8; 40_000], vec![-128i8; 40_000]);
        let mut y = [0i32];
        matmul_integer(&a, &b, &[], &[], &[0], &[0], 1, 40_000, 1, &mut y);
        assert_eq!(y[0], (255i64 * -128 * 40_000) as i32);
    }
}
