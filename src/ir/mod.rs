//! The core IR: every program after parsing and desugaring (spec/syntax.md,
//! "Core"). Expressions live in one arena per [`Program`], addressed by
//! [`ExprId`]; spans live in a side table so passes that build new code do
//! not have to invent positions.
//!
//! Invariants:
//! - lambdas and applications are unary (`fun x y -> e` is two lambdas);
//! - primitive applications ([`Expr::Prim`]) are saturated: a primitive used
//!   as a value was eta-expanded by the parser;
//! - `&&`, `||` were desugared to `if`; n-tuples to right-nested pairs;
//! - top-level definitions are non-recursive and refer only to earlier ones.

pub mod build;
pub mod env;
pub mod prim;

pub use prim::Prim;

use std::fmt;
use std::rc::Rc;

use cranelift_entity::{PrimaryMap, SecondaryMap, entity_impl};

use crate::diagnostic::Span;

/// Identifies one expression node in a [`Program`]'s arena.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExprId(u32);
entity_impl!(ExprId, "e");

/// A variable or definition name.
pub type Name = Rc<str>;

/// Literals. `Int` is an integer literal written without a decimal point or
/// exponent: its type is any numeric type (T-Lit-Int). After type inference
/// and monomorphisation every `Int` of type Double is rewritten to `Double`,
/// so the remaining `Int`s are Index values.
#[derive(Copy, Clone, Debug)]
pub enum Lit {
    Int(i64),
    Double(f64),
    Bool(bool),
}

impl PartialEq for Lit {
    /// Bitwise equality on doubles, so `NaN == NaN` and `0.0 != -0.0`:
    /// the equality the printer round trip needs.
    fn eq(&self, other: &Lit) -> bool {
        match (self, other) {
            (Lit::Int(a), Lit::Int(b)) => a == b,
            (Lit::Double(a), Lit::Double(b)) => a.to_bits() == b.to_bits(),
            (Lit::Bool(a), Lit::Bool(b)) => a == b,
            _ => false,
        }
    }
}

/// Types as written in annotations and as produced for monomorphic code.
/// Shared with `Rc`: passes copy types onto every node they build.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Type {
    Double,
    Index,
    Bool,
    Array(Rc<Type>),
    Pair(Rc<Type>, Rc<Type>),
    Fun(Rc<Type>, Rc<Type>),
}

impl Type {
    pub fn array(t: Type) -> Type {
        Type::Array(Rc::new(t))
    }
    pub fn pair(a: Type, b: Type) -> Type {
        Type::Pair(Rc::new(a), Rc::new(b))
    }
    pub fn fun(a: Type, b: Type) -> Type {
        Type::Fun(Rc::new(a), Rc::new(b))
    }
    /// Whether a value of this type holds a Double (functions count as
    /// holding none).
    pub fn has_double(&self) -> bool {
        match self {
            Type::Double => true,
            Type::Index | Type::Bool | Type::Fun(..) => false,
            Type::Array(e) => e.has_double(),
            Type::Pair(a, b) => a.has_double() || b.has_double(),
        }
    }

    /// Whether a value of this type holds an array (functions count as
    /// holding none).
    pub fn has_array(&self) -> bool {
        match self {
            Type::Array(_) => true,
            Type::Pair(a, b) => a.has_array() || b.has_array(),
            _ => false,
        }
    }

    /// DT[[·]], the type of the dual-number form of a value of this type
    /// (spec/ad-forward.md): DT-Double, DT-Index, DT-Bool, DT-Arr, DT-Pair,
    /// DT-Fun.
    pub fn dual(&self) -> Type {
        match self {
            Type::Double => Type::pair(Type::Double, Type::Double), // DT-Double
            Type::Index => Type::Index,                             // DT-Index
            Type::Bool => Type::Bool,                               // DT-Bool
            Type::Array(e) => Type::array(e.dual()),                // DT-Arr
            Type::Pair(a, b) => Type::pair(a.dual(), b.dual()),     // DT-Pair
            Type::Fun(a, b) => Type::fun(a.dual(), b.dual()),       // DT-Fun
        }
    }

    /// VT[[·]], the dual form of vector forward mode (spec/ad-forward.md
    /// §4.6): a Double carries an array of tangents, one per seed
    /// direction (VT-Double); every other type is translated structurally,
    /// like DT[[·]].
    pub fn vdual(&self) -> Type {
        match self {
            Type::Double => Type::pair(Type::Double, Type::array(Type::Double)),
            Type::Index => Type::Index,
            Type::Bool => Type::Bool,
            Type::Array(e) => Type::array(e.vdual()),
            Type::Pair(a, b) => Type::pair(a.vdual(), b.vdual()),
            Type::Fun(a, b) => Type::fun(a.vdual(), b.vdual()),
        }
    }

