use burnc_macros::{model, Model};

#[derive(Model)]
struct Net {}

#[model]
impl Net {
    fn forward(&self, x: Tensor<8>, w: Tensor<8, 4>) -> Tensor<4> {
        x.matmul(w)
    }
}

fn main() {}
