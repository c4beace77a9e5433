use burnc_macros::model;

struct Net;

#[model]
impl Net {
    fn forward(&self, x: Tensor<1, 8>) -> Tensor<1, 8> {
        x.relu()
    }
}

fn main() {}
