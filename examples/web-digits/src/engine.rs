//! Inference and head-only fine-tuning over the two generated modules (see build.rs). Every
//! input from the page is checked here; nothing in this module panics on bad input.
use core::fmt;

#[allow(dead_code, unused_labels, clippy::all)]
mod digits_infer {
    burnc_runtime::include_model!("digits_infer");
}
#[allow(dead_code, unused_labels, clippy::all)]
mod digits_teach {
    burnc_runtime::include_model!("digits_teach");
}

/// Pixels of one image (8×8).
pub const PIXELS: usize = 64;
/// Classes (the digits 0–9).
pub const CLASSES: usize = 10;
/// Examples in one teach step, fixed by the compiled `digits_teach` module.
pub const TEACH_BATCH: usize = include!(concat!(env!("OUT_DIR"), "/teach_batch.rs"));

/// One labelled image: pixels 0–16 as in the scikit-learn digits, row-major.
#[derive(Clone, Debug, PartialEq)]
pub struct Example {
    pub pixels: [f32; PIXELS],
    pub label: u8,
}

/// What the page can get wrong; shown to JavaScript as the exception's message.
#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// An image must have exactly 64 pixels.
    PixelCount(usize),
    /// Pixel `index` is not a number in 0..=16.
    PixelValue { index: usize, value: f32 },
    /// A label must be a digit.
    Label(u8),
    /// A teach step needs at least one example.
    NoExamples,
    /// The two modules disagree about a parameter (a build problem, never the page's input).
    Layout(&'static str),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::PixelCount(n) => write!(f, "an image has {PIXELS} pixels (8×8), got {n}"),
            Error::PixelValue { index, value } => write!(f, "pixel {index} is {value}; pixels are 0–16 as in the scikit-learn digits"),
            Error::Label(l) => write!(f, "label {l} is not a digit 0–9"),
            Error::NoExamples => write!(f, "teaching needs at least one labelled example"),
            Error::Layout(name) => write!(f, "parameter `{name}` differs between the inference and teach modules"),
        }
    }
}

impl std::error::Error for Error {}

/// The model the page runs: the inference module's state (its head, updated by teaching) and the
/// teach module's state (the same head plus Adam's moments).
pub struct Digits {
    infer: Box<digits_infer::State>,
    infer_arena: Box<digits_infer::Arena>,
    teach: Box<digits_teach::State>,
    teach_arena: Box<digits_teach::TrainArena>,
    steps: u64,
}

impl Default for Digits {
    fn default() -> Self {
        Self::new()
    }
}

impl Digits {
    /// The model as examples/finetune-digits trained it.
    pub fn new() -> Self {
        let mut d = Digits {
            infer: Box::new(digits_infer::State::new()),
            infer_arena: Box::new(digits_infer::Arena::new()),
            teach: Box::new(digits_teach::State::new()),
            teach_arena: Box::new(digits_teach::TrainArena::new()),
            steps: 0,
        };
        d.reset();
        d
    }

    /// Forget what was taught: the compiled weights again, zero moments.
    pub fn reset(&mut self) {
        digits_infer::Model::new(&mut self.infer);
        digits_teach::Model::new(&mut self.teach);
        self.steps = 0;
    }

    /// The parameters teaching changes (the last layer), by name, as they are now.
    pub fn head(&mut self) -> Vec<(&'static str, Vec<f32>)> {
        let model = digits_infer::Model::resume(&mut self.infer, 0);
        digits_infer::PARAMS.iter().enumerate().filter(|(_, p)| p.trainable).map(|(i, p)| (p.name, model.param(i).to_vec())).collect()
    }

    /// Teach steps taken since the last reset.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// The ten class probabilities (softmax of the logits) of one image.
    pub fn predict(&mut self, pixels: &[f32]) -> Result<[f32; CLASSES], Error> {
        let x = scaled(pixels)?;
        let model = digits_infer::Model::resume(&mut self.infer, 0);
        let logits = model.forward(&mut self.infer_arena, &x).logits;
        Ok(softmax(logits))
    }

