//! The rules of a convolution's or pooling's window, written once: its attributes with
//! defaults filled in ([`attrs`]), the geometry at fixed sizes ([`resolve`], the runtime's
//! [`Window3`]) and the output sizes over dim expressions ([`window_out`]: fixed sizes, named
//! dims and bounded dims alike).
use super::R;
use crate::ir::{AutoPad, DimExpr, Window};
use burnc_runtime::kernels::window::Window3;

/// Strides, dilations and explicit pads with defaults filled in and lengths checked.
pub struct Attrs {
    pub kernel: Vec<usize>,
    pub strides: Vec<usize>,
    pub dilations: Vec<usize>,
    /// Begins then ends, as in ONNX.
    pub pads: Vec<usize>,
}

pub fn attrs(win: &Window, kernel: &[usize]) -> Result<Attrs, String> {
    let n = kernel.len();
    let or = |v: &[usize], d: usize, len: usize, name: &str| -> Result<Vec<usize>, String> {
        if v.is_empty() {
            Ok(vec![d; len])
        } else if v.len() != len {
            Err(format!("{name} has {} values, expected {len}", v.len()))
        } else {
            Ok(v.to_vec())
        }
    };
    let a = Attrs {
        kernel: kernel.to_vec(),
        strides: or(&win.strides, 1, n, "strides")?,
        dilations: or(&win.dilations, 1, n, "dilations")?,
        pads: or(&win.pads, 0, 2 * n, "pads")?,
    };
    if a.kernel.contains(&0) || a.strides.contains(&0) || a.dilations.contains(&0) {
        return Err(format!("kernel_shape {:?}, strides {:?} and dilations {:?} must be positive", a.kernel, a.strides, a.dilations));
    }
    let huge = |v: &Vec<usize>| v.iter().any(|&x| x > 1 << 31);
    if huge(&a.kernel) || huge(&a.strides) || huge(&a.dilations) || huge(&a.pads) {
        return Err("window attributes are out of range".into());
    }
    if n > 3 {
        return Err(format!("{n} spatial dims are not supported (at most 3)"));
    }
    Ok(a)
}

/// Geometry of a convolution or pooling window over spatial input `input`.
pub fn resolve(win: &Window, kernel: &[usize], input: &[usize]) -> Result<Window3, String> {
    let a = attrs(win, kernel)?;
    let n = kernel.len();
    if input.len() != n {
        return Err(format!("input has {} spatial dims, kernel {n}", input.len()));
    }
    let mut out = vec![0; n];
    let mut pb = vec![0isize; n];
    let mut pe = vec![0isize; n];
    for i in 0..n {
        let (len, k, s) = (input[i], a.kernel[i], a.strides[i]);
        let dk = (k - 1) * a.dilations[i] + 1;
        match win.auto_pad {
            AutoPad::SameUpper | AutoPad::SameLower => {
                out[i] = len.div_ceil(s);
                let total = ((out[i].max(1) - 1) * s + dk).saturating_sub(len);
                let small = total / 2;
                let (b, e) = if win.auto_pad == AutoPad::SameUpper { (small, total - small) } else { (total - small, small) };
                pb[i] = b as isize;
                pe[i] = e as isize;
            }
            AutoPad::NotSet | AutoPad::Valid => {
                let (b, e) = if win.auto_pad == AutoPad::Valid { (0, 0) } else { (a.pads[i], a.pads[n + i]) };
                let padded = len + b + e;
                if padded < dk {
                    return Err(format!("window of extent {dk} is larger than the padded input {padded} (dim {i})"));
                }
                let span = padded - dk;
                out[i] = if win.ceil_mode { span.div_ceil(s) + 1 } else { span / s + 1 };
                // With ceil_mode the last window must start inside the input or left padding.
                if win.ceil_mode && (out[i] - 1) * s >= len + b {
                    out[i] -= 1;
                }
                pb[i] = b as isize;
                pe[i] = e as isize;
            }
        }
    }
    Window3::new(input, &out, &a.kernel, &a.strides, &a.dilations, &pb, &pe).ok_or_else(|| "bad window geometry".to_string())
}

