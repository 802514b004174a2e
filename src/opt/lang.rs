//! The e-graph language: the core IR as egg nodes (`define_language!`, not
//! `SymbolLang`). Binders are named (`(lam x body)`, `(let x value body)`,
//! variables `(var x)`) and substitution is explicit: rules push `let`
//! through each constructor, and capture is avoided by renaming to fresh
//! symbols (spec/rules-format.md, "Binders"). Literals keep their kind:
//! `1.0` is a Double, `1` an Index.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

use egg::{FromOp, Id, Language, RecExpr, Symbol, define_language};
use rustc_hash::FxHashMap as HashMap;

use crate::ir::Prim;
#[cfg(doc)]
use crate::ir::prim::PrimInfo;

/// A Double literal, ordered and hashed by its bits.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Dbl(pub u64);

impl Dbl {
    pub fn new(x: f64) -> Dbl {
        Dbl(x.to_bits())
    }
    pub fn get(self) -> f64 {
        f64::from_bits(self.0)
    }
}

impl fmt::Display for Dbl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.get())
    }
}

impl FromStr for Dbl {
    type Err = ();
    /// Only literals with a decimal point or exponent are Doubles.
    fn from_str(s: &str) -> Result<Dbl, ()> {
        if !(s.contains('.') || s.contains('e') || s.contains("inf") || s.contains("NaN")) {
            return Err(());
        }
        s.parse::<f64>().map(Dbl::new).map_err(|_| ())
    }
}

define_language! {
    pub enum Fsm {
        "var" = Var(Id),
        "lam" = Lam([Id; 2]),
        "let" = Let([Id; 3]),
        "app" = App([Id; 2]),
        "if" = If([Id; 3]),
        "array" = Array(Box<[Id]>),
        "+" = Add([Id; 2]),
        "-" = Sub([Id; 2]),
        "*" = Mul([Id; 2]),
        "/" = Div([Id; 2]),
        "**" = Pow([Id; 2]),
        "neg" = Neg([Id; 1]),
        "<" = Lt([Id; 2]),
        ">" = Gt([Id; 2]),
        "<=" = Le([Id; 2]),
        ">=" = Ge([Id; 2]),
        "=" = Eq([Id; 2]),
        "<>" = Ne([Id; 2]),
        "not" = Not([Id; 1]),
        "sin" = Sin([Id; 1]),
        "cos" = Cos([Id; 1]),
        "tan" = Tan([Id; 1]),
        "log" = Log([Id; 1]),
        "exp" = Exp([Id; 1]),
        "sqrt" = Sqrt([Id; 1]),
        "toDouble" = ToDouble([Id; 1]),
        "build" = Build([Id; 2]),
        "ifold" = IFold([Id; 3]),
        "iscan" = IScan([Id; 3]),
        "concat" = Concat([Id; 1]),
        "accum" = Accum([Id; 3]),
        "addAt" = AddAt([Id; 3]),
        "get" = Get([Id; 2]),
        "length" = Length([Id; 1]),
        "pair" = Pair([Id; 2]),
        "fst" = Fst([Id; 1]),
        "snd" = Snd([Id; 1]),
        "while" = While([Id; 3]),
        Bool(bool),
        Int(i64),
        Double(Dbl),
        Symbol(Symbol),
    }
}

/// The operators of the language that are not primitives.
const CONSTRUCTS: &[&str] = &["var", "lam", "let", "app", "if", "array"];

/// Whether a rule pattern may use `op` as an operator (for the loader's
/// errors): a construct, or a primitive's symbol ([`PrimInfo::egg`]).
pub fn is_operator(op: &str) -> bool {
    CONSTRUCTS.contains(&op) || Prim::from_egg(op).is_some()
}

/// The e-node of primitive `op` applied to `children`: the node whose
/// operator is the table's symbol ([`PrimInfo::egg`]).
pub fn prim_node(op: Prim, children: Vec<Id>) -> Fsm {
    let sym = op.info().egg;
    Fsm::from_op(sym, children).unwrap_or_else(|e| {
        unreachable!("`{sym}`, `{op:?}`'s symbol, is an operator of the language: {e}")
    })
}

/// The primitive an e-node applies, if it applies one.
pub fn node_prim(n: &Fsm) -> Option<Prim> {
    // By operator, once: each primitive's node made from its symbol.
    static BY_OP: OnceLock<HashMap<FsmOp, Prim>> = OnceLock::new();
    let by_op = BY_OP.get_or_init(|| {
        Prim::ALL
            .into_iter()
            .map(|p| {
                let children = vec![Id::from(0); p.arity()];
                (prim_node(p, children).discriminant(), p)
            })
            .collect()
    });
    by_op.get(&n.discriminant()).copied()
}

/// The operator of an e-node, without its operands.
pub type FsmOp = <Fsm as egg::Language>::Discriminant;

/// The subterm rooted at `id` as its own RecExpr.
pub fn subexpr(expr: &RecExpr<Fsm>, id: Id) -> RecExpr<Fsm> {
    // Collected in a Vec: `RecExpr::add` is O(n) per node in egg 0.11.
    let mut out: Vec<Fsm> = Vec::new();
    let mut map: BTreeMap<usize, Id> = BTreeMap::new();
    fn go(expr: &RecExpr<Fsm>, id: Id, out: &mut Vec<Fsm>, map: &mut BTreeMap<usize, Id>) -> Id {
        if let Some(n) = map.get(&usize::from(id)) {
            return *n;
        }
        let node = expr[id].clone().map_children(|c| go(expr, c, out, map));
        out.push(node);
        let n = Id::from(out.len() - 1);
        map.insert(usize::from(id), n);
        n
    }
    go(expr, id, &mut out, &mut map);
    RecExpr::from(out)
}
