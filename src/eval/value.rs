//! Runtime values of the reference evaluator (spec/semantics.md, "Values").
//! Closures pair a lambda node with its environment; environments are
//! persistent linked lists indexed by de Bruijn depth. Arrays made by
//! `addAt` are persistent arrays ([`PArray`], Note [Persistent arrays]):
//! the same values as [`Value::Array`], with O(1) updates of the newest
//! version. They never leave the machine: [`Value::frozen`] turns them
//! into plain arrays before a result is returned.

use std::cell::RefCell;
use std::fmt;
use std::rc::Rc;

use crate::ir::ExprId;

#[derive(Clone, Debug)]
pub enum Value {
    Double(f64),
    Index(i64),
    Bool(bool),
    Pair(Rc<(Value, Value)>),
    Array(Rc<Vec<Value>>),
    /// An array made by `addAt` (E-AddAt): the same value as the `Array`
    /// of its elements.
    Persistent(Rc<PArray>),
    Closure(Rc<Closure>),
}

// Note [Persistent arrays]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// `addAt a i c` returns a new array and leaves `a` unchanged (E-AddAt).
// Copying `a` would make reverse mode's dense accumulators cost the
// array's length per contribution, although the generated code never
// looks at an old version again (spec/ad-reverse.md §5.6). So the
// results of `addAt` are Baker's persistent arrays (the "version trees"
// of Conchon and Filliâtre's persistent arrays): every version is a
// node, and exactly one node of a family, the root, holds the elements;
// every other node holds one slot's value and the node it differs from.
// An update of the root moves the elements into a new root, and the old
// node keeps the one slot it had: O(1). Reading or updating an older
// node first *reroots*: the chain of differences from it to the root is
// reversed, so it becomes the root (O(length of the chain)). Every node
// always denotes the same array, so this is invisible in the semantics;
// only the cost of non-linear use differs, and the generated code is
// linear. Chains are walked with loops, and dropped with one (a long
// chain would overflow the stack through recursive drops).

/// A version of a persistent array (Note [Persistent arrays]).
#[derive(Debug)]
pub struct PArray(RefCell<PNode>);

#[derive(Debug)]
enum PNode {
    /// The elements: this version is the root.
    Root(Vec<Value>),
    /// This version is `next` with slot `index` set to `value`.
    Diff {
        index: usize,
        value: Value,
        next: Rc<PArray>,
    },
    /// Only while rerooting or dropping.
    Hole,
}

impl PArray {
    /// A root holding `items`.
    pub fn new(items: Vec<Value>) -> Rc<PArray> {
        Rc::new(PArray(RefCell::new(PNode::Root(items))))
    }

    /// Makes `this` the root of its family.
    fn reroot(this: &Rc<PArray>) {
        // The chain this → … → root.
        let mut chain = vec![this.clone()];
        loop {
            let next = match &*chain.last().expect("non-empty").0.borrow() {
                PNode::Root(_) => break,
                PNode::Diff { next, .. } => next.clone(),
                PNode::Hole => unreachable!("a hole outside rerooting"),
            };
            chain.push(next);
        }
        // Move the elements back along the chain, one difference at a time.
        for k in (0..chain.len() - 1).rev() {
            let (near, far) = (&chain[k], &chain[k + 1]);
            let PNode::Diff { index, value, .. } = near.0.replace(PNode::Hole) else {
                unreachable!("the chain's nodes are differences")
            };
            let PNode::Root(mut items) = far.0.replace(PNode::Hole) else {
                unreachable!("the chain ends at the root")
            };
            let old = std::mem::replace(&mut items[index], value);
            *far.0.borrow_mut() = PNode::Diff {
                index,
                value: old,
                next: near.clone(),
            };
            *near.0.borrow_mut() = PNode::Root(items);
        }
    }

    /// Calls `f` on the elements.
    pub fn with<R>(this: &Rc<PArray>, f: impl FnOnce(&[Value]) -> R) -> R {
        Self::reroot(this);
        match &*this.0.borrow() {
            PNode::Root(items) => f(items),
            _ => unreachable!("rerooted"),
        }
    }

    /// The new version with slot `index` (in bounds) set to `f(old value)`.
    pub fn update(this: &Rc<PArray>, index: usize, f: impl FnOnce(&Value) -> Value) -> Rc<PArray> {
        Self::reroot(this);
        let PNode::Root(mut items) = this.0.replace(PNode::Hole) else {
            unreachable!("rerooted")
        };
        let old = items[index].clone();
        items[index] = f(&old);
        let new = PArray::new(items);
        *this.0.borrow_mut() = PNode::Diff {
            index,
            value: old,
            next: new.clone(),
        };
        new
    }
}

