//! The phases of the optimiser (seed 001 Fig. 9; spec/rules-format.md §9)
//! and the order they run in. A rule's `phase=NAME` tags name these
//! phases; the engine runs each phase with the rules of its group.

/// The phases of Fig. 9, in order.
pub const PHASES: &[&str] = &["inline", "fission", "simplify", "normalise", "cleanup"];

/// The phases in the order they run: Fig. 9's sequence twice, then
/// `simplify` once more, which removes the bounds tests that the last
/// `cleanup` (`ifold-single-guarded`) leaves on loop indices. The phases
/// after the first sequence refine its result and run with
/// `OptLimits::refine_iterations` (spec/rules-format.md §9.1, step 3).
pub fn schedule() -> Vec<&'static str> {
    let mut s: Vec<&'static str> = PHASES.iter().chain(PHASES).copied().collect();
    s.push("simplify");
    s
}
