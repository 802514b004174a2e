//! Rewrite rules as data (spec/rules-format.md): the parser for
//! `rewrite-rules/<family>.rules`, the closed vocabulary of side
//! conditions, and the translation to egg rewrites. Rust code adds no rule
//! of its own; the defaults are the files embedded at build time, and
//! `--rules DIR` adds families or replaces them by name.
//!
//! ```text
//! # a comment
//! ## (build n f)[i] = f i                       the identity, for humans
//! rule get-of-build : (get (build ?n ?f) ?i) => (app ?f ?i)
//!   if in-bounds ?i ?n
//!   tags: phase=fusion
//! ```

use rustc_hash::FxHashSet as HashSet;
use std::collections::BTreeMap;
use std::fmt;

use egg::{
    Applier, ENodeOrVar, Id, Language, Pattern, PatternAst, Rewrite, SearchMatches, Searcher,
    Subst, Symbol, Var,
};
use thiserror::Error;

use super::analysis::{FsmAnalysis, Graph, classes_with_child, symbol_of, var_symbol};
use super::lang::{Fsm, FsmOp, is_operator};

/// The rule families shipped with fsmooth (embedded at build time).
pub const DEFAULT_FAMILIES: &[(&str, &str)] = &[
    ("subst", include_str!("../../rewrite-rules/subst.rules")),
    ("lambda", include_str!("../../rewrite-rules/lambda.rules")),
    ("ring", include_str!("../../rewrite-rules/ring.rules")),
    ("fusion", include_str!("../../rewrite-rules/fusion.rules")),
    ("cond", include_str!("../../rewrite-rules/cond.rules")),
    ("tuple", include_str!("../../rewrite-rules/tuple.rules")),
    ("loop", include_str!("../../rewrite-rules/loop.rules")),
    ("fission", include_str!("../../rewrite-rules/fission.rules")),
];

/// A side condition (the closed vocabulary of spec/rules-format.md).
#[derive(Clone, Debug, PartialEq)]
pub enum Cond {
    /// `not-free ?x ?e`: the symbol ?x is not free in ?e.
    NotFree(Var, Var),
    /// `distinct ?a ?b`: different e-classes (different symbols).
    Distinct(Var, Var),
    /// `const ?e`: ?e is a known literal.
    Const(Var),
    /// `nonzero ?e`: ?e is a literal other than 0.
    Nonzero(Var),
    /// `not-known-zero ?e`: ?e is not known to be the literal 0 (Note
    /// [Conflicting constants] in `analysis.rs`).
    NotKnownZero(Var),
    /// `in-bounds ?i ?n`: 0 ≤ ?i < ?n (constants, or ?i is the index of a
    /// loop over ?n).
    InBounds(Var, Var),
    /// `index ?i`: 0 ≤ ?i (a constant, or the index of an enclosing loop).
    Index(Var),
    /// `only-fst ?x ?e`: ?e uses the pair ?x only through `fst`.
    OnlyFst(Var, Var),
    /// `only-snd ?x ?e`: ?e uses the pair ?x only through `snd`.
    OnlySnd(Var, Var),
    /// `fresh ?y`: binds ?y to a symbol used nowhere (capture avoidance).
    Fresh(Var),
    /// `free-in ?x ?e₁ … ?eₖ`: the symbol ?x is free in at least one of
    /// the ?eᵢ (some member of its class uses it).
    FreeIn(Var, Vec<Var>),
    /// `total ?e`: ?e cannot be ⊥ (built only from total operations).
    Total(Var),
    /// `double ?e`: ?e is known to be a Double (not Index arithmetic).
    Double(Var),
}

