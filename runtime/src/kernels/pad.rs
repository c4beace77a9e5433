//! Pad (and crop, with negative pads) of an N-D tensor whose dims are given at run time: each
//! output element reads the input at its index less the leading pad, or, outside the input,
//! the fill value (`Constant`), the index mirrored about the edge (`Reflect`), clamped to it
//! (`Edge`) or wrapped around (`Wrap`).

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PadMode {
    Constant,
    Reflect,
    Edge,
    Wrap,
}

/// The input index for output index `i` along a dim of `n` input elements, `None` for the
/// fill (always for an empty dim).
fn source(i: i64, n: usize, mode: PadMode) -> Option<usize> {
    let n = n as i64;
    if (0..n).contains(&i) {
        return Some(i as usize);
    }
    if n == 0 {
        return None;
    }
    let j = match mode {
        PadMode::Constant => return None,
        PadMode::Edge => i.clamp(0, n - 1),
        PadMode::Wrap => i.rem_euclid(n),
        PadMode::Reflect if n == 1 => 0,
        PadMode::Reflect => {
            let period = 2 * (n - 1);
            let j = i.rem_euclid(period);
            if j >= n {
                period - j
            } else {
                j
            }
        }
    };
    Some(j as usize)
}

/// `out` (dims `out_dims`) = `x` (dims `dims`) with `before[d]` elements added (or, negative,
/// removed) before each dim `d`; `out_dims[d] - dims[d] - before[d]` are added after it.
pub fn pad<T: Copy>(x: &[T], dims: &[usize], before: &[i64], mode: PadMode, fill: T, out_dims: &[usize], out: &mut [T]) {
    let r = dims.len();
    assert!(before.len() == r && out_dims.len() == r, "pad: ranks differ");
    assert!(x.len() >= dims.iter().product::<usize>() && out.len() >= out_dims.iter().product::<usize>(), "pad: slices too short");
    if r == 0 {
        if let (Some(o), Some(&v)) = (out.first_mut(), x.first()) {
            *o = v;
        }
        return;
    }
    rows(x, dims, before, mode, fill, out_dims, out, 0, 0, 0);
}

/// The leading pad that centers a dim of `len` elements in one of `target` (CenterCropPad):
/// negative to crop. The odd element goes to the end either way.
pub fn center_lead(len: usize, target: usize) -> i64 {
    if target <= len {
        -(((len - target) / 2) as i64)
    } else {
        ((target - len) / 2) as i64
    }
}

/// Dim `d` onwards, the input block at `xo` and the output block at `oo`.
#[allow(clippy::too_many_arguments)]
fn rows<T: Copy>(x: &[T], dims: &[usize], before: &[i64], mode: PadMode, fill: T, out_dims: &[usize], out: &mut [T], d: usize, xo: usize, oo: usize) {
    let (xi, oi): (usize, usize) = (dims[d + 1..].iter().product(), out_dims[d + 1..].iter().product());
    let last = d + 1 == dims.len();
    for j in 0..out_dims[d] {
        let o = oo + j * oi;
        match source(j as i64 - before[d], dims[d], mode) {
            Some(s) if last => out[o] = x[xo + s],
            Some(s) => rows(x, dims, before, mode, fill, out_dims, out, d + 1, xo + s * xi, o),
            None => out[o..o + oi].fill(fill),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_and_negative_pads() {
        let x = [1, 2, 3];
        let run = |before: i64, after: i64, mode| {
            let n = (3 + before + after) as usize;
            let mut y = [0; 9];
            pad(&x, &[3], &[before], mode, -1, &[n], &mut y[..n]);
            y[..n].to_vec()
        };
        assert_eq!(run(2, 1, PadMode::Constant), [-1, -1, 1, 2, 3, -1]);
        assert_eq!(run(2, 2, PadMode::Reflect), [3, 2, 1, 2, 3, 2, 1]);
        assert_eq!(run(2, 1, PadMode::Edge), [1, 1, 1, 2, 3, 3]);
        assert_eq!(run(2, 2, PadMode::Wrap), [2, 3, 1, 2, 3, 1, 2]);
        assert_eq!(run(-1, 0, PadMode::Constant), [2, 3]);
        // 2-D: a row of fill above, a column of fill on the left.
        let mut y = [0; 9];
        pad(&[1, 2, 3, 4], &[2, 2], &[1, 1], PadMode::Constant, 0, &[3, 3], &mut y);
        assert_eq!(y, [0, 0, 0, 0, 1, 2, 0, 3, 4]);
    }

    #[test]
    fn centered_crop_and_pad() {
        // [1..5] to 2: [2, 3]; [1, 2] to 5: [0, 1, 2, 0, 0].
        assert_eq!(center_lead(5, 2), -1);
        assert_eq!(center_lead(2, 5), 1);
        assert_eq!(center_lead(4, 4), 0);
    }
}
