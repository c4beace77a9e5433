//! The JavaScript API of the page (wasm-bindgen). Every error is a JS exception carrying the
//! message of [`crate::Error`]; nothing here panics on input from the page.
use crate::{Digits, Error, Example, CLASSES, PIXELS, TEACH_BATCH};
use wasm_bindgen::prelude::*;

impl From<Error> for JsValue {
    fn from(e: Error) -> JsValue {
        JsError::new(&e.to_string()).into()
    }
}

/// The model, as the page holds it.
#[wasm_bindgen]
pub struct WebDigits {
    digits: Digits,
    examples: Vec<Example>,
}

#[wasm_bindgen]
impl WebDigits {
    #[wasm_bindgen(constructor)]
    pub fn new() -> WebDigits {
        WebDigits { digits: Digits::new(), examples: Vec::new() }
    }

    /// Class probabilities (10) of an 8×8 image of pixels 0–16.
    pub fn predict(&mut self, pixels: &[f32]) -> Result<Vec<f32>, JsValue> {
        Ok(self.digits.predict(pixels)?.to_vec())
    }

    /// Keep a labelled example for the next teach steps; returns how many are kept.
    #[wasm_bindgen(js_name = addExample)]
    pub fn add_example(&mut self, pixels: &[f32], label: u8) -> Result<usize, JsValue> {
        if label as usize >= CLASSES {
            return Err(Error::Label(label).into());
        }
        let pixels: [f32; PIXELS] = pixels.try_into().map_err(|_| Error::PixelCount(pixels.len()))?;
        // Checked now, so a bad example never sits in the list.
        crate::engine::check(&pixels)?;
        self.examples.push(Example { pixels, label });
        Ok(self.examples.len())
    }

    /// The kept examples, flattened: 65 numbers each (64 pixels, then the label).
    pub fn examples(&self) -> Vec<f32> {
        self.examples.iter().flat_map(|e| e.pixels.iter().copied().chain([e.label as f32])).collect()
    }

    /// One head-only `train_step` on the kept examples; returns its loss.
    pub fn teach(&mut self) -> Result<f32, JsValue> {
        Ok(self.digits.teach(&self.examples)?)
    }

    /// The compiled weights again; the kept examples are dropped.
    pub fn reset(&mut self) {
        self.digits.reset();
        self.examples.clear();
    }

    /// Teach steps since the last reset.
    pub fn steps(&self) -> u64 {
        self.digits.steps()
    }

    /// The taught parameters by name (for the WebGPU model).
    #[cfg(feature = "webgpu")]
    pub(crate) fn head(&mut self) -> Vec<(&'static str, Vec<f32>)> {
        self.digits.head()
    }

    /// Examples per teach step (the kept ones are cycled to fill it).
    #[wasm_bindgen(js_name = teachBatch)]
    pub fn teach_batch() -> usize {
        TEACH_BATCH
    }
}

impl Default for WebDigits {
    fn default() -> Self {
        Self::new()
    }
}
