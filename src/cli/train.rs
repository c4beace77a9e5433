//! Training options shared by `burnc MODEL -o model.rs --train …` and `burnc train`, and the
//! `burnc train` subcommand: run train steps on one batch through the interpreter or through
//! generated code, print the losses, save the parameters.
use super::inputs::read_value;
use super::CliError;
use burnc::build::{load_train_graphs, write_train_state_safetensors};
use burnc_compiler::interp::{self, RtValue};
use burnc_compiler::tensor::Tensor;
use burnc_compiler::train::{Loss, TrainSpec};
use burnc_runtime::train::optim::Rule;
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug, Clone)]
pub struct TrainArgs {
    /// Also generate `train_step` (forward, loss, backward, optimizer update) and `TRAIN_ARENA_BYTES`.
    #[arg(long)]
    pub train: bool,
    /// cross-entropy (class indices as i64 targets, classes on axis 1) or mse.
    #[arg(long, default_value = "cross-entropy")]
    pub loss: String,
    /// sgd, adam or adamw.
    #[arg(long, default_value = "adam")]
    pub optimizer: String,
    /// Learning rate (generated code can change it with `set_lr`).
    #[arg(long, default_value_t = 1e-3)]
    pub lr: f32,
    /// SGD momentum.
    #[arg(long, default_value_t = 0.0)]
    pub momentum: f32,
    /// SGD dampening.
    #[arg(long, default_value_t = 0.0)]
    pub dampening: f32,
    /// SGD with Nesterov momentum.
    #[arg(long)]
    pub nesterov: bool,
    /// Weight decay: added to the gradient (sgd, adam) or decoupled (adamw).
    #[arg(long)]
    pub weight_decay: Option<f32>,
    #[arg(long, default_value_t = 0.9)]
    pub beta1: f32,
    #[arg(long, default_value_t = 0.999)]
    pub beta2: f32,
    #[arg(long, default_value_t = 1e-8)]
    pub eps: f32,
    /// Train only the parameters whose names match (glob: `*`, `?`); repeatable. Default: all
    /// f32 parameters (BatchNorm running statistics excepted).
    #[arg(long = "trainable", value_name = "PATTERN")]
    pub trainable: Vec<String>,
    /// The model output the loss reads (default: the first).
    #[arg(long = "train-output", id = "train_output", value_name = "NAME")]
    pub train_output: Option<String>,
}

impl TrainArgs {
    pub fn spec(&self) -> Result<TrainSpec, CliError> {
        let loss: Loss = self.loss.parse().map_err(CliError::Usage)?;
        let rule = match self.optimizer.as_str() {
            "sgd" => Rule::Sgd { momentum: self.momentum, dampening: self.dampening, nesterov: self.nesterov, weight_decay: self.weight_decay.unwrap_or(0.0) },
            "adam" => Rule::Adam { beta1: self.beta1, beta2: self.beta2, eps: self.eps, weight_decay: self.weight_decay.unwrap_or(0.0), decoupled: false },
            // torch.optim.AdamW's default decay.
            "adamw" => Rule::Adam { beta1: self.beta1, beta2: self.beta2, eps: self.eps, weight_decay: self.weight_decay.unwrap_or(0.01), decoupled: true },
            other => return Err(CliError::Usage(format!("unknown optimizer `{other}` (sgd, adam, adamw)"))),
        };
        if self.nesterov && (self.momentum <= 0.0 || self.dampening != 0.0) {
            return Err(CliError::Usage("--nesterov needs --momentum > 0 and no dampening".into()));
        }
        if !(self.lr.is_finite() && self.lr >= 0.0) {
            return Err(CliError::Usage(format!("--lr {} is not a non-negative number", self.lr)));
        }
        Ok(TrainSpec { loss, rule, lr: self.lr, trainable: self.trainable.clone(), output: self.train_output.clone() })
    }
}

