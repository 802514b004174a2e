//! The primitives of F̃ and the one table of their facts, in the manner of
//! Futhark's `AD/Derivatives.hs`: every layer reads a primitive's name,
//! arity, syntax, signature, scalar arithmetic, ways of being ⊥,
//! derivative rules and optimiser symbol from its [`PrimInfo`] row,
//! reached by [`Prim::info`], instead of restating them.
//!
//! The rows hold *data*; each layer interprets it: `types::infer` turns a
//! [`Sig`] into its types, `eval::scalar` and `tape.rs` run a [`Compute`]
//! (the same Rust functions, so the tape has no arithmetic of its own),
//! `ad::derivatives` builds a [`Term`] as IR and `tape.rs` evaluates it on
//! `f64`, hoisting and the optimiser's totality analysis read
//! [`PrimInfo::bottoms`], the optimiser maps [`PrimInfo::egg`] to its
//! e-graph nodes. Rule names are spec/'s (T-*, E-*, D-*, R-*); a test
//! checks that each is defined there. What a layer must still write by
//! hand for a new primitive is listed in ARCHITECTURE.md ("adding a
//! primitive").
//!
//! This is the bottom layer: it imports nothing from the crate, so every
//! layer may read it.

use std::cmp::Ordering;

/// Declares [`Prim`] and [`Prim::ALL`] from one list, so that `ALL` holds
/// every primitive, in declaration order (the table's, whose length is
/// `ALL`'s).
macro_rules! primitives {
    ($($(#[$doc:meta])* $p:ident,)*) => {
        /// The primitive function constants of F̃ (seed 001 Fig. 3) plus
        /// `sqrt` and `toDouble`. Each has a fixed arity; applications are
        /// always saturated.
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Prim {
            $($(#[$doc])* $p,)*
        }

        impl Prim {
            /// Every primitive, in declaration order.
            pub const ALL: [Prim; [$(Prim::$p),*].len()] = [$(Prim::$p),*];
        }
    };
}

primitives! {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Neg,
    Lt,
    Gt,
    Le,
    Ge,
    Eq,
    Ne,
    Not,
    Sin,
    Cos,
    Tan,
    Log,
    Exp,
    Sqrt,
    ToDouble,
    Build,
    IFold,
    Get,
    Length,
    Pair,
    Fst,
    Snd,
    /// `iscan f z n = [z, f z 0, f (f z 0) 1, …]`: the n + 1 states of
    /// `ifold f z n` (reverse mode tapes loops with it).
    IScan,
    /// `concat [[a, b], [c]] = [a, b, c]`.
    Concat,
    /// `accum zero n cs`: an array of n elements, element j being `zero`
    /// combined with every `(j, c)` of `cs` by cotangent addition
    /// (spec/semantics.md, E-Accum). Reverse mode's scatter-add.
    Accum,
    /// `addAt a i c`: `a` with `c` ⊕-added into slot `i` (spec/semantics.md,
    /// E-AddAt). Reverse mode's dense accumulators; persistent in the
    /// evaluator, in place in native code where nothing can observe the
    /// old array.
    AddAt,
    /// `while cond step init`: `init` while `cond` of it is false, else
    /// `while cond step (step init)` (spec/semantics.md §3.7b): a loop
    /// whose length the data decides.
    While,
}

impl Prim {
    /// The primitive's row of the table.
    pub fn info(self) -> &'static PrimInfo {
        &TABLE[self as usize]
    }

    pub fn arity(self) -> usize {
        self.info().arity
    }

    /// The name a program uses for the primitive as a function value
    /// (`build`, `sin`, ...); operators answer their symbol.
    pub fn name(self) -> &'static str {
        self.info().name
    }

    /// Primitives that are referred to by an identifier (not an operator).
    pub fn from_ident(s: &str) -> Option<Prim> {
        Prim::ALL
            .into_iter()
            .find(|p| p.is_named() && p.name() == s)
    }

    /// The primitive whose optimiser symbol is `s` ([`PrimInfo::egg`]).
    pub fn from_egg(s: &str) -> Option<Prim> {
        Prim::ALL.into_iter().find(|p| p.info().egg == s)
    }

    /// Written as an identifier (`sin x`) rather than an operator (`a + b`).
    pub fn is_named(self) -> bool {
        self.name().starts_with(|c: char| c.is_ascii_alphabetic())
    }

    /// Binary infix operators.
    pub fn is_infix(self) -> bool {
        matches!(self.info().fixity, Fixity::Infix(_))
    }
}

/// Everything the passes know about one primitive.
#[derive(Debug)]
pub struct PrimInfo {
    pub prim: Prim,
    /// The primitive's name as a function value (`build`, `sin`) or its
    /// operator (`+`), as programs and the printer spell it; `~-` for
    /// unary minus, which programs write `-x`.
    pub name: &'static str,
    pub arity: usize,
    /// How the printer writes an application.
    pub fixity: Fixity,
    /// The T-* rule and the signature (spec/types.md).
    pub typing: Typing,
    /// The E-* rules and, for the scalar primitives, the arithmetic.
    pub eval: Eval,
    /// Every way an application can be ⊥, with the rule that says so
    /// (spec/semantics.md §4–5); empty for a total primitive.
    pub bottoms: Bottoms,
    /// The partial derivatives ∂r/∂aᵢ of a differentiable scalar
    /// primitive of Doubles (empty for the others): one table for forward
    /// mode, reverse mode and the tape.
    pub partials: &'static [PartialTerm],
    /// The D-* rule (spec/ad-forward.md) and how forward mode applies it.
    pub forward: (&'static str, ForwardRule),
    /// The R-* rule (spec/ad-reverse.md), if reverse mode has one, and how
    /// reverse mode applies it.
    pub reverse: (Option<&'static str>, ReverseRule),
    /// The operator of the optimiser's e-graph language and its rule files
    /// (`opt/lang.rs`, spec/rules-format.md).
    pub egg: &'static str,
}

impl PrimInfo {
    /// Whether an application can be ⊥ for some arguments. `on_index`:
    /// the operands are Indices (or not known to be Doubles), where
    /// arithmetic can overflow.
    pub fn can_fail(&self, on_index: bool) -> bool {
        self.bottoms
            .iter()
            .any(|(b, _)| on_index || *b != Bottom::Overflow)
    }

    /// Whether the partials mention the primal result `r`, which forward
    /// mode then binds first (spec/ad-forward.md §3.5).
    pub fn needs_result(&self) -> bool {
        self.partials.iter().any(|p| {
            [&p.num, &p.den]
                .into_iter()
                .flatten()
                .any(Term::mentions_result)
        })
    }

    /// The E-* rule of an application that returns a value (the first
    /// of [`Eval::rules`]).
    pub fn eval_rule(&self) -> &'static str {
        self.eval.rules[0]
    }
}

// ----- syntax ------------------------------------------------------------

/// How the printer writes an application (the parser's grammar is its
/// own: each operator is a token and a precedence level there).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Fixity {
    /// By juxtaposition, after its name: `sin x`, `build n f`.
    Applied,
    /// A binary operator between its operands.
    Infix(Level),
    /// Unary minus, `-x`.
    Negation,
    /// `a[i]` (also written `get a i`).
    Index,
    /// `(a, b)` (also written `pair a b`).
    Tuple,
}

/// The precedence levels of the binary operators, loosest first.
/// Comparisons do not associate, `+ -` and `* /` associate to the left,
/// `**` to the right (spec/syntax.md).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Level {
    Cmp,
    Add,
    Mul,
    Pow,
}

// ----- typing ------------------------------------------------------------

/// The T-* rule of a primitive and its signature.
#[derive(Debug)]
pub struct Typing {
    pub rule: &'static str,
    pub sig: Sig,
}

/// A signature as data: fresh type variables, made in order, then the
/// parameter and result types over them.
#[derive(Debug)]
pub struct Sig {
    pub vars: &'static [TyVar],
    pub params: &'static [T],
    pub result: T,
}

/// A fresh type variable of a signature.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum TyVar {
    /// A numeric type: Double or Index.
    Num,
    /// A data type (no functions); the place names it in errors
    /// ("arrays", "tuples", "`ifold` states").
    Data(&'static str),
}

/// A type in a signature.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum T {
    Double,
    Index,
    Bool,
    /// The k-th variable of [`Sig::vars`].
    Var(usize),
    Array(&'static T),
    Pair(&'static T, &'static T),
    Fun(&'static T, &'static T),
}

// ----- evaluation --------------------------------------------------------

/// The E-* rules of a primitive and, for a scalar one, its arithmetic.
#[derive(Debug)]
pub struct Eval {
    /// The rules of its transitions that do not go to ⊥, the rule of a
    /// returned value first (⊥ rules are in [`PrimInfo::bottoms`]).
    pub rules: &'static [&'static str],
    /// The scalar primitives' arithmetic on plain numbers, which the
    /// evaluator (`eval::scalar`), the tape and constant folding share;
    /// `None` for the structural primitives, whose rules are the
    /// machine's own code.
    pub compute: Option<Compute>,
}

