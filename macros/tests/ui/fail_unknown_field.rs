use burnc_macros::{model, Model};
use burnc_runtime::nn::*;

#[derive(Model)]
struct Net {
    fc1: Linear<8, 8>,
    fc2: Linear<8, 4>,
}

#[model]
impl Net {
    fn forward(&self, x: Tensor<1, 8>) -> Tensor<1, 4> {
        let x = self.fc1(x).gelu();
        self.fc3(x)
    }
}

fn main() {}
