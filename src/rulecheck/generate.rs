//! The terms `fsmooth rules check` puts for a rule's metavariables:
//! random well-typed terms decoded from a choice list (0 is always the
//! simplest option, so shrinking the list simplifies the term), and, in
//! *boundary cases* (spec/rules-format.md §12), the instances side
//! conditions exist for — zeros, empty arrays, out-of-range and negative
//! indices, a loop index past its bound, the extreme Index values, NaN
//! and ∞, and terms that are ⊥ — with variables preferred to literals, so
//! that names a binder of the rule captures are used. Input: the type
//! wanted and the variables in scope (name, type; later entries shadow
//! earlier ones). Output: nodes added to a [`Nodes`].

use egg::Id;

use crate::ir::Type;
use crate::opt::lang::{Dbl, Fsm};
use crate::opt::pattern::Nodes;

/// Doubles of random terms.
const DOUBLES: [f64; 7] = [1.0, 0.0, -1.0, 0.5, 2.0, 3.0, -2.5];
/// Index literals of random terms.
const INDICES: [i64; 6] = [0, 1, 2, 3, -1, 5];

/// Doubles of boundary cases: the zeros a division or a `nonzero` test
/// distinguishes (`-0.0` is a zero, spec/rules-format.md §6).
const EDGE_DOUBLES: [f64; 4] = [0.0, -0.0, 1.0, -1.0];
/// ... and, for a rule that claims exactness (no `ieee-inexact`: its
/// claim is over binary64, non-finite values included, §7.1), NaN and
/// the infinities.
const NON_FINITE: [f64; 3] = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY];
/// Index literals of boundary cases: zero (a size: no trip; twice, as
/// the most useful), a negative index or size, one trip, and the values
/// where Index arithmetic overflows (⊥, semantics.md §4).
const EDGE_INDICES: [i64; 6] = [0, 0, -1, 1, i64::MAX, i64::MIN];

/// `[][0]`: ⊥ wherever it is evaluated, of any data type.
fn bottom(out: &mut Nodes) -> Id {
    let empty = out.add(Fsm::Array(Box::new([])));
    let zero = out.add(Fsm::Int(0));
    out.add(Fsm::Get([empty, zero]))
}

/// A use of a variable in scope.
enum Read {
    Whole(String),
    Fst(String),
    Snd(String),
}

fn read_of(out: &mut Nodes, r: &Read) -> Id {
    match r {
        Read::Whole(n) => out.var(n),
        Read::Fst(n) => {
            let v = out.var(n);
            out.add(Fsm::Fst([v]))
        }
        Read::Snd(n) => {
            let v = out.var(n);
            out.add(Fsm::Snd([v]))
        }
    }
}

/// A term generator over one choice list.
pub struct Gen<'a> {
    choices: &'a [u32],
    pos: usize,
    names: u32,
    /// A boundary case: boundary leaves and ⊥ terms (see the module doc).
    edge: bool,
    /// Boundary Doubles may be NaN or infinite.
    non_finite: bool,
    /// The length of the prefix of every environment that is the fixed
    /// context (variables bound around every instance).
    context: usize,
}