impl Cond {
    pub const NAMES: &'static [&'static str] = &[
        "not-free",
        "distinct",
        "const",
        "nonzero",
        "not-known-zero",
        "in-bounds",
        "index",
        "only-fst",
        "only-snd",
        "fresh",
        "free-in",
        "total",
        "double",
    ];

    fn vars(&self) -> Vec<Var> {
        match self {
            Cond::NotFree(a, b)
            | Cond::Distinct(a, b)
            | Cond::InBounds(a, b)
            | Cond::OnlyFst(a, b)
            | Cond::OnlySnd(a, b) => vec![*a, *b],
            Cond::FreeIn(a, es) => std::iter::once(*a).chain(es.iter().copied()).collect(),
            Cond::Const(a)
            | Cond::Index(a)
            | Cond::Nonzero(a)
            | Cond::NotKnownZero(a)
            | Cond::Fresh(a)
            | Cond::Total(a)
            | Cond::Double(a) => vec![*a],
        }
    }
}

impl fmt::Display for Cond {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cond::NotFree(a, b) => write!(f, "not-free {a} {b}"),
            Cond::Distinct(a, b) => write!(f, "distinct {a} {b}"),
            Cond::Const(a) => write!(f, "const {a}"),
            Cond::Nonzero(a) => write!(f, "nonzero {a}"),
            Cond::NotKnownZero(a) => write!(f, "not-known-zero {a}"),
            Cond::InBounds(a, b) => write!(f, "in-bounds {a} {b}"),
            Cond::Index(a) => write!(f, "index {a}"),
            Cond::OnlyFst(a, b) => write!(f, "only-fst {a} {b}"),
            Cond::OnlySnd(a, b) => write!(f, "only-snd {a} {b}"),
            Cond::Fresh(a) => write!(f, "fresh {a}"),
            Cond::FreeIn(a, es) => {
                write!(f, "free-in {a}")?;
                es.iter().try_for_each(|e| write!(f, " {e}"))
            }
            Cond::Total(a) => write!(f, "total {a}"),
            Cond::Double(a) => write!(f, "double {a}"),
        }
    }
}

/// One rule as written in a rule file.
#[derive(Clone, Debug)]
pub struct RuleDef {
    pub name: String,
    pub family: String,
    /// The `##` line: the identity the rule states.
    pub doc: String,
    pub lhs: Pattern<Fsm>,
    pub rhs: Pattern<Fsm>,
    pub conds: Vec<Cond>,
    pub tags: Vec<String>,
    pub line: usize,
}

impl RuleDef {
    pub fn has_tag(&self, t: &str) -> bool {
        self.tags.iter().any(|x| x == t)
    }

    /// Phases the rule belongs to (`phase=NAME` tags; none means all).
    pub fn phases(&self) -> Vec<&str> {
        self.tags
            .iter()
            .filter_map(|t| t.strip_prefix("phase="))
            .collect()
    }
}

/// An error in a rule file, with its position.
#[derive(Debug, Error, Clone, PartialEq)]
#[error("{file}:{line}:{col}: error[{code}]: {message}")]
pub struct RuleError {
    pub file: String,
    pub line: usize,
    pub col: usize,
    pub code: &'static str,
    pub message: String,
    /// The offending line, for the excerpt.
    pub text: String,
}

impl RuleError {
    /// The error with a source excerpt, as the CLI prints it.
    pub fn render(&self) -> String {
        let w = self.line.to_string().len();
        let pad = " ".repeat(w);
        format!(
            "{self}\n{pad} |\n{} | {}\n{pad} | {}^\n",
            self.line,
            self.text,
            " ".repeat(self.col.saturating_sub(1))
        )
    }
}

/// Tags with a fixed meaning; `phase=…` tags name phases.
pub const TAGS: &[&str] = &["ieee-inexact", "refines", "expands"];

