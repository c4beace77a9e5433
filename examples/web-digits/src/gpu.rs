//! Inference through the browser's WebGPU: the same CNN compiled with `--target wgpu` (WGSL
//! kernels validated when burnc ran), started and read asynchronously, as a page must. Teaching
//! stays on the CPU ([`crate::Digits`]); its new head is written into the device's weights.
use crate::engine::{scaled, softmax};
use crate::web::WebDigits;
use std::cell::RefCell;
use std::rc::Rc;
use wasm_bindgen::prelude::*;

#[allow(dead_code, unused_labels, clippy::all)]
mod digits_gpu {
    burnc_runtime::include_model!("digits_gpu");
}

fn js_error(e: impl std::fmt::Display) -> JsValue {
    JsError::new(&e.to_string()).into()
}

/// The model on the browser's WebGPU adapter.
#[wasm_bindgen]
pub struct GpuDigits {
    // Shared with the futures `predict` hands to JavaScript.
    model: Rc<RefCell<digits_gpu::Model>>,
}

#[wasm_bindgen]
impl GpuDigits {
    /// Start the model on the browser's WebGPU adapter (rejects when there is none, or it is
    /// too small for the model: the message says which limit).
    pub async fn create() -> Result<GpuDigits, JsValue> {
        let model = digits_gpu::Model::new_async().await.map_err(js_error)?;
        Ok(GpuDigits { model: Rc::new(RefCell::new(model)) })
    }

    /// The adapter: name, backend and driver as WebGPU reports them.
    pub fn adapter(&self) -> String {
        self.model.try_borrow_mut().map(|mut m| m.session().adapter().to_string()).unwrap_or_default()
    }

    /// A promise of the ten class probabilities of an 8×8 image of pixels 0–16.
    pub fn predict(&self, pixels: Vec<f32>) -> js_sys::Promise {
        let model = self.model.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let x = scaled(&pixels)?;
            // One prediction at a time: the arena holds one input.
            let mut m = model.try_borrow_mut().map_err(|_| js_error("a prediction is already running on the GPU"))?;
            let out = m.forward_async(&x).await.map_err(js_error)?;
            let logits: &[f32; 10] = out.logits.as_slice().try_into().map_err(js_error)?;
            Ok(js_sys::Float32Array::from(&softmax(logits)[..]).into())
        })
    }

    /// Use the head `cpu` has now (after teaching) for the next predictions.
    #[wasm_bindgen(js_name = setHead)]
    pub fn set_head(&self, cpu: &mut WebDigits) -> Result<(), JsValue> {
        let mut m = self.model.try_borrow_mut().map_err(|_| js_error("a prediction is running on the GPU"))?;
        for (name, values) in cpu.head() {
            m.set_weight(name, &values).map_err(js_error)?;
        }
        Ok(())
    }
}
