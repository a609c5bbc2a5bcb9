//! Expansion: a `static` `GeneratedKernel` holding the formula as IR, the formula
//! as Rust over `Lanes`, and one table entry per dtype combination. The loops are
//! generic Rust in dq-runtime; nothing here but names and the formula.

use dq_runtime::DType;
use proc_macro2::{Ident, Span, TokenStream};
use quote::{format_ident, quote};

use crate::ast::{Attr, KernelFn};
use crate::validate::{self, Combo, Errors, Node};

/// Parse, validate, expand. On error: the errors and a placeholder static of the
/// same name (the DSL function is not Rust, so it cannot be emitted unchanged).
pub fn dequant_kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    let f: KernelFn = match syn::parse2(item) {
        Ok(f) => f,
        Err(e) => return e.to_compile_error(),
    };
    let mut errors = Errors::default();
    let combos = match syn::parse2::<Attr>(attr) {
        Ok(a) => validate::combos(&a, &mut errors),
        Err(e) => {
            errors.push(e);
            Vec::new()
        }
    };
    let nodes = validate::formula(&f, &mut errors);
    match errors.into_result(()) {
        Ok(()) => expand(&f, &combos, &nodes),
        Err(e) => {
            let err = e.to_compile_error();
            let placeholder = kernel_static(&f, quote!(&[]), quote!(&[]));
            quote!(#err #placeholder)
        }
    }
}

const P: &str = "::dq::__private";

fn private() -> TokenStream {
    P.parse().expect("path parses")
}

fn expand(f: &KernelFn, combos: &[Combo], nodes: &[Node]) -> TokenStream {
    let p = private();
    let ir_nodes: Vec<TokenStream> = nodes.iter().map(ir_node).collect();
    let eval = eval_body(nodes);
    let entries = combos.iter().map(|c| {
        let (s, z, d) = (marker(Some(c.src)), marker(c.zps), marker(Some(c.dst)));
        quote!(#p::Entry::new::<#p::dtypes::#s, #p::dtypes::#z, #p::dtypes::#d, __Formula>())
    });
    let formula = quote! {
        struct __Formula;
        impl #p::Formula for __Formula {
            const QUIET: bool = #p::may_pass_signaling(&[#(#ir_nodes),*]);
            #[inline(always)]
            #[allow(unused_variables)]
            fn eval<L: #p::Lanes>(l: L, q: L::Int, z: L::Int, s: L::Float) -> L::Float {
                #eval
            }
        }
    };
    kernel_static(
        f,
        quote!(&[#(#ir_nodes),*]),
        quote!({ #formula &[#(#entries),*] }),
    )
}

/// `static NAME: GeneratedKernel = ...;` with the user's docs and visibility.
fn kernel_static(f: &KernelFn, nodes: TokenStream, table: TokenStream) -> TokenStream {
    let p = private();
    let (attrs, vis, ident) = (&f.attrs, &f.vis, &f.ident);
    let name = ident.to_string();
    quote! {
        #(#attrs)*
        #[allow(non_upper_case_globals)]
        #vis static #ident: #p::GeneratedKernel = #p::GeneratedKernel::new(
            &#p::FormulaIr { name: #name, nodes: #nodes },
            #table,
        );
    }
}

/// The marker type of a dtype (`None`: no zero points).
fn marker(dtype: Option<DType>) -> Ident {
    let m = match dtype {
        None => "NoZp".to_string(),
        Some(DType::BF16) => "BF16".to_string(),
        Some(d) => d.name().to_uppercase(),
    };
    Ident::new(&m, Span::call_site())
}

fn ir_node(n: &Node) -> TokenStream {
    let p = private();
    let i = |x: &usize| *x as u16;
    match n {
        Node::Q => quote!(#p::Node::Q),
        Node::Z => quote!(#p::Node::Z),
        Node::S => quote!(#p::Node::S),
        Node::IntSub(a, b) => {
            let (a, b) = (i(a), i(b));
            quote!(#p::Node::IntSub(#a, #b))
        }
        Node::Float(a) => {
            let a = i(a);
            quote!(#p::Node::Float(#a))
        }
        Node::Lit(v) => {
            let bits = v.to_bits();
            quote!(#p::Node::Lit(#bits))
        }
        Node::Neg(a) | Node::Abs(a) => {
            let (a, k) = (i(a), op_name(n));
            quote!(#p::Node::#k(#a))
        }
        Node::Add(a, b) | Node::Sub(a, b) | Node::Mul(a, b) | Node::Min(a, b) | Node::Max(a, b) => {
            let (a, b, k) = (i(a), i(b), op_name(n));
            quote!(#p::Node::#k(#a, #b))
        }
    }
}

fn op_name(n: &Node) -> Ident {
    let s = format!("{n:?}");
    Ident::new(&s[..s.find('(').unwrap_or(s.len())], Span::call_site())
}

/// `let nK = ...;` per node, then the last node.
fn eval_body(nodes: &[Node]) -> TokenStream {
    let p = private();
    let v = |x: &usize| format_ident!("n{}", x);
    let lets = nodes.iter().enumerate().map(|(k, n)| {
        let name = v(&k);
        let value = match n {
            Node::Q => quote!(q),
            Node::Z => quote!(z),
            Node::S => quote!(s),
            Node::Lit(x) => {
                let bits = x.to_bits();
                quote!(#p::Lanes::lit(l, f64::from_bits(#bits)))
            }
            Node::IntSub(a, b) => {
                let (a, b) = (v(a), v(b));
                quote!(#p::Lanes::int_sub(l, #a, #b))
            }
            Node::Float(a) | Node::Neg(a) | Node::Abs(a) => {
                let a = v(a);
                let f = method(n);
                quote!(#p::Lanes::#f(l, #a))
            }
            Node::Add(a, b)
            | Node::Sub(a, b)
            | Node::Mul(a, b)
            | Node::Min(a, b)
            | Node::Max(a, b) => {
                let (a, b) = (v(a), v(b));
                let f = method(n);
                quote!(#p::Lanes::#f(l, #a, #b))
            }
        };
        quote!(let #name = #value;)
    });
    let last = v(&(nodes.len() - 1));
    quote!(#(#lets)* #last)
}

fn method(n: &Node) -> Ident {
    Ident::new(&op_name(n).to_string().to_lowercase(), Span::call_site())
}
