//! Slice: along each dim `d`, `out[d]` elements from index `start[d]` every `step[d]` (negative
//! steps walk backwards), for dims given at run time.

/// `y[i…] = x[(start[d] + i_d · step[d])…]` for `x` of dims `dims` and `y` of dims `out`.
/// Trailing dims kept whole are one contiguous run, and so is a run along the last other dim
/// when its step is 1: those are copied with `copy_from_slice`.
pub fn slice<T: Copy>(x: &[T], dims: &[usize], start: &[usize], step: &[isize], y: &mut [T], out: &[usize]) {
    let r = dims.len();
    assert!(start.len() == r && step.len() == r && out.len() == r, "slice: ranks");
    let n: usize = out.iter().product();
    assert!(y.len() >= n, "slice: output too short");
    if n == 0 {
        return;
    }
    assert!(x.len() >= dims.iter().product::<usize>(), "slice: input too short");
    for d in 0..r {
        let last = start[d] as isize + (out[d] as isize - 1) * step[d];
        assert!(start[d] < dims[d] && last >= 0 && (last as usize) < dims[d], "slice: out of range");
    }
    // Dims `k..` are whole: one run of `inner` elements per index of the dims before.
    let mut k = r;
    while k > 0 && start[k - 1] == 0 && step[k - 1] == 1 && out[k - 1] == dims[k - 1] {
        k -= 1;
    }
    let inner: usize = dims[k..].iter().product();
    if k == 0 {
        y[..n].copy_from_slice(&x[..n]);
        return;
    }
    copy(x, dims, start, step, y, out, k, inner, 0, 0, 0);
}

/// Dim `d` (below `k`) at input offset `xo` and output offset `yo`.
#[allow(clippy::too_many_arguments)]
fn copy<T: Copy>(x: &[T], dims: &[usize], start: &[usize], step: &[isize], y: &mut [T], out: &[usize], k: usize, inner: usize, d: usize, xo: usize, yo: usize) {
    let xs: usize = dims[d + 1..].iter().product();
    let ys: usize = out[d + 1..k].iter().product::<usize>() * inner;
    let at = |j: usize| xo + (start[d] as isize + j as isize * step[d]) as usize * xs;
    if d + 1 == k && step[d] == 1 {
        let len = out[d] * inner;
        y[yo..yo + len].copy_from_slice(&x[at(0)..at(0) + len]);
    } else if d + 1 == k {
        for j in 0..out[d] {
            y[yo + j * inner..yo + (j + 1) * inner].copy_from_slice(&x[at(j)..at(j) + inner]);
        }
    } else {
        for j in 0..out[d] {
            copy(x, dims, start, step, y, out, k, inner, d + 1, at(j), yo + j * ys);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_steps_and_whole_dims() {
        let x: [i32; 12] = core::array::from_fn(|i| i as i32); // [[0..4], [4..8], [8..12]]
        let mut y = [0; 4];
        // Rows 1.. , columns 1..3.
        slice(&x, &[3, 4], &[1, 1], &[1, 1], &mut y, &[2, 2]);
        assert_eq!(y, [5, 6, 9, 10]);
        // Every other column, backwards from the last.
        let mut y = [0; 6];
        slice(&x, &[3, 4], &[0, 3], &[1, -2], &mut y, &[3, 2]);
        assert_eq!(y, [3, 1, 7, 5, 11, 9]);
        // Rows reversed, whole rows.
        let mut y = [0; 12];
        slice(&x, &[3, 4], &[2, 0], &[-1, 1], &mut y, &[3, 4]);
        assert_eq!(y, [8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3]);
        // Everything.
        let mut y = [0; 12];
        slice(&x, &[3, 4], &[0, 0], &[1, 1], &mut y, &[3, 4]);
        assert_eq!(y, x);
        // Rank 3, the middle dim sliced: runs of the last dim.
        let x: [i32; 24] = core::array::from_fn(|i| i as i32);
        let mut y = [0; 8];
        slice(&x, &[2, 3, 4], &[0, 1, 0], &[1, 2, 1], &mut y, &[2, 1, 4]);
        assert_eq!(y, [4, 5, 6, 7, 16, 17, 18, 19]);
        // Empty output: nothing read.
        slice::<i32>(&[], &[0, 2], &[0, 0], &[1, 1], &mut [], &[0, 2]);
    }

    #[test]
    #[should_panic(expected = "slice: out of range")]
    fn refuses_reads_outside() {
        let mut y = [0; 3];
        slice(&[1, 2, 3], &[3], &[1], &[1], &mut y, &[3]);
    }
}
