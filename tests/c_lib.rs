//! `burnc MODEL --emit c-lib` (issue 20): the C library of examples/firmware's CNN called from
//! C, on this machine (a program built with `cc`) and on a Cortex-M4 (C firmware built with
//! Debian's `arm-none-eabi-gcc`, no libc, run in QEMU). Both print the logits as float bits;
//! they must match the reference interpreter on the same input (rtol 1e-4, atol 1e-5). The
//! host program also checks the error codes of bad calls. The Cortex-M4 test skips without
//! QEMU, the target or the cross compiler unless `BURNC_REQUIRE_FIRMWARE=1` (CI).
use std::path::{Path, PathBuf};
use std::process::Command;

use burnc_compiler::interp::RtValue;
use burnc_frontends::onnx::values::{decode_value, ValueKindHint};

#[path = "common/firmware.rs"]
mod fw;
use fw::parse_line;

const RTOL: f64 = 1e-4;
const ATOL: f64 = 1e-5;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn model() -> PathBuf {
    root().join("examples/firmware/model.onnx")
}

fn work(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::create_dir_all(&d).expect("work dir");
    d
}

/// The floats of a C-order float32 `.npy` file.
fn npy_f32(path: &Path) -> Vec<f32> {
    let b = std::fs::read(path).expect("read .npy");
    assert_eq!(&b[..6], b"\x93NUMPY", "not an .npy file");
    let hlen = u16::from_le_bytes([b[8], b[9]]) as usize;
    let header = String::from_utf8_lossy(&b[10..10 + hlen]);
    assert!(header.contains("'<f4'") && header.contains("'fortran_order': False"), "{header}");
    b[10 + hlen..].chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// `burnc model.onnx --emit c-lib --name cnn -o DIR [--triple T]`.
fn emit(dir: &Path, triple: Option<&str>) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_burnc"));
    cmd.arg(model()).args(["--emit", "c-lib", "--name", "cnn", "-o"]).arg(dir);
    if let Some(t) = triple {
        cmd.args(["--triple", t]);
    }
    // One cargo cache for the library's Rust side across both tests.
    cmd.env("BURNC_CLIB_TARGET_DIR", work("clib-target"));
    let out = cmd.output().expect("run burnc");
    assert!(out.status.success(), "burnc --emit c-lib failed:\n{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    println!("{}", String::from_utf8_lossy(&out.stdout));
    assert!(dir.join("libcnn.a").is_file() && dir.join("cnn.h").is_file());
}

/// The interpreter's logits on examples/firmware's input.
fn reference() -> Vec<f64> {
    let ref_dir = work("clib-ref");
    let run = Command::new(env!("CARGO_BIN_EXE_burnc"))
        .arg("run")
        .arg(model())
        .arg("--input")
        .arg(root().join("examples/firmware/input.npy"))
        .arg("-o")
        .arg(&ref_dir)
        .output()
        .expect("run burnc");
    assert!(run.status.success(), "burnc run failed: {}", String::from_utf8_lossy(&run.stderr));
    match decode_value(&std::fs::read(ref_dir.join("output_0.pb")).expect("output_0.pb"), ValueKindHint::Tensor).expect("decode output") {
        RtValue::Tensor(t) => t.to_f64_vec(),
        other => panic!("interpreter output is not a tensor: {other:?}"),
    }
}

/// The floats printed as bits after `logits:`, against the interpreter's.
fn check_logits(output: &str, who: &str) {
    let got: Vec<f64> = parse_line(output, "logits:")
        .split_whitespace()
        .map(|h| f32::from_bits(u32::from_str_radix(h, 16).unwrap_or_else(|e| panic!("`{h}`: {e}"))) as f64)
        .collect();
    let want = reference();
    assert_eq!(got.len(), want.len(), "{who} printed {} logits, the interpreter has {}", got.len(), want.len());
    let mut worst = 0f64;
    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
        let err = (g - w).abs();
        assert!(err <= ATOL + RTOL * w.abs(), "logit {i}: {who} {g:e}, interpreter {w:e}");
        worst = worst.max(err);
    }
    println!("{who} vs interpreter: max abs diff {worst:e} over {} logits", got.len());
}

