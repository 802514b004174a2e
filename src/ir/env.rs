//! A persistent environment from names to compile-time values: what the
//! partial evaluators over static closures (`anf::normalise`,
//! `ad::specialise`) carry. Extending it shares the rest, so a closure can
//! keep the environment it was made in at no cost.

use std::rc::Rc;

use super::Name;

/// Names bound to values of type `V`, innermost first.
pub struct Env<V>(Option<Rc<Node<V>>>);

struct Node<V> {
    name: Name,
    value: V,
    next: Env<V>,
}

impl<V> Clone for Env<V> {
    fn clone(&self) -> Self {
        Env(self.0.clone())
    }
}

impl<V> Default for Env<V> {
    fn default() -> Self {
        Env(None)
    }
}

impl<V: Clone> Env<V> {
    /// The empty environment.
    pub fn empty() -> Self {
        Env(None)
    }

    /// The innermost binding of `x`.
    pub fn lookup(&self, x: &Name) -> Option<V> {
        let mut cur = self.0.as_ref();
        while let Some(n) = cur {
            if n.name == *x {
                return Some(n.value.clone());
            }
            cur = n.next.0.as_ref();
        }
        None
    }

    /// This environment with `name` bound to `value` (shadowing).
    pub fn bind(&self, name: Name, value: V) -> Self {
        Env(Some(Rc::new(Node {
            name,
            value,
            next: self.clone(),
        })))
    }
}
