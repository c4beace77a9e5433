use burnc_macros::{model, Model};
use burnc_runtime::nn::*;

#[derive(Model)]
struct Net {
    #[layer(padding = 1)]
    conv: Conv2d<1, 8, 3>,
    fc: Linear<784, 10>,
}

#[model]
impl Net {
    fn forward(&self, x: Tensor<1, 1, 28, 28>) -> Tensor<1, 10> {
        let x = self.conv(x).relu().max_pool2d(2);
        self.fc.forward(x.flatten(1))
    }
}

fn main() {}
