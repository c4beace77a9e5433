//! Reductions over one (flattened) axis: the input is viewed as `[outer, red, inner]` and the
//! output as `[outer, inner]`. Several reduced axes that are adjacent collapse into one `red`;
//! callers move non-adjacent ones together first.
use crate::elem::Elem;
use crate::math;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduceKind {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
    L1,
    L2,
    LogSum,
    LogSumExp,
    SumSquare,
}

#[inline]
fn fmax(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if b > a {
        b
    } else {
        a
    }
}

#[inline]
fn fmin(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if b < a {
        b
    } else {
        a
    }
}

/// Reduce `x` (`outer * red * inner` elements) into `out` (`outer * inner`). Floats are
/// accumulated in f64 and rounded once; integers in their own type (wrapping), with the
/// float-valued kinds (L2, LogSum, LogSumExp) computed in f64 and converted back. An empty
/// reduced set gives the identity: 0 for sums, 1 for Prod, lowest/highest for Max/Min, −inf
/// for LogSum/LogSumExp, NaN (floats) for Mean.
pub fn reduce<T: Elem>(kind: ReduceKind, x: &[T], outer: usize, red: usize, inner: usize, out: &mut [T]) {
    debug_assert!(x.len() >= outer * red * inner && out.len() >= outer * inner);
    for o in 0..outer {
        let base = o * red * inner;
        for i in 0..inner {
            let at = |r: usize| x[base + r * inner + i];
            out[o * inner + i] = if T::IS_FLOAT { reduce_float(kind, red, at) } else { reduce_int(kind, red, at) };
        }
    }
}

fn reduce_float<T: Elem>(kind: ReduceKind, n: usize, at: impl Fn(usize) -> T) -> T {
    let fold = |init: f64, f: &dyn Fn(f64, f64) -> f64| (0..n).fold(init, |a, r| f(a, at(r).to_f64()));
    let v = match kind {
        ReduceKind::Sum => fold(0.0, &|a, v| a + v),
        ReduceKind::Mean => fold(0.0, &|a, v| a + v) / n as f64,
        ReduceKind::Max => fold(f64::NEG_INFINITY, &fmax),
        ReduceKind::Min => fold(f64::INFINITY, &fmin),
        ReduceKind::Prod => fold(1.0, &|a, v| a * v),
        ReduceKind::L1 => fold(0.0, &|a, v| a + v.abs()),
        ReduceKind::L2 => math::sqrt(fold(0.0, &|a, v| a + v * v)),
        ReduceKind::SumSquare => fold(0.0, &|a, v| a + v * v),
        ReduceKind::LogSum => math::log(fold(0.0, &|a, v| a + v)),
        ReduceKind::LogSumExp => {
            let m = fold(f64::NEG_INFINITY, &fmax);
            if n == 0 {
                f64::NEG_INFINITY
            } else if m.is_infinite() || m.is_nan() {
                // All -inf, or an inf/NaN present: the plain formula gives the right answer.
                math::log(fold(0.0, &|a, v| a + math::exp(v)))
            } else {
                m + math::log(fold(0.0, &|a, v| a + math::exp(v - m)))
            }
        }
    };
    T::from_f64(v)
}

