//! Conformance through the wgpu target (`burnc run MODEL --codegen --target wgpu`): every node
//! case on the interpreter's pass-list that the target compiles (static shapes, the ops it has
//! kernels for) is built in batches and run on the first wgpu adapter (CI: Mesa's lavapipe,
//! a software Vulkan); outputs are compared with the interpreter's (the CPU path) at rtol 1e-4.
//!
//! Writes target/conformance/wgpu_report.tsv (every case: pass, refused by the target and why,
//! or failed) and fails when a case listed in tests/conformance/wgpu_passlist.txt stops passing
//! (`BURNC_UPDATE_PASSLIST=1` rewrites it). Without an adapter the test says so and passes,
//! unless `BURNC_REQUIRE_WGPU` is set (CI sets it).
mod common;
use burnc::harness::with_baking;
use burnc_compiler::codegen::wgsl::WgslGenerated;
use burnc_compiler::codegen::{emit::rust_ty, CodegenOptions, IoDesc};
use burnc_compiler::interp::{self, RtValue};
use burnc_compiler::ir::DType;
use burnc_compiler::{Data, Tensor};
use common::{batch, close, data_dir, root};
use std::path::Path;
use std::process::Command;

const BATCH: usize = 200;
/// Exit status of a runner that found no adapter.
const NO_ADAPTER: i32 = 3;

struct Compiled {
    case: String,
    gen: WgslGenerated,
    feeds: Vec<Tensor>,
    /// The interpreter's outputs, flattened to tensors.
    expected: Vec<Tensor>,
}

fn elem(d: &IoDesc) -> &'static str {
    if d.dtype == DType::Bool {
        "u8"
    } else {
        rust_ty(d.dtype).unwrap_or("f32")
    }
}

/// `run_<i>(dir)`: the inputs read, `forward` on the adapter, each output written.
fn module_runner(i: usize, gen: &WgslGenerated) -> String {
    let mut s = format!("fn run_{i}(dir: &Path, _: &[String]) {{\n");
    s += &format!("    let mut m = match m{i}::Model::new() {{\n        Ok(m) => m,\n        Err(e @ rt::wgpu::WgpuError::NoAdapter {{ .. }}) => {{ eprintln!(\"{{e}}\"); std::process::exit({NO_ADAPTER}) }}\n        Err(e) => {{ eprintln!(\"error: {{e}}\"); std::process::exit(2) }}\n    }};\n");
    let mut args = Vec::new();
    for (k, d) in gen.inputs.iter().enumerate() {
        let n: usize = d.shape.iter().product();
        if d.dtype == DType::Bool {
            s += &format!("    let in_{k}: Box<[bool; {n}]> = Box::new(read::<u8, {n}>(&dir.join(\"in_{k}.bin\")).map(|b| b != 0));\n");
        } else {
            s += &format!("    let in_{k}: Box<[{}; {n}]> = read(&dir.join(\"in_{k}.bin\"));\n", elem(d));
        }
        args.push(format!("&in_{k}"));
    }
    s += &format!("    let out = match m.forward({}) {{\n        Ok(o) => o,\n        Err(e) => {{ eprintln!(\"error: {{e}}\"); std::process::exit(2) }}\n    }};\n", args.join(", "));
    for (k, d) in gen.outputs.iter().enumerate() {
        if d.dtype == DType::Bool {
            s += &format!("    write(&dir.join(\"out_{k}.bin\"), &out.{}.iter().map(|&b| b as u8).collect::<Vec<u8>>());\n", d.ident);
        } else {
            s += &format!("    write(&dir.join(\"out_{k}.bin\"), &out.{}[..]);\n", d.ident);
        }
    }
    s + "}\n"
}

enum Outcome {
    Pass,
    Fail(String),
    NoAdapter(String),
}