/// Parses one family's file.
pub fn parse_family(family: &str, file: &str, text: &str) -> Result<Vec<RuleDef>, RuleError> {
    let mut rules: Vec<RuleDef> = Vec::new();
    let mut doc = String::new();
    let err = |line: usize, col: usize, code: &'static str, message: String| RuleError {
        file: file.to_string(),
        line,
        col,
        code,
        message,
        text: text.lines().nth(line - 1).unwrap_or("").to_string(),
    };
    for (k, raw) in text.lines().enumerate() {
        let line = k + 1;
        let trimmed = raw.trim();
        if trimmed.is_empty() {
            continue;
        }
        if let Some(d) = trimmed.strip_prefix("##") {
            doc = d.trim().to_string();
            continue;
        }
        if trimmed.starts_with('#') {
            continue;
        }
        let indent = raw.len() - raw.trim_start().len() + 1;
        if let Some(rest) = trimmed.strip_prefix("rule ") {
            let Some((name, body)) = rest.split_once(':') else {
                return Err(err(
                    line,
                    indent,
                    "rule-syntax",
                    "expected `rule NAME : LHS => RHS`".into(),
                ));
            };
            let name = name.trim();
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            {
                return Err(err(
                    line,
                    indent + 5,
                    "rule-name",
                    format!("rule names are kebab-case: `{name}`"),
                ));
            }
            let Some((lhs, rhs)) = body.split_once("=>") else {
                return Err(err(
                    line,
                    indent,
                    "rule-syntax",
                    "expected `=>` between the two patterns".into(),
                ));
            };
            let lhs_col = raw.find(lhs.trim()).unwrap_or(0) + 1;
            let rhs_col = raw.rfind(rhs.trim()).unwrap_or(0) + 1;
            let lhs_p =
                pattern(lhs.trim()).map_err(|(c, code, m)| err(line, lhs_col + c, code, m))?;
            let rhs_p =
                pattern(rhs.trim()).map_err(|(c, code, m)| err(line, rhs_col + c, code, m))?;
            for (p, col) in [(&lhs_p, lhs_col), (&rhs_p, rhs_col)] {
                if let Some(term) = super::pattern::bad_binder(&p.ast) {
                    return Err(err(
                        line,
                        col,
                        "binder-not-a-name",
                        format!(
                            "a binder (the name of `lam` or `let`, or `var`'s child) must be a pattern variable or a name, not `{term}`"
                        ),
                    ));
                }
            }
            if let Err(why) = super::pattern::sides_agree(&lhs_p, &rhs_p) {
                return Err(err(
                    line,
                    rhs_col,
                    "rule-type-mismatch",
                    format!("the right side cannot have the left side's type: {why}"),
                ));
            }
            if doc.is_empty() {
                return Err(err(
                    line,
                    indent,
                    "rule-doc",
                    format!("rule `{name}` has no `##` identity line above it"),
                ));
            }
            rules.push(RuleDef {
                name: name.to_string(),
                family: family.to_string(),
                doc: std::mem::take(&mut doc),
                lhs: lhs_p,
                rhs: rhs_p,
                conds: Vec::new(),
                tags: Vec::new(),
                line,
            });
            continue;
        }
        let Some(current) = rules.last_mut() else {
            return Err(err(
                line,
                indent,
                "rule-syntax",
                "expected a rule: `rule NAME : LHS => RHS`".into(),
            ));
        };
        if indent == 1 {
            return Err(err(
                line,
                1,
                "rule-syntax",
                "`if` and `tags:` lines are indented under their rule".into(),
            ));
        }
        if let Some(c) = trimmed.strip_prefix("if ") {
            let words: Vec<&str> = c.split_whitespace().collect();
            let cond = condition(&words).map_err(|(code, m)| err(line, indent + 3, code, m))?;
            current.conds.push(cond);
        } else if let Some(t) = trimmed.strip_prefix("tags:") {
            for tag in t.split(',').map(str::trim).filter(|t| !t.is_empty()) {
                let bad_phase = tag
                    .strip_prefix("phase=")
                    .is_some_and(|p| !super::schedule::PHASES.contains(&p));
                if bad_phase {
                    return Err(err(
                        line,
                        indent,
                        "unknown-phase",
                        format!(
                            "unknown phase in `{tag}` (phases: {})",
                            super::schedule::PHASES.join(", ")
                        ),
                    ));
                }
                if !TAGS.contains(&tag) && !tag.starts_with("phase=") {
                    return Err(err(
                        line,
                        indent,
                        "unknown-tag",
                        format!(
                            "unknown tag `{tag}` (known: {}, phase=NAME)",
                            TAGS.join(", ")
                        ),
                    ));
                }
                current.tags.push(tag.to_string());
            }
        } else {
            return Err(err(
                line,
                indent,
                "rule-syntax",
                "expected `if CONDITION` or `tags: …`".into(),
            ));
        }
    }
    // Variables: the right-hand side and the conditions may use only the
    // left-hand side's variables (and those a `fresh` condition binds).
    for r in &rules {
        let bound = r.lhs.vars();
        let fresh: Vec<Var> = r
            .conds
            .iter()
            .filter_map(|c| match c {
                Cond::Fresh(v) => Some(*v),
                _ => None,
            })
            .collect();
        // A `fresh` variable is new: the left side does not bind it.
        if let Some(v) = fresh.iter().find(|v| bound.contains(v)) {
            return Err(err(
                r.line,
                1,
                "fresh-bound-variable",
                format!(
                    "rule `{}`: `fresh {v}` names a variable the left-hand side binds",
                    r.name
                ),
            ));
        }
        // A `fresh` variable may be used only after its `fresh` condition.
        let mut introduced: Vec<Var> = Vec::new();
        for c in &r.conds {
            if let Cond::Fresh(v) = c {
                introduced.push(*v);
                continue;
            }
            for v in c.vars() {
                if fresh.contains(&v) && !introduced.contains(&v) {
                    return Err(err(
                        r.line,
                        1,
                        "unbound-pattern-variable",
                        format!(
                            "rule `{}`: `{v}` is used before its `fresh` condition",
                            r.name
                        ),
                    ));
                }
            }
        }
        for v in r
            .rhs
            .vars()
            .into_iter()
            .chain(r.conds.iter().flat_map(|c| c.vars()))
        {
            if !bound.contains(&v) && !fresh.contains(&v) {
                return Err(err(
                    r.line,
                    1,
                    "unbound-pattern-variable",
                    format!(
                        "rule `{}`: `{v}` is not bound by the left-hand side",
                        r.name
                    ),
                ));
            }
        }
    }
    Ok(rules)
}

