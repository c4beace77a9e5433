use burnc_macros::Model;
use burnc_runtime::nn::*;

#[derive(Model)]
struct Net {
    conv: Conv3d<1, 4, 3>,
    fc: Linear<8, 4>,
}

fn main() {}
