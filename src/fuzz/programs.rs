//! Structured source programs for the fuzzing harness: typed generation
//! of F̃ *surface* text (where `testgen` builds core IR and prints it), so
//! that the parser's whole grammar is exercised — layout `let`s, inline
//! `let … in`, annotations (`Vector`, `Array<Double>`, `DoubleD`, `×`),
//! operator sections (`( ** )` included), `v[i]`, `v.[i]`, `get`, tuples,
//! `&&`/`||`, `deriv` and the differentiation API, primitives used as
//! values, helper definitions with parameters, shadowed prelude names,
//! comments of both kinds — over the types Double, Index, Bool, Vector,
//! Matrix, pairs and Double → Double functions.
//!
//! Three shapes ([`Shape`]): *well-typed* programs (meant to type-check;
//! what the native, opt and grad oracles compare), *near misses* (one
//! defect placed at a random node: a wrong type, an unbound or
//! misspelt name, a wrong arity, a bad `deriv` variable, a mismatched
//! annotation, a syntax slip), and *deep* programs (one construct
//! nested hundreds to tens of thousands of levels, past
//! `syntax::MAX_NESTING` at times).
//!
//! Sizes stay small so that any engine finishes quickly and no run needs
//! more memory than a laptop has (the array-size limit of the engines
//! is being added elsewhere; until then the harness must not rely on
//! it): `build`, `ifold` and the prelude's fills take their sizes from
//! [`Gen::size`] — a literal 0–4 or the length of an array — never from
//! an arbitrary Index expression, and valid inputs
//! (`fuzz::inputs`) hold arrays of at most 6 elements.

use crate::ir::Type;

use super::choices::Choices;

/// What kind of program to generate.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Shape {
    /// Meant to type-check.
    WellTyped,
    /// One defect at a random place.
    NearMiss,
    /// One construct nested very deeply.
    Deep,
}

/// A generated program and what is known about its entry.
#[derive(Clone, Debug)]
pub struct Generated {
    pub source: String,
    pub entry: String,
    /// The entry's parameters (names and types), as the generator wrote
    /// them: what inputs are generated for.
    pub params: Vec<(String, Type)>,
    pub result: Type,
    pub shape: Shape,
    /// What the defect of a near miss (or the construct of a deep
    /// program) is.
    pub note: String,
}

/// The types of generated expressions.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Ty {
    Double,
    Index,
    Bool,
    Vector,
    Matrix,
    Pair(Box<Ty>, Box<Ty>),
    /// Double -> Double.
    Fun,
}

impl Ty {
    fn pair(a: Ty, b: Ty) -> Ty {
        Ty::Pair(Box::new(a), Box::new(b))
    }

    fn to_type(&self) -> Type {
        match self {
            Ty::Double => Type::Double,
            Ty::Index => Type::Index,
            Ty::Bool => Type::Bool,
            Ty::Vector => Type::array(Type::Double),
            Ty::Matrix => Type::array(Type::array(Type::Double)),
            Ty::Pair(a, b) => Type::pair(a.to_type(), b.to_type()),
            Ty::Fun => Type::fun(Type::Double, Type::Double),
        }
    }

    fn is_data(&self) -> bool {
        !matches!(self, Ty::Fun)
    }

    /// Whether a value of this type is all Doubles (what `deriv` may
    /// close over without a `deriv-free-function` error).
    fn first_order(&self) -> bool {
        match self {
            Ty::Fun => false,
            Ty::Pair(a, b) => a.first_order() && b.first_order(),
            _ => true,
        }
    }
}

/// A top-level definition the entry may call.
struct Global {
    name: String,
    params: Vec<Ty>,
    result: Ty,
}

type Scope = Vec<(String, Ty)>;

struct Gen<'c, 'a> {
    c: &'c mut Choices<'a>,
    fresh: u32,
    globals: Vec<Global>,
    /// Expression nodes generated so far.
    nodes: u32,
    /// The node at which a near miss places its defect, and the defect
    /// once placed.
    defect_at: Option<u32>,
    defect: Option<String>,
}

const DOUBLE_LITS: &[&str] = &[
    "1.5", "0.0", "2.0", "0.5", "3", "1", "0.1", "2.", "1e-3", "1e2", "7.25", "0.75", "pi", "4.0e0",
];

