//! f16 / bf16 through the f32 / f64 kernels, as the interpreter runs them: inputs widened into
//! scratch, the kernel in the working type, each result rounded once into the output.
use crate::ir::DType;

pub fn is_half(d: DType) -> bool {
    matches!(d, DType::F16 | DType::BF16)
}

/// Bind each `(name, len)` to its own `&mut [w]` piece of the scratch slice `scratch`.
pub fn carve(scratch: &str, w: &str, parts: &[(&str, usize)]) -> String {
    let mut s = format!("let rest: &mut [{w}] = {scratch};\n");
    for (name, len) in parts {
        s += &format!("let ({name}, rest) = rest.split_at_mut({len});\n");
    }
    s + "let _ = rest;\n"
}

/// Statements copying `src` (f16 / bf16 elements) widened to `w` ("f32" or "f64") into `dst`.
pub fn widen(dst: &str, src: &str, w: &str) -> String {
    format!("for (d, s) in {dst}.iter_mut().zip({src}) {{ *d = s.to_{w}(); }}\n")
}

/// Statements rounding `src` (`w` elements) into `dst` of type `t` (f16 / bf16).
pub fn narrow(dst: &str, src: &str, t: &str, w: &str) -> String {
    format!("for (o, s) in {dst}.iter_mut().zip({src}.iter()) {{ *o = {t}::from_{w}(*s); }}\n")
}
