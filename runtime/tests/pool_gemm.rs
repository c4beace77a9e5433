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
    let d = ConvDims { batch: 2, c_in: 48, c_out: 40, group: 1 };
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