    /// The result type of `deriv e x` for `e : self` and `x : wrt`
    /// (T-Deriv): DT[self] for a Double `x`, an array of them per element
    /// of a Vector `x`, an array of arrays for a Matrix `x`. None when `x`
    /// has another type.
    pub fn deriv_result(&self, wrt: &Type) -> Option<Type> {
        let d = self.dual();
        match wrt {
            Type::Double => Some(d),
            Type::Array(e) if **e == Type::Double => Some(Type::array(d)),
            Type::Array(e) if **e == Type::array(Type::Double) => Some(Type::array(Type::array(d))),
            _ => None,
        }
    }

    /// The result type of a function type (the type itself otherwise).
    pub fn fun_result(&self) -> Type {
        match self {
            Type::Fun(_, r) => (**r).clone(),
            other => other.clone(),
        }
    }

    /// The paper's `M` types: everything but functions.
    pub fn is_data(&self) -> bool {
        match self {
            Type::Double | Type::Index | Type::Bool => true,
            Type::Array(t) => t.is_data(),
            Type::Pair(a, b) => a.is_data() && b.is_data(),
            Type::Fun(..) => false,
        }
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn go(t: &Type, prec: u8, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match t {
                Type::Double => write!(f, "Double"),
                Type::Index => write!(f, "Index"),
                Type::Bool => write!(f, "Bool"),
                Type::Array(e) => {
                    write!(f, "Array<")?;
                    go(e, 0, f)?;
                    write!(f, ">")
                }
                Type::Pair(a, b) => {
                    if prec > 1 {
                        write!(f, "(")?;
                    }
                    go(a, 2, f)?;
                    write!(f, " * ")?;
                    go(b, 1, f)?;
                    if prec > 1 {
                        write!(f, ")")?;
                    }
                    Ok(())
                }
                Type::Fun(a, b) => {
                    if prec > 0 {
                        write!(f, "(")?;
                    }
                    go(a, 1, f)?;
                    write!(f, " -> ")?;
                    go(b, 0, f)?;
                    if prec > 0 {
                        write!(f, ")")?;
                    }
                    Ok(())
                }
            }
        }
        go(self, 0, f)
    }
}

/// One expression node. Children are [`ExprId`]s into the same arena.
#[derive(Clone, Debug)]
pub enum Expr {
    Var(Name),
    Lit(Lit),
    Lam {
        param: Name,
        ann: Option<Type>,
        body: ExprId,
    },
    App {
        fun: ExprId,
        arg: ExprId,
    },
    Let {
        name: Name,
        ann: Option<Type>,
        value: ExprId,
        body: ExprId,
    },
    If {
        cond: ExprId,
        then_: ExprId,
        else_: ExprId,
    },
    Prim {
        op: Prim,
        args: Box<[ExprId]>,
    },
    Array(Box<[ExprId]>),
    /// `deriv body wrt`: the forward-mode derivative of `body` with respect
    /// to the variable `wrt` (seed 001 Fig. 5; spec/ad-forward.md). Removed
    /// by `ad::expand` before evaluation.
    Deriv {
        body: ExprId,
        wrt: Name,
    },
    /// `jvp f x t` and `vjp f x w`: the first-class derivative operators
    /// on a function value `f` (spec/ad-forward.md §10, T-Jvp, D-Jvp;
    /// spec/ad-reverse.md §9, T-Vjp, R-Vjp). Removed by `ad::specialise`
    /// and `ad::expand` before evaluation.
    Diff {
        op: DiffOp,
        fun: ExprId,
        at: ExprId,
        dir: ExprId,
    },
}

/// The first-class derivative operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DiffOp {
    /// `jvp f x t = (f x, J_f(x) · t)`: forward mode.
    Jvp,
    /// `vjp f x w = (f x, J_f(x)ᵀ · w)`: reverse mode.
    Vjp,
}

impl DiffOp {
    pub fn name(self) -> &'static str {
        match self {
            DiffOp::Jvp => "jvp",
            DiffOp::Vjp => "vjp",
        }
    }
}

impl Expr {
    /// The same node with its children replaced (in [`Expr::children`]
    /// order).
    pub fn with_children(&self, kids: &[ExprId]) -> Expr {
        match self.clone() {
            Expr::Lam { param, ann, .. } => Expr::Lam {
                param,
                ann,
                body: kids[0],
            },
            Expr::Let { name, ann, .. } => Expr::Let {
                name,
                ann,
                value: kids[0],
                body: kids[1],
            },
            Expr::App { .. } => Expr::App {
                fun: kids[0],
                arg: kids[1],
            },
            Expr::If { .. } => Expr::If {
                cond: kids[0],
                then_: kids[1],
                else_: kids[2],
            },
            Expr::Prim { op, .. } => Expr::Prim {
                op,
                args: kids.into(),
            },
            Expr::Array(_) => Expr::Array(kids.into()),
            Expr::Deriv { wrt, .. } => Expr::Deriv { body: kids[0], wrt },
            Expr::Diff { op, .. } => Expr::Diff {
                op,
                fun: kids[0],
                at: kids[1],
                dir: kids[2],
            },
            leaf => leaf,
        }
    }

