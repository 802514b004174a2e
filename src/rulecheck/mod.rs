//! Per-rule soundness checking against the reference evaluator
//! (`fsmooth rules check`, spec/rules-format.md, "Checking rules").
//!
//! For one rule:
//!
//! 1. **Typing the pattern.** The left side is encoded as a definition
//!    `fun s_y … m_e … -> LHS`: a binder metavariable becomes a name, a
//!    term metavariable `?e` becomes `m_e x1 … xk` applied to the binders
//!    in scope where it occurs (a higher-order pattern), and an Index
//!    literal is forced to Index. Inference (T-*) gives every
//!    metavariable's type, polymorphic in general.
//! 2. **Instances.** Each case decodes a choice list into a ground type
//!    for each type variable, a name for each binder metavariable (from a
//!    pool of three, so binders may collide and capture is exercised), and
//!    a random term of the right type for each term metavariable, over the
//!    binders in scope and the context variables (`generate.rs`). Terms
//!    are deliberately partial: out-of-bounds `get`, division by zero,
//!    `log` of a negative number, negative sizes, so rules that lose or
//!    invent ⊥ are caught. One case in [`EDGE_EVERY`] is a *boundary
//!    case*, made of the instances side conditions exist for (see
//!    [`Template::instance`]).
//! 3. **Side conditions as the engine judges them.** The instance goes into
//!    an e-graph exactly as the optimiser builds one (loop sizes recorded),
//!    the rule's left side is matched at the root, and the rule's own
//!    condition code decides (binding `fresh` symbols). The right side is
//!    the rule's right pattern under that match.
//! 4. **Refinement** (spec/semantics.md): both sides are type-checked and
//!    evaluated. If the left side has a value, the right side must have the
//!    same value (bitwise, any NaN equal to any NaN; within ρ ≤ 1e-9 for rules
//!    tagged `ieee-inexact`). If the left side is ⊥, the right side must be
//!    ⊥ too unless the rule is tagged `refines`. A function-valued side is
//!    compared twice: as a term (⊥ or a closure, whether it is called or
//!    not), and applied to the same random arguments on both sides.
//!
//! A failure is shrunk by shrinking its choice list
//! ([`crate::difftest::shrink_with`]).

use std::collections::HashMap;
use std::fmt;

use egg::{Id, RecExpr, Symbol, Var};

use crate::diagnostic::Span;
use crate::eval::{EvalError, Limits, Value};
use crate::ir::{Expr, Program, Type};
use crate::opt::analysis::symbol_of;
use crate::opt::check::graph_of;
use crate::opt::convert::from_recexpr;
use crate::opt::lang::{Dbl, Fsm, subexpr};
use crate::opt::pattern::{Nodes, encode, instantiate, program_of, root};
use crate::opt::rules::{Cond, RuleDef, holds, search};
use crate::pipeline::{self, Session};
use crate::syntax::{print_expr, print_program};
use crate::types::infer_program;
use generate::Gen;

mod generate;

/// Settings of one check.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Instances tried per rule.
    pub cases: u64,
    pub seed: u64,
    /// Nesting depth of the generated metavariable instances.
    pub depth: u32,
    /// Evaluator fuel per side (E-Fuel); exhausting it is inconclusive.
    pub fuel: u64,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            cases: 200,
            seed: 0,
            depth: 3,
            fuel: 200_000,
        }
    }
}

/// What happened to the instances of one rule.
#[derive(Clone, Debug, Default)]
pub struct RuleReport {
    pub name: String,
    pub family: String,
    pub tried: u64,
    /// Instances whose left side type-checks.
    pub typed: u64,
    /// ... whose side conditions hold (as the engine judges them).
    pub held: u64,
    /// ... where the right side refines the left side.
    pub agreed: u64,
    /// Fuel ran out or an array passed the element limit (resource
    /// limits, spec/semantics.md §9), or a non-finite value under an
    /// `ieee-inexact` rule.
    pub inconclusive: u64,
    pub failed: u64,
    /// ... of them in boundary cases (`EDGE_EVERY`).
    pub boundary_failed: u64,
    /// The pattern cannot be typed at all (the rule can never fire on a
    /// well-typed program).
    pub untypable: Option<String>,
    /// The first failure, shrunk.
    pub counterexample: Option<Counterexample>,
}

