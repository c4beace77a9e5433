//! Spectral ops in ONNX's layout (real and imaginary parts in a trailing dim of 2, a real signal
//! has a trailing dim of 1): DFT, STFT, the cosine windows and the mel filter bank. Sums and
//! twiddles are f64 whatever the element type, close to the reference's f64 FFT; transforms
//! are direct O(n²) sums whose twiddles advance by a complex product per term, so they need
//! no table (and generated code no scratch sized by a run-time length).
use crate::math;
use crate::FloatElem;

/// Geometry of one DFT: the input viewed as [outer, len_in, inner, c_in], the output as
/// [outer, len_out, inner, c_out].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DftDims {
    pub outer: usize,
    pub inner: usize,
    /// Input length along the transformed axis (truncated or zero-padded to `n`).
    pub len_in: usize,
    /// 1 (real) or 2 (complex).
    pub c_in: usize,
    /// Transform length.
    pub n: usize,
    pub inverse: bool,
    /// Forward: keep bins 0..=n/2. Inverse: the input holds bins 0..=n/2 of a real signal
    /// (numpy's irfft) and the output is real.
    pub onesided: bool,
}

impl DftDims {
    pub fn len_out(&self) -> usize {
        if self.onesided && !self.inverse {
            self.n / 2 + 1
        } else {
            self.n
        }
    }
    pub fn c_out(&self) -> usize {
        if self.onesided && self.inverse {
            1
        } else {
            2
        }
    }
    pub fn out_len(&self) -> usize {
        self.outer * self.len_out() * self.inner * self.c_out()
    }
}

/// Terms between exact twiddles: the recurrence's rounding error grows with the steps taken.
const RESYNC: usize = 32;

/// cos, sin of 2π·(k·j mod n)/n (reduced angles keep large k·j exact).
#[inline]
fn twiddle(k: usize, j: usize, n: usize) -> (f64, f64) {
    let m = ((k as u128 * j as u128) % n as u128) as f64;
    let a = 2.0 * core::f64::consts::PI * m / n as f64;
    (math::cos(a), math::sin(a))
}

/// Σ_j v(j) · e^{∓2πi·kj/n} over j < len (forward: minus).
#[inline]
fn bin(v: impl Fn(usize) -> (f64, f64), len: usize, n: usize, k: usize, forward: bool) -> (f64, f64) {
    let (mut re, mut im) = (0.0, 0.0);
    let (sc, ss) = twiddle(k, 1, n);
    let (mut c, mut s) = (1.0, 0.0);
    for j in 0..len.min(n) {
        if j % RESYNC == 0 {
            (c, s) = twiddle(k, j, n);
        }
        let (xr, xi) = v(j);
        if forward {
            re += xr * c + xi * s;
            im += xi * c - xr * s;
        } else {
            re += xr * c - xi * s;
            im += xi * c + xr * s;
        }
        (c, s) = (c * sc - s * ss, s * sc + c * ss);
    }
    (re, im)
}

/// ONNX DFT; `y` holds `d.out_len()` elements (`c_in` is 1 or 2).
pub fn dft<T: FloatElem>(x: &[T], d: &DftDims, y: &mut [T]) {
    let n = d.n;
    if n == 0 || x.len() < d.outer * d.len_in * d.inner * d.c_in || y.len() < d.out_len() {
        return;
    }
    let (lo, co) = (d.len_out(), d.c_out());
    let scale = if d.inverse { 1.0 / n as f64 } else { 1.0 };
    for o in 0..d.outer {
        for i in 0..d.inner {
            let at = |j: usize| ((o * d.len_in + j) * d.inner + i) * d.c_in;
            let get = |j: usize| {
                let p = at(j);
                let im = if d.c_in == 2 { x[p + 1].to_f64() } else { 0.0 };
                (x[p].to_f64(), im)
            };
            for k in 0..lo {
                let q = ((o * lo + k) * d.inner + i) * co;
                if d.inverse && d.onesided {
                    // Hermitian spectrum from bins 0..=n/2: X[j] for j <= n/2, conj(X[n-j]) above.
                    let half = n / 2;
                    let full = |j: usize| {
                        let (src, conj) = if j <= half { (j, false) } else { (n - j, true) };
                        if src >= d.len_in {
                            return (0.0, 0.0);
                        }
                        let (r, im) = get(src);
                        (r, if conj { -im } else { im })
                    };
                    let (re, _) = bin(full, n, n, k, false);
                    y[q] = T::from_f64(re * scale);
                } else {
                    let (re, im) = bin(get, d.len_in, n, k, !d.inverse);
                    y[q] = T::from_f64(re * scale);
                    y[q + 1] = T::from_f64(im * scale);
                }
            }
        }
    }
}

