//! Sentence embeddings with all-MiniLM-L6-v2, compiled by burnc.
//!
//!     cargo run --release -p minilm -- "first sentence" "second sentence" ...
//!
//! prints the cosine-similarity matrix of the sentences, one row per line, numbers separated by
//! spaces. Flags (before the sentences):
//!
//! - `--embeddings`: print the 384-d embeddings instead, one sentence per line.
//! - `--ids-out FILE`: also write the token ids, attention masks and token type ids the model
//!   was fed as JSON (what reference.py reads).
//! - `--time`: print tokenization and forward times on stderr.
mod dims;
#[cfg(not(minilm_no_model))]
mod model;

use dims::{BATCH, HIDDEN, SEQ};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

/// One sentence as the model takes it: `SEQ` token ids, mask and type ids.
struct Encoded {
    ids: Vec<i64>,
    mask: Vec<i64>,
    types: Vec<i64>,
}

/// The tokenizer of model/tokenizer.json, set to pad (and truncate) every sentence to exactly
/// `SEQ` tokens, whatever padding the file configures (it says Fixed(128); we restate it so
/// that changing `SEQ` keeps the two in step).
fn tokenizer() -> Result<Tokenizer, String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("model/tokenizer.json");
    let mut tok = Tokenizer::from_file(&path).map_err(|e| format!("{}: {e} (run examples/minilm/setup.sh)", path.display()))?;
    let pad = tok.get_padding().cloned().unwrap_or_default();
    tok.with_padding(Some(PaddingParams { strategy: PaddingStrategy::Fixed(SEQ), ..pad }));
    tok.with_truncation(Some(TruncationParams { max_length: SEQ, ..Default::default() })).map_err(|e| e.to_string())?;
    Ok(tok)
}

fn encode(tok: &Tokenizer, sentences: &[String]) -> Result<Vec<Encoded>, String> {
    let encs = tok.encode_batch(sentences.to_vec(), true).map_err(|e| e.to_string())?;
    encs.iter()
        .map(|e| {
            let widen = |v: &[u32]| v.iter().map(|&x| x as i64).collect::<Vec<i64>>();
            let enc = Encoded { ids: widen(e.get_ids()), mask: widen(e.get_attention_mask()), types: widen(e.get_type_ids()) };
            if enc.ids.len() != SEQ || enc.mask.len() != SEQ || enc.types.len() != SEQ {
                return Err(format!("tokenizer gave {} tokens, expected {SEQ}", enc.ids.len()));
            }
            Ok(enc)
        })
        .collect()
}

/// Embed all sentences, `BATCH` at a time; unused rows of the last batch are all padding
/// (mask 0) and their outputs are dropped.
#[cfg(not(minilm_no_model))]
fn embed(encoded: &[Encoded]) -> Result<Vec<[f32; HIDDEN]>, String> {
    use model::{minilm, MiniLm};
    let model = MiniLm::new();
    // 15 MB: allocated zeroed on the heap, never on the stack.
    // SAFETY: the arena is plain bytes; all zeros is a valid value.
    let mut arena: Box<minilm::Arena> = unsafe { Box::new_zeroed().assume_init() };
    let mut out = Vec::with_capacity(encoded.len());
    for chunk in encoded.chunks(BATCH) {
        let mut ids = [0i64; BATCH * SEQ];
        let mut mask = [0i64; BATCH * SEQ];
        let mut types = [0i64; BATCH * SEQ];
        for (r, e) in chunk.iter().enumerate() {
            ids[r * SEQ..(r + 1) * SEQ].copy_from_slice(&e.ids);
            mask[r * SEQ..(r + 1) * SEQ].copy_from_slice(&e.mask);
            types[r * SEQ..(r + 1) * SEQ].copy_from_slice(&e.types);
        }
        let y = model.forward(&mut arena, &ids, &mask, &types);
        for r in 0..chunk.len() {
            out.push(y.output[r * HIDDEN..(r + 1) * HIDDEN].try_into().map_err(|_| "the model returned a short row")?);
        }
    }
    Ok(out)
}

/// Built before examples/minilm/setup.sh fetched the model: say so.
#[cfg(minilm_no_model)]
fn embed(_: &[Encoded]) -> Result<Vec<[f32; HIDDEN]>, String> {
    Err("built without model/model.safetensors: run examples/minilm/setup.sh, then build again".into())
}

fn json_rows(rows: impl Iterator<Item = Vec<i64>>) -> String {
    let rows: Vec<String> = rows.map(|r| format!("[{}]", r.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(","))).collect();
    format!("[{}]", rows.join(",\n"))
}

fn write_ids(path: &Path, encoded: &[Encoded]) -> Result<(), String> {
    let text = format!(
        "{{\"input_ids\": {},\n\"attention_mask\": {},\n\"token_type_ids\": {}}}\n",
        json_rows(encoded.iter().map(|e| e.ids.clone())),
        json_rows(encoded.iter().map(|e| e.mask.clone())),
        json_rows(encoded.iter().map(|e| e.types.clone()))
    );
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

fn run() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let (mut embeddings, mut time, mut ids_out) = (false, false, None::<PathBuf>);
    let mut sentences = Vec::new();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--embeddings" => embeddings = true,
            "--time" => time = true,
            "--ids-out" => ids_out = Some(args.next().ok_or("--ids-out needs a file")?.into()),
            "--" => sentences.extend(args.by_ref()),
            "-h" | "--help" => {
                println!("usage: minilm [--embeddings] [--ids-out FILE] [--time] SENTENCE...");
                return Ok(());
            }
            s if s.starts_with("--") => return Err(format!("unknown flag `{s}`")),
            _ => sentences.push(a),
        }
    }
    if sentences.is_empty() {
        return Err("give one or more sentences: minilm \"first sentence\" \"second sentence\" ...".into());
    }
    let t0 = Instant::now();
    let tok = tokenizer()?;
    let encoded = encode(&tok, &sentences)?;
    let t1 = Instant::now();
    if let Some(p) = &ids_out {
        write_ids(p, &encoded)?;
    }
    let emb = embed(&encoded)?;
    let t2 = Instant::now();
    if time {
        let batches = encoded.len().div_ceil(BATCH);
        eprintln!(
            "tokenize {:.2?}, forward {:.2?} ({batches} batch(es) of {BATCH}×{SEQ} tokens, {:.2?} each)",
            t1 - t0,
            t2 - t1,
            (t2 - t1) / batches as u32
        );
    }
    let mut out = String::new();
    if embeddings {
        for e in &emb {
            out += &e.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(" ");
            out.push('\n');
        }
    } else {
        // Embeddings are unit vectors, so the cosine similarity is the dot product.
        for a in &emb {
            let row: Vec<String> = emb.iter().map(|b| format!("{:.4}", a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>())).collect();
            out += &row.join(" ");
            out.push('\n');
        }
    }
    print!("{out}");
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("minilm: {e}");
            ExitCode::FAILURE
        }
    }
}
