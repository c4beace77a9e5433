//! Attributes of RNN / GRU / LSTM: direction, hidden size, layout, clip and the activation
//! list resolved to one entry per gate function and direction.
use super::attrs::Attrs;
use burnc_compiler::ir::{RnnAct, RnnAttrs, RnnCell, RnnDirection};

/// `op_type` is "RNN", "GRU" or "LSTM".
pub fn rnn_attrs(op_type: &str, a: &Attrs) -> Result<RnnAttrs, String> {
    let cell = match op_type {
        "RNN" => RnnCell::Rnn,
        "GRU" => RnnCell::Gru { linear_before_reset: a.i_or("linear_before_reset", 0) != 0 },
        _ => RnnCell::Lstm { input_forget: a.i_or("input_forget", 0) != 0 },
    };
    let direction = match a.s_or("direction", "forward").as_str() {
        "forward" => RnnDirection::Forward,
        "reverse" => RnnDirection::Reverse,
        "bidirectional" => RnnDirection::Bidirectional,
        d => return Err(format!("unknown direction `{d}`")),
    };
    let hidden_size = match a.i("hidden_size") {
        Some(h) => Some(usize::try_from(h).map_err(|_| format!("negative hidden_size {h}"))?),
        None => None,
    };
    let per_dir = cell.acts();
    let defaults: &[&str] = match cell {
        RnnCell::Rnn => &["Tanh"],
        RnnCell::Gru { .. } => &["Sigmoid", "Tanh"],
        RnnCell::Lstm { .. } => &["Sigmoid", "Tanh", "Tanh"],
    };
    let names: Vec<String> = match a.0.iter().find(|x| x.name() == "activations") {
        Some(x) => x.strings.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect(),
        None => defaults.iter().map(|s| s.to_string()).collect(),
    };
    let dirs = direction.count();
    // A list for one direction serves both.
    let names: Vec<String> = if names.len() == per_dir && dirs == 2 { [names.clone(), names].concat() } else { names };
    if names.len() != per_dir * dirs {
        return Err(format!("activations: expected {} entries ({per_dir} per direction), got {}", per_dir * dirs, names.len()));
    }
    // alpha/beta are consumed in order by the activations that take them (onnxruntime's rule).
    let mut alphas = a.floats("activation_alpha").unwrap_or_default().into_iter();
    let mut betas = a.floats("activation_beta").unwrap_or_default().into_iter();
    let activations = names
        .iter()
        .map(|name| {
            let mut al = |d: f32| alphas.next().unwrap_or(d);
            Ok(match name.to_ascii_lowercase().as_str() {
                "relu" => RnnAct::Relu,
                "tanh" => RnnAct::Tanh,
                "sigmoid" => RnnAct::Sigmoid,
                "affine" => RnnAct::Affine(al(1.0), betas.next().unwrap_or(0.0)),
                "leakyrelu" => RnnAct::LeakyRelu(al(0.01)),
                "thresholdedrelu" => RnnAct::ThresholdedRelu(al(1.0)),
                "scaledtanh" => RnnAct::ScaledTanh(al(1.0), betas.next().unwrap_or(1.0)),
                "hardsigmoid" => RnnAct::HardSigmoid(al(0.2), betas.next().unwrap_or(0.5)),
                "elu" => RnnAct::Elu(al(1.0)),
                "softsign" => RnnAct::Softsign,
                "softplus" => RnnAct::Softplus,
                other => return Err(format!("unknown activation `{other}`")),
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let clip = match a.f("clip") {
        Some(c) if c <= 0.0 => return Err(format!("clip must be positive, got {c}")),
        c => c,
    };
    Ok(RnnAttrs { cell, direction, hidden_size, activations, clip, batch_first: a.i_or("layout", 0) != 0 })
}
