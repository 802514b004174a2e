//! Random well-typed programs for property tests (and, later, `fsmooth
//! difftest`). A program is decoded from a list of choices, so proptest
//! shrinks programs by shrinking the list: fewer or smaller choices give
//! smaller programs, and running out of choices always picks the simplest
//! option.
//!
//! Generated programs are closed (`let main = e`), use every construct of
//! the core language (nested `deriv` and `while` loops that terminate
//! included) and a few prelude functions, keep array sizes and
//! loop counts small (literals 0–3 or `length` of an array), and never
//! apply `-` to a literal (the parser folds that into a literal, which would
//! break the printer round trip). They may evaluate to ⊥ (out-of-bounds
//! `get`, `log` of a negative number, ...).

use std::rc::Rc;

use crate::diagnostic::Span;
use crate::ir::{Def, DiffOp, Expr, ExprId, Lit, Name, Prim, Program, Type};

/// The types generated expressions have.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum GenType {
    Double,
    Index,
    Bool,
    Vector,
    Pair,
    /// Double -> Double
    Fun,
}

impl GenType {
    const ALL: [GenType; 6] = [
        GenType::Double,
        GenType::Index,
        GenType::Bool,
        GenType::Vector,
        GenType::Pair,
        GenType::Fun,
    ];

    pub fn to_type(self) -> Type {
        match self {
            GenType::Double => Type::Double,
            GenType::Index => Type::Index,
            GenType::Bool => Type::Bool,
            GenType::Vector => Type::array(Type::Double),
            GenType::Pair => Type::pair(Type::Double, Type::Double),
            GenType::Fun => Type::fun(Type::Double, Type::Double),
        }
    }
}

/// Decodes `choices` into a program with one definition, `main`, of a data
/// type chosen by the first choice. Returns the program and main's type.
pub fn program(choices: &[u32], max_depth: u32) -> (Program, GenType) {
    let mut g = Gen {
        choices,
        pos: 0,
        prog: Program::new(),
        names: 0,
    };
    let ty = [
        GenType::Double,
        GenType::Index,
        GenType::Bool,
        GenType::Vector,
        GenType::Pair,
    ][g.pick(5) as usize];
    let body = g.expr(ty, max_depth, &mut Vec::new());
    g.prog.defs.push(Def {
        name: Rc::from("main"),
        span: Span::default(),
        ann: None,
        body,
        prelude: false,
    });
    (g.prog, ty)
}

/// Decodes `choices` into `let main = fun (p: P) -> e` with `e` of type
/// `result` over the parameter `p` of type `param` (Double or Vector): a
/// differentiable function for comparing the AD modes (`p` is never
/// shadowed: generated names are `x1`, `x2`, …). Indices are literals
/// 0–3 or lengths, so a Vector argument of length ≥ 4 keeps every `get` of
/// `p` in bounds.
pub fn function(choices: &[u32], max_depth: u32, param: GenType, result: GenType) -> Program {
    let mut g = Gen {
        choices,
        pos: 0,
        prog: Program::new(),
        names: 0,
    };
    let p: Name = Rc::from("p");
    let body = g.expr(result, max_depth, &mut vec![(p.clone(), param)]);
    let lam = g.add(Expr::Lam {
        param: p,
        ann: Some(param.to_type()),
        body,
    });
    g.prog.defs.push(Def {
        name: Rc::from("main"),
        span: Span::default(),
        ann: None,
        body: lam,
        prelude: false,
    });
    g.prog
}

struct Gen<'a> {
    choices: &'a [u32],
    pos: usize,
    prog: Program,
    names: u32,
}

type Scope = Vec<(Name, GenType)>;

