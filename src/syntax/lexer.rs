//! Lexer: source text to tokens with spans and layout facts.
//!
//! Besides the token kind and span, every token records its column, whether
//! it is the first token on its line, and whether whitespace precedes it.
//! The parser uses the first two for the offside rule (layout `let`) and the
//! last to tell indexing `v[i]` from an array-literal argument `f [1, 2]`.
//! Comments: `// ...` to end of line, and nestable `(* ... *)`, except that
//! `(*)` is the multiplication operator section, as in F#.

use std::rc::Rc;

use crate::diagnostic::{SourceId, Span};
use crate::syntax::ParseError;

#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    Ident(Rc<str>),
    Int(i64),
    Float(f64),
    // keywords
    Let,
    In,
    Fun,
    If,
    Then,
    Else,
    True,
    False,
    // punctuation
    LParen,
    RParen,
    LBracket,
    /// `.[`, the F# indexing form.
    DotLBracket,
    RBracket,
    Comma,
    Arrow,
    Colon,
    // operators
    Plus,
    Minus,
    Star,
    Slash,
    StarStar,
    Lt,
    Gt,
    Le,
    Ge,
    /// `=`: definitions and equality.
    Equals,
    /// `==`
    EqEq,
    /// `<>` or `!=`
    NotEq,
    AndAnd,
    OrOr,
    Eof,
}

