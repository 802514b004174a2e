//! The token reader shared by the ADBench file formats: whitespace-separated
//! decimal tokens, read front to back as upstream's `fscanf` does (line
//! breaks carry no meaning), and the one error type of every ADBench reader.
//!
//! Invariants: reading allocates only as tokens arrive (a count from a file
//! never sizes an allocation up front); every error carries the span of the
//! token at fault (byte offsets into the file text, source [`DATA_SOURCE`])
//! and its 1-based token number.

use std::num::IntErrorKind;

use thiserror::Error;

use crate::diagnostic::{Diagnose, SourceId, Span};

/// The source id of spans into an ADBench data file.
pub const DATA_SOURCE: SourceId = SourceId(2);

/// A malformed ADBench input file.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum AdbenchError {
    #[error("the file ends after {count} token(s){}: expected {expected} as token {position}", asks(.needed))]
    UnexpectedEof {
        expected: String,
        count: usize,
        /// The token count the header asks for, once the header is read.
        needed: Option<usize>,
        /// What the format's reader suggests when the file is short.
        note: Option<&'static str>,
        position: usize,
        span: Span,
    },
    #[error("token {position} `{found}` is not {expected}")]
    BadToken {
        expected: String,
        found: String,
        position: usize,
        span: Span,
    },
    #[error("token {position}: {what} = {found} {why}")]
    BadSize {
        what: &'static str,
        found: String,
        why: String,
        position: usize,
        span: Span,
    },
    #[error(
        "token {position} `{found}`: the file goes on after its last expected value ({count} extra token(s))"
    )]
    TrailingData {
        found: String,
        count: usize,
        /// What the format's reader suggests when the file is long.
        note: Option<&'static str>,
        position: usize,
        span: Span,
    },
}

impl Diagnose for AdbenchError {
    fn code(&self) -> &'static str {
        match self {
            AdbenchError::UnexpectedEof { .. } => "adbench-eof",
            AdbenchError::BadToken { .. } => "adbench-format",
            AdbenchError::BadSize { .. } => "adbench-size",
            AdbenchError::TrailingData { .. } => "adbench-trailing-data",
        }
    }

    fn span(&self) -> Span {
        match self {
            AdbenchError::UnexpectedEof { span, .. }
            | AdbenchError::BadToken { span, .. }
            | AdbenchError::BadSize { span, .. }
            | AdbenchError::TrailingData { span, .. } => *span,
        }
    }

    fn notes(&self) -> Vec<String> {
        match self {
            AdbenchError::UnexpectedEof { note, .. } | AdbenchError::TrailingData { note, .. } => {
                note.iter().map(|n| n.to_string()).collect()
            }
            _ => Vec::new(),
        }
    }
}

/// The file's tokens with their byte ranges, read front to back.
pub struct Tokens<'a> {
    text: &'a str,
    /// Byte ranges of the tokens.
    spans: Vec<(usize, usize)>,
    pos: usize,
    /// How many tokens the header asks for (once read), for messages.
    pub needed: Option<usize>,
    /// The note of an end-of-file error (the format's hint).
    pub eof_note: Option<&'static str>,
    /// The note of a trailing-data error.
    pub trailing_note: Option<&'static str>,
}

