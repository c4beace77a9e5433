//! burnc's Rust frontend: a model written in Rust, compiled at build time.
//!
//! ```ignore
//! use burnc_macros::{model, Model};
//! use burnc_runtime::nn::{Conv2d, Linear};
//!
//! #[derive(Model)]
//! struct Net {
//!     #[layer(padding = 1)]
//!     conv1: Conv2d<1, 8, 3>,
//!     fc: Linear<6272, 10>,
//! }
//!
//! #[model(weights = "net.safetensors")]
//! impl Net {
//!     fn forward(&self, x: Tensor<1, 1, 28, 28>) -> Tensor<1, 10> {
//!         let x = self.conv1(x).relu();
//!         self.fc(x.flatten(1))
//!     }
//! }
//!
//! // expands to `mod net { .. }` — the module `burnc model.onnx -o net.rs` would write — and
//! // `impl Net { fn new(), fn forward(&self, &mut net::Arena, &[f32; 784]) -> net::Outputs }`.
//! let out = Net::new().forward(&mut net::Arena::new(), &[0.0; 784]);
//! ```
//!
//! How it works: a proc macro only sees its own item, so `#[derive(Model)]` emits a hidden
//! `macro_rules! __burnc_model_Net` holding the struct's tokens, and `#[model]` on `impl Net`
//! expands to a call of it with the impl; that macro hands both to the hidden
//! [`__model_impl!`], which lowers `forward` to burnc's IR, runs the compiler and returns the
//! generated module. Spans of the user's tokens survive the round trip, so mistakes in the
//! forward body are compile errors at the expression that made them.
use proc_macro::TokenStream;
use quote::{format_ident, quote};
use syn::parse::{Parse, ParseStream};
use syn::{parse_macro_input, DeriveInput};

mod expand;
mod layers;
mod lower;
#[cfg(test)]
mod tests;

/// Declares a model's layers: every field is a layer of `burnc_runtime::nn` (`Linear<IN, OUT>`,
/// `Conv2d<IN, OUT, K>`, …), options in `#[layer(stride = 2, padding = 1)]`. Pair it with
/// `#[model]` on an `impl` of the same struct, later in the same module.
#[proc_macro_derive(Model, attributes(layer))]
pub fn derive_model(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    // Check the fields now, so a bad layer is reported even before `#[model]` is written.
    if let Err(e) = layers::parse_struct(&input) {
        return e.to_compile_error().into();
    }
    let name = &input.ident;
    let mac = format_ident!("__burnc_model_{}", name);
    let fields: Vec<_> = match &input.data {
        syn::Data::Struct(s) => s.fields.iter().filter_map(|f| f.ident.clone()).collect(),
        _ => vec![],
    };
    quote! {
        #[doc(hidden)]
        #[allow(unused_macros)]
        macro_rules! #mac {
            ($($tokens:tt)*) => {
                ::burnc_macros::__model_impl! { { #input } $($tokens)* }
            };
        }
        impl #name {
            /// The model's layers hold nothing at run time: weights live in the generated module.
            #[allow(dead_code)]
            pub fn new() -> Self {
                #name { #( #fields: ::core::default::Default::default(), )* }
            }
            // The fields are read by the macro, not at run time; this keeps rustc's dead-code
            // lint from saying otherwise.
            #[doc(hidden)]
            #[allow(dead_code)]
            fn __burnc_layers(&self) {
                #( let _ = &self.#fields; )*
            }
        }
    }
    .into()
}

/// Compiles the `forward` method of a `#[derive(Model)]` struct. Options:
/// `#[model(weights = "file.safetensors")]` embeds weights (path relative to the crate's
/// `Cargo.toml`; keys are `field.weight`, `field.bias`, … as in a PyTorch state_dict; without
/// it the weights are zeros and `Model::with_weights` takes them at run time);
/// `module = "name"` names the generated module (default: the struct's name in snake_case).
#[proc_macro_attribute]
pub fn model(attr: TokenStream, item: TokenStream) -> TokenStream {
    let attr = proc_macro2::TokenStream::from(attr);
    let imp = parse_macro_input!(item as syn::ItemImpl);
    let name = match &*imp.self_ty {
        syn::Type::Path(p) if p.qself.is_none() => p.path.segments.last().map(|s| s.ident.clone()),
        _ => None,
    };
    let Some(name) = name else {
        return syn::Error::new_spanned(&imp.self_ty, "#[model] goes on `impl Name { fn forward .. }` of a #[derive(Model)] struct")
            .to_compile_error()
            .into();
    };
    let mac = format_ident!("__burnc_model_{}", name, span = name.span());
    quote! { #mac! { [ #attr ] #imp } }.into()
}

struct ImplInput {
    strukt: DeriveInput,
    attr: proc_macro2::TokenStream,
    imp: syn::ItemImpl,
}

impl Parse for ImplInput {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let s;
        syn::braced!(s in input);
        let strukt: DeriveInput = s.parse()?;
        let a;
        syn::bracketed!(a in input);
        let attr: proc_macro2::TokenStream = a.parse()?;
        let imp: syn::ItemImpl = input.parse()?;
        Ok(ImplInput { strukt, attr, imp })
    }
}

/// Implementation detail of `#[model]` (called by the `macro_rules!` that `#[derive(Model)]`
/// writes, with the struct and the impl).
#[doc(hidden)]
#[proc_macro]
pub fn __model_impl(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as ImplInput);
    match expand::expand(&input.strukt, input.attr, &input.imp) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}