fn reduce_int<T: Elem>(kind: ReduceKind, n: usize, at: impl Fn(usize) -> T) -> T {
    let fold = |init: T, f: &dyn Fn(T, T) -> T| (0..n).fold(init, |a, r| f(a, at(r)));
    let fl = |init: f64, f: &dyn Fn(f64, f64) -> f64| (0..n).fold(init, |a, r| f(a, at(r).to_f64()));
    match kind {
        ReduceKind::Sum => fold(T::zero(), &|a, v| a.add(v)),
        ReduceKind::Mean => {
            let s = fold(T::zero(), &|a, v| a.add(v));
            if n == 0 {
                T::zero()
            } else {
                T::from_f64(s.to_f64() / n as f64)
            }
        }
        ReduceKind::Max => fold(T::lowest(), &|a, v| a.max_of(v)),
        ReduceKind::Min => fold(T::highest(), &|a, v| a.min_of(v)),
        ReduceKind::Prod => fold(T::one(), &|a, v| a.mul(v)),
        ReduceKind::L1 => fold(T::zero(), &|a, v| a.add(v.abs())),
        ReduceKind::SumSquare => fold(T::zero(), &|a, v| a.add(v.mul(v))),
        ReduceKind::L2 => T::from_f64(math::sqrt(fl(0.0, &|a, v| a + v * v))),
        ReduceKind::LogSum => T::from_f64(math::log(fl(0.0, &|a, v| a + v))),
        ReduceKind::LogSumExp => T::from_f64(math::log(fl(0.0, &|a, v| a + math::exp(v)))),
    }
}

/// Index of the max (or min) along `red` for each `[outer, inner]` position; ties go to the
/// first index, or the last with `last`. NaN counts as greater than everything (numpy).
/// With `red == 0` nothing is written.
pub fn arg_reduce<T: Elem>(x: &[T], outer: usize, red: usize, inner: usize, max: bool, last: bool, out: &mut [i64]) {
    if red == 0 {
        return;
    }
    for o in 0..outer {
        let base = o * red * inner;
        for i in 0..inner {
            let mut best = x[base + i];
            let mut bi = 0usize;
            for r in 1..red {
                let v = x[base + r * inner + i];
                if best.is_nan() {
                    // numpy: the first NaN wins.
                    break;
                }
                let better = if v.is_nan() {
                    true
                } else if max {
                    v > best || (last && v == best)
                } else {
                    v < best || (last && v == best)
                };
                if better {
                    best = v;
                    bi = r;
                }
            }
            out[o * inner + i] = bi as i64;
        }
    }
}

/// Cumulative sum along `len` for each `[outer, inner]` position.
pub fn cumsum<T: Elem>(x: &[T], outer: usize, len: usize, inner: usize, exclusive: bool, reverse: bool, out: &mut [T]) {
    for o in 0..outer {
        let base = o * len * inner;
        for i in 0..inner {
            let mut acc = T::zero();
            for s in 0..len {
                let r = if reverse { len - 1 - s } else { s };
                let at = base + r * inner + i;
                if exclusive {
                    out[at] = acc;
                    acc = acc.add(x[at]);
                } else {
                    acc = acc.add(x[at]);
                    out[at] = acc;
                }
            }
        }
    }
}

/// Cumulative product along `len` for each `[outer, inner]` position. Floats accumulate in
/// f64 (each output rounded to `T`); integers multiply wrapping in `T`.
pub fn cumprod<T: Elem>(x: &[T], outer: usize, len: usize, inner: usize, exclusive: bool, reverse: bool, out: &mut [T]) {
    for o in 0..outer {
        let base = o * len * inner;
        for i in 0..inner {
            let (mut acc, mut accf) = (T::one(), 1.0f64);
            for s in 0..len {
                let r = if reverse { len - 1 - s } else { s };
                let at = base + r * inner + i;
                let cur = |acc: T, accf: f64| if T::IS_FLOAT { T::from_f64(accf) } else { acc };
                if exclusive {
                    out[at] = cur(acc, accf);
                }
                if T::IS_FLOAT {
                    accf *= x[at].to_f64();
                } else {
                    acc = acc.mul(x[at]);
                }
                if !exclusive {
                    out[at] = cur(acc, accf);
                }
            }
        }
    }
}

