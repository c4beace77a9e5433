//! `burnc run --codegen --bound F`: every dim of every graph input becomes a named dim bounded
//! by F × its size (sizes 0 and 1 stay fixed: a bounded 1 would not broadcast), the model is compiled once at the bounds (`codegen::generate_bounded`), and
//! the module runs at the inputs' own sizes, which it takes at run time. This runs any model
//! through the bounded-dims path, as the conformance ratchet does with the node suite.
use super::{build_crate, compile_time_only, exec, io_err, HarnessError, Profile};
use crate::build::bake_tensor;
use burnc_compiler::codegen::{self, BoundedInfo, CodegenOptions, Generated};
use burnc_compiler::interp::RtValue;
use burnc_compiler::ir::{DType, Dim, Graph, Shape, TensorType, ValueType};
use burnc_compiler::passes::unseq::{InputForm, OutputForm};
use burnc_compiler::{Data, Tensor};
use std::path::{Path, PathBuf};

/// A bounded module with the feeds and the run-time dims of one run.
pub struct BoundedPrepared {
    pub gen: Generated,
    pub info: BoundedInfo,
    pub feeds: Vec<Tensor>,
    /// The value of each named dim of `info.dims` for these feeds.
    pub dims: Vec<usize>,
    /// The graph input each feed belongs to (inputs baked in as constants have none; a
    /// sequence's items are one feed each, in order).
    pub positions: Vec<usize>,
    /// How the module's tensor outputs regroup into the graph's outputs (sequences, optionals).
    pub outputs: Vec<OutputForm>,
}

impl BoundedPrepared {
    /// Feeds and dims for other input values of the same module (other sizes within the
    /// bounds; baked inputs must keep their values, which is the caller's business).
    pub fn refeed(&self, values: &[RtValue]) -> Result<(Vec<Tensor>, Vec<usize>), HarnessError> {
        let mut feeds = Vec::with_capacity(self.positions.len());
        let mut known: Vec<(String, usize)> = Vec::new();
        let mut last = None;
        for &pos in &self.positions {
            // A sequence's items are consecutive feeds of one position.
            if last == Some(pos) {
                continue;
            }
            last = Some(pos);
            let items = fed_items(values.get(pos)).ok_or_else(|| HarnessError::Msg(format!("input #{pos} must be a tensor, a sequence or an optional")))?;
            for (item, t) in items.iter().enumerate() {
                known.extend(t.shape.iter().enumerate().map(|(k, &n)| (dim_name(pos, item, k), n)));
                feeds.push(t.clone());
            }
        }
        if feeds.len() != self.positions.len() {
            return Err(HarnessError::Msg("the inputs hold another number of tensors than the module takes".into()));
        }
        let dims = self
            .info
            .dims
            .iter()
            .map(|(name, _)| known.iter().find(|(n, _)| n == name).map(|(_, v)| *v))
            .collect::<Option<Vec<usize>>>()
            .ok_or_else(|| HarnessError::Msg("the inputs lack a dim the module takes".into()))?;
        Ok((feeds, dims))
    }

    /// The module's tensor outputs regrouped into the graph's outputs.
    pub fn regroup(&self, tensors: Vec<Tensor>) -> Result<Vec<RtValue>, HarnessError> {
        super::regroup(tensors, &self.outputs)
    }
}

/// The tensors a graph input's value is fed as: a tensor itself, a sequence's items, an
/// optional's content (none when absent); `None` for a form the module cannot take.
fn fed_items(v: Option<&RtValue>) -> Option<Vec<Tensor>> {
    match v? {
        RtValue::Tensor(t) => Some(vec![t.clone()]),
        RtValue::Sequence(items, _) => Some(items.clone()),
        RtValue::Optional(None) => Some(vec![]),
        RtValue::Optional(Some(b)) => match b.as_ref() {
            RtValue::Optional(_) => None,
            inner => fed_items(Some(inner)),
        },
    }
}

/// The name of dim `k` of graph input `pos` (of its item `item` where it is a sequence;
/// no model name reaches it).
fn dim_name(pos: usize, item: usize, k: usize) -> String {
    if item == 0 {
        format!("in{pos}_{k}")
    } else {
        format!("in{pos}_{item}_{k}")
    }
}

