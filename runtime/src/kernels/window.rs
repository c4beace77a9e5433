//! Sliding-window geometry shared by convolution and pooling, normalised to three spatial
//! dims (unused leading dims have size 1, kernel 1, stride 1, no padding).

/// Geometry of one sliding window over up to three spatial dims.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window3 {
    /// Spatial size of the input.
    pub input: [usize; 3],
    /// Spatial size of the output.
    pub output: [usize; 3],
    pub kernel: [usize; 3],
    pub strides: [usize; 3],
    pub dilations: [usize; 3],
    /// Padding before each dim (negative crops).
    pub pads_begin: [isize; 3],
    /// Padding after each dim (negative crops).
    pub pads_end: [isize; 3],
}

impl Window3 {
    /// Build from N-d slices (N <= 3, all of the same length); `None` when N > 3 or the
    /// lengths differ.
    pub fn new(
        input: &[usize],
        output: &[usize],
        kernel: &[usize],
        strides: &[usize],
        dilations: &[usize],
        pads_begin: &[isize],
        pads_end: &[isize],
    ) -> Option<Window3> {
        let n = input.len();
        if n > 3 || [output.len(), kernel.len(), strides.len(), dilations.len(), pads_begin.len(), pads_end.len()].iter().any(|&l| l != n) {
            return None;
        }
        fn fill<T: Copy>(v: &[T], d: T) -> [T; 3] {
            let mut a = [d; 3];
            let off = 3 - v.len();
            a[off..].copy_from_slice(v);
            a
        }
        Some(Window3 {
            input: fill(input, 1),
            output: fill(output, 1),
            kernel: fill(kernel, 1),
            strides: fill(strides, 1),
            dilations: fill(dilations, 1),
            pads_begin: fill(pads_begin, 0),
            pads_end: fill(pads_end, 0),
        })
    }

    pub fn in_size(&self) -> usize {
        self.input.iter().product()
    }
    pub fn out_size(&self) -> usize {
        self.output.iter().product()
    }
    pub fn kernel_size(&self) -> usize {
        self.kernel.iter().product()
    }

    /// True when the window is the identity map (1×1 kernel, stride 1, no padding, same size),
    /// so im2col is the input itself.
    pub fn is_pointwise(&self) -> bool {
        self.kernel == [1; 3] && self.strides == [1; 3] && self.pads_begin == [0; 3] && self.input == self.output
    }

    /// Input coordinate along `dim` of output position `o` and kernel offset `k` (may be
    /// outside `0..input[dim]`).
    #[inline]
    pub fn coord(&self, dim: usize, o: usize, k: usize) -> isize {
        (o * self.strides[dim] + k * self.dilations[dim]) as isize - self.pads_begin[dim]
    }

    /// Range of output positions `o` along `dim` whose input coordinate for kernel offset `k`
    /// lies inside the input.
    #[inline]
    pub fn valid_range(&self, dim: usize, k: usize) -> (usize, usize) {
        let s = self.strides[dim] as isize;
        let base = (k * self.dilations[dim]) as isize - self.pads_begin[dim];
        let n_in = self.input[dim] as isize;
        let n_out = self.output[dim] as isize;
        // o*s + base >= 0  ⇔  o >= ceil(-base / s)
        let lo = if base >= 0 { 0 } else { (-base + s - 1) / s };
        // o*s + base < n_in ⇔ o <= floor((n_in - 1 - base) / s)
        let hi = if n_in - 1 - base < 0 { 0 } else { (n_in - 1 - base) / s + 1 };
        let lo = lo.clamp(0, n_out);
        let hi = hi.clamp(lo, n_out);
        (lo as usize, hi as usize)
    }
}