/// A shrunk failing instance.
#[derive(Clone, Debug)]
pub struct Counterexample {
    /// Metavariable → instance, in F̃ syntax.
    pub bindings: Vec<(String, String)>,
    /// The two sides as whole programs (`let main = …`).
    pub lhs: String,
    pub rhs: String,
    pub why: String,
    pub choices: Vec<u32>,
    /// The choices decode to a boundary case (`EDGE_EVERY`).
    pub boundary: bool,
    pub shrinks: usize,
}

impl fmt::Display for Counterexample {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "  {}", self.why)?;
        writeln!(f, "  instance:")?;
        for (v, t) in &self.bindings {
            writeln!(f, "    {v} := {t}")?;
        }
        writeln!(f, "  left side:")?;
        for l in self.lhs.trim_end().lines() {
            writeln!(f, "    {l}")?;
        }
        writeln!(f, "  right side:")?;
        for l in self.rhs.trim_end().lines() {
            writeln!(f, "    {l}")?;
        }
        write!(
            f,
            "  ({}shrunk in {} step(s); choices {:?})",
            if self.boundary {
                "a boundary case; "
            } else {
                ""
            },
            self.shrinks,
            self.choices
        )
    }
}

/// Checks every rule of `rules` with `opts`.
pub fn check_rules(rules: &[RuleDef], opts: &Options) -> Vec<RuleReport> {
    rules.iter().map(|r| check_rule(r, opts)).collect()
}

/// Checks one rule on `opts.cases` random instances.
pub fn check_rule(rule: &RuleDef, opts: &Options) -> RuleReport {
    let mut report = RuleReport {
        name: rule.name.clone(),
        family: rule.family.clone(),
        ..RuleReport::default()
    };
    let template = match Template::new(rule) {
        Ok(t) => t,
        Err(why) => {
            report.untypable = Some(why);
            return report;
        }
    };
    let mut rng = opts.seed ^ hash_name(&rule.name);
    for case in 0..opts.cases {
        let choices: Vec<u32> = (0..64)
            .map(|_| (crate::difftest::next(&mut rng) >> 33) as u32)
            .collect();
        let edge = case % EDGE_EVERY == 0;
        report.tried += 1;
        match template.run(rule, &choices, edge, opts) {
            Verdict::IllTyped | Verdict::Unmatched => {}
            Verdict::ConditionFailed => report.typed += 1,
            Verdict::Agreed => {
                report.typed += 1;
                report.held += 1;
                report.agreed += 1;
            }
            Verdict::Inconclusive => {
                report.typed += 1;
                report.held += 1;
                report.inconclusive += 1;
            }
            Verdict::Failed(why) => {
                report.typed += 1;
                report.held += 1;
                report.failed += 1;
                report.boundary_failed += u64::from(edge);
                if report.counterexample.is_none() {
                    report.counterexample = Some(template.shrink(rule, choices, edge, why, opts));
                }
            }
        }
    }
    report
}

/// Cases `0, EDGE_EVERY, 2 · EDGE_EVERY, …` of every rule are boundary
/// cases (spec/rules-format.md §12); the others are random. The choice
/// lists are drawn alike, so a random case is the same whatever the share.
pub const EDGE_EVERY: u64 = 3;