/// A scalar primitive's arithmetic. The `f64` functions are the raw IEEE
/// operations; where a Double operation can be ⊥, a separate test says
/// when (so the tape evaluates partials with the raw operation, as the
/// generated code would on their domain).
#[derive(Copy, Clone, Debug)]
pub enum Compute {
    /// Two Doubles or two Indices (E-Arith, E-Arith-Bot).
    Arith {
        double: fn(f64, f64) -> f64,
        /// The ⊥ of the Double operation at these operands, if any.
        double_bottom: fn(f64, f64) -> Option<Bottom>,
        index: fn(i64, i64) -> Result<i64, Bottom>,
    },
    /// A Double or an Index (E-Neg).
    Unary {
        double: fn(f64) -> f64,
        index: fn(i64) -> Result<i64, Bottom>,
    },
    /// Two Doubles or two Indices, from their order (`None`: unordered,
    /// a NaN operand) (E-Cmp).
    Compare(fn(Option<Ordering>) -> bool),
    /// A Bool (E-Not).
    Logic(fn(bool) -> bool),
    /// A Double, defined where `domain` holds (E-Math, E-Math-Bot).
    Math {
        f: fn(f64) -> f64,
        domain: fn(f64) -> bool,
    },
    /// An Index to a Double (E-ToDouble).
    Convert(fn(i64) -> f64),
}

