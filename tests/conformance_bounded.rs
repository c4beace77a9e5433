//! Conformance through bounded-dims code (`burnc run MODEL --codegen --bound 2`): every node
//! case on the interpreter's pass-list is compiled once with each dim of each input a named
//! dim bounded by twice its size, built in batches, and run at the test data's sizes; outputs
//! (with the shapes `forward` reports) are compared as the interpreter's are.
//!
//! Writes target/conformance/bounded_report.tsv and fails when a case listed in
//! tests/conformance/bounded_passlist.txt stops passing (`BURNC_UPDATE_PASSLIST=1` rewrites
//! it). Which cases fail and why is in that report; docs/BOUNDED_DIMS.md says what is missing.
mod common;
use burnc::harness::bounded::{generate_bounded_for, BoundedPrepared};
use burnc_compiler::codegen::{bounded::dim_field, CodegenOptions};
use burnc_compiler::interp::RtValue;
use burnc_compiler::{Data, Tensor};
use common::{batch, close, close_in_range, data_dir, machine_dependent, root, InRangeOnly};
use std::path::Path;
use std::process::Command;

const BATCH: usize = 200;
const FACTOR: usize = 2;

struct Compiled {
    case: String,
    p: BoundedPrepared,
    expected: Vec<RtValue>,
    undefined: Option<(InRangeOnly, RtValue)>,
}

/// `run_<i>(dir, dims)`: the inputs read at their run-time lengths, `forward` at `dims`, each
/// output written with its shape; a `DimError` exits with status 2.
fn module_runner(i: usize, p: &BoundedPrepared) -> String {
    let mut s = format!("fn run_{i}(dir: &Path, dims: &[String]) {{\n");
    s += "    let d = |k: usize| -> usize { dims[k].parse().expect(\"a dim\") };\n";
    let mut args = vec!["&mut arena".to_string()];
    if p.gen.heap {
        s += "    let mut heap = rt::strings::Heap::new();\n";
        args.push("&mut heap".into());
    }
    for (k, d) in p.gen.inputs.iter().enumerate() {
        s += &burnc::harness::read_input_vec(k, d);
        args.push(format!("&in_{k}"));
    }
    args.push("dims".into());
    let fields: Vec<String> = p.info.dims.iter().enumerate().map(|(k, (n, _))| format!("{}: d({k})", dim_field(n))).collect();
    s += &format!("    let dims = m{i}::Dims {{ {} }};\n", fields.join(", "));
    s += &format!("    let mut arena: Box<m{i}::Arena> = unsafe {{ Box::new_zeroed().assume_init() }};\n");
    s += &format!("    let out = match m{i}::Model::new().forward({}) {{\n", args.join(", "));
    s += "        Ok(o) => o,\n        Err(e) => { eprintln!(\"error: {e}\"); std::process::exit(2) }\n    };\n";
    for (k, d) in p.gen.outputs.iter().enumerate() {
        s += &burnc::harness::write_slice(k, d, &format!("&out.{}[..]", d.ident));
        s += &format!("    write_shape(&dir.join(\"out_{k}.shape\"), &out.{}_shape);\n", d.ident);
    }
    s + "}\n"
}

const HELPERS: &str = r#"fn read_vec<T: Copy + Default>(p: &Path) -> Vec<T> {
    let bytes = std::fs::read(p).expect("read input");
    let n = bytes.len() / std::mem::size_of::<T>();
    let mut v = vec![T::default(); n];
    // SAFETY: plain numbers; at most the file's bytes are copied.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), v.as_mut_ptr() as *mut u8, n * std::mem::size_of::<T>()) };
    v
}
fn write_shape(p: &Path, s: &[usize]) {
    std::fs::write(p, s.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(" ")).expect("write shape");
}
"#;

