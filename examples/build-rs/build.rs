//! Compile the MNIST CNN to `$OUT_DIR/mnist.rs` + `$OUT_DIR/mnist.bin`.
fn main() -> Result<(), burnc::BuildError> {
    let report = burnc::Build::new("../mnist/mnist_cnn.onnx")
        // Pins are only needed for symbolic dims; this one restates the fixed shape (and checks it).
        .input("x", [1, 1, 28, 28])
        .name("mnist")
        .compile()?;
    // Shows up in `cargo build` output only with -vv; handy while sizing a static arena.
    println!("{}", report.memory_line());
    Ok(())
}