fn hash_name(s: &str) -> u64 {
    // FNV-1a: a stable per-rule stream, whatever the rule order.
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

enum Verdict {
    IllTyped,
    Unmatched,
    ConditionFailed,
    Agreed,
    Inconclusive,
    Failed(String),
}

/// A rule's left pattern, analysed once.
struct Template {
    /// Binder metavariables (lam/let names, `var` children).
    binders: Vec<Var>,
    /// Binder metavariables that occur free in the left side: context
    /// variables of the instance.
    free: Vec<Var>,
    /// Term metavariables with the binders in scope at every occurrence.
    terms: Vec<(Var, Vec<Var>)>,
    /// The types of the encoding.
    typing: crate::types::Typing,
}

impl Template {
    fn new(rule: &RuleDef) -> Result<Template, String> {
        let e = encode(&rule.lhs.ast, "rulecheck");
        let typing = infer_program(&e.program).map_err(|e| e.to_string())?;
        Ok(Template {
            binders: e.binders,
            free: e.free,
            terms: e.terms,
            typing,
        })
    }

    /// Decodes `choices` into an instance (a boundary one if `edge`) and
    /// judges it.
    fn run(&self, rule: &RuleDef, choices: &[u32], edge: bool, opts: &Options) -> Verdict {
        match self.instance(rule, choices, edge, opts) {
            Ok(i) => i.verdict(rule, opts),
            Err(v) => v,
        }
    }

    /// The instance `choices` decode to. In a boundary case (`edge`):
    ///
    /// - the terms are boundary terms (`generate.rs`: ⊥, zeros, `-0.0`,
    ///   NaN and ∞ if the rule claims exactness, empty arrays, the Index
    ///   values −1, `i64::MIN` and `i64::MAX`, `i + 1` and `length a` for
    ///   an index or array in scope), and the variables a binder could
    ///   capture are preferred to literals;
    /// - in one of two, every type variable that admits it gets the first
    ///   one's type, and then, in one of two, a term metavariable gets the
    ///   instance of an earlier one of the same type whose binders are in
    ///   its scope (equal operands);
    /// - the binder metavariables get one name, or names drawn one by one,
    ///   or (in a loop) one of those bound in the pattern is named like the
    ///   loop's index `q`: names that collide;
    /// - every binder metavariable bound in the pattern, whose type the
    ///   terms in its scope fix, also names a variable of that type bound
    ///   around the instance, so a term outside the binder can mention the
    ///   name the binder would capture;
    /// - in a loop, the operands of `in-bounds` and `index` are the loop's
    ///   index (so the conditions hold) or a term at or past its bound
    ///   (`Preset`), and the loop's size.
    fn instance(
        &self,
        rule: &RuleDef,
        choices: &[u32],
        edge: bool,
        opts: &Options,
    ) -> Result<Instance, Verdict> {
        let mut g = Gen::new(choices, edge, !rule.has_tag("ieee-inexact"), CONTEXT.len());
        let (mut ty, param_types) = self.types(&mut g);
        let mut out = Nodes::default();
        // A rule whose conditions speak of loop indices (`in-bounds`,
        // `index`) is placed, in one case of three, in the body of
        // `build z (fun q -> …)`, so that its terms can use the loop index
        // `q`, which the engine knows ranges over [0, z) (rules-format §6.1).
        let loops = rule
            .conds
            .iter()
            .any(|c| matches!(c, Cond::InBounds(..) | Cond::Index(..)));
        let (names, looped) = if edge {
            let looped = loops && g.pick(3) == 0;
            (self.edge_names(&mut g, looped), looped)
        } else {
            let names = self
                .binders
                .iter()
                .map(|b| (*b, ["x", "y", "z"][g.pick(3) as usize].to_string()))
                .collect();
            (names, loops && g.pick(3) == 0)
        };
        let mut binding: HashMap<Var, Id> = self
            .binders
            .iter()
            .map(|b| (*b, out.sym(&names[b])))
            .collect();
        let context: Vec<(String, Type)> = CONTEXT
            .iter()
            .map(|(n, t)| (n.to_string(), t.ty()))
            .collect();
        let mut env = context.clone();
        if looped {
            env.push((LOOP_INDEX.to_string(), Type::Index));
        }
        // Variables named like the bound binders, bound around the instance
        // inside its loop (which keeps its size `z` and index `q`).
        let mut shadows: Vec<(String, Id)> = Vec::new();
        let mut shadowed: Vec<(String, Type)> = Vec::new();
        if edge {
            for (x, t) in self.binder_types(&param_types) {
                if self.free.contains(&x) || names[&x] == LOOP_INDEX {
                    continue;
                }
                let v = g.value(&mut out, &t, &env);
                shadows.push((names[&x].clone(), v));
                shadowed.push((names[&x].clone(), t));
            }
        }
        // Context values: the free binders get closed terms.
        let mut outer: Vec<(String, Id)> = Vec::new();
        let mut types = param_types.into_iter();
        for v in &self.free {
            let t = types.next().unwrap_or(Type::Double);
            let e = if edge {
                g.value(&mut out, &t, &context)
            } else {
                g.term(&mut out, &t, opts.depth.min(2), &context)
            };
            outer.push((names[v].clone(), e));
            env.push((names[v].clone(), t));
        }
        env.extend(shadowed);
        let mut preset: HashMap<Var, Preset> = HashMap::new();
        if edge && looped {
            for c in &rule.conds {
                match c {
                    Cond::InBounds(i, n) => {
                        preset.insert(*i, Preset::Index(g.pick(8)));
                        preset.insert(*n, Preset::Size);
                    }
                    Cond::Index(i) => {
                        preset.insert(*i, Preset::Index(g.pick(8)));
                    }
                    _ => {}
                }
            }
        }
        // Term metavariables: a term over the binders in scope.
        let mut terms: Vec<(&(Var, Vec<Var>), Type)> = self
            .terms
            .iter()
            .zip(types.chain(std::iter::repeat(Type::Double)))
            .collect();
        if edge {
            // Fewest binders in scope first: a term can be equal to one
            // made before it whose binders are in its scope.
            terms.sort_by_key(|((_, scope), _)| scope.len());
        }
        let mut made: Vec<(&[Var], Type, Id)> = Vec::new();
        for ((v, scope), mut t) in terms {
            let mut env_v = env.clone();
            for x in scope {
                let Type::Fun(a, b) = t else { break };
                env_v.push((names[x].clone(), (*a).clone()));
                t = (*b).clone();
            }
            // Equal operands: an earlier instance of the same type whose
            // binders are in scope.
            let same = if edge && g.pick(2) == 0 {
                let earlier: Vec<Id> = made
                    .iter()
                    .filter(|(s, u, _)| *u == t && s.iter().all(|x| scope.contains(x)))
                    .map(|m| m.2)
                    .collect();
                (!earlier.is_empty()).then(|| earlier[g.pick(earlier.len() as u32) as usize])
            } else {
                None
            };
            let e = match preset.get(v).and_then(|p| p.term(&mut out, &t)) {
                Some(e) => e,
                None => same.unwrap_or_else(|| g.term(&mut out, &t, opts.depth, &env_v)),
            };
            made.push((scope, t, e));
            binding.insert(*v, e);
        }
        // Arguments, for a function-valued left side.
        let mut args = Vec::new();
        while let Type::Fun(a, b) = ty {
            args.push(g.term(&mut out, &a, 1, &env));
            ty = (*b).clone();
        }
        let lhs = instantiate(&rule.lhs.ast, root(&rule.lhs.ast), &mut out, &binding);
        Ok(Instance {
            out,
            binding,
            lhs,
            outer,
            shadows,
            args,
            result: if looped { Type::array(ty) } else { ty },
            looped,
        })
    }

    /// The encoding's type, ground (a type for each type variable), and
    /// the types of its parameters (free binders, then term
    /// metavariables). In a boundary case, one in two, every type variable
    /// that admits it gets the first one's type.
    fn types(&self, g: &mut Gen) -> (Type, Vec<Type>) {
        let one_type = g.edge() && g.pick(2) == 0;
        let mut first: Option<Type> = None;
        let mut ty = self.typing.def_type_with(0, &mut |_, num, data| {
            let fits = |t: &&Type| {
                one_type && t.is_data() && (!num || matches!(t, Type::Double | Type::Index))
            };
            if let Some(t) = first.as_ref().filter(fits) {
                return t.clone();
            }
            let t = g.pick_type(num, data);
            first.get_or_insert(t.clone());
            t
        });
        let mut params = Vec::new();
        for _ in 0..self.free.len() + self.terms.len() {
            let Type::Fun(a, b) = ty else { break };
            params.push((*a).clone());
            ty = (*b).clone();
        }
        (ty, params)
    }

    /// Names for the binder metavariables in a boundary case: one name
    /// for all, or names drawn one by one, or (`looped`) one of those the
    /// pattern binds named like the loop's index.
    fn edge_names(&self, g: &mut Gen, looped: bool) -> HashMap<Var, String> {
        let mode = g.pick(3);
        let one = ["x", "y", "z"][g.pick(3) as usize];
        let bound: Vec<&Var> = self
            .binders
            .iter()
            .filter(|b| !self.free.contains(b))
            .collect();
        let indexed = (looped && mode == 2 && !bound.is_empty())
            .then(|| *bound[g.pick(bound.len() as u32) as usize]);
        self.binders
            .iter()
            .map(|b| {
                let n = match mode {
                    0 => one,
                    _ if indexed == Some(*b) => LOOP_INDEX,
                    _ => ["x", "y", "z"][g.pick(3) as usize],
                };
                (*b, n.to_string())
            })
            .collect()
    }

    /// The type of each binder metavariable that some term metavariable
    /// has in scope (the term's type is a function of the binders' types).
    fn binder_types(&self, params: &[Type]) -> Vec<(Var, Type)> {
        let mut types: Vec<(Var, Type)> = Vec::new();
        let terms = params.get(self.free.len()..).unwrap_or_default();
        for ((_, scope), t) in self.terms.iter().zip(terms) {
            let mut t = t.clone();
            for x in scope {
                let Type::Fun(a, b) = t else { break };
                if !types.iter().any(|(y, _)| y == x) {
                    types.push((*x, (*a).clone()));
                }
                t = (*b).clone();
            }
        }
        types
    }

    fn shrink(
        &self,
        rule: &RuleDef,
        choices: Vec<u32>,
        edge: bool,
        why: String,
        opts: &Options,
    ) -> Counterexample {
        let fails = |cs: &[u32]| match self.run(rule, cs, edge, opts) {
            Verdict::Failed(w) => Some(w),
            _ => None,
        };
        let (choices, why, shrinks) = crate::difftest::shrink_with(choices, why, fails);
        let (bindings, lhs, rhs) = match self.instance(rule, &choices, edge, opts) {
            Ok(i) => i.describe(rule),
            Err(_) => (Vec::new(), String::new(), String::new()),
        };
        Counterexample {
            bindings,
            lhs,
            rhs,
            why,
            choices,
            boundary: edge,
            shrinks,
        }
    }
}

/// One instance of a rule's left side.
struct Instance {
    out: Nodes,
    binding: HashMap<Var, Id>,
    lhs: Id,
    /// Free binders of the pattern, bound around the whole term.
    outer: Vec<(String, Id)>,
    /// In a boundary case, variables named like the bound binders, bound
    /// around the side (in its loop, if any).
    shadows: Vec<(String, Id)>,
    /// Arguments a function-valued side is applied to.
    args: Vec<Id>,
    /// The type of the program (a side applied to `args`, in an array when
    /// `looped`): its annotation, so an Index literal alone is an Index, as
    /// in the e-graph.
    result: Type,
    /// The side stands in the body of `build z (fun q -> …)`.
    looped: bool,
}

/// A boundary case's term for an operand of a condition.
enum Preset {
    /// The loop's index `q` (k < 4: the condition holds), or a term at
    /// or past its bound: `q + 1`, `z`, `z + 1`, `-1`.
    Index(u32),
    /// The loop's size `z`.
    Size,
}

impl Preset {
    /// The term, if it has type `t`.
    fn term(&self, out: &mut Nodes, t: &Type) -> Option<Id> {
        match self {
            _ if *t != Type::Index => None,
            Preset::Size => Some(out.var("z")),
            Preset::Index(k) => Some(match k {
                0..4 => out.var(LOOP_INDEX),
                4 | 6 => {
                    let i = out.var(if *k == 4 { LOOP_INDEX } else { "z" });
                    let one = out.add(Fsm::Int(1));
                    out.add(Fsm::Add([i, one]))
                }
                5 => out.var("z"),
                _ => out.add(Fsm::Int(-1)),
            }),
        }
    }
}

/// The index of the loop an instance may stand in (`Instance::looped`);
/// its size is the context variable `z`.
const LOOP_INDEX: &str = "q";

enum Outcome {
    Value(Value),
    Bottom(String),
    /// A resource limit: out of fuel (E-Fuel) or an array past the element
    /// limit (E-Limit); not an observation (spec/semantics.md §9).
    Limit(&'static str),
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Value(v) => write!(f, "{v}"),
            Outcome::Bottom(e) => write!(f, "⊥ ({e})"),
            Outcome::Limit(code) => write!(f, "{code} (a resource limit)"),
        }
    }
}

