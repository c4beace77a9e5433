//! On-device training under QEMU: builds `examples/firmware-train` (a tiny CNN whose train
//! step — forward, cross-entropy, backward, Adam — burnc compiles for thumbv7em-none-eabihf:
//! no_std, no alloc, starting weights in flash, a static `State` and `TrainArena`), boots it on
//! a Cortex-M4 in `qemu-system-arm`, and checks the losses it prints over its 20 steps on one
//! batch: the last must be under half the first, and each must agree with
//! `burnc train --steps 20` (the reference interpreter, same flags from `train.flags`, same
//! batch) to rtol 1e-3. Also checks the classes it predicts afterwards and prints the ELF's
//! section sizes (flash and RAM) and the compiler's buffer sizes.
//!
//! Skips, with a message, when `qemu-system-arm` or the thumbv7em-none-eabihf target is missing,
//! unless `BURNC_REQUIRE_FIRMWARE=1` (set by `.ci/run`), which turns the skip into a failure.
//! Setup: `apt-get install qemu-system-arm` and `rustup target add thumbv7em-none-eabihf`.
#[path = "common/lean.rs"]
mod lean;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

#[path = "common/firmware.rs"]
mod fw;
use fw::parse_line;

const RTOL: f64 = 1e-3;

fn example_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/firmware-train")
}

/// `step=K loss=V` lines: the losses, checking that K counts 1, 2, …
fn losses(output: &str, who: &str) -> Vec<f64> {
    let mut out = Vec::new();
    for l in output.lines().filter_map(|l| l.trim().strip_prefix("step=")) {
        let (k, v) = l.split_once(" loss=").unwrap_or_else(|| panic!("{who}: bad line `step={l}`"));
        assert_eq!(k.parse::<usize>().ok(), Some(out.len() + 1), "{who}: steps out of order:\n{output}");
        out.push(v.trim().parse::<f32>().unwrap_or_else(|e| panic!("{who}: loss `{v}`: {e}")) as f64);
    }
    out
}

/// The values after `key` on its line, as numbers.
fn numbers(output: &str, key: &str) -> Vec<usize> {
    parse_line(output, key).split_whitespace().map(|v| v.parse().unwrap_or_else(|e| panic!("`{key}` `{v}`: {e}"))).collect()
}

#[test]
fn firmware_trains_under_qemu_like_interpreter() {
    if !fw::prerequisites_or_skip("firmware training test") {
        return;
    }
    let dir = example_dir();
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("firmware-train");
    let _done = lean::LeanCleanup(vec![work.clone()]);
    std::fs::create_dir_all(&work).unwrap();
    let flags = std::fs::read_to_string(dir.join("train.flags")).expect("train.flags");

    // Build: examples/firmware-train/build.rs runs `$BURNC model.onnx -o $OUT_DIR/model.rs --train <train.flags>`.
    let (elf, build_time) = fw::build(&dir, &work.join("target"), "burnc-firmware-train-example");
    let t = Instant::now();
    let (ok, output) = fw::run_qemu(&elf, &work.join("qemu.log"));
    assert!(ok, "firmware did not exit with status 0:\n{output}");
    let run_time = t.elapsed();
    let got = losses(&output, "firmware");
    assert!(got.len() >= 2, "the firmware printed {} losses:\n{output}", got.len());

    // The reference interpreter: the same model, flags and batch, as many steps.
    let run = Command::new(env!("CARGO_BIN_EXE_burnc"))
        .arg("train")
        .arg(dir.join("model.onnx"))
        .arg("--input")
        .arg(format!("x={}", dir.join("x.npy").display()))
        .arg("--target")
        .arg(dir.join("target.npy"))
        .arg("--steps")
        .arg(got.len().to_string())
        .args(flags.split_whitespace())
        .output()
        .expect("run burnc train");
    assert!(run.status.success(), "burnc train failed: {}", String::from_utf8_lossy(&run.stderr));
    let want = losses(&String::from_utf8_lossy(&run.stdout), "burnc train");

    // `train_arena_bytes: A state_bytes: S arena_bytes: R weights_bytes: W checkpoint_bytes: C`
    let sizes: Vec<usize> = parse_line(&output, "train_arena_bytes:")
        .split_whitespace()
        .step_by(2)
        .map(|v| v.parse().unwrap_or_else(|e| panic!("size `{v}`: {e}")))
        .collect();
    let [train_arena, state, arena, weights, checkpoint] = sizes[..] else { panic!("bad size line: {sizes:?}") };
    let size_of = fw::report_sections(&elf);
    println!(
        "firmware: TRAIN_ARENA_BYTES {train_arena}, STATE_BYTES {state}, ARENA_BYTES {arena}, weights {weights} bytes, \
         checkpoint (safetensors) {checkpoint} bytes; build {build_time:.1?}, QEMU run ({} steps) {run_time:.2?}",
        got.len()
    );
    println!("firmware    losses: {got:?}");
    println!("interpreter losses: {want:?}");
    assert!(size_of(".bss") >= train_arena + state + arena, "the arenas and the state should be statics in .bss");
    assert!(size_of(".rodata") >= weights, "the weights should be in flash (.rodata)");
    assert!(checkpoint > 0, "write_safetensors failed on the device");

    let (first, last) = (got[0], got[got.len() - 1]);
    assert!(last < 0.5 * first, "the loss should fall below half its first value: {first} -> {last}");
    assert_eq!(got.len(), want.len(), "firmware printed {} losses, the interpreter {}", got.len(), want.len());
    let mut worst = 0f64;
    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
        let rel = (g - w).abs() / w.abs();
        assert!(rel <= RTOL, "step {}: firmware loss {g:e}, interpreter {w:e} (rtol {RTOL:e})", i + 1);
        worst = worst.max(rel);
    }
    println!("firmware vs interpreter: max rel diff {worst:e} over {} losses", got.len());

    // The trained model classifies its own batch.
    // The labels: target.npy's data (int64, little-endian) is its last 8·n bytes.
    let target = std::fs::read(dir.join("target.npy")).expect("target.npy");
    let predicted = numbers(&output, "predicted:");
    let labels: Vec<usize> = target[target.len() - 8 * predicted.len()..].chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap()) as usize).collect();
    assert_eq!(predicted, labels, "after training, the firmware's predicted classes vs the labels");
}
