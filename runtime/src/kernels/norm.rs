//! Normalizations over explicit `[batch, channels, plane]` or `[outer, n, inner]` views.
//! Statistics accumulate in f64; the result is rounded once to the working type.
use super::conv::Act;
use super::real::Real;

/// Per-channel `(a, b)` of inference batch normalization, `y = x·a + b`: `a = 1/√(var + ε) ·
/// scale`, `b = bias − mean·a`, each step rounded to `R`, as onnxruntime computes them. The
/// same formula in f64 would be closer to exact, but a quantized model with a float
/// BatchNormalization between its quantized layers then rounds some values to the other
/// side of a quantization step than onnxruntime does, and the difference grows layer by layer.
pub fn batch_norm_coeffs<R: Real>(scale: R, bias: R, mean: R, var: R, eps: f64) -> (R, R) {
    let a = R::from_f64(1.0).div(var.add(R::from_f64(eps)).sqrt()).mul(scale);
    (a, bias.sub(mean.mul(a)))
}

/// Inference batch normalization: `y = (x - mean[c]) / sqrt(var[c] + eps) * scale[c] + bias[c]`,
/// as `x·a + b` ([`batch_norm_coeffs`]).
#[allow(clippy::too_many_arguments)]
pub fn batch_norm<R: Real>(x: &[R], y: &mut [R], batch: usize, channels: usize, plane: usize, scale: &[R], bias: &[R], mean: &[R], var: &[R], eps: f64) {
    for c in 0..channels {
        let (a, b) = batch_norm_coeffs(scale[c], bias[c], mean[c], var[c], eps);
        for n in 0..batch {
            let off = (n * channels + c) * plane;
            for (o, &v) in y[off..off + plane].iter_mut().zip(&x[off..off + plane]) {
                *o = v.mul(a).add(b);
            }
        }
    }
}

/// BatchNormalization in training mode: normalizes by the batch's own per-channel mean and
/// population variance, and writes the updated running statistics
/// `running · momentum + batch · (1 - momentum)` (skipped where `run_mean` / `run_var` are
/// empty: outputs nobody reads).
#[allow(clippy::too_many_arguments)]
pub fn batch_norm_train<R: Real>(
    x: &[R],
    y: &mut [R],
    dims: [usize; 3],
    scale: &[R],
    bias: &[R],
    mean: &[R],
    var: &[R],
    eps: f64,
    momentum: f64,
    run_mean: &mut [R],
    run_var: &mut [R],
) {
    let [batch, channels, plane] = dims;
    let count = (batch * plane).max(1) as f64;
    for c in 0..channels {
        let at = |n: usize| (n * channels + c) * plane;
        let sum: f64 = (0..batch).map(|n| x[at(n)..at(n) + plane].iter().map(|v| v.to_f64()).sum::<f64>()).sum();
        let m = sum / count;
        let sq: f64 = (0..batch)
            .map(|n| x[at(n)..at(n) + plane].iter().map(|v| (v.to_f64() - m) * (v.to_f64() - m)).sum::<f64>())
            .sum();
        let v = sq / count;
        let a = scale[c].to_f64() / (v + eps).sqrt_f64();
        let b = bias[c].to_f64() - m * a;
        let (a, b) = (R::from_f64(a), R::from_f64(b));
        for n in 0..batch {
            for (o, &xv) in y[at(n)..at(n) + plane].iter_mut().zip(&x[at(n)..at(n) + plane]) {
                *o = xv.mul(a).add(b);
            }
        }
        if let Some(o) = run_mean.get_mut(c) {
            *o = R::from_f64(mean[c].to_f64() * momentum + m * (1.0 - momentum));
        }
        if let Some(o) = run_var.get_mut(c) {
            *o = R::from_f64(var[c].to_f64() * momentum + v * (1.0 - momentum));
        }
    }
}

