//! sgemm split over the thread pool gives the single-thread result: row blocks (tall C) and
//! column blocks (wide C), with strided operands. Its own process, so the pool has 2 threads.
use burnc_runtime::kernels::gemm::{gemm_generic, sgemm, Layout};

fn values(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2654435761) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s >> 8) as f32 / (1u32 << 24) as f32 - 0.5
        })
        .collect()
}

#[test]
fn split_gemm_matches_serial() {
    burnc_runtime::pool::set_threads(2);
    assert_eq!(burnc_runtime::pool::threads(), 2);
    for &(m, k, n) in &[(96, 200, 80), (20, 300, 400), (300, 64, 40)] {
        let a = values(m * k, 1);
        let b = values(k * n, 2);
        // B transposed in memory (k contiguous), as Gemm transB=1 weights are.
        let bt: Vec<f32> = (0..n * k).map(|i| b[(i % k) * n + i / k]).collect();
        let mut want = vec![0f32; m * n];
        gemm_generic(m, k, n, &a, Layout::row_major(k), &b, Layout::row_major(n), &mut want, Layout::row_major(n));
        let mut got = vec![1f32; m * n];
        sgemm(m, k, n, 1.0, &a, Layout::row_major(k), &bt, Layout { row_stride: 1, col_stride: k as isize }, 0.0, &mut got, Layout::row_major(n));
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-4 * w.abs().max(1.0), "{m}x{k}x{n}: {g} vs {w}");
        }
    }
}

/// The prepacked convolution GEMM split over the pool's columns gives the bits of one thread
/// (each column's sum is one chain over k either way).
#[test]
fn split_prepacked_gemm_keeps_the_bits() {
    use burnc_runtime::kernels::packed::{pack_weights, packed_len, prepacked_scratch_len, sgemm_packed, scratch_len, sgemm_prepacked};
    burnc_runtime::pool::set_threads(2);
    for &(m, k, n) in &[(64, 300, 200), (130, 40, 1000), (7, 600, 400)] {
        let a = values(m * k, 3);
        let b = values(k * n, 4);
        let mut want = vec![0f32; m * n];
        // sgemm_packed never splits: the single-thread reference.
        sgemm_packed(m, k, n, &a, k, &b, n, &mut want, n, &mut vec![0f32; scratch_len(m, k)]);
        let mut ap = vec![0f32; packed_len(m, k)];
        pack_weights(m, k, &a, k, &mut ap);
        let mut got = vec![f32::NAN; m * n];
        sgemm_prepacked(m, k, n, &ap, &b, n, &mut got, n, &mut vec![0f32; prepacked_scratch_len(k)]);
        assert!(got.iter().zip(&want).all(|(g, w)| g.to_bits() == w.to_bits()), "{m}x{k}x{n}");
    }
}

/// Winograd convolution with its transforms and GEMMs split over two threads gives the bits
/// of one thread (the reference runs inside a pool task, where nested calls are serial).
#[test]
fn split_winograd_keeps_the_bits() {
    use burnc_runtime::kernels::conv::{Act, ConvDims, Epilogue};
    use burnc_runtime::kernels::window::Window3;
    use burnc_runtime::kernels::winograd::{conv_winograd, pack_weights, packed_len, scratch_len};
    burnc_runtime::pool::set_threads(2);
    let d = ConvDims { batch: 2, c_in: 72, c_out: 64, group: 1 };
    let win = Window3::new(&[30, 29], &[30, 29], &[3, 3], &[1, 1], &[1, 1], &[1, 1], &[1, 1]).unwrap();
    let x = values(d.batch * d.c_in * win.in_size(), 5);
    let w = values(d.c_out * d.c_in * 9, 6);
    let bias = values(d.c_out, 7);
    let ep = Epilogue { bias: Some(&bias), scale: None, shift: None, residual: None, act: Act::Relu };
    let mut up = vec![0f32; packed_len(&d)];
    pack_weights(&d, &w, &mut up);
    let out = d.batch * d.c_out * win.out_size();
    let want = std::sync::Mutex::new(vec![0f32; out]);
    burnc_runtime::pool::parallel_for(2, &|t| {
        if t == 0 {
            let mut y = want.lock().unwrap();
            conv_winograd(&x, &up, &mut y, &d, &win, &mut vec![0f32; scratch_len(&d, &win)], &ep);
        }
    });
    let want = want.into_inner().unwrap();
    let mut got = vec![f32::NAN; out];
    conv_winograd(&x, &up, &mut got, &d, &win, &mut vec![f32::NAN; scratch_len(&d, &win)], &ep);
    assert!(got.iter().zip(&want).all(|(g, w)| g.to_bits() == w.to_bits()));
    assert!(want.iter().any(|&v| v > 0.0));
}

