//! Firmware under QEMU: builds `examples/firmware` (the small CNN of `model.onnx`, compiled by
//! this burnc, for thumbv7em-none-eabihf: no_std, no alloc, weights in flash, one static arena),
//! boots it on a Cortex-M4 in `qemu-system-arm` and compares the logits it prints with the
//! reference interpreter's on the same input (`input.npy`), to rtol 1e-4 / atol 1e-5.
//! Prints the ELF's section sizes (flash and RAM) and `ARENA_BYTES`.
//!
//! Skips, with a message, when `qemu-system-arm` or the thumbv7em-none-eabihf target is missing,
//! unless `BURNC_REQUIRE_FIRMWARE=1` (set by `.ci/run`), which turns the skip into a failure.
//! Setup: `apt-get install qemu-system-arm` and `rustup target add thumbv7em-none-eabihf`.
#[path = "common/lean.rs"]
mod lean;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use burnc_compiler::interp::RtValue;
use burnc_frontends::onnx::values::{decode_value, ValueKindHint};

#[path = "common/firmware.rs"]
mod fw;
use fw::parse_line;

const RTOL: f64 = 1e-4;
const ATOL: f64 = 1e-5;

fn example_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/firmware")
}

#[test]
fn firmware_matches_interpreter_under_qemu() {
    if !fw::prerequisites_or_skip("firmware test") {
        return;
    }
    let dir = example_dir();
    let burnc = env!("CARGO_BIN_EXE_burnc");
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("firmware");
    let _done = lean::LeanCleanup(vec![work.clone()]);
    std::fs::create_dir_all(&work).unwrap();

    // Build: examples/firmware/build.rs runs `$BURNC model.onnx -o $OUT_DIR/model.rs`.
    let (elf, build_time) = fw::build(&dir, &work.join("target"), "burnc-firmware-example");

    // Run under QEMU; semihosting prints and sets the exit status.
    let t = Instant::now();
    let (ok, output) = fw::run_qemu(&elf, &work.join("qemu.log"));
    assert!(ok, "firmware did not exit with status 0:\n{output}");
    let run_time = t.elapsed();
    let got: Vec<f64> =
        parse_line(&output, "logits:").split_whitespace().map(|v| v.parse::<f32>().unwrap_or_else(|e| panic!("`{v}`: {e}")) as f64).collect();
    let mut sizes = parse_line(&output, "arena_bytes:").split_whitespace();
    let arena_bytes: usize = sizes.next().and_then(|v| v.parse().ok()).expect("arena_bytes");
    let weights_bytes: usize = sizes.nth(1).and_then(|v| v.parse().ok()).expect("weights_bytes");

    // The reference interpreter on the same model and input.
    let ref_dir = work.join("interp");
    let _ = std::fs::remove_dir_all(&ref_dir);
    std::fs::create_dir_all(&ref_dir).unwrap();
    let run = Command::new(burnc)
        .arg("run")
        .arg(dir.join("model.onnx"))
        .arg("--input")
        .arg(dir.join("input.npy"))
        .arg("-o")
        .arg(&ref_dir)
        .output()
        .expect("run burnc");
    assert!(run.status.success(), "burnc run failed: {}", String::from_utf8_lossy(&run.stderr));
    let want = match decode_value(&std::fs::read(ref_dir.join("output_0.pb")).unwrap(), ValueKindHint::Tensor).expect("decode output") {
        RtValue::Tensor(t) => t.to_f64_vec(),
        other => panic!("interpreter output is not a tensor: {other:?}"),
    };

    let size_of = fw::report_sections(&elf);
    println!("firmware: ARENA_BYTES {arena_bytes}, weights {weights_bytes} bytes; build {build_time:.1?}, QEMU run {run_time:.2?}");
    println!("firmware    logits: {got:?}");
    println!("interpreter logits: {want:?}");
    assert!(size_of(".bss") >= arena_bytes, "the arena should be a static in .bss");
    assert!(size_of(".rodata") >= weights_bytes, "the weights should be in flash (.rodata)");

    assert_eq!(got.len(), want.len(), "firmware printed {} values, the interpreter has {}", got.len(), want.len());
    let mut worst = 0f64;
    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
        let err = (g - w).abs();
        assert!(err <= ATOL + RTOL * w.abs(), "logit {i}: firmware {g:e}, interpreter {w:e} (rtol {RTOL:e}, atol {ATOL:e})");
        worst = worst.max(err);
    }
    println!("firmware vs interpreter: max abs diff {worst:e} over {} values", got.len());
}
