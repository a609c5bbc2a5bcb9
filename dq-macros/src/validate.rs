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
    if key == "scales" {
        return vec![DST, DType::E8M0.name()];
    }
    let names = DType::ALL.into_iter().filter(|&d| used(d)).map(DType::name);
    match key {
        "zps" => std::iter::once(NONE).chain(names).collect(),
        _ => names.collect(),
    }
}

/// `dst`, the scales spelling of "the dst dtype".
const DST: &str = "dst";

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
        let scales = if r.e8m0_scales {
            ", scales dst/e8m0"
        } else {
            ""
        };
        let rule = match r.zps {
            Zps::Held(z) | Zps::OneOf(z) => format!(
                "{name}: src {src}, zps {NONE}/{} ({NONE} for float src), dst {dst}",
                slashed(z.list())
            ),
            Zps::SrcDType => format!("{name}: src {src} with zps of the src dtype, dst {dst}"),
        };
        format!("{rule}{scales}")
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

/// One (src, zps, dst, scales) combination (`zps` `None`: the DSL's `none`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Combo {
    pub src: DType,
    pub zps: Option<DType>,
    pub dst: DType,
    /// The scales dtype: the dst dtype, or e8m0.
    pub scales: DType,
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
                "src" | "zps" | "dst" | "scales" => allowed_in(&key),
                _ => {
                    errors.at(
                        &l.key,
                        format!("unknown key `{key}`; expected `src`, `zps`, `dst` or `scales`"),
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
                let known = parse_name(&name).is_ok() || (key == "scales" && name == DST);
                if !known {
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
        let dst_scales = [Ident::new(DST, Span::call_site())];
        let scales = lists.get("scales").map_or(&dst_scales[..], |v| &v[..]);
        for s in &lists["src"] {
            for z in &lists["zps"] {
                for d in &lists["dst"] {
                    for sc in scales {
                        let dtype = |n: &Ident| parse_name(&n.to_string()).ok().flatten();
                        let (Some(src), zps, Some(dst)) = (dtype(s), dtype(z), dtype(d)) else {
                            continue; // the lists hold checked names only
                        };
                        let scales = dtype(sc).unwrap_or(dst);
                        let c = Combo {
                            src,
                            zps,
                            dst,
                            scales,
                        };
                        let mut what = format!("src = {s}, zps = {z}, dst = {d}");
                        if scales != dst {
                            what += &format!(", scales = {sc}");
                        }
                        if !rules::allows_scales((src, zps, dst), scales) {
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
    }
    out.into_iter().map(|(c, _)| c).collect()
}

/// Which kinds of src (integer, float) the combinations hold.
pub fn src_kinds(combos: &[Combo]) -> (bool, bool) {
    (
        combos.iter().any(|c| !c.src.is_float_src()),
        combos.iter().any(|c| c.src.is_float_src()),
    )
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
    /// `q` is a float src's value (and `z` is 0).
    float_q: bool,
    errors: &'e mut Errors,
}

/// The formula lowered for integer src and for float src (SPEC §10), each where
/// the dtype sets need it.
#[derive(Default)]
pub struct Forms {
    pub int: Option<Vec<Node>>,
    pub float: Option<Vec<Node>>,
}

/// Checks the function and lowers its body for the kinds of src the dtype sets
/// hold (`kinds`: integer, float); the last node is the (float) result.
///
/// `q: int` takes integer src, `q: float` float src, `q: _` either (the body
/// is lowered once per kind).
pub fn formula(f: &KernelFn, kinds: (bool, bool), errors: &mut Errors) -> Forms {
    if f.params.len() != 3 {
        errors.push(syn::Error::new(
            f.paren.span.join(),
            format!(
                "expected 3 parameters (src value, zero point, scale), e.g. `(q: int, z: int, s: float)`; found {}",
                f.params.len()
            ),
        ));
        return Forms::default();
    }
    let params = [0, 1, 2].map(|i| f.params[i].ident.to_string());
    let mut q_ty = None;
    for (i, p) in f.params.iter().enumerate() {
        if params[..i].contains(&params[i]) {
            errors.at(&p.ident, format!("duplicate parameter `{}`", params[i]));
        }
        let kinds: &[&str] = match i {
            0 => &["int", "float"],
            1 => &["int"],
            _ => &["float"],
        };
        let ok = match &p.ty {
            Some(syn::Type::Infer(_)) | None => true,
            Some(syn::Type::Path(t)) => match kinds.iter().find(|k| t.path.is_ident(k)) {
                Some(k) => {
                    if i == 0 {
                        q_ty = Some(*k);
                    }
                    true
                }
                None => false,
            },
            Some(_) => false,
        };
        if !ok {
            let want = if i == 0 {
                format!(
                    "`{}: int` (integer src) or `{}: float` (float src)",
                    params[0], params[0]
                )
            } else {
                format!("`{}: {}`", params[i], kinds[0])
            };
            errors.at(
                &p.ty,
                format!("the DSL fixes parameter types: write {want} (or `_`)"),
            );
        }
    }
    let (ints, floats) = kinds;
    match q_ty {
        Some("int") if floats => errors.at(
            &f.params[0].ty,
            format!(
                "the dtype sets list a float src (f8_e4m3, f8_e5m2, f4_e2m1), whose value is a float: write `{}: float` (float src only) or `{}: _`",
                params[0], params[0]
            ),
        ),
        Some("float") if ints => errors.at(
            &f.params[0].ty,
            format!(
                "`{}: float` is a float src's value, but the dtype sets list an integer src: write `{}: _` to take both",
                params[0], params[0]
            ),
        ),
        _ => {}
    }
    let mut forms = Forms::default();
    let lower = |float_q: bool, errors: &mut Errors| {
        let mut l = Lower {
            nodes: Vec::new(),
            names: HashMap::new(),
            params: params.clone(),
            leaves: [None; 3],
            float_q,
            errors,
        };
        l.body(f)
    };
    if ints || !floats {
        forms.int = lower(false, errors);
    }
    if floats {
        // The second pass's errors repeat the first's, unless the first had none.
        let mut second = Errors::default();
        forms.float = lower(true, &mut second);
        if errors.0.is_none() {
            *errors = second;
        }
    }
    forms
}

impl Lower<'_> {
    /// Lowers the body; `None` when it has no result expression.
    fn body(&mut self, f: &KernelFn) -> Option<Vec<Node>> {
        let stmts = &f.body.stmts;
        let Some((last, lets)) = stmts.split_last() else {
            self.errors.at(
                &f.body,
                "the body is empty; it must end with the formula's result",
            );
            return None;
        };
        for st in lets {
            self.stmt(st);
        }
        let result = match last {
            Stmt::Expr(e, None) => e,
            other => {
                self.errors.at(
                    other,
                    "the body must end with an expression (the result), not a statement",
                );
                return None;
            }
        };
        let (_, ty) = self.expr(result);
        if ty == Ty::Int {
            self.errors.at(
                result,
                "integer-only formula: the result needs a float step, e.g. a multiply by the scale: `(q - z) * s`",
            );
        }
        Some(std::mem::take(&mut self.nodes))
    }

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
        // With a float src, `q` is its value and `z` the float 0 (no zero points).
        let leaf = match i {
            1 if self.float_q => Node::Lit(0.0),
            _ => [Node::Q, Node::Z, Node::S][i],
        };
        let node = match self.leaves[i] {
            Some(n) => n,
            None => {
                let n = self.push(leaf);
                self.leaves[i] = Some(n);
                n
            }
        };
        let float = i == 2 || (self.float_q && i < 2);
        Some((node, if float { Ty::Float } else { Ty::Int }))
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

    /// True when `e` is the zero-point parameter (not a binding of that name).
    fn is_z(&self, e: &Expr) -> bool {
        match e {
            Expr::Paren(p) => self.is_z(&p.expr),
            Expr::Path(p) => p.path.get_ident().is_some_and(|id| {
                let s = id.to_string();
                s == self.params[1] && !self.names.contains_key(&s)
            }),
            _ => false,
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
            && self.float_q
            && self.is_z(&b.right)
        {
            // `x - z` with z = 0 is x (exact for a float src's values).
            return (self.float(&b.left), Ty::Float);
        }
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
            "dynamic: src s8/u8/s4/u4/f8_e4m3/f8_e5m2/f4_e2m1, zps none/s4/u4/s8/u8/s32 \
             (none for float src), dst f32/f16/bf16, scales dst/e8m0; \
             static: src s8/u8/f8_e4m3/f8_e5m2, zps none/s32/s64 (none for float src), dst f32; \
             axes: src s8/u8/s32 with zps of the src dtype, dst f16/bf16/f32/f64"
        );
    }

    #[test]
    fn names_per_key() {
        assert_eq!(
            allowed_in("src"),
            [
                "s4", "u4", "s8", "u8", "s32", "f8_e4m3", "f8_e5m2", "f4_e2m1"
            ]
        );
        assert_eq!(allowed_in("scales"), ["dst", "e8m0"]);
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