/// Generates a program of the given shape with helper definitions and
/// an entry `main` (or another name) with parameters.
pub fn program(c: &mut Choices, shape: Shape, max_depth: u32) -> Generated {
    let mut g = Gen {
        c,
        fresh: 0,
        globals: Vec::new(),
        nodes: 0,
        defect_at: None,
        defect: None,
    };
    if shape == Shape::NearMiss {
        g.defect_at = Some(g.c.below(40) as u32);
    }
    let mut src = String::new();
    if g.c.one_in(4) {
        src.push_str("// a generated program\n");
    }
    // Helper definitions.
    for k in 0..g.c.below(3) {
        src.push_str(&g.helper(k, max_depth.min(3)));
    }
    // The entry.
    let entry = if g.c.one_in(6) { "f'entry" } else { "main" }.to_string();
    let nparams = g.c.weighted(&[2, 5, 3, 1]);
    let mut params = Vec::new();
    for k in 0..nparams {
        let t = g.param_type();
        params.push((format!("p{}", k + 1), t));
    }
    let result = g.data_type();
    let header = if params.is_empty() {
        format!("let {entry} =")
    } else if g.c.one_in(3) {
        format!("let {entry} {} =", g.param_list(&params))
    } else {
        format!("let {entry} = fun {} ->", g.param_list(&params))
    };
    src.push_str(&header);
    let mut scope: Scope = params.clone();
    let body = match shape {
        Shape::Deep => g.deep(&result, &mut scope),
        _ => g.body(&result, max_depth, &mut scope, 2),
    };
    src.push('\n');
    src.push_str(&body);
    src.push('\n');
    let note = match shape {
        Shape::NearMiss => {
            if g.defect.is_none() {
                // Not reached: put the defect in a definition of its own.
                let d = g.place_defect(&Ty::Double, &Vec::new());
                src.push_str(&format!("let defect = {d}\n"));
            }
            g.defect.take().unwrap_or_default()
        }
        Shape::Deep => g.defect.take().unwrap_or_default(),
        Shape::WellTyped => String::new(),
    };
    Generated {
        source: src,
        entry,
        params: params
            .iter()
            .map(|(n, t)| (n.clone(), t.to_type()))
            .collect(),
        result: result.to_type(),
        shape,
        note,
    }
}

impl Gen<'_, '_> {
    fn fresh(&mut self) -> String {
        self.fresh += 1;
        // Now and then reuse a name, so shadowing is exercised.
        let n = if self.c.one_in(8) { 1 } else { self.fresh };
        format!("x{n}")
    }

    fn param_type(&mut self) -> Ty {
        match self.c.weighted(&[7, 5, 2, 1, 3, 2]) {
            0 => Ty::Double,
            1 => Ty::Vector,
            2 => Ty::Index,
            3 => Ty::Bool,
            4 => Ty::Matrix,
            _ => Ty::pair(Ty::Double, Ty::Double),
        }
    }

    fn data_type(&mut self) -> Ty {
        match self.c.weighted(&[8, 4, 1, 1, 2, 2]) {
            0 => Ty::Double,
            1 => Ty::Vector,
            2 => Ty::Index,
            3 => Ty::Bool,
            4 => Ty::Matrix,
            _ => {
                if self.c.one_in(3) {
                    Ty::pair(Ty::Double, Ty::pair(Ty::Vector, Ty::Index))
                } else {
                    Ty::pair(Ty::Double, Ty::Double)
                }
            }
        }
    }

    /// A type annotation, in one of its spellings.
    fn annotation(&mut self, t: &Ty) -> String {
        match t {
            Ty::Double => "Double".into(),
            Ty::Index => "Index".into(),
            Ty::Bool => "Bool".into(),
            Ty::Vector => {
                if self.c.one_in(3) {
                    "Array<Double>".into()
                } else {
                    "Vector".into()
                }
            }
            Ty::Matrix => match self.c.below(3) {
                0 => "Array<Vector>".into(),
                1 => "Array<Array<Double>>".into(),
                _ => "Matrix".into(),
            },
            Ty::Pair(a, b) if **a == Ty::Double && **b == Ty::Double && self.c.one_in(3) => {
                "DoubleD".into()
            }
            Ty::Pair(a, b) => {
                let star = if self.c.one_in(4) { "×" } else { "*" };
                let a = self.annotation(a);
                let b = self.annotation(b);
                format!("({a} {star} {b})")
            }
            Ty::Fun => "(Double -> Double)".into(),
        }
    }

    fn param_list(&mut self, params: &[(String, Ty)]) -> String {
        let mut out = Vec::new();
        for (n, t) in params {
            let a = self.annotation(t);
            out.push(format!("({n}: {a})"));
        }
        out.join(" ")
    }

