use burnc_macros::{model, Model};
use burnc_runtime::nn::*;

#[derive(Model)]
struct Net {
    fc: Linear<8, 4>,
}

#[model]
impl Net {
    fn forward(&self, x: Tensor<2, 8>) -> Tensor<1, 4> {
        self.fc(x).softmax(-1)
    }
}

fn main() {}