impl Instance {
    /// The whole program around one side: context lets, free binders,
    /// the side applied to the arguments.
    fn wrap(&mut self, side: Id) -> RecExpr<Fsm> {
        let mut e = side;
        for a in self.args.clone() {
            e = self.out.add(Fsm::App([e, a]));
        }
        self.around(e)
    }

    /// The program that evaluates one side and discards it, `let f = side
    /// in 0`, of type [`Instance::probe_type`]: whether a function-valued
    /// side is ⊥ or a closure.
    fn probe(&mut self, side: Id) -> RecExpr<Fsm> {
        let f = self.out.sym("probe'f");
        let zero = self.out.add(Fsm::Int(0));
        let e = self.out.add(Fsm::Let([f, side, zero]));
        self.around(e)
    }

    fn probe_type(&self) -> Type {
        if self.looped {
            Type::array(Type::Index)
        } else {
            Type::Index
        }
    }

    /// `e` in the shadows' lets, the loop (if any), the free binders' lets
    /// and the context's.
    fn around(&mut self, mut e: Id) -> RecExpr<Fsm> {
        for (n, v) in self.shadows.clone().into_iter().rev() {
            let s = self.out.sym(&n);
            e = self.out.add(Fsm::Let([s, v, e]));
        }
        e = self.in_loop(e);
        for (n, v) in self.outer.clone().into_iter().rev() {
            let s = self.out.sym(&n);
            e = self.out.add(Fsm::Let([s, v, e]));
        }
        // The context variables every generated term may use.
        for (n, t) in CONTEXT.iter().rev() {
            let v = context_value(&mut self.out, t);
            let s = self.out.sym(n);
            e = self.out.add(Fsm::Let([s, v, e]));
        }
        self.out.expr(e)
    }