/// Round trip of one parallel call with trivial tasks (the cost a split has to beat):
/// `cargo test -p burnc-runtime --release --features std --test pool_gemm -- --ignored --nocapture`.
#[test]
#[ignore]
fn parallel_call_latency() {
    burnc_runtime::pool::set_threads(2);
    let hits = std::sync::atomic::AtomicUsize::new(0);
    for gap_us in [0u64, 20, 200] {
        let mut total = std::time::Duration::ZERO;
        let calls = 2000;
        for _ in 0..calls {
            // Work between calls, as a model's serial ops leave between parallel ones.
            let t = std::time::Instant::now();
            while t.elapsed().as_micros() < gap_us as u128 {}
            let t = std::time::Instant::now();
            burnc_runtime::pool::parallel_for(2, &|_| {
                hits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            });
            total += t.elapsed();
        }
        println!("gap {gap_us} us: {:.2} us per call", total.as_secs_f64() * 1e6 / calls as f64);
    }
}

/// A convolution with prepacked weights split over 2 threads (im2col by channels, GEMM by
/// columns or by output channels) gives the bits of the serial packed GEMM.
#[test]
fn split_prepacked_conv_keeps_the_bits() {
    use burnc_runtime::kernels::conv::*;
    use burnc_runtime::kernels::{packed, window::Window3};
    /// The serial packed GEMM (what a single-threaded prepacked conv computes).
    struct Serial;
    impl MatMul<f32> for Serial {
        fn mm(&self, m: usize, k: usize, n: usize, a: &[f32], la: Layout, b: &[f32], lb: Layout, c: &mut [f32], ldc: usize) {
            gemm_generic(m, k, n, a, la, b, lb, c, Layout::row_major(ldc));
        }
        fn mm_rows(&self, m: usize, k: usize, n: usize, a: &[f32], lda: usize, b: &[f32], ldb: usize, c: &mut [f32], ldc: usize, scratch: &mut [f32]) {
            packed::sgemm_packed(m, k, n, a, lda, b, ldb, c, ldc, scratch);
        }
    }
    burnc_runtime::pool::set_threads(2);
    assert_eq!(burnc_runtime::pool::threads(), 2);
    // batch, c_in, c_out, group, h (= w), k, stride, pad
    for &(batch, c_in, c_out, group, h, k, s, p) in
        &[(1, 32, 64, 1, 40, 1, 1, 0), (2, 24, 36, 1, 33, 3, 1, 1), (1, 128, 32, 1, 7, 3, 1, 1), (1, 64, 6, 1, 90, 3, 1, 1), (1, 32, 48, 2, 30, 3, 2, 1)]
    {
        let d = ConvDims { batch, c_in, c_out, group };
        let o = (h + 2 * p - k) / s + 1;
        let win = Window3::new(&[h, h], &[o, o], &[k, k], &[s, s], &[1, 1], &[p as isize, p as isize], &[p as isize, p as isize]).unwrap();
        let x = values(batch * c_in * h * h, 5);
        let w = values(c_out * (c_in / group) * k * k, 6);
        let bias = values(c_out, 7);
        let res = values(batch * c_out * o * o, 8);
        let ep = Epilogue { bias: Some(&bias[..]), scale: None, shift: None, residual: Some(&res[..]), act: Act::Relu };
        let mut want = vec![0f32; batch * c_out * o * o];
        conv_fused(&x, &w, &mut want, &d, &win, &mut vec![0f32; conv_scratch_len(&d, &win)], &Serial, &ep);
        let mut wp = vec![f32::NAN; conv_packed_len(&d, &win)];
        pack_conv_weights(&d, &win, &w, &mut wp);
        let mut y = vec![f32::NAN; want.len()];
        conv_fused_prepacked(&x, &wp, &mut y, &d, &win, &mut vec![f32::NAN; conv_prepacked_scratch_len(&d, &win)], &ep);
        assert!(y.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "{batch}x{c_in}->{c_out}/{group} {h}x{h} k{k}");
    }
}