impl Drop for PArray {
    fn drop(&mut self) {
        // Unlink the chain iteratively: each node we own the last
        // reference to is emptied before it is dropped.
        let mut next = match self.0.replace(PNode::Hole) {
            PNode::Diff { next, .. } => Some(next),
            _ => None,
        };
        while let Some(rc) = next.take() {
            if let Ok(node) = Rc::try_unwrap(rc)
                && let PNode::Diff { next: n, .. } = node.0.replace(PNode::Hole)
            {
                next = Some(n);
            }
        }
    }
}

#[derive(Debug)]
pub struct Closure {
    /// The `Expr::Lam` node.
    pub lam: ExprId,
    pub env: Env,
}

/// A persistent environment: innermost binding first.
pub type Env = Option<Rc<EnvNode>>;

#[derive(Debug)]
pub struct EnvNode {
    pub value: Value,
    pub next: Env,
}

pub fn env_push(env: &Env, value: Value) -> Env {
    Some(Rc::new(EnvNode {
        value,
        next: env.clone(),
    }))
}

pub fn env_get(env: &Env, depth: u32) -> Option<&Value> {
    let mut cur = env.as_ref()?;
    for _ in 0..depth {
        cur = cur.next.as_ref()?;
    }
    Some(&cur.value)
}

impl Value {
    pub fn pair(a: Value, b: Value) -> Value {
        Value::Pair(Rc::new((a, b)))
    }

    pub fn array(items: Vec<Value>) -> Value {
        Value::Array(Rc::new(items))
    }

    /// Calls `f` on the elements of an array (plain or persistent), or
    /// returns None for any other value.
    pub fn with_elements<R>(&self, f: impl FnOnce(&[Value]) -> R) -> Option<R> {
        match self {
            Value::Array(items) => Some(f(items)),
            Value::Persistent(p) => Some(PArray::with(p, f)),
            _ => None,
        }
    }

    /// The same value with every persistent array inside it a plain one
    /// (for everything outside the machine).
    pub fn frozen(&self) -> Value {
        match self {
            Value::Persistent(p) => Value::array(PArray::with(p, |items| {
                items.iter().map(Value::frozen).collect()
            })),
            Value::Array(items) if items.iter().any(Value::holds_persistent) => {
                Value::array(items.iter().map(Value::frozen).collect())
            }
            Value::Pair(p) if p.0.holds_persistent() || p.1.holds_persistent() => {
                Value::pair(p.0.frozen(), p.1.frozen())
            }
            other => other.clone(),
        }
    }

    fn holds_persistent(&self) -> bool {
        match self {
            Value::Persistent(_) => true,
            Value::Array(items) => items.iter().any(Value::holds_persistent),
            Value::Pair(p) => p.0.holds_persistent() || p.1.holds_persistent(),
            _ => false,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Double(x) => Some(*x),
            _ => None,
        }
    }

    /// Structural equality with bitwise comparison of doubles; closures are
    /// never equal.
    pub fn same(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Double(a), Value::Double(b)) => a.to_bits() == b.to_bits(),
            (Value::Index(a), Value::Index(b)) => a == b,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Pair(a), Value::Pair(b)) => a.0.same(&b.0) && a.1.same(&b.1),
            (Value::Array(a), Value::Array(b)) => {
                a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| x.same(y))
            }
            (Value::Persistent(_), _) | (_, Value::Persistent(_)) => {
                self.frozen().same(&other.frozen())
            }
            _ => false,
        }
    }

    /// The largest ADBench ρ(x, y) = |x−y| / max(1, |x|+|y|) over matching
    /// doubles, or None when the shapes differ.
    pub fn max_rho(&self, other: &Value) -> Option<f64> {
        match (self, other) {
            (Value::Double(a), Value::Double(b)) => Some(crate::numeric::rho(*a, *b)),
            (Value::Index(a), Value::Index(b)) => (a == b).then_some(0.0),
            (Value::Bool(a), Value::Bool(b)) => (a == b).then_some(0.0),
            (Value::Pair(a), Value::Pair(b)) => Some(a.0.max_rho(&b.0)?.max(a.1.max_rho(&b.1)?)),
            (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
                let mut m: f64 = 0.0;
                for (x, y) in a.iter().zip(b.iter()) {
                    m = m.max(x.max_rho(y)?);
                }
                Some(m)
            }
            (Value::Persistent(_), _) | (_, Value::Persistent(_)) => {
                self.frozen().max_rho(&other.frozen())
            }
            _ => None,
        }
    }
}

/// The doubles of a value, in order (Index and Bool parts have no
/// derivatives and are skipped, consistently with [`unflatten`]): the
/// order of gradients, Jacobian columns and cotangent seeds.
pub fn flatten(v: &Value, out: &mut Vec<f64>) {
    match v {
        Value::Double(x) => out.push(*x),
        Value::Index(_) => {}
        Value::Array(items) => items.iter().for_each(|x| flatten(x, out)),
        Value::Persistent(_) => flatten(&v.frozen(), out),
        Value::Pair(p) => {
            flatten(&p.0, out);
            flatten(&p.1, out);
        }
        Value::Bool(_) | Value::Closure(_) => {}
    }
}