fn run_one(bin: &Path, index: usize, c: &Compiled, work: &Path) -> Outcome {
    let dir = work.join(format!("case{index}"));
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(e) = std::fs::create_dir_all(&dir) {
        return Outcome::Fail(e.to_string());
    }
    for (k, t) in c.feeds.iter().enumerate() {
        if let Err(e) = std::fs::write(dir.join(format!("in_{k}.bin")), t.data.to_le_bytes()) {
            return Outcome::Fail(e.to_string());
        }
    }
    let out = match Command::new(bin).arg(index.to_string()).arg(&dir).output() {
        Ok(o) => o,
        Err(e) => return Outcome::Fail(e.to_string()),
    };
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    match out.status.code() {
        Some(0) => {}
        Some(NO_ADAPTER) => return Outcome::NoAdapter(err.trim().to_string()),
        Some(2) => return Outcome::Fail(format!("device error: {}", err.lines().last().unwrap_or(""))),
        _ => return Outcome::Fail(format!("CRASH: {}", err.lines().find(|l| l.contains("panicked")).unwrap_or(err.lines().last().unwrap_or("")))),
    }
    for (i, (d, want)) in c.gen.outputs.iter().zip(&c.expected).enumerate() {
        let got = std::fs::read(dir.join(format!("out_{i}.bin"))).ok().and_then(|b| Data::from_le_bytes(d.dtype, &b));
        let Some(got) = got else { return Outcome::Fail(format!("output {i} missing or of a bad size")) };
        let got = RtValue::Tensor(Tensor::new(d.shape.clone(), got));
        if let Err(e) = close(&got, &RtValue::Tensor(want.clone()), 1e-4, 1e-5) {
            return Outcome::Fail(format!("output {i}: {e}"));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Outcome::Pass
}

/// The interpreter's outputs as the module's flat tensor outputs (sequences unrolled).
fn flat(values: Vec<RtValue>) -> Result<Vec<Tensor>, String> {
    let mut out = Vec::new();
    for v in values {
        match v {
            RtValue::Tensor(t) => out.push(t),
            RtValue::Sequence(items, _) => out.extend(items),
            RtValue::Optional(_) => return Err("refused: optional outputs".into()),
        }
    }
    Ok(out)
}

#[test]
fn node_suite_through_wgpu() {
    let data = data_dir();
    let cases = batch::passlisted_node_cases();
    let mut report: Vec<(String, bool, String)> = Vec::new();
    let mut compiled: Vec<Compiled> = Vec::new();
    for case in &cases {
        let result = (|| -> Result<Compiled, String> {
            let common::NodeCase { model, inputs, .. } = common::node_case(&data.join("node").join(case))?;
            let opts = CodegenOptions { weights_file: "model.bin".into(), source_name: case.clone(), ..Default::default() };
            let (gen, feeds) = with_baking(&model.graph, &inputs, |p| Ok((burnc_compiler::codegen::wgsl::generate(&p.graph, &opts, "model.wgsl")?, p.feeds))).map_err(|e| format!("refused: {e}"))?;
            let expected = flat(interp::run(&model.graph, inputs).map_err(|e| format!("interpreter: {e}"))?)?;
            if expected.len() != gen.outputs.len() {
                return Err(format!("refused: {} module outputs for {} graph outputs", gen.outputs.len(), expected.len()));
            }
            Ok(Compiled { case: case.clone(), gen, feeds, expected })
        })();
        match result {
            Ok(c) => compiled.push(c),
            Err(e) => report.push((case.clone(), false, e)),
        }
    }
    let supported = compiled.len();
    let base = root().join("target/conformance-wgpu");
    let (target, work) = (base.join("target"), base.join("work"));
    let mut first = 0;
    let mut no_adapter = None;
    for chunk in compiled.chunks(BATCH) {
        let items: Vec<batch::Module> = chunk
            .iter()
            .enumerate()
            .map(|(j, c)| batch::Module { source: &c.gen.source, weights: &c.gen.weights, runner: module_runner(first + j, &c.gen), wgsl: Some(&c.gen.wgsl) })
            .collect();
        let (bin, failed) = batch::build_batch_for(&base.join(format!("batch{first}")), &target, &items, first, "", "wgpu");
        for (i, why) in &failed {
            report.push((compiled[*i].case.clone(), false, why.clone()));
        }
        if let Some(bin) = bin {
            for (j, c) in chunk.iter().enumerate() {
                let i = first + j;
                if failed.iter().any(|(f, _)| *f == i) {
                    continue;
                }
                match run_one(&bin, i, c, &work) {
                    Outcome::Pass => report.push((c.case.clone(), true, String::new())),
                    Outcome::Fail(e) => report.push((c.case.clone(), false, e)),
                    Outcome::NoAdapter(e) => {
                        no_adapter = Some(e);
                        break;
                    }
                }
            }
        }
        if no_adapter.is_some() {
            break;
        }
        first += chunk.len();
    }
    if let Some(e) = no_adapter {
        assert!(std::env::var_os("BURNC_REQUIRE_WGPU").is_none(), "BURNC_REQUIRE_WGPU is set but there is no wgpu adapter: {e}");
        eprintln!("skipped: no wgpu adapter on this machine ({e})");
        return;
    }
    let total = cases.len();
    batch::finish(report, &cases, "wgpu_report.tsv", "wgpu_passlist.txt", "wgpu", |n| {
        format!("conformance wgpu: {n}/{total} interpreter-passing node cases pass through the wgpu target ({supported} compiled for it)")
    });
}
