//! Parsing: the attribute's dtype sets and the DSL function, keeping the user's
//! tokens for error spans.

use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Attribute, Block, Ident, Token, Type, Visibility, bracketed, parenthesized, token};

/// The attribute: one or more dtype sets separated by `;`.
pub struct Attr {
    pub sets: Vec<Set>,
}

/// `src = [...], zps = [...], dst = [...]` in any order.
pub struct Set {
    pub lists: Vec<List>,
}

/// `key = [name, ...]`.
pub struct List {
    pub key: Ident,
    pub names: Vec<Ident>,
}

impl Parse for Attr {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let sets = Punctuated::<Set, Token![;]>::parse_terminated(input)?;
        Ok(Attr {
            sets: sets.into_iter().collect(),
        })
    }
}

impl Parse for Set {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut lists = Vec::new();
        while !input.is_empty() && !input.peek(Token![;]) {
            let key: Ident = input.parse()?;
            input.parse::<Token![=]>()?;
            let content;
            bracketed!(content in input);
            let names = Punctuated::<Ident, Token![,]>::parse_terminated(&content)?;
            lists.push(List {
                key,
                names: names.into_iter().collect(),
            });
            if !input.peek(Token![,]) {
                break;
            }
            input.parse::<Token![,]>()?;
        }
        Ok(Set { lists })
    }
}

/// A parameter: `q: int` or `q: _` (Rust requires a type; the DSL fixes it).
pub struct Param {
    pub ident: Ident,
    pub ty: Option<Type>,
}

impl Parse for Param {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let ident = input.parse()?;
        let ty = if input.peek(Token![:]) {
            input.parse::<Token![:]>()?;
            Some(input.parse()?)
        } else {
            None
        };
        Ok(Param { ident, ty })
    }
}

/// `fn name(q: int, z: int, s: float) { body }` with its doc comments and visibility.
pub struct KernelFn {
    pub attrs: Vec<Attribute>,
    pub vis: Visibility,
    pub ident: Ident,
    pub paren: token::Paren,
    pub params: Vec<Param>,
    pub body: Block,
}

impl Parse for KernelFn {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let vis = input.parse()?;
        input.parse::<Token![fn]>()?;
        let ident = input.parse()?;
        let content;
        let paren = parenthesized!(content in input);
        let params = Punctuated::<Param, Token![,]>::parse_terminated(&content)?;
        Ok(KernelFn {
            attrs,
            vis,
            ident,
            paren,
            params: params.into_iter().collect(),
            body: input.parse()?,
        })
    }
}
