//! Checking: dtype sets against the ops' rules, and the body against the DSL,
//! lowering it to formula nodes. Every mistake is collected, then reported together.

use std::collections::HashMap;

use dq_runtime::DType;
use dq_runtime::rules::{self, Zps};
use proc_macro2::Span;
use syn::{BinOp, Expr, Ident, Lit, Stmt, UnOp};

use crate::ast::{Attr, KernelFn};

/// `none`, the zero-point spelling of "no zero points".
const NONE: &str = "none";

/// The DSL names of the dtypes some op allows in `key` (`src`, `zps` or `dst`),
/// in declaration order; `zps` starts with `none`.
fn allowed_in(key: &str) -> Vec<&'static str> {
    let keys = rules::keys();
    let used = |d: DType| match key {
        "src" => keys.iter().any(|k| k.0 == d),
        "zps" => keys.iter().any(|k| k.1 == Some(d)),
        _ => keys.iter().any(|k| k.2 == d),
    };
    let names = DType::ALL.into_iter().filter(|&d| used(d)).map(DType::name);
    match key {
        "zps" => std::iter::once(NONE).chain(names).collect(),
        _ => names.collect(),
    }
}

/// The rule table in words, for "no op allows" errors.
fn rules_text() -> String {
    let slashed = |list: &[DType]| {
        let names: Vec<&str> = list.iter().map(|d| d.name()).collect();
        names.join("/")
    };
    [
        ("dynamic", &rules::DYNAMIC),
        ("static", &rules::STATIC),
        ("axes", &rules::AXES),
    ]
    .iter()
    .map(|(name, r)| {
        let src = slashed(r.src.list());
        let dst = slashed(r.dst.list());
        match r.zps {
            Zps::Held(z) | Zps::OneOf(z) => format!(
                "{name}: src {src}, zps {NONE}/{}, dst {dst}",
                slashed(z.list())
            ),
            Zps::SrcDType => format!("{name}: src {src} with zps of the src dtype, dst {dst}"),
        }
    })
    .collect::<Vec<_>>()
    .join("; ")
}

/// Collects errors, combining them into one.
#[derive(Default)]
pub struct Errors(Option<syn::Error>);

impl Errors {
    pub fn push(&mut self, e: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(e),
            None => self.0 = Some(e),
        }
    }
    pub fn at(&mut self, tokens: impl quote::ToTokens, msg: impl std::fmt::Display) {
        self.push(syn::Error::new_spanned(tokens, msg));
    }
    pub fn into_result<T>(self, ok: T) -> syn::Result<T> {
        match self.0 {
            Some(e) => Err(e),
            None => Ok(ok),
        }
    }
}

/// One (src, zps, dst) combination (`zps` `None`: the DSL's `none`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Combo {
    pub src: DType,
    pub zps: Option<DType>,
    pub dst: DType,
}

/// The dtype a DSL name spells (`none` is `Ok(None)`), `Err` for an unknown name.
fn parse_name(name: &str) -> Result<Option<DType>, ()> {
    match name {
        NONE => Ok(None),
        _ => name.parse().map(Some).map_err(|_| ()),
    }
}