    fn helper(&mut self, k: usize, depth: u32) -> String {
        let name = format!("h{k}");
        let nparams = self.c.range(0, 2);
        let params: Vec<(String, Ty)> = (0..nparams)
            .map(|i| {
                let t = match self.c.below(4) {
                    0 => Ty::Vector,
                    1 => Ty::Index,
                    _ => Ty::Double,
                };
                (format!("a{i}"), t)
            })
            .collect();
        let result = match self.c.below(3) {
            0 => Ty::Vector,
            _ => Ty::Double,
        };
        let mut scope = params.clone();
        let body = self.expr(&result, depth, &mut scope);
        let text = if params.is_empty() {
            if self.c.one_in(2) {
                let a = self.annotation(&result);
                format!("let {name} : {a} = {body}\n")
            } else {
                format!("let {name} = {body}\n")
            }
        } else {
            let ps = self.param_list(&params);
            if self.c.one_in(2) {
                format!("let {name} {ps} =\n  {body}\n")
            } else {
                format!("let {name} = fun {ps} -> {body}\n")
            }
        };
        self.globals.push(Global {
            name,
            params: params.into_iter().map(|(_, t)| t).collect(),
            result,
        });
        text
    }

    /// The entry's body at column `col`: a few layout `let`s, then an
    /// expression.
    fn body(&mut self, t: &Ty, depth: u32, scope: &mut Scope, col: usize) -> String {
        let pad = " ".repeat(col);
        let mut out = String::new();
        let pushed = scope.len();
        for _ in 0..self.c.geometric(3) {
            let vt = self.any_type();
            let x = self.fresh();
            let v = self.expr(&vt, depth.saturating_sub(1), scope);
            let comment = match self.c.below(8) {
                0 => "  // a comment",
                1 => "  (* a (* nested *) comment *)",
                _ => "",
            };
            if self.c.one_in(4) {
                let a = self.annotation(&vt);
                out.push_str(&format!("{pad}let {x} : {a} = {v}{comment}\n"));
            } else if self.c.one_in(4) {
                // The bound expression on a deeper line.
                out.push_str(&format!("{pad}let {x} =\n{pad}    {v}{comment}\n"));
            } else {
                out.push_str(&format!("{pad}let {x} = {v}{comment}\n"));
            }
            scope.push((x, vt));
        }
        let e = self.expr(t, depth, scope);
        scope.truncate(pushed);
        out.push_str(&pad);
        out.push_str(&e);
        out
    }

    fn any_type(&mut self) -> Ty {
        match self.c.weighted(&[6, 3, 2, 3, 1, 1, 2]) {
            0 => Ty::Double,
            1 => Ty::Index,
            2 => Ty::Bool,
            3 => Ty::Vector,
            4 => Ty::Matrix,
            5 => Ty::Fun,
            _ => Ty::pair(Ty::Double, Ty::Index),
        }
    }

    /// A variable of type `t` in scope and not shadowed.
    fn var(&mut self, t: &Ty, scope: &Scope) -> Option<String> {
        let mut found: Vec<&String> = Vec::new();
        for (i, (n, ty)) in scope.iter().enumerate() {
            let shadowed = scope[i + 1..].iter().any(|(m, _)| m == n);
            if ty == t && !shadowed {
                found.push(n);
            }
        }
        if found.is_empty() {
            return None;
        }
        Some(found[self.c.below(found.len())].clone())
    }

    /// A size for `build`, `ifold` and fills: a literal 0–4 or the
    /// length of an array in scope (Note: never an arbitrary Index
    /// expression, which inputs could make huge).
    fn size(&mut self, scope: &Scope) -> String {
        if self.c.one_in(3)
            && let Some(v) = self.var(&Ty::Vector, scope)
        {
            return format!("(length {v})");
        }
        format!("{}", self.c.below(5))
    }

    fn leaf(&mut self, t: &Ty, scope: &Scope) -> String {
        if !self.c.one_in(3)
            && let Some(v) = self.var(t, scope)
        {
            return v;
        }
        match t {
            Ty::Double => {
                let l = *self.c.pick(DOUBLE_LITS);
                l.to_string()
            }
            Ty::Index => format!("{}", self.c.below(4)),
            Ty::Bool => if self.c.one_in(2) { "true" } else { "false" }.to_string(),
            Ty::Vector => {
                let n = self.c.range(1, 4);
                let xs: Vec<String> = (0..n).map(|_| self.leaf(&Ty::Double, scope)).collect();
                format!("[{}]", xs.join(", "))
            }
            Ty::Matrix => {
                let (r, k) = (self.c.range(1, 3), self.c.range(1, 3));
                let rows: Vec<String> = (0..r)
                    .map(|_| {
                        let xs: Vec<String> =
                            (0..k).map(|_| self.leaf(&Ty::Double, scope)).collect();
                        format!("[{}]", xs.join(", "))
                    })
                    .collect();
                format!("[{}]", rows.join(", "))
            }
            Ty::Pair(a, b) => {
                let a = self.leaf(a, scope);
                let b = self.leaf(b, scope);
                format!("({a}, {b})")
            }
            Ty::Fun => match self.c.below(5) {
                0 => "square".into(),
                1 => "sin".into(),
                2 => "exp".into(),
                3 => "tanh".into(),
                _ => {
                    let x = self.fresh();
                    format!("(fun {x} -> {x} * 2.0)")
                }
            },
        }
    }

