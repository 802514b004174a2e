//! Rendering diagnostics as the command line prints them:
//! `file:line:col: error[code]: message`, a source excerpt with carets
//! under the span, and notes.

use crate::diagnostic::{Diagnostic, SourceId, Span};
use crate::pipeline::PRELUDE;

/// The texts a span can point into: the prelude and the main file.
pub struct Sources {
    pub main_path: String,
    pub main_src: String,
}

impl Sources {
    fn get(&self, id: SourceId) -> Option<(&str, &str)> {
        match id {
            SourceId::PRELUDE => Some(("<prelude>", PRELUDE)),
            SourceId::MAIN => Some((&self.main_path, &self.main_src)),
            _ => None,
        }
    }

    /// Renders `d` against these sources.
    pub fn render(&self, d: &Diagnostic) -> String {
        let mut out = String::new();
        match self.get(d.span.source) {
            Some((path, src)) => {
                let (line, col) = line_col(src, d.span.start as usize);
                out.push_str(&format!(
                    "{path}:{line}:{col}: error[{}]: {}\n",
                    d.code, d.message
                ));
                if !d.span.is_whole_file() {
                    out.push_str(&excerpt(src, d.span, line, col));
                }
            }
            None => out.push_str(&format!("error[{}]: {}\n", d.code, d.message)),
        }
        for n in &d.notes {
            out.push_str(&format!("  = note: {n}\n"));
        }
        out
    }
}

/// Renders a diagnostic about the program in `path` (text `src`) as the CLI
/// prints it: `path:line:col: error[code]: message`, an excerpt, notes.
pub fn render_diagnostic(d: &Diagnostic, path: &str, src: &str) -> String {
    Sources {
        main_path: path.to_string(),
        main_src: src.to_string(),
    }
    .render(d)
}

fn char_floor(src: &str, mut i: usize) -> usize {
    i = i.min(src.len());
    while !src.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn line_col(src: &str, offset: usize) -> (usize, usize) {
    let offset = char_floor(src, offset);
    let before = &src[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let col = src[line_start..offset].chars().count() + 1;
    (line, col)
}

/// The source line with a caret line under the span (its first line
/// only). Long lines are cut to a window around the span; tabs in the
/// padding are kept so the carets line up.
fn excerpt(src: &str, span: Span, line: usize, col: usize) -> String {
    const WIDTH: usize = 120;
    let text: Vec<char> = src.lines().nth(line - 1).unwrap_or("").chars().collect();
    let start = char_floor(src, span.start as usize);
    let end = char_floor(src, (span.end as usize).max(span.start as usize));
    let first_line_end = src[start..end].find('\n').map(|i| start + i).unwrap_or(end);
    let len = src[start..first_line_end].chars().count().max(1);
    let c0 = col - 1;
    let from = if c0 > WIDTH / 2 { c0 - WIDTH / 3 } else { 0 };
    let to = text.len().min(from + WIDTH);
    let mut shown: String = if from > 0 {
        "…".to_string()
    } else {
        String::new()
    };
    shown.extend(&text[from.min(text.len())..to]);
    if to < text.len() {
        shown.push('…');
    }
    let mut pad: String = if from > 0 {
        " ".to_string()
    } else {
        String::new()
    };
    pad.extend(
        text[from.min(text.len())..c0.min(text.len())]
            .iter()
            .map(|c| if *c == '\t' { '\t' } else { ' ' }),
    );
    let carets = "^".repeat(len.min(WIDTH.saturating_sub(c0 - from)).max(1));
    let gutter = " ".repeat(line.to_string().len());
    format!("{gutter} |\n{line} | {shown}\n{gutter} | {pad}{carets}\n")
}
