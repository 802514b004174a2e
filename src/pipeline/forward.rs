//! The forward-mode wrappers of an entry `F` (spec/ad-forward.md, "The
//! command line"): `deriv'entry = fun p'1 … p'n -> deriv (F p'1 … p'n) p'k`,
//! built as IR (not as source text, so no user definition can shadow
//! `deriv` or a primitive) and appended to the session's program, which is
//! inferred again only for the new definition; then the wrapper is an
//! entry like any other, its `deriv` expanded by forward mode.

use std::rc::Rc;

use super::typed::{entry_of, no_param, typed_appended};
use super::{Artefact, Entry, Form, avoiding};
use crate::diagnostic::{Diagnostic, Span};
use crate::interchange::InputError;
use crate::ir::{Def, Expr, ExprId, Lit, Name, Prim, Program, Type};
use crate::types::Typing;

/// The wrapper of `base` (a monomorphic entry of the typed `program`) with
/// respect to its parameter `k`, in `form`.
pub(super) fn wrapper(
    (program, typing): (&Program, &Typing),
    artefact: Artefact,
    base: &Entry,
    k: usize,
    form: Form,
) -> Result<Entry, Diagnostic> {
    let Some((wrt, wt)) = base.params.get(k) else {
        return Err(no_param(base, k));
    };
    let bad = |message: String| {
        Diagnostic::from(&InputError::Params {
            message,
            span: base.span,
        })
    };
    if base.result.deriv_result(wt).is_none() {
        return Err(bad(format!(
            "cannot differentiate with respect to `{wrt}` of type {wt} in a forward mode: the variable must be Double, Vector or Matrix (modes rev, tape and fd take any data type; inside the language, `jvp` does)"
        )));
    }
    let tangents = match form {
        Form::Duals(_) => None,
        // One tangent shaped like the result per element of the variable.
        Form::Tangents(_) => Some(match wt {
            Type::Double => base.result.clone(),
            Type::Array(e) if **e == Type::Double => Type::array(base.result.clone()),
            _ => Type::array(Type::array(base.result.clone())),
        }),
        Form::Rows => {
            if *wt != Type::array(Type::Double) {
                return Err(bad(format!(
                    "the Jacobian's rows need a Vector variable; `{wrt}` has type {wt} (use --mode fwd-vec)"
                )));
            }
            None
        }
    };
    let mut prog = program.clone();
    let g = Span::generated();
    let entry_name = &base.name;
    // Parameter names that do not shadow the entry.
    let names: Vec<Name> = avoiding(entry_name, |q| {
        (1..=base.params.len())
            .map(|i| format!("p'{q}{i}"))
            .collect()
    })
    .into_iter()
    .map(Rc::from)
    .collect();
    let mut call = prog.add(Expr::Var(Rc::from(entry_name.as_str())), g);
    for n in &names {
        let a = prog.add(Expr::Var(n.clone()), g);
        call = prog.add(Expr::App { fun: call, arg: a }, g);
    }
    let mut body = prog.add(
        Expr::Deriv {
            body: call,
            wrt: names[k].clone(),
        },
        g,
    );
    if let Some(t) = &tangents {
        body = tangent_ir(&mut prog, body, t, 0);
    }
    for (n, (_, t)) in names.iter().zip(&base.params).rev() {
        body = prog.add(
            Expr::Lam {
                param: n.clone(),
                ann: Some(t.clone()),
                body,
            },
            g,
        );
    }
    prog.defs.push(Def {
        name: Rc::from("deriv'entry"),
        span: g,
        ann: None,
        body,
        prelude: false,
    });
    let typing = typed_appended(&prog, typing)?;
    entry_of(
        artefact,
        &prog,
        &typing,
        "deriv'entry",
        form.mode(),
        form == Form::Rows,
    )
}

/// The tangent part of `e`, a dual value of primal type `t`, as IR.
fn tangent_ir(prog: &mut Program, e: ExprId, t: &Type, depth: usize) -> ExprId {
    let g = Span::generated();
    let prim = |prog: &mut Program, op: Prim, args: Vec<ExprId>| {
        prog.add(
            Expr::Prim {
                op,
                args: args.into(),
            },
            g,
        )
    };
    match t {
        Type::Double => prim(prog, Prim::Snd, vec![e]),
        Type::Array(el) => {
            let (a, i): (Name, Name) = (
                Rc::from(format!("a't{depth}")),
                Rc::from(format!("k't{depth}")),
            );
            let av = prog.add(Expr::Var(a.clone()), g);
            let len = prim(prog, Prim::Length, vec![av]);
            let av = prog.add(Expr::Var(a.clone()), g);
            let iv = prog.add(Expr::Var(i.clone()), g);
            let x = prim(prog, Prim::Get, vec![av, iv]);
            let inner = tangent_ir(prog, x, el, depth + 1);
            let lam = prog.add(
                Expr::Lam {
                    param: i,
                    ann: None,
                    body: inner,
                },
                g,
            );
            let b = prim(prog, Prim::Build, vec![len, lam]);
            prog.add(
                Expr::Let {
                    name: a,
                    ann: None,
                    value: e,
                    body: b,
                },
                g,
            )
        }
        Type::Pair(x, y) => {
            let p: Name = Rc::from(format!("p't{depth}"));
            let pv = prog.add(Expr::Var(p.clone()), g);
            let f = prim(prog, Prim::Fst, vec![pv]);
            let f = tangent_ir(prog, f, x, depth + 1);
            let pv = prog.add(Expr::Var(p.clone()), g);
            let s2 = prim(prog, Prim::Snd, vec![pv]);
            let s2 = tangent_ir(prog, s2, y, depth + 1);
            let pair = prim(prog, Prim::Pair, vec![f, s2]);
            prog.add(
                Expr::Let {
                    name: p,
                    ann: None,
                    value: e,
                    body: pair,
                },
                g,
            )
        }
        // Index and Bool have no tangent; a zero keeps the shape.
        Type::Index | Type::Bool | Type::Fun(..) => prog.add(Expr::Lit(Lit::Int(0)), g),
    }
}
