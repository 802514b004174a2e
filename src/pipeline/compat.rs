//! Temporary: the pipeline's former free functions, each over a fresh
//! session, so the test suite runs unchanged while it is being split.
//! Removed when the tests move to `Session` and `gradient::Plan`.
#![allow(missing_docs)]

use std::rc::Rc;

use super::{Artefact, Checkpointing, Entry, Form, ForwardMode, OptOptions, Session};
use crate::diagnostic::Diagnostic;
use crate::ir::Type;

pub type Loaded = Session;

pub fn load(src: &str) -> Result<Session, Diagnostic> {
    Session::load(src)
}

pub fn entry(s: &Session, name: &str) -> Result<Rc<Entry>, Diagnostic> {
    s.entry(name)
}

pub fn entry_with(s: &Session, name: &str, mode: ForwardMode) -> Result<Rc<Entry>, Diagnostic> {
    s.get(&Artefact::Entry {
        name: Rc::from(name),
        mode,
    })
}

pub struct Derivative {
    pub base: Rc<Entry>,
    pub wrapper: Rc<Entry>,
    pub wrt: usize,
    pub tangent_only: bool,
}

pub struct RowsDerivative {
    pub base: Rc<Entry>,
    pub rows: Rc<Entry>,
    pub wrt: usize,
}

pub struct ReverseDerivative {
    pub base: Rc<Entry>,
    pub rev: Rc<Entry>,
    pub wrt: usize,
    pub seeded: bool,
}

pub struct OptimisedEntry {
    pub entry: Rc<Entry>,
    pub report: crate::opt::Optimised,
    pub rules: Vec<crate::opt::RuleDef>,
}

fn forward(
    src: &str,
    entry: &str,
    wrt: &str,
    form: Form,
    opt: Option<OptOptions>,
) -> Result<(Rc<Entry>, Rc<Entry>, usize), Diagnostic> {
    let mut s = Session::load(src)?;
    if let Some(o) = opt {
        s = s.with_options(o);
    }
    let base = s.entry(entry)?;
    let k = s.param(entry, wrt)?;
    let mut a = Artefact::Forward {
        entry: Rc::from(entry),
        wrt: k,
        form,
    };
    if s.options().check || s.options().rules.is_some() || s.options().explain {
        a = a.optimised();
    }
    let w = s.get(&a)?;
    Ok((base, w, k))
}

pub fn derivative(src: &str, entry: &str, wrt: &str) -> Result<Derivative, Diagnostic> {
    derivative_with(src, entry, wrt, ForwardMode::Scalar)
}

pub fn derivative_with(
    src: &str,
    entry: &str,
    wrt: &str,
    mode: ForwardMode,
) -> Result<Derivative, Diagnostic> {
    let (base, wrapper, wrt) = forward(src, entry, wrt, Form::Duals(mode), None)?;
    Ok(Derivative {
        base,
        wrapper,
        wrt,
        tangent_only: false,
    })
}

pub fn tangent_derivative(src: &str, entry: &str, wrt: &str) -> Result<Derivative, Diagnostic> {
    tangent_derivative_with(src, entry, wrt, ForwardMode::Scalar)
}

pub fn tangent_derivative_with(
    src: &str,
    entry: &str,
    wrt: &str,
    mode: ForwardMode,
) -> Result<Derivative, Diagnostic> {
    let (base, wrapper, wrt) = forward(src, entry, wrt, Form::Tangents(mode), None)?;
    Ok(Derivative {
        base,
        wrapper,
        wrt,
        tangent_only: true,
    })
}

pub fn optimised_derivative(
    src: &str,
    entry: &str,
    wrt: &str,
    opts: &OptOptions,
) -> Result<Derivative, Diagnostic> {
    let s = Session::load(src)?.with_options(opts.clone());
    let base = s.entry(entry)?;
    let k = s.param(entry, wrt)?;
    let a = Artefact::Forward {
        entry: Rc::from(entry),
        wrt: k,
        form: Form::Tangents(ForwardMode::Scalar),
    }
    .optimised();
    Ok(Derivative {
        base,
        wrapper: s.get(&a)?,
        wrt: k,
        tangent_only: true,
    })
}

pub fn rows_derivative(src: &str, entry: &str, wrt: &str) -> Result<RowsDerivative, Diagnostic> {
    let (base, rows, wrt) = forward(src, entry, wrt, Form::Rows, None)?;
    Ok(RowsDerivative { base, rows, wrt })
}

pub fn reverse_derivative(
    src: &str,
    entry: &str,
    wrt: &str,
) -> Result<ReverseDerivative, Diagnostic> {
    reverse_derivative_with(src, entry, wrt, Checkpointing::default())
}

pub fn reverse_derivative_with(
    src: &str,
    entry: &str,
    wrt: &str,
    checkpointing: Checkpointing,
) -> Result<ReverseDerivative, Diagnostic> {
    let s = Session::load(src)?;
    let base = s.entry(entry)?;
    let k = s.param(entry, wrt)?;
    let rev = s.get(&Artefact::Reverse {
        entry: Rc::from(entry),
        wrt: k,
        checkpointing,
    })?;
    Ok(ReverseDerivative {
        seeded: base.result != Type::Double,
        base,
        rev,
        wrt: k,
    })
}

/// Optimises an entry of its own session (`e.artefact`), rebuilt from its
/// program: for tests only.
pub fn optimise_entry(e: &Entry, opts: &OptOptions) -> Result<OptimisedEntry, Diagnostic> {
    let mut rules = crate::opt::load(opts.rules.as_deref()).map_err(|r| Diagnostic {
        code: r.code,
        message: r.render(),
        span: crate::diagnostic::Span::generated(),
        notes: Vec::new(),
    })?;
    let exact = false;
    if exact {
        rules.retain(|r| !r.has_tag("ieee-inexact"));
    }
    let o = super::optimise::optimise(e.artefact.clone().optimised(), e, &rules, opts)?;
    Ok(OptimisedEntry {
        entry: o.entry,
        report: o.report,
        rules: o.rules,
    })
}

pub fn batched(e: &Entry) -> Result<Rc<Entry>, Diagnostic> {
    super::batch::batched(e.artefact.clone().batched(), e).map(Rc::new)
}
