//! examples/finetune-digits end to end: fetches the digits with its setup script, builds the
//! example (its build.rs compiles the CNN with `train_step` twice: all parameters, and only the
//! last layer), trains from scratch and fine-tunes, and checks the accuracy it reaches on the
//! held-out images (issue bar: >= 0.95 from scratch) and that the SVG curve was written.
#[path = "common/lean.rs"]
mod lean;
use std::path::{Path, PathBuf};
use std::process::Command;

fn target_dir(root: &Path) -> PathBuf {
    let base = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"));
    base.join("finetune-digits-example")
}

fn value(stdout: &str, key: &str) -> f64 {
    let line = stdout.lines().find_map(|l| l.strip_prefix(key)).unwrap_or_else(|| panic!("no `{key}` line in:\n{stdout}"));
    line.trim().parse().unwrap_or_else(|_| panic!("bad number in `{key}{line}`"))
}

#[test]
fn finetune_digits_trains_to_the_bar() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("examples/finetune-digits");
    let _done = lean::LeanCleanup(vec![target_dir(root)]);
    let setup = Command::new("bash").arg(dir.join("setup.sh")).output().expect("bash runs");
    assert!(setup.status.success(), "setup.sh failed:\n{}", String::from_utf8_lossy(&setup.stderr));

    let svg = Path::new(env!("CARGO_TARGET_TMPDIR")).join("finetune-digits-curves.svg");
    let _ = std::fs::remove_file(&svg);
    let weights = Path::new(env!("CARGO_TARGET_TMPDIR")).join("finetune-digits.safetensors");
    let _ = std::fs::remove_file(&weights);
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["run", "--release", "--quiet", "--manifest-path"])
        .arg(dir.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(target_dir(root))
        .args(["--", "--svg"])
        .arg(&svg)
        .arg("--save-weights")
        .arg(&weights)
        .output()
        .expect("cargo runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the example failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    println!("{stdout}");
    let last = stdout.lines().last().unwrap_or_default();
    assert!(last.starts_with("test_accuracy="), "last line must be test_accuracy=…, got `{last}`");
    let acc = value(&stdout, "test_accuracy=");
    assert!(acc >= 0.95, "from-scratch test accuracy {acc} < 0.95");
    let remapped = value(&stdout, "remapped_test_accuracy=");
    assert!(remapped >= 0.9, "fine-tuned (remapped labels) test accuracy {remapped} < 0.9");
    let text = std::fs::read_to_string(&svg).expect("the SVG curve was written");
    assert!(text.starts_with("<svg") && text.matches("<polyline").count() == 3, "not the curve SVG:\n{text}");
    // --save-weights: a safetensors file with every parameter, as examples/web-digits compiles.
    let file = std::fs::read(&weights).expect("the weights were written");
    let n = u64::from_le_bytes(file[..8].try_into().expect("8-byte header length")) as usize;
    let header = std::str::from_utf8(&file[8..8 + n]).expect("UTF-8 header");
    for p in ["conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"] {
        assert!(header.contains(&format!("\"{p}\"")), "`{p}` missing from {header}");
    }
}
