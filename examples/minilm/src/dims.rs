//! The static shapes the model is compiled for: what the tensor types of src/model.rs say, restated
//! for main.rs (rustc checks the two agree: `forward` takes arrays of `BATCH * SEQ` ids).
//!
//! burnc plans every byte at compile time, so batch and sequence length are fixed: the model
//! takes `BATCH` sentences of `SEQ` tokens. Shorter sentences are padded (attention mask 0),
//! unused rows of a batch are all padding, more sentences run in several batches. `SEQ = 128` is
//! the truncation length the model's tokenizer.json is configured with.

/// Sentences per forward call.
pub const BATCH: usize = 8;
/// Tokens per sentence, [CLS] and [SEP] included; longer sentences are truncated.
pub const SEQ: usize = 128;
/// Width of an embedding.
pub const HIDDEN: usize = 384;
