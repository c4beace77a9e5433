//! The messages of `#[derive(Model)]` / `#[model]` mistakes, pinned with trybuild, and a model
//! that uses every supported layer and most tensor methods compiling and running.
#[path = "../../tests/common/lean.rs"]
mod lean;

#[test]
fn ui() {
    // Dropped after `t` (whose cases run when it drops): in a lean run (CI), trybuild's own
    // target dir (the whole compiler built twice more, ~2 GB) goes.
    let target = std::env::var_os("CARGO_TARGET_DIR").map(std::path::PathBuf::from).unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let _done = lean::LeanCleanup(vec![target.join("tests/trybuild")]);
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass_*.rs");
    t.compile_fail("tests/ui/fail_*.rs");
}
