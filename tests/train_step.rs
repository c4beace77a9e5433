//! Training against an independent reference: `scripts/train_reference.py` builds two small
//! CNNs (Conv/Relu/MaxPool/Flatten/Gemm with cross-entropy; Conv/Sigmoid/AveragePool/strided
//! Conv/Gemm with mse) and computes, in numpy from the math (im2col convolutions, argmax-routed
//! max pooling, softmax cross-entropy, torch.optim's update formulas), the parameters after
//! one or three train steps on one batch with Adam, AdamW, and SGD with momentum (dampening,
//! weight decay, Nesterov), and Adam on the head only (`--trainable 'fc.*'`: the convolutions
//! frozen). Each case runs through `burnc train --steps N --save` twice — the
//! interpreter and generated code (`--codegen`) — and every saved parameter must match the
//! reference to rtol 1e-4 / atol 1e-5, every printed loss to rtol 1e-4. The saved safetensors
//! must load back with `burnc run MODEL --weights` and give the reference's outputs.
//!
//! Why three steps as well as one: Adam's first step is m̂/√v̂ = g/|g| (plus ε), the same for
//! any β1, β2, so only later steps check the moments and the bias corrections.
//!
//! Needs python3 with numpy and onnx (the script installs scripts/requirements.txt through
//! scripts/setup_python.sh when they are missing); without them the test fails, it never skips.
use burnc_compiler::interp::RtValue;
use burnc_frontends::onnx::values::{decode_value, ValueKindHint};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const RTOL: f64 = 1e-4;
const ATOL: f64 = 1e-5;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs the reference script into a fresh folder; returns it.
fn reference() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("train_step");
    let _ = std::fs::remove_dir_all(&dir);
    let script = root().join("scripts/train_reference.py");
    let out = Command::new("python3").arg(&script).arg(&dir).output().unwrap_or_else(|e| {
        panic!("cannot run python3 (needed, with numpy and onnx, for {}): {e}", script.display())
    });
    assert!(
        out.status.success(),
        "{} failed ({}); it needs numpy and onnx (scripts/setup_python.sh installs them):\n{}{}",
        script.display(),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

struct Case {
    model: String,
    name: String,
    steps: u64,
    flags: Vec<String>,
}

impl Case {
    fn optimizer(&self) -> &str {
        let i = self.flags.iter().position(|f| f == "--optimizer").expect("--optimizer in cases.txt");
        &self.flags[i + 1]
    }
}

fn cases(dir: &Path) -> Vec<Case> {
    std::fs::read_to_string(dir.join("cases.txt"))
        .expect("cases.txt")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert!(f.len() >= 3, "bad line in cases.txt: {l:?}");
            Case { model: f[0].into(), name: f[1].into(), steps: f[2].parse().expect("steps"), flags: f[3..].iter().map(|s| s.to_string()).collect() }
        })
        .collect()
}

fn burnc() -> Command {
    Command::new(env!("CARGO_BIN_EXE_burnc"))
}

/// `step=K loss=V` lines, in order.
fn losses(stdout: &str) -> Vec<f64> {
    stdout
        .lines()
        .filter_map(|l| l.trim().strip_prefix("step="))
        .map(|l| l.split_once(" loss=").and_then(|(_, v)| v.trim().parse().ok()).unwrap_or_else(|| panic!("bad loss line `step={l}`")))
        .collect()
}

/// Every tensor of a safetensors file as f64 values, by name.
fn load(path: &Path) -> BTreeMap<String, (Vec<usize>, Vec<f64>)> {
    let st = burnc_frontends::safetensors::load(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    st.tensors
        .into_iter()
        .map(|(k, t)| {
            assert_eq!(t.dtype, burnc_compiler::ir::DType::F32, "{k} in {}", path.display());
            let v = t.bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64).collect();
            (k, (t.shape, v))
        })
        .collect()
}

/// Largest absolute and relative (over |want| >= 1e-3) differences.
#[derive(Default, Clone, Copy)]
struct Diff {
    abs: f64,
    rel: f64,
    n: usize,
}

impl Diff {
    fn add(&mut self, got: f64, want: f64) -> bool {
        let d = (got - want).abs();
        self.abs = self.abs.max(d);
        if want.abs() >= 1e-3 {
            self.rel = self.rel.max(d / want.abs());
        }
        self.n += 1;
        d <= ATOL + RTOL * want.abs()
    }
}

