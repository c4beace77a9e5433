use burnc_macros::{model, Model};
use burnc_runtime::nn::*;

#[derive(Model)]
struct Net {
    a: Linear<4, 8>,
    b: Linear<4, 10>,
}

#[model]
impl Net {
    fn forward(&self, x: Tensor<1, 4>) -> Tensor<1, 8> {
        let y = self.a(x);
        let z = self.b(x);
        y + z
    }
}

fn main() {}