/// Top `k` along `len` for each `[outer, inner]` position: values into `vals` and indices into
/// `idx` (both `[outer, k, inner]`, each left out when nobody reads it), best first; equal
/// values keep the lower index first. `scratch` must hold `len` entries. NaN sorts above every
/// number.
#[allow(clippy::too_many_arguments)]
pub fn top_k<T: Elem>(
    x: &[T],
    outer: usize,
    len: usize,
    inner: usize,
    k: usize,
    largest: bool,
    scratch: &mut [u64],
    mut vals: Option<&mut [T]>,
    mut idx: Option<&mut [i64]>,
) {
    use core::cmp::Ordering;
    let k = k.min(len);
    for o in 0..outer {
        let base = o * len * inner;
        for i in 0..inner {
            let at = |r: u64| x[base + r as usize * inner + i];
            for (r, s) in scratch[..len].iter_mut().enumerate() {
                *s = r as u64;
            }
            let key = |a: T, b: T| -> Ordering {
                match (a.is_nan(), b.is_nan()) {
                    (true, true) => Ordering::Equal,
                    (true, false) => Ordering::Greater,
                    (false, true) => Ordering::Less,
                    _ => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
                }
            };
            scratch[..len].sort_unstable_by(|&p, &q| {
                let c = key(at(p), at(q));
                let c = if largest { c.reverse() } else { c };
                c.then(p.cmp(&q))
            });
            for (j, &r) in scratch[..k].iter().enumerate() {
                let oi = (o * k + j) * inner + i;
                if let Some(v) = vals.as_deref_mut() {
                    v[oi] = at(r);
                }
                if let Some(ix) = idx.as_deref_mut() {
                    ix[oi] = r as i64;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_middle_axis() {
        // [2, 3, 2] reduced over axis 1.
        let x: [f32; 12] = [1., 2., 3., 4., 5., 6., 7., 8., 9., 10., 11., 12.];
        let mut out = [0f32; 4];
        reduce(ReduceKind::Sum, &x, 2, 3, 2, &mut out);
        assert_eq!(out, [9., 12., 27., 30.]);
        reduce(ReduceKind::Max, &x, 2, 3, 2, &mut out);
        assert_eq!(out, [5., 6., 11., 12.]);
    }

    #[test]
    fn empty_set_identities() {
        let x: [f32; 0] = [];
        let mut out = [9f32; 2];
        reduce(ReduceKind::Prod, &x, 2, 0, 1, &mut out);
        assert_eq!(out, [1., 1.]);
        reduce(ReduceKind::Max, &x, 2, 0, 1, &mut out);
        assert_eq!(out, [f32::NEG_INFINITY; 2]);
        let xi: [i32; 0] = [];
        let mut oi = [0i32; 1];
        reduce(ReduceKind::Min, &xi, 1, 0, 1, &mut oi);
        assert_eq!(oi, [i32::MAX]);
    }

    #[test]
    fn logsumexp_is_stable() {
        let x = [1000f64, 1000.0];
        let mut out = [0f64];
        reduce(ReduceKind::LogSumExp, &x, 1, 2, 1, &mut out);
        assert!((out[0] - (1000.0 + core::f64::consts::LN_2)).abs() < 1e-9);
    }

    #[test]
    fn argmax_ties_and_topk_order() {
        let x = [3i32, 1, 3, 2];
        let mut o = [0i64];
        arg_reduce(&x, 1, 4, 1, true, false, &mut o);
        assert_eq!(o, [0]);
        arg_reduce(&x, 1, 4, 1, true, true, &mut o);
        assert_eq!(o, [2]);
        let mut s = [0u64; 4];
        let (mut v, mut i) = ([0i32; 3], [0i64; 3]);
        top_k(&x, 1, 4, 1, 3, true, &mut s, Some(&mut v), Some(&mut i));
        assert_eq!((v, i), ([3, 3, 2], [0, 2, 3]));
        top_k(&x, 1, 4, 1, 2, false, &mut s, None, Some(&mut i[..2]));
        assert_eq!(i[..2], [1, 3]);
    }

    #[test]
    fn cumsum_modes() {
        let x = [1i64, 2, 3];
        let mut o = [0i64; 3];
        cumsum(&x, 1, 3, 1, true, true, &mut o);
        assert_eq!(o, [5, 3, 0]);
    }
}
