//! Expansion: a `static` `GeneratedKernel` holding the formula as IR, the formula
//! as Rust over `Lanes`, and one table entry per dtype combination. The loops are
//! generic Rust in dq-runtime; nothing here but names and the formula.

use dq_runtime::DType;
use proc_macro2::{Ident, Span, TokenStream};
use quote::{format_ident, quote};

use crate::ast::{Attr, KernelFn};
use crate::validate::{self, Combo, Errors, Forms, Node};

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
    let forms = validate::formula(&f, validate::src_kinds(&combos), &mut errors);
    match errors.into_result(()) {
        Ok(()) => expand(&f, &combos, &forms),
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

fn expand(f: &KernelFn, combos: &[Combo], forms: &Forms) -> TokenStream {
    let p = private();
    let irs = |n: &Option<Vec<Node>>| {
        n.as_ref()
            .map(|n| n.iter().map(ir_node).collect::<Vec<_>>())
    };
    let (int_ir, float_ir) = (irs(&forms.int), irs(&forms.float));
    let entries = combos.iter().map(|c| {
        let (s, z) = (marker(Some(c.src)), marker(c.zps));
        let d = marker(Some(c.dst));
        let d = if c.scales == c.dst {
            quote!(#p::dtypes::#d)
        } else {
            quote!(#p::dtypes::E8<#p::dtypes::#d>)
        };
        quote!(#p::Entry::new::<#p::dtypes::#s, #p::dtypes::#z, #d, __Formula>())
    });
    let eval = match &forms.int {
        Some(nodes) => eval_body(nodes),
        None => quote!(unreachable!("generated for float src only")),
    };
    let float_items = forms.float.as_ref().map(|nodes| {
        let body = eval_body(nodes);
        quote! {
            const FLOAT_SRC: bool = true;
            #[inline(always)]
            #[allow(unused_variables)]
            fn eval_float<L: #p::Lanes>(l: L, q: L::Float, s: L::Float) -> L::Float {
                #body
            }
        }
    });
    let quiet = [&int_ir, &float_ir]
        .into_iter()
        .flatten()
        .map(|ir| quote!(#p::may_pass_signaling(&[#(#ir),*])));
    let formula = quote! {
        struct __Formula;
        impl #p::Formula for __Formula {
            const QUIET: bool = false #(|| #quiet)*;
            #[inline(always)]
            #[allow(unused_variables)]
            fn eval<L: #p::Lanes>(l: L, q: L::Int, z: L::Int, s: L::Float) -> L::Float {
                #eval
            }
            #float_items
        }
    };
    let first = int_ir
        .as_ref()
        .or(float_ir.as_ref())
        .cloned()
        .unwrap_or_default();
    let name = f.ident.to_string();
    let with_float = match (&int_ir, &float_ir) {
        (Some(_), Some(ir)) => {
            quote!(.with_float_ir(&#p::FormulaIr { name: #name, nodes: &[#(#ir),*] }))
        }
        _ => quote!(),
    };
    kernel_static_with(
        f,
        quote!(&[#(#first),*]),
        quote!({ #formula &[#(#entries),*] }),
        with_float,
    )
}

/// `static NAME: GeneratedKernel = ...;` with the user's docs and visibility.
fn kernel_static(f: &KernelFn, nodes: TokenStream, table: TokenStream) -> TokenStream {
    kernel_static_with(f, nodes, table, quote!())
}

/// [`kernel_static`], the constructor followed by `with` (a float-src form).
fn kernel_static_with(
    f: &KernelFn,
    nodes: TokenStream,
    table: TokenStream,
    with: TokenStream,
) -> TokenStream {
    let p = private();
    let (attrs, vis, ident) = (&f.attrs, &f.vis, &f.ident);
    let name = ident.to_string();
    quote! {
        #(#attrs)*
        #[allow(non_upper_case_globals)]
        #vis static #ident: #p::GeneratedKernel = #p::GeneratedKernel::new(
            &#p::FormulaIr { name: #name, nodes: #nodes },
            #table,
        )#with;
    }
}

/// The marker type of a dtype (`None`: no zero points).
fn marker(dtype: Option<DType>) -> Ident {
    // The markers are named as the dtype's variant (`S4`, `BF16`, `F8E4M3`).
    let m = match dtype {
        None => "NoZp".to_string(),
        Some(d) => format!("{d:?}"),
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