    /// `build z (fun q -> e)` if the instance is `looped`, else `e`.
    fn in_loop(&mut self, e: Id) -> Id {
        if !self.looped {
            return e;
        }
        let (z, q) = (self.out.sym("z"), self.out.sym(LOOP_INDEX));
        let size = self.out.add(Fsm::Var(z));
        let body = self.out.add(Fsm::Lam([q, e]));
        self.out.add(Fsm::Build([size, body]))
    }

    /// The right side under the engine's judgement of the conditions, or
    /// why there is none.
    fn rhs(&mut self, rule: &RuleDef) -> Result<Id, Verdict> {
        // The e-graph holds the left side where it stands (in the loop, if
        // any), so the loop's size is recorded as the optimiser records it.
        let around = self.in_loop(self.lhs);
        let (mut egraph, rec) = graph_of(&self.out.expr(around), &Default::default());
        // The left side: the whole term, or the loop's body.
        let mut at = Id::from(rec.as_ref().len() - 1);
        if self.looped
            && let Fsm::Build([_, f]) = &rec[at]
            && let Fsm::Lam([_, b]) = &rec[*f]
        {
            at = *b;
        }
        let top = egraph.add_expr(&subexpr(&rec, at));
        egraph.rebuild();
        let top = egraph.find(top);
        let Some(mut subst) = search(rule, &egraph)
            .into_iter()
            .find(|m| egraph.find(m.eclass) == top)
            .and_then(|m| m.substs.into_iter().next())
        else {
            return Err(Verdict::Unmatched);
        };
        if !holds(&rule.conds, &mut egraph, &mut subst, top, &rule.lhs.vars()) {
            return Err(Verdict::ConditionFailed);
        }
        let mut binding = self.binding.clone();
        for c in &rule.conds {
            if let Cond::Fresh(v) = c {
                let s = symbol_of(&egraph, subst[*v]).unwrap_or_else(|| Symbol::from("fresh"));
                binding.insert(*v, self.out.sym(s.as_str()));
            }
        }
        Ok(instantiate(
            &rule.rhs.ast,
            root(&rule.rhs.ast),
            &mut self.out,
            &binding,
        ))
    }

