//! Memory plans of the light model-zoo CNNs stay within 10% of the lower bound.
//! Needs conformance-data/light (made by the conformance test); skips without it.
use burnc_compiler::ir::{Graph, NodeId, Op};
use burnc_compiler::memory::{plan, PlanOptions};
use std::path::Path;

fn im2col_bytes(g: &Graph, n: NodeId) -> usize {
    let node = g.node(n);
    let Op::Conv { window, group } = &node.op else { return 0 };
    let shape = |v| g.tensor_type(v).and_then(|t| t.shape.as_ref()).and_then(|s| s.as_fixed());
    let (Some(Some(x)), Some(Some(w)), Some(y)) = (node.inputs.first(), node.inputs.get(1), node.outputs.first()) else { return 0 };
    let (Some(xs), Some(ws), Some(ys)) = (shape(*x), shape(*w), shape(*y)) else { return 0 };
    let kernel: usize = if window.kernel_shape.is_empty() { ws[2..].iter().product() } else { window.kernel_shape.iter().product() };
    xs[1] / (*group).max(1) * kernel * ys[2..].iter().product::<usize>() * 4
}

fn elementwise(g: &Graph, n: NodeId, i: usize) -> bool {
    let node = g.node(n);
    if !matches!(node.op, Op::Unary(_) | Op::Binary(_)) {
        return false;
    }
    let (Some(Some(x)), Some(y)) = (node.inputs.get(i), node.outputs.first()) else { return false };
    match (g.tensor_type(*x), g.tensor_type(*y)) {
        (Some(a), Some(b)) => a.dtype == b.dtype && a.shape.as_ref().and_then(|s| s.numel()) == b.shape.as_ref().and_then(|s| s.numel()),
        _ => false,
    }
}

#[test]
fn light_models_pack_within_ten_percent_of_the_lower_bound() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance-data/light");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        eprintln!("skipped: {} is absent (run the conformance test to generate it)", dir.display());
        return;
    };
    let mut models: Vec<_> = entries.flatten().map(|e| e.path().join("model.onnx")).filter(|p| p.exists()).collect();
    models.sort();
    let opts = PlanOptions { scratch: &im2col_bytes, can_inplace: &elementwise, ..PlanOptions::default() };
    for m in &models {
        let mut g = burnc_frontends::onnx::load(m).unwrap().graph;
        burnc_compiler::passes::prepare(&mut g).unwrap();
        let p = plan(&g, &opts).unwrap();
        let ratio = p.arena_bytes as f64 / p.lower_bound_bytes.max(1) as f64;
        eprintln!(
            "{:<22} arena {:>10} lower {:>10} ratio {:.3} total {:>11} weights {:>10} inplace {} aliases {}",
            m.parent().unwrap().file_name().unwrap().to_string_lossy(),
            p.arena_bytes, p.lower_bound_bytes, ratio, p.total_buffer_bytes, p.weights_bytes, p.inplace.len(), p.aliases.len()
        );
        assert!(ratio <= 1.10, "{}: arena {} > 1.10 x lower bound {}", m.display(), p.arena_bytes, p.lower_bound_bytes);
    }
}