fn run_ok(mut cmd: Command, what: &str) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(out.status.success(), "{what} failed ({}):\n{}{}", out.status, String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn tensor(bytes: &[u8], what: &str) -> Vec<f64> {
    match decode_value(bytes, ValueKindHint::Tensor).unwrap_or_else(|e| panic!("{what}: {e}")) {
        RtValue::Tensor(t) => t.to_f64_vec(),
        other => panic!("{what} is not a tensor: {other:?}"),
    }
}

#[test]
fn train_steps_match_numpy_reference() {
    let dir = reference();
    let cases = cases(&dir);
    let optimizers: std::collections::BTreeSet<&str> = cases.iter().map(|c| c.optimizer()).collect();
    assert!(["adam", "adamw", "sgd"].iter().all(|o| optimizers.contains(o)), "cases.txt should cover adam, adamw and sgd: {optimizers:?}");
    assert!(cases.iter().any(|c| c.optimizer() == "adam" && c.steps == 1), "cases.txt should have a one-step Adam case");
    assert!(cases.iter().any(|c| c.steps > 1), "cases.txt should have multi-step cases (moments)");
    assert!(cases.iter().any(|c| c.flags.iter().any(|f| f == "--trainable")), "cases.txt should have a case with frozen parameters");

    let mut per_opt: BTreeMap<String, Diff> = BTreeMap::new();
    let mut loss_diff: BTreeMap<String, Diff> = BTreeMap::new();
    let mut failures = Vec::new();
    for case in &cases {
        let mdir = dir.join(&case.model);
        let cdir = mdir.join(&case.name);
        let want_losses: Vec<f64> =
            std::fs::read_to_string(cdir.join("losses.txt")).expect("losses.txt").lines().map(|l| l.trim().parse().expect("loss")).collect();
        assert_eq!(want_losses.len() as u64, case.steps, "{}/{}: losses.txt", case.model, case.name);
        let want = load(&cdir.join("expected.safetensors"));
        let mut saved = Vec::new();
        for codegen in [false, true] {
            let mode = if codegen { "codegen" } else { "interp" };
            let label = format!("{}/{} ({mode})", case.model, case.name);
            let save = cdir.join(format!("saved-{mode}.safetensors"));
            let mut cmd = burnc();
            cmd.arg("train")
                .arg(mdir.join("model.onnx"))
                .arg("--input")
                .arg(format!("x={}", mdir.join("x.npy").display()))
                .arg("--target")
                .arg(mdir.join("target.npy"))
                .arg("--steps")
                .arg(case.steps.to_string())
                .arg("--save")
                .arg(&save)
                .args(&case.flags);
            if codegen {
                cmd.arg("--codegen");
            }
            let stdout = run_ok(cmd, &format!("burnc train {label}"));
            let got_losses = losses(&stdout);
            assert_eq!(got_losses.len(), want_losses.len(), "{label}: losses printed:\n{stdout}");
            let ld = loss_diff.entry(case.optimizer().to_string()).or_default();
            for (k, (&g, &w)) in got_losses.iter().zip(&want_losses).enumerate() {
                if (g - w).abs() > RTOL * w.abs() {
                    failures.push(format!("{label}: step {} loss {g} vs reference {w}", k + 1));
                }
                ld.add(g, w);
            }
            let got = load(&save);
            assert_eq!(got.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>(), "{label}: saved parameter names");
            let d = per_opt.entry(case.optimizer().to_string()).or_default();
            for (name, (wshape, wv)) in &want {
                let (gshape, gv) = &got[name];
                assert_eq!(gshape, wshape, "{label}: shape of {name}");
                let mut bad = 0;
                let mut first = None;
                for (i, (&g, &w)) in gv.iter().zip(wv).enumerate() {
                    if !d.add(g, w) {
                        bad += 1;
                        first.get_or_insert((i, g, w));
                    }
                }
                if let Some((i, g, w)) = first {
                    failures.push(format!("{label}: {name}: {bad} of {} elements off, first [{i}] {g:e} vs reference {w:e}", wv.len()));
                }
            }
            saved.push(save);
        }
        let same = std::fs::read(&saved[0]).ok() == std::fs::read(&saved[1]).ok();
        println!("{}/{}: {} step(s) {}; interpreter and codegen checkpoints bit-identical: {same}", case.model, case.name, case.steps, case.flags.join(" "));

        // The checkpoint loads back as weights and gives the reference's outputs.
        let out_dir = cdir.join("run");
        let mut cmd = burnc();
        cmd.arg("run")
            .arg(mdir.join("model.onnx"))
            .arg("--weights")
            .arg(&saved[0])
            .arg("--input")
            .arg(format!("x={}", mdir.join("x.npy").display()))
            .arg("-o")
            .arg(&out_dir);
        run_ok(cmd, &format!("burnc run --weights {}", saved[0].display()));
        let got = tensor(&std::fs::read(out_dir.join("output_0.pb")).expect("output_0.pb"), "burnc run output");
        let want = tensor(&std::fs::read(cdir.join("output.pb")).expect("output.pb"), "reference output");
        assert_eq!(got.len(), want.len(), "{}/{}: output size", case.model, case.name);
        let mut d = Diff::default();
        for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
            if !d.add(g, w) {
                failures.push(format!("{}/{}: output[{i}] with the saved weights {g:e} vs reference {w:e}", case.model, case.name));
                break;
            }
        }
        println!("  outputs with the saved weights vs reference: max abs diff {:.2e}", d.abs);
    }
    for (opt, d) in &per_opt {
        let l = loss_diff[opt];
        println!("{opt}: parameters max abs diff {:.2e}, max rel diff {:.2e} over {} values; losses max abs diff {:.2e}, max rel diff {:.2e}", d.abs, d.rel, d.n, l.abs, l.rel);
    }
    assert!(failures.is_empty(), "{} mismatch(es) against the numpy reference:\n{}", failures.len(), failures.join("\n"));
}
