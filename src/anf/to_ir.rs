//! The normal form back to core IR: each binding a `let`, each loop its
//! primitive applied to a lambda, with the types the normal form carries
//! (every node gets one through the [`Builder`]). Reverse mode computes
//! the parts of a block it does not tape with these functions; the
//! optimiser reads an entry as [`normal_program`] gives it.

use std::rc::Rc;

use cranelift_entity::SecondaryMap;

use super::{AnfError, Atom, Binding, Block, LoopKind, Normal, Rhs, normalise};
use crate::ir::build::Builder;
use crate::ir::{Def, Expr, ExprId, Prim, Program, Type};

/// The first-order normal form of an entry as a program (`anf'entry`), to
/// check normalisation against the original.
pub fn normal_program(
    prog: &Program,
    types: &SecondaryMap<ExprId, Option<Type>>,
    entry: &str,
    params: &[Type],
) -> Result<Program, AnfError> {
    Ok(program_of(&normalise(prog, types, entry, params)?))
}

/// A normal form as a one-definition program, `anf'entry`.
pub fn program_of(normal: &Normal) -> Program {
    let mut out = Program::new();
    let mut out_types = SecondaryMap::new();
    let mut b = Builder::new(&mut out, &mut out_types);
    b.with_binding_spans(&normal.spans);
    let def = plain_program(&mut b, normal, "anf'entry");
    out.defs.push(def);
    out
}

/// The normal form itself as a definition (for checking normalisation).
pub fn plain_program(b: &mut Builder<'_>, normal: &Normal, name: &str) -> Def {
    let mut e = plain(b, &normal.body);
    for (p, t) in normal.params.iter().rev() {
        let ft = Type::fun(t.clone(), b.ty(e));
        e = b.add(
            Expr::Lam {
                param: p.clone(),
                ann: Some(t.clone()),
                body: e,
            },
            ft,
        );
    }
    Def {
        name: Rc::from(name),
        span: crate::diagnostic::Span::generated(),
        ann: None,
        body: e,
        prelude: false,
    }
}

/// An atom as IR: a variable or a literal.
pub fn atom(b: &mut Builder<'_>, a: &Atom) -> ExprId {
    match a {
        Atom::Var(n, t) => b.var(n, t.clone()),
        Atom::Lit(l, t) => b.add(Expr::Lit(*l), t.clone()),
    }
}

/// A primitive or array binding's right-hand side as IR, at the binding's
/// source span.
pub fn simple_rhs(b: &mut Builder<'_>, bd: &Binding) -> ExprId {
    let was = b.at_binding(&bd.name);
    let e = simple_rhs_here(b, bd);
    b.restore(was);
    e
}

fn simple_rhs_here(b: &mut Builder<'_>, bd: &Binding) -> ExprId {
    match &bd.rhs {
        Rhs::Prim(op, args) => {
            let xs = args.iter().map(|a| atom(b, a)).collect();
            b.prim(*op, xs, bd.ty.clone())
        }
        Rhs::Array(args) => {
            let xs: Vec<ExprId> = args.iter().map(|a| atom(b, a)).collect();
            b.add(Expr::Array(xs.into()), bd.ty.clone())
        }
        _ => unreachable!("only primitive and array bindings are simple"),
    }
}

/// The block's plain computation (no tape).
pub fn plain(b: &mut Builder<'_>, blk: &Block) -> ExprId {
    let mut lets = Vec::new();
    for bd in &blk.binds {
        let v = plain_rhs(b, bd);
        lets.push((bd.name.clone(), v));
    }
    let mut body = atom(b, &blk.result);
    for (n, v) in lets.into_iter().rev() {
        body = b.let_(n, v, body);
    }
    body
}

/// One binding's right-hand side, computed plainly (no tape), at the
/// binding's source span.
pub fn plain_rhs(b: &mut Builder<'_>, bd: &Binding) -> ExprId {
    let was = b.at_binding(&bd.name);
    let e = plain_rhs_here(b, bd);
    b.restore(was);
    e
}

fn plain_rhs_here(b: &mut Builder<'_>, bd: &Binding) -> ExprId {
    match &bd.rhs {
        Rhs::Prim(..) | Rhs::Array(_) => simple_rhs(b, bd),
        Rhs::If(c, t, f) => {
            let c = atom(b, c);
            let t = plain(b, t);
            let f = plain(b, f);
            b.if_(c, t, f)
        }
        Rhs::Loop {
            kind,
            n,
            state,
            index,
            body,
        } => {
            let n = atom(b, n);
            let pb = plain(b, body);
            let lam = b.lam(index.clone(), Type::Index, pb);
            match (kind, state) {
                (LoopKind::Build, _) => b.prim(Prim::Build, vec![n, lam], bd.ty.clone()),
                (k, Some((z, s, st))) => {
                    let f = b.lam(s.clone(), st.clone(), lam);
                    let z = atom(b, z);
                    let op = if *k == LoopKind::IFold {
                        Prim::IFold
                    } else {
                        Prim::IScan
                    };
                    b.prim(op, vec![f, z, n], bd.ty.clone())
                }
                _ => unreachable!("folds have a state"),
            }
        }
        Rhs::While {
            init,
            state,
            ty,
            cond,
            step,
        } => {
            let c = plain(b, cond);
            let c = b.lam(state.clone(), ty.clone(), c);
            let f = plain(b, step);
            let f = b.lam(state.clone(), ty.clone(), f);
            let z = atom(b, init);
            b.prim(Prim::While, vec![c, f, z], bd.ty.clone())
        }
    }
}