impl Gen<'_> {
    fn pick(&mut self, n: u32) -> u32 {
        let c = self.choices.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        c % n
    }

    fn add(&mut self, e: Expr) -> ExprId {
        self.prog.add(e, Span::default())
    }

    fn prim(&mut self, op: Prim, args: Vec<ExprId>) -> ExprId {
        self.add(Expr::Prim {
            op,
            args: args.into(),
        })
    }

    fn fresh(&mut self) -> Name {
        self.names += 1;
        // Occasionally reuse a name, so shadowing is exercised.
        let n = if self.pick(8) == 0 { 1 } else { self.names };
        Rc::from(format!("x{n}"))
    }

    fn var_of(&mut self, ty: GenType, scope: &Scope) -> Option<ExprId> {
        let found: Vec<Name> = scope
            .iter()
            .rev()
            .filter(|(_, t)| *t == ty)
            .map(|(n, _)| n.clone())
            // A variable is usable only if no inner binding shadows it.
            .filter(|n| scope.iter().rev().find(|(m, _)| m == n).map(|(_, t)| *t) == Some(ty))
            .collect();
        if found.is_empty() {
            return None;
        }
        let i = self.pick(found.len() as u32) as usize;
        Some(self.add(Expr::Var(found[i].clone())))
    }

    /// `snd (deriv e x)` (or `fst`) for a Double variable `x` in scope: a
    /// derivative inside the program, so differentiating the program nests
    /// AD (T-Deriv; the tests' perturbation-confusion cases at random).
    fn nested_deriv(&mut self, d: u32, scope: &mut Scope) -> ExprId {
        let Some(x) = self.var_of(GenType::Double, scope) else {
            return self.leaf(GenType::Double, scope);
        };
        let Expr::Var(wrt) = self.prog.expr(x).clone() else {
            return x;
        };
        // The body may use function variables too: D-Deriv-Let re-binds
        // them, or specialisation resolves them (spec/ad-forward.md §10.2).
        let body = self.expr(GenType::Double, d, scope);
        let dual = self.add(Expr::Deriv { body, wrt });
        let op = if self.pick(4) == 0 {
            Prim::Fst
        } else {
            Prim::Snd
        };
        self.prim(op, vec![dual])
    }

    /// `snd (jvp f x t)` or `snd (vjp f x w)` (or `fst`) for a generated
    /// function value `f` — a λ, a partial application, a variable, the
    /// result of a higher-order function or of another operator — so
    /// differentiating the program nests the operators in every mode pair
    /// (T-Jvp, T-Vjp, D-Jvp, R-Vjp).
    fn operator(&mut self, d: u32, scope: &mut Scope) -> ExprId {
        let fun = self.expr(GenType::Fun, d, scope);
        let at = self.expr(GenType::Double, d, scope);
        let dir = self.expr(GenType::Double, d, scope);
        let op = if self.pick(2) == 0 {
            DiffOp::Jvp
        } else {
            DiffOp::Vjp
        };
        let pair = self.add(Expr::Diff { op, fun, at, dir });
        let proj = if self.pick(4) == 0 {
            Prim::Fst
        } else {
            Prim::Snd
        };
        self.prim(proj, vec![pair])
    }

    fn small_index(&mut self) -> ExprId {
        let n = self.pick(4) as i64;
        self.add(Expr::Lit(Lit::Int(n)))
    }

    fn leaf(&mut self, ty: GenType, scope: &Scope) -> ExprId {
        if self.pick(2) == 0
            && let Some(v) = self.var_of(ty, scope)
        {
            return v;
        }
        match ty {
            GenType::Double => {
                const LITS: [f64; 8] = [0.0, 1.0, 2.0, 0.5, -1.5, 3.25, 0.1, -0.0];
                let x = LITS[self.pick(8) as usize];
                self.add(Expr::Lit(Lit::Double(x)))
            }
            GenType::Index => self.small_index(),
            GenType::Bool => {
                let b = self.pick(2) == 1;
                self.add(Expr::Lit(Lit::Bool(b)))
            }
            GenType::Vector => {
                let n = 1 + self.pick(3);
                let items: Vec<ExprId> =
                    (0..n).map(|_| self.leaf(GenType::Double, scope)).collect();
                self.add(Expr::Array(items.into()))
            }
            GenType::Pair => {
                let a = self.leaf(GenType::Double, scope);
                let b = self.leaf(GenType::Double, scope);
                self.prim(Prim::Pair, vec![a, b])
            }
            GenType::Fun => {
                let x = self.fresh();
                let body = if self.pick(2) == 0 {
                    self.add(Expr::Var(x.clone()))
                } else {
                    self.leaf(GenType::Double, scope)
                };
                self.add(Expr::Lam {
                    param: x,
                    ann: None,
                    body,
                })
            }
        }
    }

    /// `fun x -> body` of type Double -> Double.
    fn lambda(&mut self, depth: u32, scope: &mut Scope) -> ExprId {
        let x = self.fresh();
        scope.push((x.clone(), GenType::Double));
        let body = self.expr(GenType::Double, depth, scope);
        scope.pop();
        self.add(Expr::Lam {
            param: x,
            ann: None,
            body,
        })
    }

    /// A `while` that terminates: `snd (while (fun s -> if fst s < cap
    /// then c else false) (fun s -> (fst s + 1.0, b)) (0.0, init))`, a
    /// counter `fst s` capped at a literal 1–4 beside a Double `snd s`. The
    /// test `c` is either a data-dependent bound on the counter (`fst s <
    /// e`) or any Bool (a convergence test), and may read the state; so the
    /// trip count depends on the data, and is at most `cap`.
    fn while_loop(&mut self, d: u32, scope: &mut Scope) -> ExprId {
        let init = self.expr(GenType::Double, d, scope);
        let cap = 1.0 + self.pick(4) as f64;
        let s = self.fresh();
        let sv = |g: &mut Self| g.add(Expr::Var(s.clone()));
        let counter = |g: &mut Self| {
            let v = sv(g);
            g.prim(Prim::Fst, vec![v])
        };
        scope.push((s.clone(), GenType::Pair));
        let c = if self.pick(2) == 0 {
            let k = counter(self);
            let bound = self.expr(GenType::Double, d, scope);
            self.prim(Prim::Lt, vec![k, bound])
        } else {
            self.expr(GenType::Bool, d, scope)
        };
        let k = counter(self);
        let cap = self.add(Expr::Lit(Lit::Double(cap)));
        let under = self.prim(Prim::Lt, vec![k, cap]);
        let no = self.add(Expr::Lit(Lit::Bool(false)));
        let test_body = self.add(Expr::If {
            cond: under,
            then_: c,
            else_: no,
        });
        let b = self.expr(GenType::Double, d, scope);
        let k = counter(self);
        let one = self.add(Expr::Lit(Lit::Double(1.0)));
        let k1 = self.prim(Prim::Add, vec![k, one]);
        let step_body = self.prim(Prim::Pair, vec![k1, b]);
        scope.pop();
        // The test and the step bind the state under the same name: each
        // lambda is its own scope.
        let test = self.add(Expr::Lam {
            param: s.clone(),
            ann: None,
            body: test_body,
        });
        let step = self.add(Expr::Lam {
            param: s,
            ann: None,
            body: step_body,
        });
        let zero = self.add(Expr::Lit(Lit::Double(0.0)));
        let z = self.prim(Prim::Pair, vec![zero, init]);
        let w = self.prim(Prim::While, vec![test, step, z]);
        self.prim(Prim::Snd, vec![w])
    }

    fn global(&mut self, name: &str) -> ExprId {
        self.add(Expr::Var(Rc::from(name)))
    }

    fn app(&mut self, f: ExprId, args: &[ExprId]) -> ExprId {
        args.iter()
            .fold(f, |f, a| self.add(Expr::App { fun: f, arg: *a }))
    }

    fn expr(&mut self, ty: GenType, depth: u32, scope: &mut Scope) -> ExprId {
        if depth == 0 || self.pick(4) == 0 {
            return self.leaf(ty, scope);
        }
        let d = depth - 1;
        // Constructs available at every type.
        match self.pick(8) {
            0 => {
                // let
                let t = GenType::ALL[self.pick(6) as usize];
                let value = self.expr(t, d, scope);
                let x = self.fresh();
                scope.push((x.clone(), t));
                let body = self.expr(ty, d, scope);
                scope.pop();
                return self.add(Expr::Let {
                    name: x,
                    ann: None,
                    value,
                    body,
                });
            }
            1 if ty != GenType::Fun => {
                let c = self.expr(GenType::Bool, d, scope);
                let a = self.expr(ty, d, scope);
                let b = self.expr(ty, d, scope);
                return self.add(Expr::If {
                    cond: c,
                    then_: a,
                    else_: b,
                });
            }
            2 if ty == GenType::Double => {
                // application of a function value
                let f = self.expr(GenType::Fun, d, scope);
                let a = self.expr(GenType::Double, d, scope);
                return self.app(f, &[a]);
            }
            _ => {}
        }
        match ty {
            GenType::Double => match self.pick(14) {
                0..=3 => {
                    let op = [Prim::Add, Prim::Sub, Prim::Mul, Prim::Div][self.pick(4) as usize];
                    let a = self.expr(GenType::Double, d, scope);
                    let b = self.expr(GenType::Double, d, scope);
                    self.prim(op, vec![a, b])
                }
                4 => {
                    let a = self.expr(GenType::Double, d, scope);
                    let a = if matches!(self.prog.expr(a), Expr::Lit(_)) {
                        let z = self.add(Expr::Lit(Lit::Double(0.0)));
                        self.prim(Prim::Sub, vec![z, a])
                    } else {
                        a
                    };
                    self.prim(Prim::Neg, vec![a])
                }
                5 => {
                    let op = [
                        Prim::Sin,
                        Prim::Cos,
                        Prim::Exp,
                        Prim::Log,
                        Prim::Sqrt,
                        Prim::Tan,
                    ][self.pick(6) as usize];
                    let a = self.expr(GenType::Double, d, scope);
                    self.prim(op, vec![a])
                }
                6 => {
                    let p = self.expr(GenType::Pair, d, scope);
                    let op = if self.pick(2) == 0 {
                        Prim::Fst
                    } else {
                        Prim::Snd
                    };
                    self.prim(op, vec![p])
                }
                7 => {
                    let v = self.expr(GenType::Vector, d, scope);
                    let i = self.expr(GenType::Index, d, scope);
                    self.prim(Prim::Get, vec![v, i])
                }
                8 => {
                    // ifold (fun s i -> body) init n
                    let init = self.expr(GenType::Double, d, scope);
                    let n = self.small_index();
                    let (s, i) = (self.fresh(), self.fresh());
                    scope.push((s.clone(), GenType::Double));
                    scope.push((i.clone(), GenType::Index));
                    let body = self.expr(GenType::Double, d, scope);
                    scope.pop();
                    scope.pop();
                    let inner = self.add(Expr::Lam {
                        param: i,
                        ann: None,
                        body,
                    });
                    let f = self.add(Expr::Lam {
                        param: s,
                        ann: None,
                        body: inner,
                    });
                    self.prim(Prim::IFold, vec![f, init, n])
                }
                9 => {
                    let i = self.expr(GenType::Index, d, scope);
                    self.prim(Prim::ToDouble, vec![i])
                }
                10 => {
                    let name = ["vectorSum", "vectorMax", "vectorNorm"][self.pick(3) as usize];
                    let f = self.global(name);
                    let v = self.expr(GenType::Vector, d, scope);
                    self.app(f, &[v])
                }
                11 => {
                    let a = self.expr(GenType::Double, d, scope);
                    let b = self.expr(GenType::Double, d, scope);
                    self.prim(Prim::Pow, vec![a, b])
                }
                12 => self.while_loop(d, scope),
                _ if self.pick(2) == 0 => self.nested_deriv(d, scope),
                _ => self.operator(d, scope),
            },
            GenType::Index => match self.pick(3) {
                0 => {
                    let v = self.expr(GenType::Vector, d, scope);
                    self.prim(Prim::Length, vec![v])
                }
                1 => {
                    let op = [Prim::Add, Prim::Sub, Prim::Mul][self.pick(3) as usize];
                    let a = self.expr(GenType::Index, d, scope);
                    let b = self.small_index();
                    self.prim(op, vec![a, b])
                }
                _ => self.leaf(GenType::Index, scope),
            },
            GenType::Bool => match self.pick(3) {
                0 => {
                    let op = [Prim::Lt, Prim::Gt, Prim::Le, Prim::Ge, Prim::Eq, Prim::Ne]
                        [self.pick(6) as usize];
                    let a = self.expr(GenType::Double, d, scope);
                    let b = self.expr(GenType::Double, d, scope);
                    self.prim(op, vec![a, b])
                }
                1 => {
                    let a = self.expr(GenType::Bool, d, scope);
                    self.prim(Prim::Not, vec![a])
                }
                _ => {
                    let a = self.expr(GenType::Index, d, scope);
                    let b = self.expr(GenType::Index, d, scope);
                    self.prim(Prim::Lt, vec![a, b])
                }
            },
            GenType::Vector => match self.pick(3) {
                0 => {
                    let n = if self.pick(2) == 0 {
                        self.small_index()
                    } else {
                        let v = self.leaf(GenType::Vector, scope);
                        self.prim(Prim::Length, vec![v])
                    };
                    let i = self.fresh();
                    scope.push((i.clone(), GenType::Index));
                    let body = self.expr(GenType::Double, d, scope);
                    scope.pop();
                    let f = self.add(Expr::Lam {
                        param: i,
                        ann: None,
                        body,
                    });
                    self.prim(Prim::Build, vec![n, f])
                }
                1 => {
                    let v = self.expr(GenType::Vector, d, scope);
                    let f = self.lambda(d, scope);
                    let map = self.global("vectorMap");
                    self.app(map, &[v, f])
                }
                _ => self.leaf(GenType::Vector, scope),
            },
            GenType::Pair => {
                let a = self.expr(GenType::Double, d, scope);
                let b = self.expr(GenType::Double, d, scope);
                self.prim(Prim::Pair, vec![a, b])
            }
            GenType::Fun => match self.pick(6) {
                0 => {
                    // A derivative as a function value: the prelude's
                    // `derivative g` (forward) or `gradient g` (reverse).
                    let name = ["derivative", "gradient"][self.pick(2) as usize];
                    let h = self.global(name);
                    let g = self.expr(GenType::Fun, d, scope);
                    self.app(h, &[g])
                }
                1 => {
                    // A higher-order function applied to a function:
                    // (fun h y -> h (h y)) g.
                    let h = self.fresh();
                    // Two distinct names (fresh may reuse `x1`).
                    let y: Name = Rc::from(format!("x{}", self.names + 1));
                    self.names += 1;
                    let hv = self.add(Expr::Var(h.clone()));
                    let yv = self.add(Expr::Var(y.clone()));
                    let inner = self.app(hv, &[yv]);
                    let hv = self.add(Expr::Var(h.clone()));
                    let outer = self.app(hv, &[inner]);
                    let ly = self.add(Expr::Lam {
                        param: y,
                        ann: None,
                        body: outer,
                    });
                    let twice = self.add(Expr::Lam {
                        param: h,
                        ann: None,
                        body: ly,
                    });
                    let g = self.expr(GenType::Fun, d, scope);
                    self.app(twice, &[g])
                }
                _ => self.function(d, scope),
            },
        }
    }

    /// A λ or a partial application `(fun a b -> body) e` of type Double ->
    /// Double.
    fn function(&mut self, d: u32, scope: &mut Scope) -> ExprId {
        if self.pick(3) == 0 {
            // A partial application: (fun a b -> body) e.
            let a = self.fresh();
            scope.push((a.clone(), GenType::Double));
            let inner = self.lambda(d, scope);
            scope.pop();
            let f = self.add(Expr::Lam {
                param: a,
                ann: None,
                body: inner,
            });
            let arg = self.expr(GenType::Double, d, scope);
            self.app(f, &[arg])
        } else {
            self.lambda(d, scope)
        }
    }
}