/// `y[n, c, ·] = act(((x[n, c, ·] · a[c] + b[c]) · mul[c]) + add[c])` (`mul`, `add`
/// optional): a BatchNormalization (`a`, `b` as [`batch_norm`] computes them), the
/// per-channel Mul and Add after it and an activation, in that order, as one pass over the
/// tensor (the per-channel steps on a plane still in cache) with the unfused ops' rounding.
#[allow(clippy::too_many_arguments)]
pub fn scale_shift<T: crate::elem::Elem>(
    x: &[T],
    y: &mut [T],
    batch: usize,
    channels: usize,
    plane: usize,
    a: &[T],
    b: &[T],
    mul: Option<&[T]>,
    add: Option<&[T]>,
    act: Act,
) {
    // Planes (n, c) in ranges, over the pool when large.
    crate::for_plane_ranges(batch * channels, plane, batch * channels * plane, y, &|p0, p1, out| {
        for pi in p0..p1 {
            let (off, c) = (pi * plane, pi % channels);
            let (xs, ys) = (&x[off..off + plane], &mut out[(pi - p0) * plane..(pi - p0 + 1) * plane]);
            let (ac, bc) = (a[c], b[c]);
            for (o, &v) in ys.iter_mut().zip(xs) {
                *o = v.mul(ac).add(bc);
            }
            if let Some(m) = mul.map(|m| m[c]) {
                ys.iter_mut().for_each(|v| *v = v.mul(m));
            }
            super::conv::epilogue_row(ys, add.map(|t| t[c]), None, act);
        }
    });
}

/// Mean and 1/sqrt(var + eps) of a slice (population variance).
fn stats<R: Real>(x: &[R], eps: f64) -> (f64, f64) {
    let n = x.len().max(1) as f64;
    let mean = sum_f64(x, |v| v) / n;
    let var = sum_f64(x, |v| (v - mean) * (v - mean)) / n;
    (mean, 1.0 / (var + eps).sqrt_f64())
}

/// Σ f(x) in f64 over eight interleaved partial sums: one serial chain of f64 additions is
/// bound by their latency (about 4 cycles an element; a LayerNorm row of 192 took 0.4 µs).
#[inline(always)]
fn sum_f64<R: Real>(x: &[R], f: impl Fn(f64) -> f64) -> f64 {
    const L: usize = 8;
    let mut acc = [0f64; L];
    let mut chunks = x.chunks_exact(L);
    for c in chunks.by_ref() {
        for l in 0..L {
            acc[l] += f(c[l].to_f64());
        }
    }
    let tail: f64 = chunks.remainder().iter().map(|v| f(v.to_f64())).sum();
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail
}

/// Instance normalization: each (n, c) plane normalised by its own mean and variance, then
/// `* scale[c] + bias[c]`.
#[allow(clippy::too_many_arguments)]
pub fn instance_norm<R: Real>(x: &[R], y: &mut [R], batch: usize, channels: usize, plane: usize, scale: &[R], bias: &[R], eps: f64) {
    for n in 0..batch {
        for c in 0..channels {
            let off = (n * channels + c) * plane;
            let (mean, inv) = stats(&x[off..off + plane], eps);
            let a = scale[c].to_f64() * inv;
            let b = bias[c].to_f64() - mean * a;
            for (o, &v) in y[off..off + plane].iter_mut().zip(&x[off..off + plane]) {
                *o = R::from_f64(v.to_f64() * a + b);
            }
        }
    }
}

/// Layer normalization of each of `outer` rows of `inner` elements:
/// `y = (x - mean) * inv_std * scale + bias` (`scale`, `bias` of length `inner`). The row
/// statistics go to `mean_out` / `inv_std_out` when given.
#[allow(clippy::too_many_arguments)]
pub fn layer_norm<R: Real>(
    x: &[R],
    y: &mut [R],
    outer: usize,
    inner: usize,
    scale: &[R],
    bias: Option<&[R]>,
    eps: f64,
    mut mean_out: Option<&mut [R]>,
    mut inv_std_out: Option<&mut [R]>,
) {
    let (scale, bias) = (&scale[..inner], bias.map(|b| &b[..inner]));
    let row = |r: usize, out: &mut [R]| -> (f64, f64) {
        let row = &x[r * inner..][..inner];
        let (mean, inv) = stats(row, eps);
        match bias {
            Some(b) => {
                for (((o, &v), &s), &b) in out.iter_mut().zip(row).zip(scale).zip(b) {
                    *o = R::from_f64((v.to_f64() - mean) * inv * s.to_f64() + b.to_f64());
                }
            }
            None => {
                for ((o, &v), &s) in out.iter_mut().zip(row).zip(scale) {
                    *o = R::from_f64((v.to_f64() - mean) * inv * s.to_f64());
                }
            }
        }
        (mean, inv)
    };
    if mean_out.is_none() && inv_std_out.is_none() {
        // Inference: rows split over the thread pool.
        crate::for_plane_ranges(outer, inner, outer.saturating_mul(inner).saturating_mul(4), y, &|r0, r1, out| {
            for (r, o) in (r0..r1).zip(out.chunks_exact_mut(inner.max(1))) {
                row(r, o);
            }
        });
        return;
    }
    for r in 0..outer {
        let (mean, inv) = row(r, &mut y[r * inner..][..inner]);
        if let Some(m) = mean_out.as_deref_mut() {
            m[r] = R::from_f64(mean);
        }
        if let Some(s) = inv_std_out.as_deref_mut() {
            s[r] = R::from_f64(inv);
        }
    }
}