/// Checks the dtype sets; returns every combination, in order.
pub fn combos(attr: &Attr, errors: &mut Errors) -> Vec<Combo> {
    if attr.sets.is_empty() {
        errors.push(syn::Error::new(
            Span::call_site(),
            "expected dtype sets: `#[dequant_kernel(src = [...], zps = [...], dst = [...])]`",
        ));
    }
    let mut out: Vec<(Combo, Ident)> = Vec::new();
    for set in &attr.sets {
        let mut lists: HashMap<String, Vec<Ident>> = HashMap::new();
        for l in &set.lists {
            let key = l.key.to_string();
            let ok = match key.as_str() {
                "src" | "zps" | "dst" => allowed_in(&key),
                _ => {
                    errors.at(
                        &l.key,
                        format!("unknown key `{key}`; expected `src`, `zps` or `dst`"),
                    );
                    continue;
                }
            };
            if lists.contains_key(&key) {
                errors.at(&l.key, format!("duplicate key `{key}` in this dtype set"));
                continue;
            }
            if l.names.is_empty() {
                errors.at(&l.key, format!("`{key}` lists no dtype"));
            }
            let mut names: Vec<Ident> = Vec::new();
            for n in &l.names {
                let name = n.to_string();
                if parse_name(&name).is_err() {
                    let all: Vec<&str> = DType::ALL.iter().map(|d| d.name()).collect();
                    errors.at(
                        n,
                        format!(
                            "unknown dtype `{name}`; expected one of {} (or `{NONE}` for zps)",
                            all.join(", ")
                        ),
                    );
                } else if !ok.contains(&name.as_str()) {
                    errors.at(
                        n,
                        format!(
                            "`{name}` is not allowed in `{key}`; expected one of {}",
                            ok.join(", ")
                        ),
                    );
                } else if names.iter().any(|m| *m == name) {
                    errors.at(n, format!("duplicate dtype `{name}` in `{key}`"));
                } else {
                    names.push(n.clone());
                }
            }
            lists.insert(key, names);
        }
        let mut missing = false;
        for key in ["src", "zps", "dst"] {
            if !lists.contains_key(key) && !set.lists.is_empty() {
                let at = &set.lists[0].key;
                errors.at(at, format!("missing `{key} = [...]` in this dtype set"));
                missing = true;
            }
        }
        if missing || set.lists.is_empty() {
            continue;
        }
        for s in &lists["src"] {
            for z in &lists["zps"] {
                for d in &lists["dst"] {
                    let dtype = |n: &Ident| parse_name(&n.to_string()).ok().flatten();
                    let (Some(src), zps, Some(dst)) = (dtype(s), dtype(z), dtype(d)) else {
                        continue; // the lists hold checked names only
                    };
                    let c = Combo { src, zps, dst };
                    let what = format!("src = {s}, zps = {z}, dst = {d}");
                    if !rules::allows((src, zps, dst)) {
                        errors.at(
                            s,
                            format!("no op allows the combination {what} ({})", rules_text()),
                        );
                    } else if out.iter().any(|(o, _)| *o == c) {
                        errors.at(s, format!("duplicate combination {what} (already listed)"));
                    } else {
                        out.push((c, s.clone()));
                    }
                }
            }
        }
    }
    out.into_iter().map(|(c, _)| c).collect()
}

/// A formula node (mirrors `dq::formula::Node`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Node {
    Q,
    Z,
    S,
    IntSub(usize, usize),
    Float(usize),
    Lit(f64),
    Neg(usize),
    Abs(usize),
    Add(usize, usize),
    Sub(usize, usize),
    Mul(usize, usize),
    Min(usize, usize),
    Max(usize, usize),
}

#[derive(Clone, Copy, PartialEq)]
enum Ty {
    Int,
    Float,
}

const ALLOWED: &str = "the formula allows `+`, `-`, `*`, unary `-`, `min`, `max`, `abs`, float literals, parentheses and `let` bindings";

/// Lowers the body to SSA nodes, with the DSL's typing.
struct Lower<'e> {
    nodes: Vec<Node>,
    names: HashMap<String, (usize, Ty)>,
    params: [String; 3],
    leaves: [Option<usize>; 3],
    errors: &'e mut Errors,
}

