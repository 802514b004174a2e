//! Monomorphisation: copies every definition reachable from an entry once
//! per ground instantiation of its type scheme (spec/types.md,
//! "Monomorphisation"). The output program has only ground types; integer
//! literals whose type is Double become Double literals, so the evaluator
//! never needs types. Unresolved variables default to Double.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use cranelift_entity::SecondaryMap;

use super::TypeError;
use super::infer::{Ty, Typing};
use crate::diagnostic::Span;
use crate::ir::{Def, Expr, ExprId, Lit, Name, Program, Type};

/// A program with only ground types, and the type of every expression.
pub struct Monomorphic {
    pub program: Program,
    pub types: SecondaryMap<ExprId, Option<Type>>,
}

pub fn monomorphise(
    prog: &Program,
    typing: &Typing,
    entry: &str,
) -> Result<Monomorphic, TypeError> {
    let Some(entry_idx) = prog.defs.iter().rposition(|d| &*d.name == entry) else {
        return Err(TypeError::NoEntry {
            name: entry.to_string(),
            available: prog
                .defs
                .iter()
                .filter(|d| !d.prelude)
                .map(|d| d.name.to_string())
                .collect(),
            span: Span::whole_file(),
        });
    };
    let mut m = Mono {
        prog,
        typing,
        out: Program::new(),
        types: SecondaryMap::new(),
        cache: HashMap::new(),
        names: HashMap::new(),
        taken: HashSet::new(),
        used: prog.all_names(),
        queue: Vec::new(),
        done: Vec::new(),
    };
    let args = vec![Type::Double; typing.schemes[entry_idx].vars.len()];
    m.request(entry_idx, args);
    while let Some((idx, args, name)) = m.queue.pop() {
        let scheme = &typing.schemes[idx];
        let map: HashMap<u32, Ty> = scheme
            .vars
            .iter()
            .zip(&args)
            .map(|(v, t)| (*v, Ty::from_type(t)))
            .collect();
        m.cache.clear();
        let body = m.copy(prog.defs[idx].body, &map);
        let d = &prog.defs[idx];
        m.done.push((
            idx,
            Def {
                name,
                span: d.span,
                ann: d.ann.clone(),
                body,
                prelude: d.prelude,
            },
        ));
    }
    // Definitions only refer to earlier ones, so the original order is a
    // dependency order.
    m.done.sort_by_key(|(i, _)| *i);
    m.out.defs = m.done.into_iter().map(|(_, d)| d).collect();
    Ok(Monomorphic {
        program: m.out,
        types: m.types,
    })
}

struct Mono<'a> {
    prog: &'a Program,
    typing: &'a Typing,
    out: Program,
    types: SecondaryMap<ExprId, Option<Type>>,
    /// Ground types per type variable, for the definition being copied.
    cache: HashMap<u32, Type>,
    names: HashMap<(usize, Vec<Type>), Name>,
    /// Names of the copies made so far.
    taken: HashSet<Name>,
    /// Every name in the source program.
    used: HashSet<Name>,
    queue: Vec<(usize, Vec<Type>, Name)>,
    done: Vec<(usize, Def)>,
}

impl Mono<'_> {
    /// The name of the copy of definition `idx` at `args`, queueing it the
    /// first time it is asked for.
    fn request(&mut self, idx: usize, args: Vec<Type>) -> Name {
        if let Some(n) = self.names.get(&(idx, args.clone())) {
            return n.clone();
        }
        let base = self.prog.defs[idx].name.clone();
        // The first copy keeps the definition's name (scoping is unchanged:
        // a reference to a definition was never shadowed). Further copies
        // get `name'k`, avoiding every name the program already uses.
        let mut name = base.clone();
        let mut k = 1;
        while self.taken.contains(&name) {
            name = Rc::from(format!("{base}'{k}"));
            k += 1;
            if self.used.contains(&name) {
                name = base.clone();
            }
        }
        self.taken.insert(name.clone());
        self.names.insert((idx, args.clone()), name.clone());
        self.queue.push((idx, args, name.clone()));
        name
    }

    fn ground_of(&mut self, t: &Ty, map: &HashMap<u32, Ty>) -> Type {
        self.typing.ground_memo(t, map, &mut self.cache)
    }

    fn copy(&mut self, e: ExprId, map: &HashMap<u32, Ty>) -> ExprId {
        let span = self.prog.span(e);
        let ty = self.typing.raw_ty(e).map(|t| self.ground_of(&t, map));
        let new = match self.prog.expr(e).clone() {
            Expr::Var(x) => match self.typing.insts.get(&e) {
                Some((idx, args)) => {
                    let args: Vec<Type> = args.iter().map(|a| self.ground_of(a, map)).collect();
                    Expr::Var(self.request(*idx, args))
                }
                None => Expr::Var(x),
            },
            Expr::Lit(Lit::Int(n)) => {
                let t = self
                    .typing
                    .raw_ty(e)
                    .map(|t| self.ground_of(&t, map))
                    .unwrap_or(Type::Index);
                if t == Type::Double {
                    Expr::Lit(Lit::Double(n as f64))
                } else {
                    Expr::Lit(Lit::Int(n))
                }
            }
            Expr::Lit(l) => Expr::Lit(l),
            Expr::Lam { param, ann, body } => Expr::Lam {
                param,
                ann,
                body: self.copy(body, map),
            },
            Expr::App { fun, arg } => Expr::App {
                fun: self.copy(fun, map),
                arg: self.copy(arg, map),
            },
            Expr::Let {
                name,
                ann,
                value,
                body,
            } => Expr::Let {
                name,
                ann,
                value: self.copy(value, map),
                body: self.copy(body, map),
            },
            Expr::If { cond, then_, else_ } => Expr::If {
                cond: self.copy(cond, map),
                then_: self.copy(then_, map),
                else_: self.copy(else_, map),
            },
            Expr::Prim { op, args } => Expr::Prim {
                op,
                args: args.iter().map(|a| self.copy(*a, map)).collect(),
            },
            Expr::Array(items) => Expr::Array(items.iter().map(|a| self.copy(*a, map)).collect()),
            Expr::Deriv { body, wrt } => Expr::Deriv {
                body: self.copy(body, map),
                wrt,
            },
            Expr::Diff { op, fun, at, dir } => Expr::Diff {
                op,
                fun: self.copy(fun, map),
                at: self.copy(at, map),
                dir: self.copy(dir, map),
            },
        };
        let id = self.out.add(new, span);
        self.types[id] = ty;
        id
    }
}