/// The ways an application can be ⊥, each with the rule that says so.
pub type Bottoms = &'static [(Bottom, &'static str)];

/// Why an application is ⊥: each is one error code of spec/semantics.md §5
/// ([`Bottom::code`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Bottom {
    /// `division-by-zero`.
    DivisionByZero,
    /// `domain-error`.
    Domain,
    /// `integer-overflow`: Index arithmetic only (Double arithmetic
    /// overflows to an infinity, not to ⊥).
    Overflow,
    /// `index-out-of-bounds`.
    OutOfBounds,
    /// `negative-size`.
    NegativeSize,
    /// `negative-count`.
    NegativeCount,
    /// A loop that may not end: `out-of-fuel` (E-Fuel) is how it is
    /// stopped, so it is not total.
    Diverges,
}

impl Bottom {
    /// The stable error code (spec/semantics.md §5), as the evaluator and
    /// native code report it.
    pub fn code(self) -> &'static str {
        match self {
            Bottom::DivisionByZero => "division-by-zero",
            Bottom::Domain => "domain-error",
            Bottom::Overflow => "integer-overflow",
            Bottom::OutOfBounds => "index-out-of-bounds",
            Bottom::NegativeSize => "negative-size",
            Bottom::NegativeCount => "negative-count",
            Bottom::Diverges => "out-of-fuel",
        }
    }
}

// ----- differentiation ---------------------------------------------------

/// One partial derivative ∂r/∂aᵢ = sign · num / den (num and den default
/// to 1), so that `a / b`'s tangent reads `ṫa / b - ṫb * r / b` rather
/// than a product with a reciprocal (`ad::derivatives::contract`).
#[derive(Copy, Clone, Debug)]
pub struct PartialTerm {
    pub negative: bool,
    pub num: Option<Term>,
    pub den: Option<Term>,
    /// The partial may be ⊥ or infinite where the primitive is defined
    /// (sqrt at 0): a zero seed must then give a zero term, not the
    /// partial's value times zero.
    pub guard_zero_seed: bool,
}

