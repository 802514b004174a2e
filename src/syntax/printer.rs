//! Pretty-printer from the core IR back to concrete syntax.
//!
//! The output re-parses to the same core (`parse(print(p)) == p`, tested as
//! a property). Layout invariant that makes this hold under the offside
//! rule: every `let` starts a line, its bound expression is either on the
//! same line or on lines indented two columns deeper, and its body follows
//! `in` on the next line at the `let`'s own column. Small expressions
//! without `let` are printed on one line.

use crate::ir::prim::{Fixity, Level};
use crate::ir::{Expr, ExprId, Lit, Prim, Program};

/// Prints the user's definitions (not the prelude's) as a source file.
pub fn print_program(prog: &Program) -> String {
    let mut out = String::new();
    for d in prog.defs.iter().filter(|d| !d.prelude) {
        let p = Printer { prog };
        out.push_str("let ");
        out.push_str(&d.name);
        if let Some(t) = &d.ann {
            out.push_str(&format!(" : {t}"));
        }
        out.push_str(" =");
        out.push_str(&p.rhs(d.body, 0));
        out.push('\n');
    }
    out
}

/// Prints one expression at indentation 0.
pub fn print_expr(prog: &Program, e: ExprId) -> String {
    Printer { prog }.line(e, 0)
}

// Precedence levels, loosest first.
const OPEN: u8 = 0; // fun, let, if: extend as far right as possible
const CMP: u8 = 3;
const ADD: u8 = 4;
const MUL: u8 = 5;
const NEG: u8 = 6;
const POW: u8 = 7;
const APP: u8 = 8;
const POSTFIX: u8 = 9;
const ATOM: u8 = 10;

struct Printer<'a> {
    prog: &'a Program,
}

fn spaces(n: usize) -> String {
    " ".repeat(n)
}

