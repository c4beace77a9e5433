use burnc_macros::{model, Model};
use burnc_runtime::nn::*;

#[derive(Model)]
struct Net {
    fc: Linear<4, 4>,
    block: Blok,
}

#[model]
impl Net {
    fn forward(&self, x: Tensor<2, 4>) -> Tensor<2, 4> {
        self.block(self.fc(x))
    }
}

fn main() {}
