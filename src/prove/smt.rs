//! A scalar rule as an SMT-LIB query (spec/rules-format.md §14): its
//! metavariables typed, each side a pair (defined, value) with F̃'s ⊥
//! explicit, its side conditions as assumptions, and the negation of its
//! claim asserted, so that `unsat` proves the rule and a model is a
//! counterexample.

use std::collections::HashMap;
use std::fmt::Write;

use egg::{ENodeOrVar, Id, Language, PatternAst, Var};

use super::classes::Classes;
use crate::opt::lang::Fsm;
use crate::opt::rules::{Cond, RuleDef};

/// How Doubles are read: as real numbers, or as IEEE binary64 with
/// round-to-nearest-even.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reading {
    Reals,
    Ieee,
}

/// The type of a metavariable or node, after inference.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ty {
    Double,
    Index,
    Bool,
    /// Any data type the rule does not constrain: an uninterpreted sort,
    /// with equality only.
    Any,
}

/// Type terms during inference.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum T {
    Known(Ty),
    /// A type variable; `numeric` when it must be Double or Index.
    Var(usize),
}

/// The typings of a rule's metavariables under which it is proved: one
/// per assignment of Double or Index to its numeric type variables.
pub struct Typing {
    pub vars: Vec<(Var, Ty)>,
    /// The type of both sides.
    pub result: Ty,
    nodes: (HashMap<Id, Ty>, HashMap<Id, Ty>),
}

/// Why a rule is not a question for this translation.
pub type OutOfScope = String;

struct Infer {
    classes: Classes,
    known: Vec<Option<Ty>>,
    numeric: Vec<bool>,
}

impl Infer {
    fn fresh(&mut self, numeric: bool) -> T {
        self.known.push(None);
        self.numeric.push(numeric);
        T::Var(self.classes.add())
    }
    fn find(&mut self, v: usize) -> usize {
        self.classes.find(v)
    }
    fn unify(&mut self, a: T, b: T) -> Result<(), OutOfScope> {
        match (a, b) {
            (T::Known(x), T::Known(y)) if x == y => Ok(()),
            (T::Known(x), T::Known(y)) => Err(format!("ill-typed pattern ({x:?} against {y:?})")),
            (T::Var(v), T::Known(k)) | (T::Known(k), T::Var(v)) => {
                let r = self.find(v);
                match self.known[r] {
                    Some(x) if x != k => Err(format!("ill-typed pattern ({x:?} against {k:?})")),
                    _ if self.numeric[r] && !matches!(k, Ty::Double | Ty::Index) => {
                        Err(format!("{k:?} where a number is needed"))
                    }
                    _ => {
                        self.known[r] = Some(k);
                        Ok(())
                    }
                }
            }
            (T::Var(v), T::Var(w)) => {
                let (r, s) = (self.find(v), self.find(w));
                if r == s {
                    return Ok(());
                }
                if let Some(k) = self.known[s] {
                    self.unify(T::Var(r), T::Known(k))?;
                }
                self.numeric[r] |= self.numeric[s];
                if self.numeric[r]
                    && let Some(k) = self.known[r]
                    && !matches!(k, Ty::Double | Ty::Index)
                {
                    return Err(format!("{k:?} where a number is needed"));
                }
                self.classes.join(s, r);
                Ok(())
            }
        }
    }