impl Printer<'_> {
    /// Large or containing `let`: printed over several lines.
    fn broken(&self, e: ExprId) -> bool {
        let mut budget = 24usize;
        let mut work = vec![e];
        while let Some(e) = work.pop() {
            let x = self.prog.expr(e);
            if matches!(x, Expr::Let { .. }) {
                return true;
            }
            if budget == 0 {
                return true;
            }
            budget -= 1;
            work.extend(x.children());
        }
        false
    }

    fn prec(&self, e: ExprId) -> u8 {
        match self.prog.expr(e) {
            Expr::Var(_) => ATOM,
            Expr::Lit(Lit::Int(n)) if *n < 0 => NEG,
            Expr::Lit(Lit::Double(x)) if x.is_sign_negative() || !x.is_finite() => NEG,
            Expr::Lit(_) | Expr::Array(_) => ATOM,
            Expr::Lam { .. } | Expr::Let { .. } | Expr::If { .. } => OPEN,
            Expr::App { .. } | Expr::Deriv { .. } | Expr::Diff { .. } => APP,
            Expr::Prim { op, .. } => match op.info().fixity {
                Fixity::Infix(level) => operands(level).0,
                Fixity::Negation => NEG,
                Fixity::Index => POSTFIX,
                Fixity::Tuple => ATOM,
                Fixity::Applied => APP,
            },
        }
    }

    /// The text after `let x =`: on the same line when flat, else on the
    /// next lines indented by two.
    fn rhs(&self, e: ExprId, ind: usize) -> String {
        let is_lam = matches!(self.prog.expr(e), Expr::Lam { .. });
        if !self.broken(e) || is_lam {
            format!(" {}", self.pp(e, OPEN, ind))
        } else {
            format!("\n{}{}", spaces(ind + 2), self.line(e, ind + 2))
        }
    }

    /// Prints `e` at the start of a line indented by `ind`: the only place
    /// a `let` is printed without parentheses.
    fn line(&self, e: ExprId, ind: usize) -> String {
        match self.prog.expr(e) {
            Expr::Let {
                name,
                ann,
                value,
                body,
            } => {
                let binder = match ann {
                    Some(t) => format!("{name} : {t}"),
                    None => name.to_string(),
                };
                format!(
                    "let {binder} ={} in\n{}{}",
                    self.rhs(*value, ind),
                    spaces(ind),
                    self.line(*body, ind)
                )
            }
            _ => self.pp(e, OPEN, ind),
        }
    }

    /// `(` newline, `e` on its own lines indented by two, `)`.
    fn block(&self, e: ExprId, ind: usize) -> String {
        format!("(\n{}{})", spaces(ind + 2), self.line(e, ind + 2))
    }

    /// Prints `e` in a context that needs at least precedence `ctx`; `ind`
    /// is the indentation of the line the text starts on.
    fn pp(&self, e: ExprId, ctx: u8, ind: usize) -> String {
        let p = self.prec(e);
        if matches!(self.prog.expr(e), Expr::Let { .. }) {
            return self.block(e, ind);
        }
        if p < ctx {
            if p == OPEN && self.broken(e) {
                return self.block(e, ind);
            }
            return format!("({})", self.pp(e, OPEN, ind));
        }
        match self.prog.expr(e) {
            Expr::Var(x) => x.to_string(),
            Expr::Lit(l) => lit(*l),
            Expr::Array(items) => {
                let parts: Vec<String> = items.iter().map(|i| self.pp(*i, OPEN, ind)).collect();
                format!("[{}]", parts.join(", "))
            }
            Expr::Lam { .. } => {
                let mut params = Vec::new();
                let mut cur = e;
                while let Expr::Lam { param, ann, body } = self.prog.expr(cur) {
                    params.push(match ann {
                        Some(t) => format!("({param}: {t})"),
                        None => param.to_string(),
                    });
                    cur = *body;
                }
                if self.broken(cur) {
                    format!(
                        "fun {} ->\n{}{}",
                        params.join(" "),
                        spaces(ind + 2),
                        self.line(cur, ind + 2)
                    )
                } else {
                    format!("fun {} -> {}", params.join(" "), self.pp(cur, OPEN, ind))
                }
            }
            Expr::Let { .. } => unreachable!("printed by `line` or `block`"),
            Expr::If { cond, then_, else_ } => {
                if self.broken(e) {
                    format!(
                        "if {} then\n{}{}\n{}else\n{}{}",
                        self.pp(*cond, OPEN, ind),
                        spaces(ind + 2),
                        self.line(*then_, ind + 2),
                        spaces(ind),
                        spaces(ind + 2),
                        self.line(*else_, ind + 2)
                    )
                } else {
                    format!(
                        "if {} then {} else {}",
                        self.pp(*cond, OPEN, ind),
                        self.pp(*then_, OPEN, ind),
                        self.pp(*else_, OPEN, ind)
                    )
                }
            }
            Expr::App { .. } => {
                let mut args = Vec::new();
                let mut cur = e;
                while let Expr::App { fun, arg } = self.prog.expr(cur) {
                    args.push(*arg);
                    cur = *fun;
                }
                args.reverse();
                let mut s = self.pp(cur, APP, ind);
                for a in args {
                    s.push(' ');
                    s.push_str(&self.arg(a, ind));
                }
                s
            }
            Expr::Prim { op, args } => self.prim(*op, args, ind),
            Expr::Deriv { body, wrt } => format!("deriv {} {wrt}", self.arg(*body, ind)),
            Expr::Diff { op, fun, at, dir } => format!(
                "{} {} {} {}",
                op.name(),
                self.arg(*fun, ind),
                self.arg(*at, ind),
                self.arg(*dir, ind)
            ),
        }
    }

    /// An argument of a juxtaposition application.
    fn arg(&self, a: ExprId, ind: usize) -> String {
        self.pp(a, POSTFIX, ind)
    }

    fn prim(&self, op: Prim, args: &[ExprId], ind: usize) -> String {
        let bin = |lp: u8, rp: u8, sym: &str| {
            format!(
                "{} {} {}",
                self.pp(args[0], lp, ind),
                sym,
                self.pp(args[1], rp, ind)
            )
        };
        match op.info().fixity {
            Fixity::Infix(level) => {
                let (_, lp, rp) = operands(level);
                bin(lp, rp, op.name())
            }
            // `--x` lexes as two minus signs; the operand of a negation
            // is never a negative literal (the parser folds those). A
            // negated negation is printed without parentheses: each pair
            // would be a level of nesting more than the parsed program
            // had, and 5,001 minus signs would print past MAX_NESTING.
            Fixity::Negation => format!("-{}", self.pp(args[0], NEG, ind)),
            Fixity::Index => format!(
                "{}[{}]",
                self.pp(args[0], POSTFIX, ind),
                self.pp(args[1], OPEN, ind)
            ),
            Fixity::Tuple => format!(
                "({}, {})",
                self.pp(args[0], OPEN, ind),
                self.pp(args[1], OPEN, ind)
            ),
            Fixity::Applied => {
                let mut s = op.name().to_string();
                for a in args {
                    s.push(' ');
                    s.push_str(&self.arg(*a, ind));
                }
                s
            }
        }
    }
}

/// A binary operator's precedence, and the least precedences of its left
/// and right operands printed without parentheses: comparisons do not
/// associate, `+ -` and `* /` associate to the left, `**` to the right
/// (its exponent may be negated).
fn operands(level: Level) -> (u8, u8, u8) {
    match level {
        Level::Cmp => (CMP, ADD, ADD),
        Level::Add => (ADD, ADD, MUL),
        Level::Mul => (MUL, MUL, NEG),
        Level::Pow => (POW, APP, NEG),
    }
}

fn lit(l: Lit) -> String {
    match l {
        Lit::Int(n) => n.to_string(),
        Lit::Bool(b) => b.to_string(),
        Lit::Double(x) if x.is_nan() => "(0.0 * 1e999)".to_string(),
        Lit::Double(x) if x.is_infinite() => if x > 0.0 { "1e999" } else { "-1e999" }.to_string(),
        Lit::Double(x) => format!("{x:?}"),
    }
}