/// Parses a pattern, checking operators; errors give a column offset.
fn pattern(text: &str) -> Result<Pattern<Fsm>, (usize, &'static str, String)> {
    let bytes = text.as_bytes();
    let mut i = 0;
    let mut expect_op = false;
    // Parentheses balance, and close only the pattern's own (egg's parser
    // ignores what follows a complete pattern).
    let mut depth = 0usize;
    let mut closed_at: Option<usize> = None;
    while i < bytes.len() {
        let c = bytes[i];
        if closed_at.is_some() && !c.is_ascii_whitespace() {
            return Err((
                i,
                "pattern-syntax",
                "text after the complete pattern (an extra `)`?)".into(),
            ));
        }
        if c == b'(' {
            depth += 1;
            expect_op = true;
            i += 1;
            continue;
        }
        if c == b')' {
            if depth == 0 {
                return Err((i, "pattern-syntax", "unmatched `)`".into()));
            }
            depth -= 1;
            if depth == 0 {
                closed_at = Some(i);
            }
            i += 1;
            continue;
        }
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if depth == 0 {
            // An atom at the top: the whole pattern.
            closed_at = Some(i);
        }
        let start = i;
        while i < bytes.len()
            && bytes[i] != b'('
            && bytes[i] != b')'
            && !bytes[i].is_ascii_whitespace()
        {
            i += 1;
        }
        let tok = &text[start..i];
        if expect_op && !is_operator(tok) {
            return Err((
                start,
                "unknown-operator",
                format!("unknown operator `{tok}`"),
            ));
        }
        expect_op = false;
    }
    text.parse::<Pattern<Fsm>>()
        .map_err(|e| (0, "pattern-syntax", format!("malformed pattern: {e}")))
}