    fn verdict(mut self, rule: &RuleDef, opts: &Options) -> Verdict {
        let lhs_expr = self.wrap(self.lhs);
        let Ok(left) = typed(&lhs_expr, &self.result) else {
            return Verdict::IllTyped;
        };
        let rhs = match self.rhs(rule) {
            Ok(r) => r,
            Err(v) => return v,
        };
        let rhs_expr = self.wrap(rhs);
        let right = match typed(&rhs_expr, &self.result) {
            Ok(r) => r,
            Err(e) => return Verdict::Failed(format!("the right side does not type-check: {e}")),
        };
        if !self.args.is_empty() {
            // A function is a value whether or not it is called: a side
            // that is ⊥ where the other is a closure differs from it in any
            // context that does not call it (`let f = L in 0`).
            let ty = self.probe_type();
            let (pl, pr) = (self.probe(self.lhs), self.probe(rhs));
            let (Ok(pl), Ok(pr)) = (typed(&pl, &ty), typed(&pr, &ty)) else {
                return Verdict::IllTyped;
            };
            match judge(rule, &evaluate(&pl, opts), &evaluate(&pr, opts)) {
                Verdict::Agreed => {}
                Verdict::Failed(why) => {
                    return Verdict::Failed(format!("unapplied, {why}"));
                }
                other => return other,
            }
        }
        let (l, r) = (evaluate(&left, opts), evaluate(&right, opts));
        judge(rule, &l, &r)
    }

    fn describe(mut self, rule: &RuleDef) -> (Vec<(String, String)>, String, String) {
        let mut bindings = Vec::new();
        let mut vars: Vec<(&Var, &Id)> = self.binding.iter().collect();
        vars.sort_by_key(|(v, _)| v.to_string());
        for (v, id) in vars {
            let mut p = Program::new();
            let e = from_recexpr(&self.out.expr(*id), &mut p);
            bindings.push((v.to_string(), print_expr(&p, e)));
        }
        let ann = Some(self.result.clone());
        let show = |e: &RecExpr<Fsm>| print_program(&program_of("main", e, &[], ann.clone()));
        let lhs = show(&self.wrap(self.lhs));
        let rhs = match self.rhs(rule) {
            Ok(r) => show(&self.wrap(r)),
            Err(_) => String::from("(the conditions do not hold)"),
        };
        (bindings, lhs, rhs)
    }
}

