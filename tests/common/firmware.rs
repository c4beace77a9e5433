//! Building a firmware example for a Cortex-M4 and booting it in QEMU: shared by
//! tests/firmware.rs and tests/firmware_train.rs (`#[path = "common/firmware.rs"] mod fw;`).
#![allow(dead_code)]
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub const TARGET: &str = "thumbv7em-none-eabihf";
pub const QEMU_TIMEOUT: Duration = Duration::from_secs(120);

/// Why the firmware cannot be built and run here, if it cannot.
pub fn missing_prerequisite() -> Option<String> {
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

/// True when the test should go on; prints why it skips otherwise. With
/// `BURNC_REQUIRE_FIRMWARE=1` (set by `.ci/run`) a missing prerequisite is a failure.
pub fn prerequisites_or_skip(test: &str) -> bool {
    let Some(why) = missing_prerequisite() else { return true };
    if std::env::var("BURNC_REQUIRE_FIRMWARE").as_deref() == Ok("1") {
        panic!("BURNC_REQUIRE_FIRMWARE=1 but {why}");
    }
    eprintln!("SKIPPED {test}: {why} (set BURNC_REQUIRE_FIRMWARE=1 to make this an error)");
    false
}

/// `cargo build --release` of the example crate in `dir` (its build.rs runs `$BURNC`) into
/// `target_dir`; returns the ELF of `bin` and how long the build took. Cargo must run from the
/// example's folder to pick up its .cargo/config.toml (target, -Tlink.x, runner); the host's
/// RUSTFLAGS would replace the config's rustflags, so they are not passed on.
pub fn build(dir: &Path, target_dir: &Path, bin: &str) -> (PathBuf, Duration) {
    let t = Instant::now();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let build = Command::new(cargo)
        .args(["build", "--release", "--target", TARGET])
        .current_dir(dir)
        .env("BURNC", env!("CARGO_BIN_EXE_burnc"))
        .env("CARGO_TARGET_DIR", target_dir)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET")
        .output()
        .expect("run cargo");
    assert!(build.status.success(), "firmware build failed:\n{}", String::from_utf8_lossy(&build.stderr));
    (target_dir.join(TARGET).join("release").join(bin), t.elapsed())
}

/// Boots `elf` on a Cortex-M4 (MPS2-AN386) in QEMU; semihosting prints and sets the exit
/// status. Returns (exited with 0, output), the output also in `log`.
pub fn run_qemu(elf: &Path, log: &Path) -> (bool, String) {
    let mut qemu = Command::new("qemu-system-arm");
    qemu.args(["-cpu", "cortex-m4", "-machine", "mps2-an386", "-nographic", "-semihosting-config", "enable=on,target=native", "-kernel"])
        .arg(elf);
    run_with_timeout(qemu, QEMU_TIMEOUT, log)
}

/// Runs `cmd` to completion or kills it after `timeout`; returns (success, stdout + stderr).
pub fn run_with_timeout(mut cmd: Command, timeout: Duration, log: &Path) -> (bool, String) {
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
pub fn elf32_sections(elf: &[u8]) -> Vec<(String, u32, u32, bool)> {
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

/// Section sizes of `elf`: flash holds what the ELF carries (vectors, code, constants incl.
/// the weights, .data's initial values); RAM holds .data, .bss (the arenas, the state) and
/// .uninit; the stack takes the rest of RAM. Prints them; returns a size-by-name lookup.
pub fn report_sections(elf: &Path) -> impl Fn(&str) -> usize {
    let sections = elf32_sections(&std::fs::read(elf).expect("read ELF"));
    let flash: usize = sections.iter().filter(|s| s.3).map(|s| s.2 as usize).sum();
    let ram: usize = sections.iter().filter(|s| s.1 >= 0x2000_0000).map(|s| s.2 as usize).sum();
    let size_of = move |n: &str| sections.iter().filter(|s| s.0 == n).map(|s| s.2 as usize).sum::<usize>();
    println!("firmware: {}", elf.display());
    println!(
        "firmware sections: .vector_table {} .text {} .rodata {} .data {} .bss {} bytes; flash {flash} bytes, static RAM {ram} bytes",
        size_of(".vector_table"),
        size_of(".text"),
        size_of(".rodata"),
        size_of(".data"),
        size_of(".bss")
    );
    size_of
}

/// The rest of the first output line that starts with `key`.
pub fn parse_line<'a>(output: &'a str, key: &str) -> &'a str {
    output
        .lines()
        .find_map(|l| l.trim().strip_prefix(key))
        .unwrap_or_else(|| panic!("no `{key}` line in the firmware's output:\n{output}"))
}
