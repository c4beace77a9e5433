//! The `burnc` command line.
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

mod cli;

#[derive(Parser)]
#[command(name = "burnc", version, about = "Ahead-of-time model compiler: ONNX to Rust", args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Model to compile (ONNX).
    model: Option<PathBuf>,
    /// Output Rust module.
    #[arg(short = 'o', long)]
    output: Option<PathBuf>,
    /// Pin an input's dims: NAME=1x3x224x224.
    #[arg(long = "input", value_name = "NAME=DIMS")]
    inputs: Vec<String>,
    /// Bake an input into the model as a constant: NAME=FILE (.pb or .npy).
    #[arg(long = "const", value_name = "NAME=FILE")]
    consts: Vec<String>,
    #[command(flatten)]
    weights: cli::weights::WeightsArgs,
    #[command(flatten)]
    train: cli::train::TrainArgs,
    #[command(flatten)]
    codegen: cli::codegen_flags::CodegenFlags,
    /// What to write: `rust` (the module and its weights, default) or `c-lib` (`-o DIR`:
    /// `DIR/lib<name>.a` and `DIR/<name>.h`, a static library with a C interface).
    #[arg(long, value_enum, default_value = "rust")]
    emit: cli::compile::Emit,
    /// With `--emit c-lib`: the C prefix of the library's names (default: the model's file
    /// stem, made a C identifier).
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    /// With `--emit c-lib`: the rustc target to build the library for (default: this machine),
    /// e.g. `thumbv7em-none-eabihf` (install it with `rustup target add`).
    #[arg(long = "triple", value_name = "TRIPLE")]
    triple: Option<String>,
}

#[derive(Subcommand)]
enum Command {
    /// Run a model with the reference interpreter (no code generation).
    Run(cli::run::RunArgs),
    /// Print ops, shapes, parameters and FLOPs of a model.
    Inspect(cli::inspect::InspectArgs),
    /// Time the generated code, built in release for this CPU (`--threads N` for the pool); the
    /// last line printed is `median_ms=<value>`.
    Bench(cli::bench::BenchArgs),
    /// Run training steps on one batch (interpreter, or generated code with --codegen), print
    /// each step's loss and optionally save the parameters as safetensors.
    Train(cli::train::TrainCmdArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Run(a)) => cli::run::run(a),
        Some(Command::Inspect(a)) => cli::inspect::inspect(a),
        Some(Command::Bench(a)) => cli::bench::bench(a),
        Some(Command::Train(a)) => cli::train::train(a),
        None => match cli.model {
            Some(m) => {
                let options = cli.codegen.options();
                match cli.emit {
                    cli::compile::Emit::Rust if cli.name.is_some() || cli.triple.is_some() => Err(cli::CliError::Usage("--name and --triple go with --emit c-lib".into())),
                    cli::compile::Emit::Rust => cli::compile::compile(&m, cli.output.as_deref(), &cli.inputs, &cli.consts, &cli.weights, &cli.train, &options),
                    cli::compile::Emit::CLib => {
                        let lib = cli::compile::CLibArgs { name: cli.name.as_deref(), triple: cli.triple.as_deref() };
                        cli::compile::compile_c_lib(&m, cli.output.as_deref(), &cli.inputs, &cli.consts, &cli.weights, &cli.train, &options, &lib)
                    }
                }
            }
            None => Err(cli::CliError::Usage("give a model to compile, or a subcommand (run, inspect, bench, train); see --help".into())),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One line, whatever a model's names hold: control characters are escaped.
            eprintln!("error: {}", burnc_compiler::codegen::names::text(&e.to_string()));
            ExitCode::from(1)
        }
    }
}