/// A closed instance of `rule` — both sides typed at `ty` — evaluated and
/// judged as `rules check` judges one (`fsmooth rules prove` replays its
/// counterexamples so): `Err(why)` when it shows the rule wrong, `Ok(what)`
/// otherwise (the sides agree, or the run is inconclusive).
pub(crate) fn replay(
    rule: &RuleDef,
    (lhs, rhs): (&RecExpr<Fsm>, &RecExpr<Fsm>),
    ty: &Type,
    fuel: u64,
) -> Result<String, String> {
    let opts = Options {
        fuel,
        ..Options::default()
    };
    let l = typed(lhs, ty).map_err(|e| format!("the left side does not type-check: {e}"))?;
    let r = typed(rhs, ty).map_err(|e| format!("the right side does not type-check: {e}"))?;
    let (a, b) = (evaluate(&l, &opts), evaluate(&r, &opts));
    match judge(rule, &a, &b) {
        Verdict::Failed(why) => Err(why),
        Verdict::Inconclusive => Ok(format!("inconclusive on the evaluator: {a} and {b}")),
        _ => Ok(format!("the evaluator gives {a} and {b}")),
    }
}

/// Type-checks a closed side (T-*), monomorphic for evaluation.
fn typed(e: &RecExpr<Fsm>, ty: &Type) -> Result<std::rc::Rc<pipeline::Entry>, String> {
    let mut program = program_of("main", e, &[], Some(ty.clone()));
    pin_context(&mut program);
    let session = Session::of_program(program).map_err(|d| d.message)?;
    session.entry("main").map_err(|d| d.message)
}

fn evaluate(e: &pipeline::Entry, opts: &Options) -> Outcome {
    match e.run(Vec::new(), Limits::with_fuel(opts.fuel), &mut |_, _| {}) {
        Ok((v, _)) => Outcome::Value(v),
        Err(EvalError::OutOfFuel { .. }) => Outcome::Limit("out-of-fuel"),
        Err(EvalError::TooLarge { .. }) => Outcome::Limit("array-too-large"),
        Err(err) => Outcome::Bottom(crate::diagnostic::Diagnose::code(&err).to_string()),
    }
}

/// Refinement of `l` by `r` for `rule` (spec/semantics.md).
fn judge(rule: &RuleDef, l: &Outcome, r: &Outcome) -> Verdict {
    let inexact = rule.has_tag("ieee-inexact");
    match (l, r) {
        (Outcome::Limit(_), _) | (_, Outcome::Limit(_)) => Verdict::Inconclusive,
        (Outcome::Bottom(_), Outcome::Bottom(_)) => Verdict::Agreed,
        (Outcome::Bottom(_), Outcome::Value(_)) if rule.has_tag("refines") => Verdict::Agreed,
        (Outcome::Bottom(_), Outcome::Value(_)) => Verdict::Failed(format!(
            "the left side is {l} but the right side is {r}: the rule claims equivalence (tag it `refines`, or add a condition)"
        )),
        (Outcome::Value(_), Outcome::Bottom(_)) => Verdict::Failed(format!(
            "the left side is {l} but the right side is {r}: the rule makes a defined program ⊥"
        )),
        (Outcome::Value(a), Outcome::Value(b)) => {
            if exactly_equal(a, b) {
                Verdict::Agreed
            } else if inexact && (!finite(a) || !finite(b)) {
                Verdict::Inconclusive
            } else if inexact && a.max_rho(b).is_some_and(|x| x <= 1e-9) {
                Verdict::Agreed
            } else {
                let how = if inexact {
                    "differ by more than ρ = 1e-9"
                } else {
                    "differ, and the rule is not tagged `ieee-inexact`"
                };
                Verdict::Failed(format!(
                    "the left side is {a} but the right side is {b}: the values {how}"
                ))
            }
        }
    }
}

/// Exact equality (spec/rules-format.md §7.1): bitwise on Doubles, so
/// 0.0 and -0.0 differ, except that any NaN equals any NaN (payloads and
/// signs of NaN are not specified by the evaluator).
fn exactly_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Double(x), Value::Double(y)) => {
            x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
        }
        (Value::Pair(p), Value::Pair(q)) => exactly_equal(&p.0, &q.0) && exactly_equal(&p.1, &q.1),
        (Value::Array(p), Value::Array(q)) => {
            p.len() == q.len() && p.iter().zip(q.iter()).all(|(x, y)| exactly_equal(x, y))
        }
        _ => a.same(b),
    }
}