    /// An expression of type `t`, at most `depth` levels deep; near
    /// misses place their defect at node `defect_at`.
    fn expr(&mut self, t: &Ty, depth: u32, scope: &mut Scope) -> String {
        self.nodes += 1;
        if self.defect.is_none() && self.defect_at == Some(self.nodes) {
            return self.place_defect(t, scope);
        }
        if depth == 0 || self.c.one_in(4) {
            return self.leaf(t, scope);
        }
        let d = depth - 1;
        // Forms of every type.
        match self.c.below(10) {
            0 => {
                let vt = self.any_type();
                let v = self.expr(&vt, d, scope);
                let x = self.fresh();
                scope.push((x.clone(), vt.clone()));
                let b = self.expr(t, d, scope);
                scope.pop();
                return if self.c.one_in(3) {
                    let a = self.annotation(&vt);
                    format!("(let {x} : {a} = {v} in {b})")
                } else {
                    format!("(let {x} = {v} in {b})")
                };
            }
            1 if *t != Ty::Fun => {
                let c = self.expr(&Ty::Bool, d, scope);
                let a = self.expr(t, d, scope);
                let b = self.expr(t, d, scope);
                return format!("(if {c} then {a} else {b})");
            }
            2 if t.is_data() && !self.globals.is_empty() => {
                let i = self.c.below(self.globals.len());
                if self.globals[i].result == *t {
                    let ps = self.globals[i].params.clone();
                    let name = self.globals[i].name.clone();
                    let args: Vec<String> = ps.iter().map(|p| self.arg(p, d, scope)).collect();
                    return if args.is_empty() {
                        name
                    } else {
                        format!("({name} {})", args.join(" "))
                    };
                }
            }
            3 if *t != Ty::Pair(Box::new(Ty::Double), Box::new(Ty::Index)) => {
                // A projection of a pair.
                let other = if self.c.one_in(2) {
                    Ty::Index
                } else {
                    Ty::Double
                };
                if self.c.one_in(2) {
                    let p = self.expr(&Ty::pair(t.clone(), other), d, scope);
                    return format!("(fst {p})");
                }
                let p = self.expr(&Ty::pair(other, t.clone()), d, scope);
                return format!("(snd {p})");
            }
            _ => {}
        }
        match t {
            Ty::Double => self.double(d, scope),
            Ty::Index => self.index(d, scope),
            Ty::Bool => self.boolean(d, scope),
            Ty::Vector => self.vector(d, scope),
            Ty::Matrix => self.matrix(d, scope),
            Ty::Pair(a, b) => {
                if let Ty::Pair(b1, b2) = &**b
                    && self.c.one_in(2)
                {
                    let x = self.expr(a, d, scope);
                    let y = self.expr(b1, d, scope);
                    let z = self.expr(b2, d, scope);
                    return format!("({x}, {y}, {z})");
                }
                let x = self.expr(a, d, scope);
                let y = self.expr(b, d, scope);
                if self.c.one_in(3) {
                    format!("(pair {x} {y})")
                } else {
                    format!("({x}, {y})")
                }
            }
            Ty::Fun => self.function(d, scope),
        }
    }

    /// An argument of type `t` (parenthesised unless atomic).
    fn arg(&mut self, t: &Ty, d: u32, scope: &mut Scope) -> String {
        self.expr(t, d, scope)
    }

