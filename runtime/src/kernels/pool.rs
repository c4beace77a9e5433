//! Max, average and Lp pooling over [`Window3`] (N <= 3 spatial dims), one plane per
//! (batch, channel). Positions in the padding are skipped.
use super::window::Window3;
use crate::elem::Elem;

/// Visit the in-range input offsets of output position (d, h, w), row-major within a plane.
#[inline]
fn for_window(win: &Window3, o: [usize; 3], mut f: impl FnMut(usize, [usize; 3])) {
    let [_, ih, iw] = win.input;
    for kd in 0..win.kernel[0] {
        let zd = win.coord(0, o[0], kd);
        if zd < 0 || zd >= win.input[0] as isize {
            continue;
        }
        for kh in 0..win.kernel[1] {
            let zh = win.coord(1, o[1], kh);
            if zh < 0 || zh >= ih as isize {
                continue;
            }
            for kw in 0..win.kernel[2] {
                let zw = win.coord(2, o[2], kw);
                if zw < 0 || zw >= iw as isize {
                    continue;
                }
                let p = [zd as usize, zh as usize, zw as usize];
                f((p[0] * ih + p[1]) * iw + p[2], p);
            }
        }
    }
}

/// Number of kernel taps of output position `o` that land inside the padded input
/// (`-pads_begin .. input + pads_end`), for average pooling with `count_include_pad`.
fn padded_count(win: &Window3, o: [usize; 3]) -> usize {
    let mut n = 1;
    for (dim, &od) in o.iter().enumerate() {
        let lo = -win.pads_begin[dim];
        let hi = win.input[dim] as isize + win.pads_end[dim];
        n *= (0..win.kernel[dim]).filter(|&k| (lo..hi).contains(&win.coord(dim, od, k))).count();
    }
    n
}

#[inline]
fn for_outputs(win: &Window3, mut f: impl FnMut(usize, [usize; 3])) {
    let mut i = 0;
    for d in 0..win.output[0] {
        for h in 0..win.output[1] {
            for w in 0..win.output[2] {
                f(i, [d, h, w]);
                i += 1;
            }
        }
    }
}

/// Max pooling of `planes` planes. `indices`, when given, receives the flat index of each
/// maximum in the whole input tensor (row-major, or column-major within a plane when
/// `col_major`). A window with no input in range yields `T::lowest()` and index -1.
pub fn max_pool<T: Elem>(x: &[T], planes: usize, win: &Window3, y: &mut [T], mut indices: Option<&mut [i64]>, col_major: bool) {
    let (is, os) = (win.in_size(), win.out_size());
    let [id, ih, _] = win.input;
    for p in 0..planes {
        let xp = &x[p * is..(p + 1) * is];
        for_outputs(win, |i, o| {
            let mut best = T::lowest();
            let mut best_pos = None;
            for_window(win, o, |off, pos| {
                let v = xp[off];
                if best_pos.is_none() || v > best {
                    best = v;
                    best_pos = Some(pos);
                }
            });
            y[p * os + i] = best;
            if let Some(ind) = indices.as_deref_mut() {
                ind[p * os + i] = match best_pos {
                    None => -1,
                    Some([d, h, w]) => {
                        let within = if col_major { d + h * id + w * id * ih } else { (d * ih + h) * win.input[2] + w };
                        (p * is + within) as i64
                    }
                };
            }
        });
    }
}

/// Average pooling: the mean over in-range taps, or over all taps inside the padded input
/// when `count_include_pad`.
pub fn avg_pool<T: Elem>(x: &[T], planes: usize, win: &Window3, y: &mut [T], count_include_pad: bool) {
    let (is, os) = (win.in_size(), win.out_size());
    for p in 0..planes {
        let xp = &x[p * is..(p + 1) * is];
        for_outputs(win, |i, o| {
            let (mut sum, mut n) = (0.0f64, 0usize);
            for_window(win, o, |off, _| {
                sum += xp[off].to_f64();
                n += 1;
            });
            let count = if count_include_pad { padded_count(win, o) } else { n };
            y[p * os + i] = T::from_f64(if count == 0 { 0.0 } else { sum / count as f64 });
        });
    }
}

/// Lp pooling: `(Σ |x|^p)^(1/p)` over in-range taps.
pub fn lp_pool<T: Elem>(x: &[T], planes: usize, win: &Window3, y: &mut [T], p_norm: f64) {
    let (is, os) = (win.in_size(), win.out_size());
    for p in 0..planes {
        let xp = &x[p * is..(p + 1) * is];
        for_outputs(win, |i, o| {
            let mut sum = 0.0f64;
            for_window(win, o, |off, _| {
                sum += crate::math::pow(xp[off].to_f64().abs(), p_norm);
            });
            y[p * os + i] = T::from_f64(crate::math::pow(sum, 1.0 / p_norm));
        });
    }
}

/// Global pooling of `planes` planes of `size` elements each into one value per plane.
/// `kind`: 0 = max, 1 = average, 2 = Lp with `p_norm`.
pub fn global_pool<T: Elem>(x: &[T], planes: usize, size: usize, y: &mut [T], kind: u8, p_norm: f64) {
    for (p, out) in y.iter_mut().enumerate().take(planes) {
        let xp = &x[p * size..(p + 1) * size];
        *out = match kind {
            0 => xp.iter().fold(T::lowest(), |a, &b| if b > a { b } else { a }),
            1 => T::from_f64(xp.iter().map(|v| v.to_f64()).sum::<f64>() / size.max(1) as f64),
            _ => {
                let s: f64 = xp.iter().map(|v| crate::math::pow(v.to_f64().abs(), p_norm)).sum();
                T::from_f64(crate::math::pow(s, 1.0 / p_norm))
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_and_avg_2x2() {
        let x: [f32; 16] = core::array::from_fn(|i| i as f32);
        let win = Window3::new(&[4, 4], &[2, 2], &[2, 2], &[2, 2], &[1, 1], &[0, 0], &[0, 0]).unwrap();
        let mut y = [0f32; 4];
        let mut ind = [0i64; 4];
        max_pool(&x, 1, &win, &mut y, Some(&mut ind), false);
        assert_eq!(y, [5.0, 7.0, 13.0, 15.0]);
        assert_eq!(ind, [5, 7, 13, 15]);
        avg_pool(&x, 1, &win, &mut y, false);
        assert_eq!(y, [2.5, 4.5, 10.5, 12.5]);
    }

    #[test]
    fn avg_pad_counts() {
        let x = [1f32; 4];
        let win = Window3::new(&[2, 2], &[2, 2], &[2, 2], &[1, 1], &[1, 1], &[1, 1], &[0, 0]).unwrap();
        let mut y = [0f32; 4];
        avg_pool(&x, 1, &win, &mut y, true);
        assert_eq!(y, [0.25, 0.5, 0.5, 1.0]);
        avg_pool(&x, 1, &win, &mut y, false);
        assert_eq!(y, [1.0; 4]);
    }
}
