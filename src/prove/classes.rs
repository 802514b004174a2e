//! Equivalence classes of type variables (union–find with path
//! compression), shared by the two pattern typers of `prove/`: the SMT
//! translation's (`smt.rs`) and the Coq generator's (`coq.rs`). Each keeps
//! what it knows about a class beside it, indexed by the class's
//! representative.

#[derive(Default)]
pub(super) struct Classes {
    parent: Vec<usize>,
}

impl Classes {
    /// A new class of its own; its number.
    pub(super) fn add(&mut self) -> usize {
        self.parent.push(self.parent.len());
        self.parent.len() - 1
    }

    /// How many variables there are.
    pub(super) fn len(&self) -> usize {
        self.parent.len()
    }

    /// The representative of `v`'s class.
    pub(super) fn find(&mut self, v: usize) -> usize {
        let p = self.parent[v];
        if p == v {
            return v;
        }
        let r = self.find(p);
        self.parent[v] = r;
        r
    }

    /// Makes the representative `a` a member of `b`'s class.
    pub(super) fn join(&mut self, a: usize, b: usize) {
        self.parent[a] = b;
    }
}
