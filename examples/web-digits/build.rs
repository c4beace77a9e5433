//! Two modules from examples/finetune-digits' CNN with the weights that example trained
//! (`weights/digits.safetensors`, written by its `--save-weights`):
//! - `digits_infer`: batch 1, what the page runs on every stroke;
//! - `digits_teach`: batch `TEACH_BATCH`, `train_step` on the last layer only (`fc2.*`, Adam).
//! - `digits_gpu` (feature `webgpu`): batch 1 compiled with `--target wgpu`, inference only,
//!   its head replaced on the device after teaching.
//! The first two are training modules with the same trainable set, so the head the page
//! teaches can be copied from one state into the other.
use burnc::{Build, Loss, Optimizer, Target, TrainSpec};

/// Examples per teach step (the page cycles through the user's examples to fill it).
const TEACH_BATCH: usize = 8;

fn main() -> Result<(), burnc::BuildError> {
    let model = "../finetune-digits/model.onnx";
    let weights = "weights/digits.safetensors";
    println!("cargo:rerun-if-changed={model}");
    println!("cargo:rerun-if-changed={weights}");
    let adam = Optimizer::Adam { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0, decoupled: false };
    let head = TrainSpec { loss: Loss::CrossEntropy, rule: adam, lr: 1e-2, trainable: vec!["fc2.*".into()], output: None };
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let batch_rs = out.join("teach_batch.rs");
    std::fs::write(&batch_rs, TEACH_BATCH.to_string()).map_err(|e| burnc::BuildError::File { path: batch_rs.display().to_string(), reason: e.to_string() })?;
    for (name, batch) in [("digits_infer", 1), ("digits_teach", TEACH_BATCH)] {
        Build::new(model).input("x", [batch, 1, 8, 8]).weights(weights).name(name).train(head.clone()).compile()?;
    }
    if std::env::var_os("CARGO_FEATURE_WEBGPU").is_some() {
        Build::new(model).input("x", [1, 1, 8, 8]).weights(weights).name("digits_gpu").target(Target::Wgpu).compile()?;
    }
    Ok(())
}
