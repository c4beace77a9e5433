//! Firmware under QEMU: builds `examples/firmware` (the small CNN of `model.onnx`, compiled by
//! this burnc, for thumbv7em-none-eabihf: no_std, no alloc, weights in flash, one static arena),
//! boots it on a Cortex-M4 in `qemu-system-arm` and compares the logits it prints with the
//! reference interpreter's on the same input (`input.npy`), to rtol 1e-4 / atol 1e-5.
//! Prints the ELF's section sizes (flash and RAM) and `ARENA_BYTES`.
//!
//! Skips, with a message, when `qemu-system-arm` or the thumbv7em-none-eabihf target is missing,
//! unless `BURNC_REQUIRE_FIRMWARE=1` (set by `.ci/run`), which turns the skip into a failure.
//! Setup: `apt-get install qemu-system-arm` and `rustup target add thumbv7em-none-eabihf`.
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use burnc_compiler::interp::RtValue;
use burnc_frontends::onnx::values::{decode_value, ValueKindHint};

const TARGET: &str = "thumbv7em-none-eabihf";
const RTOL: f64 = 1e-4;
const ATOL: f64 = 1e-5;
const QEMU_TIMEOUT: Duration = Duration::from_secs(120);

fn example_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/firmware")
}

/// Why the firmware cannot be built and run here, if it cannot.
fn missing_prerequisite() -> Option<String> {
    let qemu = Command::new("qemu-system-arm").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status();
    if !qemu.map(|s| s.success()).unwrap_or(false) {
        return Some("qemu-system-arm is not installed (apt-get install qemu-system-arm)".into());
    }
    let sysroot = Command::new("rustc").args(["--print", "sysroot"]).output().ok().filter(|o| o.status.success());
    let has_target = sysroot
        .map(|o| Path::new(String::from_utf8_lossy(&o.stdout).trim()).join("lib/rustlib").join(TARGET).join("lib").is_dir())
        .unwrap_or(false);
    if !has_target {
        return Some(format!("the {TARGET} target is not installed (rustup target add {TARGET})"));
    }
    None
}

/// Runs `cmd` to completion or kills it after `timeout`; returns (success, stdout + stderr).
fn run_with_timeout(mut cmd: Command, timeout: Duration, log: &Path) -> (bool, String) {
    let out = std::fs::File::create(log).expect("create log");
    let err = out.try_clone().expect("clone log");
    let mut child = cmd.stdin(Stdio::null()).stdout(out).stderr(err).spawn().expect("spawn qemu-system-arm");
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break Some(s);
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = std::fs::read_to_string(log).unwrap_or_default();
    match status {
        Some(s) => (s.success(), format!("{text}[{s}]")),
        None => (false, format!("{text}[killed after {timeout:?}]")),
    }
}

/// Allocated sections of a 32-bit little-endian ELF: (name, address, size, occupies file space).
fn elf32_sections(elf: &[u8]) -> Vec<(String, u32, u32, bool)> {
    assert!(elf.len() > 52 && &elf[..4] == b"\x7fELF" && elf[4] == 1 && elf[5] == 1, "not a 32-bit little-endian ELF");
    let u16_at = |o: usize| u16::from_le_bytes([elf[o], elf[o + 1]]) as usize;
    let u32_at = |o: usize| u32::from_le_bytes([elf[o], elf[o + 1], elf[o + 2], elf[o + 3]]);
    let (shoff, shentsize, shnum, shstrndx) = (u32_at(0x20) as usize, u16_at(0x2e), u16_at(0x30), u16_at(0x32));
    let sh = |i: usize| shoff + i * shentsize;
    let strtab = u32_at(sh(shstrndx) + 16) as usize;
    let name = |off: u32| {
        let s = &elf[strtab + off as usize..];
        String::from_utf8_lossy(&s[..s.iter().position(|&b| b == 0).unwrap_or(0)]).into_owned()
    };
    const SHF_ALLOC: u32 = 2;
    const SHT_NOBITS: u32 = 8;
    (0..shnum)
        .map(sh)
        .filter(|&h| u32_at(h + 8) & SHF_ALLOC != 0)
        .map(|h| (name(u32_at(h)), u32_at(h + 12), u32_at(h + 20), u32_at(h + 4) != SHT_NOBITS))
        .collect()
}

fn parse_line<'a>(output: &'a str, key: &str) -> &'a str {
    output
        .lines()
        .find_map(|l| l.trim().strip_prefix(key))
        .unwrap_or_else(|| panic!("no `{key}` line in the firmware's output:\n{output}"))
}

#[test]
fn firmware_matches_interpreter_under_qemu() {
    if let Some(why) = missing_prerequisite() {
        if std::env::var("BURNC_REQUIRE_FIRMWARE").as_deref() == Ok("1") {
            panic!("BURNC_REQUIRE_FIRMWARE=1 but {why}");
        }
        eprintln!("SKIPPED firmware test: {why} (set BURNC_REQUIRE_FIRMWARE=1 to make this an error)");
        return;
    }
    let dir = example_dir();
    let burnc = env!("CARGO_BIN_EXE_burnc");
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("firmware");
    std::fs::create_dir_all(&work).unwrap();

    // Build: examples/firmware/build.rs runs `$BURNC model.onnx -o $OUT_DIR/model.rs`. Cargo must
    // run from the example's folder to pick up its .cargo/config.toml (target, -Tlink.x, runner);
    // the host's RUSTFLAGS would replace the config's rustflags, so they are not passed on.
    let t = Instant::now();
    let target_dir = work.join("target");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let build = Command::new(cargo)
        .args(["build", "--release", "--target", TARGET])
        .current_dir(&dir)
        .env("BURNC", burnc)
        .env("CARGO_TARGET_DIR", &target_dir)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET")
        .output()
        .expect("run cargo");
    assert!(build.status.success(), "firmware build failed:\n{}", String::from_utf8_lossy(&build.stderr));
    let build_time = t.elapsed();
    let elf = target_dir.join(TARGET).join("release/burnc-firmware-example");

    // Run under QEMU; semihosting prints and sets the exit status.
    let t = Instant::now();
    let mut qemu = Command::new("qemu-system-arm");
    qemu.args(["-cpu", "cortex-m4", "-machine", "mps2-an386", "-nographic", "-semihosting-config", "enable=on,target=native", "-kernel"])
        .arg(&elf);
    let (ok, output) = run_with_timeout(qemu, QEMU_TIMEOUT, &work.join("qemu.log"));
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

    // Sizes: flash holds what the ELF carries (vectors, code, constants incl. the weights,
    // .data's initial values); RAM holds .data, .bss (incl. the arena) and .uninit; the stack
    // takes the rest of RAM.
    let sections = elf32_sections(&std::fs::read(&elf).expect("read ELF"));
    let size_of = |n: &str| sections.iter().filter(|s| s.0 == n).map(|s| s.2 as usize).sum::<usize>();
    let flash: usize = sections.iter().filter(|s| s.3).map(|s| s.2 as usize).sum();
    let ram: usize = sections.iter().filter(|s| s.1 >= 0x2000_0000).map(|s| s.2 as usize).sum();
    println!("firmware: {}", elf.display());
    println!(
        "firmware sections: .vector_table {} .text {} .rodata {} .data {} .bss {} bytes; flash {flash} bytes, static RAM {ram} bytes",
        size_of(".vector_table"),
        size_of(".text"),
        size_of(".rodata"),
        size_of(".data"),
        size_of(".bss")
    );
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
