//! Conformance through generated code: every node case that passes through the interpreter
//! (tests/conformance/passlist.txt) is compiled to Rust with its inputs pinned to the test
//! data's shapes (integer inputs that decide shapes are baked in as constants when needed),
//! the modules are built in batches into one binary per batch, and each case's outputs are
//! compared with the expected ones exactly as the interpreter's are.
//!
//! Writes target/conformance/codegen_report.tsv and fails when a case listed in
//! tests/conformance/codegen_passlist.txt stops passing (`BURNC_UPDATE_PASSLIST=1` rewrites it).
mod common;
use burnc::harness::Prepared;
use burnc_compiler::interp::RtValue;
use burnc_compiler::{Data, Tensor};
use common::{batch, close, close_in_range, data_dir, machine_dependent, root, InRangeOnly};
use std::path::Path;
use std::process::Command;

const BATCH: usize = 200;

struct Compiled {
    case: String,
    p: Prepared,
    expected: Vec<RtValue>,
    /// The machine_dependent.tsv rule of this case and the input it reads.
    undefined: Option<(InRangeOnly, RtValue)>,
}

/// Ok(elements not compared because the spec leaves them undefined).
fn run_one(bin: &Path, index: usize, c: &Compiled, work: &Path) -> Result<usize, String> {
    let dir = work.join(format!("case{index}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    for (k, t) in c.p.feeds.iter().enumerate() {
        std::fs::write(dir.join(format!("in_{k}.bin")), t.data.to_le_bytes()).map_err(|e| e.to_string())?;
    }
    let out = Command::new(bin).arg(index.to_string()).arg(&dir).output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!("CRASH: {}", String::from_utf8_lossy(&out.stderr).lines().find(|l| l.contains("panicked")).unwrap_or("")));
    }
    let mut tensors = Vec::new();
    for (i, d) in c.p.gen.outputs.iter().enumerate() {
        let bytes = std::fs::read(dir.join(format!("out_{i}.bin"))).map_err(|e| e.to_string())?;
        let data = Data::from_le_bytes(d.dtype, &bytes).ok_or("bad output size")?;
        tensors.push(Tensor::new(d.shape.clone(), data));
    }
    let got = burnc::harness::regroup(tensors, &c.p.outputs).map_err(|e| e.to_string())?;
    if got.len() != c.expected.len() {
        return Err(format!("{} outputs, expected {}", got.len(), c.expected.len()));
    }
    let mut skipped = 0;
    for (i, (g, want)) in got.iter().zip(&c.expected).enumerate() {
        match &c.undefined {
            Some((u, input)) if u.output == i => skipped += close_in_range(g, want, input).map_err(|e| format!("output {i}: {e}"))?,
            _ => close(g, want, 1e-3, 1e-5).map_err(|e| format!("output {i}: {e}"))?,
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(skipped)
}

#[test]
fn node_suite_through_generated_code() {
    let data = data_dir();
    let cases = batch::passlisted_node_cases();
    let rules = machine_dependent();
    let mut report: Vec<(String, bool, String)> = Vec::new();
    let mut compiled: Vec<Compiled> = Vec::new();
    for case in &cases {
        let dir = data.join("node").join(case);
        let result = (|| -> Result<Compiled, String> {
            let common::NodeCase { model, inputs, expected } = common::node_case(&dir)?;
            let g = &model.graph;
            let undefined = match rules.get(case) {
                Some(u) => Some((u.clone(), inputs.get(u.input).cloned().ok_or_else(|| format!("in-range rule: no input {}", u.input))?)),
                None => None,
            };
            let p = burnc::harness::generate_for(g, &inputs, case, true).map_err(|e| format!("codegen: {e}"))?;
            Ok(Compiled { case: case.clone(), p, expected, undefined })
        })();
        match result {
            Ok(c) => compiled.push(c),
            Err(e) => report.push((case.clone(), false, e)),
        }
    }
    let base = root().join("target/conformance-codegen");
    let target = base.join("target");
    let work = base.join("work");
    let chunks: Vec<&[Compiled]> = compiled.chunks(BATCH).collect();
    let mut first = 0;
    let (mut skipped_cases, mut skipped_elems) = (0usize, 0usize);
    for chunk in chunks {
        let items: Vec<batch::Module> = chunk
            .iter()
            .enumerate()
            .map(|(j, c)| batch::Module { source: &c.p.gen.source, weights: &c.p.gen.weights, runner: batch::module_runner(first + j, &c.p.gen, "dir: &Path, _: &[String]"), wgsl: None })
            .collect();
        let (bin, failed) = batch::build_batch(&base.join(format!("batch{first}")), &target, &items, first);
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
                    Ok(0) => report.push((c.case.clone(), true, String::new())),
                    Ok(n) => {
                        let why = c.undefined.as_ref().map(|u| u.0.reason.as_str()).unwrap_or_default();
                        (skipped_cases, skipped_elems) = (skipped_cases + 1, skipped_elems + n);
                        report.push((c.case.clone(), true, format!("{n} elements not compared: {why}")));
                    }
                    Err(e) => report.push((c.case.clone(), false, e)),
                }
            }
        }
        first += chunk.len();
    }
    println!("machine-dependent references (tests/conformance/machine_dependent.tsv): {skipped_cases} cases had undefined elements, {skipped_elems} elements not compared");
    let total = cases.len();
    batch::finish(report, &cases, "codegen_report.tsv", "codegen_passlist.txt", "codegen", |n| {
        format!("conformance codegen: {n}/{total} interpreter-passing node cases pass through generated code")
    });
}