/// Checks the function and lowers its body; the last node is the (float) result.
pub fn formula(f: &KernelFn, errors: &mut Errors) -> Vec<Node> {
    if f.params.len() != 3 {
        errors.push(syn::Error::new(
            f.paren.span.join(),
            format!(
                "expected 3 parameters (src value, zero point, scale), e.g. `(q: int, z: int, s: float)`; found {}",
                f.params.len()
            ),
        ));
        return Vec::new();
    }
    let params = [0, 1, 2].map(|i| f.params[i].ident.to_string());
    for (i, p) in f.params.iter().enumerate() {
        if params[..i].contains(&params[i]) {
            errors.at(&p.ident, format!("duplicate parameter `{}`", params[i]));
        }
        let kind = if i == 2 { "float" } else { "int" };
        let ok = match &p.ty {
            Some(syn::Type::Infer(_)) | None => true,
            Some(syn::Type::Path(t)) => t.path.is_ident(kind),
            Some(_) => false,
        };
        if !ok {
            errors.at(
                &p.ty,
                format!(
                    "the DSL fixes parameter types: write `{}: {kind}` (or `_`)",
                    params[i]
                ),
            );
        }
    }
    let mut l = Lower {
        nodes: Vec::new(),
        names: HashMap::new(),
        params,
        leaves: [None; 3],
        errors,
    };
    let stmts = &f.body.stmts;
    let Some((last, lets)) = stmts.split_last() else {
        l.errors.at(
            &f.body,
            "the body is empty; it must end with the formula's result",
        );
        return Vec::new();
    };
    for st in lets {
        l.stmt(st);
    }
    let result = match last {
        Stmt::Expr(e, None) => e,
        other => {
            l.errors.at(
                other,
                "the body must end with an expression (the result), not a statement",
            );
            return Vec::new();
        }
    };
    let (_, ty) = l.expr(result);
    if ty == Ty::Int {
        l.errors.at(
            result,
            "integer-only formula: the result needs a float step, e.g. a multiply by the scale: `(q - z) * s`",
        );
    }
    l.nodes
}