/// Along spatial dim `i` of window `w` (of `k` spatial dims): the kernel's extent with its
/// dilation, and the input's size with its explicit pads. The window fits where the first is at
/// most the second. `None` for "same" padding, which pads to fit.
pub(crate) fn extent_and_padded(w: &Window, k: usize, i: usize, kernel: &DimExpr, input: &DimExpr) -> Option<(DimExpr, DimExpr)> {
    if matches!(w.auto_pad, AutoPad::SameUpper | AutoPad::SameLower) {
        return None;
    }
    let or = |v: &[usize], i: usize, d: usize| v.get(i).copied().unwrap_or(d) as i64;
    let pads = if w.auto_pad == AutoPad::Valid { 0 } else { or(&w.pads, i, 0) + or(&w.pads, k + i, 0) };
    let c = DimExpr::constant;
    Some((kernel.sub(&c(1)).scale(or(&w.dilations, i, 1)).add(&c(1)), input.add(&c(pads))))
}

/// Output spatial dims of window `w` with spatial kernel dims `kernel` over input spatial dims
/// `input`, as [`resolve`] computes them for fixed sizes. The kernel may be a dim expression (a
/// convolution's W a graph input): the output then shrinks as it grows. `None` for a dim whose
/// size is not an expression of the dims: `ceil_mode` where the last window may start in the
/// right padding and be dropped, which depends on the size's value.
pub(crate) fn window_out(w: &Window, kernel: &[DimExpr], input: &[DimExpr]) -> R<Vec<Option<DimExpr>>> {
    let k = kernel.len();
    if input.len() != k {
        return Err(format!("input has {} spatial dims, kernel {k}", input.len()));
    }
    let fits = |v: &[usize], len: usize, name: &str| if v.is_empty() || v.len() == len { Ok(()) } else { Err(format!("{name} has {} values, expected {len}", v.len())) };
    fits(&w.strides, k, "strides")?;
    fits(&w.dilations, k, "dilations")?;
    fits(&w.pads, 2 * k, "pads")?;
    let or = |v: &[usize], i: usize, d: usize| v.get(i).copied().unwrap_or(d) as i64;
    let c = DimExpr::constant;
    (0..k)
        .map(|i| {
            let (s, dil) = (or(&w.strides, i, 1), or(&w.dilations, i, 1));
            if s < 1 || dil < 1 || kernel[i].as_const().is_some_and(|k| k < 1) {
                return Err("kernel, strides and dilations must be positive".into());
            }
            let dk = kernel[i].sub(&c(1)).scale(dil).add(&c(1));
            if matches!(w.auto_pad, AutoPad::SameUpper | AutoPad::SameLower) {
                // ceil(len / s); the pads follow from it at run time.
                return Ok(Some(input[i].ceil_div(s)));
            }
            let (pb, pe) = if w.auto_pad == AutoPad::Valid { (0, 0) } else { (or(&w.pads, i, 0), or(&w.pads, k + i, 0)) };
            let span = input[i].add(&c(pb + pe)).sub(&dk);
            if span.as_const().is_some_and(|sp| sp < 0) {
                return Err(format!("window of extent {dk} is larger than the padded input {} (dim {i})", input[i].add(&c(pb + pe))));
            }
            if !w.ceil_mode {
                return Ok(Some(span.floor_div(s).add(&c(1))));
            }
            let out = span.ceil_div(s).add(&c(1));
            Ok(match (span.as_const(), input[i].as_const()) {
                // The last window must start inside the input or the left padding.
                (Some(sp), Some(len)) => {
                    let q = (sp + s - 1) / s;
                    Some(c(if q * s >= len + pb { q } else { q + 1 }))
                }
                // The correction never applies when dk ≥ s + pe: ceil(span/s)·s < span + s ≤ len + pb.
                _ if dk.as_const().is_some_and(|dk| dk >= s + pe) => Some(out),
                _ => None,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn win(auto_pad: AutoPad, strides: Vec<usize>, pads: Vec<usize>, ceil_mode: bool) -> Window {
        Window { kernel_shape: vec![3], strides, pads, dilations: vec![], auto_pad, ceil_mode }
    }

    #[test]
    fn output_sizes() {
        let w = resolve(&win(AutoPad::NotSet, vec![2], vec![1, 1], false), &[3], &[8]).unwrap();
        assert_eq!(w.output[2], 4);
        let w = resolve(&win(AutoPad::NotSet, vec![2], vec![0, 0], true), &[3], &[8]).unwrap();
        assert_eq!(w.output[2], 4);
        let w = resolve(&win(AutoPad::SameLower, vec![2], vec![], false), &[3], &[8]).unwrap();
        assert_eq!((w.output[2], w.pads_begin[2], w.pads_end[2]), (4, 1, 0));
        let w = resolve(&win(AutoPad::SameUpper, vec![2], vec![], false), &[3], &[8]).unwrap();
        assert_eq!((w.output[2], w.pads_begin[2], w.pads_end[2]), (4, 0, 1));
        assert!(resolve(&win(AutoPad::Valid, vec![1], vec![], false), &[3], &[2]).is_err());
        assert!(resolve(&win(AutoPad::NotSet, vec![0], vec![], false), &[3], &[8]).is_err());
    }

    /// `window_out` at fixed sizes is `resolve`'s output size (or both refuse), over every
    /// small geometry; where the size is an expression of a named dim, that expression gives
    /// the same sizes.
    #[test]
    fn window_out_agrees_with_resolve() {
        let pads = [AutoPad::NotSet, AutoPad::Valid, AutoPad::SameUpper, AutoPad::SameLower];
        let mut cases = 0;
        for auto_pad in pads {
            for (k, s, d, pb, pe, ceil_mode) in itertools_product() {
                let w = Window { kernel_shape: vec![k], strides: vec![s], pads: vec![pb, pe], dilations: vec![d], auto_pad, ceil_mode };
                let named = window_out(&w, &[DimExpr::constant(k as i64)], &[DimExpr::var("l")]).expect("named").remove(0);
                for len in 1..14 {
                    let fixed = window_out(&w, &[DimExpr::constant(k as i64)], &[DimExpr::constant(len as i64)]);
                    let want = resolve(&w, &[k], &[len]).map(|r| r.output[2] as i64);
                    let got = fixed.map(|o| o[0].as_ref().and_then(DimExpr::as_const));
                    match (&want, &got) {
                        (Ok(a), Ok(b)) => assert_eq!(Some(*a), *b, "{w:?} at {len}"),
                        (Err(_), Err(_)) => {}
                        _ => panic!("{w:?} at {len}: resolve {want:?}, window_out {got:?}"),
                    }
                    if let (Ok(want), Some(e)) = (want, &named) {
                        assert_eq!(e.eval(&|_| Some(len as i64)), Some(want), "{w:?}: {e} at {len}");
                    }
                    cases += 1;
                }
            }
        }
        assert!(cases > 10_000, "{cases}");
    }

    /// Kernel, stride, dilation, pad begin, pad end, ceil_mode.
    fn itertools_product() -> Vec<(usize, usize, usize, usize, usize, bool)> {
        let mut v = vec![];
        for k in 1..5 {
            for s in 1..4 {
                for d in 1..3 {
                    for pb in 0..3 {
                        for pe in 0..3 {
                            for c in [false, true] {
                                v.push((k, s, d, pb, pe, c));
                            }
                        }
                    }
                }
            }
        }
        v
    }
}
