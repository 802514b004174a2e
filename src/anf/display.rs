//! The normal form as indented text, one binding per line: a debugging
//! view of what reverse mode and the native backend work on (not source
//! syntax; `fsmooth print` shows programs).

use super::{Atom, Block, LoopKind, Rhs};
use crate::ir::Lit;

/// The normal form as indented text, one binding per line: a debugging
/// view of what reverse mode and the native backend work on (not source
/// syntax; `fsmooth print` shows programs).
impl std::fmt::Display for Block {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.write(f, 0)
    }
}

impl std::fmt::Display for Atom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Atom::Var(x, _) => write!(f, "{x}"),
            Atom::Lit(Lit::Int(k), _) => write!(f, "{k}"),
            Atom::Lit(Lit::Double(x), _) => write!(f, "{x:?}"),
            Atom::Lit(Lit::Bool(b), _) => write!(f, "{b}"),
        }
    }
}

impl Block {
    fn write(&self, f: &mut std::fmt::Formatter<'_>, depth: usize) -> std::fmt::Result {
        let pad = "  ".repeat(depth);
        let list = |atoms: &[Atom]| {
            atoms
                .iter()
                .map(|a| a.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        for b in &self.binds {
            write!(f, "{pad}{} =", b.name)?;
            match &b.rhs {
                Rhs::Prim(op, args) => writeln!(f, " {}({})", op.name(), list(args))?,
                Rhs::Array(items) => writeln!(f, " [{}]", list(items))?,
                Rhs::If(c, t, e) => {
                    writeln!(f, " if {c} then")?;
                    t.write(f, depth + 1)?;
                    writeln!(f, "{pad}else")?;
                    e.write(f, depth + 1)?;
                }
                Rhs::Loop {
                    kind,
                    n,
                    state,
                    index,
                    body,
                } => {
                    let k = match kind {
                        LoopKind::Build => "build",
                        LoopKind::IFold => "ifold",
                        LoopKind::IScan => "iscan",
                    };
                    match state {
                        Some((z, s, _)) => writeln!(f, " {k} {n} from {z} ({s}, {index}) ->")?,
                        None => writeln!(f, " {k} {n} ({index}) ->")?,
                    }
                    body.write(f, depth + 1)?;
                }
                Rhs::While {
                    init,
                    state,
                    cond,
                    step,
                    ..
                } => {
                    writeln!(f, " while from {init} ({state}) if")?;
                    cond.write(f, depth + 1)?;
                    writeln!(f, "{pad}step")?;
                    step.write(f, depth + 1)?;
                }
            }
        }
        writeln!(f, "{pad}=> {}", self.result)
    }
}
