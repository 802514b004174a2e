//! Recursive-descent parser from tokens to the core IR, desugaring as it
//! goes (spec/syntax.md, "Desugaring"):
//!
//! - `fun x y -> e` to nested unary lambdas, `f a b` to nested applications;
//! - `let f x = e` to `let f = fun x -> e`;
//! - operators and named primitives (`sin`, `build`, `fst`, ...) applied to
//!   enough arguments to [`Expr::Prim`]; a primitive used with too few
//!   arguments, or as a value (`(+)`, `pair`), to an eta-expanded lambda;
//! - `a && b` to `if a then b else false`, `a || b` to `if a then true else b`;
//! - `(a, b, c)` to `(a, (b, c))`; `e[i]` and `e.[i]` to `get e i`;
//! - `-` applied to a literal to a negative literal.
//!
//! Layout: a token that starts a line at or left of the column of the
//! innermost enclosing layout `let` ends the current expression (the offside
//! rule); `then`, `else`, `in`, `)`, `]` and `,` may sit exactly on that
//! column. Nesting is limited to [`MAX_NESTING`] levels so that no later
//! recursive pass can overflow its stack.

use std::collections::HashSet;
use std::rc::Rc;

use cranelift_entity::SecondaryMap;

use super::ParseError;
use super::lexer::{Tok, Token, lex};
use crate::diagnostic::{SourceId, Span};
use crate::ir::{Def, DiffOp, Expr, ExprId, Lit, Name, Prim, Program, Type};

/// The deepest expression tree (and the deepest parser recursion) accepted.
pub const MAX_NESTING: u32 = 10_000;

/// Parses `src` and appends its definitions to `prog`.
pub fn parse_into(
    prog: &mut Program,
    src: &str,
    source: SourceId,
    prelude: bool,
) -> Result<(), ParseError> {
    let toks = lex(src, source)?;
    let globals = prog.defs.iter().map(|d| d.name.clone()).collect();
    let mut p = Parser {
        toks,
        pos: 0,
        prog,
        prelude,
        locals: Vec::new(),
        globals,
        limits: Vec::new(),
        allow: usize::MAX,
        recursion: 0,
        depth: SecondaryMap::new(),
        fresh: 0,
    };
    p.program()
}

/// What an atom turned out to be: an expression, or a primitive named by an
/// unshadowed identifier or operator section, whose application is decided
/// once its arguments are known.
#[derive(Clone, Copy)]
enum Head {
    Expr(ExprId),
    Prim(Prim, Span),
    /// `(&&)` / `(||)`: desugared to `if`, so they have no `Prim`.
    Logic(bool, Span),
    /// `deriv e x`.
    Deriv(Span),
    /// `diff`, `vdiff`, `mdiff`, `grad`, `jacob`, `mgrad` applied to `f x`:
    /// `let x' = x in deriv (f x') x'` (seed 001 Fig. 6, Table 2).
    Api(Span),
    /// `jvp f x t`, `vjp f x w` (syntax.md §6).
    Diff(DiffOp, Span),
}

/// Every variable name occurring in `e`.
fn names_in(prog: &Program, e: ExprId) -> HashSet<Name> {
    let mut out = HashSet::new();
    let mut work = vec![e];
    while let Some(e) = work.pop() {
        match prog.expr(e) {
            Expr::Var(x) | Expr::Lam { param: x, .. } | Expr::Let { name: x, .. } => {
                out.insert(x.clone());
            }
            _ => {}
        }
        work.extend(prog.expr(e).children());
    }
    out
}

/// The differentiation API of seed 001 Fig. 6 and Table 2. All six are
/// `deriv` of an application; they differ only in the types they accept.
const AD_API: [&str; 6] = ["diff", "vdiff", "mdiff", "grad", "jacob", "mgrad"];

