//! What the passes that rewrite the normal form before the sweep share —
//! R-While's `counted.rs`, R-Invariant's `invariant.rs`, R-Checkpoint-Sqrt's
//! `segments.rs`: fresh names, each given the span of the binding it comes
//! from, so that a ⊥ of a new binding is reported where the user wrote the
//! construct.

use std::collections::HashMap;

use crate::anf::{Block, Normal};
use crate::diagnostic::Span;
use crate::ir::Name;
use crate::ir::build::Builder;

pub(super) struct Rewrite<'a, 'b> {
    pub(super) b: &'a mut Builder<'b>,
    spans: HashMap<Name, Span>,
}

impl<'a, 'b> Rewrite<'a, 'b> {
    pub(super) fn new(b: &'a mut Builder<'b>, normal: &Normal) -> Self {
        Rewrite {
            b,
            spans: normal.spans.clone(),
        }
    }

    /// A fresh name from `stem` (its part before any `'`), with the span
    /// of the binding `span_of`.
    pub(super) fn fresh(&mut self, stem: &str, span_of: &Name) -> Name {
        let x = self.b.fresh(stem.split('\'').next().unwrap_or("x"));
        if let Some(s) = self.spans.get(span_of).copied() {
            self.spans.insert(x.clone(), s);
        }
        x
    }

    /// `normal` with `body` in place of its body, and the new spans.
    pub(super) fn finish(self, normal: &Normal, body: Block) -> Normal {
        Normal {
            params: normal.params.clone(),
            body,
            spans: self.spans,
        }
    }
}