impl<'a> Tokens<'a> {
    pub fn new(text: &'a str) -> Tokens<'a> {
        Tokens::split(text, char::is_whitespace)
    }

    /// Like [`Tokens::new`], but `:` separates tokens too, as in the hand
    /// model's files (upstream reads them with `getline(…, ':')`).
    pub fn with_colons(text: &'a str) -> Tokens<'a> {
        Tokens::split(text, |c| c.is_whitespace() || c == ':')
    }

    fn split(text: &'a str, separates: impl Fn(char) -> bool) -> Tokens<'a> {
        let mut spans = Vec::new();
        let mut start = None;
        for (i, c) in text.char_indices() {
            match (separates(c), start) {
                (true, Some(s)) => {
                    spans.push((s, i));
                    start = None;
                }
                (false, None) => start = Some(i),
                _ => {}
            }
        }
        if let Some(s) = start {
            spans.push((s, text.len()));
        }
        Tokens {
            text,
            spans,
            pos: 0,
            needed: None,
            eof_note: None,
            trailing_note: None,
        }
    }

    fn span(&self, idx: usize) -> Span {
        let (s, e) = self.spans[idx];
        Span::new(DATA_SOURCE, s, e)
    }

    /// The next token, its index, or an end-of-file error naming `expected`.
    fn next(
        &mut self,
        expected: impl FnOnce() -> String,
    ) -> Result<(&'a str, usize), AdbenchError> {
        let Some(&(s, e)) = self.spans.get(self.pos) else {
            let end = self.text.len();
            return Err(AdbenchError::UnexpectedEof {
                expected: expected(),
                count: self.spans.len(),
                needed: self.needed,
                note: self.eof_note,
                position: self.pos + 1,
                span: Span::new(DATA_SOURCE, end, end),
            });
        };
        self.pos += 1;
        Ok((&self.text[s..e], self.pos - 1))
    }

    fn bad_token(&self, idx: usize, expected: String) -> AdbenchError {
        let (s, e) = self.spans[idx];
        AdbenchError::BadToken {
            expected,
            found: abbreviate(&self.text[s..e]),
            position: idx + 1,
            span: self.span(idx),
        }
    }

    pub fn bad_size(&self, what: &'static str, idx: usize, why: impl Into<String>) -> AdbenchError {
        let (s, e) = self.spans[idx];
        AdbenchError::BadSize {
            what,
            found: abbreviate(&self.text[s..e]),
            why: why.into(),
            position: idx + 1,
            span: self.span(idx),
        }
    }

    /// A size from the header: a non-negative integer. Returns it and its
    /// token index.
    pub fn size(
        &mut self,
        what: &'static str,
        expected: &str,
    ) -> Result<(usize, usize), AdbenchError> {
        let (tok, idx) = self.next(|| expected.to_string())?;
        // Sizes index arrays of the language, whose indices are i64.
        match tok.parse::<i64>() {
            Ok(v) if v < 0 => Err(self.bad_size(what, idx, "is negative")),
            Ok(v) => usize::try_from(v)
                .map(|v| (v, idx))
                .map_err(|_| self.bad_size(what, idx, "is too large")),
            Err(e) => match e.kind() {
                IntErrorKind::PosOverflow => Err(self.bad_size(what, idx, "is too large")),
                IntErrorKind::NegOverflow => Err(self.bad_size(what, idx, "is negative")),
                _ => Err(self.bad_token(idx, format!("{expected} (a non-negative integer)"))),
            },
        }
    }

    pub fn double(&mut self, expected: impl Fn() -> String) -> Result<f64, AdbenchError> {
        let (tok, idx) = self.next(&expected)?;
        tok.parse::<f64>()
            .map_err(|_| self.bad_token(idx, format!("a number for {}", expected())))
    }

    pub fn integer(&mut self, expected: &str) -> Result<i64, AdbenchError> {
        self.integer_at(expected).map(|(v, _)| v)
    }

    /// An integer and its token index (for a later [`Tokens::bad_size`]).
    pub fn integer_at(&mut self, expected: &str) -> Result<(i64, usize), AdbenchError> {
        let (tok, idx) = self.next(|| expected.to_string())?;
        tok.parse::<i64>()
            .map(|v| (v, idx))
            .map_err(|_| self.bad_token(idx, format!("an integer for {expected}")))
    }

    /// An integer that must lie in `0..bound` (an index into something
    /// read earlier); `what` names it in the error, `of` says what it
    /// indexes.
    pub fn index_below(
        &mut self,
        what: &'static str,
        expected: &str,
        bound: usize,
        of: &str,
    ) -> Result<usize, AdbenchError> {
        let (v, idx) = self.integer_at(expected)?;
        match usize::try_from(v) {
            Ok(i) if i < bound => Ok(i),
            _ => Err(self.bad_size(
                what,
                idx,
                format!("is not below {bound}, the number of {of}"),
            )),
        }
    }

    /// The next token as it stands (a name).
    pub fn word(&mut self, expected: &str) -> Result<&'a str, AdbenchError> {
        self.next(|| expected.to_string()).map(|(w, _)| w)
    }

    /// Whether every token has been read.
    pub fn at_end(&self) -> bool {
        self.pos >= self.spans.len()
    }

    /// The error of a file that ends where `expected` should come (for a
    /// reader that reads to the end and then finds too little).
    pub fn ends_early(&self, expected: String) -> AdbenchError {
        let end = self.text.len();
        AdbenchError::UnexpectedEof {
            expected,
            count: self.spans.len(),
            needed: self.needed,
            note: self.eof_note,
            position: self.spans.len() + 1,
            span: Span::new(DATA_SOURCE, end, end),
        }
    }

    pub fn doubles(
        &mut self,
        count: usize,
        name: impl Fn(usize) -> String,
    ) -> Result<Vec<f64>, AdbenchError> {
        // Not `with_capacity(count)`: `count` is from the file; the vector
        // grows only as real tokens arrive.
        let mut out = Vec::new();
        for i in 0..count {
            out.push(self.double(|| name(i))?);
        }
        Ok(out)
    }

    pub fn rows(
        &mut self,
        rows: usize,
        cols: usize,
        name: &str,
    ) -> Result<Vec<Vec<f64>>, AdbenchError> {
        let mut out = Vec::new();
        for r in 0..rows {
            out.push(self.doubles(cols, |c| format!("{name}[{r}][{c}]"))?);
        }
        Ok(out)
    }

    pub fn finish(&self) -> Result<(), AdbenchError> {
        if self.pos < self.spans.len() {
            let (s, e) = self.spans[self.pos];
            return Err(AdbenchError::TrailingData {
                found: abbreviate(&self.text[s..e]),
                count: self.spans.len() - self.pos,
                note: self.trailing_note,
                position: self.pos + 1,
                span: self.span(self.pos),
            });
        }
        Ok(())
    }
}

fn asks(needed: &Option<usize>) -> String {
    needed.map_or(String::new(), |n| format!(", but its header asks for {n}"))
}

/// A token for an error message, cut short if it is long.
fn abbreviate(tok: &str) -> String {
    const MAX: usize = 40;
    match tok.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}…", &tok[..i]),
        None => tok.to_string(),
    }
}
