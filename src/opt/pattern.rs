//! A rule's patterns as typed programs: their metavariables classified
//! (binders, binders free in the pattern, terms with the binders in scope
//! where they occur) and the pattern encoded as a definition whose
//! inference gives every metavariable's type. The rule loader type-checks
//! both sides of every rule with it (a rule may not change a term's type);
//! `fsmooth rules check` builds its random instances on it.

use std::collections::HashMap;
use std::rc::Rc;

use egg::{ENodeOrVar, Id, Language, Pattern, PatternAst, RecExpr, Symbol, Var};

use super::convert::from_recexpr;
use super::lang::{Fsm, subexpr};
use crate::diagnostic::Span;
use crate::ir::{Def, Expr, Program, Type};
use crate::types::infer_program;

/// Walks a pattern, classifying its metavariables.
pub fn classify(
    ast: &PatternAst<Fsm>,
    id: Id,
    scope: &mut Vec<Var>,
    binders: &mut Vec<Var>,
    free: &mut Vec<Var>,
    terms: &mut Vec<(Var, Option<Vec<Var>>)>,
) {
    let binder = |x: Id, binders: &mut Vec<Var>| -> Option<Var> {
        match &ast[x] {
            ENodeOrVar::Var(v) => {
                if !binders.contains(v) {
                    binders.push(*v);
                }
                Some(*v)
            }
            ENodeOrVar::ENode(_) => None,
        }
    };
    match &ast[id] {
        ENodeOrVar::Var(v) => match terms.iter_mut().find(|(w, _)| w == v) {
            Some((_, s)) => {
                let keep: Vec<Var> = s
                    .take()
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|x| scope.contains(x))
                    .collect();
                *s = Some(keep);
            }
            None => terms.push((*v, Some(scope.clone()))),
        },
        ENodeOrVar::ENode(Fsm::Lam([x, b])) => {
            let v = binder(*x, binders);
            scope.extend(v);
            classify(ast, *b, scope, binders, free, terms);
            if v.is_some() {
                scope.pop();
            }
        }
        ENodeOrVar::ENode(Fsm::Let([x, e, b])) => {
            classify(ast, *e, scope, binders, free, terms);
            let v = binder(*x, binders);
            scope.extend(v);
            classify(ast, *b, scope, binders, free, terms);
            if v.is_some() {
                scope.pop();
            }
        }
        ENodeOrVar::ENode(Fsm::Var(x)) => {
            if let Some(v) = binder(*x, binders)
                && !scope.contains(&v)
                && !free.contains(&v)
            {
                free.push(v);
            }
        }
        ENodeOrVar::ENode(n) => {
            for c in n.children() {
                classify(ast, *c, scope, binders, free, terms);
            }
        }
    }
}

pub fn plain(v: Var) -> String {
    v.to_string().trim_start_matches('?').replace('-', "_")
}

/// A RecExpr under construction (children before parents).
#[derive(Default)]
pub struct Nodes(pub Vec<Fsm>);

impl Nodes {
    pub fn add(&mut self, n: Fsm) -> Id {
        self.0.push(n);
        Id::from(self.0.len() - 1)
    }
    pub fn sym(&mut self, s: &str) -> Id {
        self.add(Fsm::Symbol(Symbol::from(s)))
    }
    pub fn var(&mut self, s: &str) -> Id {
        let x = self.sym(s);
        self.add(Fsm::Var(x))
    }
    /// The subterm at `id` as its own RecExpr.
    pub fn expr(&self, id: Id) -> RecExpr<Fsm> {
        subexpr(&RecExpr::from(self.0.clone()), id)
    }
}

/// Copies `ast` into `out`, replacing each metavariable by `binding`.
pub fn instantiate(
    ast: &PatternAst<Fsm>,
    id: Id,
    out: &mut Nodes,
    binding: &HashMap<Var, Id>,
) -> Id {
    match &ast[id] {
        ENodeOrVar::Var(v) => binding[v],
        ENodeOrVar::ENode(n) => {
            let n = n
                .clone()
                .map_children(|c| instantiate(ast, c, out, binding));
            out.add(n)
        }
    }
}

pub fn root(ast: &PatternAst<Fsm>) -> Id {
    Id::from(ast.as_ref().len() - 1)
}

/// A one-definition program `let name : ann = body`, without the prelude.
pub fn program_of(
    name: &str,
    expr: &RecExpr<Fsm>,
    params: &[String],
    ann: Option<Type>,
) -> Program {
    let mut prog = Program::new();
    let mut body = from_recexpr(expr, &mut prog);
    for p in params.iter().rev() {
        body = prog.add(
            Expr::Lam {
                param: Rc::from(p.as_str()),
                ann: None,
                body,
            },
            Span::generated(),
        );
    }
    prog.defs.push(Def {
        name: Rc::from(name),
        span: Span::generated(),
        ann,
        body,
        prelude: false,
    });
    prog
}

