//! `burnc inspect MODEL [--input NAME=DIMS]...`: ops, shapes, parameters, FLOPs.
use super::inputs::pin_inputs;
use super::CliError;
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct InspectArgs {
    pub model: PathBuf,
    /// Pin an input's dims: NAME=1x3x224x224.
    #[arg(long = "input", value_name = "NAME=DIMS")]
    pub inputs: Vec<String>,
    /// Also print the graph, one node a line.
    #[arg(long)]
    pub graph: bool,
    /// Write a picture of the memory plan (buffers over the schedule at their arena offsets,
    /// the peak marked) as SVG.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    #[command(flatten)]
    pub weights: super::weights::WeightsArgs,
    /// The choices `burnc MODEL -o` takes, so the plan printed is the one it compiles.
    #[command(flatten)]
    pub codegen: super::codegen_flags::CodegenFlags,
}

pub fn inspect(a: InspectArgs) -> Result<(), CliError> {
    let model = burnc_frontends::onnx::load(&a.model)?;
    let mut g = model.graph;
    a.weights.apply(&mut g)?;
    // Bounded dims (`{h<=640}`) stay symbolic here; the plan at the bounds is printed last.
    let specs = a
        .inputs
        .iter()
        .map(|p| {
            let (n, d) = p.split_once('=').ok_or_else(|| CliError::Usage(format!("expected NAME=DIMS, got `{p}`")))?;
            Ok((n.to_string(), burnc::build::parse_pin_dims(d)?))
        })
        .collect::<Result<Vec<_>, CliError>>()?;
    let bounded = burnc::build::has_bounded(&specs);
    if bounded {
        for (n, d) in &specs {
            burnc::build::pin_input_dims(&mut g, n, d)?;
        }
    } else {
        pin_inputs(&mut g, &a.inputs)?;
    }
    let loaded = bounded.then(|| g.clone());
    burnc_compiler::passes::prepare(&mut g)?;
    println!("model: {} (opset {}, producer `{}`)", a.model.display(), model.opset, model.producer);
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for n in &g.nodes {
        *counts.entry(n.op.name()).or_default() += 1;
    }
    println!("ops ({} nodes):", g.nodes.len());
    for (op, c) in &counts {
        println!("  {op:<24} {c}");
    }
    println!("inputs:");
    for &i in &g.inputs {
        println!("  {}: {}", g.value(i).name, type_str(&g.value(i).ty));
    }
    println!("outputs:");
    for &o in &g.outputs {
        println!("  {}: {}", g.value(o).name, type_str(&g.value(o).ty));
    }
    let (count, bytes) = g.params().fold((0usize, 0usize), |(c, b), (_, p)| {
        let n: usize = p.shape.iter().product();
        (c + n, b + p.bytes.len())
    });
    println!("parameters: {count} ({bytes} bytes)");
    let flops = burnc_compiler::passes::cost::graph_flops(&g);
    match flops.unknown {
        0 => println!("flops: {} ({:.3} GFLOP)", flops.total, flops.total as f64 / 1e9),
        n => println!("flops: {} ({:.3} GFLOP) + {n} nodes of unknown cost (shapes not static)", flops.total, flops.total as f64 / 1e9),
    }
    if a.graph {
        print!("{g}");
    }
    // What generated code fuses, and the memory plan and weights blob of the module
    // `burnc MODEL -o` writes with the same flags (the memory line as it prints it).
    let opts = a.codegen.options().codegen("model.bin", "model");
    match burnc_compiler::codegen::plan(&g, &opts) {
        Ok(plan) => {
            let report = &plan.fusion;
            if !report.is_empty() {
                use burnc_compiler::passes::fuse::Role;
                println!("fused ({} groups):", report.groups.len());
                for gr in &report.groups {
                    let parts: Vec<String> = gr
                        .nodes
                        .iter()
                        .map(|(op, name, role)| match role {
                            Role::Base => format!("{op} `{name}`"),
                            Role::Folded => format!("{op} `{name}` (folded into the weights)"),
                            Role::Epilogue => format!("{op} `{name}` (in the output loop)"),
                        })
                        .collect();
                    println!("  {}", parts.join(" + "));
                }
            }
            println!("memory plan: {} bytes of buffers without reuse, {} nodes", plan.memory.total_buffer_bytes, plan.memory.order.len());
            if let Some(path) = &a.svg {
                let title = a.model.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
                let svg = burnc_compiler::memory_svg::render(&plan.graph, &plan.memory, &title);
                std::fs::write(path, svg).map_err(|e| CliError::File { path: path.display().to_string(), reason: e.to_string() })?;
                println!("memory plan picture: {}", path.display());
            }
            match burnc_compiler::codegen::generate_planned(plan, &opts) {
                Ok(gen) => println!("{}", burnc::build::memory_line(&gen)),
                Err(e) => println!("memory: unavailable ({e})"),
            }
        }
        Err(e) => println!("memory: unavailable ({e})"),
    }
    if let Some(l) = loaded {
        match burnc_compiler::codegen::generate_bounded(&l, &Default::default()) {
            Ok((gen, info)) => {
                let dims: Vec<String> = info.dims.iter().map(|(n, b)| format!("{n} <= {b}")).collect();
                println!("bounded dims: {}", dims.join(", "));
                for (d, ex) in gen.outputs.iter().zip(&info.output_shapes) {
                    let s: Vec<String> = ex.iter().map(|e| e.to_string()).collect();
                    println!("  output {}: [{}]", d.name, s.join(", "));
                }
                println!("memory at the bounds: arena_bytes={} lower_bound_bytes={} weights_bytes={}", gen.arena_bytes, gen.lower_bound_bytes, gen.weights_bytes);
            }
            Err(e) => println!("bounded codegen: unavailable ({e})"),
        }
    }
    Ok(())
}

fn type_str(t: &burnc_compiler::ir::ValueType) -> String {
    use burnc_compiler::ir::ValueType;
    match t {
        ValueType::Tensor(tt) => match &tt.shape {
            Some(s) => format!("{} {}", tt.dtype, s),
            None => format!("{} [?]", tt.dtype),
        },
        ValueType::Sequence(d) => format!("sequence<{}>", d.map(|d| d.name()).unwrap_or("?")),
        ValueType::Optional(_) => "optional".into(),
        ValueType::Unknown => "?".into(),
    }
}
