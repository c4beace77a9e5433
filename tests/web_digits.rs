//! examples/web-digits end to end (issue 18): `browser-test.sh` builds the page (wasm32 with and
//! without SIMD128, through wasm-bindgen), draws digits in headless Chromium, teaches them, and
//! compares the page's probabilities and teach loss with the native build of the same crate.
//! Skips when Chromium cannot be had (the script exits 2), unless BURNC_REQUIRE_BROWSER is set
//! (CI sets it).
use std::path::Path;
use std::process::Command;

fn field<'a>(line: &'a str, key: &str) -> &'a str {
    line.split_whitespace().find_map(|kv| kv.strip_prefix(key)).unwrap_or_else(|| panic!("no `{key}` in `{line}`"))
}

#[test]
fn page_matches_the_native_build() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
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
    for key in ["max_prob_diff=", "teach_loss_diff="] {
        let v: f64 = field(last, key).parse().unwrap_or_else(|_| panic!("bad number for {key} in `{last}`"));
        assert!(v <= 1e-5, "{key}{v} over 1e-5 (f32 on the CPU both sides)");
    }
    // Both builds ran, and the page showed which.
    assert!(stdout.contains("backend='CPU (wasm SIMD128)'") && stdout.contains("backend='CPU (wasm scalar)'"), "{stdout}");
}
