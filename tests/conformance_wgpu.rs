//! Conformance through the wgpu target (`burnc run MODEL --codegen --target wgpu`): every node
//! case on the interpreter's pass-list that the target compiles (static shapes, the ops it has
//! kernels for) is built in batches and run on the first wgpu adapter (CI: Mesa's lavapipe,
//! a software Vulkan); outputs are compared with the interpreter's (the CPU path) at rtol 1e-4
//! (16-bit float outputs at two units of their last place: a fused chain rounds once).
//!
//! Writes target/conformance/wgpu_report.tsv (every case: pass, refused by the target and why,
//! or failed) and fails when a case listed in tests/conformance/wgpu_passlist.txt stops passing
//! (`BURNC_UPDATE_PASSLIST=1` rewrites it). Without an adapter the test says so and passes,
//! unless `BURNC_REQUIRE_WGPU` is set (CI sets it).
mod common;
use common::{batch, data_dir, root, wgpu};

#[test]
fn node_suite_through_wgpu() {
    let data = data_dir();
    let cases = batch::passlisted_node_cases();
    let mut report: Vec<(String, bool, String)> = Vec::new();
    let mut compiled = Vec::new();
    for case in &cases {
        let result = common::node_case(&data.join("node").join(case)).and_then(|c| wgpu::compile(case, &c.model.graph, c.inputs));
        match result {
            Ok(c) => compiled.push(c),
            Err(e) => report.push((case.clone(), false, e)),
        }
    }
    let supported = compiled.len();
    let Some(ran) = wgpu::run_all(&compiled, &root().join("target/conformance-wgpu"), wgpu::Tol::Elementwise(1e-4)) else { return };
    report.extend(ran);
    let total = cases.len();
    batch::finish(report, &cases, "wgpu_report.tsv", "wgpu_passlist.txt", "wgpu", |n| {
        format!("conformance wgpu: {n}/{total} interpreter-passing node cases pass through the wgpu target ({supported} compiled for it)")
    });
}
