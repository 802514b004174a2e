//! [`Choices`]: the decoder every generator and mutator of the fuzzing
//! harness reads its decisions from. A case is a sequence of `u32`
//! choices drawn by proptest's `TestRunner` (the campaign); each
//! generator turns choices into an input by asking questions (`pick`,
//! `chance`, `below`), so proptest shrinks an input by shrinking its
//! choice sequence: fewer or smaller choices give smaller, simpler
//! inputs, and running out of choices always answers 0, the simplest
//! option. This is `testgen`'s design (a program decoded from a list of
//! choices), shared by every input kind.

/// A cursor over a choice sequence.
pub struct Choices<'a> {
    choices: &'a [u32],
    pos: usize,
}

impl<'a> Choices<'a> {
    pub fn new(choices: &'a [u32]) -> Choices<'a> {
        Choices { choices, pos: 0 }
    }

    /// The next raw choice (0 once the sequence is used up).
    pub fn raw(&mut self) -> u32 {
        let c = self.choices.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        c
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            self.pos += 1;
            return 0;
        }
        (self.raw() as usize) % n
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi.saturating_sub(lo) + 1)
    }

    /// True with probability 1/`n` (never once the choices are used up:
    /// the simplest input takes no rare branch).
    pub fn one_in(&mut self, n: u32) -> bool {
        n > 0 && self.raw() % n == n - 1
    }

    /// An element of `items` (the first when the choices are used up).
    pub fn pick<'b, T>(&mut self, items: &'b [T]) -> &'b T {
        &items[self.below(items.len())]
    }

    /// An index chosen with the given weights (the first when the choices
    /// are used up).
    pub fn weighted(&mut self, weights: &[u32]) -> usize {
        let total: u32 = weights.iter().sum();
        if total == 0 {
            return 0;
        }
        let mut x = self.raw() % total;
        for (i, w) in weights.iter().enumerate() {
            if x < *w {
                return i;
            }
            x -= w;
        }
        weights.len() - 1
    }

    /// A count that is usually small: 0 with probability 1/2, 1 with 1/4,
    /// …, at most `max`.
    pub fn geometric(&mut self, max: usize) -> usize {
        let mut n = 0;
        while n < max && self.raw() % 2 == 1 {
            n += 1;
        }
        n
    }

    /// How many choices have been read (past the end included).
    pub fn used(&self) -> usize {
        self.pos
    }
}