/// Generate a bounded module for `values`: each dim of each tensor input is bounded by
/// `factor` × its size. Sizes 0 and 1 stay fixed: bounded code lays a broadcast out for equal
/// dims (a bounded dim that is 1 at run time is refused against a larger one), so a 1 that
/// broadcasts must stay a 1. As with pinned shapes, integer inputs (and float
/// ones that decide shapes) are baked in as constants when the dims alone leave shapes
/// depending on values: first the small 1-D and scalar ones (axes, counts, targets of a
/// shape), then all.
pub fn generate_bounded_for(g: &Graph, values: &[RtValue], factor: usize, opts: &CodegenOptions) -> Result<BoundedPrepared, HarnessError> {
    if factor == 0 {
        return Err(HarnessError::Msg("--bound must be at least 1".into()));
    }
    let g_in = g;
    let attempt = |bake: Bake| -> Result<BoundedPrepared, HarnessError> {
        let mut g = g.clone();
        let mut feeds = Vec::new();
        let mut positions = Vec::new();
        let mut known: Vec<(String, usize)> = Vec::new();
        // Per remaining graph input, in reverse order: its form (sequences and optionals are
        // unrolled into tensors, as with pinned shapes).
        let mut forms = Vec::new();
        let mut bounded_type = |pos: usize, item: usize, t: &Tensor| -> Result<TensorType, HarnessError> {
            let mut dims = Vec::with_capacity(t.rank());
            for (k, &n) in t.shape.iter().enumerate() {
                if n <= 1 {
                    dims.push(Dim::Fixed(n));
                    continue;
                }
                let bound = n.checked_mul(factor).ok_or_else(|| HarnessError::Msg(format!("input #{pos} dim {k}: {n} × {factor} overflows")))?;
                dims.push(Dim::Sym { name: dim_name(pos, item, k), bound: Some(bound) });
                known.push((dim_name(pos, item, k), n));
            }
            Ok(TensorType { dtype: t.dtype(), shape: Some(Shape(dims)) })
        };
        for (pos, v) in values.iter().enumerate().rev() {
            let id = *g.inputs.get(pos).ok_or_else(|| HarnessError::Msg(format!("the model has no input #{pos}")))?;
            let items = fed_items(Some(v)).ok_or_else(|| HarnessError::Msg(format!("input #{pos}: codegen does not support nested optionals")))?;
            if let RtValue::Tensor(t) = v {
                let operand = t.dtype().is_int() || t.dtype() == DType::Bool || compile_time_only(&g, id);
                let small = t.rank() <= 1 && t.numel() <= 16;
                if operand && (bake == Bake::All || (bake == Bake::Small && small)) {
                    bake_tensor(&mut g, pos, t.clone());
                    continue;
                }
            }
            let types = items.iter().enumerate().map(|(item, t)| bounded_type(pos, item, t)).collect::<Result<Vec<_>, _>>()?;
            forms.push(match v {
                RtValue::Tensor(_) => {
                    g.value_mut(id).ty = ValueType::Tensor(types[0].clone());
                    InputForm::Tensor
                }
                RtValue::Sequence(..) => InputForm::Sequence(types),
                RtValue::Optional(None) => InputForm::Optional(None),
                RtValue::Optional(Some(b)) if matches!(b.as_ref(), RtValue::Sequence(..)) => InputForm::OptionalSequence(types),
                RtValue::Optional(Some(_)) => InputForm::Optional(types.into_iter().next()),
            });
            // Reversed below, with the items of each input kept in order.
            for t in items.into_iter().rev() {
                feeds.push(t);
                positions.push(pos);
            }
        }
        // A module whose every input became a constant bounds nothing: it counts only where
        // an input decides shapes (Range's limits, NonMaxSuppression's boxes), which bounded
        // dims cannot express.
        if forms.is_empty() && !values.is_empty() && !(0..values.len()).any(|pos| g_in.inputs.get(pos).is_some_and(|&id| compile_time_only(g_in, id))) {
            return Err(HarnessError::Msg(format!("{NOTHING_BOUNDED}, so no dim is bounded")));
        }
        feeds.reverse();
        positions.reverse();
        forms.reverse();
        let outputs = if forms.iter().all(|f| matches!(f, InputForm::Tensor)) && !burnc_compiler::passes::unseq::has_sequences(&g) {
            vec![OutputForm::Tensor; g.outputs.len()]
        } else {
            burnc_compiler::passes::prepare(&mut g)?;
            burnc_compiler::passes::unseq::unroll_sequences(&mut g, &forms)?
        };
        let (gen, info) = codegen::generate_bounded(&g, opts)?;
        let dims = info
            .dims
            .iter()
            .map(|(name, _)| known.iter().find(|(n, _)| n == name).map(|(_, v)| *v))
            .collect::<Option<Vec<usize>>>()
            .ok_or_else(|| HarnessError::Msg("internal: a bounded dim of the module is no input dim".into()))?;
        Ok(BoundedPrepared { gen, info, feeds, dims, positions, outputs })
    };
    // On failure, the reason of the last attempt: with every operand baked, what is left is a
    // limit of bounded codegen itself, not of values the dims leave open.
    // When baking every input leaves nothing bounded, the reason of the attempt before says
    // what bounded codegen lacks.
    let mut reason = None;
    for bake in [Bake::None, Bake::Small, Bake::All] {
        match attempt(bake) {
            Ok(p) => return Ok(p),
            Err(HarnessError::Msg(m)) if m.starts_with(NOTHING_BOUNDED) && reason.is_some() => break,
            Err(e) => reason = Some(e),
        }
    }
    Err(reason.unwrap_or_else(|| HarnessError::Msg(format!("{NOTHING_BOUNDED}, so no dim is bounded"))))
}