#[derive(clap::Args)]
pub struct TrainCmdArgs {
    /// The ONNX model.
    pub model: PathBuf,
    /// A model input: NAME=FILE (.npy or .pb); its shape pins the input's dims.
    #[arg(long = "input", short = 'i', value_name = "NAME=FILE")]
    pub inputs: Vec<String>,
    /// The targets (.npy or .pb): class indices (i64) for cross-entropy, values for mse.
    #[arg(long, value_name = "FILE")]
    pub target: PathBuf,
    /// Train steps on this batch.
    #[arg(long, default_value_t = 1)]
    pub steps: u64,
    /// Run the steps through generated code (built in a cache folder) instead of the interpreter.
    #[arg(long)]
    pub codegen: bool,
    /// Write every parameter after the last step to FILE (safetensors).
    #[arg(long, value_name = "FILE")]
    pub save: Option<PathBuf>,
    #[command(flatten)]
    pub train: TrainArgs,
    #[command(flatten)]
    pub weights: super::weights::WeightsArgs,
}

fn shape_of(v: &RtValue) -> Vec<usize> {
    match v {
        RtValue::Tensor(t) => t.shape.clone(),
        _ => vec![],
    }
}

pub fn train(a: TrainCmdArgs) -> Result<(), CliError> {
    let spec = a.train.spec()?;
    // Read the inputs first: their shapes pin the model's dims.
    let model = burnc_frontends::onnx::load(&a.model)?;
    let mut feeds: Vec<(String, RtValue)> = Vec::new();
    for spec_in in &a.inputs {
        let (name, file) = spec_in.split_once('=').ok_or_else(|| CliError::Usage(format!("expected NAME=FILE, got `{spec_in}`")))?;
        let id = model.graph.inputs.iter().copied().find(|&i| model.graph.value(i).name == name).ok_or_else(|| {
            CliError::Usage(format!("the model has no input `{name}`"))
        })?;
        let v = read_value(Path::new(file), &model.graph.value(id).ty)?;
        feeds.push((name.to_string(), v));
    }
    let pins: Vec<(String, Vec<usize>)> = feeds.iter().map(|(n, v)| (n.clone(), shape_of(v))).collect();
    let weights = a.weights.spec()?;
    let (_, tg, frozen) = load_train_graphs(&a.model, &pins, &[], weights.as_ref(), &spec)?;
    let g = &tg.graph;
    let target = read_value(&a.target, &g.value(tg.target).ty)?;
    super::run::check_input(&g.value(tg.target).name, &g.value(tg.target).ty, &target)?;
    for (name, v) in &feeds {
        let id = tg.data_inputs.iter().copied().find(|&i| &g.value(i).name == name).ok_or_else(|| CliError::Usage(format!("`{name}` is not a data input of the train step")))?;
        super::run::check_input(name, &g.value(id).ty, v)?;
    }
    if feeds.len() != tg.data_inputs.len() {
        let missing: Vec<String> = tg.data_inputs.iter().map(|&i| g.value(i).name.clone()).filter(|n| !feeds.iter().any(|(f, _)| f == n)).collect();
        return Err(CliError::Usage(format!("missing inputs: {}", missing.join(", "))));
    }
    if a.codegen {
        return super::train_codegen::run_steps(&a, &spec, &feeds, &target, &pins, weights.as_ref());
    }
    let mut state = tg.initial_state();
    for step in 1..=a.steps {
        let data: Vec<RtValue> = tg
            .data_inputs
            .iter()
            .map(|&i| feeds.iter().find(|(n, _)| n == &g.value(i).name).map(|(_, v)| v.clone()).ok_or_else(|| CliError::Usage(format!("missing input `{}`", g.value(i).name))))
            .collect::<Result<_, _>>()?;
        let ins = tg.step_inputs(data, target.clone(), tg.default_lr, step as i64, &state).map_err(CliError::Usage)?;
        let outs = interp::run(g, ins)?;
        let loss = match &outs[0] {
            RtValue::Tensor(t) => t.to_f64_vec().first().copied().unwrap_or(f64::NAN),
            _ => f64::NAN,
        };
        println!("step={step} loss={loss:.8}");
        state = tg.state_after(&outs).map_err(CliError::Usage)?;
    }
    if let Some(path) = &a.save {
        // Trained values (params only, not moments), then the frozen ones.
        let mut k = 0;
        let mut tensors: Vec<(String, Tensor)> = Vec::new();
        for p in &tg.params {
            tensors.push((p.name.clone(), state[k].clone()));
            k += 1 + p.moments.len();
        }
        tensors.extend(frozen);
        write_train_state_safetensors(path, &tensors)?;
    }
    Ok(())
}