/// Depthwise convolution and pooling split over planes on 2 threads against plain loops.
#[test]
fn split_depthwise_and_pooling_match_plain_loops() {
    use burnc_runtime::kernels::conv::*;
    use burnc_runtime::kernels::{pool, window::Window3};
    burnc_runtime::pool::set_threads(2);
    let (batch, c, h) = (2, 48, 29);
    let x = values(batch * c * h * h, 9);
    // 3×3 depthwise, pad 1, stride 1 and 2.
    for s in [1, 2] {
        let o = (h + 2 - 3) / s + 1;
        let win = Window3::new(&[h, h], &[o, o], &[3, 3], &[s, s], &[1, 1], &[1, 1], &[1, 1]).unwrap();
        let d = ConvDims { batch, c_in: c, c_out: c, group: c };
        let w = values(c * 9, 10);
        let mut y = vec![f32::NAN; batch * c * o * o];
        conv_fused(&x, &w, &mut y, &d, &win, &mut vec![0f32; conv_scratch_len(&d, &win)], &Sgemm, &Epilogue::bias(None));
        for p in 0..batch * c {
            for i in 0..o {
                for j in 0..o {
                    let mut want = 0f64;
                    for ki in 0..3 {
                        for kj in 0..3 {
                            let (r, q) = ((i * s + ki) as isize - 1, (j * s + kj) as isize - 1);
                            if r >= 0 && q >= 0 && (r as usize) < h && (q as usize) < h {
                                want += w[(p % c) * 9 + ki * 3 + kj] as f64 * x[p * h * h + r as usize * h + q as usize] as f64;
                            }
                        }
                    }
                    let got = y[(p * o + i) * o + j] as f64;
                    assert!((got - want).abs() < 1e-5, "depthwise s{s} plane {p} at {i},{j}: {got} vs {want}");
                }
            }
        }
    }
    // 3×3 max pool, stride 2, no padding.
    let o = (h - 3) / 2 + 1;
    let win = Window3::new(&[h, h], &[o, o], &[3, 3], &[2, 2], &[1, 1], &[0, 0], &[0, 0]).unwrap();
    let mut y = vec![f32::NAN; batch * c * o * o];
    pool::max_pool(&x, batch * c, &win, &mut y, pool::Indices::None);
    let mut avg = vec![f32::NAN; batch * c * o * o];
    pool::avg_pool(&x, batch * c, &win, &mut avg, false);
    for p in 0..batch * c {
        for i in 0..o {
            for j in 0..o {
                let taps = (0..9).map(|t| x[p * h * h + (i * 2 + t / 3) * h + j * 2 + t % 3]);
                let want = taps.clone().fold(f32::MIN, f32::max);
                assert_eq!(y[(p * o + i) * o + j], want, "max pool plane {p} at {i},{j}");
                let mean = taps.map(|v| v as f64).sum::<f64>() / 9.0;
                assert!((avg[(p * o + i) * o + j] as f64 - mean).abs() < 1e-6, "avg pool plane {p} at {i},{j}");
            }
        }
    }
}

/// Row-major products (burnc's packed kernel) split over 2 threads by row blocks and column
/// blocks agree with the plain loop.
#[test]
fn split_row_major_sgemm_matches_plain_loop() {
    burnc_runtime::pool::set_threads(2);
    for &(m, k, n) in &[(200, 130, 70), (20, 300, 500), (7, 1000, 300)] {
        let (lda, ldb, ldc) = (k + 3, n + 1, n + 5);
        let a = values(m * lda, 3);
        let b = values(k * ldb, 4);
        let mut want = vec![0f32; m * ldc];
        gemm_generic(m, k, n, &a, Layout { row_stride: lda as isize, col_stride: 1 }, &b, Layout { row_stride: ldb as isize, col_stride: 1 }, &mut want, Layout { row_stride: ldc as isize, col_stride: 1 });
        let mut got = vec![f32::NAN; m * ldc];
        sgemm(m, k, n, 1.0, &a, Layout { row_stride: lda as isize, col_stride: 1 }, &b, Layout { row_stride: ldb as isize, col_stride: 1 }, 0.0, &mut got, Layout { row_stride: ldc as isize, col_stride: 1 });
        for i in 0..m {
            for j in 0..n {
                let (g, w) = (got[i * ldc + j], want[i * ldc + j]);
                assert!((g - w).abs() < 1e-3, "{m}x{k}x{n} at {i},{j}: {g} vs {w}");
            }
        }
    }
}