fn condition(words: &[&str]) -> Result<Cond, (&'static str, String)> {
    let var = |k: usize| -> Result<Var, (&'static str, String)> {
        words
            .get(k)
            .ok_or((
                "condition-arity",
                format!("`{}` needs more arguments", words[0]),
            ))?
            .parse::<Var>()
            .map_err(|_| {
                (
                    "condition-argument",
                    format!("`{}` is not a pattern variable", words[k]),
                )
            })
    };
    let Some(name) = words.first() else {
        return Err(("unknown-condition", "empty condition".into()));
    };
    let c = match *name {
        "not-free" => Cond::NotFree(var(1)?, var(2)?),
        "distinct" => Cond::Distinct(var(1)?, var(2)?),
        "const" => Cond::Const(var(1)?),
        "nonzero" => Cond::Nonzero(var(1)?),
        "not-known-zero" => Cond::NotKnownZero(var(1)?),
        "in-bounds" => Cond::InBounds(var(1)?, var(2)?),
        "index" => Cond::Index(var(1)?),
        "only-fst" => Cond::OnlyFst(var(1)?, var(2)?),
        "only-snd" => Cond::OnlySnd(var(1)?, var(2)?),
        "fresh" => Cond::Fresh(var(1)?),
        "free-in" => Cond::FreeIn(
            var(1)?,
            std::iter::once(var(2))
                .chain((3..words.len()).map(var))
                .collect::<Result<_, _>>()?,
        ),
        "total" => Cond::Total(var(1)?),
        "double" => Cond::Double(var(1)?),
        other => {
            return Err((
                "unknown-condition",
                format!(
                    "unknown condition `{other}` (known: {})",
                    Cond::NAMES.join(", ")
                ),
            ));
        }
    };
    let arity = c.vars().len();
    if words.len() != arity + 1 {
        return Err((
            "condition-arity",
            format!("`{name}` takes {arity} argument(s)"),
        ));
    }
    Ok(c)
}

/// A rule file given by the user: its path (for messages; its stem names
/// the family) and its text. The command line reads `--rules DIR` into
/// these, so the optimiser reads no files.
#[derive(Clone, Debug)]
pub struct RuleFile {
    pub path: String,
    pub text: String,
}

/// Loads the default families, then every file of `extra` in order; a
/// file named like a default family replaces it. Rule names must be
/// unique.
pub fn load(extra: Option<&[RuleFile]>) -> Result<Vec<RuleDef>, RuleError> {
    let mut families: BTreeMap<String, (String, String)> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    for (f, text) in DEFAULT_FAMILIES {
        families.insert(
            f.to_string(),
            (format!("<default>/{f}.rules"), text.to_string()),
        );
        order.push(f.to_string());
    }
    for file in extra.unwrap_or_default() {
        let fam = std::path::Path::new(&file.path)
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("rules")
            .to_string();
        if !order.contains(&fam) {
            order.push(fam.clone());
        }
        families.insert(fam, (file.path.clone(), file.text.clone()));
    }
    let mut all: Vec<RuleDef> = Vec::new();
    for fam in order {
        let (file, text) = &families[&fam];
        for r in parse_family(&fam, file, text)? {
            if let Some(prev) = all.iter().find(|p| p.name == r.name) {
                return Err(RuleError {
                    file: file.clone(),
                    line: r.line,
                    col: 6,
                    code: "duplicate-rule",
                    message: format!(
                        "rule `{}` is already defined in family `{}`",
                        r.name, prev.family
                    ),
                    text: text.lines().nth(r.line - 1).unwrap_or("").to_string(),
                });
            }
            all.push(r);
        }
    }
    Ok(all)
}

