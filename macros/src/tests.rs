//! The expansion outside a compiler run (proc_macro2 works in unit tests): weights errors,
//! which trybuild cannot pin (their messages carry absolute paths), and the shape of the output.
use crate::expand::expand;
use burnc_compiler::ir::DType;
use quote::quote;

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
    let data: Vec<Vec<u8>> = tensors.iter().map(|(_, s)| vec![0u8; s.iter().product::<usize>() * 4]).collect();
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
    let err = expand(&net(), quote! { weights = #path }, &imp()).err().expect("weights do not fit");
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
    assert!(text.contains("include_bytes !"), "the file is tracked");
    assert!(!text.contains("include_bytes ! (\"weights embedded"), "the blob replaced the generated include_bytes!");
    assert_eq!(text.matches("include_bytes !").count(), 1, "only the tracking include is left");
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_missing_weights_file_is_an_error() {
    let err = expand(&net(), quote! { weights = "/nonexistent/w.safetensors" }, &imp()).err().expect("no file");
    assert!(err.to_string().contains("/nonexistent/w.safetensors"), "{err}");
}

#[test]
fn unknown_model_options_are_refused() {
    let err = expand(&net(), quote! { weight = "w.safetensors" }, &imp()).err().expect("bad option");
    assert!(err.to_string().contains("unknown #[model] option"), "{err}");
}
