//! The messages of `#[derive(Model)]` / `#[model]` mistakes, pinned with trybuild, and a model
//! that uses every supported layer and most tensor methods compiling and running.
#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass_*.rs");
    t.compile_fail("tests/ui/fail_*.rs");
    // The cases run when `t` drops; then, in a lean run (CI), trybuild's own target dir (the
    // whole compiler built twice more, ~2 GB) goes.
    drop(t);
    if std::env::var_os("BURNC_TEST_LEAN").is_some() {
        let target = std::env::var_os("CARGO_TARGET_DIR").map(std::path::PathBuf::from).unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
        let _ = std::fs::remove_dir_all(target.join("tests/trybuild"));
    }
}