/// Checks the conditions of a rule for one match, binding `fresh` ones
/// (the engine's applier, and `fsmooth rules check`). `vars` are the
/// variables of the rule's left side: a `fresh` name is none of the
/// symbols they are bound to.
pub fn holds(
    conds: &[Cond],
    egraph: &mut Graph,
    subst: &mut Subst,
    eclass: Id,
    vars: &[Var],
) -> bool {
    for c in conds {
        let ok = match c {
            Cond::NotFree(x, e) => match symbol_of(egraph, subst[*x]) {
                Some(s) => !egraph[subst[*e]].data.free.contains_key(&s),
                None => false,
            },
            Cond::Distinct(a, b) => egraph.find(subst[*a]) != egraph.find(subst[*b]),
            Cond::FreeIn(x, es) => match symbol_of(egraph, subst[*x]) {
                Some(s) => es
                    .iter()
                    .any(|e| egraph[subst[*e]].data.free.contains_key(&s)),
                None => false,
            },
            Cond::Total(e) => egraph[subst[*e]].data.total,
            Cond::Double(e) => egraph[subst[*e]].data.double,
            Cond::Const(e) => egraph[subst[*e]].data.constant.is_some(),
            Cond::Nonzero(e) => nonzero(&egraph[subst[*e]].data.constant),
            Cond::NotKnownZero(e) => {
                let c = &egraph[subst[*e]].data.constant;
                c.is_none() || nonzero(c)
            }
            Cond::InBounds(i, n) => {
                let (ci, cn) = (
                    &egraph[subst[*i]].data.constant,
                    &egraph[subst[*n]].data.constant,
                );
                match (ci, cn) {
                    (Some(Fsm::Int(a)), Some(Fsm::Int(b))) => 0 <= *a && a < b,
                    _ => match var_symbol(egraph, subst[*i]) {
                        Some(s) => egraph
                            .analysis
                            .loop_bounds
                            .get(&s)
                            .is_some_and(|b| egraph.find(*b) == egraph.find(subst[*n])),
                        None => false,
                    },
                }
            }
            Cond::Index(i) => match &egraph[subst[*i]].data.constant {
                Some(Fsm::Int(a)) => 0 <= *a,
                _ => var_symbol(egraph, subst[*i])
                    .is_some_and(|s| egraph.analysis.loop_bounds.contains_key(&s)),
            },
            Cond::OnlyFst(x, e) | Cond::OnlySnd(x, e) => {
                let allowed = if matches!(c, Cond::OnlyFst(..)) { 1 } else { 2 };
                match symbol_of(egraph, subst[*x]) {
                    Some(s) => egraph[subst[*e]]
                        .data
                        .free
                        .get(&s)
                        .is_none_or(|bits| bits & !allowed == 0),
                    None => false,
                }
            }
            Cond::Fresh(v) => {
                // Deterministic per match: applying the rule again to the
                // same class builds the same term instead of a new one.
                let class = egraph.find(eclass);
                let base = format!(
                    "{}{}{}'{}",
                    v.to_string().trim_start_matches('?'),
                    super::analysis::FRESH_MARK,
                    egraph.analysis.nonce,
                    usize::from(class)
                );
                // Free in no term of the matched class (a name made for
                // this class before may be free in a member that a
                // substitution built since): then it captures nothing.
                // `names` is a union over members (of the free names
                // holding FRESH_MARK, which `name` does); `free` an
                // intersection.
                //
                // Nor a name the match binds to another variable: the
                // right side may put a use of the fresh name under that
                // binder (`licm-ifold-guarded`'s `(let ?x ?e0 (… (var ?w)
                // …))`), and a binder made for this class by an earlier
                // application can be that name (`difftest --property
                // fwd-opt --seed 1203`, case 883).
                let bound: Vec<Symbol> = vars
                    .iter()
                    .filter_map(|v| subst.get(*v))
                    .filter_map(|id| symbol_of(egraph, *id))
                    .collect();
                let mut name = base.clone();
                let mut k = 0;
                while egraph[class]
                    .data
                    .names
                    .contains(&Symbol::from(name.as_str()))
                    || bound.contains(&Symbol::from(name.as_str()))
                {
                    k += 1;
                    name = format!("{base}'{k}");
                }
                let sym = Fsm::Symbol(Symbol::from(name));
                let id = egraph.add(sym);
                subst.insert(*v, id);
                true
            }
        };
        if !ok {
            return false;
        }
    }
    true
}

