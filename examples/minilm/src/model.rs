//! all-MiniLM-L6-v2 written with burnc's macros: a BERT encoder (6 layers, hidden 384, 12 heads,
//! feed-forward 1536, post-LayerNorm, erf GELU), mean pooling over the attention mask and L2
//! normalisation, as sentence-transformers runs it. `#[model]` lowers `forward` at build time,
//! compiles it for 8 sentences × 128 tokens (src/dims.rs) and embeds model/model.safetensors;
//! the fields' keys are the Hugging Face state_dict's (`encoder.layer.3.attention.self.query`).
use burnc_macros::{model, Model};
use burnc_runtime::nn::{Embedding, LayerNorm, Linear};

/// One encoder layer: multi-head self-attention, then a feed-forward block, each closed by a
/// residual add and LayerNorm.
#[derive(Model)]
struct BertLayer {
    #[layer(key = "attention.self.query")]
    query: Linear<384, 384>,
    #[layer(key = "attention.self.key")]
    key: Linear<384, 384>,
    #[layer(key = "attention.self.value")]
    value: Linear<384, 384>,
    #[layer(key = "attention.output.dense")]
    attn_out: Linear<384, 384>,
    #[layer(key = "attention.output.LayerNorm", eps = 1e-12)]
    attn_norm: LayerNorm<384>,
    #[layer(key = "intermediate.dense")]
    up: Linear<384, 1536>,
    #[layer(key = "output.dense")]
    down: Linear<1536, 384>,
    #[layer(key = "output.LayerNorm", eps = 1e-12)]
    out_norm: LayerNorm<384>,
}

#[model(inline)]
impl BertLayer {
    /// `x`: [batch, seq, 384]; `mask_bias`: 0 where a token is attended, f32::MIN on padding.
    fn forward(&self, x: Tensor<8, 128, 384>, mask_bias: Tensor<8, 1, 1, 128>) -> Tensor<8, 128, 384> {
        // 12 heads of 32: queries and values as [batch, head, seq, 32], keys transposed.
        let q = self.query(x).reshape([8, 128, 12, 32]).permute([0, 2, 1, 3]);
        let k = self.key(x).reshape([8, 128, 12, 32]).permute([0, 2, 3, 1]);
        let v = self.value(x).reshape([8, 128, 12, 32]).permute([0, 2, 1, 3]);
        // Scaled by √32.
        let scores = q.matmul(k) / 5.656854249492381 + mask_bias;
        let context = scores.softmax(-1).matmul(v).permute([0, 2, 1, 3]).reshape([8, 128, 384]);
        let x = self.attn_norm(self.attn_out(context) + x);
        self.out_norm(self.down(self.up(x).gelu()) + x)
    }
}

/// The sentence encoder. The checkpoint's pooler (unused by sentence-transformers) and its
/// `position_ids` buffer are left out.
#[derive(Model)]
pub struct MiniLm {
    #[layer(key = "embeddings.word_embeddings")]
    words: Embedding<30522, 384>,
    #[layer(key = "embeddings.position_embeddings")]
    positions: Embedding<512, 384>,
    #[layer(key = "embeddings.token_type_embeddings")]
    token_types: Embedding<2, 384>,
    #[layer(key = "embeddings.LayerNorm", eps = 1e-12)]
    embed_norm: LayerNorm<384>,
    #[layer(key = "encoder.layer")]
    layers: [BertLayer; 6],
}

#[model(weights = "model/model.safetensors", ignore = ["pooler.*", "embeddings.position_ids"], module = "minilm")]
impl MiniLm {
    /// Token ids, attention masks (1 = token, 0 = padding) and token type ids of 8 sentences of
    /// 128 tokens → their 384-d embeddings, unit length (all zeros for an all-padding row).
    pub fn forward(&self, input_ids: Tensor<i64, 8, 128>, attention_mask: Tensor<i64, 8, 128>, token_type_ids: Tensor<i64, 8, 128>) -> Tensor<8, 384> {
        let x = self.words(input_ids) + self.positions(arange(128)) + self.token_types(token_type_ids);
        let mut x = self.embed_norm(x);
        let mask = attention_mask.to_f32();
        let mask_bias = ((1.0 - mask) * f32::MIN).reshape([8, 1, 1, 128]);
        for layer in &self.layers {
            x = layer(x, mask_bias);
        }
        // Mean over the tokens the mask keeps, then x / max(‖x‖, 1e-12).
        let mean = (x * mask.unsqueeze(2)).sum(1) / mask.sum(1, true).clamp_min(1e-9);
        mean / mean.powf(2.0).sum(1, true).sqrt().clamp_min(1e-12)
    }
}
