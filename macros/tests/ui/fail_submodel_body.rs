use burnc_macros::{model, Model};
use burnc_runtime::nn::*;

#[derive(Model)]
struct Block {
    fc: Linear<8, 8>,
}

#[model(inline)]
impl Block {
    fn forward(&self, x: Tensor<2, 8>) -> Tensor<2, 8> {
        self.fc(x).reshape([3, -1])
    }
}

#[derive(Model)]
struct Net {
    block: Block,
}

#[model]
impl Net {
    fn forward(&self, x: Tensor<2, 8>) -> Tensor<2, 8> {
        self.block(x)
    }
}

fn main() {}