    /// The type of node `id` of `ast`, constraints recorded.
    fn node(
        &mut self,
        ast: &PatternAst<Fsm>,
        id: Id,
        metas: &mut HashMap<Var, T>,
        out: &mut HashMap<Id, T>,
    ) -> Result<T, OutOfScope> {
        let t = match &ast[id] {
            ENodeOrVar::Var(v) => match metas.get(v) {
                Some(t) => *t,
                None => {
                    let t = self.fresh(false);
                    metas.insert(*v, t);
                    t
                }
            },
            ENodeOrVar::ENode(n) => {
                let mut kids = Vec::new();
                for c in n.children() {
                    kids.push(self.node(ast, *c, metas, out)?);
                }
                match n {
                    Fsm::Double(_) => T::Known(Ty::Double),
                    Fsm::Int(_) => T::Known(Ty::Index),
                    Fsm::Bool(_) => T::Known(Ty::Bool),
                    Fsm::Add(_) | Fsm::Sub(_) | Fsm::Mul(_) | Fsm::Div(_) | Fsm::Neg(_) => {
                        let t = self.fresh(true);
                        for k in &kids {
                            self.unify(t, *k)?;
                        }
                        t
                    }
                    Fsm::Lt(_) | Fsm::Gt(_) | Fsm::Le(_) | Fsm::Ge(_) | Fsm::Eq(_) | Fsm::Ne(_) => {
                        let t = self.fresh(true);
                        for k in &kids {
                            self.unify(t, *k)?;
                        }
                        T::Known(Ty::Bool)
                    }
                    Fsm::Not(_) => {
                        self.unify(kids[0], T::Known(Ty::Bool))?;
                        T::Known(Ty::Bool)
                    }
                    Fsm::If(_) => {
                        self.unify(kids[0], T::Known(Ty::Bool))?;
                        self.unify(kids[1], kids[2])?;
                        kids[1]
                    }
                    other => {
                        return Err(format!(
                            "`{other}` is not scalar arithmetic or a conditional"
                        ));
                    }
                }
            }
        };
        out.insert(id, t);
        Ok(t)
    }

    fn resolve(&mut self, t: T, choice: &HashMap<usize, Ty>) -> Ty {
        match t {
            T::Known(k) => k,
            T::Var(v) => {
                let r = self.find(v);
                self.known[r]
                    .or_else(|| choice.get(&r).copied())
                    .unwrap_or(Ty::Any)
            }
        }
    }
}

/// The typings of `rule`: the patterns inferred together, each numeric
/// type variable the rule leaves open taken as Double and as Index.
pub fn typings(rule: &RuleDef) -> Result<Vec<Typing>, OutOfScope> {
    let mut inf = Infer {
        classes: Classes::default(),
        known: Vec::new(),
        numeric: Vec::new(),
    };
    let mut metas = HashMap::new();
    let (lhs, rhs) = (&rule.lhs.ast, &rule.rhs.ast);
    let (mut ln, mut rn) = (HashMap::new(), HashMap::new());
    let l = inf.node(lhs, root(lhs), &mut metas, &mut ln)?;
    let r = inf.node(rhs, root(rhs), &mut metas, &mut rn)?;
    inf.unify(l, r)?;
    for c in &rule.conds {
        match c {
            Cond::Double(v) => {
                if let Some(t) = metas.get(v).copied() {
                    inf.unify(t, T::Known(Ty::Double))?;
                }
            }
            Cond::Index(v) | Cond::InBounds(v, _) => {
                if let Some(t) = metas.get(v).copied() {
                    inf.unify(t, T::Known(Ty::Index))?;
                }
                if let Cond::InBounds(_, n) = c
                    && let Some(t) = metas.get(n).copied()
                {
                    inf.unify(t, T::Known(Ty::Index))?;
                }
            }
            _ => {}
        }
    }
    // The open numeric variables, each Double or Index.
    let mut open: Vec<usize> = Vec::new();
    for v in 0..inf.classes.len() {
        let r = inf.find(v);
        if inf.numeric[r] && inf.known[r].is_none() && !open.contains(&r) {
            open.push(r);
        }
    }
    let mut out = Vec::new();
    for bits in 0..(1u32 << open.len()) {
        let choice: HashMap<usize, Ty> = open
            .iter()
            .enumerate()
            .map(|(k, v)| {
                let t = if bits >> k & 1 == 0 {
                    Ty::Double
                } else {
                    Ty::Index
                };
                (*v, t)
            })
            .collect();
        let mut vars: Vec<(Var, Ty)> = metas
            .iter()
            .map(|(v, t)| (*v, inf.resolve(*t, &choice)))
            .collect();
        vars.sort_by_key(|(v, _)| v.to_string());
        out.push(Typing {
            vars,
            result: inf.resolve(l, &choice),
            nodes: (
                ln.iter()
                    .map(|(id, t)| (*id, inf.resolve(*t, &choice)))
                    .collect(),
                rn.iter()
                    .map(|(id, t)| (*id, inf.resolve(*t, &choice)))
                    .collect(),
            ),
        });
    }
    Ok(out)
}

