//! The expansion outside a compiler run (proc_macro2 works in unit tests): weights errors,
//! which trybuild cannot pin (their messages carry absolute paths), and the shape of the output.
use burnc_compiler::ir::DType;
use quote::quote;

/// The expansion of a model without sub-models.
fn expand(strukt: &syn::DeriveInput, attr: proc_macro2::TokenStream, imp: &syn::ItemImpl) -> syn::Result<proc_macro2::TokenStream> {
    let input = crate::ImplInput { strukt: strukt.clone(), attr, imp: imp.clone(), defs: vec![], broken_defs: false };
    crate::expand::expand_standalone(&input)
}

fn net() -> syn::DeriveInput {
    syn::parse2(quote! {
        struct Net {
            fc: Linear<4, 2>,
        }
    })
    .unwrap()
}

fn imp() -> syn::ItemImpl {
    syn::parse2(quote! {
        impl Net {
            fn forward(&self, x: Tensor<1, 4>) -> Tensor<1, 2> {
                self.fc(x).softmax(1)
            }
        }
    })
    .unwrap()
}

fn write(name: &str, tensors: &[(&str, &[usize])]) -> String {
    // Values 1, 2, 3 … across the file, so a test can find them in the blob.
    let mut next = 0.0f32;
    let data: Vec<Vec<u8>> = tensors
        .iter()
        .map(|(_, s)| {
            (0..s.iter().product::<usize>())
                .flat_map(|_| {
                    next += 1.0;
                    next.to_le_bytes()
                })
                .collect()
        })
        .collect();
    let entries: Vec<(&str, DType, &[usize], &[u8])> = tensors.iter().zip(&data).map(|((n, s), d)| (*n, DType::F32, *s, &d[..])).collect();
    let path = std::env::temp_dir().join(format!("burnc-macros-{}-{name}.safetensors", std::process::id()));
    std::fs::write(&path, burnc_frontends::safetensors::serialize(&entries)).unwrap();
    path.display().to_string()
}

#[test]
fn expands_to_the_generated_module() {
    let out = expand(&net(), quote! {}, &imp()).unwrap_or_else(|e| panic!("{e}"));
    let file: syn::File = syn::parse2(out).expect("the expansion parses");
    let names: Vec<String> = file
        .items
        .iter()
        .filter_map(|i| match i {
            syn::Item::Mod(m) => Some(format!("mod {}", m.ident)),
            syn::Item::Impl(_) => Some("impl".into()),
            _ => None,
        })
        .collect();
    assert_eq!(names, ["mod net", "impl"]);
}

