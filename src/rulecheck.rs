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
//!    binders in scope and two context variables. Terms are deliberately
//!    partial: out-of-bounds `get`, division by zero, `log` of a negative
//!    number, negative sizes, so rules that lose or invent ⊥ are caught.
//! 3. **Side conditions as the engine judges them.** The instance goes into
//!    an e-graph exactly as the optimiser builds one (loop sizes recorded),
//!    the rule's left side is matched at the root, and the rule's own
//!    condition code decides (binding `fresh` symbols). The right side is
//!    the rule's right pattern under that match.
//! 4. **Refinement** (spec/semantics.md): both sides are type-checked and
//!    evaluated. If the left side has a value, the right side must have the
//!    same value (bitwise, any NaN equal to any NaN; within ρ ≤ 1e-9 for rules
//!    tagged `ieee-inexact`). If the left side is ⊥, the right side must be
//!    ⊥ too unless the rule is tagged `refines`. Function results are
//!    compared by applying both sides to the same random arguments.
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
    /// Fuel ran out, or a non-finite value under an `ieee-inexact` rule.
    pub inconclusive: u64,
    pub failed: u64,
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
            "  (shrunk in {} step(s); choices {:?})",
            self.shrinks, self.choices
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
    for _ in 0..opts.cases {
        let choices: Vec<u32> = (0..64)
            .map(|_| (crate::difftest::next(&mut rng) >> 33) as u32)
            .collect();
        report.tried += 1;
        match template.run(rule, &choices, opts) {
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
                if report.counterexample.is_none() {
                    report.counterexample = Some(template.shrink(rule, choices, why, opts));
                }
            }
        }
    }
    report
}

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

    /// Decodes `choices` into an instance and judges it.
    fn run(&self, rule: &RuleDef, choices: &[u32], opts: &Options) -> Verdict {
        match self.instance(rule, choices, opts) {
            Ok(i) => i.verdict(rule, opts),
            Err(v) => v,
        }
    }

    fn instance(
        &self,
        rule: &RuleDef,
        choices: &[u32],
        opts: &Options,
    ) -> Result<Instance, Verdict> {
        let mut g = Gen {
            choices,
            pos: 0,
            names: 0,
        };
        // Ground types for the pattern's type variables.
        let mut ty = self
            .typing
            .def_type_with(0, &mut |_, num, data| g.pick_type(num, data));
        let mut param_types = Vec::new();
        for _ in 0..self.free.len() + self.terms.len() {
            let Type::Fun(a, b) = ty else { break };
            param_types.push((*a).clone());
            ty = (*b).clone();
        }
        let mut out = Nodes::default();
        let mut binding: HashMap<Var, Id> = HashMap::new();
        let mut names: HashMap<Var, String> = HashMap::new();
        for b in &self.binders {
            let n = ["x", "y", "z"][g.pick(3) as usize].to_string();
            binding.insert(*b, out.sym(&n));
            names.insert(*b, n);
        }
        let context: Vec<(String, Type)> = CONTEXT
            .iter()
            .map(|(n, t)| (n.to_string(), t.ty()))
            .collect();
        // A rule whose conditions speak of loop indices (`in-bounds`,
        // `index`) is placed, in one case of three, in the body of
        // `build z (fun q -> …)`, so that its terms can use the loop index
        // `q`, which the engine knows ranges over [0, z) (rules-format §6.1).
        let looped = rule
            .conds
            .iter()
            .any(|c| matches!(c, Cond::InBounds(..) | Cond::Index(..)))
            && g.pick(3) == 0;
        // Context values: the free binders get closed terms.
        let mut outer: Vec<(String, Id)> = Vec::new();
        let mut env = context.clone();
        if looped {
            env.push((LOOP_INDEX.to_string(), Type::Index));
        }
        let mut types = param_types.into_iter();
        for v in &self.free {
            let t = types.next().unwrap_or(Type::Double);
            let e = g.term(&mut out, &t, opts.depth.min(2), &context);
            outer.push((names[v].clone(), e));
            env.push((names[v].clone(), t));
        }
        // Term metavariables: a term over the binders in scope.
        for (v, scope) in &self.terms {
            let mut t = types.next().unwrap_or(Type::Double);
            let mut env_v = env.clone();
            for x in scope {
                let Type::Fun(a, b) = t else { break };
                env_v.push((names[x].clone(), (*a).clone()));
                t = (*b).clone();
            }
            let e = g.term(&mut out, &t, opts.depth, &env_v);
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
            args,
            result: if looped { Type::array(ty) } else { ty },
            looped,
        })
    }

    fn shrink(
        &self,
        rule: &RuleDef,
        choices: Vec<u32>,
        why: String,
        opts: &Options,
    ) -> Counterexample {
        let fails = |cs: &[u32]| match self.run(rule, cs, opts) {
            Verdict::Failed(w) => Some(w),
            _ => None,
        };
        let (choices, why, shrinks) = crate::difftest::shrink_with(choices, why, fails);
        let (bindings, lhs, rhs) = match self.instance(rule, &choices, opts) {
            Ok(i) => i.describe(rule),
            Err(_) => (Vec::new(), String::new(), String::new()),
        };
        Counterexample {
            bindings,
            lhs,
            rhs,
            why,
            choices,
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
    /// Arguments a function-valued side is applied to.
    args: Vec<Id>,
    /// The type of the program (a side applied to `args`, in an array when
    /// `looped`): its annotation, so an Index literal alone is an Index, as
    /// in the e-graph.
    result: Type,
    /// The side stands in the body of `build z (fun q -> …)`.
    looped: bool,
}

/// The index of the loop an instance may stand in (`Instance::looped`);
/// its size is the context variable `z`.
const LOOP_INDEX: &str = "q";

enum Outcome {
    Value(Value),
    Bottom(String),
    Fuel,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Value(v) => write!(f, "{v}"),
            Outcome::Bottom(e) => write!(f, "⊥ ({e})"),
            Outcome::Fuel => write!(f, "out of fuel"),
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
        Err(EvalError::OutOfFuel { .. }) => Outcome::Fuel,
        Err(err) => Outcome::Bottom(crate::diagnostic::Diagnose::code(&err).to_string()),
    }
}

