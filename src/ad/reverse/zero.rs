//! Structural zeros of cotangents (spec/ad-reverse.md §5.4): R-Fst and
//! R-Snd make a pair cotangent one component of which is exactly zero;
//! R-Pair then drops that component instead of multiplying it through the
//! partials — exact over the reals, and it keeps `0 · ∞ = NaN` out of
//! IEEE results (§8).

/// Which parts of a cotangent are structural zeros: built by R-Fst/R-Snd
/// (`(x̄, 0)`), read by R-Pair, which drops a zero component instead of
/// multiplying it through the component's partials — exact over the reals,
/// and it keeps `0 · ∞ = NaN` out of IEEE results (§8).
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Zero {
    /// Not known to be zero.
    No,
    /// Exactly the zero cotangent.
    Yes,
    Pair(Box<Zero>, Box<Zero>),
}

impl Zero {
    pub(super) fn pair(a: Zero, b: Zero) -> Zero {
        match (a, b) {
            (Zero::Yes, Zero::Yes) => Zero::Yes,
            (Zero::No, Zero::No) => Zero::No,
            (a, b) => Zero::Pair(Box::new(a), Box::new(b)),
        }
    }

    /// Component `k` (0 or 1) of a pair cotangent.
    pub(super) fn component(&self, k: usize) -> Zero {
        match self {
            Zero::No => Zero::No,
            Zero::Yes => Zero::Yes,
            Zero::Pair(a, b) => {
                if k == 0 {
                    (**a).clone()
                } else {
                    (**b).clone()
                }
            }
        }
    }

    /// The mask of a sum: zero only where both are.
    pub(super) fn meet(&self, other: &Zero) -> Zero {
        match (self, other) {
            (Zero::Yes, z) | (z, Zero::Yes) => z.clone(),
            (Zero::Pair(a, b), Zero::Pair(c, d)) => Zero::pair(a.meet(c), b.meet(d)),
            _ => Zero::No,
        }
    }
}