/// Like [`instantiate`], but an Index literal `n` becomes
/// `n + length []`, which only Index satisfies (the encoding for typing:
/// an integer literal alone could be a Double in F̃).
pub fn instantiate_indexed(
    ast: &PatternAst<Fsm>,
    id: Id,
    out: &mut Nodes,
    binding: &HashMap<Var, Id>,
) -> Id {
    match &ast[id] {
        ENodeOrVar::ENode(Fsm::Int(n)) => {
            let lit = out.add(Fsm::Int(*n));
            let empty = out.add(Fsm::Array(Box::new([])));
            let len = out.add(Fsm::Length([empty]));
            out.add(Fsm::Add([lit, len]))
        }
        ENodeOrVar::Var(v) => binding[v],
        ENodeOrVar::ENode(n) => {
            let n = n
                .clone()
                .map_children(|c| instantiate_indexed(ast, c, out, binding));
            out.add(n)
        }
    }
}

/// A pattern encoded for typing: `fun s_y … m_e … -> PATTERN` where a
/// binder metavariable `?y` free in the pattern is the parameter `s_y`
/// (bound ones are names), a term metavariable `?e` is `m_e s_x1 … s_xk`,
/// applied to the binders in scope at all its occurrences (a higher-order
/// pattern), and an Index literal is forced to Index.
pub struct Encoding {
    /// Binder metavariables (lam/let names, `var` children).
    pub binders: Vec<Var>,
    /// Binder metavariables that occur free: parameters of the encoding.
    pub free: Vec<Var>,
    /// Term metavariables with the binders in scope at every occurrence.
    pub terms: Vec<(Var, Vec<Var>)>,
    /// `let name = fun s_… m_… -> PATTERN`.
    pub program: Program,
}

/// The encoding of the pattern `ast` as the definition `name`.
pub fn encode(ast: &PatternAst<Fsm>, name: &str) -> Encoding {
    let (mut binders, mut free, mut terms) = (Vec::new(), Vec::new(), Vec::new());
    classify(
        ast,
        root(ast),
        &mut Vec::new(),
        &mut binders,
        &mut free,
        &mut terms,
    );
    let terms: Vec<(Var, Vec<Var>)> = terms
        .into_iter()
        .map(|(v, s)| (v, s.unwrap_or_default()))
        .collect();
    let mut out = Nodes::default();
    let mut binding = HashMap::new();
    for b in &binders {
        let s = out.sym(&format!("s_{}", plain(*b)));
        binding.insert(*b, s);
    }
    for (v, scope) in &terms {
        let mut e = out.var(&format!("m_{}", plain(*v)));
        for x in scope {
            let a = out.var(&format!("s_{}", plain(*x)));
            e = out.add(Fsm::App([e, a]));
        }
        binding.insert(*v, e);
    }
    let top = instantiate_indexed(ast, root(ast), &mut out, &binding);
    let mut params: Vec<String> = free.iter().map(|v| format!("s_{}", plain(*v))).collect();
    params.extend(terms.iter().map(|(v, _)| format!("m_{}", plain(*v))));
    let program = program_of(name, &out.expr(top), &params, None);
    Encoding {
        binders,
        free,
        terms,
        program,
    }
}

/// Whether a rule's two sides can have one type for every instance its
/// left side matches: `let f = fun z -> 0 in (f LHS, f RHS)` must
/// type-check (`f` is not generalised, T-Let, so the sides unify, and
/// nothing asks them to be data). A left
/// side that cannot be typed alone never matches a well-typed term (`rules
/// check` reports it), so it is not a reason to reject the rule. `Err`
/// says why the sides disagree.
pub fn sides_agree(lhs: &Pattern<Fsm>, rhs: &Pattern<Fsm>) -> Result<(), String> {
    if infer_program(&encode(&lhs.ast, "lhs").program).is_err() {
        return Ok(());
    }
    let both: Pattern<Fsm> = format!(
        "(let same'f (lam same'z 0) (pair (app (var same'f) {lhs}) (app (var same'f) {rhs})))"
    )
    .parse()
    .map_err(|e| format!("the two sides do not combine: {e}"))?;
    infer_program(&encode(&both.ast, "rule").program)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The first binder position (`lam`'s and `let`'s name, `var`'s child)
/// that holds neither a pattern variable nor a name: a term the e-graph
/// cannot use as a binder.
pub fn bad_binder(ast: &PatternAst<Fsm>) -> Option<String> {
    ast.as_ref().iter().find_map(|n| {
        let x = match n {
            ENodeOrVar::ENode(Fsm::Lam([x, _]) | Fsm::Let([x, _, _]) | Fsm::Var(x)) => *x,
            _ => return None,
        };
        match &ast[x] {
            ENodeOrVar::Var(_) | ENodeOrVar::ENode(Fsm::Symbol(_)) => None,
            ENodeOrVar::ENode(other) => Some(format!("{}", other)),
        }
    })
}
