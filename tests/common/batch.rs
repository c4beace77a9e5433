//! Many generated modules built into one binary (one cargo build per batch instead of one per
//! model), for the conformance runs through generated code. Each module `m<i>` comes with a
//! runner `fn run_<i>(dir: &Path, args: &[String])` written by the caller; the binary runs
//! `BIN <i> DIR ARGS…`.
use super::root;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One module of a batch: its source (reading its weights as `include_bytes!("model.bin")`),
/// weights, and runner function.
pub struct Module<'a> {
    pub source: &'a str,
    pub weights: &'a [u8],
    pub runner: String,
    /// A wgpu module's kernels (`include_str!("model.wgsl")`).
    pub wgsl: Option<&'a str>,
}

pub const PRELUDE: &str = r#"#![allow(clippy::all, dead_code, unused_labels)]
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
pub fn build_batch(dir: &Path, target: &Path, items: &[Module], first: usize) -> (Option<PathBuf>, Vec<(usize, String)>) {
    build_batch_with(dir, target, items, first, "")
}

/// [`build_batch`] with more items (helper functions the runners call) after the prelude.
pub fn build_batch_with(dir: &Path, target: &Path, items: &[Module], first: usize, helpers: &str) -> (Option<PathBuf>, Vec<(usize, String)>) {
    build_batch_for(dir, target, items, first, helpers, "std")
}

/// [`build_batch_with`] against the runtime with `feature` (`std`, or `wgpu` for wgpu modules).
pub fn build_batch_for(dir: &Path, target: &Path, items: &[Module], first: usize, helpers: &str, feature: &str) -> (Option<PathBuf>, Vec<(usize, String)>) {
    let name = format!("burnc-conformance-batch-{first}");
    let mut alive: Vec<usize> = (0..items.len()).collect();
    let mut failed = Vec::new();
    std::fs::create_dir_all(dir.join("src")).expect("mkdir batch");
    let runtime = root().join("runtime");
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"{name}\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n[dependencies]\nburnc-runtime = {{ path = {:?}, features = [\"{feature}\", \"strings\"] }}\n\n[profile.dev]\ndebug = false\n[profile.dev.package.\"*\"]\nopt-level = {}\n\n[workspace]\n",
            runtime.display().to_string(),
            // wgpu and naga run every module's pipelines: optimised, they start in milliseconds.
            if feature == "wgpu" { 2 } else { 0 }
        ),
    )
    .expect("write Cargo.toml");
    for (j, c) in items.iter().enumerate() {
        let i = first + j;
        let src = c.source.replace("include_bytes!(\"model.bin\")", &format!("include_bytes!(\"m{i}.bin\")")).replace("include_str!(\"model.wgsl\")", &format!("include_str!(\"m{i}.wgsl\")"));
        if let Some(w) = c.wgsl {
            std::fs::write(dir.join(format!("src/m{i}.wgsl")), w).expect("write kernels");
        }
        std::fs::write(dir.join(format!("src/m{i}.rs")), src).expect("write module");
        std::fs::write(dir.join(format!("src/m{i}.bin")), c.weights).expect("write weights");
    }
    for _attempt in 0..4 {
        let mut main = String::from(PRELUDE) + helpers;
        for &j in &alive {
            main += &format!("mod m{0} {{ include!(\"m{0}.rs\"); }}\n", first + j);
            main += &items[j].runner;
        }
        main += "fn main() {\n    let mut a = std::env::args().skip(1);\n    let i: usize = a.next().and_then(|s| s.parse().ok()).expect(\"index\");\n    let dir = std::path::PathBuf::from(a.next().expect(\"dir\"));\n    let rest: Vec<String> = a.collect();\n    match i {\n";
        for &j in &alive {
            main += &format!("        {0} => run_{0}(&dir, &rest),\n", first + j);
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


/// The files a build of batch `first` left under `target`: the binary and its hard-linked copy
/// in deps/ (what a lean run deletes once the batch ran).
pub fn outputs(target: &Path, first: usize) -> Vec<PathBuf> {
    let (debug, stem) = (target.join("debug"), format!("burnc_conformance_batch_{first}-"));
    let in_deps = std::fs::read_dir(debug.join("deps")).map(|rd| rd.flatten().map(|e| e.path()).filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(&stem))).collect()).unwrap_or_else(|_| Vec::new());
    [debug.join(format!("burnc-conformance-batch-{first}"))].into_iter().chain(in_deps).collect()
}

/// The node cases on the interpreter's pass-list, filtered by `BURNC_CONFORMANCE_FILTER`.
pub fn passlisted_node_cases() -> Vec<String> {
    let listed = std::fs::read_to_string(root().join("tests/conformance/passlist.txt")).unwrap_or_default();
    let filter = std::env::var("BURNC_CONFORMANCE_FILTER").ok();
    listed
        .lines()
        .filter_map(|l| l.strip_prefix("node/"))
        .filter(|c| filter.as_deref().is_none_or(|f| c.contains(f)))
        .map(str::to_string)
        .collect()
}

/// Write `report` (case, passed, reason) to target/conformance/`report_name`, rewrite the
/// ratchet `tests/conformance/list_name` under `BURNC_UPDATE_PASSLIST`, and fail on a crash or on
/// a listed case of `cases` that does not pass; `summary` (of the passing count) is printed first.
pub fn finish(mut report: Vec<(String, bool, String)>, cases: &[String], report_name: &str, list_name: &str, what: &str, summary: impl FnOnce(usize) -> String) {
    report.sort();
    let passing: BTreeSet<String> = report.iter().filter(|r| r.1).map(|r| r.0.clone()).collect();
    println!("{}", summary(passing.len()));
    let mut tsv = String::from("case\tstatus\treason\n");
    for (c, ok, why) in &report {
        tsv += &format!("{c}\t{}\t{}\n", if *ok { "pass" } else { "fail" }, why.replace(['\t', '\n'], " "));
    }
    std::fs::create_dir_all(root().join("target/conformance")).expect("mkdir");
    std::fs::write(root().join("target/conformance").join(report_name), tsv).expect("write report");
    let crashes: Vec<_> = report.iter().filter(|r| r.2.starts_with("CRASH")).collect();
    for c in &crashes {
        println!("crash: {}: {}", c.0, c.2);
    }
    let list_path = root().join("tests/conformance").join(list_name);
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
    assert!(crashes.is_empty(), "{} cases crashed in {what}", crashes.len());
    assert!(regressions.is_empty(), "{} {what} pass-listed cases fail now:\n{}", regressions.len(), regressions.join("\n"));
}

/// The runner of module `m<i>` in a batch harness: `fn run_<i>(<params>)` reads the inputs from
/// `dir`, runs `forward` once and writes the outputs there.
pub fn module_runner(i: usize, gen: &burnc_compiler::codegen::Generated, params: &str) -> String {
    let mut s = format!("fn run_{i}({params}) {{\n");
    let mut args = Vec::new();
    if gen.heap {
        s += "    let mut heap = rt::strings::Heap::new();\n";
        args.push("&mut heap".to_string());
    }
    for (k, d) in gen.inputs.iter().enumerate() {
        s += &burnc::harness::read_input(k, d);
        args.push(format!("&in_{k}"));
    }
    s += &format!("    let mut arena: Box<m{i}::Arena> = unsafe {{ Box::new_zeroed().assume_init() }};\n");
    s += &format!("    let out = m{i}::Model::new().forward(&mut arena, {});\n", args.join(", "));
    for (k, d) in gen.outputs.iter().enumerate() {
        s += &burnc::harness::write_output(k, d);
    }
    s + "}\n"
}
