use burnc_macros::{model, Model};

#[derive(Model)]
struct Net {}

#[model]
impl Net {
    fn forward(&self, x: Tensor<2, 3, 4>) -> Tensor<5, 5> {
        x.reshape([5, -1])
    }
}

fn main() {}
