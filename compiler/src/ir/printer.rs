//! Text form of a graph, one node a line, for `burnc inspect --graph` and debugging.
use super::{Graph, ValueId, ValueKind, ValueType};
use std::fmt::{self, Write};

fn type_str(t: &ValueType) -> String {
    match t {
        ValueType::Tensor(tt) => match &tt.shape {
            Some(s) => format!("{}{}", tt.dtype, s),
            None => format!("{}[?]", tt.dtype),
        },
        ValueType::Sequence(d) => format!("seq<{}>", d.map(|d| d.name()).unwrap_or("?")),
        ValueType::Optional(inner) => format!("opt<{}>", type_str(inner)),
        ValueType::Unknown => "?".into(),
    }
}

impl Graph {
    fn value_ref(&self, id: ValueId) -> String {
        format!("%{}", self.value(id).name)
    }
}

impl fmt::Display for Graph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "graph {} {{", self.name)?;
        for &i in &self.inputs {
            writeln!(f, "  input {}: {}", self.value_ref(i), type_str(&self.value(i).ty))?;
        }
        for v in &self.values {
            match &v.kind {
                ValueKind::Param(p) => writeln!(f, "  param %{}: {}{:?}", v.name, p.dtype, p.shape)?,
                ValueKind::Const(t) if t.numel() <= 8 => {
                    writeln!(f, "  const %{}: {}{:?} = {:?}", v.name, t.dtype(), t.shape, t.to_f64_vec())?
                }
                ValueKind::Const(t) => writeln!(f, "  const %{}: {}{:?}", v.name, t.dtype(), t.shape)?,
                _ => {}
            }
        }
        for n in &self.nodes {
            let mut line = String::from("  ");
            for (i, o) in n.outputs.iter().enumerate() {
                if i > 0 {
                    line.push_str(", ");
                }
                let _ = write!(line, "{}: {}", self.value_ref(*o), type_str(&self.value(*o).ty));
            }
            let args: Vec<String> =
                n.inputs.iter().map(|i| i.map(|i| self.value_ref(i)).unwrap_or_else(|| "_".into())).collect();
            let _ = write!(line, " = {}({})", n.op.name(), args.join(", "));
            writeln!(f, "{line}")?;
        }
        let outs: Vec<String> = self.outputs.iter().map(|&o| self.value_ref(o)).collect();
        writeln!(f, "  return {}", outs.join(", "))?;
        writeln!(f, "}}")
    }
}
