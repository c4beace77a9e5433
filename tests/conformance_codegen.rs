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
use burnc_compiler::codegen::{emit::rust_ty, Generated};
use burnc_compiler::interp::RtValue;
use burnc_compiler::{Data, Tensor};
use burnc_frontends::onnx::values::decode_value;
use common::{close, close_in_range, data_dir, hint, machine_dependent, numbered, root, InRangeOnly};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

const BATCH: usize = 200;

struct Compiled {
    case: String,
    p: Prepared,
    expected: Vec<RtValue>,
    /// The machine_dependent.tsv rule of this case and the input it reads.
    undefined: Option<(InRangeOnly, RtValue)>,
}

fn module_runner(i: usize, gen: &Generated) -> String {
    let mut s = format!("fn run_{i}(dir: &Path) {{\n");
    let mut args = Vec::new();
    for (k, d) in gen.inputs.iter().enumerate() {
        let t = rust_ty(d.dtype).unwrap_or("f32");
        let n: usize = d.shape.iter().product();
        s += &format!("    let in_{k}: Box<[{t}; {n}]> = read(&dir.join(\"in_{k}.bin\"));\n");
        args.push(format!("&in_{k}"));
    }
    s += &format!("    let mut arena: Box<m{i}::Arena> = unsafe {{ Box::new_zeroed().assume_init() }};\n");
    s += &format!("    let out = m{i}::Model::new().forward(&mut arena, {});\n", args.join(", "));
    for (k, d) in gen.outputs.iter().enumerate() {
        s += &format!("    write(&dir.join(\"out_{k}.bin\"), &out.{}[..]);\n", d.ident);
    }
    s + "}\n"
}

const PRELUDE: &str = r#"#![allow(clippy::all, dead_code, unused_labels)]
use burnc_runtime as rt;
use std::path::Path;
fn read<T: Copy + Default, const N: usize>(p: &Path) -> Box<[T; N]> {
    let bytes = std::fs::read(p).expect("read input");
    assert_eq!(bytes.len(), N * std::mem::size_of::<T>(), "input size");
    let mut v = vec![T::default(); N];
    // SAFETY: plain numbers, exact length checked above.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), v.as_mut_ptr() as *mut u8, bytes.len()) };
    v.into_boxed_slice().try_into().ok().expect("length")
}
fn write<T: Copy>(p: &Path, v: &[T]) {
    // SAFETY: plain numbers viewed as bytes.
    let b = unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) };
    std::fs::write(p, b).expect("write output");
}
"#;

