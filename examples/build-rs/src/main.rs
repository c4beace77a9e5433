//! Run the compiled MNIST CNN on a fixed synthetic image and print its 10 logits.
#[allow(dead_code)] // the module's whole API, not all of it used here
mod mnist {
    burnc_runtime::include_model!("mnist");
}

/// The test input: a deterministic pattern in [-0.5, 0.5), the same formula
/// tests/build_rs_example.rs feeds the interpreter.
fn input() -> [f32; 28 * 28] {
    core::array::from_fn(|i| ((i * 37) % 101) as f32 / 101.0 - 0.5)
}

fn main() {
    let model = mnist::Model::new();
    // One buffer for all intermediate tensors; its size was decided by the compiler.
    let mut arena = Box::new(mnist::Arena::new());
    let out = model.forward(&mut arena, &input());
    println!("arena_bytes {}", mnist::ARENA_BYTES);
    let logits: Vec<String> = out.logits.iter().map(|v| v.to_string()).collect();
    println!("logits {}", logits.join(" "));
}