/// The refusal of a module whose inputs all became constants.
const NOTHING_BOUNDED: &str = "bounded dims: every input is baked in as a constant";

/// Which integer inputs [`generate_bounded_for`] bakes in as constants.
#[derive(Clone, Copy, PartialEq)]
enum Bake {
    None,
    Small,
    All,
}

/// Build the bounded module's harness (`bounded_main_rs`) in the cache.
pub fn build_bounded(p: &BoundedPrepared, key: &str) -> Result<PathBuf, HarnessError> {
    let main = super::bounded_main_rs(&p.gen, &p.info);
    let files: [(&str, &[u8]); 3] = [("src/model.rs", p.gen.source.as_bytes()), ("src/model.bin", &p.gen.weights), ("src/main.rs", main.as_bytes())];
    build_crate(&format!("bounded {key}"), &files, Profile::Run)
}

/// Run a built bounded harness on the prepared feeds at their dims; the outputs have the
/// shapes `forward` reports.
pub fn run_bounded(bin: &Path, p: &BoundedPrepared, work: &Path) -> Result<Vec<RtValue>, HarnessError> {
    run_bounded_on(bin, p, &p.feeds, &p.dims, work)
}

/// [`run_bounded`] on other feeds and dims ([`BoundedPrepared::refeed`]).
pub fn run_bounded_on(bin: &Path, p: &BoundedPrepared, feeds: &[Tensor], dims: &[usize], work: &Path) -> Result<Vec<RtValue>, HarnessError> {
    std::fs::create_dir_all(work).map_err(|e| io_err(work, e))?;
    for (k, t) in feeds.iter().enumerate() {
        let path = work.join(format!("in_{k}.bin"));
        std::fs::write(&path, t.data.to_le_bytes()).map_err(|e| io_err(&path, e))?;
    }
    let mut args: Vec<String> = vec![work.display().to_string()];
    args.extend(dims.iter().map(|d| d.to_string()));
    exec(bin, &args)?;
    let mut outs = Vec::with_capacity(p.gen.outputs.len());
    for (i, d) in p.gen.outputs.iter().enumerate() {
        let (bin_path, shape_path) = (work.join(format!("out_{i}.bin")), work.join(format!("out_{i}.shape")));
        let bytes = std::fs::read(&bin_path).map_err(|e| io_err(&bin_path, e))?;
        let shape_text = std::fs::read_to_string(&shape_path).map_err(|e| io_err(&shape_path, e))?;
        let shape = shape_text.split_whitespace().map(|s| s.parse::<usize>()).collect::<Result<Vec<_>, _>>().map_err(|e| io_err(&shape_path, e))?;
        let data = Data::from_le_bytes(d.dtype, &bytes).ok_or_else(|| HarnessError::Msg(format!("output {i} has a bad size")))?;
        if data.len() != shape.iter().product::<usize>() {
            return Err(HarnessError::Msg(format!("output {i}: {} elements for shape {shape:?}", data.len())));
        }
        outs.push(Tensor::new(shape, data));
    }
    p.regroup(outs)
}