/// Concat parts big enough to split over 2 threads land where the serial loop puts them,
/// pieces crossing row boundaries included.
#[test]
fn split_concat_part_matches_serial_copy() {
    use burnc_runtime::kernels::concat::concat_part;
    burnc_runtime::pool::set_threads(2);
    for &(outer, a, b) in &[(1usize, 70_001usize, 5usize), (3, 40_003, 29_999), (7, 20_000, 11)] {
        let xa = values(outer * a, 11);
        let xb = values(outer * b, 12);
        let row = a + b;
        let mut y = vec![f32::NAN; outer * row];
        concat_part(&mut y, &xa, outer, row, 0, a);
        concat_part(&mut y, &xb, outer, row, a, b);
        let mut want = vec![0f32; outer * row];
        for o in 0..outer {
            want[o * row..o * row + a].copy_from_slice(&xa[o * a..(o + 1) * a]);
            want[o * row + a..(o + 1) * row].copy_from_slice(&xb[o * b..(o + 1) * b]);
        }
        assert!(y.iter().zip(&want).all(|(p, q)| p.to_bits() == q.to_bits()), "{outer}x({a}+{b})");
    }
}

/// `f` run once inside a pool task (where nested parallel calls are serial: the single-thread
/// reference) and once split over the pool; both results.
fn serial_and_split<T: Clone + Send>(len: usize, fill: T, f: &(dyn Fn(&mut [T]) + Sync)) -> (Vec<T>, Vec<T>) {
    burnc_runtime::pool::set_threads(2);
    assert_eq!(burnc_runtime::pool::threads(), 2);
    let want = std::sync::Mutex::new(vec![fill.clone(); len]);
    burnc_runtime::pool::parallel_for(2, &|t| {
        if t == 0 {
            f(&mut want.lock().unwrap());
        }
    });
    let mut got = vec![fill; len];
    f(&mut got);
    (want.into_inner().unwrap(), got)
}

/// Transposes split by their outermost output axis give the serial result: the AVX2 plane
/// path (attention's keys), the odometer, and a shuffle whose outer axis merges.
#[test]
fn split_permute_matches_serial() {
    use burnc_runtime::kernels::permute::permute;
    for (shape, perm) in [(vec![2, 6, 270, 32], vec![0, 1, 3, 2]), (vec![1, 300, 6, 40], vec![0, 2, 1, 3]), (vec![7, 3, 50, 64], vec![2, 0, 3, 1]), (vec![4, 9, 2000], vec![1, 0, 2])] {
        let n: usize = shape.iter().product();
        let x: Vec<u32> = (0..n as u32).collect();
        let (want, got) = serial_and_split(n, u32::MAX, &|y| permute(&x, &shape, &perm, y));
        assert_eq!(got, want, "{shape:?} by {perm:?}");
        // Every element moved once.
        let mut sorted = got.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, x);
    }
}

/// LayerNormalization's rows split over the pool keep the bits of one thread.
#[test]
fn split_layer_norm_keeps_the_bits() {
    use burnc_runtime::kernels::norm::layer_norm;
    let (outer, inner) = (700, 193);
    let x = values(outer * inner, 9);
    let (scale, bias) = (values(inner, 10), values(inner, 11));
    let (want, got) = serial_and_split(outer * inner, f32::NAN, &|y| layer_norm(&x, y, outer, inner, &scale, Some(&bias), 1e-5, None, None));
    assert!(got.iter().zip(&want).all(|(g, w)| g.to_bits() == w.to_bits()));
    // And the first row against the definition.
    let row = &x[..inner];
    let mean = row.iter().map(|&v| v as f64).sum::<f64>() / inner as f64;
    let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / inner as f64;
    for j in 0..inner {
        let want = ((row[j] as f64 - mean) / (var + 1e-5).sqrt() * scale[j] as f64 + bias[j] as f64) as f32;
        assert!((got[j] - want).abs() <= 1e-6 * want.abs().max(1.0), "{j}: {} vs {want}", got[j]);
    }
}
