//! The digits CNN for a web page: [`Digits`] predicts class probabilities for an 8×8 image in
//! the scikit-learn digits' scale (0–16 per pixel) and fine-tunes the last layer on the user's
//! labelled examples, all through burnc's generated modules. `web` wraps it for JavaScript
//! (wasm32 only), `gpu` adds inference through WebGPU (feature `webgpu`); `native-digits` runs
//! the very same CPU code natively, for the browser test.
mod engine;
#[cfg(feature = "webgpu")]
mod gpu;
#[cfg(target_arch = "wasm32")]
mod web;

pub use engine::{Digits, Error, Example, CLASSES, PIXELS, TEACH_BATCH};