#[test]
fn c_program_runs_the_library() {
    let dir = work("clib-host");
    emit(&dir, None);
    let input = dir.join("input.f32");
    let x: Vec<u8> = npy_f32(&root().join("examples/firmware/input.npy")).iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(&input, x).expect("write input");
    let prog = dir.join("host_main");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let build = Command::new(&cc)
        .args(["-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(&dir)
        .arg(root().join("tests/c/host_main.c"))
        .arg("-L")
        .arg(&dir)
        .args(["-lcnn", "-lm", "-o"])
        .arg(&prog)
        .output()
        .expect("run cc");
    assert!(build.status.success(), "cc failed:\n{}", String::from_utf8_lossy(&build.stderr));
    let run = Command::new(&prog).arg(&input).output().expect("run the C program");
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    assert!(run.status.success(), "the C program failed:\n{stdout}{}", String::from_utf8_lossy(&run.stderr));
    println!("{stdout}");
    check_logits(&stdout, "C program");
    assert_eq!(parse_line(&stdout, "names:").trim(), "model.onnx x logits rank 4 shape 1 1 28 28");
    // NULL arena, NULL input, misaligned arena, misaligned output, NULL weights, misaligned
    // weights; the output untouched by all of them.
    assert_eq!(parse_line(&stdout, "errors:").trim(), "1 1 2 2 1 2 untouched=1");
}

#[test]
fn c_firmware_runs_the_library_under_qemu() {
    if !fw::prerequisites_or_skip("C firmware test") {
        return;
    }
    let gcc = "arm-none-eabi-gcc";
    if Command::new(gcc).arg("--version").output().map(|o| !o.status.success()).unwrap_or(true) {
        assert!(std::env::var("BURNC_REQUIRE_FIRMWARE").as_deref() != Ok("1"), "BURNC_REQUIRE_FIRMWARE=1 but {gcc} is missing (apt-get install gcc-arm-none-eabi)");
        eprintln!("SKIPPED C firmware test: {gcc} is missing (apt-get install gcc-arm-none-eabi)");
        return;
    }
    let dir = work("clib-m4");
    emit(&dir, Some(fw::TARGET));
    let bits: Vec<String> = npy_f32(&root().join("examples/firmware/input.npy")).iter().map(|v| format!("0x{:08x}u", v.to_bits())).collect();
    let input_h = format!("static const uint32_t INPUT_BITS[{}] = {{{}}};\n", bits.len(), bits.join(", "));
    std::fs::write(dir.join("input.h"), input_h).expect("write input.h");
    let src = root().join("tests/c/cortex_m4");
    let elf = dir.join("firmware.elf");
    let build = Command::new(gcc)
        .args(["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16", "-std=c11", "-O2", "-Wall", "-Werror", "-ffreestanding", "-nostdlib"])
        .arg("-T")
        .arg(src.join("link.ld"))
        .arg("-I")
        .arg(&dir)
        .arg(src.join("startup.c"))
        .arg(src.join("main.c"))
        .arg("-L")
        .arg(&dir)
        .args(["-lcnn", "-lgcc", "-Wl,--gc-sections", "-o"])
        .arg(&elf)
        .output()
        .expect("run arm-none-eabi-gcc");
    assert!(build.status.success(), "arm-none-eabi-gcc failed:\n{}", String::from_utf8_lossy(&build.stderr));
    let (ok, output) = fw::run_qemu(&elf, &dir.join("qemu.log"));
    println!("{output}");
    assert!(ok, "the C firmware did not exit with status 0:\n{output}");
    check_logits(&output, "C firmware");
    let size_of = fw::report_sections(&elf);
    let arena: usize = parse_line(&output, "arena_bytes:").split_whitespace().next().and_then(|v| v.parse().ok()).expect("arena_bytes");
    assert!(size_of(".bss") >= arena, "the arena should be a static in .bss");
}

#[test]
fn bad_c_lib_requests_are_clear_errors() {
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_burnc")).arg(model()).args(args).output().expect("run burnc");
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let dir = work("clib-bad");
    let d = dir.to_str().expect("UTF-8 path");
    for (args, says) in [
        (vec!["--emit", "c-lib"], "needs -o DIR"),
        (vec!["--emit", "c-lib", "-o", d, "--name", "a;b"], "bad library name"),
        (vec!["--emit", "c-lib", "-o", d, "--name", "x", "--target", "wgpu"], "CPU module"),
        (vec!["-o", d, "--name", "x"], "go with --emit c-lib"),
    ] {
        let (code, stderr) = run(&args);
        assert_eq!(code, Some(1), "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: ") && stderr.contains(says), "{args:?}: {stderr}");
    }
}