/// A term of a partial derivative over the primal arguments and result.
/// `ad::derivatives::partials` builds it as IR, each node once, in the
/// order written here (operands left to right, before their operator);
/// `tape.rs` evaluates it on `f64`.
#[derive(Copy, Clone, Debug)]
pub enum Term {
    /// The k-th primal argument.
    Arg(usize),
    /// The primal result `r`.
    Result,
    Lit(f64),
    /// A scalar primitive applied to terms.
    Op(Prim, &'static [Term]),
    /// `if c then t else e`, built in that order.
    If(&'static Term, &'static Term, &'static Term),
    /// `if test = 0.0 then 0.0 else value`, with `value` built first
    /// (the shape of `contract`'s zero-seed guard).
    ZeroWhenZero {
        test: &'static Term,
        value: &'static Term,
    },
}

impl Term {
    fn mentions_result(&self) -> bool {
        match self {
            Term::Result => true,
            Term::Arg(_) | Term::Lit(_) => false,
            Term::Op(_, ts) => ts.iter().any(Term::mentions_result),
            Term::If(c, t, e) => [c, t, e].iter().any(|t| t.mentions_result()),
            Term::ZeroWhenZero { test, value } => test.mentions_result() || value.mentions_result(),
        }
    }
}

/// How forward mode (D[[·]], spec/ad-forward.md) translates an
/// application.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ForwardRule {
    /// `(r, Σ ∂ᵢ · ṫᵢ)` from [`PrimInfo::partials`] on Doubles; on Indices
    /// the same primitive, which has no tangent (D-Index).
    Partials,
    /// On the primal parts of Double operands (D-Cmp).
    Primal,
    /// A Double with a zero tangent (D-ToDouble).
    ZeroTangent,
    /// The same primitive on the dual forms of the operands.
    Structural,
    /// As `Structural`, but it combines values by cotangent addition ⊕,
    /// which adds two dual pairs' primals and tangents; vector mode
    /// rejects it on Doubles, where ⊕ would join the tangent vectors
    /// (spec/ad-forward.md §4.6).
    CotangentSum,
}

/// How reverse mode (spec/ad-reverse.md) passes a cotangent on.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ReverseRule {
    /// āᵢ += ∂ᵢ · x̄ from [`PrimInfo::partials`] on Doubles (R-Discrete on
    /// Indices).
    Partials,
    /// No cotangent to pass on (R-Discrete).
    Discrete,
    /// Its own rule in `ad/reverse/` (pairs, projections, reads, loops,
    /// and reverse mode's own output: `concat`, `accum`, `addAt`).
    Structural,
}

// ----- the table ---------------------------------------------------------

use Term::{Arg, Lit, Op, Result as R};

const fn one() -> PartialTerm {
    PartialTerm {
        negative: false,
        num: None,
        den: None,
        guard_zero_seed: false,
    }
}

const fn minus_one() -> PartialTerm {
    PartialTerm {
        negative: true,
        ..one()
    }
}

const fn times(t: Term) -> PartialTerm {
    PartialTerm {
        num: Some(t),
        ..one()
    }
}

const fn over(t: Term) -> PartialTerm {
    PartialTerm {
        den: Some(t),
        ..one()
    }
}

const NUM: &[TyVar] = &[TyVar::Num];
const A: T = T::Var(0);
const B: T = T::Var(1);

/// T-Arith: `a → a → a` for a numeric `a`.
const ARITH: Sig = Sig {
    vars: NUM,
    params: &[A, A],
    result: A,
};

/// T-Cmp: `a → a → Bool` for a numeric `a`.
const CMP: Sig = Sig {
    vars: NUM,
    params: &[A, A],
    result: T::Bool,
};

/// T-Math: `Double → Double`.
const MATH: Sig = Sig {
    vars: &[],
    params: &[T::Double],
    result: T::Double,
};

fn no_bottom(_: f64, _: f64) -> Option<Bottom> {
    None
}

fn total(_: f64) -> bool {
    true
}

/// An arithmetic operator (E-Arith, T-Arith, D-*/R-* from `partials`).
#[allow(clippy::too_many_arguments)] // one per column of the table
const fn arith(
    prim: Prim,
    name: &'static str,
    level: Level,
    compute: Compute,
    bottoms: Bottoms,
    partials: &'static [PartialTerm],
    d: &'static str,
    r: &'static str,
) -> PrimInfo {
    PrimInfo {
        prim,
        name,
        arity: 2,
        fixity: Fixity::Infix(level),
        typing: Typing {
            rule: "T-Arith",
            sig: ARITH,
        },
        eval: Eval {
            rules: &["E-Arith"],
            compute: Some(compute),
        },
        bottoms,
        partials,
        forward: (d, ForwardRule::Partials),
        reverse: (Some(r), ReverseRule::Partials),
        egg: name,
    }
}

/// A comparison (E-Cmp, T-Cmp, D-Cmp, R-Discrete).
const fn cmp(prim: Prim, name: &'static str, f: fn(Option<Ordering>) -> bool) -> PrimInfo {
    PrimInfo {
        prim,
        name,
        arity: 2,
        fixity: Fixity::Infix(Level::Cmp),
        typing: Typing {
            rule: "T-Cmp",
            sig: CMP,
        },
        eval: Eval {
            rules: &["E-Cmp"],
            compute: Some(Compute::Compare(f)),
        },
        bottoms: &[],
        partials: &[],
        forward: ("D-Cmp", ForwardRule::Primal),
        reverse: (Some("R-Discrete"), ReverseRule::Discrete),
        egg: name,
    }
}