/// The right-hand side with its side conditions.
pub struct RuleApplier {
    rhs: Pattern<Fsm>,
    conds: Vec<Cond>,
    /// The left side's variables, in a fixed order.
    lhs_vars: Vec<Var>,
    /// The matches applied so far (class and operands, canonical when
    /// applied): egg finds every match again at every iteration, and
    /// applying one twice only merges what is already merged.
    done: std::sync::Mutex<HashSet<Vec<Id>>>,
}

impl Applier<Fsm, FsmAnalysis> for RuleApplier {
    fn apply_one(
        &self,
        egraph: &mut Graph,
        eclass: Id,
        subst: &Subst,
        searcher_ast: Option<&PatternAst<Fsm>>,
        rule_name: Symbol,
    ) -> Vec<Id> {
        // Applied before with the same class and operands: the e-graph
        // already holds the result, merged (it only grows and merges).
        let key: Vec<Id> = std::iter::once(egraph.find(eclass))
            .chain(
                self.lhs_vars
                    .iter()
                    .filter_map(|v| subst.get(*v))
                    .map(|id| egraph.find(*id)),
            )
            .collect();
        if self.done.lock().is_ok_and(|d| d.contains(&key)) {
            return Vec::new();
        }
        let mut s = subst.clone();
        let ok = holds(&self.conds, egraph, &mut s, eclass, &self.lhs_vars);
        if !ok {
            return Vec::new();
        }
        if let Ok(mut d) = self.done.lock() {
            d.insert(key);
        }
        if !self.conds.iter().any(|c| matches!(c, Cond::Fresh(_))) {
            return self
                .rhs
                .apply_one(egraph, eclass, &s, searcher_ast, rule_name);
        }
        // A `fresh` variable is not bound by the left side, so egg could
        // not replay this step in an explanation: apply a right side with
        // the fresh symbols written in.
        let ast: Vec<ENodeOrVar<Fsm>> = self
            .rhs
            .ast
            .as_ref()
            .iter()
            .map(|n| match n {
                ENodeOrVar::Var(v) if self.conds.contains(&Cond::Fresh(*v)) => {
                    match symbol_of(egraph, s[*v]) {
                        Some(sym) => ENodeOrVar::ENode(Fsm::Symbol(sym)),
                        None => n.clone(),
                    }
                }
                other => other.clone(),
            })
            .collect();
        Pattern::new(PatternAst::from(ast)).apply_one(egraph, eclass, &s, searcher_ast, rule_name)
    }

    /// None for a rule with a `fresh` variable: its right pattern alone
    /// does not determine the step (egg's own explanation check would find
    /// the variable unbound); each application writes the symbol in.
    fn get_pattern_ast(&self) -> Option<&PatternAst<Fsm>> {
        if self.conds.iter().any(|c| matches!(c, Cond::Fresh(_))) {
            return None;
        }
        <Pattern<Fsm> as Applier<Fsm, FsmAnalysis>>::get_pattern_ast(&self.rhs)
    }

    /// The variables the match must bind: those of the right-hand side,
    /// less the ones a `fresh` condition binds.
    fn vars(&self) -> Vec<Var> {
        <Pattern<Fsm> as Applier<Fsm, FsmAnalysis>>::vars(&self.rhs)
            .into_iter()
            .filter(|v| !self.conds.contains(&Cond::Fresh(*v)))
            .collect()
    }
}