/// Geometry of an STFT: signal [batch, len, c_in], output [batch, frames, bins, 2].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StftDims {
    pub batch: usize,
    pub len: usize,
    pub c_in: usize,
    pub frame_step: usize,
    pub frame_length: usize,
    pub frames: usize,
    pub onesided: bool,
}

impl StftDims {
    pub fn bins(&self) -> usize {
        if self.onesided {
            self.frame_length / 2 + 1
        } else {
            self.frame_length
        }
    }
    pub fn out_len(&self) -> usize {
        self.batch * self.frames * self.bins() * 2
    }
}

/// ONNX STFT: each frame times the window (in the element type, as the reference does), then a
/// forward DFT of length `frame_length`. `window`: `frame_length` elements, or all ones when
/// `None`. Frames must fit the signal: `(frames - 1)·frame_step + frame_length <= len`.
pub fn stft<T: FloatElem>(x: &[T], window: Option<&[T]>, d: &StftDims, y: &mut [T]) {
    let n = d.frame_length;
    let last = d.frames.checked_sub(1).map_or(0, |f| f * d.frame_step + n);
    if n == 0 || last > d.len || x.len() < d.batch * d.len * d.c_in || window.is_some_and(|w| w.len() < n) || y.len() < d.out_len() {
        return;
    }
    let bins = d.bins();
    for b in 0..d.batch {
        for f in 0..d.frames {
            let get = |j: usize| {
                let p = (b * d.len + f * d.frame_step + j) * d.c_in;
                let w = window.map(|w| w[j]);
                let v = |e: T| w.map_or(e, |w| e.mul(w)).to_f64();
                (v(x[p]), if d.c_in == 2 { v(x[p + 1]) } else { 0.0 })
            };
            for k in 0..bins {
                let (re, im) = bin(get, n, n, k, true);
                let q = ((b * d.frames + f) * bins + k) * 2;
                y[q] = T::from_f64(re);
                y[q + 1] = T::from_f64(im);
            }
        }
    }
}

/// Coefficients (a0, a1, a2) of the generalized cosine windows
/// w[i] = a0 − a1·cos(2πi/N) + a2·cos(4πi/N).
pub const HANN: [f64; 3] = [0.5, 0.5, 0.0];
pub const HAMMING: [f64; 3] = [25.0 / 46.0, 21.0 / 46.0, 0.0];
pub const BLACKMAN: [f64; 3] = [0.42, 0.5, 0.08];

/// A cosine window of `y.len()` points; N is the length when `periodic`, else length − 1
/// (a symmetric window of one point is 1).
pub fn cosine_window<T: FloatElem>(a: [f64; 3], periodic: bool, y: &mut [T]) {
    let size = y.len();
    let big_n = if periodic { size } else { size.saturating_sub(1) };
    for (i, out) in y.iter_mut().enumerate() {
        let v = if big_n == 0 {
            1.0
        } else {
            let t = 2.0 * core::f64::consts::PI * i as f64 / big_n as f64;
            a[0] - a[1] * math::cos(t) + a[2] * math::cos(2.0 * t)
        };
        *out = T::from_f64(v);
    }
}