struct Parser<'p> {
    toks: Vec<Token>,
    pos: usize,
    prog: &'p mut Program,
    prelude: bool,
    locals: Vec<Name>,
    globals: HashSet<Name>,
    /// Offside columns of the enclosing layout blocks.
    limits: Vec<u32>,
    /// A token index exempt from the offside rule (the first token of a
    /// layout `let` body, which sits on the `let`'s own column).
    allow: usize,
    recursion: u32,
    depth: SecondaryMap<ExprId, u32>,
    /// Counter for the variables the AD API's desugaring binds.
    fresh: u32,
}

type PResult<T> = Result<T, ParseError>;

impl Parser<'_> {
    // ----- tokens and layout -------------------------------------------------

    fn cur(&self) -> &Token {
        &self.toks[self.pos]
    }

    fn is_offside(&self, idx: usize) -> bool {
        let t = &self.toks[idx];
        if idx == self.allow || !t.line_start || t.tok == Tok::Eof {
            return false;
        }
        let limit = self.limits.last().copied().unwrap_or(0);
        if t.col < limit {
            return true;
        }
        t.col == limit
            && !matches!(
                t.tok,
                Tok::Then | Tok::Else | Tok::In | Tok::RParen | Tok::RBracket | Tok::Comma
            )
    }

    /// The current token, or `Eof` when it is offside.
    fn peek(&self) -> &Tok {
        if self.is_offside(self.pos) {
            &Tok::Eof
        } else {
            &self.cur().tok
        }
    }

    fn advance(&mut self) -> Token {
        let t = self.toks[self.pos].clone();
        if t.tok != Tok::Eof {
            self.pos += 1;
        }
        t
    }

    fn error_here(&self, expected: &str) -> ParseError {
        let t = self.cur();
        if t.tok == Tok::Eof {
            // Point just after the last token, not at the empty end of file.
            let span = match self.pos.checked_sub(1) {
                Some(p) => {
                    let s = self.toks[p].span;
                    crate::diagnostic::Span { start: s.end, ..s }
                }
                None => t.span,
            };
            ParseError::UnexpectedEof {
                expected: expected.to_string(),
                span,
            }
        } else if self.is_offside(self.pos) {
            ParseError::Unexpected {
                expected: expected.to_string(),
                found: format!(
                    "{} at column {}, which ends the enclosing layout block",
                    t.tok.describe(),
                    t.col
                ),
                span: t.span,
            }
        } else {
            ParseError::Unexpected {
                expected: expected.to_string(),
                found: t.tok.describe(),
                span: t.span,
            }
        }
    }

    fn expect(&mut self, tok: Tok, expected: &str) -> PResult<Token> {
        if *self.peek() == tok {
            Ok(self.advance())
        } else {
            Err(self.error_here(expected))
        }
    }

    fn ident(&mut self, expected: &str) -> PResult<(Name, Span)> {
        match self.peek().clone() {
            Tok::Ident(name) => {
                let t = self.advance();
                Ok((name, t.span))
            }
            _ => Err(self.error_here(expected)),
        }
    }

    fn span_from(&self, start: Span) -> Span {
        let end = self.toks[self.pos.saturating_sub(1)].span;
        start.to(end)
    }

    // ----- node construction -------------------------------------------------

    fn mk(&mut self, e: Expr, span: Span) -> PResult<ExprId> {
        let d = 1 + e
            .children()
            .iter()
            .map(|c| self.depth[*c])
            .max()
            .unwrap_or(0);
        if d > MAX_NESTING {
            return Err(ParseError::TooDeep {
                limit: MAX_NESTING,
                span,
            });
        }
        let id = self.prog.add(e, span);
        self.depth[id] = d;
        Ok(id)
    }

    fn prim(&mut self, op: Prim, args: Vec<ExprId>, span: Span) -> PResult<ExprId> {
        self.mk(
            Expr::Prim {
                op,
                args: args.into(),
            },
            span,
        )
    }

    fn lit(&mut self, l: Lit, span: Span) -> PResult<ExprId> {
        self.mk(Expr::Lit(l), span)
    }

    fn enter(&mut self) -> PResult<()> {
        self.recursion += 1;
        if self.recursion > MAX_NESTING {
            return Err(ParseError::TooDeep {
                limit: MAX_NESTING,
                span: self.cur().span,
            });
        }
        Ok(())
    }

    fn is_bound(&self, name: &str) -> bool {
        self.locals.iter().any(|l| &**l == name) || self.globals.contains(name)
    }

    // ----- program -----------------------------------------------------------

    fn program(&mut self) -> PResult<()> {
        while self.cur().tok != Tok::Eof {
            if self.cur().tok != Tok::Let {
                return Err(ParseError::Unexpected {
                    expected: "a top-level definition `let name = ...`".to_string(),
                    found: self.cur().tok.describe(),
                    span: self.cur().span,
                });
            }
            let let_tok = self.advance();
            let (name, name_span) = self.ident("a name after `let`")?;
            self.limits.push(let_tok.col);
            let (body, ann) = self.binding_rhs_ann(let_tok.span)?;
            self.limits.pop();
            let t = self.cur();
            if t.tok != Tok::Eof && !(t.tok == Tok::Let && t.line_start) {
                return Err(ParseError::Unexpected {
                    expected: "a new top-level definition or the end of the file".to_string(),
                    found: t.tok.describe(),
                    span: t.span,
                });
            }
            self.globals.insert(name.clone());
            self.prog.defs.push(Def {
                name,
                span: name_span,
                ann,
                body,
                prelude: self.prelude,
            });
        }
        Ok(())
    }

    /// After `let name`: parameters, an optional annotation, `=` and the
    /// bound expression, desugared to lambdas when there are parameters.
    /// Returns the bound expression and the annotation of the name.
    fn binding_rhs_ann(&mut self, start: Span) -> PResult<(ExprId, Option<Type>)> {
        let params = self.params()?;
        let mut ann = None;
        if *self.peek() == Tok::Colon {
            let colon = self.advance();
            if !params.is_empty() {
                return Err(ParseError::Unsupported {
                    what: "a return-type annotation on a function definition (annotate the parameters instead)".to_string(),
                    span: colon.span,
                });
            }
            ann = Some(self.ty()?);
        }
        self.expect(Tok::Equals, "`=`")?;
        let n = params.len();
        for (p, _) in &params {
            self.locals.push(p.clone());
        }
        let body = self.expr();
        self.locals.truncate(self.locals.len() - n);
        let mut body = body?;
        let span = self.span_from(start);
        for (p, a) in params.into_iter().rev() {
            body = self.mk(
                Expr::Lam {
                    param: p,
                    ann: a,
                    body,
                },
                span,
            )?;
        }
        Ok((body, ann))
    }

    /// Zero or more lambda parameters: `x` or `(x: Type)`.
    fn params(&mut self) -> PResult<Vec<(Name, Option<Type>)>> {
        let mut out = Vec::new();
        loop {
            match self.peek().clone() {
                Tok::Ident(name) => {
                    self.advance();
                    out.push((name, None));
                }
                Tok::LParen => {
                    self.advance();
                    let (name, _) = self.ident("a parameter name")?;
                    self.expect(Tok::Colon, "`:` and a type")?;
                    let t = self.ty()?;
                    self.expect(Tok::RParen, "`)`")?;
                    out.push((name, Some(t)));
                }
                _ => return Ok(out),
            }
        }
    }

    // ----- types -------------------------------------------------------------

    fn ty(&mut self) -> PResult<Type> {
        let a = self.ty_prod()?;
        if *self.peek() == Tok::Arrow {
            self.advance();
            let b = self.ty()?;
            return Ok(Type::fun(a, b));
        }
        Ok(a)
    }

    fn ty_prod(&mut self) -> PResult<Type> {
        let a = self.ty_atom()?;
        if *self.peek() == Tok::Star {
            self.advance();
            let b = self.ty_prod()?;
            return Ok(Type::pair(a, b));
        }
        Ok(a)
    }

    fn ty_atom(&mut self) -> PResult<Type> {
        if *self.peek() == Tok::LParen {
            self.advance();
            let t = self.ty()?;
            self.expect(Tok::RParen, "`)`")?;
            return Ok(t);
        }
        let (name, span) = self.ident("a type")?;
        let d = || Type::Double;
        let dd = || Type::pair(Type::Double, Type::Double);
        Ok(match &*name {
            "Double" => d(),
            "Index" => Type::Index,
            "Bool" => Type::Bool,
            "Vector" => Type::array(d()),
            "Matrix" => Type::array(Type::array(d())),
            "DoubleD" => dd(),
            "VectorD" => Type::array(dd()),
            "MatrixD" => Type::array(Type::array(dd())),
            "Array" => {
                self.expect(Tok::Lt, "`<` after `Array`")?;
                let t = self.ty()?;
                self.expect(Tok::Gt, "`>`")?;
                Type::array(t)
            }
            _ => {
                return Err(ParseError::UnknownType {
                    name: name.to_string(),
                    span,
                });
            }
        })
    }

    // ----- expressions -------------------------------------------------------

    fn expr(&mut self) -> PResult<ExprId> {
        self.enter()?;
        let r = match self.peek() {
            Tok::Fun => self.lambda(),
            Tok::Let => self.let_expr(),
            Tok::If => self.if_expr(),
            _ => self.or_expr(),
        };
        self.recursion -= 1;
        r
    }

    fn lambda(&mut self) -> PResult<ExprId> {
        let start = self.advance().span;
        let params = self.params()?;
        if params.is_empty() {
            return Err(self.error_here("a parameter after `fun`"));
        }
        self.expect(Tok::Arrow, "`->`")?;
        let n = params.len();
        for (p, _) in &params {
            self.locals.push(p.clone());
        }
        let body = self.expr();
        self.locals.truncate(self.locals.len() - n);
        let mut body = body?;
        let span = self.span_from(start);
        for (p, a) in params.into_iter().rev() {
            body = self.mk(
                Expr::Lam {
                    param: p,
                    ann: a,
                    body,
                },
                span,
            )?;
        }
        Ok(body)
    }

    fn let_expr(&mut self) -> PResult<ExprId> {
        let let_tok = self.advance();
        let (name, _) = self.ident("a name after `let`")?;
        self.limits.push(let_tok.col);
        let value = self.binding_rhs_ann(let_tok.span);
        self.limits.pop();
        let (value, ann) = value?;
        let body = if *self.peek() == Tok::In {
            self.advance();
            self.locals.push(name.clone());
            let b = self.expr();
            self.locals.pop();
            b?
        } else {
            let t = self.cur();
            if t.line_start && t.col == let_tok.col && t.tok != Tok::Eof {
                self.limits.push(let_tok.col);
                self.allow = self.pos;
                self.locals.push(name.clone());
                let b = self.expr();
                self.locals.pop();
                self.limits.pop();
                b?
            } else if t.tok == Tok::Eof || self.is_offside(self.pos) {
                return Err(ParseError::MissingLetBody { span: let_tok.span });
            } else {
                return Err(self.error_here("`in` or a new line"));
            }
        };
        let span = self.span_from(let_tok.span);
        self.mk(
            Expr::Let {
                name,
                ann,
                value,
                body,
            },
            span,
        )
    }

    fn if_expr(&mut self) -> PResult<ExprId> {
        let start = self.advance().span;
        let cond = self.expr()?;
        self.expect(Tok::Then, "`then`")?;
        let then_ = self.expr()?;
        self.expect(Tok::Else, "`else` (every `if` needs one)")?;
        let else_ = self.expr()?;
        let span = self.span_from(start);
        self.mk(Expr::If { cond, then_, else_ }, span)
    }

    fn or_expr(&mut self) -> PResult<ExprId> {
        let mut lhs = self.and_expr()?;
        while *self.peek() == Tok::OrOr {
            self.advance();
            let rhs = self.and_expr()?;
            let span = self.prog.span(lhs).to(self.prog.span(rhs));
            let t = self.lit(Lit::Bool(true), span)?;
            lhs = self.mk(
                Expr::If {
                    cond: lhs,
                    then_: t,
                    else_: rhs,
                },
                span,
            )?;
        }
        Ok(lhs)
    }

    fn and_expr(&mut self) -> PResult<ExprId> {
        let mut lhs = self.cmp_expr()?;
        while *self.peek() == Tok::AndAnd {
            self.advance();
            let rhs = self.cmp_expr()?;
            let span = self.prog.span(lhs).to(self.prog.span(rhs));
            let f = self.lit(Lit::Bool(false), span)?;
            lhs = self.mk(
                Expr::If {
                    cond: lhs,
                    then_: rhs,
                    else_: f,
                },
                span,
            )?;
        }
        Ok(lhs)
    }

    fn cmp_expr(&mut self) -> PResult<ExprId> {
        let mut lhs = self.add_expr()?;
        loop {
            let op = match self.peek() {
                Tok::Lt => Prim::Lt,
                Tok::Gt => Prim::Gt,
                Tok::Le => Prim::Le,
                Tok::Ge => Prim::Ge,
                Tok::Equals | Tok::EqEq => Prim::Eq,
                Tok::NotEq => Prim::Ne,
                _ => return Ok(lhs),
            };
            self.advance();
            let rhs = self.add_expr()?;
            let span = self.prog.span(lhs).to(self.prog.span(rhs));
            lhs = self.prim(op, vec![lhs, rhs], span)?;
        }
    }

    fn add_expr(&mut self) -> PResult<ExprId> {
        let mut lhs = self.mul_expr()?;
        loop {
            let op = match self.peek() {
                Tok::Plus => Prim::Add,
                Tok::Minus => Prim::Sub,
                _ => return Ok(lhs),
            };
            self.advance();
            let rhs = self.mul_expr()?;
            let span = self.prog.span(lhs).to(self.prog.span(rhs));
            lhs = self.prim(op, vec![lhs, rhs], span)?;
        }
    }

    fn mul_expr(&mut self) -> PResult<ExprId> {
        let mut lhs = self.unary()?;
        loop {
            let op = match self.peek() {
                Tok::Star => Prim::Mul,
                Tok::Slash => Prim::Div,
                _ => return Ok(lhs),
            };
            self.advance();
            let rhs = self.unary()?;
            let span = self.prog.span(lhs).to(self.prog.span(rhs));
            lhs = self.prim(op, vec![lhs, rhs], span)?;
        }
    }

    fn unary(&mut self) -> PResult<ExprId> {
        match self.peek() {
            Tok::Minus => {
                self.enter()?;
                let start = self.advance().span;
                let operand = self.unary();
                self.recursion -= 1;
                let operand = operand?;
                let span = start.to(self.prog.span(operand));
                match *self.prog.expr(operand) {
                    Expr::Lit(Lit::Int(n)) => self.lit(Lit::Int(-n), span),
                    Expr::Lit(Lit::Double(x)) => self.lit(Lit::Double(-x), span),
                    _ => self.prim(Prim::Neg, vec![operand], span),
                }
            }
            // `x * if c then 1 else 0`: these extend as far right as possible.
            Tok::Fun | Tok::Let | Tok::If => self.expr(),
            _ => self.pow_expr(),
        }
    }

    fn pow_expr(&mut self) -> PResult<ExprId> {
        let base = self.app_expr()?;
        if *self.peek() == Tok::StarStar {
            self.advance();
            let exp = self.unary()?;
            let span = self.prog.span(base).to(self.prog.span(exp));
            return self.prim(Prim::Pow, vec![base, exp], span);
        }
        Ok(base)
    }

    fn starts_atom(&self) -> bool {
        matches!(
            self.peek(),
            Tok::Ident(_) | Tok::Int(_) | Tok::Float(_) | Tok::True | Tok::False | Tok::LParen
        ) || (*self.peek() == Tok::LBracket)
    }

    fn app_expr(&mut self) -> PResult<ExprId> {
        let head = self.postfix()?;
        let mut args = Vec::new();
        while self.starts_atom() {
            let a = self.postfix()?;
            let a = self.head_expr(a)?;
            args.push(a);
        }
        self.apply(head, args)
    }

    /// Applies a head to its arguments, saturating primitives (see module doc).
    fn apply(&mut self, head: Head, args: Vec<ExprId>) -> PResult<ExprId> {
        let (mut e, rest) = match head {
            Head::Expr(e) => (e, args),
            Head::Diff(op, span) if args.len() >= 3 => {
                let mut args = args;
                let rest = args.split_off(3);
                let span = args.iter().fold(span, |s, a| s.to(self.prog.span(*a)));
                let e = self.mk(
                    Expr::Diff {
                        op,
                        fun: args[0],
                        at: args[1],
                        dir: args[2],
                    },
                    span,
                )?;
                (e, rest)
            }
            Head::Deriv(span) | Head::Api(span) if args.len() >= 2 => {
                let mut args = args;
                let rest = args.split_off(2);
                let e = match head {
                    Head::Api(_) => self.ad_api(args[0], args[1], span)?,
                    _ => self.deriv(args[0], args[1], span)?,
                };
                (e, rest)
            }
            // An operator applied to fewer arguments than it takes is a
            // function of the rest: `diff f` is `fun x -> diff f x`.
            Head::Diff(_, span) | Head::Api(span) => {
                let want = if matches!(head, Head::Diff(..)) { 3 } else { 2 };
                let mut used = HashSet::new();
                for a in &args {
                    used.extend(names_in(self.prog, *a));
                }
                let mut missing = Vec::new();
                while args.len() + missing.len() < want {
                    let name: Name = loop {
                        self.fresh += 1;
                        let n: Name = Rc::from(format!("x'ad{}", self.fresh));
                        if !used.contains(&n) {
                            break n;
                        }
                    };
                    missing.push(name);
                }
                let mut full = args;
                for n in &missing {
                    full.push(self.mk(Expr::Var(n.clone()), span)?);
                }
                let mut e = self.apply(head, full)?;
                for n in missing.into_iter().rev() {
                    e = self.mk(
                        Expr::Lam {
                            param: n,
                            ann: None,
                            body: e,
                        },
                        span,
                    )?;
                }
                (e, Vec::new())
            }
            Head::Prim(p, span) if args.len() >= p.arity() => {
                let k = p.arity();
                let mut args = args;
                let rest = args.split_off(k);
                let span = args.iter().fold(span, |s, a| s.to(self.prog.span(*a)));
                (self.prim(p, args, span)?, rest)
            }
            head => (self.head_expr(head)?, args),
        };
        for a in rest {
            let span = self.prog.span(e).to(self.prog.span(a));
            e = self.mk(Expr::App { fun: e, arg: a }, span)?;
        }
        Ok(e)
    }

    /// Turns a head into an expression, eta-expanding a bare primitive:
    /// `sin` becomes `fun x1 -> sin x1`. The lambda's body mentions only its
    /// own parameters, so the generated names cannot capture anything.
    fn head_expr(&mut self, head: Head) -> PResult<ExprId> {
        match head {
            Head::Expr(e) => Ok(e),
            Head::Prim(p, span) => {
                let names: Vec<Name> = (1..=p.arity()).map(|i| Rc::from(format!("x{i}"))).collect();
                let mut args = Vec::new();
                for n in &names {
                    args.push(self.mk(Expr::Var(n.clone()), span)?);
                }
                let mut body = self.prim(p, args, span)?;
                for n in names.into_iter().rev() {
                    body = self.mk(
                        Expr::Lam {
                            param: n,
                            ann: None,
                            body,
                        },
                        span,
                    )?;
                }
                Ok(body)
            }
            Head::Deriv(span) => Err(ParseError::Unsupported {
                what: "`deriv` without its two arguments (write `deriv e x`, x a variable)"
                    .to_string(),
                span,
            }),
            Head::Api(..) | Head::Diff(..) => self.apply(head, Vec::new()),
            Head::Logic(is_and, span) => {
                let a = self.mk(Expr::Var(Rc::from("x1")), span)?;
                let b = self.mk(Expr::Var(Rc::from("x2")), span)?;
                let body = if is_and {
                    let f = self.lit(Lit::Bool(false), span)?;
                    Expr::If {
                        cond: a,
                        then_: b,
                        else_: f,
                    }
                } else {
                    let t = self.lit(Lit::Bool(true), span)?;
                    Expr::If {
                        cond: a,
                        then_: t,
                        else_: b,
                    }
                };
                let body = self.mk(body, span)?;
                let inner = self.mk(
                    Expr::Lam {
                        param: Rc::from("x2"),
                        ann: None,
                        body,
                    },
                    span,
                )?;
                self.mk(
                    Expr::Lam {
                        param: Rc::from("x1"),
                        ann: None,
                        body: inner,
                    },
                    span,
                )
            }
        }
    }

    fn postfix(&mut self) -> PResult<Head> {
        let mut head = self.atom()?;
        loop {
            let t = self.peek().clone();
            let index = match t {
                Tok::LBracket => !self.cur().space_before,
                Tok::DotLBracket => true,
                _ => false,
            };
            if !index {
                return Ok(head);
            }
            self.advance();
            let arr = self.head_expr(head)?;
            let i = self.expr()?;
            self.expect(Tok::RBracket, "`]`")?;
            let span = self.span_from(self.prog.span(arr));
            head = Head::Expr(self.prim(Prim::Get, vec![arr, i], span)?);
        }
    }

    fn atom(&mut self) -> PResult<Head> {
        let t = self.cur().clone();
        match self.peek().clone() {
            Tok::Ident(name) => {
                self.advance();
                if !self.is_bound(&name) {
                    if let Some(p) = Prim::from_ident(&name) {
                        return Ok(Head::Prim(p, t.span));
                    }
                    if &*name == "deriv" {
                        return Ok(Head::Deriv(t.span));
                    }
                    if &*name == "jvp" {
                        return Ok(Head::Diff(DiffOp::Jvp, t.span));
                    }
                    if &*name == "vjp" {
                        return Ok(Head::Diff(DiffOp::Vjp, t.span));
                    }
                    if AD_API.contains(&&*name) {
                        return Ok(Head::Api(t.span));
                    }
                }
                Ok(Head::Expr(self.mk(Expr::Var(name), t.span)?))
            }
            Tok::Int(n) => {
                self.advance();
                Ok(Head::Expr(self.lit(Lit::Int(n), t.span)?))
            }
            Tok::Float(x) => {
                self.advance();
                Ok(Head::Expr(self.lit(Lit::Double(x), t.span)?))
            }
            Tok::True | Tok::False => {
                self.advance();
                Ok(Head::Expr(self.lit(Lit::Bool(t.tok == Tok::True), t.span)?))
            }
            Tok::LParen => {
                self.advance();
                if let Some(h) = self.operator_section(t.span)? {
                    return Ok(h);
                }
                if *self.peek() == Tok::RParen {
                    return Err(ParseError::Unsupported {
                        what: "the unit value `()`".to_string(),
                        span: self.span_from(t.span).to(self.cur().span),
                    });
                }
                let mut items = vec![self.expr()?];
                while *self.peek() == Tok::Comma {
                    self.advance();
                    items.push(self.expr()?);
                }
                self.expect(Tok::RParen, "`)`")?;
                let span = self.span_from(t.span);
                if items.len() == 1 {
                    // Keep the outer span: errors about `(e)` point at `e`.
                    return Ok(Head::Expr(items[0]));
                }
                let mut e = items.pop().expect("at least two items");
                while let Some(a) = items.pop() {
                    e = self.prim(Prim::Pair, vec![a, e], span)?;
                }
                Ok(Head::Expr(e))
            }
            Tok::LBracket => {
                self.advance();
                let mut items = Vec::new();
                if *self.peek() != Tok::RBracket {
                    items.push(self.expr()?);
                    while *self.peek() == Tok::Comma {
                        self.advance();
                        items.push(self.expr()?);
                    }
                }
                self.expect(Tok::RBracket, "`,` or `]`")?;
                let span = self.span_from(t.span);
                Ok(Head::Expr(self.mk(Expr::Array(items.into()), span)?))
            }
            _ => Err(self.error_here("an expression")),
        }
    }

    /// `deriv body x`, where `x` must be a variable.
    fn deriv(&mut self, body: ExprId, wrt: ExprId, span: Span) -> PResult<ExprId> {
        let Expr::Var(x) = self.prog.expr(wrt).clone() else {
            return Err(ParseError::Unexpected {
                expected: "a variable after `deriv e` (the independent variable)".to_string(),
                found: "an expression".to_string(),
                span: self.prog.span(wrt),
            });
        };
        let span = span.to(self.prog.span(wrt));
        self.mk(Expr::Deriv { body, wrt: x }, span)
    }

    /// `grad f x` and friends: `let x'adN = x in deriv (f x'adN) x'adN`.
    fn ad_api(&mut self, f: ExprId, x: ExprId, span: Span) -> PResult<ExprId> {
        // The name is in scope in `f`, so it must not occur there.
        let used = names_in(self.prog, f);
        let name: Name = loop {
            self.fresh += 1;
            let n: Name = Rc::from(format!("x'ad{}", self.fresh));
            if !used.contains(&n) {
                break n;
            }
        };
        let span = span.to(self.prog.span(x));
        let v1 = self.mk(Expr::Var(name.clone()), span)?;
        let app = self.mk(Expr::App { fun: f, arg: v1 }, span)?;
        let d = self.mk(
            Expr::Deriv {
                body: app,
                wrt: name.clone(),
            },
            span,
        )?;
        self.mk(
            Expr::Let {
                name,
                ann: None,
                value: x,
                body: d,
            },
            span,
        )
    }

    /// `(+)`, `(*)`, `(<=)`, `(&&)`, ...: an operator used as a function.
    fn operator_section(&mut self, start: Span) -> PResult<Option<Head>> {
        let Some(next) = self.toks.get(self.pos + 1) else {
            return Ok(None);
        };
        if next.tok != Tok::RParen {
            return Ok(None);
        }
        let head = match self.peek() {
            Tok::Plus => Head::Prim(Prim::Add, start),
            Tok::Minus => Head::Prim(Prim::Sub, start),
            Tok::Star => Head::Prim(Prim::Mul, start),
            Tok::Slash => Head::Prim(Prim::Div, start),
            Tok::StarStar => Head::Prim(Prim::Pow, start),
            Tok::Lt => Head::Prim(Prim::Lt, start),
            Tok::Gt => Head::Prim(Prim::Gt, start),
            Tok::Le => Head::Prim(Prim::Le, start),
            Tok::Ge => Head::Prim(Prim::Ge, start),
            Tok::Equals | Tok::EqEq => Head::Prim(Prim::Eq, start),
            Tok::NotEq => Head::Prim(Prim::Ne, start),
            Tok::AndAnd => Head::Logic(true, start),
            Tok::OrOr => Head::Logic(false, start),
            _ => return Ok(None),
        };
        self.advance();
        let close = self.advance();
        let span = start.to(close.span);
        Ok(Some(match head {
            Head::Prim(p, _) => Head::Prim(p, span),
            Head::Logic(b, _) => Head::Logic(b, span),
            h => h,
        }))
    }
}