fn root<T>(nodes: &[T]) -> Id {
    Id::from(nodes.len() - 1)
}

/// The SMT name of a metavariable's parts.
pub fn smt_name(v: &Var) -> String {
    format!(
        "m_{}",
        v.to_string().trim_start_matches('?').replace('\'', "_")
    )
}

fn sort(t: Ty, reading: Reading) -> &'static str {
    match (t, reading) {
        (Ty::Double, Reading::Reals) => "Real",
        (Ty::Double, Reading::Ieee) => "(_ FloatingPoint 11 53)",
        (Ty::Index, _) => "(_ BitVec 64)",
        (Ty::Bool, _) => "Bool",
        (Ty::Any, _) => "Data",
    }
}

/// A Double literal in `reading`: an exact rational, or binary64 bits.
fn double_lit(x: f64, reading: Reading) -> Result<String, OutOfScope> {
    match reading {
        Reading::Ieee => {
            let b = x.to_bits();
            Ok(format!(
                "(fp #b{} #b{:011b} #b{:052b})",
                b >> 63,
                (b >> 52) & 0x7ff,
                b & ((1 << 52) - 1)
            ))
        }
        Reading::Reals => {
            if !x.is_finite() {
                return Err(format!("the literal {x} is not a real number"));
            }
            // x = m / 2^k exactly, for the literals rules use.
            for k in 0..=60u32 {
                let m = x * f64::from(2u32).powi(k as i32);
                if m.fract() == 0.0 && m.abs() < 9.0e15 {
                    let m = m as i64;
                    let num = if m < 0 {
                        format!("(- {}.0)", -m)
                    } else {
                        format!("{m}.0")
                    };
                    return Ok(if k == 0 {
                        num
                    } else {
                        format!("(/ {num} {}.0)", 1u64 << k)
                    });
                }
            }
            Err(format!("the literal {x} has no short exact form"))
        }
    }
}

/// One side as (defined, value) SMT terms.
struct Side<'a> {
    ast: &'a PatternAst<Fsm>,
    types: &'a HashMap<Id, Ty>,
    reading: Reading,
}