/// Mean-variance normalization of each of `outer` rows: `(x - mean) / (std + 1e-9)`.
pub fn mean_var_norm<R: Real>(x: &[R], y: &mut [R], outer: usize, inner: usize) {
    for r in 0..outer {
        let row = &x[r * inner..(r + 1) * inner];
        let (mean, inv) = stats(row, 0.0);
        let std = if inv.is_finite() { 1.0 / inv } else { 0.0 };
        for (o, &v) in y[r * inner..(r + 1) * inner].iter_mut().zip(row) {
            *o = R::from_f64((v.to_f64() - mean) / (std + 1e-9));
        }
    }
}

/// Local response normalization across channels:
/// `y = x / (bias + alpha / size * Σ x²)^beta` over channels `[c - ⌊(size-1)/2⌋, c + ⌈(size-1)/2⌉]`.
#[allow(clippy::too_many_arguments)]
pub fn lrn<R: Real + Send + Sync>(x: &[R], y: &mut [R], batch: usize, channels: usize, plane: usize, size: usize, alpha: f64, beta: f64, bias: f64) {
    const CHUNK: usize = 256;
    let before = (size - 1) / 2;
    let after = size - 1 - before;
    let scale = alpha / size as f64;
    // Output planes (n, c) in ranges, over the pool when large (each reads its neighbours'
    // input planes only).
    crate::for_plane_ranges(batch * channels, plane, batch * channels * plane * size, y, &|q0, q1, out| {
        for q in q0..q1 {
            let (n, c) = (q / channels, q % channels);
            let lo = c.saturating_sub(before);
            let hi = (c + after).min(channels - 1);
            let mut p0 = 0;
            while p0 < plane {
                let len = CHUNK.min(plane - p0);
                // The window's sum of squares for a run of positions, channel by channel over
                // contiguous rows (the same order of additions per position as one at a time).
                let mut sq = [0f64; CHUNK];
                for cc in lo..=hi {
                    let row = &x[(n * channels + cc) * plane + p0..][..len];
                    for (s, v) in sq.iter_mut().zip(row) {
                        let v = v.to_f64();
                        *s += v * v;
                    }
                }
                let i = (n * channels + c) * plane + p0;
                let d = &mut sq[..len];
                d.iter_mut().for_each(|s| *s = bias + scale * *s);
                lrn_pow_run(d, beta);
                let o0 = (q - q0) * plane + p0;
                for ((o, xv), &d) in out[o0..o0 + len].iter_mut().zip(&x[i..i + len]).zip(d.iter()) {
                    *o = R::from_f64(xv.to_f64() / d);
                }
                p0 += len;
            }
        }
    });
}

/// [`lrn_pow`] over a run, in place. For beta 0.75 on x86_64 two at a time with SSE2's
/// square root (baseline there; IEEE square roots, so the same bits as one at a time): the
/// square roots, not the sums, bound LRN's time.
fn lrn_pow_run(d: &mut [f64], beta: f64) {
    #[cfg(target_arch = "x86_64")]
    if beta == 0.75 {
        use core::arch::x86_64::{_mm_loadu_pd, _mm_mul_pd, _mm_sqrt_pd, _mm_storeu_pd};
        let mut pairs = d.chunks_exact_mut(2);
        for p in &mut pairs {
            // SAFETY: SSE2 is part of the x86_64 baseline; `p` holds exactly two f64.
            unsafe {
                let r = _mm_sqrt_pd(_mm_loadu_pd(p.as_ptr()));
                _mm_storeu_pd(p.as_mut_ptr(), _mm_mul_pd(r, _mm_sqrt_pd(r)));
            }
        }
        for v in pairs.into_remainder() {
            *v = lrn_pow(*v, beta);
        }
        return;
    }
    d.iter_mut().for_each(|v| *v = lrn_pow(*v, beta));
}

