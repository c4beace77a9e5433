//! Training on a device-style budget, through burnc's generated code: a small CNN learns the
//! scikit-learn digits from scratch (every parameter, Adam), then only its last layer is
//! fine-tuned on a changed task (labels remapped y → 9 − y) starting from those weights. All
//! memory is the compiler's: a `State` for parameters and moments, a `TrainArena` for the step.
//!
//! `cargo run --release -- [--epochs N] [--finetune-epochs M] [--svg FILE] [--save-weights FILE]`.
//! Prints a progress bar per epoch, writes the loss/accuracy curve as SVG, and ends with
//! `test_accuracy=<value>` (the from-scratch model on the held-out digits). `--save-weights`
//! writes the from-scratch model's parameters as safetensors, the file `burnc model.onnx
//! --weights FILE` compiles (examples/web-digits does).
mod data;
mod plot;

use burnc_runtime::arena::Aligned;
use data::{Rng, Sample};
use std::io::{IsTerminal, Write};
use std::time::Instant;

#[allow(dead_code, unused_labels, clippy::all)]
mod digits {
    burnc_runtime::include_model!("digits");
}
#[allow(dead_code, unused_labels, clippy::all)]
mod digits_head {
    burnc_runtime::include_model!("digits_head");
}

const BATCH: usize = 32;

/// A batch in the models' input layout, and its labels (mapped by `relabel`).
fn batch(samples: &[&Sample], relabel: fn(u8) -> u8) -> (Box<[f32; BATCH * 64]>, [i64; BATCH]) {
    let mut x = Box::new([0f32; BATCH * 64]);
    let mut y = [0i64; BATCH];
    for (i, s) in samples.iter().enumerate().take(BATCH) {
        x[i * 64..(i + 1) * 64].copy_from_slice(&s.pixels);
        y[i] = relabel(s.label) as i64;
    }
    (x, y)
}

/// Accuracy of `forward` over `set`; the last batch is padded with repeats that are not counted.
fn accuracy(set: &[&Sample], relabel: fn(u8) -> u8, mut forward: impl FnMut(&[f32; BATCH * 64]) -> [f32; BATCH * 10]) -> f64 {
    let mut right = 0usize;
    for chunk in set.chunks(BATCH) {
        let padded: Vec<&Sample> = (0..BATCH).map(|i| chunk[i % chunk.len()]).collect();
        let (x, y) = batch(&padded, relabel);
        let logits = forward(&x);
        for (i, _) in chunk.iter().enumerate() {
            let row = &logits[i * 10..(i + 1) * 10];
            let pred = (0..10).max_by(|&a, &b| row[a].total_cmp(&row[b])).unwrap_or(0);
            right += (pred as i64 == y[i]) as usize;
        }
    }
    right as f64 / set.len().max(1) as f64
}

fn bar(done: usize, total: usize) -> String {
    let width = 30;
    let filled = done * width / total.max(1);
    format!("[{}{}]", "#".repeat(filled), ".".repeat(width - filled))
}

/// One epoch of `step` over shuffled full batches; returns the mean loss. Shows a live bar.
fn epoch(label: &str, train: &mut [&Sample], rng: &mut Rng, relabel: fn(u8) -> u8, mut step: impl FnMut(&[f32; BATCH * 64], &[i64; BATCH]) -> f32) -> f64 {
    rng.shuffle(train);
    let n = train.len() / BATCH;
    let mut sum = 0.0;
    // The live bar only on a terminal; logs get the one line per epoch.
    let live = std::io::stderr().is_terminal();
    for b in 0..n {
        let (x, y) = batch(&train[b * BATCH..(b + 1) * BATCH], relabel);
        sum += step(&x, &y) as f64;
        if live {
            let mut e = std::io::stderr();
            let _ = write!(e, "\r{label} {} loss {:.4}", bar(b + 1, n), sum / (b + 1) as f64);
            let _ = e.flush();
        }
    }
    if live {
        eprint!("\r");
    }
    sum / n.max(1) as f64
}

