//! Two modules from one ONNX file: `digits` trains every parameter (Adam), `digits_head` only
//! the last layer (`fc2.*`), for the fine-tuning phase. The model's batch dim is symbolic; both
//! are compiled for batches of 32 (`BATCH` in main.rs).
use burnc::{Build, Loss, Optimizer, TrainSpec};

fn main() -> Result<(), burnc::BuildError> {
    let adam = Optimizer::Adam { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0, decoupled: false };
    let all = TrainSpec { loss: Loss::CrossEntropy, rule: adam, lr: 3e-3, trainable: vec![], output: None };
    let head = TrainSpec { trainable: vec!["fc2.*".into()], lr: 1e-2, ..all.clone() };
    for (name, spec) in [("digits", all), ("digits_head", head)] {
        Build::new("model.onnx").input("x", [32, 1, 8, 8]).name(name).train(spec).compile()?;
    }
    Ok(())
}
