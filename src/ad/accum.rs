//! Dense cotangent accumulators for reverse mode (spec/ad-reverse.md
//! §5.6): the code that creates them and moves cotangents in and out.
//!
//! An *accumulable* variable has a type `Array^k<Double>` (k ≥ 1). Its
//! cotangent can live in a **flat accumulator**: an `Array<Double>` with
//! one slot per Double of the value (its *leaves*, row after row), which
//! the reverse sweep updates with `addAt` (E-AddAt). A variable's
//! **place** is the accumulator it adds into and its **node**: for
//! `Array<Double>` the Index of its first leaf in the accumulator; for
//! `Array<T>` an array holding the nodes of its elements
//! (`node_type`). A read `y = w[i]` of a placed `w` is placed at
//! `node_w[i]` in the same accumulator, so a matrix row, and a row of one
//! of its rows, add straight into the matrix's accumulator.
//!
//! Every function here builds F̃ code with the [`Builder`]; the values it
//! reads more than once are passed as variables ([`V`]). All loops are
//! over the *primal* value's lengths, so a cotangent is always shaped like
//! its primal (ragged arrays included).

use crate::ir::build::Builder;
use crate::ir::{ExprId, Name, Prim, Type};

/// A variable and its type, read as often as needed.
#[derive(Clone, Debug)]
pub struct V {
    pub name: Name,
    pub ty: Type,
}

impl V {
    pub fn new(name: &Name, ty: &Type) -> V {
        V {
            name: name.clone(),
            ty: ty.clone(),
        }
    }

    fn at(&self, b: &mut Builder<'_>) -> ExprId {
        b.var(&self.name, self.ty.clone())
    }
}

/// Whether a value of type `t` can keep its cotangent in a flat
/// accumulator: `Array^k<Double>`, k ≥ 1.
pub fn accumulable(t: &Type) -> bool {
    match t {
        Type::Array(e) => **e == Type::Double || accumulable(e),
        _ => false,
    }
}

/// The type of the node of an accumulable type: `Index` for
/// `Array<Double>`, `Array<node>` otherwise.
pub fn node_type(t: &Type) -> Type {
    match t {
        Type::Array(e) if **e == Type::Double => Type::Index,
        Type::Array(e) => Type::array(node_type(e)),
        _ => unreachable!("only accumulable types have nodes"),
    }
}

fn elem(t: &Type) -> &Type {
    match t {
        Type::Array(e) => e,
        _ => unreachable!("an array type"),
    }
}

