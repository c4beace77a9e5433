//! insta snapshots of the Rust that codegen emits for small models (tests/models/snapshots,
//! made by scripts/make_snapshot_models.py), so a change in generated code reads as a diff in
//! review. Each snapshot is the CLI's memory line followed by the formatted module.
//!
//! After an intended change: `INSTA_UPDATE=always cargo test --test codegen_snapshots` (or
//! `cargo insta review`), then read the diff of tests/snapshots/. Under `CI=true` a mismatch
//! fails. A model that uses an op codegen does not support fails with codegen's error.
use std::path::Path;

fn snapshot(name: &str, pins: &[(&str, &[usize])]) {
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/models/snapshots/{name}.onnx"));
    let pins: Vec<(String, Vec<usize>)> = pins.iter().map(|(n, d)| (n.to_string(), d.to_vec())).collect();
    let gen = burnc::build::generate(&model, &pins, &[], &format!("{name}.bin"))
        .unwrap_or_else(|e| panic!("{name}: codegen failed: {e}"));
    // The version in the header would churn every snapshot on a release.
    let source = gen.source.replacen(&format!("burnc {} from", env!("CARGO_PKG_VERSION")), "burnc [version] from", 1);
    let text = format!("{}\n\n{source}", burnc::build::memory_line(&gen));
    insta::assert_snapshot!(name, text);
}

macro_rules! snapshots {
    ($($name:ident $(: $($pin:literal = $dims:expr),*)?;)*) => {
        $(
            #[test]
            fn $name() {
                snapshot(stringify!($name), &[$($(($pin, &$dims[..])),*)?]);
            }
        )*
    };
}

snapshots! {
    mlp;
    small_cnn;
    residual_block;
    attention;
    // Shape -> Gather -> Concat -> Reshape folds to a constant target once x is pinned.
    shape_fold: "x" = [2, 3, 4, 4];
    depthwise_conv;
    pools;
    concat_branches;
    gemm_transb;
    lrn_maxpool;
    broadcast_elementwise;
}

/// The training module (`burnc --train`) of the MLP: forward, train_step with the SGD-momentum
/// updates in place over the state, the parameter table.
#[test]
fn mlp_train() {
    use burnc::{Loss, Optimizer, TrainSpec};
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/models/snapshots/mlp.onnx");
    let spec = TrainSpec {
        loss: Loss::CrossEntropy,
        rule: Optimizer::Sgd { momentum: 0.9, dampening: 0.0, nesterov: false, weight_decay: 0.0 },
        lr: 0.01,
        trainable: vec![],
        output: None,
    };
    let gen = burnc::build::generate_train(&model, &[], &[], None, "mlp_train.bin", &spec, None).unwrap_or_else(|e| panic!("mlp train: {e}"));
    let source = gen.source.replacen(&format!("burnc {} from", env!("CARGO_PKG_VERSION")), "burnc [version] from", 1);
    insta::assert_snapshot!("mlp_train", format!("{}\n\n{source}", gen.memory_line()));
}