    fn double(&mut self, d: u32, scope: &mut Scope) -> String {
        match self.c.below(17) {
            0..=2 => {
                let op = *self.c.pick(&["+", "-", "*", "/", "**", "×"]);
                let a = self.expr(&Ty::Double, d, scope);
                let b = self.expr(&Ty::Double, d, scope);
                format!("({a} {op} {b})")
            }
            3 => {
                let a = self.expr(&Ty::Double, d, scope);
                format!("(-{a})")
            }
            4 => {
                let f = *self.c.pick(&["sin", "cos", "tan", "log", "exp", "sqrt"]);
                let a = self.expr(&Ty::Double, d, scope);
                format!("({f} {a})")
            }
            5 => {
                let i = self.expr(&Ty::Index, d, scope);
                format!("(toDouble {i})")
            }
            6 => {
                let v = self.expr(&Ty::Vector, d, scope);
                let i = self.expr(&Ty::Index, d, scope);
                match self.c.below(3) {
                    0 => format!("{v}[{i}]"),
                    1 => format!("{v}.[{i}]"),
                    _ => format!("(get {v} {i})"),
                }
            }
            7 => {
                let m = self.expr(&Ty::Matrix, d, scope);
                let (i, j) = (self.c.below(3), self.c.below(3));
                format!("{m}[{i}][{j}]")
            }
            8 => {
                let f = *self.c.pick(&[
                    "vectorSum",
                    "vectorMax",
                    "vectorMin",
                    "vectorNorm",
                    "vectorLogSumExp",
                ]);
                let v = self.expr(&Ty::Vector, d, scope);
                format!("({f} {v})")
            }
            9 => {
                let v = self.expr(&Ty::Vector, d, scope);
                let w = self.expr(&Ty::Vector, d, scope);
                format!("(vectorDot {v} {w})")
            }
            10 => {
                let f = *self.c.pick(&["matrixTrace", "matrixSum"]);
                let m = self.expr(&Ty::Matrix, d, scope);
                format!("({f} {m})")
            }
            11 => {
                let f = *self.c.pick(&["square", "abs", "tanh"]);
                let a = self.expr(&Ty::Double, d, scope);
                if self.c.one_in(2) {
                    let g = *self.c.pick(&["max", "min"]);
                    let b = self.expr(&Ty::Double, d, scope);
                    return format!("({g} {a} {b})");
                }
                format!("({f} {a})")
            }
            12 => {
                // ifold (fun s i -> body) init n
                let init = self.expr(&Ty::Double, d, scope);
                let n = self.size(scope);
                let (s, i) = (self.fresh(), self.fresh());
                scope.push((s.clone(), Ty::Double));
                scope.push((i.clone(), Ty::Index));
                let b = self.expr(&Ty::Double, d, scope);
                scope.truncate(scope.len() - 2);
                format!("(ifold (fun {s} {i} -> {b}) {init} {n})")
            }
            13 => {
                let f = self.expr(&Ty::Fun, d, scope);
                let a = self.expr(&Ty::Double, d, scope);
                format!("({f} {a})")
            }
            14 => {
                let op = *self.c.pick(&["(+)", "(-)", "(*)", "(/)", "( ** )", "(×)"]);
                let a = self.expr(&Ty::Double, d, scope);
                let b = self.expr(&Ty::Double, d, scope);
                format!("({op} {a} {b})")
            }
            15 => self.derivative(d, scope),
            _ => {
                // A local shadowing a prelude or primitive name.
                let name = *self
                    .c
                    .pick(&["sin", "length", "grad", "diff", "vectorSum", "pi"]);
                let v = self.expr(&Ty::Double, d, scope);
                let lit = self.leaf(&Ty::Double, &Vec::new());
                format!("(let {name} = {v} in ({name} * {lit}))")
            }
        }
    }

    /// `deriv` or an API form whose result is a Double.
    fn derivative(&mut self, d: u32, scope: &mut Scope) -> String {
        // `deriv` closes over data only (`deriv-free-function`): the body
        // sees no function variable (nor anything one shadows).
        let mut inner: Scope = scope
            .iter()
            .filter(|(n, t)| {
                t.first_order() && !scope.iter().any(|(m, u)| m == n && !u.first_order())
            })
            .cloned()
            .collect();
        let proj = if self.c.one_in(4) { "fst" } else { "snd" };
        match self.c.below(3) {
            0 => {
                if let Some(x) = self.var(&Ty::Double, &inner) {
                    let b = self.expr(&Ty::Double, d, &mut inner);
                    return format!("({proj} (deriv {b} {x}))");
                }
                let y = self.fresh();
                let a = self.expr(&Ty::Double, d, scope);
                inner.push((y.clone(), Ty::Double));
                let b = self.expr(&Ty::Double, d, &mut inner);
                format!("({proj} (diff (fun {y} -> {b}) {a}))")
            }
            1 => {
                let y = self.fresh();
                let a = self.expr(&Ty::Double, d, scope);
                inner.push((y.clone(), Ty::Double));
                let b = self.expr(&Ty::Double, d, &mut inner);
                format!("({proj} (diff (fun {y} -> {b}) {a}))")
            }
            _ => {
                // ∇f(v)[k] through `grad`.
                let y = self.fresh();
                let v = self.expr(&Ty::Vector, d, scope);
                inner.push((y.clone(), Ty::Vector));
                let b = self.expr(&Ty::Double, d, &mut inner);
                let k = self.c.below(3);
                format!("({proj} ((grad (fun {y} -> {b}) {v})[{k}]))")
            }
        }
    }

