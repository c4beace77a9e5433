//! Resolve a [`Window`] against an input's spatial size: defaults, auto_pad, ceil_mode and
//! the output size, into the runtime's [`Window3`].
use crate::ir::{AutoPad, Window};
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
}