/// A math function (E-Math, T-Math, D-*/R-* from `partials`).
const fn math(
    prim: Prim,
    name: &'static str,
    f: fn(f64) -> f64,
    domain: Option<fn(f64) -> bool>,
    partials: &'static [PartialTerm],
    d: &'static str,
    r: &'static str,
) -> PrimInfo {
    let (domain, bottoms): (fn(f64) -> bool, Bottoms) = match domain {
        Some(dom) => (dom, &[(Bottom::Domain, "E-Math-Bot")]),
        None => (total, &[]),
    };
    PrimInfo {
        prim,
        name,
        arity: 1,
        fixity: Fixity::Applied,
        typing: Typing {
            rule: "T-Math",
            sig: MATH,
        },
        eval: Eval {
            rules: &["E-Math"],
            compute: Some(Compute::Math { f, domain }),
        },
        bottoms,
        partials,
        forward: (d, ForwardRule::Partials),
        reverse: (Some(r), ReverseRule::Partials),
        egg: name,
    }
}

/// A structural primitive: its machine rules, typing and derivative
/// rules are code in each layer; the row names them.
#[allow(clippy::too_many_arguments)] // one per column of the table
const fn structural(
    prim: Prim,
    name: &'static str,
    arity: usize,
    typing: Typing,
    rules: &'static [&'static str],
    bottoms: Bottoms,
    forward: (&'static str, ForwardRule),
    reverse: (Option<&'static str>, ReverseRule),
) -> PrimInfo {
    PrimInfo {
        prim,
        name,
        arity,
        fixity: Fixity::Applied,
        typing,
        eval: Eval {
            rules,
            compute: None,
        },
        bottoms,
        partials: &[],
        forward,
        reverse,
        egg: name,
    }
}

/// The Index operations of E-Arith: exact, or ⊥.
mod index {
    use super::Bottom;

    pub fn add(x: i64, y: i64) -> Result<i64, Bottom> {
        x.checked_add(y).ok_or(Bottom::Overflow)
    }
    pub fn sub(x: i64, y: i64) -> Result<i64, Bottom> {
        x.checked_sub(y).ok_or(Bottom::Overflow)
    }
    pub fn mul(x: i64, y: i64) -> Result<i64, Bottom> {
        x.checked_mul(y).ok_or(Bottom::Overflow)
    }
    /// Truncating; the one overflowing quotient is −2⁶³ / −1.
    pub fn div(x: i64, y: i64) -> Result<i64, Bottom> {
        if y == 0 {
            return Err(Bottom::DivisionByZero);
        }
        x.checked_div(y).ok_or(Bottom::Overflow)
    }
    /// Repeated multiplication; a negative exponent is outside the domain.
    pub fn pow(x: i64, y: i64) -> Result<i64, Bottom> {
        if y < 0 {
            return Err(Bottom::Domain);
        }
        match u32::try_from(y) {
            Ok(y) => x.checked_pow(y),
            // Huge exponents: only 0, 1 and -1 stay in range.
            Err(_) => match x {
                0 | 1 => Some(x),
                -1 => Some(if y % 2 == 0 { 1 } else { -1 }),
                _ => None,
            },
        }
        .ok_or(Bottom::Overflow)
    }
    /// −(−2⁶³) overflows.
    pub fn neg(x: i64) -> Result<i64, Bottom> {
        x.checked_neg().ok_or(Bottom::Overflow)
    }
}

/// `0.0 / 0.0` and every other division by zero is ⊥.
fn div_bottom(_: f64, y: f64) -> Option<Bottom> {
    (y == 0.0).then_some(Bottom::DivisionByZero)
}

/// Dom(**) on Doubles: x > 0, or x = 0 and y ≥ 0, or x < 0 and y an
/// integer (spec/semantics.md §4).
fn pow_bottom(x: f64, y: f64) -> Option<Bottom> {
    let ok = x > 0.0 || (x == 0.0 && y >= 0.0) || (x < 0.0 && y.fract() == 0.0);
    (!ok).then_some(Bottom::Domain)
}

/// The table, in [`Prim::ALL`] order.
static TABLE: [PrimInfo; Prim::ALL.len()] = [
    arith(
        Prim::Add,
        "+",
        Level::Add,
        Compute::Arith {
            double: |x, y| x + y,
            double_bottom: no_bottom,
            index: index::add,
        },
        &[(Bottom::Overflow, "E-Arith-Bot")],
        // ∂(a + b) = (1, 1)
        &[one(), one()],
        "D-Add",
        "R-Add",
    ),
    arith(
        Prim::Sub,
        "-",
        Level::Add,
        Compute::Arith {
            double: |x, y| x - y,
            double_bottom: no_bottom,
            index: index::sub,
        },
        &[(Bottom::Overflow, "E-Arith-Bot")],
        // ∂(a - b) = (1, -1)
        &[one(), minus_one()],
        "D-Sub",
        "R-Sub",
    ),
    arith(
        Prim::Mul,
        "*",
        Level::Mul,
        Compute::Arith {
            double: |x, y| x * y,
            double_bottom: no_bottom,
            index: index::mul,
        },
        &[(Bottom::Overflow, "E-Arith-Bot")],
        // ∂(a * b) = (b, a)
        &[times(Arg(1)), times(Arg(0))],
        "D-Mult",
        "R-Mult",
    ),
    arith(
        Prim::Div,
        "/",
        Level::Mul,
        Compute::Arith {
            double: |x, y| x / y,
            double_bottom: div_bottom,
            index: index::div,
        },
        &[
            (Bottom::DivisionByZero, "E-Arith-Bot"),
            (Bottom::Overflow, "E-Arith-Bot"),
        ],
        // ∂(a / b) = (1 / b, -r / b)
        &[
            over(Arg(1)),
            PartialTerm {
                negative: true,
                num: Some(R),
                den: Some(Arg(1)),
                guard_zero_seed: false,
            },
        ],
        "D-Div",
        "R-Div",
    ),
    arith(
        Prim::Pow,
        "**",
        Level::Pow,
        Compute::Arith {
            double: f64::powf,
            double_bottom: pow_bottom,
            index: index::pow,
        },
        &[
            (Bottom::Domain, "E-Arith-Bot"),
            (Bottom::Overflow, "E-Arith-Bot"),
        ],
        // ∂(a ** b) = (if b = 0 then 0 else b * a ** (b - 1),
        //              if a > 0 then r * log a else 0)
        &[
            times(Term::ZeroWhenZero {
                test: &Arg(1),
                value: &Op(
                    Prim::Mul,
                    &[
                        Arg(1),
                        Op(Prim::Pow, &[Arg(0), Op(Prim::Sub, &[Arg(1), Lit(1.0)])]),
                    ],
                ),
            }),
            times(Term::If(
                &Op(Prim::Gt, &[Arg(0), Lit(0.0)]),
                &Op(Prim::Mul, &[R, Op(Prim::Log, &[Arg(0)])]),
                &Lit(0.0),
            )),
        ],
        "D-Pow",
        "R-Pow",
    ),
    PrimInfo {
        prim: Prim::Neg,
        name: "~-",
        arity: 1,
        fixity: Fixity::Negation,
        typing: Typing {
            rule: "T-Neg",
            sig: Sig {
                vars: NUM,
                params: &[A],
                result: A,
            },
        },
        eval: Eval {
            rules: &["E-Neg"],
            compute: Some(Compute::Unary {
                double: |x| -x,
                index: index::neg,
            }),
        },
        // E-Neg's own transition goes to ⊥ (spec/semantics.md, Open
        // questions: no separate rule name).
        bottoms: &[(Bottom::Overflow, "E-Neg")],
        // ∂(-a) = -1
        partials: &[minus_one()],
        forward: ("D-Neg", ForwardRule::Partials),
        reverse: (Some("R-Neg"), ReverseRule::Partials),
        egg: "neg",
    },
    cmp(Prim::Lt, "<", |o| o == Some(Ordering::Less)),
    cmp(Prim::Gt, ">", |o| o == Some(Ordering::Greater)),
    cmp(Prim::Le, "<=", |o| {
        o.is_some_and(|o| o != Ordering::Greater)
    }),
    cmp(Prim::Ge, ">=", |o| o.is_some_and(|o| o != Ordering::Less)),
    cmp(Prim::Eq, "=", |o| o == Some(Ordering::Equal)),
    // True on NaN operands: the negation of `=`.
    cmp(Prim::Ne, "<>", |o| o != Some(Ordering::Equal)),
    PrimInfo {
        prim: Prim::Not,
        name: "not",
        arity: 1,
        fixity: Fixity::Applied,
        typing: Typing {
            rule: "T-Not",
            sig: Sig {
                vars: &[],
                params: &[T::Bool],
                result: T::Bool,
            },
        },
        eval: Eval {
            rules: &["E-Not"],
            compute: Some(Compute::Logic(|b| !b)),
        },
        bottoms: &[],
        partials: &[],
        forward: ("D-Not", ForwardRule::Structural),
        reverse: (Some("R-Discrete"), ReverseRule::Discrete),
        egg: "not",
    },
    // ∂ sin a = cos a
    math(
        Prim::Sin,
        "sin",
        f64::sin,
        None,
        &[times(Op(Prim::Cos, &[Arg(0)]))],
        "D-Sin",
        "R-Sin",
    ),
    // ∂ cos a = -(sin a)
    math(
        Prim::Cos,
        "cos",
        f64::cos,
        None,
        &[PartialTerm {
            negative: true,
            ..times(Op(Prim::Sin, &[Arg(0)]))
        }],
        "D-Cos",
        "R-Cos",
    ),
    // ∂ tan a = 1 / (cos a * cos a). Dom(tan): x finite and cos x ≠ 0
    // (spec/semantics.md §4).
    math(
        Prim::Tan,
        "tan",
        f64::tan,
        Some(|x| x.is_finite() && x.cos() != 0.0),
        &[over(Op(
            Prim::Mul,
            &[Op(Prim::Cos, &[Arg(0)]), Op(Prim::Cos, &[Arg(0)])],
        ))],
        "D-Tan",
        "R-Tan",
    ),
    // ∂ log a = 1 / a
    math(
        Prim::Log,
        "log",
        f64::ln,
        Some(|x| x > 0.0),
        &[over(Arg(0))],
        "D-Log",
        "R-Log",
    ),
    // ∂ exp a = r
    math(
        Prim::Exp,
        "exp",
        f64::exp,
        None,
        &[times(R)],
        "D-Exp",
        "R-Exp",
    ),
    // ∂ sqrt a = 1 / (2 r): at a = 0 the division is ⊥, so a zero seed
    // gives a zero term instead.
    math(
        Prim::Sqrt,
        "sqrt",
        f64::sqrt,
        Some(|x| x >= 0.0),
        &[PartialTerm {
            guard_zero_seed: true,
            ..over(Op(Prim::Mul, &[Lit(2.0), R]))
        }],
        "D-Sqrt",
        "R-Sqrt",
    ),
    PrimInfo {
        prim: Prim::ToDouble,
        name: "toDouble",
        arity: 1,
        fixity: Fixity::Applied,
        typing: Typing {
            rule: "T-ToDouble",
            sig: Sig {
                vars: &[],
                params: &[T::Index],
                result: T::Double,
            },
        },
        eval: Eval {
            rules: &["E-ToDouble"],
            // Round to nearest (Rust's `as`).
            compute: Some(Compute::Convert(|i| i as f64)),
        },
        bottoms: &[],
        partials: &[],
        forward: ("D-ToDouble", ForwardRule::ZeroTangent),
        reverse: (Some("R-Discrete"), ReverseRule::Discrete),
        egg: "toDouble",
    },
    structural(
        Prim::Build,
        "build",
        2,
        Typing {
            rule: "T-Build",
            sig: Sig {
                vars: &[TyVar::Data("arrays")],
                params: &[T::Index, T::Fun(&T::Index, &A)],
                result: T::Array(&A),
            },
        },
        &["E-Build", "E-Build-Elem"],
        &[(Bottom::NegativeSize, "E-Build-Bot")],
        ("D-Build", ForwardRule::Structural),
        (Some("R-Build"), ReverseRule::Structural),
    ),
    structural(
        Prim::IFold,
        "ifold",
        3,
        Typing {
            rule: "T-IFold",
            sig: Sig {
                vars: &[TyVar::Data("`ifold` states")],
                params: &[T::Fun(&A, &T::Fun(&T::Index, &A)), A, T::Index],
                result: A,
            },
        },
        &["E-IFold-Zero", "E-IFold-Succ", "E-IFold-Done"],
        &[(Bottom::NegativeCount, "E-IFold-Bot")],
        ("D-IFold", ForwardRule::Structural),
        (Some("R-IFold"), ReverseRule::Structural),
    ),
    PrimInfo {
        prim: Prim::Get,
        name: "get",
        arity: 2,
        fixity: Fixity::Index,
        typing: Typing {
            rule: "T-Get",
            sig: Sig {
                vars: &[TyVar::Data("arrays")],
                params: &[T::Array(&A), T::Index],
                result: A,
            },
        },
        eval: Eval {
            rules: &["E-Get"],
            compute: None,
        },
        bottoms: &[(Bottom::OutOfBounds, "E-Get-Bot")],
        partials: &[],
        forward: ("D-Get", ForwardRule::Structural),
        reverse: (Some("R-Get"), ReverseRule::Structural),
        egg: "get",
    },
    structural(
        Prim::Length,
        "length",
        1,
        Typing {
            rule: "T-Length",
            sig: Sig {
                vars: &[TyVar::Data("arrays")],
                params: &[T::Array(&A)],
                result: T::Index,
            },
        },
        &["E-Length"],
        &[],
        ("D-Length", ForwardRule::Structural),
        (Some("R-Discrete"), ReverseRule::Discrete),
    ),
    PrimInfo {
        prim: Prim::Pair,
        name: "pair",
        arity: 2,
        fixity: Fixity::Tuple,
        typing: Typing {
            rule: "T-Pair",
            sig: Sig {
                vars: &[TyVar::Data("tuples"), TyVar::Data("tuples")],
                params: &[A, B],
                result: T::Pair(&A, &B),
            },
        },
        eval: Eval {
            rules: &["E-Pair"],
            compute: None,
        },
        bottoms: &[],
        partials: &[],
        forward: ("D-Pair", ForwardRule::Structural),
        reverse: (Some("R-Pair"), ReverseRule::Structural),
        egg: "pair",
    },
    structural(
        Prim::Fst,
        "fst",
        1,
        Typing {
            rule: "T-Fst",
            sig: Sig {
                vars: &[TyVar::Data("tuples"), TyVar::Data("tuples")],
                params: &[T::Pair(&A, &B)],
                result: A,
            },
        },
        &["E-Fst"],
        &[],
        ("D-Fst", ForwardRule::Structural),
        (Some("R-Fst"), ReverseRule::Structural),
    ),
    structural(
        Prim::Snd,
        "snd",
        1,
        Typing {
            rule: "T-Snd",
            sig: Sig {
                vars: &[TyVar::Data("tuples"), TyVar::Data("tuples")],
                params: &[T::Pair(&A, &B)],
                result: B,
            },
        },
        &["E-Snd"],
        &[],
        ("D-Snd", ForwardRule::Structural),
        (Some("R-Snd"), ReverseRule::Structural),
    ),
    structural(
        Prim::IScan,
        "iscan",
        3,
        Typing {
            rule: "T-IScan",
            sig: Sig {
                vars: &[TyVar::Data("`ifold` states")],
                params: &[T::Fun(&A, &T::Fun(&T::Index, &A)), A, T::Index],
                result: T::Array(&A),
            },
        },
        &["E-IScan-Zero", "E-IScan-Succ", "E-IScan-Done"],
        &[(Bottom::NegativeCount, "E-IScan-Bot")],
        ("D-IScan", ForwardRule::Structural),
        (Some("R-IScan"), ReverseRule::Structural),
    ),
    structural(
        Prim::Concat,
        "concat",
        1,
        Typing {
            rule: "T-Concat",
            sig: Sig {
                vars: &[TyVar::Data("arrays")],
                params: &[T::Array(&T::Array(&A))],
                result: T::Array(&A),
            },
        },
        &["E-Concat"],
        &[],
        ("D-Concat", ForwardRule::Structural),
        (Some("R-Concat"), ReverseRule::Structural),
    ),
    structural(
        Prim::Accum,
        "accum",
        3,
        Typing {
            rule: "T-Accum",
            sig: Sig {
                vars: &[TyVar::Data("arrays")],
                params: &[A, T::Index, T::Array(&T::Pair(&T::Index, &A))],
                result: T::Array(&A),
            },
        },
        &["E-Accum"],
        &[
            (Bottom::NegativeSize, "E-Accum-Bot"),
            (Bottom::OutOfBounds, "E-Accum-Bot"),
        ],
        ("D-Accum", ForwardRule::CotangentSum),
        (Some("R-Accum"), ReverseRule::Structural),
    ),
    structural(
        Prim::AddAt,
        "addAt",
        3,
        Typing {
            rule: "T-AddAt",
            sig: Sig {
                vars: &[TyVar::Data("arrays")],
                params: &[T::Array(&A), T::Index, A],
                result: T::Array(&A),
            },
        },
        &["E-AddAt"],
        &[(Bottom::OutOfBounds, "E-AddAt-Bot")],
        ("D-AddAt", ForwardRule::CotangentSum),
        (Some("R-AddAt"), ReverseRule::Structural),
    ),
    structural(
        Prim::While,
        "while",
        3,
        Typing {
            rule: "T-While",
            sig: Sig {
                vars: &[TyVar::Data("`while` states")],
                params: &[T::Fun(&A, &T::Bool), T::Fun(&A, &A), A],
                result: A,
            },
        },
        &["E-While", "E-While-Step", "E-While-Done"],
        &[(Bottom::Diverges, "E-Fuel")],
        ("D-While", ForwardRule::Structural),
        (Some("R-While"), ReverseRule::Structural),
    ),
];