#[test]
fn weights_that_do_not_fit_are_one_error_listing_every_problem() {
    let path = write("mismatch", &[("fc.weight", &[4, 2]), ("fc.extra", &[3])]);
    let err = expand(&net(), quote! { weights = #path }, &imp()).expect_err("weights do not fit");
    let msg = err.to_string();
    assert!(msg.contains("fc.bias"), "{msg}");
    assert!(msg.contains("fc.extra"), "{msg}");
    assert!(msg.contains("`fc.weight`: the model's shape is [2, 4], the file's [4, 2]"), "{msg}");
    let _ = std::fs::remove_file(&path);
}

#[test]
fn weights_that_fit_are_embedded() {
    let path = write("fit", &[("fc.weight", &[2, 4]), ("fc.bias", &[2])]);
    let out = expand(&net(), quote! { weights = #path }, &imp()).unwrap_or_else(|e| panic!("{e}"));
    let text = out.to_string();
    assert!(text.contains(&format!("include_bytes ! (\"{path}\")")), "the file is tracked");
    // The blob is assembled from a file beside the expansion (included where that route is
    // not taken); it holds the file's values: the bias 9, 10 as written, and 1 … 8.
    let incbin = text.split(".incbin \\\"").nth(1).expect("the blob is assembled");
    let blob_path = &incbin[..incbin.find("\\\"").expect("a closed path")];
    assert_eq!(text.matches(&format!("include_bytes ! (\"{blob_path}\")")).count(), 1, "the other targets include the blob file");
    let blob = std::fs::read(blob_path).expect("the blob file is written");
    let floats: Vec<f32> = blob.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    assert!(floats.windows(2).any(|w| w == [9.0, 10.0]), "the bias is in the blob");
    assert!((1..=8).all(|v| floats.contains(&(v as f32))), "every weight is in the blob");
    // A second expansion of the same input is the stored one.
    let again = expand(&net(), quote! { weights = #path }, &imp()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(again.to_string(), text);
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_missing_weights_file_is_an_error() {
    let err = expand(&net(), quote! { weights = "/nonexistent/w.safetensors" }, &imp()).expect_err("no file");
    assert!(err.to_string().contains("/nonexistent/w.safetensors"), "{err}");
}

#[test]
fn unknown_model_options_are_refused() {
    let err = expand(&net(), quote! { weight = "w.safetensors" }, &imp()).expect_err("bad option");
    assert!(err.to_string().contains("unknown #[model] option"), "{err}");
}

/// Lower `forward` of `imp` over the struct `strukt`, with parameters filled by `fill(name, i)`,
/// and run it with the interpreter on `inputs`.
fn run_lowered(strukt: proc_macro2::TokenStream, imp: proc_macro2::TokenStream, fill: impl Fn(&str, usize) -> f32, inputs: Vec<burnc_compiler::Tensor>) -> Vec<f64> {
    use burnc_compiler::interp::{self, RtValue};
    let g = lowered_graph(strukt, imp, fill, &inputs);
    let outs = interp::run(&g, inputs.into_iter().map(RtValue::Tensor).collect()).unwrap();
    let RtValue::Tensor(t) = &outs[0] else { panic!() };
    t.to_f64_vec()
}

/// The prepared graph of `forward`, parameters filled by `fill(name, i)`.
fn lowered_graph(strukt: proc_macro2::TokenStream, imp: proc_macro2::TokenStream, fill: impl Fn(&str, usize) -> f32, inputs: &[burnc_compiler::Tensor]) -> burnc_compiler::ir::Graph {
    lowered_graph_with(strukt, imp, &Default::default(), fill, inputs)
}

/// [`lowered_graph`] with sub-model definitions.
fn lowered_graph_with(
    strukt: proc_macro2::TokenStream,
    imp: proc_macro2::TokenStream,
    defs: &crate::lower::Defs,
    fill: impl Fn(&str, usize) -> f32,
    inputs: &[burnc_compiler::Tensor],
) -> burnc_compiler::ir::Graph {
    use burnc_compiler::ir::{Param, ValueKind};
    let strukt: syn::DeriveInput = syn::parse2(strukt).unwrap();
    let imp: syn::ItemImpl = syn::parse2(imp).unwrap();
    let layers = crate::layers::parse_struct(&strukt).unwrap();
    let mut lower = crate::lower::Lower::new("Net", &layers, defs);
    let syn::ImplItem::Fn(f) = &imp.items[0] else { panic!() };
    for (arg, t) in f.sig.inputs.iter().skip(1).zip(inputs) {
        let syn::FnArg::Typed(pt) = arg else { panic!() };
        let syn::Pat::Ident(pi) = &*pt.pat else { panic!() };
        lower.input(&pi.ident.to_string(), t.dtype(), t.shape.clone());
    }
    let outs = lower.body(&f.block).unwrap_or_else(|e| panic!("{e}"));
    let mut g = lower.g;
    g.outputs.push(outs[0].0.id);
    for v in g.values.iter_mut() {
        if let ValueKind::Param(p) = &v.kind {
            let n: usize = p.shape.iter().product();
            let bytes: Vec<u8> = (0..n).flat_map(|i| fill(&v.name, i).to_le_bytes()).collect();
            v.kind = ValueKind::Param(Param { dtype: p.dtype, shape: p.shape.clone(), bytes: bytes.into() });
        }
    }
    burnc_compiler::passes::prepare(&mut g).unwrap();
    g
}

fn wave(name: &str, i: usize) -> f32 {
    let seed = name.bytes().fold(0usize, |a, b| (a * 31 + b as usize) % 9973) % 97;
    (((i * 7 + seed * 13) % 23) as f32 - 11.0) / 23.0
}

/// MultiHeadAttention against a direct transcription of PyTorch's formula.
#[test]
fn multi_head_attention_matches_a_reference() {
    let (b, s, e, h) = (2usize, 3usize, 8usize, 2usize);
    let dh = e / h;
    let x: Vec<f32> = (0..b * s * e).map(|i| ((i * 5 % 17) as f32 - 8.0) / 9.0).collect();
    for causal in [false, true] {
        let strukt = if causal {
            quote! { struct Net { #[layer(causal = true)] attn: MultiHeadAttention<8, 2> } }
        } else {
            quote! { struct Net { attn: MultiHeadAttention<8, 2> } }
        };
        let imp = quote! { impl Net { fn forward(&self, x: Tensor<2, 3, 8>) -> Tensor<2, 3, 8> { self.attn(x) } } };
        let got = run_lowered(strukt, imp, wave, vec![burnc_compiler::Tensor::from_f32s(vec![b, s, e], x.clone())]);

        let w = |n: &str, len: usize| -> Vec<f64> { (0..len).map(|i| wave(&format!("attn.{n}"), i) as f64).collect() };
        let (w_in, b_in, w_out, b_out) = (w("in_proj_weight", 3 * e * e), w("in_proj_bias", 3 * e), w("out_proj.weight", e * e), w("out_proj.bias", e));
        let mut want = vec![0f64; b * s * e];
        for bi in 0..b {
            // proj[which][t][j]
            let proj = |which: usize, t: usize, j: usize| -> f64 {
                let r = which * e + j;
                b_in[r] + (0..e).map(|c| x[(bi * s + t) * e + c] as f64 * w_in[r * e + c]).sum::<f64>()
            };
            let mut ctx = vec![0f64; s * e];
            for hi in 0..h {
                for t in 0..s {
                    let mut sc: Vec<f64> = (0..s)
                        .map(|u| (0..dh).map(|d| proj(0, t, hi * dh + d) * proj(1, u, hi * dh + d)).sum::<f64>() / (dh as f64).sqrt())
                        .collect();
                    if causal {
                        for (u, v) in sc.iter_mut().enumerate() {
                            if u > t {
                                *v = f64::NEG_INFINITY;
                            }
                        }
                    }
                    let mx = sc.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let z: f64 = sc.iter().map(|v| (v - mx).exp()).sum();
                    for d in 0..dh {
                        ctx[t * e + hi * dh + d] = (0..s).map(|u| (sc[u] - mx).exp() / z * proj(2, u, hi * dh + d)).sum();
                    }
                }
            }
            for t in 0..s {
                for j in 0..e {
                    want[(bi * s + t) * e + j] = b_out[j] + (0..e).map(|c| ctx[t * e + c] * w_out[j * e + c]).sum::<f64>();
                }
            }
        }
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!((g - w).abs() < 1e-5, "causal={causal} element {i}: {g} vs {w}");
        }
    }
}

/// Linear on a rank-3 input (reshaped around a 2-D Gemm) and the elementwise methods.
#[test]
fn linear_on_rank_3_matches_a_reference() {
    let x: Vec<f32> = (0..2 * 3 * 4).map(|i| (i as f32 - 12.0) / 7.0).collect();
    let got = run_lowered(
        quote! { struct Net { fc: Linear<4, 5> } },
        quote! { impl Net { fn forward(&self, x: Tensor<2, 3, 4>) -> Tensor<2, 3, 5> { self.fc(x).silu() * 2.0 - 1.0 } } },
        wave,
        vec![burnc_compiler::Tensor::from_f32s(vec![2, 3, 4], x.clone())],
    );
    for r in 0..6 {
        for j in 0..5 {
            let y = wave("fc.bias", j) as f64 + (0..4).map(|c| x[r * 4 + c] as f64 * wave("fc.weight", j * 4 + c) as f64).sum::<f64>();
            let want = y / (1.0 + (-y).exp()) * 2.0 - 1.0;
            assert!((got[r * 5 + j] - want).abs() < 1e-5, "{r},{j}: {} vs {want}", got[r * 5 + j]);
        }
    }
}

/// A transformer block (causal attention, LayerNorm, GELU MLP, residuals) through generated code
/// agrees with the interpreter: the slices of `in_proj_weight`, the -inf mask constant and the
/// 4-D MatMuls all go through codegen.
#[test]
fn transformer_block_codegen_matches_the_interpreter() {
    use burnc_compiler::interp::{self, RtValue};
    let strukt = quote! {
        struct Block {
            #[layer(causal = true)]
            attn: MultiHeadAttention<16, 4>,
            ln1: LayerNorm<16>,
            ff1: Linear<16, 32>,
            ff2: Linear<32, 16>,
            ln2: LayerNorm<16>,
        }
    };
    let imp = quote! {
        impl Block {
            fn forward(&self, x: Tensor<1, 5, 16>) -> Tensor<1, 5, 16> {
                let x = self.ln1(x + self.attn(x));
                self.ln2(x + self.ff2(self.ff1(x).gelu()))
            }
        }
    };
    let x = burnc_compiler::Tensor::from_f32s(vec![1, 5, 16], (0..80).map(|i| ((i * 11 % 29) as f32 - 14.0) / 10.0).collect());
    let g = lowered_graph(strukt, imp, wave, std::slice::from_ref(&x));
    let want = interp::run(&g, vec![RtValue::Tensor(x.clone())]).unwrap();
    let prepared = burnc::harness::generate_for(&g, &[RtValue::Tensor(x)], "block", true).unwrap_or_else(|e| panic!("{e}"));
    let bin = burnc::harness::build(&prepared.gen, "macros-transformer-block").unwrap_or_else(|e| panic!("{e}"));
    let work = burnc::harness::cache_dir().join("runs").join(format!("macros-block-{}", std::process::id()));
    let got = burnc::harness::run(&bin, &prepared, &work).unwrap_or_else(|e| panic!("{e}"));
    let _ = std::fs::remove_dir_all(&work);
    let (RtValue::Tensor(got), RtValue::Tensor(want)) = (&got[0], &want[0]) else { panic!() };
    for (i, (g, w)) in got.to_f64_vec().iter().zip(want.to_f64_vec()).enumerate() {
        assert!((g - w).abs() <= 1e-5 * (1.0 + w.abs()), "element {i}: generated {g}, interpreter {w}");
    }
}

fn defs_of(items: &[(proc_macro2::TokenStream, proc_macro2::TokenStream)]) -> crate::lower::Defs {
    items
        .iter()
        .map(|(s, i)| {
            let s: syn::DeriveInput = syn::parse2(s.clone()).unwrap();
            let i: syn::ItemImpl = syn::parse2(i.clone()).unwrap();
            let syn::ImplItem::Fn(f) = &i.items[0] else { panic!() };
            (s.ident.to_string(), crate::lower::SubDef { layers: crate::layers::parse_struct(&s).unwrap(), forward: f.clone() })
        })
        .collect()
}

/// A model built from sub-models (an array iterated, one indexed, one nested two deep) computes
/// what the same model written flat computes, with parameters named by the same keys.
#[test]
fn sub_models_inline_like_the_flat_model() {
    use burnc_compiler::interp::{self, RtValue};
    let x: Vec<f32> = (0..2 * 4).map(|i| ((i * 7 % 11) as f32 - 5.0) / 6.0).collect();
    let input = || vec![burnc_compiler::Tensor::from_f32s(vec![2, 4], x.clone())];
    let run = |g: &burnc_compiler::ir::Graph| {
        let outs = interp::run(g, input().into_iter().map(RtValue::Tensor).collect()).unwrap();
        let RtValue::Tensor(t) = &outs[0] else { panic!() };
        t.to_f64_vec()
    };
    let defs = defs_of(&[
        (
            quote! { struct Mlp { up: Linear<4, 8>, down: Linear<8, 4>, #[layer(key = "ln")] norm: LayerNorm<4> } },
            quote! { impl Mlp { fn forward(&self, x: Tensor<2, 4>) -> Tensor<2, 4> { self.norm(self.down(self.up(x).gelu()) + x) } } },
        ),
        (
            quote! { struct Block { #[layer(key = "mlp.inner")] mlp: Mlp, gate: Linear<4, 4> } },
            quote! { impl Block { fn forward(&self, x: Tensor<2, 4>) -> Tensor<2, 4> { let h = self.mlp(x); h * self.gate.forward(h).sigmoid() } } },
        ),
    ]);
    let nested = lowered_graph_with(
        quote! { struct Net { blocks: [Block; 3], extra: Block, head: Linear<4, 3> } },
        quote! { impl Net { fn forward(&self, x: Tensor<2, 4>) -> Tensor<2, 3> {
            let mut x = x;
            for b in &self.blocks {
                let y = b(x);
                x = y;
            }
            let x = self.blocks[1].forward(x);
            self.head(self.extra(x))
        } } },
        &defs,
        wave,
        &input(),
    );
    let mut flat_fields = quote! {};
    let mut flat_body = quote! { let x0 = x; };
    let blocks = [("b0", "blocks.0"), ("b1", "blocks.1"), ("b2", "blocks.2"), ("b1again", "blocks.1"), ("e", "extra")];
    for (i, (n, key)) in blocks.iter().enumerate() {
        let [up, down, norm, gate] = ["up", "down", "norm", "gate"].map(|p| quote::format_ident!("{n}_{p}"));
        let k = |s: &str| format!("{key}.{s}");
        let (ku, kd, kn, kg) = (k("mlp.inner.up"), k("mlp.inner.down"), k("mlp.inner.ln"), k("gate"));
        if *n != "b1again" {
            flat_fields.extend(quote! {
                #[layer(key = #ku)] #up: Linear<4, 8>,
                #[layer(key = #kd)] #down: Linear<8, 4>,
                #[layer(key = #kn)] #norm: LayerNorm<4>,
                #[layer(key = #kg)] #gate: Linear<4, 4>,
            });
        }
        let [up, down, norm, gate] = if *n == "b1again" { ["up", "down", "norm", "gate"].map(|p| quote::format_ident!("b1_{p}")) } else { [up, down, norm, gate] };
        let (xi, xo) = (quote::format_ident!("x{i}"), quote::format_ident!("x{}", i + 1));
        flat_body.extend(quote! {
            let h = self.#norm(self.#down(self.#up(#xi).gelu()) + #xi);
            let #xo = h * self.#gate(h).sigmoid();
        });
    }
    let flat = lowered_graph(
        quote! { struct Net { #flat_fields head: Linear<4, 3> } },
        quote! { impl Net { fn forward(&self, x: Tensor<2, 4>) -> Tensor<2, 3> { #flat_body self.head(x5) } } },
        wave,
        &input(),
    );
    let (a, b) = (run(&nested), run(&flat));
    assert_eq!(a.len(), 6);
    assert!(a.iter().any(|v| v.abs() > 1e-3), "degenerate output {a:?}");
    assert_eq!(a, b, "nested and flat differ");
    // Every parameter is keyed as a PyTorch state_dict would: 4 blocks' worth + head.
    let params: Vec<&str> = nested.values.iter().filter(|v| matches!(v.kind, burnc_compiler::ir::ValueKind::Param(_))).map(|v| v.name.as_str()).collect();
    for key in ["blocks.0.mlp.inner.up.weight", "blocks.2.gate.bias", "extra.mlp.inner.ln.weight", "head.weight"] {
        assert!(params.contains(&key), "no parameter {key} in {params:?}");
    }
}

/// Mistakes in calls of sub-models point at the caller's tokens.
#[test]
fn sub_model_call_errors() {
    let defs = defs_of(&[(
        quote! { struct Block { fc: Linear<4, 4> } },
        quote! { impl Block { fn forward(&self, x: Tensor<2, 4>) -> Tensor<2, 4> { self.fc(x) } } },
    )]);
    let lower_err = |body: proc_macro2::TokenStream| {
        let strukt: syn::DeriveInput = syn::parse2(quote! { struct Net { blocks: [Block; 2], one: Block } }).unwrap();
        let imp: syn::ItemImpl = syn::parse2(quote! { impl Net { fn forward(&self, x: Tensor<2, 4>, y: Tensor<2, 3>) -> Tensor<2, 4> { #body } } }).unwrap();
        let layers = crate::layers::parse_struct(&strukt).unwrap();
        let mut lower = crate::lower::Lower::new("Net", &layers, &defs);
        lower.input("x", DType::F32, vec![2, 4]);
        lower.input("y", DType::F32, vec![2, 3]);
        let syn::ImplItem::Fn(f) = &imp.items[0] else { panic!() };
        lower.body(&f.block).err().map(|e| e.to_string()).unwrap_or_default()
    };
    assert!(lower_err(quote! { self.one(y) }).contains("shape mismatch: `Block::forward` takes `x` as [2, 4]"), "{}", lower_err(quote! { self.one(y) }));
    assert!(lower_err(quote! { self.one(x, x) }).contains("takes 1 tensor"));
    assert!(lower_err(quote! { self.blocks(x) }).contains("is an array of 2 layers"));
    assert!(lower_err(quote! { self.blocks[2](x) }).contains("index 2 is out of range"));
    assert!(lower_err(quote! { self.one[0](x) }).contains("is one layer"));
    assert!(lower_err(quote! { z = x; x }).contains("unknown variable `z`"));
    assert!(lower_err(quote! { for b in &self.one { } x }).contains("is one layer"));
    assert_eq!(lower_err(quote! { let mut h = x; for b in self.blocks.iter() { h = b.forward(h); } h }), "");
}

/// A PyTorch checkpoint works as `weights` (picked by content), with `rename` for a prefix and
/// `ignore` for keys the model does not use; without `ignore` those keys are refused.
#[test]
fn pytorch_weights_with_rename_and_ignore() {
    let w = vec![0u8; 8 * 4];
    let b = vec![0u8; 2 * 4];
    let h = vec![0u8; 3 * 4];
    let entries: Vec<(&str, DType, &[usize], &[u8])> =
        vec![("model.fc.weight", DType::F32, &[2, 4], &w), ("model.fc.bias", DType::F32, &[2], &b), ("model.head.scale", DType::F32, &[3], &h)];
    let path = std::env::temp_dir().join(format!("burnc-macros-{}-ckpt.pt", std::process::id()));
    std::fs::write(&path, burnc_frontends::pytorch::serialize(&entries)).unwrap();
    let p = path.display().to_string();
    expand(&net(), quote! { weights = #p, rename = ["model.*=*"], ignore = ["model.head.*"] }, &imp()).unwrap_or_else(|e| panic!("{e}"));
    let err = expand(&net(), quote! { weights = #p, rename = ["model.*=*"] }, &imp()).expect_err("head.scale is unused");
    assert!(err.to_string().contains("head.scale"), "{err}");
    let err = expand(&net(), quote! { weights = #p, rename = ["model.*"] }, &imp()).expect_err("bad rule");
    assert!(err.to_string().contains("PATTERN=REPLACEMENT"), "{err}");
    let _ = std::fs::remove_file(&path);
}