    /// The direct children, in evaluation order.
    pub fn children(&self) -> Vec<ExprId> {
        match self {
            Expr::Var(_) | Expr::Lit(_) => vec![],
            Expr::Lam { body, .. } => vec![*body],
            Expr::App { fun, arg } => vec![*fun, *arg],
            Expr::Let { value, body, .. } => vec![*value, *body],
            Expr::If { cond, then_, else_ } => vec![*cond, *then_, *else_],
            Expr::Prim { args, .. } => args.to_vec(),
            Expr::Array(items) => items.to_vec(),
            Expr::Deriv { body, .. } => vec![*body],
            Expr::Diff { fun, at, dir, .. } => vec![*fun, *at, *dir],
        }
    }
}

/// A top-level `let name = body`.
#[derive(Clone, Debug)]
pub struct Def {
    pub name: Name,
    /// The span of the name in the definition.
    pub span: Span,
    /// `let name : T = ...` (T-Ann).
    pub ann: Option<Type>,
    pub body: ExprId,
    /// Defined by the prelude rather than by the user.
    pub prelude: bool,
}

/// A whole program: an arena of expressions, their spans, and the
/// definitions in order (prelude first).
#[derive(Clone, Debug, Default)]
pub struct Program {
    pub exprs: PrimaryMap<ExprId, Expr>,
    pub spans: SecondaryMap<ExprId, Span>,
    pub defs: Vec<Def>,
}

impl Program {
    pub fn new() -> Program {
        Program::default()
    }

    pub fn add(&mut self, e: Expr, span: Span) -> ExprId {
        let id = self.exprs.push(e);
        self.spans[id] = span;
        id
    }

    pub fn expr(&self, id: ExprId) -> &Expr {
        &self.exprs[id]
    }

    pub fn span(&self, id: ExprId) -> Span {
        self.spans[id]
    }

    /// Every name of every expression in the arena, bound or free: what a
    /// fresh name must avoid.
    pub fn all_names(&self) -> std::collections::HashSet<Name> {
        let mut names = std::collections::HashSet::new();
        for e in self.exprs.values() {
            match e {
                Expr::Var(x) | Expr::Lam { param: x, .. } | Expr::Let { name: x, .. } => {
                    names.insert(x.clone());
                }
                _ => {}
            }
        }
        names
    }

    /// The last definition with this name (later ones shadow earlier ones).
    pub fn def(&self, name: &str) -> Option<&Def> {
        self.defs.iter().rev().find(|d| &*d.name == name)
    }

    /// Structural equality of two expressions, possibly from different
    /// programs, ignoring spans and arena layout.
    pub fn same_expr(&self, a: ExprId, other: &Program, b: ExprId) -> bool {
        // Iterative, so very deep programs do not overflow the stack.
        let mut work = vec![(a, b)];
        while let Some((a, b)) = work.pop() {
            let ok = match (self.expr(a), other.expr(b)) {
                (Expr::Var(x), Expr::Var(y)) => x == y,
                (Expr::Lit(x), Expr::Lit(y)) => x == y,
                (
                    Expr::Lam {
                        param: p1, ann: a1, ..
                    },
                    Expr::Lam {
                        param: p2, ann: a2, ..
                    },
                ) => p1 == p2 && a1 == a2,
                (Expr::App { .. }, Expr::App { .. }) => true,
                (
                    Expr::Let {
                        name: n1, ann: a1, ..
                    },
                    Expr::Let {
                        name: n2, ann: a2, ..
                    },
                ) => n1 == n2 && a1 == a2,
                (Expr::If { .. }, Expr::If { .. }) => true,
                (Expr::Prim { op: o1, args: x }, Expr::Prim { op: o2, args: y }) => {
                    o1 == o2 && x.len() == y.len()
                }
                (Expr::Array(x), Expr::Array(y)) => x.len() == y.len(),
                (Expr::Deriv { wrt: x, .. }, Expr::Deriv { wrt: y, .. }) => x == y,
                (Expr::Diff { op: x, .. }, Expr::Diff { op: y, .. }) => x == y,
                _ => false,
            };
            if !ok {
                return false;
            }
            let (ca, cb) = (self.expr(a).children(), other.expr(b).children());
            work.extend(ca.into_iter().zip(cb));
        }
        true
    }

    /// Structural equality of whole programs (names, bodies; not spans).
    pub fn same_program(&self, other: &Program) -> bool {
        self.defs.len() == other.defs.len()
            && self.defs.iter().zip(&other.defs).all(|(d, e)| {
                d.name == e.name && d.ann == e.ann && self.same_expr(d.body, other, e.body)
            })
    }
}
