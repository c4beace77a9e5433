use burnc_macros::{model, Model};

#[derive(Model)]
struct Net {}

#[model]
impl Net {
    fn forward(&self, x: Tensor<2, 3>) -> Tensor<2, 3> {
        x.softmax(2)
    }
}

fn main() {}
