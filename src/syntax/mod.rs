//! Concrete syntax: lexing, parsing (with the offside rule) and printing.
//! The grammar and its desugaring are specified in `spec/syntax.md`.

mod lexer;
mod parser;
mod printer;

use thiserror::Error;

use crate::diagnostic::{Diagnose, Span};

pub use lexer::{Tok, Token, lex};
pub use parser::{MAX_NESTING, parse_into};
pub use printer::{print_expr, print_program};

/// Errors from the lexer and parser.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum ParseError {
    #[error("unexpected character `{ch}`")]
    UnexpectedChar { ch: char, span: Span },
    #[error("unterminated comment: `(*` has no matching `*)`")]
    UnterminatedComment { span: Span },
    #[error("invalid number literal (out of range)")]
    BadNumber { span: Span },
    #[error("expected {expected}, found {found}")]
    Unexpected {
        expected: String,
        found: String,
        span: Span,
    },
    #[error("unexpected end of input: expected {expected}")]
    UnexpectedEof { expected: String, span: Span },
    #[error(
        "`let` has no body: write `in e`, or put the body on the next line in the same column as `let`"
    )]
    MissingLetBody { span: Span },
    #[error("expression nested more than {limit} levels deep")]
    TooDeep { limit: u32, span: Span },
    #[error("unknown type `{name}`")]
    UnknownType { name: String, span: Span },
    #[error("{what} is not supported")]
    Unsupported { what: String, span: Span },
}

impl Diagnose for ParseError {
    fn code(&self) -> &'static str {
        match self {
            ParseError::UnexpectedChar { .. } => "unexpected-character",
            ParseError::UnterminatedComment { .. } => "unterminated-comment",
            ParseError::BadNumber { .. } => "invalid-number",
            ParseError::Unexpected { .. } => "unexpected-token",
            ParseError::UnexpectedEof { .. } => "unexpected-end-of-input",
            ParseError::MissingLetBody { .. } => "missing-let-body",
            ParseError::TooDeep { .. } => "nesting-too-deep",
            ParseError::UnknownType { .. } => "unknown-type",
            ParseError::Unsupported { .. } => "unsupported-syntax",
        }
    }

    fn span(&self) -> Span {
        match self {
            ParseError::UnexpectedChar { span, .. }
            | ParseError::UnterminatedComment { span }
            | ParseError::BadNumber { span }
            | ParseError::Unexpected { span, .. }
            | ParseError::UnexpectedEof { span, .. }
            | ParseError::MissingLetBody { span }
            | ParseError::TooDeep { span, .. }
            | ParseError::UnknownType { span, .. }
            | ParseError::Unsupported { span, .. } => *span,
        }
    }

    fn notes(&self) -> Vec<String> {
        match self {
            ParseError::TooDeep { .. } => vec![
                "deeply nested code is usually generated: bind intermediate results with `let`"
                    .to_string(),
            ],
            _ => Vec::new(),
        }
    }
}