impl Side<'_> {
    fn ty(&self, id: Id) -> Ty {
        self.types[&id]
    }

    fn term(&self, id: Id) -> Result<(String, String), OutOfScope> {
        let n = match &self.ast[id] {
            ENodeOrVar::Var(v) => {
                let m = smt_name(v);
                return Ok((format!("{m}_d"), format!("{m}_v")));
            }
            ENodeOrVar::ENode(n) => n,
        };
        let kids: Vec<(String, String)> = n
            .children()
            .iter()
            .map(|c| self.term(*c))
            .collect::<Result<_, _>>()?;
        let all_d = |extra: Option<String>| {
            let mut ds: Vec<String> = kids.iter().map(|(d, _)| d.clone()).collect();
            ds.extend(extra);
            match ds.len() {
                0 => "true".to_string(),
                1 => ds.remove(0),
                _ => format!("(and {})", ds.join(" ")),
            }
        };
        let v = |k: usize| kids[k].1.clone();
        let arg_ty = || self.ty(n.children()[0]);
        let ieee = self.reading == Reading::Ieee;
        Ok(match n {
            Fsm::Double(x) => (
                "true".into(),
                double_lit(f64::from_bits(x.0), self.reading)?,
            ),
            Fsm::Int(i) => ("true".into(), format!("#x{:016x}", *i as u64)),
            Fsm::Bool(b) => ("true".into(), b.to_string()),
            Fsm::Add(_) | Fsm::Sub(_) | Fsm::Mul(_) => {
                let (re, fp, bv) = match n {
                    Fsm::Add(_) => ("+", "fp.add RNE", "bvadd"),
                    Fsm::Sub(_) => ("-", "fp.sub RNE", "bvsub"),
                    _ => ("*", "fp.mul RNE", "bvmul"),
                };
                match arg_ty() {
                    Ty::Double => {
                        let op = if ieee { fp } else { re };
                        (all_d(None), format!("({op} {} {})", v(0), v(1)))
                    }
                    _ => {
                        // Index: ⊥ on signed overflow (E-Arith-Bot); z3's
                        // overflow predicates for a product.
                        let fits = if bv == "bvmul" {
                            format!(
                                "(bvsmul_noovfl {a} {b}) (bvsmul_noudfl {a} {b})",
                                a = v(0),
                                b = v(1)
                            )
                        } else {
                            format!(
                                "(= ((_ sign_extend 1) ({bv} {a} {b})) ({bv} ((_ sign_extend 1) {a}) ((_ sign_extend 1) {b})))",
                                a = v(0),
                                b = v(1)
                            )
                        };
                        (all_d(Some(fits)), format!("({bv} {} {})", v(0), v(1)))
                    }
                }
            }
            Fsm::Neg(_) => match arg_ty() {
                Ty::Double => {
                    let op = if ieee { "fp.neg" } else { "-" };
                    (all_d(None), format!("({op} {})", v(0)))
                }
                _ => {
                    let fits = format!("(not (= {} #x8000000000000000))", v(0));
                    (all_d(Some(fits)), format!("(bvneg {})", v(0)))
                }
            },
            Fsm::Div(_) => match arg_ty() {
                Ty::Double => {
                    // E-Arith-Bot: ⊥ when the divisor is zero (either sign).
                    let nz = if ieee {
                        format!("(not (fp.isZero {}))", v(1))
                    } else {
                        format!("(not (= {} 0.0))", v(1))
                    };
                    let op = if ieee { "fp.div RNE" } else { "/" };
                    (all_d(Some(nz)), format!("({op} {} {})", v(0), v(1)))
                }
                _ => {
                    // Truncating; ⊥ on a zero divisor and on −2⁶³ / −1.
                    let ok = format!(
                        "(not (= {b} #x0000000000000000)) (not (and (= {a} #x8000000000000000) (= {b} #xffffffffffffffff)))",
                        a = v(0),
                        b = v(1)
                    );
                    (all_d(Some(ok)), format!("(bvsdiv {} {})", v(0), v(1)))
                }
            },
            Fsm::Lt(_) | Fsm::Gt(_) | Fsm::Le(_) | Fsm::Ge(_) | Fsm::Eq(_) | Fsm::Ne(_) => {
                let t = arg_ty();
                let op = match (n, t, ieee) {
                    (Fsm::Lt(_), Ty::Double, false) => "<",
                    (Fsm::Gt(_), Ty::Double, false) => ">",
                    (Fsm::Le(_), Ty::Double, false) => "<=",
                    (Fsm::Ge(_), Ty::Double, false) => ">=",
                    (Fsm::Eq(_), Ty::Double, false) => "=",
                    (Fsm::Lt(_), Ty::Double, true) => "fp.lt",
                    (Fsm::Gt(_), Ty::Double, true) => "fp.gt",
                    (Fsm::Le(_), Ty::Double, true) => "fp.leq",
                    (Fsm::Ge(_), Ty::Double, true) => "fp.geq",
                    (Fsm::Eq(_), Ty::Double, true) => "fp.eq",
                    (Fsm::Lt(_), _, _) => "bvslt",
                    (Fsm::Gt(_), _, _) => "bvsgt",
                    (Fsm::Le(_), _, _) => "bvsle",
                    (Fsm::Ge(_), _, _) => "bvsge",
                    (Fsm::Eq(_), _, _) => "=",
                    _ => "<>",
                };
                let val = if op == "<>" {
                    let eq = if t == Ty::Double && ieee {
                        "fp.eq"
                    } else {
                        "="
                    };
                    format!("(not ({eq} {} {}))", v(0), v(1))
                } else {
                    format!("({op} {} {})", v(0), v(1))
                };
                (all_d(None), val)
            }
            Fsm::Not(_) => (all_d(None), format!("(not {})", v(0))),
            Fsm::If(_) => {
                // Only the taken branch is evaluated.
                let d = format!(
                    "(and {} (ite {} {} {}))",
                    kids[0].0,
                    v(0),
                    kids[1].0,
                    kids[2].0
                );
                (d, format!("(ite {} {} {})", v(0), v(1), v(2)))
            }
            other => return Err(format!("`{other}` is not scalar")),
        })
    }
}

