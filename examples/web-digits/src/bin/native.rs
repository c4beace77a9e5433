//! The native build of the page's model, for the browser test: reads commands on stdin, one a
//! line, and answers each on stdout, running the same `Digits` the page runs in wasm.
//!
//!     predict P0 … P63            →  probs Q0 … Q9
//!     teach L:P0,…,P63 L:P0,…     →  loss X
//!     reset                       →  reset
//!
//! Pixels are 0–16, labels 0–9; numbers are printed so that they read back as the same f32.
//! A bad line prints `error: …` on stderr and exits with status 1.
use std::io::{BufRead, Write};
use web_digits::{Digits, Example, PIXELS};

fn numbers(text: &str, sep: char) -> Result<Vec<f32>, String> {
    text.split(sep).filter(|t| !t.is_empty()).map(|t| t.parse::<f32>().map_err(|_| format!("`{t}` is not a number"))).collect()
}

fn example(item: &str) -> Result<Example, String> {
    let (label, pixels) = item.split_once(':').ok_or_else(|| format!("`{item}` is not LABEL:PIXELS"))?;
    let label = label.parse::<u8>().map_err(|_| format!("`{label}` is not a label"))?;
    let pixels: [f32; PIXELS] = numbers(pixels, ',')?.try_into().map_err(|v: Vec<f32>| format!("{} pixels, want {PIXELS}", v.len()))?;
    Ok(Example { pixels, label })
}

fn answer(d: &mut Digits, line: &str) -> Result<String, String> {
    let (cmd, rest) = line.split_once(' ').unwrap_or((line, ""));
    match cmd {
        "predict" => {
            let p = d.predict(&numbers(rest, ' ')?).map_err(|e| e.to_string())?;
            Ok(format!("probs {}", p.map(|v| format!("{v:e}")).join(" ")))
        }
        "teach" => {
            let examples = rest.split_whitespace().map(example).collect::<Result<Vec<_>, _>>()?;
            Ok(format!("loss {:e}", d.teach(&examples).map_err(|e| e.to_string())?))
        }
        "reset" => {
            d.reset();
            Ok("reset".into())
        }
        _ => Err(format!("unknown command `{cmd}`")),
    }
}

fn main() {
    let mut d = Digits::new();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for (n, line) in std::io::stdin().lock().lines().enumerate() {
        let line = line.unwrap_or_default();
        if line.trim().is_empty() {
            continue;
        }
        match answer(&mut d, line.trim()) {
            Ok(reply) => {
                let _ = writeln!(out, "{reply}");
            }
            Err(e) => {
                eprintln!("error: line {}: {e}", n + 1);
                std::process::exit(1);
            }
        }
    }
}