fn finite(v: &Value) -> bool {
    match v {
        Value::Double(x) => x.is_finite(),
        Value::Pair(p) => finite(&p.0) && finite(&p.1),
        Value::Array(items) => items.iter().all(finite),
        _ => true,
    }
}

/// Annotates the context `let`s around an instance with their types. An
/// integer literal has any numeric type (types.md T-Lit-Int), so without
/// the annotation `z` would be typed by its uses, and a right side that
/// drops the use fixing it as Index would default it to Double: the two
/// sides would then compute different things (`z / (z / 3)` is ⊥ on
/// Index, 3.0 on Double).
fn pin_context(prog: &mut Program) {
    let Some(def) = prog.defs.last() else {
        return;
    };
    // `wrap` puts the context lets outermost, in the order of `CONTEXT`
    // (the rule's own lets may reuse the names `y` and `z`).
    let mut lets = Vec::new();
    let mut body = def.body;
    for (n, c) in CONTEXT.iter() {
        match prog.expr(body) {
            Expr::Let {
                name,
                value,
                body: b,
                ..
            } if **name == **n => {
                lets.push((name.clone(), *value, c.ty()));
                body = *b;
            }
            _ => break,
        }
    }
    for (name, value, ty) in lets.into_iter().rev() {
        body = prog.add(
            Expr::Let {
                name,
                ann: Some(ty),
                value,
                body,
            },
            Span::generated(),
        );
    }
    if let Some(def) = prog.defs.last_mut() {
        def.body = body;
    }
}

/// Variables bound around every instance. Some share their names with
/// binder metavariables (which are named from `x`, `y`, `z`), so an
/// instance can mention a variable that a binder of the rule captures:
/// the case `let-lam-rename` exists for.
const CONTEXT: [(&str, Ctx); 4] = [
    ("cx", Ctx::Double(0.7)),
    ("vx", Ctx::Vector([1.5, -0.5, 2.0])),
    ("y", Ctx::Double(-1.25)),
    ("z", Ctx::Index(2)),
];

#[derive(Clone, Copy)]
enum Ctx {
    Double(f64),
    Index(i64),
    Vector([f64; 3]),
}

impl Ctx {
    fn ty(self) -> Type {
        match self {
            Ctx::Double(_) => Type::Double,
            Ctx::Index(_) => Type::Index,
            Ctx::Vector(_) => Type::array(Type::Double),
        }
    }
}

fn context_value(out: &mut Nodes, c: &Ctx) -> Id {
    match c {
        Ctx::Double(x) => out.add(Fsm::Double(Dbl::new(*x))),
        Ctx::Index(i) => out.add(Fsm::Int(*i)),
        Ctx::Vector(xs) => {
            let items: Vec<Id> = xs
                .iter()
                .map(|x| out.add(Fsm::Double(Dbl::new(*x))))
                .collect();
            out.add(Fsm::Array(items.into()))
        }
    }
}

/// The table `fsmooth rules check` prints.
pub fn table(reports: &[RuleReport]) -> String {
    // The name column is as wide as the longest name up to 40 characters;
    // a longer name overflows its column (padded by hand: a formatting
    // width is limited to 65,535).
    let w = reports
        .iter()
        .map(|r| r.name.chars().count())
        .max()
        .unwrap_or(4)
        .clamp(4, 40);
    let pad = |name: &str| {
        let n = name.chars().count();
        format!("{name}{}", " ".repeat(w.saturating_sub(n)))
    };
    let mut s = format!(
        "{} {:<9} {:>6} {:>6} {:>6} {:>7} {:>6} {:>6}\n",
        pad("rule"),
        "family",
        "tried",
        "typed",
        "held",
        "agreed",
        "incon.",
        "FAILED"
    );
    for r in reports {
        s.push_str(&format!(
            "{} {:<9} {:>6} {:>6} {:>6} {:>7} {:>6} {:>6}{}\n",
            pad(&r.name),
            r.family,
            r.tried,
            r.typed,
            r.held,
            r.agreed,
            r.inconclusive,
            r.failed,
            match &r.untypable {
                Some(_) => "  (pattern cannot be typed)",
                None if r.held == 0 => "  (conditions never held)",
                None => "",
            }
        ));
    }
    s
}
