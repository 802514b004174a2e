//! [`Session`]: one program loaded once — parsed, inferred — and every
//! program derived from it, built on demand and cached by what it is
//! ([`Artefact`]). A command makes one session; tests make one per
//! program.

use std::cell::{OnceCell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use super::passes::{Pass, timed};
use super::typed::{check, entry_of, no_param};
use super::{Artefact, Entry, Form, OptOptions, Optimised, parse};
use crate::ad::ForwardMode;
use crate::diagnostic::{Diagnostic, Span};
use crate::interchange::InputError;
use crate::ir::{Program, Type};
use crate::opt::RuleDef;
use crate::types::{Typing, infer_program};

/// A loaded program and the programs derived from it.
pub struct Session {
    /// The prelude and the user's program, parsed once.
    program: Program,
    /// Their types, inferred once.
    typing: Typing,
    /// How `Artefact::Optimised` optimises.
    opt: OptOptions,
    /// How every entry is compiled for the JIT (the floating-point
    /// contract, the threads).
    native: crate::codegen::NativeOptions,
    rules: OnceCell<Result<Rc<Vec<RuleDef>>, Diagnostic>>,
    built: RefCell<HashMap<Artefact, Rc<Entry>>>,
    optimised: RefCell<HashMap<Artefact, Rc<Optimised>>>,
}

impl Session {
    /// Parses and type-checks the prelude and `src`.
    pub fn load(src: &str) -> Result<Session, Diagnostic> {
        let program = parse(src)?;
        Session::of_program(program)
    }

    /// A session for a program already parsed (prelude included).
    pub fn of_program(program: Program) -> Result<Session, Diagnostic> {
        let typing =
            timed(Pass::Infer, || infer_program(&program)).map_err(|e| Diagnostic::from(&e))?;
        Ok(Session {
            program,
            typing,
            opt: OptOptions::default(),
            native: Default::default(),
            rules: OnceCell::new(),
            built: RefCell::new(HashMap::new()),
            optimised: RefCell::new(HashMap::new()),
        })
    }

    /// This session with the optimiser's options (the rules, the limits,
    /// `opt --check`).
    pub fn with_options(mut self, opt: OptOptions) -> Session {
        self.opt = opt;
        self.rules = OnceCell::new();
        self.optimised.borrow_mut().clear();
        self
    }

    /// This session with native code compiled under `native` (before any
    /// entry is built).
    pub fn with_native(mut self, native: crate::codegen::NativeOptions) -> Session {
        self.native = native;
        self
    }

    /// How entries are compiled for the JIT.
    pub fn native_options(&self) -> crate::codegen::NativeOptions {
        self.native
    }

    /// The parsed program, prelude first.
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// The inferred types of [`Session::program`].
    pub fn typing(&self) -> &Typing {
        &self.typing
    }

    /// The optimiser's options.
    pub fn options(&self) -> &OptOptions {
        &self.opt
    }

    /// The monomorphic program of the definition `name`.
    pub fn entry(&self, name: &str) -> Result<Rc<Entry>, Diagnostic> {
        self.get(&Artefact::entry(name))
    }

    /// The position of the parameter `wrt` of entry `name`.
    pub fn param(&self, name: &str, wrt: &str) -> Result<usize, Diagnostic> {
        let base = self.entry(name)?;
        base.params
            .iter()
            .position(|(n, _)| n == wrt)
            .ok_or_else(|| {
                Diagnostic::from(&InputError::Params {
                    message: format!(
                        "`{name}` has no parameter `{wrt}` (parameters: {})",
                        base.signature()
                    ),
                    span: base.span,
                })
            })
    }

    /// The program `a`, built once.
    pub fn get(&self, a: &Artefact) -> Result<Rc<Entry>, Diagnostic> {
        if let Some(e) = self.built.borrow().get(a) {
            return Ok(e.clone());
        }
        let e = self.build(a)?;
        e.set_native_options(self.native);
        self.built.borrow_mut().insert(a.clone(), e.clone());
        Ok(e)
    }

    /// The optimiser's output for `of` with its report (what `fsmooth opt`
    /// prints), built once.
    pub fn optimise(&self, of: &Artefact, exact_only: bool) -> Result<Rc<Optimised>, Diagnostic> {
        let key = Artefact::Optimised {
            of: Rc::new(of.clone()),
            exact_only,
        };
        if let Some(o) = self.optimised.borrow().get(&key) {
            return Ok(o.clone());
        }
        let input = self.get(of)?;
        let mut rules = (*self.rules()?).clone();
        if exact_only {
            rules.retain(|r| !r.has_tag("ieee-inexact"));
        }
        let o = Rc::new(super::optimise::optimise(
            key.clone(),
            &input,
            &rules,
            &self.opt,
        )?);
        o.entry.set_native_options(self.native);
        self.optimised.borrow_mut().insert(key, o.clone());
        Ok(o)
    }

    /// The rule set of the optimiser's options, loaded once.
    pub fn rules(&self) -> Result<Rc<Vec<RuleDef>>, Diagnostic> {
        self.rules
            .get_or_init(|| {
                crate::opt::load(self.opt.rules.as_deref())
                    .map(Rc::new)
                    .map_err(|r| Diagnostic {
                        code: r.code,
                        message: r.render(),
                        span: crate::diagnostic::Span::generated(),
                        notes: Vec::new(),
                    })
            })
            .clone()
    }

    fn build(&self, a: &Artefact) -> Result<Rc<Entry>, Diagnostic> {
        let e = match a {
            Artefact::Entry { name, mode } => {
                entry_of(a.clone(), &self.program, &self.typing, name, *mode, false)
            }
            Artefact::Forward { entry, wrt, form } => {
                let base = self.entry(entry)?;
                super::forward::wrapper(
                    (&self.program, &self.typing),
                    a.clone(),
                    &base,
                    *wrt,
                    *form,
                )
            }
            Artefact::Reverse {
                entry,
                wrt,
                checkpointing,
            } => {
                let base = self.entry(entry)?;
                self.reverse(a.clone(), &base, *wrt, *checkpointing)
            }
            Artefact::Optimised { of, exact_only } => {
                return Ok(self.optimise(of, *exact_only)?.entry.clone());
            }
            Artefact::Batched(of) => {
                let e = self.get(of)?;
                super::batch::batched(a.clone(), &e)
            }
        };
        // A derived program answers for the user's entry it derives from:
        // its errors without a span of their own point there.
        let mut e = e?;
        if e.span == Span::generated()
            && !matches!(a, Artefact::Entry { .. })
            && let Ok(base) = self.entry(a.base())
        {
            e.span = base.span;
        }
        Ok(Rc::new(e))
    }

    /// `rev'entry` of `base` with respect to parameter `k`.
    fn reverse(
        &self,
        a: Artefact,
        base: &Entry,
        k: usize,
        checkpointing: crate::ad::Checkpointing,
    ) -> Result<Entry, Diagnostic> {
        if k >= base.params.len() {
            return Err(no_param(base, k));
        }
        let seeded = base.result != Type::Double;
        let normal = base.normal().map_err(|e| Diagnostic::from(&e))?;
        let (program, _) = timed(Pass::Reverse, || {
            crate::ad::reverse_program(&normal, k, seeded, checkpointing)
        })
        .map_err(|e| Diagnostic::from(&e))?;
        // Reverse mode's output is ordinary code: type-check it like any program.
        let typing = check(&program)?;
        entry_of(
            a,
            &program,
            &typing,
            "rev'entry",
            ForwardMode::Scalar,
            false,
        )
    }
}

impl Form {
    /// The forward mode that expands the wrapper's `deriv`.
    pub fn mode(self) -> ForwardMode {
        match self {
            Form::Duals(m) | Form::Tangents(m) => m,
            Form::Rows => ForwardMode::Vector,
        }
    }
}
