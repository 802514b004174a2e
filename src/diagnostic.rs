//! Source locations and the common shape of every user-facing error.
//!
//! Each pass has its own typed error enum (`ParseError`, `TypeError`,
//! `EvalError`, ...). They all implement [`Diagnose`], which gives the stable
//! kebab-case code, the primary span and the message. Rendering to text
//! (`file:line:col: error[code]: message` plus a source excerpt) happens only
//! in the CLI (`cli::render`), so library code never prints.

use std::fmt;

/// Which source text a span points into.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SourceId(pub u32);

impl SourceId {
    /// The embedded M̃ prelude (`src/prelude.fsm`).
    pub const PRELUDE: SourceId = SourceId(0);
    /// The user's program.
    pub const MAIN: SourceId = SourceId(1);
    /// Code made by a pass rather than written by anyone (AD output, ...).
    pub const GENERATED: SourceId = SourceId(u32::MAX);
}

/// A half-open byte range `[start, end)` in one source.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Span {
    pub source: SourceId,
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(source: SourceId, start: usize, end: usize) -> Span {
        Span {
            source,
            start: start as u32,
            end: end as u32,
        }
    }

    /// The smallest span covering both (same source assumed; else `self`).
    pub fn to(self, other: Span) -> Span {
        if self.source != other.source {
            return self;
        }
        Span {
            source: self.source,
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }

    /// About the user's program as a whole (no entry, bad input): rendered
    /// as `file:1:1` without an excerpt.
    pub fn whole_file() -> Span {
        Span {
            source: SourceId::MAIN,
            start: 0,
            end: 0,
        }
    }

    pub fn is_whole_file(&self) -> bool {
        *self == Span::whole_file()
    }

    pub fn generated() -> Span {
        Span {
            source: SourceId::GENERATED,
            start: 0,
            end: 0,
        }
    }
}

/// Implemented by every error type a pass can return.
pub trait Diagnose: fmt::Display {
    /// Stable, kebab-case identifier (`unbound-variable`, `index-out-of-bounds`, ...).
    /// Tests and users match on it; never change one once published.
    fn code(&self) -> &'static str;
    /// Where the problem is.
    fn span(&self) -> Span;
    /// Extra lines of explanation printed after the excerpt.
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
}

/// A rendered-independent snapshot of any [`Diagnose`] value, so errors from
/// different passes can travel together.
#[derive(Clone, Debug, PartialEq)]
pub struct Diagnostic {
    pub code: &'static str,
    pub message: String,
    pub span: Span,
    pub notes: Vec<String>,
}

impl<T: Diagnose> From<&T> for Diagnostic {
    fn from(e: &T) -> Diagnostic {
        Diagnostic {
            code: e.code(),
            message: e.to_string(),
            span: e.span(),
            notes: e.notes(),
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error[{}]: {}", self.code, self.message)
    }
}
