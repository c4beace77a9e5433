//! Dropout. Inference mode is the identity: a free alias of its input where the memory plan
//! made it one (`schedule::alias_source`), else a copy; a requested mask is all ones. Training
//! mode calls the runtime's counter-based kernel with the key read at run time.
use super::{Ctx, CodegenError};
use crate::ir::{Node, NodeId, Op};

pub fn emit(cx: &Ctx, _id: NodeId, n: &Node) -> Result<Option<String>, CodegenError> {
    let Op::Dropout { ratio, training } = &n.op else { return Err(cx.err(n, "not a Dropout")) };
    let out = *n.outputs.first().ok_or_else(|| cx.err(n, "no output"))?;
    let x = cx.input(n, 0)?;
    let mask = match n.outputs.get(1) {
        Some(&m) if cx.plan.slots.contains_key(&m) => Some(cx.write(n, m)?),
        _ => None,
    };
    let mut code = String::new();
    if *training {
        let key = n.inputs.get(1).copied().flatten().ok_or_else(|| cx.err(n, "training-mode Dropout needs its key input"))?;
        let m = mask.unwrap_or_else(|| "&mut []".into());
        code.push_str(&format!(
            "rt::kernels::dropout::dropout({}, {}, {}[0] as u64, {}, {m});",
            cx.read(n, x)?,
            cx.write(n, out)?,
            cx.read(n, key)?,
            super::elementwise::f32_lit(*ratio)
        ));
    } else {
        if !cx.plan.aliases.contains_key(&out) {
            code.push_str(&format!("{}.copy_from_slice({});", cx.write(n, out)?, cx.read(n, x)?));
        }
        if let Some(m) = mask {
            code.push_str(&format!("{m}.fill(1);"));
        }
    }
    Ok((!code.is_empty()).then_some(code))
}