/// `let y = value in body(y)`, `y` fresh.
fn bind(
    b: &mut Builder<'_>,
    base: &str,
    value: ExprId,
    body: impl FnOnce(&mut Builder<'_>, V) -> ExprId,
) -> ExprId {
    let y = V {
        name: b.fresh(base),
        ty: b.ty(value),
    };
    let e = body(b, y.clone());
    b.let_(y.name, value, e)
}

/// `ifold (fun s j -> step(s, j)) z n`, the state of `z`'s type.
pub fn fold(
    b: &mut Builder<'_>,
    z: ExprId,
    n: ExprId,
    step: impl FnOnce(&mut Builder<'_>, V, V) -> ExprId,
) -> ExprId {
    loop_over(b, Prim::IFold, z, n, step)
}

/// `ifold` or `iscan` of `fun s j -> step(s, j)` from `z` for `n` steps.
fn loop_over(
    b: &mut Builder<'_>,
    op: Prim,
    z: ExprId,
    n: ExprId,
    step: impl FnOnce(&mut Builder<'_>, V, V) -> ExprId,
) -> ExprId {
    let st = b.ty(z);
    let s = V {
        name: b.fresh("s"),
        ty: st.clone(),
    };
    let j = V {
        name: b.fresh("j"),
        ty: Type::Index,
    };
    let body = step(b, s.clone(), j.clone());
    let lj = b.lam(j.name, Type::Index, body);
    let f = b.lam(s.name, st.clone(), lj);
    let ty = if op == Prim::IScan {
        Type::array(st)
    } else {
        st
    };
    b.prim(op, vec![f, z, n], ty)
}

/// `x[j]` bound to a fresh variable around `body`.
fn element(
    b: &mut Builder<'_>,
    x: &V,
    j: &V,
    body: impl FnOnce(&mut Builder<'_>, V) -> ExprId,
) -> ExprId {
    let xv = x.at(b);
    let jv = j.at(b);
    let xj = b.get(xv, jv);
    bind(b, "x", xj, body)
}

/// `a + b` on Indices.
fn iadd(b: &mut Builder<'_>, x: ExprId, y: ExprId) -> ExprId {
    b.prim(Prim::Add, vec![x, y], Type::Index)
}

/// The number of leaves (Doubles) of `x : t`.
pub fn leaf_count(b: &mut Builder<'_>, x: &V) -> ExprId {
    let xv = x.at(b);
    let n = b.length(xv);
    let e = elem(&x.ty).clone();
    if e == Type::Double {
        return n;
    }
    let z = b.index(0);
    fold(b, z, n, |b, s, j| {
        element(b, x, &j, |b, xj| {
            let c = leaf_count(b, &xj);
            let sv = s.at(b);
            iadd(b, sv, c)
        })
    })
}

/// The node of `x` when its first leaf is at `base` (an Index variable):
/// `base` itself for a vector; for a matrix the `iscan` of its row lengths
/// from `base` (one more entry than rows, never read); deeper, the nodes
/// of the elements from the `iscan` of their leaf counts.
pub fn offsets(b: &mut Builder<'_>, x: &V, base: &V) -> ExprId {
    let e = elem(&x.ty).clone();
    if e == Type::Double {
        return base.at(b);
    }
    let z = base.at(b);
    let xv = x.at(b);
    let n = b.length(xv);
    let starts = loop_over(b, Prim::IScan, z, n, |b, s, j| {
        element(b, x, &j, |b, xj| {
            let c = leaf_count(b, &xj);
            let sv = s.at(b);
            iadd(b, sv, c)
        })
    });
    if *elem(&e) == Type::Double {
        return starts;
    }
    bind(b, "starts", starts, |b, st| {
        let xv = x.at(b);
        let n = b.length(xv);
        b.build(n, |b, j| {
            let j = V {
                name: j.clone(),
                ty: Type::Index,
            };
            element(b, x, &j, |b, xj| {
                element(b, &st, &j, |b, bj| offsets(b, &xj, &bj))
            })
        })
    })
}

/// `build n (fun _ -> 0.0)`.
pub fn zeros(b: &mut Builder<'_>, n: ExprId) -> ExprId {
    b.build(n, |b, _| b.double(0.0))
}

/// `addAt acc k c`.
pub fn add_at(b: &mut Builder<'_>, acc: ExprId, k: ExprId, c: ExprId) -> ExprId {
    let t = b.ty(acc);
    b.prim(Prim::AddAt, vec![acc, k, c], t)
}

/// The accumulator `acc` with the sparse cotangent `list : CT[t]` of a
/// value of type `t` placed at `node` added in, contribution by
/// contribution, in order.
pub fn scatter(b: &mut Builder<'_>, acc: ExprId, node: &V, list: &V, t: &Type) -> ExprId {
    let lv = list.at(b);
    let n = b.length(lv);
    let e = elem(t).clone();
    fold(b, acc, n, |b, a, k| {
        element(b, list, &k, |b, pr| {
            let pv = pr.at(b);
            let j = b.fst(pv);
            let pv = pr.at(b);
            let c = b.snd(pv);
            if e == Type::Double {
                let nd = node.at(b);
                let at = iadd(b, nd, j);
                let av = a.at(b);
                add_at(b, av, at, c)
            } else {
                let nd = node.at(b);
                let sub_node = b.get(nd, j);
                bind(b, "node", sub_node, |b, sn| {
                    bind(b, "c", c, |b, cv| {
                        let av = a.at(b);
                        scatter(b, av, &sn, &cv, &e)
                    })
                })
            }
        })
    })
}

/// The accumulator `dst` with the cotangent of `x` (its primal, for the
/// lengths) held in accumulator `src` at `snode` added at `dnode`.
pub fn slice_add(b: &mut Builder<'_>, dst: ExprId, dnode: &V, src: &V, snode: &V, x: &V) -> ExprId {
    let xv = x.at(b);
    let n = b.length(xv);
    let e = elem(&x.ty).clone();
    fold(b, dst, n, |b, a, j| {
        if e == Type::Double {
            let sn = snode.at(b);
            let jv = j.at(b);
            let from = iadd(b, sn, jv);
            let sv = src.at(b);
            let c = b.get(sv, from);
            let dn = dnode.at(b);
            let jv = j.at(b);
            let to = iadd(b, dn, jv);
            let av = a.at(b);
            add_at(b, av, to, c)
        } else {
            element(b, x, &j, |b, xj| {
                element(b, dnode, &j, |b, dn| {
                    element(b, snode, &j, |b, sn| {
                        let av = a.at(b);
                        slice_add(b, av, &dn, src, &sn, &xj)
                    })
                })
            })
        }
    })
}

/// The cotangent of `x` held in accumulator `src` at `node`, as CT[t]: a
/// sparse list with one contribution per element.
pub fn to_sparse(b: &mut Builder<'_>, src: &V, node: &V, x: &V) -> ExprId {
    read_out(b, src, node, x, true)
}

/// The cotangent of `x` held in accumulator `acc` at `node` as a dense
/// value shaped like `x`.
pub fn reshape(b: &mut Builder<'_>, acc: &V, node: &V, x: &V) -> ExprId {
    read_out(b, acc, node, x, false)
}

/// [`to_sparse`] (`sparse`: every element paired with its index) or
/// [`reshape`]: element by element, a Double read at `node + j`, an array
/// read out at its own node.
fn read_out(b: &mut Builder<'_>, acc: &V, node: &V, x: &V, sparse: bool) -> ExprId {
    let xv = x.at(b);
    let n = b.length(xv);
    let e = elem(&x.ty).clone();
    b.build(n, |b, j| {
        let j = V {
            name: j.clone(),
            ty: Type::Index,
        };
        let c = if e == Type::Double {
            let nd = node.at(b);
            let jv = j.at(b);
            let at = iadd(b, nd, jv);
            let av = acc.at(b);
            b.get(av, at)
        } else {
            element(b, x, &j, |b, xj| {
                element(b, node, &j, |b, nd| read_out(b, acc, &nd, &xj, sparse))
            })
        };
        if sparse {
            let jv = j.at(b);
            b.pair(jv, c)
        } else {
            c
        }
    })
}
