//! examples/web-digits end to end (issue 18): `browser-test.sh` builds the page (wasm32 with and
//! without SIMD128 and with WebGPU, through wasm-bindgen), draws digits in headless Chromium,
//! teaches them, and compares the page's probabilities and teach loss with the native build of
//! the same crate: 1e-5 on the CPU paths, 1e-4 for probabilities from WebGPU.
//! Skips when Chromium cannot be had (the script exits 2), unless BURNC_REQUIRE_BROWSER is set
//! (CI sets it).
#[path = "common/lean.rs"]
mod lean;
use std::path::{Path, PathBuf};
use std::process::Command;

fn field<'a>(line: &'a str, key: &str) -> &'a str {
    line.split_whitespace().find_map(|kv| kv.strip_prefix(key)).unwrap_or_else(|| panic!("no `{key}` in `{line}`"))
}

#[test]
fn page_matches_the_native_build() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"));
    let _done = lean::LeanCleanup(vec![target.join("web-digits")]);
    let out = Command::new("bash").arg(root.join("examples/web-digits/browser-test.sh")).output().expect("bash runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(2) && std::env::var_os("BURNC_REQUIRE_BROWSER").is_none() {
        eprintln!("skipped: {stderr}");
        return;
    }
    println!("{stdout}");
    assert!(out.status.success(), "browser-test.sh failed ({}):\n{stdout}\n{stderr}", out.status);
    let last = stdout.lines().last().unwrap_or_default();
    let (browser, native) = (field(last, "browser_prediction="), field(last, "native_prediction="));
    assert!(!browser.is_empty() && browser.chars().all(|c| c.is_ascii_digit()), "bad predictions in `{last}`");
    assert_eq!(browser, native, "the page and the native build predict differently: `{last}`");
    let number = |line: &str, key: &str| -> f64 { field(line, key).parse().unwrap_or_else(|_| panic!("bad number for {key} in `{line}`")) };
    // The worst of all runs.
    assert!(number(last, "max_prob_diff=") <= 1e-4, "{last}");
    assert!(number(last, "teach_loss_diff=") <= 1e-5, "{last}");
    // Each path against its own tolerance, and the page said which it ran on.
    let run = |label: &str| stdout.lines().find(|l| l.starts_with(&format!("{label}: backend="))).map(str::to_owned);
    for (label, backend, tol) in [("auto", "'CPU (wasm SIMD128)'", 1e-5), ("scalar", "'CPU (wasm scalar)'", 1e-5), ("webgpu", "'WebGPU'", 1e-4)] {
        let Some(line) = run(label) else {
            // Chromium offers WebGPU headless through SwiftShader; CI requires it.
            assert!(label == "webgpu" && std::env::var_os("BURNC_REQUIRE_BROWSER").is_none(), "no `{label}` run in:\n{stdout}");
            continue;
        };
        assert!(line.starts_with(&format!("{label}: backend={backend} ")), "{line}");
        assert!(number(&line, "max_prob_diff=") <= tol, "{line}");
        assert_eq!(field(&line, "browser_prediction="), field(&line, "native_prediction="), "{line}");
    }
}