fn arg(args: &[String], flag: &str) -> Option<String> {
    args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).cloned()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let epochs: usize = arg(&args, "--epochs").and_then(|v| v.parse().ok()).unwrap_or(20);
    let ft_epochs: usize = arg(&args, "--finetune-epochs").and_then(|v| v.parse().ok()).unwrap_or(8);
    let svg_path = arg(&args, "--svg").unwrap_or_else(|| "curves.svg".into());
    let csv = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data/digits.csv");
    let all = match data::load(&csv) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    let mut rng = Rng(0x5eed_d161_75);
    let mut order: Vec<&Sample> = all.iter().collect();
    rng.shuffle(&mut order);
    let n_test = order.len() / 5;
    let (test, train) = order.split_at(n_test);
    let mut train: Vec<&Sample> = train.to_vec();
    println!(
        "digits: {} train / {} test images; train arena {} bytes (lower bound {}, sum of all buffers {}), state {} bytes, forward arena {} bytes",
        train.len(),
        test.len(),
        digits::TRAIN_ARENA_BYTES,
        digits::TRAIN_LOWER_BOUND_BYTES,
        digits::TRAIN_BUFFER_SUM_BYTES,
        digits::STATE_BYTES,
        digits::ARENA_BYTES
    );

    // Phase 1: every parameter, from the model file's random initialisation.
    let same = |y: u8| y;
    let mut state = Box::new(digits::State::new());
    let mut arena = Box::new(digits::TrainArena::new());
    let mut fwd_arena = Box::new(digits::Arena::new());
    let mut m = digits::Model::new(&mut state);
    let mut curve = Vec::new();
    let mut times = Vec::new();
    for e in 0..epochs {
        let t = Instant::now();
        let loss = epoch(&format!("epoch {:>2}/{epochs}", e + 1), &mut train, &mut rng, same, |x, y| m.train_step(&mut arena, x, y));
        times.push(t.elapsed().as_secs_f64());
        let train_acc = accuracy(&train, same, |x| *m.forward(&mut fwd_arena, x).logits);
        let test_acc = accuracy(test, same, |x| *m.forward(&mut fwd_arena, x).logits);
        println!("epoch {:>2}/{epochs} {} loss {loss:.4} train_acc {train_acc:.4} test_acc {test_acc:.4} ({:.1} ms)", e + 1, bar(1, 1), times[e] * 1e3);
        curve.push(plot::Epoch { loss, train_acc, test_acc });
    }
    let test_accuracy = accuracy(test, same, |x| *m.forward(&mut fwd_arena, x).logits);
    times.sort_by(f64::total_cmp);
    let median_ms = times.get(times.len() / 2).copied().unwrap_or(0.0) * 1e3;
    if let Some(path) = arg(&args, "--save-weights") {
        let mut file = vec![0u8; digits::SAFETENSORS_BYTES];
        let written = m.write_safetensors(&mut file).map(|n| std::fs::write(&path, &file[..n]));
        match written {
            Ok(Ok(())) => println!("weights: {path}"),
            Ok(Err(e)) => eprintln!("warning: cannot write {path}: {e}"),
            Err(e) => eprintln!("warning: cannot serialise the weights: {e:?}"),
        }
    }
    println!("from scratch: test accuracy {test_accuracy:.4}, median {median_ms:.1} ms per epoch ({} steps of {BATCH})", train.len() / BATCH);

    // Phase 2: a changed task, only fc2 trains; everything else is frozen in a copy of the
    // head module's weights blob, set from phase 1's parameters.
    let remap = |y: u8| 9 - y;
    let mut blob: Box<Aligned<[u8; digits_head::WEIGHTS_BYTES]>> = Box::new(Aligned([0; digits_head::WEIGHTS_BYTES]));
    blob.0.copy_from_slice(digits_head::weights());
    for (i, p) in digits_head::PARAMS.iter().enumerate() {
        if !p.trainable {
            let src = digits::param_index(p.name).expect("same model");
            digits_head::set_frozen(&mut blob.0, i, m.param(src)).expect("same shapes");
        }
    }
    let mut hstate = Box::new(digits_head::State::new());
    let mut harena = Box::new(digits_head::TrainArena::new());
    let mut hfwd = Box::new(digits_head::Arena::new());
    let mut h = digits_head::Model::with_weights(&blob.0, &mut hstate).expect("aligned blob of the right size");
    for (i, p) in digits_head::PARAMS.iter().enumerate() {
        if p.trainable {
            let src = digits::param_index(p.name).expect("same model");
            h.set_param(i, m.param(src)).expect("same shapes");
        }
    }
    let before = accuracy(test, remap, |x| *h.forward(&mut hfwd, x).logits);
    println!(
        "fine-tune fc2 on labels 9 - y: test accuracy before {before:.4}; head train arena {} bytes, state {} bytes",
        digits_head::TRAIN_ARENA_BYTES,
        digits_head::STATE_BYTES
    );
    let from = curve.len();
    let mut remapped = before;
    for e in 0..ft_epochs {
        let t = Instant::now();
        let loss = epoch(&format!("fine-tune {:>2}/{ft_epochs}", e + 1), &mut train, &mut rng, remap, |x, y| h.train_step(&mut harena, x, y));
        let ms = t.elapsed().as_secs_f64() * 1e3;
        let train_acc = accuracy(&train, remap, |x| *h.forward(&mut hfwd, x).logits);
        remapped = accuracy(test, remap, |x| *h.forward(&mut hfwd, x).logits);
        println!("fine-tune {:>2}/{ft_epochs} {} loss {loss:.4} train_acc {train_acc:.4} test_acc {remapped:.4} ({ms:.1} ms)", e + 1, bar(1, 1));
        curve.push(plot::Epoch { loss, train_acc, test_acc: remapped });
    }
    match std::fs::write(&svg_path, plot::svg(&curve, from)) {
        Ok(()) => println!("curve: {svg_path}"),
        Err(e) => eprintln!("warning: cannot write {svg_path}: {e}"),
    }
    println!("remapped_test_accuracy={remapped:.4}");
    println!("test_accuracy={test_accuracy:.4}");
}