    /// One `train_step` of the head on the user's examples (cycled to fill the batch of
    /// [`TEACH_BATCH`]); returns its loss (mean cross-entropy before the update). The updated
    /// head is what [`Digits::predict`] uses from then on.
    pub fn teach(&mut self, examples: &[Example]) -> Result<f32, Error> {
        if examples.is_empty() {
            return Err(Error::NoExamples);
        }
        let mut x = [0f32; TEACH_BATCH * PIXELS];
        let mut y = [0i64; TEACH_BATCH];
        for (i, (xs, ys)) in x.chunks_exact_mut(PIXELS).zip(&mut y).enumerate() {
            let e = &examples[i % examples.len()];
            if e.label as usize >= CLASSES {
                return Err(Error::Label(e.label));
            }
            xs.copy_from_slice(&scaled(&e.pixels)?);
            *ys = e.label as i64;
        }
        let mut teach = digits_teach::Model::resume(&mut self.teach, self.steps);
        let loss = teach.train_step(&mut self.teach_arena, &x, &y);
        self.steps = teach.step();
        // The teach module's head into the inference module's state.
        let mut infer = digits_infer::Model::resume(&mut self.infer, 0);
        for (i, p) in digits_teach::PARAMS.iter().enumerate().filter(|(_, p)| p.trainable) {
            let to = digits_infer::param_index(p.name).ok_or(Error::Layout(p.name))?;
            infer.set_param(to, teach.param(i)).map_err(|_| Error::Layout(p.name))?;
        }
        Ok(loss)
    }
}

/// An image the model takes: 64 pixels, each a number in 0..=16.
pub fn check(pixels: &[f32]) -> Result<(), Error> {
    if pixels.len() != PIXELS {
        return Err(Error::PixelCount(pixels.len()));
    }
    // `contains` is false for NaN too.
    match pixels.iter().position(|v| !(0.0..=16.0).contains(v)) {
        Some(index) => Err(Error::PixelValue { index, value: pixels[index] }),
        None => Ok(()),
    }
}

/// The model's input: pixels 0–16 divided by 16, as examples/finetune-digits trained it.
pub(crate) fn scaled(pixels: &[f32]) -> Result<[f32; PIXELS], Error> {
    check(pixels)?;
    let mut x = [0f32; PIXELS];
    for (d, &value) in x.iter_mut().zip(pixels) {
        *d = value / 16.0;
    }
    Ok(x)
}

pub(crate) fn softmax(logits: &[f32; CLASSES]) -> [f32; CLASSES] {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut p = logits.map(|l| (l - max).exp());
    let sum: f32 = p.iter().sum();
    p.iter_mut().for_each(|v| *v /= sum);
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        let mut d = Digits::new();
        assert_eq!(d.predict(&[0.0; 63]), Err(Error::PixelCount(63)));
        let mut px = [0f32; PIXELS];
        px[5] = f32::NAN;
        assert!(matches!(d.predict(&px), Err(Error::PixelValue { index: 5, .. })));
        px[5] = 17.0;
        assert!(matches!(d.predict(&px), Err(Error::PixelValue { index: 5, .. })));
        assert_eq!(d.teach(&[]), Err(Error::NoExamples));
        assert_eq!(d.teach(&[Example { pixels: [0.0; PIXELS], label: 10 }]), Err(Error::Label(10)));
    }

    #[test]
    fn probabilities_sum_to_one_and_teaching_moves_them() {
        let mut d = Digits::new();
        let mut px = [0f32; PIXELS];
        for r in 0..8 {
            px[r * 8 + 3] = 16.0;
            px[r * 8 + 4] = 12.0;
        }
        let before = d.predict(&px).expect("valid image");
        assert!((before.iter().sum::<f32>() - 1.0).abs() < 1e-5);
        let ex = [Example { pixels: px, label: 7 }];
        let first = d.teach(&ex).expect("valid example");
        for _ in 0..20 {
            d.teach(&ex).expect("valid example");
        }
        let after = d.predict(&px).expect("valid image");
        assert!(after[7] > before[7], "teaching 7 raised p(7): {} -> {}", before[7], after[7]);
        assert!(d.teach(&ex).expect("valid example") < first, "the loss fell");
        // Reset gives the compiled model back, bit for bit.
        d.reset();
        assert_eq!(d.predict(&px).expect("valid image"), before);
        assert_eq!(d.steps(), 0);
    }
}
