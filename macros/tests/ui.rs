//! The messages of `#[derive(Model)]` / `#[model]` mistakes, pinned with trybuild, and a model
//! that uses every supported layer and most tensor methods compiling and running.
#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass_*.rs");
    t.compile_fail("tests/ui/fail_*.rs");
}