    fn index(&mut self, d: u32, scope: &mut Scope) -> String {
        match self.c.below(6) {
            0 => {
                let v = self.expr(&Ty::Vector, d, scope);
                format!("(length {v})")
            }
            1 | 2 => {
                let op = *self.c.pick(&["+", "-", "*", "/"]);
                let a = self.expr(&Ty::Index, d, scope);
                let b = self.c.below(4);
                format!("({a} {op} {b})")
            }
            3 => {
                let f = *self.c.pick(&["matrixRows", "matrixCols"]);
                let m = self.expr(&Ty::Matrix, d, scope);
                format!("({f} {m})")
            }
            4 => {
                let m = self.expr(&Ty::Matrix, d, scope);
                format!("(length {m})")
            }
            _ => self.leaf(&Ty::Index, scope),
        }
    }

    fn boolean(&mut self, d: u32, scope: &mut Scope) -> String {
        match self.c.below(5) {
            0 | 1 => {
                let op = *self.c.pick(&["<", ">", "<=", ">=", "=", "==", "<>", "!="]);
                let t = if self.c.one_in(3) {
                    Ty::Index
                } else {
                    Ty::Double
                };
                let a = self.expr(&t, d, scope);
                let b = self.expr(&t, d, scope);
                format!("({a} {op} {b})")
            }
            2 => {
                let op = if self.c.one_in(2) { "&&" } else { "||" };
                let a = self.expr(&Ty::Bool, d, scope);
                let b = self.expr(&Ty::Bool, d, scope);
                format!("({a} {op} {b})")
            }
            3 => {
                let a = self.expr(&Ty::Bool, d, scope);
                format!("(not {a})")
            }
            _ => self.leaf(&Ty::Bool, scope),
        }
    }

    fn vector(&mut self, d: u32, scope: &mut Scope) -> String {
        match self.c.below(14) {
            0 | 1 => {
                let n = self.size(scope);
                let i = self.fresh();
                scope.push((i.clone(), Ty::Index));
                let b = self.expr(&Ty::Double, d, scope);
                scope.pop();
                format!("(build {n} (fun {i} -> {b}))")
            }
            2 => {
                let v = self.expr(&Ty::Vector, d, scope);
                let x = self.fresh();
                scope.push((x.clone(), Ty::Double));
                let b = self.expr(&Ty::Double, d, scope);
                scope.pop();
                format!("(vectorMap {v} (fun {x} -> {b}))")
            }
            3 => {
                let f = *self
                    .c
                    .pick(&["vectorAdd", "vectorSub", "vectorEMul", "vectorConcat"]);
                let v = self.expr(&Ty::Vector, d, scope);
                let w = self.expr(&Ty::Vector, d, scope);
                format!("({f} {v} {w})")
            }
            4 => {
                let v = self.expr(&Ty::Vector, d, scope);
                let s = self.expr(&Ty::Double, d, scope);
                format!("(vectorSMul {v} {s})")
            }
            5 => {
                let n = self.size(scope);
                match self.c.below(3) {
                    0 => {
                        let x = self.expr(&Ty::Double, d, scope);
                        format!("(vectorFill {n} {x})")
                    }
                    1 => format!("(vectorZeros {n})"),
                    _ => {
                        let i = self.expr(&Ty::Index, d, scope);
                        format!("(vectorHot {n} {i})")
                    }
                }
            }
            6 => {
                let m = self.expr(&Ty::Matrix, d, scope);
                let i = self.expr(&Ty::Index, d, scope);
                format!("{m}[{i}]")
            }
            7 => {
                let m = self.expr(&Ty::Matrix, d, scope);
                let v = self.expr(&Ty::Vector, d, scope);
                format!("(matrixVectorMul {m} {v})")
            }
            8 => {
                let v = self.expr(&Ty::Vector, d, scope);
                let (s, e) = (self.c.below(3), self.c.below(4));
                format!("(vectorSlice {v} {s} {e})")
            }
            9 => {
                let v = self.expr(&Ty::Vector, d, scope);
                let w = self.expr(&Ty::Vector, d, scope);
                let (a, b) = (self.fresh(), self.fresh());
                scope.push((a.clone(), Ty::Double));
                scope.push((b.clone(), Ty::Double));
                let body = self.expr(&Ty::Double, d, scope);
                scope.truncate(scope.len() - 2);
                format!("(vectorMap2 {v} {w} (fun {a} {b} -> {body}))")
            }
            10 => {
                let v = self.expr(&Ty::Vector, d, scope);
                format!("(vectorNeg {v})")
            }
            11 => {
                // ∇f(v) through `grad`, as the spec writes it.
                let y = self.fresh();
                let v = self.expr(&Ty::Vector, d, scope);
                let mut inner: Scope = scope
                    .iter()
                    .filter(|(n, t)| {
                        t.first_order() && !scope.iter().any(|(m, u)| m == n && !u.first_order())
                    })
                    .cloned()
                    .collect();
                inner.push((y.clone(), Ty::Vector));
                let b = self.expr(&Ty::Double, d, &mut inner);
                format!("(vectorMap (grad (fun {y} -> {b}) {v}) snd)")
            }
            12 => {
                let v = self.expr(&Ty::Vector, d, scope);
                let w = self.expr(&Ty::Vector, d, scope);
                format!("(vectorCross {v} {w})")
            }
            _ => self.leaf(&Ty::Vector, scope),
        }
    }