/// `nonzero` of a class's constant: a Double `≠ 0.0` (so `-0.0` counts as
/// zero and NaN as nonzero) or an Index `≠ 0`; false for a Bool or none.
fn nonzero(c: &Option<Fsm>) -> bool {
    match c {
        Some(Fsm::Double(d)) => d.get() != 0.0,
        Some(Fsm::Int(i)) => *i != 0,
        _ => false,
    }
}

/// The egg rewrite of a rule.
pub fn rewrite(r: &RuleDef) -> Rewrite<Fsm, FsmAnalysis> {
    Rewrite::new(
        r.name.clone(),
        IndexedSearcher::new(r.lhs.clone()),
        RuleApplier {
            rhs: r.rhs.clone(),
            conds: r.conds.clone(),
            lhs_vars: r.lhs.vars(),
            done: Default::default(),
        },
    )
    .expect("the loader checked the variables")
}

/// A left-hand side searched only in the classes where it can match.
///
/// egg e-matches a pattern `(let ?x ?e (* ?a ?b))` by visiting every class
/// holding a `let` and looking into its body's class; the forty `let-…`
/// rules of `subst` each repeated that walk, and it was most of the
/// optimiser's time. A pattern whose root has an operator below it (here
/// `*` at position 2) is run only on the classes that
/// `analysis::classes_with_child` lists for that pair, one walk shared by
/// all rules: the same matches in the same order, since the classes left
/// out hold no match and the rest are visited in e-matching's order.
pub struct IndexedSearcher {
    pattern: Pattern<Fsm>,
    /// (root operator, position, operator there), if the pattern has one.
    key: Option<(FsmOp, usize, FsmOp)>,
}

impl IndexedSearcher {
    pub fn new(pattern: Pattern<Fsm>) -> IndexedSearcher {
        let ast = pattern.ast.as_ref();
        let key = match ast.last() {
            Some(ENodeOrVar::ENode(root)) => {
                root.children()
                    .iter()
                    .enumerate()
                    .find_map(|(k, c)| match &ast[usize::from(*c)] {
                        ENodeOrVar::ENode(child) => {
                            Some((root.discriminant(), k, child.discriminant()))
                        }
                        ENodeOrVar::Var(_) => None,
                    })
            }
            _ => None,
        };
        IndexedSearcher { pattern, key }
    }
}

impl Searcher<Fsm, FsmAnalysis> for IndexedSearcher {
    fn search_eclass_with_limit(
        &self,
        egraph: &Graph,
        eclass: Id,
        limit: usize,
    ) -> Option<SearchMatches<'_, Fsm>> {
        self.pattern.search_eclass_with_limit(egraph, eclass, limit)
    }

    fn search_with_limit(&self, egraph: &Graph, mut limit: usize) -> Vec<SearchMatches<'_, Fsm>> {
        let Some((parent, k, child)) = self.key else {
            return self.pattern.search_with_limit(egraph, limit);
        };
        let mut out = Vec::new();
        for id in classes_with_child(egraph, parent, k, child) {
            if limit == 0 {
                break;
            }
            if let Some(m) = self.pattern.search_eclass_with_limit(egraph, id, limit) {
                limit -= m.substs.len();
                out.push(m);
            }
        }
        out
    }

    fn get_pattern_ast(&self) -> Option<&PatternAst<Fsm>> {
        Some(&self.pattern.ast)
    }

    fn vars(&self) -> Vec<Var> {
        self.pattern.vars()
    }
}

/// Matches of a rule's left-hand side (for tests and `--check`).
pub fn search(r: &RuleDef, egraph: &Graph) -> Vec<SearchMatches<'static, Fsm>> {
    r.lhs
        .search(egraph)
        .into_iter()
        .map(|m| SearchMatches {
            eclass: m.eclass,
            substs: m.substs,
            ast: None,
        })
        .collect()
}
