//! Optimizer updates. In generated training code the node has no outputs and updates the
//! parameter and its moments in place in the state buffer; with outputs (a train graph
//! compiled as a plain function) it copies them first and updates the copies.
use super::Ctx;
use crate::codegen::CodegenError;
use crate::ir::{DType, Node, Op};

pub fn emit(cx: &Ctx, n: &Node) -> Result<Option<String>, CodegenError> {
    let Op::ParamUpdate { rule } = &n.op else { return Err(cx.err(n, "not an optimizer update")) };
    let p = cx.input(n, 0)?;
    let g = cx.input(n, 1)?;
    for (v, what) in [(p, "parameter"), (g, "gradient")] {
        if cx.ty(n, v)?.0 != DType::F32 {
            return Err(cx.err(n, format!("the {what} must be f32 for codegen")));
        }
    }
    let lr = cx.read(n, cx.input(n, 2)?)?;
    let step = cx.read(n, cx.input(n, 3)?)?;
    let k = rule.moments();
    let mut s = String::new();
    let (pw, mut ms) = if n.outputs.is_empty() {
        let mut ms = Vec::new();
        for i in 0..k {
            ms.push(cx.write_state(n, cx.input(n, 4 + i)?)?);
        }
        (cx.write_state(n, p)?, ms)
    } else {
        if n.outputs.len() != 1 + k {
            return Err(cx.err(n, format!("{} outputs for {k} moments", n.outputs.len())));
        }
        let copy = |i: usize, o: usize, s: &mut String| -> Result<String, CodegenError> {
            s.push_str(&format!("let out_{o} = {};\nout_{o}.copy_from_slice({});\n", cx.write(n, n.outputs[o])?, cx.read(n, cx.input(n, i)?)?));
            Ok(format!("out_{o}"))
        };
        let pw = copy(0, 0, &mut s)?;
        let mut ms = Vec::new();
        for i in 0..k {
            ms.push(copy(4 + i, 1 + i, &mut s)?);
        }
        (pw, ms)
    };
    while ms.len() < 2 {
        ms.push("&mut []".into());
    }
    s.push_str(&format!(
        "rt::train::optim::step(&rt::train::optim::Rule::{rule:?}, {pw}, {}, {}, {}, ({lr})[0], ({step})[0].max(0) as u64);",
        cx.read(n, g)?,
        ms[0],
        ms[1]
    ));
    Ok(Some(s))
}