/// ONNX MelWeightMatrix, [dft_length/2 + 1, num_mel_bins] row-major in `y` (zeroed here):
/// triangular filters between bins spaced evenly on the mel scale, as the reference computes
/// them. Returns false when a filter edge falls outside the spectrogram bins (those writes are
/// skipped).
pub fn mel_weight_matrix<T: FloatElem>(num_mel_bins: usize, dft_length: usize, sample_rate: f64, lower_hz: f64, upper_hz: f64, y: &mut [T]) -> bool {
    let rows = dft_length / 2 + 1;
    for v in y.iter_mut() {
        *v = T::zero();
    }
    let ln10 = math::log(10.0);
    let mel = |hz: f64| 2595.0 * math::log1p(hz / 700.0) / ln10;
    let (low, high) = (mel(lower_hz), mel(upper_hz));
    let step = (high - low) / (num_mel_bins + 2) as f64;
    let edge = |i: usize| -> i64 {
        let hz = 700.0 * math::expm1((i as f64 * step + low) / 2595.0 * ln10);
        math::floor((dft_length + 1) as f64 * hz / sample_rate) as i64
    };
    let mut ok = true;
    let mut put = |j: i64, i: usize, v: f64| {
        if j >= 0 && (j as usize) < rows && i < num_mel_bins && (j as usize) * num_mel_bins + i < y.len() {
            y[j as usize * num_mel_bins + i] = T::from_f64(v);
        } else {
            ok = false;
        }
    };
    for i in 0..num_mel_bins {
        let (lo, center, hi) = (edge(i), edge(i + 1), edge(i + 2));
        let up = center - lo;
        if up == 0 {
            put(center, i, 1.0);
        } else {
            for j in lo..=center {
                put(j, i, (j - lo) as f64 / up as f64);
            }
        }
        let down = hi - center;
        if down > 0 {
            for j in center..hi {
                put(j, i, (hi - j) as f64 / down as f64);
            }
        }
    }
    ok
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: &[f64], b: &[f64]) {
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() < 1e-12, "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn dft_of_a_real_signal_and_back() {
        // x = [1, 2, 3, 4]: X = [10, -2+2i, -2, -2-2i].
        let x = [1.0, 2.0, 3.0, 4.0];
        let d = DftDims { outer: 1, inner: 1, len_in: 4, c_in: 1, n: 4, inverse: false, onesided: false };
        let mut y = [0.0; 8];
        dft(&x, &d, &mut y);
        close(&y, &[10.0, 0.0, -2.0, 2.0, -2.0, 0.0, -2.0, -2.0]);
        // Onesided keeps bins 0..=2; irfft of those gives the signal back.
        let d1 = DftDims { onesided: true, ..d };
        let mut half = [0.0; 6];
        dft(&x, &d1, &mut half);
        close(&half, &y[..6]);
        let di = DftDims { len_in: 3, c_in: 2, inverse: true, onesided: true, ..d };
        let mut back = [0.0; 4];
        dft(&half, &di, &mut back);
        close(&back, &x);
    }

    #[test]
    fn long_transforms_match_the_direct_sum() {
        const N: usize = 301;
        let n = N;
        let x: [f64; N] = core::array::from_fn(|i| ((i * 37) % 11) as f64 - 5.0);
        let d = DftDims { outer: 1, inner: 1, len_in: n, c_in: 1, n, inverse: false, onesided: false };
        let mut y = [0.0; 2 * N];
        dft(&x, &d, &mut y);
        for k in [0, 1, 7, 150, 300] {
            let (mut re, mut im) = (0.0, 0.0);
            for (j, v) in x.iter().enumerate() {
                let a = 2.0 * core::f64::consts::PI * ((k * j) % n) as f64 / n as f64;
                re += v * math::cos(a);
                im -= v * math::sin(a);
            }
            assert!((y[2 * k] - re).abs() < 1e-9 && (y[2 * k + 1] - im).abs() < 1e-9, "bin {k}");
        }
    }

    #[test]
    fn stft_frames_are_windowed_dfts() {
        // Two frames of 2 with step 1 over [1, 2, 3]; window [1, 0]: each bin is the first sample.
        let d = StftDims { batch: 1, len: 3, c_in: 1, frame_step: 1, frame_length: 2, frames: 2, onesided: false };
        let mut y = [0.0; 8];
        stft(&[1.0, 2.0, 3.0], Some(&[1.0, 0.0]), &d, &mut y);
        close(&y, &[1.0, 0.0, 1.0, 0.0, 2.0, 0.0, 2.0, 0.0]);
    }

    #[test]
    fn windows() {
        let mut w = [0.0f64; 4];
        cosine_window(HANN, true, &mut w);
        close(&w, &[0.0, 0.5, 1.0, 0.5]);
        let mut s = [0.0f64; 3];
        cosine_window(HAMMING, false, &mut s);
        close(&s, &[4.0 / 46.0, 1.0, 4.0 / 46.0]);
    }
}
