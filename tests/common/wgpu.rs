//! Many wgpu modules built in batches and run on the first wgpu adapter, outputs compared
//! with the interpreter's (the CPU path). Used by the node suite and the model tests.
use super::{batch, close};
use burnc::harness::with_baking;
use burnc_compiler::codegen::wgsl::WgslGenerated;
use burnc_compiler::codegen::{emit::rust_ty, CodegenOptions, IoDesc};
use burnc_compiler::interp::{self, RtValue};
use burnc_compiler::ir::{DType, Graph};
use burnc_compiler::{Data, Tensor};
use std::path::Path;
use std::process::Command;

const BATCH: usize = 200;
/// Exit status of a runner that found no adapter.
const NO_ADAPTER: i32 = 3;

pub struct Compiled {
    pub case: String,
    pub gen: WgslGenerated,
    pub feeds: Vec<Tensor>,
    /// The interpreter's outputs, flattened to tensors.
    pub expected: Vec<Tensor>,
}

fn elem(d: &IoDesc) -> &'static str {
    if d.dtype == DType::Bool {
        "u8"
    } else {
        rust_ty(d.dtype).unwrap_or("f32")
    }
}

/// `run_<i>(dir)`: the inputs read, `forward` on the adapter, each output written.
pub fn module_runner(i: usize, gen: &WgslGenerated) -> String {
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

pub enum Outcome {
    Pass,
    Fail(String),
    NoAdapter(String),
}

/// How outputs are compared with the interpreter's.
#[derive(Clone, Copy, Debug)]
pub enum Tol {
    /// Each element within `rtol` relative (and 1e-5 absolute), as the ONNX tests compare.
    Elementwise(f64),
    /// ‖got − want‖ / ‖want‖ within the bound, for deep models whose sums run in another
    /// order on the device (float outputs; other dtypes must be equal).
    Norm(f64),
}

/// ‖got − want‖ / ‖want‖ (0 for equal tensors).
pub fn norm_error(got: &Tensor, want: &Tensor) -> f64 {
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    let diff: f64 = g.iter().zip(&w).map(|(a, b)| (a - b) * (a - b)).sum();
    let norm: f64 = w.iter().map(|b| b * b).sum();
    if diff == 0.0 {
        0.0
    } else {
        (diff / norm.max(f64::MIN_POSITIVE)).sqrt()
    }
}

pub fn run_one(bin: &Path, index: usize, c: &Compiled, work: &Path, tol: Tol) -> Outcome {
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
        let got = Tensor::new(d.shape.clone(), got);
        let checked = match tol {
            Tol::Norm(bound) if want.dtype().is_float() && got.shape == want.shape => {
                let e = norm_error(&got, want);
                if e.is_nan() || e > bound {
                    Err(format!("relative error {e:.3e} above {bound:.0e}"))
                } else {
                    Ok(())
                }
            }
            Tol::Norm(_) => close(&RtValue::Tensor(got), &RtValue::Tensor(want.clone()), 0.0, 0.0),
            // A 16-bit output may differ by its rounding: fused chains round once at their end
            // where the interpreter rounds after every op (two units of the last place).
            Tol::Elementwise(rtol) => {
                let rtol = match want.dtype() {
                    DType::F16 => rtol.max(2.0 * 9.77e-4),
                    DType::BF16 => rtol.max(2.0 * 7.82e-3),
                    _ => rtol,
                };
                close(&RtValue::Tensor(got), &RtValue::Tensor(want.clone()), rtol, 1e-5)
            }
        };
        if let Err(e) = checked {
            return Outcome::Fail(format!("output {i}: {e}"));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Outcome::Pass
}

/// The interpreter's outputs as the module's flat tensor outputs (sequences unrolled).
pub fn flat(values: Vec<RtValue>) -> Result<Vec<Tensor>, String> {
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


/// Compile `g` for the wgpu target at the shapes of `inputs` and run the interpreter on them.
/// An error starting "refused:" is the target declining the model.
pub fn compile(case: &str, g: &Graph, inputs: Vec<RtValue>) -> Result<Compiled, String> {
    let opts = CodegenOptions { weights_file: "model.bin".into(), source_name: case.to_string(), ..Default::default() };
    let (gen, feeds) = with_baking(g, &inputs, |p| Ok((burnc_compiler::codegen::wgsl::generate(&p.graph, &opts, "model.wgsl")?, p.feeds))).map_err(|e| format!("refused: {e}"))?;
    let expected = flat(interp::run(g, inputs).map_err(|e| format!("interpreter: {e}"))?)?;
    if expected.len() != gen.outputs.len() {
        return Err(format!("refused: {} module outputs for {} graph outputs", gen.outputs.len(), expected.len()));
    }
    Ok(Compiled { case: case.to_string(), gen, feeds, expected })
}

/// Build `compiled` in batches under `base` and run each: (case, passed, reason) per case, or
/// `None` when the machine has no adapter (an error under `BURNC_REQUIRE_WGPU`).
pub fn run_all(compiled: &[Compiled], base: &Path, tol: Tol) -> Option<Vec<(String, bool, String)>> {
    // One target dir for every wgpu batch, so wgpu itself is built once per run.
    let (target, work) = (super::root().join("target/wgpu-batches"), base.join("work"));
    let mut report = Vec::new();
    let mut first = 0;
    for chunk in compiled.chunks(BATCH) {
        let items: Vec<batch::Module> = chunk
            .iter()
            .enumerate()
            .map(|(j, c)| batch::Module { source: &c.gen.source, weights: &c.gen.weights, runner: module_runner(first + j, &c.gen), wgsl: Some(&c.gen.kernels) })
            .collect();
        let (bin, failed) = batch::build_batch_for(&base.join(format!("batch{first}")), &target, &items, first, "", "wgpu");
        for (i, why) in &failed {
            report.push((compiled[*i].case.clone(), false, why.clone()));
        }
        if let Some(bin) = &bin {
            for (j, c) in chunk.iter().enumerate() {
                let i = first + j;
                if failed.iter().any(|(f, _)| *f == i) {
                    continue;
                }
                match run_one(&bin, i, c, &work, tol) {
                    Outcome::Pass => report.push((c.case.clone(), true, String::new())),
                    Outcome::Fail(e) => report.push((c.case.clone(), false, e)),
                    Outcome::NoAdapter(e) => {
                        assert!(std::env::var_os("BURNC_REQUIRE_WGPU").is_none(), "BURNC_REQUIRE_WGPU is set but there is no wgpu adapter: {e}");
                        eprintln!("skipped: no wgpu adapter on this machine ({e})");
                        return None;
                    }
                }
            }
        }
        // A batch's sources and binary carry its models' weights (VGG-19's 548 MB twice).
        let _done = super::lean::LeanCleanup(batch::outputs(&target, first).into_iter().chain([base.join(format!("batch{first}"))]).collect());
        first += chunk.len();
    }
    Some(report)
}