/// The query: declarations, the side conditions, the negated claim.
pub fn query(rule: &RuleDef, typing: &Typing, reading: Reading) -> Result<String, OutOfScope> {
    let mut q = String::new();
    q.push_str("(set-option :produce-models true)\n");
    if typing.vars.iter().any(|(_, t)| *t == Ty::Any) || typing.result == Ty::Any {
        q.push_str("(declare-sort Data 0)\n");
    }
    for (v, t) in &typing.vars {
        let m = smt_name(v);
        let _ = writeln!(q, "(declare-const {m}_d Bool)");
        let _ = writeln!(q, "(declare-const {m}_v {})", sort(*t, reading));
    }
    let ty_of = |v: &Var| typing.vars.iter().find(|(w, _)| w == v).map(|(_, t)| *t);
    let d = |v: &Var| format!("{}_d", smt_name(v));
    let val = |v: &Var| format!("{}_v", smt_name(v));
    let zero = |v: &Var| match (ty_of(v), reading) {
        (Some(Ty::Double), Reading::Reals) => Some("0.0".to_string()),
        (Some(Ty::Double), Reading::Ieee) => Some(format!("(fp.isZero {})", val(v))),
        (Some(Ty::Index), _) => Some("#x0000000000000000".to_string()),
        _ => None,
    };
    for c in &rule.conds {
        match c {
            // A literal (`const`, `nonzero`) or a term built from total
            // operations (`total`) is defined.
            Cond::Const(v) | Cond::Total(v) => {
                let _ = writeln!(q, "(assert {})", d(v));
            }
            Cond::Nonzero(v) => {
                let _ = writeln!(q, "(assert {})", d(v));
                match (zero(v), reading, ty_of(v)) {
                    (Some(z), Reading::Ieee, Some(Ty::Double)) => {
                        let _ = writeln!(q, "(assert (not {z}))");
                    }
                    (Some(z), _, _) => {
                        let _ = writeln!(q, "(assert (not (= {} {z})))", val(v));
                    }
                    _ => {}
                }
            }
            // 0 ≤ i (an index of a loop, or a non-negative constant).
            Cond::Index(i) => {
                let _ = writeln!(
                    q,
                    "(assert (and {} (bvsge {} #x0000000000000000)))",
                    d(i),
                    val(i)
                );
            }
            Cond::InBounds(i, n) => {
                let _ = writeln!(
                    q,
                    "(assert (and {} {} (bvsge {} #x0000000000000000) (bvslt {} {})))",
                    d(i),
                    d(n),
                    val(i),
                    val(i),
                    val(n)
                );
            }
            // Typing (`double`), or facts about names and e-classes with no
            // meaning for a scalar term (`not-known-zero` promises nothing
            // about the value): no assumption, so the proof is stronger.
            Cond::Double(_)
            | Cond::NotKnownZero(_)
            | Cond::NotFree(..)
            | Cond::Distinct(..)
            | Cond::OnlyFst(..)
            | Cond::OnlySnd(..)
            | Cond::Fresh(_)
            | Cond::FreeIn(..) => {}
        }
    }
    let l = Side {
        ast: &rule.lhs.ast,
        types: &typing.nodes.0,
        reading,
    };
    let r = Side {
        ast: &rule.rhs.ast,
        types: &typing.nodes.1,
        reading,
    };
    let (ld, lv) = l.term(root(rule.lhs.ast.as_ref()))?;
    let (rd, rv) = r.term(root(rule.rhs.ast.as_ref()))?;
    // Equal values: SMT equality, which on binary64 is bitwise except that
    // every NaN is the one NaN (spec/rules-format.md §7.1).
    let same = format!("(= {lv} {rv})");
    let claim = if rule.has_tag("refines") {
        format!("(=> {ld} (and {rd} {same}))")
    } else {
        format!("(and (= {ld} {rd}) (=> {ld} {same}))")
    };
    let _ = writeln!(q, "(assert (not {claim}))");
    q.push_str("(check-sat)\n");
    let names: Vec<String> = typing
        .vars
        .iter()
        .flat_map(|(v, _)| [d(v), val(v)])
        .collect();
    if !names.is_empty() {
        let _ = writeln!(q, "(get-value ({}))", names.join(" "));
    }
    Ok(q)
}