impl<'a> Gen<'a> {
    /// A generator of random terms, or with `edge` of boundary terms
    /// (NaN and ∞ among them when `non_finite`), over environments whose
    /// first `context` variables are the fixed context.
    pub fn new(choices: &'a [u32], edge: bool, non_finite: bool, context: usize) -> Gen<'a> {
        Gen {
            choices,
            pos: 0,
            names: 0,
            edge,
            non_finite,
            context,
        }
    }

    /// Whether this is a boundary case.
    pub fn edge(&self) -> bool {
        self.edge
    }

    pub fn pick(&mut self, n: u32) -> u32 {
        let c = self.choices.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        if n == 0 { 0 } else { c % n }
    }

    fn fresh(&mut self) -> String {
        self.names += 1;
        format!("g{}", self.names)
    }

    /// A fresh binder of type `ty`: its symbol node, and `env` with it.
    fn bind(
        &mut self,
        out: &mut Nodes,
        env: &[(String, Type)],
        ty: &Type,
    ) -> (Id, Vec<(String, Type)>) {
        let x = self.fresh();
        let mut inner = env.to_vec();
        inner.push((x.clone(), ty.clone()));
        (out.sym(&x), inner)
    }

    /// A ground type for a type variable (numeric: Double or Index; data:
    /// no functions).
    pub fn pick_type(&mut self, num: bool, data: bool) -> Type {
        if num {
            return [Type::Double, Type::Index][self.pick(2) as usize].clone();
        }
        let all = [
            Type::Double,
            Type::Index,
            Type::array(Type::Double),
            Type::pair(Type::Double, Type::Index),
            Type::Bool,
            Type::fun(Type::Double, Type::Double),
        ];
        let n = if data { all.len() - 1 } else { all.len() };
        all[self.pick(n as u32) as usize].clone()
    }

    /// The reads of type `ty` of the visible (not shadowed) variables of
    /// `env`: a variable, or a projection of a pair (so a rule's
    /// `only-fst` and `only-snd` meet terms that use a pair through one
    /// component, or both).
    fn reads(env: &[(String, Type)], ty: &Type) -> Vec<Read> {
        let mut reads = Vec::new();
        for (i, (n, t)) in env.iter().enumerate() {
            if env[i + 1..].iter().any(|(m, _)| m == n) {
                continue;
            }
            if t == ty {
                reads.push(Read::Whole(n.clone()));
            }
            if let Type::Pair(a, b) = t {
                if **a == *ty {
                    reads.push(Read::Fst(n.clone()));
                }
                if **b == *ty {
                    reads.push(Read::Snd(n.clone()));
                }
            }
        }
        reads
    }

    /// One of `reads`, chosen.
    fn read(&mut self, out: &mut Nodes, reads: &[Read]) -> Id {
        let k = self.pick(reads.len() as u32) as usize;
        read_of(out, &reads[k])
    }

    /// A metavariable's instance: a term of type `ty` over `env`, `depth`
    /// constructs deep; in a boundary case, one in four, ⊥ (`[][0]`, of
    /// any data type: a condition such as `total` exists for it).
    pub fn term(&mut self, out: &mut Nodes, ty: &Type, depth: u32, env: &[(String, Type)]) -> Id {
        if self.edge && self.pick(4) == 0 && ty.is_data() {
            return bottom(out);
        }
        self.sub(out, ty, depth, env)
    }

    /// A value of type `ty` over `env`: a leaf, never ⊥.
    pub fn value(&mut self, out: &mut Nodes, ty: &Type, env: &[(String, Type)]) -> Id {
        self.leaf(out, ty, env)
    }

    /// A random term of type `ty` over `env`, `depth` constructs deep.
    fn sub(&mut self, out: &mut Nodes, ty: &Type, depth: u32, env: &[(String, Type)]) -> Id {
        if self.edge {
            return self.edge_term(out, ty, depth.min(2), env);
        }
        if depth == 0 {
            return self.leaf(out, ty, env);
        }
        match self.pick(6) {
            0 | 1 => self.leaf(out, ty, env),
            2 if ty.is_data() => self.generic(out, ty, depth, env),
            _ => self.specific(out, ty, depth, env),
        }
    }

    /// A boundary term: a boundary leaf, or a construct over boundary
    /// leaves.
    fn edge_term(&mut self, out: &mut Nodes, ty: &Type, depth: u32, env: &[(String, Type)]) -> Id {
        match self.pick(3) {
            2 if depth > 0 => match self.pick(3) {
                0 if ty.is_data() => self.generic(out, ty, depth, env),
                _ => self.specific(out, ty, depth, env),
            },
            _ => self.leaf(out, ty, env),
        }
    }

    fn leaf(&mut self, out: &mut Nodes, ty: &Type, env: &[(String, Type)]) -> Id {
        let reads = Gen::reads(env, ty);
        if self.edge {
            // One in two: a variable other than the fixed context's, if
            // there is one (the rule's binders, the variables named like
            // them, loop indices), so that the names a binder captures
            // are used.
            let context = env.len().min(self.context);
            let bound = Gen::reads(&env[context..], ty);
            if !bound.is_empty() && self.pick(2) == 0 {
                return self.read(out, &bound);
            }
            return self.edge_literal(out, ty, env);
        }
        let k = self.pick(reads.len() as u32 + 1) as usize;
        if k < reads.len() {
            return read_of(out, &reads[k]);
        }
        match ty {
            Type::Double => {
                let d = DOUBLES[self.pick(DOUBLES.len() as u32) as usize];
                out.add(Fsm::Double(Dbl::new(d)))
            }
            Type::Index => {
                let i = INDICES[self.pick(INDICES.len() as u32) as usize];
                out.add(Fsm::Int(i))
            }
            Type::Bool => {
                let b = self.pick(2) == 1;
                out.add(Fsm::Bool(b))
            }
            Type::Array(t) => {
                let n = self.pick(4);
                let items: Vec<Id> = (0..n).map(|_| self.leaf(out, t, env)).collect();
                out.add(Fsm::Array(items.into()))
            }
            Type::Pair(a, b) => {
                let x = self.leaf(out, a, env);
                let y = self.leaf(out, b, env);
                out.add(Fsm::Pair([x, y]))
            }
            Type::Fun(a, b) => {
                let (s, inner) = self.bind(out, env, a);
                let body = self.leaf(out, b, &inner);
                out.add(Fsm::Lam([s, body]))
            }
        }
    }

    /// A literal (or, for an Index, a term at or past a bound) of a
    /// boundary case.
    fn edge_literal(&mut self, out: &mut Nodes, ty: &Type, env: &[(String, Type)]) -> Id {
        match ty {
            Type::Double => {
                let n = EDGE_DOUBLES.len() + if self.non_finite { NON_FINITE.len() } else { 0 };
                let k = self.pick(n as u32) as usize;
                let d = EDGE_DOUBLES
                    .get(k)
                    .copied()
                    .unwrap_or_else(|| NON_FINITE[k - EDGE_DOUBLES.len()]);
                out.add(Fsm::Double(Dbl::new(d)))
            }
            Type::Index => match self.pick(EDGE_INDICES.len() as u32 + 2) {
                k if (k as usize) < EDGE_INDICES.len() => {
                    out.add(Fsm::Int(EDGE_INDICES[k as usize]))
                }
                // `i + 1` for an Index `i` in scope: past the bound when
                // `i` is a loop's size, at it when `i` is its index.
                k if k as usize == EDGE_INDICES.len() => {
                    match Gen::reads(env, &Type::Index).as_slice() {
                        [] => out.add(Fsm::Int(-1)),
                        reads => {
                            let i = self.read(out, reads);
                            let one = out.add(Fsm::Int(1));
                            out.add(Fsm::Add([i, one]))
                        }
                    }
                }
                // The length of an array in scope: one past its last index.
                _ => match Gen::reads(env, &Type::array(Type::Double)).as_slice() {
                    [] => out.add(Fsm::Int(i64::MAX)),
                    reads => {
                        let a = self.read(out, reads);
                        out.add(Fsm::Length([a]))
                    }
                },
            },
            Type::Bool => {
                let b = self.pick(2) == 1;
                out.add(Fsm::Bool(b))
            }
            // Mostly empty: a `get` from it is out of range at any index.
            Type::Array(t) => {
                let items: Vec<Id> = if self.pick(3) == 2 {
                    vec![self.leaf(out, t, env)]
                } else {
                    Vec::new()
                };
                out.add(Fsm::Array(items.into()))
            }
            Type::Pair(a, b) => {
                let x = self.leaf(out, a, env);
                let y = self.leaf(out, b, env);
                out.add(Fsm::Pair([x, y]))
            }
            Type::Fun(a, b) => {
                let (s, inner) = self.bind(out, env, a);
                let body = self.leaf(out, b, &inner);
                out.add(Fsm::Lam([s, body]))
            }
        }
    }

    /// Constructs that work at any data type: let, if, get, application.
    fn generic(&mut self, out: &mut Nodes, ty: &Type, depth: u32, env: &[(String, Type)]) -> Id {
        let d = depth - 1;
        match self.pick(4) {
            0 => {
                let t = self.pick_type(false, true);
                let v = self.sub(out, &t, d, env);
                let (s, inner) = self.bind(out, env, &t);
                let b = self.sub(out, ty, d, &inner);
                out.add(Fsm::Let([s, v, b]))
            }
            1 => {
                let c = self.sub(out, &Type::Bool, d, env);
                let a = self.sub(out, ty, d, env);
                let b = self.sub(out, ty, d, env);
                out.add(Fsm::If([c, a, b]))
            }
            2 => {
                let a = self.sub(out, &Type::array(ty.clone()), d, env);
                let i = self.sub(out, &Type::Index, d, env);
                out.add(Fsm::Get([a, i]))
            }
            _ => {
                let t = [Type::Double, Type::Index][self.pick(2) as usize].clone();
                let f = self.sub(out, &Type::fun(t.clone(), ty.clone()), d, env);
                let a = self.sub(out, &t, d, env);
                out.add(Fsm::App([f, a]))
            }
        }
    }

    /// Constructs of one type.
    fn specific(&mut self, out: &mut Nodes, ty: &Type, depth: u32, env: &[(String, Type)]) -> Id {
        let d = depth - 1;
        match ty {
            Type::Double => match self.pick(4) {
                0 => self.binary(out, ty, d, env, 5),
                1 => {
                    let a = self.sub(out, ty, d, env);
                    out.add(match self.pick(7) {
                        0 => Fsm::Neg([a]),
                        1 => Fsm::Sin([a]),
                        2 => Fsm::Cos([a]),
                        3 => Fsm::Tan([a]),
                        4 => Fsm::Log([a]),
                        5 => Fsm::Exp([a]),
                        _ => Fsm::Sqrt([a]),
                    })
                }
                2 => {
                    let i = self.sub(out, &Type::Index, d, env);
                    out.add(Fsm::ToDouble([i]))
                }
                _ => self.fold(out, ty, d, env),
            },
            Type::Index => match self.pick(3) {
                0 => self.binary(out, ty, d, env, 4),
                1 => {
                    let a = self.sub(out, &Type::array(Type::Double), d, env);
                    out.add(Fsm::Length([a]))
                }
                _ => self.fold(out, ty, d, env),
            },
            Type::Bool => match self.pick(2) {
                0 => {
                    let t = [Type::Double, Type::Index][self.pick(2) as usize].clone();
                    let a = self.sub(out, &t, d, env);
                    let b = self.sub(out, &t, d, env);
                    out.add(match self.pick(6) {
                        0 => Fsm::Lt([a, b]),
                        1 => Fsm::Gt([a, b]),
                        2 => Fsm::Le([a, b]),
                        3 => Fsm::Ge([a, b]),
                        4 => Fsm::Eq([a, b]),
                        _ => Fsm::Ne([a, b]),
                    })
                }
                _ => {
                    let a = self.sub(out, ty, d, env);
                    out.add(Fsm::Not([a]))
                }
            },
            Type::Array(t) => match self.pick(2) {
                0 => {
                    let n = self.sub(out, &Type::Index, d, env);
                    let (s, inner) = self.bind(out, env, &Type::Index);
                    let body = self.sub(out, t, d, &inner);
                    let f = out.add(Fsm::Lam([s, body]));
                    out.add(Fsm::Build([n, f]))
                }
                _ => {
                    let n = 1 + self.pick(3);
                    let items: Vec<Id> = (0..n).map(|_| self.sub(out, t, d, env)).collect();
                    out.add(Fsm::Array(items.into()))
                }
            },
            Type::Pair(a, b) => {
                let x = self.sub(out, a, d, env);
                let y = self.sub(out, b, d, env);
                out.add(Fsm::Pair([x, y]))
            }
            Type::Fun(a, b) => {
                let (s, inner) = self.bind(out, env, a);
                let body = self.sub(out, b, d, &inner);
                out.add(Fsm::Lam([s, body]))
            }
        }
    }

    /// `a op b` for one of the first `ops` of `+ - * / **` (Index has no
    /// `**`: ask for 4).
    fn binary(
        &mut self,
        out: &mut Nodes,
        ty: &Type,
        d: u32,
        env: &[(String, Type)],
        ops: u32,
    ) -> Id {
        let a = self.sub(out, ty, d, env);
        let b = self.sub(out, ty, d, env);
        out.add(match self.pick(ops) {
            0 => Fsm::Add([a, b]),
            1 => Fsm::Sub([a, b]),
            2 => Fsm::Mul([a, b]),
            3 => Fsm::Div([a, b]),
            _ => Fsm::Pow([a, b]),
        })
    }

    /// `ifold (fun s i -> body) z n` with a state of type `ty`.
    fn fold(&mut self, out: &mut Nodes, ty: &Type, d: u32, env: &[(String, Type)]) -> Id {
        let (s, i) = (self.fresh(), self.fresh());
        let mut inner = env.to_vec();
        inner.push((s.clone(), ty.clone()));
        inner.push((i.clone(), Type::Index));
        let body = self.sub(out, ty, d, &inner);
        let is = out.sym(&i);
        let inner_lam = out.add(Fsm::Lam([is, body]));
        let ss = out.sym(&s);
        let f = out.add(Fsm::Lam([ss, inner_lam]));
        let z = self.sub(out, ty, d, env);
        let n = self.sub(out, &Type::Index, d, env);
        out.add(Fsm::IFold([f, z, n]))
    }
}
