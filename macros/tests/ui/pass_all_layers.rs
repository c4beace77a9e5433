//! Every layer kind and most tensor methods, with zero weights (no `weights = ..`): checks that
//! each lowers, goes through the compiler and runs.
use burnc_macros::{model, Model};
use burnc_runtime::nn::*;

#[derive(Model)]
struct Tagger {
    embed: Embedding<100, 16>,
    norm: LayerNorm<16>,
    #[layer(bias = false)]
    proj: Linear<16, 16>,
    drop: Dropout,
    #[layer(padding = 1)]
    conv: Conv1d<16, 8, 3>,
    bn: BatchNorm1d<8>,
    head: Linear<16, 5>,
}

#[model]
impl Tagger {
    pub fn forward(&self, ids: Tensor<i64, 2, 6>) -> (Tensor<2, 6, 5>, Tensor<2, 5>) {
        let h = self.norm(self.embed(ids));
        let q = self.drop(self.proj(h).silu());
        // [2, 6, 16] x [2, 16, 6] -> [2, 6, 6] attention-like scores
        let s = q.matmul(h.transpose(1, 2)) / 4.0;
        let a = s.softmax(-1).matmul(h);
        let c = self.conv(a.permute([0, 2, 1]));
        let c = self.bn(c).gelu().transpose(1, 2);
        let both = concat([c, a.narrow(2, 0, 8)], 2);
        let both = both.reshape([12, 16]).reshape([2, 6, 16]) - 1.0;
        let logits = self.head(both.sigmoid() * 2.0 + h.tanh());
        let pooled = logits.slice(1, 1..).mean(1) + logits.sum(1) * 0.5;
        (logits.log_softmax(-1), pooled)
    }
}

#[derive(Model)]
struct Cnn {
    #[layer(stride = 2, padding = 1)]
    conv: Conv2d<3, 4, 3>,
    bn: BatchNorm2d<4>,
    fc: Linear<16, 2>,
}

#[model(module = "cnn_model")]
impl Cnn {
    fn forward(&self, x: Tensor<1, 3, 16, 16>) -> Tensor<1, 2> {
        let x = self.bn(self.conv(x)).relu().avg_pool2d(2).max_pool2d(2, 2);
        let x = x.flatten(1).unsqueeze(0).squeeze(0);
        self.fc(x)
    }
}

fn main() {
    let t = Tagger::new();
    let mut arena = Box::new(tagger::Arena::new());
    let ids: [i64; 12] = core::array::from_fn(|i| (i * 7 % 100) as i64);
    let out = t.forward(&mut arena, &ids);
    assert_eq!(out.output_0.len(), 2 * 6 * 5);
    assert_eq!(out.output_1.len(), 2 * 5);
    assert!(out.output_0.iter().chain(out.output_1.iter()).all(|v| v.is_finite()));

    let c = Cnn::new();
    let mut arena = Box::new(cnn_model::Arena::new());
    let out = c.forward(&mut arena, &[0.5; 3 * 16 * 16]);
    assert_eq!(out.output, &[0.0, 0.0]);
}
