//! Models made of models: a sub-model used in an array and alone, nested two deep, weights keyed
//! as a PyTorch state_dict (`blocks.0.mlp.up.weight`); `inline` parts compile to nothing
//! themselves. Built with zero weights: this pins that the macros chain through every
//! definition and the result compiles and runs.
use burnc_macros::{model, Model};
use burnc_runtime::nn::*;

#[derive(Model)]
struct Mlp {
    up: Linear<8, 16>,
    down: Linear<16, 8>,
}

#[model(inline)]
impl Mlp {
    fn forward(&self, x: Tensor<2, 5, 8>) -> Tensor<2, 5, 8> {
        self.down(self.up(x).gelu()) + x
    }
}

#[derive(Model)]
struct Block {
    #[layer(key = "attention.norm")]
    norm: LayerNorm<8>,
    mlp: Mlp,
}

#[model(inline)]
impl Block {
    fn forward(&self, x: Tensor<2, 5, 8>, bias: Tensor<2, 1, 5>) -> Tensor<2, 5, 8> {
        let s = x.matmul(x.transpose(1, 2)) + bias;
        let h = self.norm(s.softmax(-1).matmul(x) + x);
        self.mlp(h)
    }
}

#[derive(Model)]
struct Encoder {
    #[layer(key = "embeddings.word")]
    embed: Embedding<50, 8>,
    #[layer(key = "encoder.layer")]
    blocks: [Block; 3],
    last: Block,
}

#[model]
impl Encoder {
    fn forward(&self, ids: Tensor<i64, 2, 5>, mask: Tensor<i64, 2, 5>) -> Tensor<2, 8> {
        let bias = ((1.0 - mask.to_f32()) * f32::MIN).unsqueeze(1);
        let mut x = self.embed(ids) + self.embed(arange(5)).unsqueeze(0);
        for block in &self.blocks {
            x = block(x, bias);
        }
        let x = self.last.forward(x, bias);
        let m = mask.to_f32().unsqueeze(2);
        (x * m).sum(1) / m.sum(1).clamp_min(1e-9)
    }
}

fn main() {
    let mut arena = Box::new(encoder::Arena::new());
    let out = Encoder::new().forward(&mut arena, &[1; 10], &[1, 1, 1, 0, 0, 1, 1, 1, 1, 1]);
    assert_eq!(out.output.len(), 16);
    assert!(out.output.iter().all(|v| v.is_finite()));
    // Only the model that is not `inline` has a module.
    let _ = (encoder::ARENA_BYTES, Block::default(), [Mlp::new(), Mlp::new()]);
}