impl Tok {
    pub fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("identifier `{s}`"),
            Tok::Int(i) => format!("number `{i}`"),
            Tok::Float(f) => format!("number `{f:?}`"),
            Tok::Eof => "end of input".to_string(),
            other => format!("`{}`", other.text()),
        }
    }

    pub fn text(&self) -> &'static str {
        match self {
            Tok::Let => "let",
            Tok::In => "in",
            Tok::Fun => "fun",
            Tok::If => "if",
            Tok::Then => "then",
            Tok::Else => "else",
            Tok::True => "true",
            Tok::False => "false",
            Tok::LParen => "(",
            Tok::RParen => ")",
            Tok::LBracket => "[",
            Tok::DotLBracket => ".[",
            Tok::RBracket => "]",
            Tok::Comma => ",",
            Tok::Arrow => "->",
            Tok::Colon => ":",
            Tok::Plus => "+",
            Tok::Minus => "-",
            Tok::Star => "*",
            Tok::Slash => "/",
            Tok::StarStar => "**",
            Tok::Lt => "<",
            Tok::Gt => ">",
            Tok::Le => "<=",
            Tok::Ge => ">=",
            Tok::Equals => "=",
            Tok::EqEq => "==",
            Tok::NotEq => "<>",
            Tok::AndAnd => "&&",
            Tok::OrOr => "||",
            Tok::Ident(_) | Tok::Int(_) | Tok::Float(_) | Tok::Eof => "",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Token {
    pub tok: Tok,
    pub span: Span,
    /// 1-based column of the first character (in characters).
    pub col: u32,
    /// First token on its line.
    pub line_start: bool,
    /// Preceded by whitespace or a comment (or the start of input).
    pub space_before: bool,
}

pub fn lex(src: &str, source: SourceId) -> Result<Vec<Token>, ParseError> {
    let bytes = src.as_bytes();
    let mut toks = Vec::new();
    let mut i = 0usize;
    let mut line_start_byte = 0usize;
    // Column bookkeeping in linear time: the column of byte `col_byte`.
    let (mut col_byte, mut col) = (0usize, 1u32);
    let mut at_line_start = true;
    let mut space = true;
    let span = |a: usize, b: usize| Span::new(source, a, b);
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'\n' {
            i += 1;
            line_start_byte = i;
            at_line_start = true;
            space = true;
            continue;
        }
        if c == b' ' || c == b'\t' || c == b'\r' {
            i += 1;
            space = true;
            continue;
        }
        if c == b'/' && bytes.get(i + 1) == Some(&b'/') {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
            space = true;
            continue;
        }
        if c == b'(' && bytes.get(i + 1) == Some(&b'*') && bytes.get(i + 2) != Some(&b')') {
            let start = i;
            let mut depth = 0usize;
            loop {
                if i >= bytes.len() {
                    return Err(ParseError::UnterminatedComment {
                        span: span(start, start + 2),
                    });
                }
                if bytes[i] == b'(' && bytes.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if bytes[i] == b'*' && bytes.get(i + 1) == Some(&b')') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if bytes[i] == b'\n' {
                        line_start_byte = i + 1;
                        at_line_start = true;
                    }
                    i += 1;
                }
            }
            space = true;
            continue;
        }
        let start = i;
        if col_byte < line_start_byte {
            (col_byte, col) = (line_start_byte, 1);
        }
        col += src[col_byte..start].chars().count() as u32;
        col_byte = start;
        let tok = if c.is_ascii_alphabetic() || c == b'_' {
            while i < bytes.len()
                && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_' || bytes[i] == b'\'')
            {
                i += 1;
            }
            match &src[start..i] {
                "let" => Tok::Let,
                "in" => Tok::In,
                "fun" => Tok::Fun,
                "if" => Tok::If,
                "then" => Tok::Then,
                "else" => Tok::Else,
                "true" => Tok::True,
                "false" => Tok::False,
                s => Tok::Ident(Rc::from(s)),
            }
        } else if c.is_ascii_digit() {
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            let mut float = false;
            // `1.5`, `1.`; but not `1..` and not the `.[` of `x.[i]`.
            if i < bytes.len()
                && bytes[i] == b'.'
                && bytes.get(i + 1) != Some(&b'[')
                && bytes.get(i + 1) != Some(&b'.')
            {
                float = true;
                i += 1;
                while i < bytes.len() && bytes[i].is_ascii_digit() {
                    i += 1;
                }
            }
            if i < bytes.len() && (bytes[i] == b'e' || bytes[i] == b'E') {
                let mut j = i + 1;
                if j < bytes.len() && (bytes[j] == b'+' || bytes[j] == b'-') {
                    j += 1;
                }
                if j < bytes.len() && bytes[j].is_ascii_digit() {
                    float = true;
                    i = j;
                    while i < bytes.len() && bytes[i].is_ascii_digit() {
                        i += 1;
                    }
                }
            }
            let text = &src[start..i];
            if float {
                match text.parse::<f64>() {
                    Ok(f) => Tok::Float(f),
                    Err(_) => {
                        return Err(ParseError::BadNumber {
                            span: span(start, i),
                        });
                    }
                }
            } else {
                match text.parse::<i64>() {
                    Ok(n) => Tok::Int(n),
                    Err(_) => {
                        return Err(ParseError::BadNumber {
                            span: span(start, i),
                        });
                    }
                }
            }
        } else {
            let next = bytes.get(i + 1).copied();
            let (tok, len) = match (c, next) {
                (b'(', _) => (Tok::LParen, 1),
                (b')', _) => (Tok::RParen, 1),
                (b'[', _) => (Tok::LBracket, 1),
                (b']', _) => (Tok::RBracket, 1),
                (b'.', Some(b'[')) => (Tok::DotLBracket, 2),
                (b',', _) => (Tok::Comma, 1),
                (b':', _) => (Tok::Colon, 1),
                (b'-', Some(b'>')) => (Tok::Arrow, 2),
                (b'+', _) => (Tok::Plus, 1),
                (b'-', _) => (Tok::Minus, 1),
                (b'*', Some(b'*')) => (Tok::StarStar, 2),
                (b'*', _) => (Tok::Star, 1),
                (b'/', _) => (Tok::Slash, 1),
                (b'<', Some(b'=')) => (Tok::Le, 2),
                (b'<', Some(b'>')) => (Tok::NotEq, 2),
                (b'<', _) => (Tok::Lt, 1),
                (b'>', Some(b'=')) => (Tok::Ge, 2),
                (b'>', _) => (Tok::Gt, 1),
                (b'=', Some(b'=')) => (Tok::EqEq, 2),
                (b'=', _) => (Tok::Equals, 1),
                (b'!', Some(b'=')) => (Tok::NotEq, 2),
                (b'&', Some(b'&')) => (Tok::AndAnd, 2),
                (b'|', Some(b'|')) => (Tok::OrOr, 2),
                _ => {
                    // The paper writes `×` for multiplication (Fig. 4).
                    let ch = src[i..].chars().next().unwrap_or('?');
                    if ch == '×' {
                        (Tok::Star, ch.len_utf8())
                    } else {
                        return Err(ParseError::UnexpectedChar {
                            ch,
                            span: span(i, i + ch.len_utf8()),
                        });
                    }
                }
            };
            i += len;
            tok
        };
        toks.push(Token {
            tok,
            span: span(start, i),
            col,
            line_start: at_line_start,
            space_before: space,
        });
        at_line_start = false;
        space = false;
    }
    let end = bytes.len();
    toks.push(Token {
        tok: Tok::Eof,
        span: span(end, end),
        col: 0,
        line_start: true,
        space_before: true,
    });
    Ok(toks)
}
