//! What generated training code needs besides the kernels: optimizer updates over the
//! caller's parameter buffer, and saving parameters as safetensors without an allocator.
pub mod optim;
pub mod safetensors;

/// A trained (or frozen) parameter as the generated module lists it.
#[derive(Debug, Clone, Copy)]
pub struct ParamInfo {
    /// The model's name for it (the ONNX initializer's name).
    pub name: &'static str,
    pub shape: &'static [usize],
    /// Byte offset in the state buffer (trainable) or the weights blob (frozen).
    pub offset: usize,
    /// Elements (f32).
    pub len: usize,
    pub trainable: bool,
}

/// Why a parameter could not be replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamError {
    NoSuchParam,
    /// A frozen parameter lives in the weights blob: replace it there (`set_frozen`).
    Frozen,
    /// A trainable parameter lives in the state: replace it there (`set_param`).
    Trainable,
    /// Expected, given elements (or bytes of a blob).
    Length(usize, usize),
}

impl core::fmt::Display for ParamError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ParamError::NoSuchParam => write!(f, "no such parameter"),
            ParamError::Frozen => write!(f, "the parameter is frozen: replace it in the weights blob"),
            ParamError::Trainable => write!(f, "the parameter is trainable: replace it in the state"),
            ParamError::Length(want, got) => write!(f, "expected {want}, got {got}"),
        }
    }
}
