use burnc_macros::{model, Model};
use burnc_runtime::nn::*;

#[derive(Model)]
struct Block {
    fc: Linear<8, 8>,
}

#[model(inline)]
impl Block {
    fn forward(&self, x: Tensor<2, 8>) -> Tensor<2, 8> {
        self.fc(x).relu()
    }
}

#[derive(Model)]
struct Net {
    blocks: [Block; 2],
    fc: Linear<4, 8>,
}

#[model]
impl Net {
    fn forward(&self, x: Tensor<2, 4>) -> Tensor<2, 8> {
        let mut h = self.fc(x);
        for b in &self.blocks {
            h = b(x);
        }
        h
    }
}

fn main() {}