/// `base^beta`; the usual exponents by square roots (AlexNet, GoogLeNet: 0.75), which are
/// exact to the last bit or two of an f64 and far cheaper than `pow`; others by `pow`.
#[inline]
fn lrn_pow(base: f64, beta: f64) -> f64 {
    if beta == 0.75 {
        let r = crate::math::sqrt(base);
        r * crate::math::sqrt(r)
    } else if beta == 0.5 {
        crate::math::sqrt(base)
    } else if beta == 1.0 {
        base
    } else {
        crate::math::pow(base, beta)
    }
}

/// Lp normalization (p = 1 or 2) along the middle axis of `[outer, n, inner]`; a zero norm
/// leaves zeros.
pub fn lp_norm<R: Real>(x: &[R], y: &mut [R], outer: usize, n: usize, inner: usize, p: u32) {
    for o in 0..outer {
        for i in 0..inner {
            let base = o * n * inner + i;
            let mut acc = 0.0f64;
            for j in 0..n {
                let v = x[base + j * inner].to_f64();
                acc += if p == 1 { v.abs() } else { v * v };
            }
            let norm = if p == 1 { acc } else { acc.sqrt_f64() };
            for j in 0..n {
                let v = x[base + j * inner].to_f64();
                y[base + j * inner] = R::from_f64(if norm == 0.0 { 0.0 } else { v / norm });
            }
        }
    }
}

/// RMS normalization of each of `outer` rows of `inner` elements:
/// `y = x / sqrt(mean(x²) + eps) * scale`. The mean square is rounded to f32 before `eps` is
/// added (the reference's `stash_type` float). `scale` holds `inner` elements (one row, shared)
/// or `outer * inner` (one per element).
pub fn rms_norm<R: Real>(x: &[R], y: &mut [R], outer: usize, inner: usize, scale: &[R], eps: f32) {
    let per_row = scale.len() != inner;
    for o in 0..outer {
        let row = &x[o * inner..(o + 1) * inner];
        let ms = sum_f64(row, |v| v * v) / inner.max(1) as f64;
        let inv = 1.0 / ((ms as f32 + eps) as f64).sqrt_f64();
        for (j, &v) in row.iter().enumerate() {
            let s = if per_row { scale[o * inner + j] } else { scale[j] };
            y[o * inner + j] = R::from_f64(v.to_f64() * inv * s.to_f64());
        }
    }
}

/// Group normalization of `[batch, channels, spatial]`: each group of `channels / groups`
/// channels is normalised by its own mean and variance, then scaled and shifted by
/// `scale`/`bias` per channel (`per_channel`, `channels` entries) or per group (`groups`).
#[allow(clippy::too_many_arguments)]
pub fn group_norm<R: Real>(
    x: &[R],
    y: &mut [R],
    batch: usize,
    channels: usize,
    spatial: usize,
    groups: usize,
    scale: &[R],
    bias: &[R],
    per_channel: bool,
    eps: f64,
) {
    let cpg = channels / groups.max(1);
    let gsize = cpg * spatial;
    let cnt = gsize.max(1) as f64;
    for b in 0..batch {
        for g in 0..groups {
            let start = (b * groups + g) * gsize;
            let seg = &x[start..start + gsize];
            let mean = sum_f64(seg, |v| v) / cnt;
            let var = sum_f64(seg, |v| (v - mean) * (v - mean)) / cnt;
            let inv = 1.0 / (var + eps).sqrt_f64();
            for (j, &v) in seg.iter().enumerate() {
                let k = if per_channel { g * cpg + j / spatial.max(1) } else { g };
                y[start + j] = R::from_f64((v.to_f64() - mean) * inv * scale[k].to_f64() + bias[k].to_f64());
            }
        }
    }
}

