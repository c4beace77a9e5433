//! Window ops (convolution, pooling) as both GPU targets print them, one output element per
//! thread: the element's output position, the loops over the taps that skip the padding, and
//! the averaging divisor.
use super::Dialect;
use crate::ir::Window;
use burnc_runtime::kernels::window::Window3;

/// The window of a pool over input `x` (N, C, spatial…): its kernel is the spatial dims when
/// the pool gives none.
pub fn pool_window(window: &Window, x: &[usize]) -> Result<Window3, String> {
    let kernel = if window.kernel_shape.is_empty() { x[2..].to_vec() } else { window.kernel_shape.clone() };
    crate::ops::window::resolve(window, &kernel, &x[2..])
}

/// The input position along `axis` (0: depth, 1: height, 2: width) that tap `k` reads for
/// output position `o` (C-like names or expressions, i32).
pub fn tap_pos(win: &Window3, axis: usize, o: &str, k: &str) -> String {
    format!("{o} * {} + {k} * {} - {}", win.strides[axis], win.dilations[axis], win.pads_begin[axis])
}

/// The output position of flat index `i` of a window op (`ox`, `oy`, `oz`, as i32).
pub fn out_coords(d: Dialect, win: &Window3, i: &str) -> String {
    let [od, oh, ow] = win.output;
    let ix = |n: usize| d.index(n);
    d.join(&[
        d.int_let("ox", &d.to_int(&format!("{i} % {}", ix(ow)))),
        d.int_let("oy", &d.to_int(&format!("({i} / {}) % {}", ix(ow), ix(oh)))),
        d.int_let("oz", &d.to_int(&format!("({i} / {}) % {}", ix(oh * ow), ix(od)))),
    ])
}

/// Loops over a window's taps at output position (`oz`, `oy`, `ox`), skipping those in the
/// padding: `body` sees the tap (`kz`, `ky`, `kx`) and the input position (`z`, `yy`, `xx`).
pub fn window_taps(d: Dialect, win: &Window3, body: &str) -> String {
    let mut s = String::new();
    for (axis, (k, o, at)) in [("kz", "oz", "z"), ("ky", "oy", "yy"), ("kx", "ox", "xx")].into_iter().enumerate() {
        let n = win.input[axis];
        s += &format!("{} {{ {} {}\n", d.int_loop(k, win.kernel[axis]), d.int_let(at, &tap_pos(win, axis, o, k)), d.continue_if(&format!("{at} < 0 || {at} >= {n}")));
    }
    s + body + "\n} } }"
}

/// The statements setting `den`, the divisor of an average pool at output position (`oz`,
/// `oy`, `ox`): the window clipped to the padded input when pads count, else the taps read
/// (`cnt`, counted by the loop).
pub fn pool_divisor(d: Dialect, win: &Window3, count_include_pad: bool) -> String {
    if !count_include_pad {
        return d.int_let("den", "cnt");
    }
    // Taps from the first position to the last one inside the padded input, per axis.
    let taps = |axis: usize, o: &str| {
        let (s, k, dl, p) = (win.strides[axis], win.kernel[axis], win.dilations[axis], win.pads_begin[axis]);
        format!("(min({o} * {s} + ({k} - 1) * {dl} - {p}, {} + {} - 1) - ({o} * {s} - {p})) / {dl} + 1", win.input[axis], win.pads_end[axis])
    };
    format!("{}\nden *= {};\nden *= {};", d.int_var("den", &taps(0, "oz")), taps(1, "oy"), taps(2, "ox"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn win() -> Window3 {
        Window3 { input: [1, 5, 6], output: [1, 3, 3], kernel: [1, 3, 2], strides: [1, 2, 2], dilations: [1, 1, 2], pads_begin: [0, 1, 0], pads_end: [0, 1, 0] }
    }

    #[test]
    fn both_dialects_write_the_same_window() {
        assert_eq!(out_coords(Dialect::Cuda, &win(), "i"), "int ox = i % 3; int oy = (i / 3) % 3; int oz = (i / 9) % 1;");
        assert_eq!(out_coords(Dialect::Wgsl, &win(), "e"), "let ox = i32(e % 3u);\nlet oy = i32((e / 3u) % 3u);\nlet oz = i32((e / 9u) % 1u);");
        let cuda = window_taps(Dialect::Cuda, &win(), "B");
        assert!(cuda.starts_with("for (int kz = 0; kz < 1; ++kz) { int z = oz * 1 + kz * 1 - 0; if (z < 0 || z >= 1) continue;\n"), "{cuda}");
        assert!(cuda.ends_with("if (xx < 0 || xx >= 6) continue;\nB\n} } }"), "{cuda}");
        let wgsl = window_taps(Dialect::Wgsl, &win(), "B");
        assert!(wgsl.contains("for (var ky = 0; ky < 3; ky++) { let yy = oy * 2 + ky * 1 - 1; if (yy < 0 || yy >= 5) { continue; }\n"), "{wgsl}");
        assert_eq!(pool_divisor(Dialect::Wgsl, &win(), false), "let den = cnt;");
        assert!(pool_divisor(Dialect::Cuda, &win(), true).starts_with("int den = (min(oz * 1 + (1 - 1) * 1 - 0, 1 + 0 - 1) - (oz * 1 - 0)) / 1 + 1;\nden *= "));
    }
}