    fn matrix(&mut self, d: u32, scope: &mut Scope) -> String {
        match self.c.below(9) {
            0 | 1 => {
                let n = self.size(scope);
                let i = self.fresh();
                scope.push((i.clone(), Ty::Index));
                let b = self.expr(&Ty::Vector, d, scope);
                scope.pop();
                format!("(build {n} (fun {i} -> {b}))")
            }
            2 => {
                let m = self.expr(&Ty::Matrix, d, scope);
                format!("(matrixTranspose {m})")
            }
            3 => {
                let f = *self.c.pick(&["matrixMul", "matrixAdd", "matrixSub"]);
                let a = self.expr(&Ty::Matrix, d, scope);
                let b = self.expr(&Ty::Matrix, d, scope);
                format!("({f} {a} {b})")
            }
            4 => {
                let n = self.size(scope);
                if self.c.one_in(2) {
                    let k = self.size(scope);
                    format!("(matrixZeros {n} {k})")
                } else {
                    format!("(matrixEye {n})")
                }
            }
            5 => {
                let v = self.expr(&Ty::Vector, d, scope);
                let w = self.expr(&Ty::Vector, d, scope);
                format!("(vectorOutProd {v} {w})")
            }
            6 => {
                let m = self.expr(&Ty::Matrix, d, scope);
                let s = self.expr(&Ty::Double, d, scope);
                format!("(matrixSMul {m} {s})")
            }
            7 => {
                let m = self.expr(&Ty::Matrix, d, scope);
                let r = self.fresh();
                scope.push((r.clone(), Ty::Vector));
                let b = self.expr(&Ty::Vector, d, scope);
                scope.pop();
                format!("(matrixMap {m} (fun {r} -> {b}))")
            }
            _ => self.leaf(&Ty::Matrix, scope),
        }
    }

    fn function(&mut self, d: u32, scope: &mut Scope) -> String {
        match self.c.below(5) {
            0 | 1 => {
                let x = self.fresh();
                scope.push((x.clone(), Ty::Double));
                let b = self.expr(&Ty::Double, d, scope);
                scope.pop();
                if self.c.one_in(2) {
                    format!("(fun ({x}: Double) -> {b})")
                } else {
                    format!("(fun {x} -> {b})")
                }
            }
            2 => {
                // A partial application of a two-argument lambda.
                let (a, b) = (self.fresh(), self.fresh());
                let e = self.expr(&Ty::Double, d, scope);
                scope.push((a.clone(), Ty::Double));
                scope.push((b.clone(), Ty::Double));
                let body = self.expr(&Ty::Double, d, scope);
                scope.truncate(scope.len() - 2);
                format!("((fun {a} {b} -> {body}) {e})")
            }
            3 => {
                let op = *self.c.pick(&["(+)", "(*)", "(-)", "max"]);
                let e = self.expr(&Ty::Double, d, scope);
                format!("({op} {e})")
            }
            _ => self.leaf(&Ty::Fun, scope),
        }
    }