/// Refinement of `l` by `r` for `rule` (spec/semantics.md).
fn judge(rule: &RuleDef, l: &Outcome, r: &Outcome) -> Verdict {
    let inexact = rule.has_tag("ieee-inexact");
    match (l, r) {
        (Outcome::Fuel, _) | (_, Outcome::Fuel) => Verdict::Inconclusive,
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

/// Random typed terms, decoded from a choice list (0 is always the
/// simplest option, so shrinking the list simplifies the term).
struct Gen<'a> {
    choices: &'a [u32],
    pos: usize,
    names: u32,
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

const DOUBLES: [f64; 7] = [1.0, 0.0, -1.0, 0.5, 2.0, 3.0, -2.5];
const INDICES: [i64; 6] = [0, 1, 2, 3, -1, 5];

impl Gen<'_> {
    fn pick(&mut self, n: u32) -> u32 {
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
    fn pick_type(&mut self, num: bool, data: bool) -> Type {
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

    /// Variables of type `ty` that are visible (not shadowed) in `env`.
    fn visible(env: &[(String, Type)], ty: &Type) -> Vec<String> {
        let mut out = Vec::new();
        for (i, (n, t)) in env.iter().enumerate() {
            let shadowed = env[i + 1..].iter().any(|(m, _)| m == n);
            if !shadowed && t == ty {
                out.push(n.clone());
            }
        }
        out
    }

    fn term(&mut self, out: &mut Nodes, ty: &Type, depth: u32, env: &[(String, Type)]) -> Id {
        if depth == 0 {
            return self.leaf(out, ty, env);
        }
        match self.pick(6) {
            0 | 1 => self.leaf(out, ty, env),
            2 if ty.is_data() => self.generic(out, ty, depth, env),
            _ => self.specific(out, ty, depth, env),
        }
    }

    fn leaf(&mut self, out: &mut Nodes, ty: &Type, env: &[(String, Type)]) -> Id {
        let vars = Gen::visible(env, ty);
        let k = self.pick(vars.len() as u32 + 1) as usize;
        if k < vars.len() {
            return out.var(&vars[k]);
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

    /// Constructs that work at any data type: let, if, get, application.
    fn generic(&mut self, out: &mut Nodes, ty: &Type, depth: u32, env: &[(String, Type)]) -> Id {
        let d = depth - 1;
        match self.pick(4) {
            0 => {
                let t = self.pick_type(false, true);
                let v = self.term(out, &t, d, env);
                let (s, inner) = self.bind(out, env, &t);
                let b = self.term(out, ty, d, &inner);
                out.add(Fsm::Let([s, v, b]))
            }
            1 => {
                let c = self.term(out, &Type::Bool, d, env);
                let a = self.term(out, ty, d, env);
                let b = self.term(out, ty, d, env);
                out.add(Fsm::If([c, a, b]))
            }
            2 => {
                let a = self.term(out, &Type::array(ty.clone()), d, env);
                let i = self.term(out, &Type::Index, d, env);
                out.add(Fsm::Get([a, i]))
            }
            _ => {
                let t = [Type::Double, Type::Index][self.pick(2) as usize].clone();
                let f = self.term(out, &Type::fun(t.clone(), ty.clone()), d, env);
                let a = self.term(out, &t, d, env);
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
                    let a = self.term(out, ty, d, env);
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
                    let i = self.term(out, &Type::Index, d, env);
                    out.add(Fsm::ToDouble([i]))
                }
                _ => self.fold(out, ty, d, env),
            },
            Type::Index => match self.pick(3) {
                0 => self.binary(out, ty, d, env, 4),
                1 => {
                    let a = self.term(out, &Type::array(Type::Double), d, env);
                    out.add(Fsm::Length([a]))
                }
                _ => self.fold(out, ty, d, env),
            },
            Type::Bool => match self.pick(2) {
                0 => {
                    let t = [Type::Double, Type::Index][self.pick(2) as usize].clone();
                    let a = self.term(out, &t, d, env);
                    let b = self.term(out, &t, d, env);
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
                    let a = self.term(out, ty, d, env);
                    out.add(Fsm::Not([a]))
                }
            },
            Type::Array(t) => match self.pick(2) {
                0 => {
                    let n = self.term(out, &Type::Index, d, env);
                    let (s, inner) = self.bind(out, env, &Type::Index);
                    let body = self.term(out, t, d, &inner);
                    let f = out.add(Fsm::Lam([s, body]));
                    out.add(Fsm::Build([n, f]))
                }
                _ => {
                    let n = 1 + self.pick(3);
                    let items: Vec<Id> = (0..n).map(|_| self.term(out, t, d, env)).collect();
                    out.add(Fsm::Array(items.into()))
                }
            },
            Type::Pair(a, b) => {
                let x = self.term(out, a, d, env);
                let y = self.term(out, b, d, env);
                out.add(Fsm::Pair([x, y]))
            }
            Type::Fun(a, b) => {
                let (s, inner) = self.bind(out, env, a);
                let body = self.term(out, b, d, &inner);
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
        let a = self.term(out, ty, d, env);
        let b = self.term(out, ty, d, env);
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
        let body = self.term(out, ty, d, &inner);
        let is = out.sym(&i);
        let inner_lam = out.add(Fsm::Lam([is, body]));
        let ss = out.sym(&s);
        let f = out.add(Fsm::Lam([ss, inner_lam]));
        let z = self.term(out, ty, d, env);
        let n = self.term(out, &Type::Index, d, env);
        out.add(Fsm::IFold([f, z, n]))
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
