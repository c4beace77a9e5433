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