    /// A near miss's defect in place of an expression of type `t`.
    fn place_defect(&mut self, t: &Ty, scope: &Scope) -> String {
        let mut scope = scope.clone();
        let (what, text) = match self.c.below(9) {
            0 => {
                // An expression of another type.
                let mut other = self.any_type();
                if other == *t {
                    other = if *t == Ty::Bool { Ty::Vector } else { Ty::Bool };
                }
                let e = self.expr(&other, 1, &mut scope);
                ("wrong type", e)
            }
            1 => {
                let name = match self.var(t, &scope) {
                    Some(v) => format!("{v}'"),
                    None => "undefinedName".to_string(),
                };
                ("unbound variable", name)
            }
            2 => {
                let n = *self
                    .c
                    .pick(&["vectorSun", "matrixMull", "sine", "lenght", "Build"]);
                ("misspelt name", format!("({n} 1.0)"))
            }
            3 => {
                let e = match self.c.below(4) {
                    0 => "(sin 1.0 2.0)".to_string(),
                    1 => "(vectorSum)".to_string(),
                    2 => "(build 3)".to_string(),
                    _ => "(ifold (fun s i -> s) 1.0)".to_string(),
                };
                ("wrong arity", e)
            }
            4 => {
                let e = match self.c.below(4) {
                    0 => "(snd (deriv 1.0 pi))".to_string(),
                    1 => "(let i = 2 in snd (deriv (toDouble i) i))".to_string(),
                    2 => "(let f = fun y -> y in snd (deriv (f 1.0) f))".to_string(),
                    _ => "(let x = 1.0 in snd (deriv x (x)))".to_string(),
                };
                ("bad deriv variable", e)
            }
            5 => {
                let e = self.leaf(t, &scope);
                let wrong = if *t == Ty::Index { "Double" } else { "Index" };
                (
                    "mismatched annotation",
                    format!("(let y : {wrong} = {e} in y)"),
                )
            }
            6 => {
                let e = self.leaf(t, &scope);
                let slip = match self.c.below(6) {
                    0 => format!("(let y = {e} y)"),
                    1 => format!("(if true then {e})"),
                    2 => format!("(({e})"),
                    3 => format!("(fun y => {e})"),
                    4 => format!("[{e},]"),
                    _ => format!("({e} +)"),
                };
                ("syntax slip", slip)
            }
            7 => ("recursive reference", "(main 1.0)".to_string()),
            _ => {
                let e = self.leaf(t, &scope);
                (
                    "a function where data is expected",
                    format!("(fun z -> {e})"),
                )
            }
        };
        self.defect = Some(what.to_string());
        text
    }

    /// A deeply nested body of type `t` (the entry's result).
    fn deep(&mut self, t: &Ty, scope: &mut Scope) -> String {
        let n = match self.c.below(4) {
            0 => self.c.range(100, 1000),
            1 => self.c.range(1000, 9000),
            2 => self.c.range(9990, 10010),
            _ => self.c.range(10_000, 40_000),
        };
        let leaf = self.leaf(t, scope);
        let x = self.leaf(&Ty::Double, scope);
        let (what, text) = match self.c.below(10) {
            0 => (
                "parentheses",
                format!("{}{leaf}{}", "(".repeat(n), ")".repeat(n)),
            ),
            1 => (
                "right-nested sums",
                format!("{}{x}{}", "(1.0 + ".repeat(n), ")".repeat(n)),
            ),
            2 => ("left-nested sums", format!("{x}{}", " + 1.0".repeat(n))),
            3 => ("prefix minus", format!("{}{x}", "-".repeat(n))),
            4 => (
                "inline lets",
                format!(
                    "let y0 = {x} in {}y{n}",
                    (1..=n)
                        .map(|k| format!("let y{k} = y{} + 1.0 in ", k - 1))
                        .collect::<String>()
                ),
            ),
            5 => (
                "layout lets",
                format!(
                    "  let y0 = {x}\n{}  y{n}",
                    (1..=n)
                        .map(|k| format!("  let y{k} = y{} * 0.5\n", k - 1))
                        .collect::<String>()
                ),
            ),
            6 => (
                "conditionals",
                format!("{}{x}{}", "if true then ".repeat(n), " else 0.0".repeat(n)),
            ),
            7 => (
                "applications",
                format!("{}{x}{}", "sin (".repeat(n), ")".repeat(n)),
            ),
            8 => (
                "array literals",
                format!("{}{x}{}", "[".repeat(n), "]".repeat(n)),
            ),
            _ => (
                "lambdas",
                format!(
                    "({}{x}){}",
                    (0..n).map(|k| format!("fun z{k} -> ")).collect::<String>(),
                    " 1.0".repeat(n)
                ),
            ),
        };
        self.defect = Some(format!("{what} nested {n} deep"));
        text
    }
}
