use burnc_macros::Model;
use burnc_runtime::nn::*;

#[derive(Model)]
struct Net {
    #[layer(stride = 2)]
    fc: Linear<8, 4>,
}

fn main() {}