trait SqrtF64 {
    fn sqrt_f64(self) -> f64;
}
impl SqrtF64 for f64 {
    #[inline]
    fn sqrt_f64(self) -> f64 {
        crate::math::sqrt(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against the formula one position at a time with `pow`, for the square-root exponents
    /// and a general one: within an f32 rounding step.
    #[test]
    fn lrn_matches_the_formula() {
        let (channels, plane, size) = (7, 300, 5);
        let x: [f32; 2100] = core::array::from_fn(|i| ((i * 7919) % 1000) as f32 / 100.0 - 5.0);
        for beta in [0.75, 0.5, 1.0, 0.6] {
            let mut y = [0f32; 2100];
            lrn(&x, &mut y, 1, channels, plane, size, 1e-2, beta, 2.0);
            for c in 0..channels {
                for p in 0..plane {
                    let (lo, hi) = (c.saturating_sub(2), (c + 2).min(channels - 1));
                    let sq: f64 = (lo..=hi).map(|cc| (x[cc * plane + p] as f64).powi(2)).sum();
                    let want = (x[c * plane + p] as f64 / crate::math::pow(2.0 + 1e-2 / 5.0 * sq, beta)) as f32;
                    let got = y[c * plane + p];
                    assert!((got - want).abs() <= want.abs() * 1.2e-7, "beta {beta} c {c} p {p}: {got} vs {want}");
                }
            }
        }
    }

    #[test]
    fn scale_shift_matches_loop() {
        // batch 2, 3 channels, planes of 5
        let x: [f32; 30] = core::array::from_fn(|i| (i as f32 * 0.7).sin());
        let (sc, sh) = ([0.5f32, -2.0, 1.5], [0.1f32, 0.3, -0.2]);
        let (mu, ad) = ([1.5f32, 0.25, -1.0], [-0.05f32, 0.2, 0.7]);
        for (i, act) in [Act::None, Act::Relu, Act::LeakyRelu(0.2), Act::Clip(-0.3, 0.4)].into_iter().enumerate() {
            let mut y = [0f32; 30];
            let (mul, add) = (if i % 2 == 1 { Some(&mu[..]) } else { None }, if i >= 2 { Some(&ad[..]) } else { None });
            scale_shift(&x, &mut y, 2, 3, 5, &sc, &sh, mul, add, act);
            for (i, &v) in y.iter().enumerate() {
                let c = (i / 5) % 3;
                let t = (x[i] * sc[c] + sh[c]) * mul.map_or(1.0, |m| m[c]) + add.map_or(0.0, |a| a[c]);
                let e = match act {
                    Act::None => t,
                    Act::Relu => t.max(0.0),
                    Act::LeakyRelu(a) => if t < 0.0 { a * t } else { t },
                    Act::Clip(lo, hi) => t.max(lo).min(hi),
                    Act::HardSwish => t * (t / 6.0 + 0.5).clamp(0.0, 1.0),
                    Act::Sigmoid => 1.0 / (1.0 + (-t).exp()),
                    Act::Silu => t / (1.0 + (-t).exp()),
                };
                assert_eq!(v, e, "{act:?} at {i}");
            }
        }
    }

    #[test]
    fn layer_norm_row() {
        let x = [1.0f32, 2.0, 3.0, 4.0];
        let mut y = [0f32; 4];
        let mut m = [0f32; 1];
        let mut s = [0f32; 1];
        layer_norm(&x, &mut y, 1, 4, &[1.0; 4], None, 0.0, Some(&mut m), Some(&mut s));
        assert!((m[0] - 2.5).abs() < 1e-6);
        assert!((s[0] - 1.0 / 1.25f32.sqrt()).abs() < 1e-6);
        assert!((y[0] + 1.5 / 1.25f32.sqrt()).abs() < 1e-5);
    }

    #[test]
    fn batch_norm_channel() {
        let x = [1.0f64, 3.0, 5.0, 7.0];
        let mut y = [0f64; 4];
        batch_norm(&x, &mut y, 1, 2, 2, &[2.0, 1.0], &[0.5, 0.0], &[2.0, 6.0], &[1.0, 4.0], 0.0);
        assert_eq!(y, [-1.5, 2.5, -0.5, 0.5]);
    }
}