impl Lower<'_> {
    fn push(&mut self, n: Node) -> usize {
        self.nodes.push(n);
        self.nodes.len() - 1
    }

    fn stmt(&mut self, st: &Stmt) {
        let Stmt::Local(local) = st else {
            self.errors
                .at(st, format!("unsupported statement; {ALLOWED}"));
            return;
        };
        let syn::Pat::Ident(p) = &local.pat else {
            self.errors.at(
                &local.pat,
                "a `let` binding must name one variable: `let d = q - z;`",
            );
            return;
        };
        let Some(init) = &local.init else {
            self.errors
                .at(local, "a `let` binding needs a value: `let d = q - z;`");
            return;
        };
        if init.diverge.is_some()
            || p.by_ref.is_some()
            || p.mutability.is_some()
            || p.subpat.is_some()
        {
            self.errors
                .at(local, "a `let` binding must be `let name = expr;`");
            return;
        }
        let v = self.expr(&init.expr);
        self.names.insert(p.ident.to_string(), v);
    }

    /// The node an identifier names, if it is a parameter or a binding.
    fn name(&mut self, id: &Ident) -> Option<(usize, Ty)> {
        let s = id.to_string();
        if let Some(&v) = self.names.get(&s) {
            return Some(v);
        }
        let i = self.params.iter().position(|p| *p == s)?;
        let node = match self.leaves[i] {
            Some(n) => n,
            None => {
                let n = self.push([Node::Q, Node::Z, Node::S][i]);
                self.leaves[i] = Some(n);
                n
            }
        };
        Some((node, if i == 2 { Ty::Float } else { Ty::Int }))
    }

    /// The integer leaf (`q` or `z`) an expression is, if it is one.
    fn int_leaf(&mut self, e: &Expr) -> Option<usize> {
        match e {
            Expr::Paren(p) => self.int_leaf(&p.expr),
            Expr::Path(p) => {
                let id = p.path.get_ident()?;
                let (n, ty) = self.name(id)?;
                (ty == Ty::Int && matches!(self.nodes[n], Node::Q | Node::Z)).then_some(n)
            }
            _ => None,
        }
    }

    fn float(&mut self, e: &Expr) -> usize {
        let (n, ty) = self.expr(e);
        match ty {
            Ty::Float => n,
            Ty::Int => self.push(Node::Float(n)),
        }
    }

    fn bad(&mut self, at: impl quote::ToTokens, msg: String) -> (usize, Ty) {
        self.errors.at(at, msg);
        (self.push(Node::Lit(0.0)), Ty::Float)
    }

    fn expr(&mut self, e: &Expr) -> (usize, Ty) {
        match e {
            Expr::Paren(p) => self.expr(&p.expr),
            Expr::Group(g) => self.expr(&g.expr),
            Expr::Path(p) => match p.path.get_ident() {
                Some(id) => match self.name(id) {
                    Some(v) => v,
                    None => self.bad(
                        id,
                        format!(
                            "unknown name `{id}`; the formula can use its parameters ({}) and its `let` bindings",
                            self.params.join(", ")
                        ),
                    ),
                },
                None => self.bad(p, format!("unsupported path; {ALLOWED}")),
            },
            Expr::Lit(l) => match &l.lit {
                Lit::Float(f) if f.suffix().is_empty() => match f.base10_parse::<f64>() {
                    Ok(v) => (self.push(Node::Lit(v)), Ty::Float),
                    Err(err) => self.bad(f, err.to_string()),
                },
                Lit::Float(f) => self.bad(f, "write float literals without a suffix (they take the working type)".into()),
                Lit::Int(i) => self.bad(
                    i,
                    format!("integer literal `{i}`: write a float literal such as `{}.0`", i.base10_digits()),
                ),
                other => self.bad(other, format!("unsupported literal; {ALLOWED}")),
            },
            Expr::Unary(u) => match u.op {
                UnOp::Neg(_) => {
                    let a = self.float(&u.expr);
                    (self.push(Node::Neg(a)), Ty::Float)
                }
                _ => self.bad(u.op, format!("unsupported operator; {ALLOWED}")),
            },
            Expr::Binary(b) => self.binary(b),
            Expr::Call(c) => self.call(c),
            other => self.bad(other, format!("unsupported expression; {ALLOWED}")),
        }
    }

    fn binary(&mut self, b: &syn::ExprBinary) -> (usize, Ty) {
        if let BinOp::Sub(_) = b.op
            && let (Some(x), Some(y)) = (self.int_leaf(&b.left), self.int_leaf(&b.right))
        {
            return (self.push(Node::IntSub(x, y)), Ty::Int);
        }
        let make: fn(usize, usize) -> Node = match b.op {
            BinOp::Add(_) => Node::Add,
            BinOp::Sub(_) => Node::Sub,
            BinOp::Mul(_) => Node::Mul,
            op => {
                let msg = format!("unsupported operator `{}`; {ALLOWED}", quote::quote!(#op));
                return self.bad(op, msg);
            }
        };
        let x = self.float(&b.left);
        let y = self.float(&b.right);
        (self.push(make(x, y)), Ty::Float)
    }

    fn call(&mut self, c: &syn::ExprCall) -> (usize, Ty) {
        let name = match &*c.func {
            Expr::Path(p) => p.path.get_ident().map(|i| i.to_string()),
            _ => None,
        };
        let (arity, make): (usize, fn(&[usize]) -> Node) = match name.as_deref() {
            Some("min") => (2, |a| Node::Min(a[0], a[1])),
            Some("max") => (2, |a| Node::Max(a[0], a[1])),
            Some("abs") => (1, |a| Node::Abs(a[0])),
            _ => {
                let f = &c.func;
                let msg = format!(
                    "unsupported function `{}`; allowed: min, max, abs",
                    quote::quote!(#f)
                );
                return self.bad(f, msg);
            }
        };
        if c.args.len() != arity {
            let msg = format!(
                "`{}` takes {arity} argument{}, found {}",
                name.unwrap_or_default(),
                if arity == 1 { "" } else { "s" },
                c.args.len()
            );
            return self.bad(c, msg);
        }
        let args: Vec<usize> = c.args.iter().map(|a| self.float(a)).collect();
        (self.push(make(&args)), Ty::Float)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words the "no op allows" error quotes (tests/ui pins them too).
    #[test]
    fn rules_in_words() {
        assert_eq!(
            rules_text(),
            "dynamic: src s8/u8/s4/u4, zps none/s4/u4/s8/u8/s32, dst f32/f16/bf16; \
             static: src s8/u8, zps none/s32/s64, dst f32; \
             axes: src s8/u8/s32 with zps of the src dtype, dst f16/bf16/f32/f64"
        );
    }

    #[test]
    fn names_per_key() {
        assert_eq!(allowed_in("src"), ["s4", "u4", "s8", "u8", "s32"]);
        assert_eq!(
            allowed_in("zps"),
            ["none", "s4", "u4", "s8", "u8", "s32", "s64"]
        );
        assert_eq!(allowed_in("dst"), ["f16", "bf16", "f32", "f64"]);
        assert_eq!(parse_name("none"), Ok(None));
        assert_eq!(parse_name("bf16"), Ok(Some(DType::BF16)));
        assert_eq!(parse_name("i8"), Err(()));
    }
}