fn run_one(bin: &Path, index: usize, c: &Compiled, work: &Path) -> Result<usize, String> {
    let dir = work.join(format!("case{index}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    for (k, t) in c.p.feeds.iter().enumerate() {
        std::fs::write(dir.join(format!("in_{k}.bin")), t.data.to_le_bytes()).map_err(|e| e.to_string())?;
    }
    let out = Command::new(bin).arg(index.to_string()).arg(&dir).args(c.p.dims.iter().map(|d| d.to_string())).output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(match out.status.code() {
            Some(2) => format!("DimError: {}", err.lines().last().unwrap_or("")),
            _ => format!("CRASH: {}", err.lines().find(|l| l.contains("panicked")).unwrap_or("")),
        });
    }
    let mut got = Vec::new();
    for (i, d) in c.p.gen.outputs.iter().enumerate() {
        let bytes = std::fs::read(dir.join(format!("out_{i}.bin"))).map_err(|e| e.to_string())?;
        let shape_text = std::fs::read_to_string(dir.join(format!("out_{i}.shape"))).map_err(|e| e.to_string())?;
        let shape: Vec<usize> = shape_text.split_whitespace().map(|s| s.parse().map_err(|e| format!("{e}"))).collect::<Result<_, String>>()?;
        let data = Data::from_le_bytes(d.dtype, &bytes).ok_or("bad output size")?;
        if data.len() != shape.iter().product::<usize>() {
            return Err(format!("output {i}: {} elements for shape {shape:?}", data.len()));
        }
        got.push(Tensor::new(shape, data));
    }
    let got = c.p.regroup(got).map_err(|e| e.to_string())?;
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
fn node_suite_through_bounded_code() {
    let data = data_dir();
    let cases = batch::passlisted_node_cases();
    let rules = machine_dependent();
    let mut report: Vec<(String, bool, String)> = Vec::new();
    let mut compiled: Vec<Compiled> = Vec::new();
    for case in &cases {
        let result = (|| -> Result<Compiled, String> {
            let common::NodeCase { model, inputs, expected } = common::node_case(&data.join("node").join(case))?;
            let undefined = match rules.get(case) {
                Some(u) => Some((u.clone(), inputs.get(u.input).cloned().ok_or_else(|| format!("in-range rule: no input {}", u.input))?)),
                None => None,
            };
            let opts = CodegenOptions { weights_file: "model.bin".into(), source_name: case.clone(), fuse: true, ..Default::default() };
            let p = generate_bounded_for(&model.graph, &inputs, FACTOR, &opts).map_err(|e| format!("codegen: {e}"))?;
            Ok(Compiled { case: case.clone(), p, expected, undefined })
        })();
        match result {
            Ok(c) => compiled.push(c),
            Err(e) => report.push((case.clone(), false, e)),
        }
    }
    // BURNC_BOUNDED_CODEGEN_ONLY=1: only which cases codegen refuses and why (seconds, not
    // minutes); writes target/conformance/bounded_codegen_refusals.tsv and checks nothing.
    if std::env::var_os("BURNC_BOUNDED_CODEGEN_ONLY").is_some() {
        let out = root().join("target/conformance/bounded_codegen_refusals.tsv");
        let _ = std::fs::create_dir_all(out.parent().expect("a parent"));
        let text: String = report.iter().map(|(c, _, why)| format!("{c}\t{why}\n")).collect();
        std::fs::write(&out, text).expect("write refusals");
        eprintln!("{} of {} cases refused by bounded codegen: {}", report.len(), cases.len(), out.display());
        return;
    }
    let base = root().join("target/conformance-bounded");
    let (target, work) = (base.join("target"), base.join("work"));
    let mut first = 0;
    for chunk in compiled.chunks(BATCH) {
        let items: Vec<batch::Module> = chunk
            .iter()
            .enumerate()
            .map(|(j, c)| batch::Module { source: &c.p.gen.source, weights: &c.p.gen.weights, runner: module_runner(first + j, &c.p), wgsl: None })
            .collect();
        let (bin, failed) = batch::build_batch_with(&base.join(format!("batch{first}")), &target, &items, first, HELPERS);
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
                    Ok(_) => report.push((c.case.clone(), true, String::new())),
                    Err(e) => report.push((c.case.clone(), false, e)),
                }
            }
        }
        first += chunk.len();
    }
    let total = cases.len();
    batch::finish(report, &cases, "bounded_report.tsv", "bounded_passlist.txt", "bounded", |n| {
        format!("conformance bounded (--bound {FACTOR}): {n}/{total} interpreter-passing node cases pass through bounded code")
    });
}