/// `v` with its doubles replaced, in order, by `xs` (NaN when `xs` runs out).
pub fn unflatten(v: &Value, xs: &mut impl Iterator<Item = f64>) -> Value {
    match v {
        Value::Double(_) => Value::Double(xs.next().unwrap_or(f64::NAN)),
        Value::Array(items) => Value::array(items.iter().map(|x| unflatten(x, xs)).collect()),
        Value::Pair(p) => {
            let a = unflatten(&p.0, xs);
            let b = unflatten(&p.1, xs);
            Value::pair(a, b)
        }
        other => other.clone(),
    }
}

impl fmt::Display for Value {
    /// JSON: numbers, `true`/`false`, arrays and tuples as JSON arrays.
    /// Doubles always carry a decimal point or exponent; non-finite doubles
    /// print as the strings "NaN", "Infinity", "-Infinity".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Double(x) => {
                if x.is_nan() {
                    write!(f, "\"NaN\"")
                } else if x.is_infinite() {
                    write!(f, "\"{}Infinity\"", if *x < 0.0 { "-" } else { "" })
                } else {
                    write!(f, "{x:?}")
                }
            }
            Value::Index(i) => write!(f, "{i}"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Pair(p) => write!(f, "[{}, {}]", p.0, p.1),
            Value::Array(a) => {
                write!(f, "[")?;
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{x}")?;
                }
                write!(f, "]")
            }
            Value::Persistent(_) => write!(f, "{}", self.frozen()),
            Value::Closure(_) => write!(f, "\"<function>\""),
        }
    }
}

impl serde::Serialize for Value {
    /// The JSON of [`Value`]'s `Display`: numbers, booleans, arrays (tuples
    /// too); a non-finite Double as the string `"NaN"`, `"Infinity"` or
    /// `"-Infinity"`; a function as the string `"<function>"`.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        match self {
            Value::Double(x) if x.is_nan() => s.serialize_str("NaN"),
            Value::Double(x) if x.is_infinite() => {
                s.serialize_str(if *x < 0.0 { "-Infinity" } else { "Infinity" })
            }
            Value::Double(x) => s.serialize_f64(*x),
            Value::Index(i) => s.serialize_i64(*i),
            Value::Bool(b) => s.serialize_bool(*b),
            Value::Pair(p) => {
                let mut seq = s.serialize_seq(Some(2))?;
                seq.serialize_element(&p.0)?;
                seq.serialize_element(&p.1)?;
                seq.end()
            }
            Value::Array(a) => {
                let mut seq = s.serialize_seq(Some(a.len()))?;
                for x in a.iter() {
                    seq.serialize_element(x)?;
                }
                seq.end()
            }
            Value::Persistent(_) => self.frozen().serialize(s),
            Value::Closure(_) => s.serialize_str("<function>"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doubles(p: &Rc<PArray>) -> Vec<f64> {
        PArray::with(p, |items| items.iter().filter_map(Value::as_f64).collect())
    }

    /// Every version keeps its value, whichever is read or updated last
    /// (Note [Persistent arrays]).
    #[test]
    fn every_version_denotes_its_own_array() {
        let v0 = PArray::new(vec![Value::Double(0.0); 3]);
        let add = |p: &Rc<PArray>, i: usize, x: f64| {
            PArray::update(p, i, |old| Value::Double(old.as_f64().unwrap() + x))
        };
        let v1 = add(&v0, 0, 1.0);
        let v2 = add(&v1, 1, 2.0);
        // Branch from an older version, then read them all in every order.
        let w2 = add(&v1, 1, 5.0);
        assert_eq!(doubles(&v2), [1.0, 2.0, 0.0]);
        assert_eq!(doubles(&v0), [0.0, 0.0, 0.0]);
        assert_eq!(doubles(&w2), [1.0, 5.0, 0.0]);
        assert_eq!(doubles(&v1), [1.0, 0.0, 0.0]);
        let v3 = add(&v2, 2, 3.0);
        assert_eq!(doubles(&v0), [0.0, 0.0, 0.0]);
        assert_eq!(doubles(&v3), [1.0, 2.0, 3.0]);
        assert_eq!(doubles(&v2), [1.0, 2.0, 0.0]);
    }

    /// A chain of a million versions is rerooted and dropped without
    /// recursion.
    #[test]
    fn long_chains_reroot_and_drop_iteratively() {
        let first = PArray::new(vec![Value::Double(0.0)]);
        let mut cur = first.clone();
        for _ in 0..1_000_000 {
            cur = PArray::update(&cur, 0, |old| Value::Double(old.as_f64().unwrap() + 1.0));
        }
        assert_eq!(doubles(&first), [0.0]);
        assert_eq!(doubles(&cur), [1_000_000.0]);
        drop(cur);
        drop(first);
    }
}
