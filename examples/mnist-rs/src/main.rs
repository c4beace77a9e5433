//! The MNIST CNN of ../mnist/mnist_cnn.onnx, written in Rust. `#[model]` compiles `forward` at
//! build time into the module `net` (the same code `burnc mnist_cnn.onnx -o net.rs` writes),
//! with the weights of mnist_cnn.safetensors embedded; main prints the logits on a fixed input.
use burnc_macros::{model, Model};
use burnc_runtime::nn::{Conv2d, Linear};

#[derive(Model)]
struct Net {
    #[layer(padding = 1)]
    conv1: Conv2d<1, 8, 3>,
    #[layer(padding = 1)]
    conv2: Conv2d<8, 16, 3>,
    fc: Linear<{ 16 * 7 * 7 }, 10>,
}

#[model(weights = "mnist_cnn.safetensors")]
impl Net {
    fn forward(&self, x: Tensor<1, 1, 28, 28>) -> Tensor<1, 10> {
        let x = self.conv1(x).relu().max_pool2d(2);
        let x = self.conv2(x).relu().max_pool2d(2);
        self.fc(x.flatten(1))
    }
}

/// The test input: a deterministic pattern in [-0.5, 0.5), the formula examples/build-rs and
/// tests/macro_model.rs use too.
fn input() -> [f32; 28 * 28] {
    core::array::from_fn(|i| ((i * 37) % 101) as f32 / 101.0 - 0.5)
}

fn main() {
    let net = Net::new();
    // One buffer for every intermediate tensor, sized by the compiler.
    let mut arena = Box::new(net::Arena::new());
    let out = net.forward(&mut arena, &input());
    println!("arena_bytes {} weights_bytes {}", net::ARENA_BYTES, net::WEIGHTS_BYTES);
    let logits: Vec<String> = out.output.iter().map(|v| v.to_string()).collect();
    println!("logits {}", logits.join(" "));
}