/// Write and build one batch crate; modules that do not compile are dropped (and reported)
/// and the batch is rebuilt without them. Returns the binary and the failures.
fn build_batch(dir: &Path, target: &Path, items: &[&Compiled], first: usize) -> (Option<PathBuf>, Vec<(usize, String)>) {
    let name = format!("burnc-conformance-batch-{first}");
    let mut alive: Vec<usize> = (0..items.len()).collect();
    let mut failed = Vec::new();
    std::fs::create_dir_all(dir.join("src")).expect("mkdir batch");
    let runtime = root().join("runtime");
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"{name}\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n[dependencies]\nburnc-runtime = {{ path = {:?}, features = [\"std\"] }}\n\n[profile.dev]\ndebug = false\n\n[workspace]\n",
            runtime.display().to_string()
        ),
    )
    .expect("write Cargo.toml");
    for (j, c) in items.iter().enumerate() {
        let i = first + j;
        let src = c.p.gen.source.replace("include_bytes!(\"model.bin\")", &format!("include_bytes!(\"m{i}.bin\")"));
        std::fs::write(dir.join(format!("src/m{i}.rs")), src).expect("write module");
        std::fs::write(dir.join(format!("src/m{i}.bin")), &c.p.gen.weights).expect("write weights");
    }
    for _attempt in 0..4 {
        let mut main = String::from(PRELUDE);
        for &j in &alive {
            main += &format!("mod m{0} {{ include!(\"m{0}.rs\"); }}\n", first + j);
            main += &module_runner(first + j, &items[j].p.gen);
        }
        main += "fn main() {\n    let mut a = std::env::args().skip(1);\n    let i: usize = a.next().and_then(|s| s.parse().ok()).expect(\"index\");\n    let dir = std::path::PathBuf::from(a.next().expect(\"dir\"));\n    match i {\n";
        for &j in &alive {
            main += &format!("        {0} => run_{0}(&dir),\n", first + j);
        }
        main += "        _ => panic!(\"no such case\"),\n    }\n}\n";
        std::fs::write(dir.join("src/main.rs"), main).expect("write main");
        let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args(["build", "--quiet", "--message-format=short", "--manifest-path"])
            .arg(dir.join("Cargo.toml"))
            .arg("--target-dir")
            .arg(target)
            .output()
            .expect("run cargo");
        if out.status.success() {
            return (Some(target.join("debug").join(&name)), failed);
        }
        // Drop the modules the errors point at and try again.
        let err = String::from_utf8_lossy(&out.stderr);
        let mut bad = BTreeSet::new();
        for line in err.lines().filter(|l| l.contains("error")) {
            if let Some(p) = line.find("src/m") {
                let digits: String = line[p + 5..].chars().take_while(|c| c.is_ascii_digit()).collect();
                if let Ok(i) = digits.parse::<usize>() {
                    bad.insert(i);
                }
            }
        }
        if bad.is_empty() {
            let first_err = err.lines().find(|l| l.contains("error")).unwrap_or("build failed").to_string();
            failed.extend(alive.iter().map(|&j| (first + j, format!("batch build failed: {first_err}"))));
            return (None, failed);
        }
        for &i in &bad {
            let msg = err.lines().find(|l| l.contains(&format!("src/m{i}.rs")) && l.contains("error")).unwrap_or("").to_string();
            failed.push((i, format!("generated code does not compile: {msg}")));
        }
        alive.retain(|j| !bad.contains(&(first + j)));
    }
    (None, failed)
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
    let listed = std::fs::read_to_string(root().join("tests/conformance/passlist.txt")).unwrap_or_default();
    let filter = std::env::var("BURNC_CONFORMANCE_FILTER").ok();
    let cases: Vec<String> = listed
        .lines()
        .filter_map(|l| l.strip_prefix("node/"))
        .filter(|c| filter.as_deref().is_none_or(|f| c.contains(f)))
        .map(str::to_string)
        .collect();
    let rules = machine_dependent();
    let mut report: Vec<(String, bool, String)> = Vec::new();
    let mut compiled: Vec<Compiled> = Vec::new();
    for case in &cases {
        let dir = data.join("node").join(case);
        let result = (|| -> Result<Compiled, String> {
            let model = burnc_frontends::onnx::load(&dir.join("model.onnx")).map_err(|e| e.to_string())?;
            let g = &model.graph;
            let set = dir.join("test_data_set_0");
            let mut inputs = Vec::new();
            for (p, &id) in numbered(&set, "input_").iter().zip(&g.inputs) {
                let b = std::fs::read(p).map_err(|e| e.to_string())?;
                inputs.push(decode_value(&b, hint(&g.value(id).ty)).map_err(|e| e.to_string())?);
            }
            let mut expected = Vec::new();
            for (p, &id) in numbered(&set, "output_").iter().zip(&g.outputs) {
                let b = std::fs::read(p).map_err(|e| e.to_string())?;
                expected.push(decode_value(&b, hint(&g.value(id).ty)).map_err(|e| e.to_string())?);
            }
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
        let items: Vec<&Compiled> = chunk.iter().collect();
        let (bin, failed) = build_batch(&base.join(format!("batch{first}")), &target, &items, first);
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
    report.sort();
    let passing: BTreeSet<String> = report.iter().filter(|r| r.1).map(|r| r.0.clone()).collect();
    let mut tsv = String::from("case\tstatus\treason\n");
    for (c, ok, why) in &report {
        tsv += &format!("{c}\t{}\t{}\n", if *ok { "pass" } else { "fail" }, why.replace(['\t', '\n'], " "));
    }
    std::fs::create_dir_all(root().join("target/conformance")).expect("mkdir");
    std::fs::write(root().join("target/conformance/codegen_report.tsv"), tsv).expect("write report");
    println!("conformance codegen: {}/{} interpreter-passing node cases pass through generated code", passing.len(), cases.len());
    println!("machine-dependent references (tests/conformance/machine_dependent.tsv): {} cases had undefined elements, {} elements not compared", skipped_cases, skipped_elems);
    let crashes: Vec<_> = report.iter().filter(|r| r.2.starts_with("CRASH")).collect();
    for c in &crashes {
        println!("crash: {}: {}", c.0, c.2);
    }
    let list_path = root().join("tests/conformance/codegen_passlist.txt");
    if std::env::var("BURNC_UPDATE_PASSLIST").is_ok() {
        std::fs::write(&list_path, passing.iter().map(|c| format!("node/{c}\n")).collect::<String>()).expect("write passlist");
    }
    let ran: BTreeSet<&String> = cases.iter().collect();
    let regressions: Vec<String> = std::fs::read_to_string(&list_path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix("node/"))
        .filter(|c| ran.contains(&c.to_string()) && !passing.contains(*c))
        .map(|c| format!("{c}: {}", report.iter().find(|r| r.0 == c).map(|r| r.2.clone()).unwrap_or_default()))
        .collect();
    assert!(crashes.is_empty(), "{} cases crashed in generated code", crashes.len());
    assert!(regressions.is_empty(), "{} codegen pass-listed cases fail now:\n{}", regressions.len(), regressions.join("\n"));
}

