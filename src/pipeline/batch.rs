//! A batch of an entry (`Artefact::Batched`): the entry run on every
//! element of arrays of its arguments, in one program, so that native code
//! runs many small problems (BA's observations) in one call:
//!
//! ```text
//! batch'entry = fun (xs1: Array<T1>) … (xsn: Array<Tn>) ->
//!   build (length xs1) (fun i -> e[i])
//! ```
//!
//! where `e[i]` is the entry on `xs1[i] … xsn[i]`, its rows concatenated
//! when it is a matrix (so a batch of scalars, vectors or matrices of
//! Doubles is a vector or a matrix). Built as IR on the entry's own
//! monomorphic program and checked like any program. Every argument array
//! must have as many elements as the first: a shorter one is E-Get-Bot.

use std::rc::Rc;

use super::typed::{check, entry_of};
use super::{Artefact, Entry, ForwardMode, avoiding};
use crate::diagnostic::{Diagnostic, Span};
use crate::ir::{Def, Expr, ExprId, Name, Prim, Program, Type};

/// The batch of `e`.
pub(super) fn batched(artefact: Artefact, e: &Entry) -> Result<Entry, Diagnostic> {
    if e.params.is_empty() {
        return Err(Diagnostic {
            code: "usage",
            message: "a batch needs an entry with parameters".to_string(),
            span: Span::generated(),
            notes: Vec::new(),
        });
    }
    let name = e.name_in_program();
    // Binders that do not shadow the entry: xs1 … xsn and i.
    let mut names = avoiding(&name, |q| {
        (1..=e.params.len())
            .map(|k| format!("xs{q}{k}"))
            .chain([format!("i{q}")])
            .collect()
    });
    let i: Name = Rc::from(names.pop().unwrap_or_default());
    let xs: Vec<Name> = names.into_iter().map(Rc::from).collect();
    let mut prog = e.program.clone();
    let g = Span::generated();
    let var = |prog: &mut Program, x: &Name| prog.add(Expr::Var(x.clone()), g);
    let prim = |prog: &mut Program, op: Prim, args: Vec<ExprId>| {
        prog.add(
            Expr::Prim {
                op,
                args: args.into(),
            },
            g,
        )
    };
    let mut call = var(&mut prog, &name);
    for x in &xs {
        let a = var(&mut prog, x);
        let at = var(&mut prog, &i);
        let arg = prim(&mut prog, Prim::Get, vec![a, at]);
        call = prog.add(Expr::App { fun: call, arg }, g);
    }
    let element = match &e.result {
        Type::Array(r) if matches!(**r, Type::Array(_)) => {
            prim(&mut prog, Prim::Concat, vec![call])
        }
        _ => call,
    };
    let f = prog.add(
        Expr::Lam {
            param: i.clone(),
            ann: None,
            body: element,
        },
        g,
    );
    let first = var(&mut prog, &xs[0]);
    let n = prim(&mut prog, Prim::Length, vec![first]);
    let mut body = prim(&mut prog, Prim::Build, vec![n, f]);
    for (x, (_, t)) in xs.iter().zip(&e.params).rev() {
        body = prog.add(
            Expr::Lam {
                param: x.clone(),
                ann: Some(Type::array(t.clone())),
                body,
            },
            g,
        );
    }
    prog.defs.push(Def {
        name: Rc::from("batch'entry"),
        span: g,
        ann: None,
        body,
        prelude: false,
    });
    let typing = check(&prog)?;
    entry_of(
        artefact,
        &prog,
        &typing,
        "batch'entry",
        ForwardMode::Scalar,
        false,
    )
}
