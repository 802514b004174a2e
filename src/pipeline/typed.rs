//! From a typed program to an [`Entry`]: monomorphisation for the entry,
//! forward mode's expansion of its `deriv`s, and the type checks of what
//! the passes generated (AD's output is ordinary code). Every artefact of
//! a session becomes an entry here.

use cranelift_entity::SecondaryMap;

use super::passes::{Pass, timed};
use super::{Artefact, Entry, generated};
use crate::ad::{AdError, ForwardMode};
use crate::diagnostic::Diagnostic;
use crate::interchange::InputError;
use crate::ir::{ExprId, Program, Type};
use crate::types::{Typing, infer_appended, infer_program, monomorphise};

/// `program` (which extends the program `base` typed with definitions at
/// its end) typed by inferring only what was appended.
pub(super) fn typed_appended(program: &Program, base: &Typing) -> Result<Typing, Diagnostic> {
    timed(Pass::InferAppended, || infer_appended(program, base))
        .map_err(|e| generated(Diagnostic::from(&e)))
}

/// A parameter position out of range (an artefact made by hand).
pub(super) fn no_param(base: &Entry, k: usize) -> Diagnostic {
    Diagnostic::from(&InputError::Params {
        message: format!(
            "`{}` has no parameter number {} (parameters: {})",
            base.name,
            k + 1,
            base.signature()
        ),
        span: base.span,
    })
}

/// Type inference of a program a pass generated: an error is that pass's bug.
pub(super) fn check(program: &Program) -> Result<Typing, Diagnostic> {
    timed(Pass::Check, || infer_program(program)).map_err(|e| generated(Diagnostic::from(&e)))
}

/// The entry `name` of `program` (typed by `typing`): monomorphised for it,
/// its `deriv`s expanded in `mode` (with `rows`, the entry's own by
/// D-Vec-Rows), and checked.
pub(super) fn entry_of(
    artefact: Artefact,
    program: &Program,
    typing: &Typing,
    name: &str,
    mode: ForwardMode,
    rows: bool,
) -> Result<Entry, Diagnostic> {
    let mono = timed(Pass::Monomorphise, || monomorphise(program, typing, name))
        .map_err(|e| Diagnostic::from(&e))?;
    let (mut program, mut types): (Program, SecondaryMap<ExprId, Option<Type>>) =
        (mono.program, mono.types);
    if crate::ad::has_deriv(&program) {
        let expand = |program: &mut Program, types: &mut SecondaryMap<ExprId, Option<Type>>| {
            timed(Pass::Forward, || {
                crate::ad::expand_program(program, types, mode, rows.then_some(name))
            })
        };
        let specialise = |program: &mut Program, types: &mut SecondaryMap<ExprId, Option<Type>>| {
            timed(Pass::Specialise, || {
                crate::ad::specialise_program(program, types, name)
            })
            .map_err(|e| Diagnostic::from(&e))
        };
        // Operators on function values need every function value known
        // (§10.2); `deriv` of a function-valued free variable too, and
        // only then: other programs keep their definitions.
        if crate::ad::has_operators(&program) {
            specialise(&mut program, &mut types)?;
            expand(&mut program, &mut types).map_err(|e| Diagnostic::from(&e))?;
        } else {
            let (mut p2, mut t2) = (program.clone(), types.clone());
            match expand(&mut program, &mut types) {
                Ok(()) => {}
                Err(AdError::FunctionFreeVariable { .. }) => {
                    specialise(&mut p2, &mut t2)?;
                    expand(&mut p2, &mut t2).map_err(|e| Diagnostic::from(&e))?;
                    program = p2;
                }
                Err(e) => return Err(Diagnostic::from(&e)),
            }
        }
        // AD's output is ordinary code: type-check it and take a fresh
        // monomorphic copy (which also drops what is no longer used).
        let typing = check(&program)?;
        let mono = timed(Pass::Monomorphise, || monomorphise(&program, &typing, name))
            .map_err(|e| Diagnostic::from(&e))?;
        (program, types) = (mono.program, mono.types);
    }
    // The copy must type-check on its own: a check of monomorphisation.
    check(&program)?;
    Entry::new(artefact, name, program, types)
}
