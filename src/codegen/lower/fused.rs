//! Lowering of the arrays that are never built (Note [Fusion] in
//! `codegen/passes/fuse.rs`): at its binding, a fused `build` gets its
//! guard (and, when the guard fails, the loop as written, which stops at
//! its ⊥), and a small one its elements in registers; past the binding,
//! each read computes its element ([`Live`]), and `length` needs no
//! buffer.

use std::rc::Rc;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, Value, types};

use super::{Lower, R, Vals, args_of};
use crate::anf::{Atom, Binding, Block as AnfBlock, Rhs};
use crate::codegen::abi;
use crate::codegen::compile_error;
use crate::codegen::passes::fuse::{Fused, Index};
use crate::ir::{Lit, Name, Prim};

/// A fused array past its binding.
#[derive(Clone)]
pub(super) enum Live {
    Build {
        n: Value,
        index: Name,
        body: Rc<AnfBlock>,
    },
    Literal(Rc<[Atom]>),
    /// `concat parts`, read only by `accum`.
    Concat(Atom),
    /// A small `build`'s elements, computed at its binding.
    Unrolled(Rc<[Vals]>),
}

impl Lower<'_, '_> {
    /// The binding of a fused array: for a `build`, the guard, and the
    /// array built as usual (to its ⊥) when the guard fails.
    pub(super) fn fuse(&mut self, bind: &Binding, f: Fused) -> R<()> {
        let live = match (&bind.rhs, f) {
            (Rhs::Array(items), Fused::Literal) => Live::Literal(items.clone().into()),
            (Rhs::Prim(Prim::Concat, args), Fused::Concat) => Live::Concat(args[0].clone()),
            (Rhs::Array(items), Fused::Unrolled) => {
                let elems = items.iter().map(|a| self.atom(a)).collect::<R<Vec<_>>>()?;
                Live::Unrolled(elems.into())
            }
            (
                Rhs::Loop {
                    n: Atom::Lit(Lit::Int(c), _),
                    index,
                    body,
                    ..
                },
                Fused::Unrolled,
            ) => {
                // E-Build, element by element in order (so its ⊥ is the
                // first failing element's, as in the loop).
                let mut elems = Vec::new();
                for k in 0..*c {
                    let i = self.iconst(k);
                    self.env.insert(index.clone(), vec![i]);
                    elems.push(self.block(body)?);
                }
                Live::Unrolled(elems.into())
            }
            (
                Rhs::Loop {
                    n: n_atom,
                    index,
                    body,
                    ..
                },
                Fused::Build { reads } | Fused::Parts { reads } | Fused::Records { reads },
            ) => {
                let n = self.scalar(n_atom)?;
                let mut all = self.b.ins().iconst(types::I8, 1);
                for r in &reads {
                    let len = self.length_of(&r.array)?;
                    let ok = match &r.index {
                        Index::Loop => self.b.ins().icmp(IntCC::SignedLessThanOrEqual, n, len),
                        // One unsigned test covers c < 0.
                        Index::Const(c) => {
                            let c = self.scalar(c)?;
                            self.b.ins().icmp(IntCC::UnsignedLessThan, c, len)
                        }
                        Index::Offset(c) => {
                            let c = self.scalar(c)?;
                            let fits = self.b.ins().icmp(IntCC::SignedLessThanOrEqual, n, len);
                            let nonneg =
                                self.b
                                    .ins()
                                    .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, c, 0);
                            // len − n cannot overflow: both are ≥ 0 when `fits`.
                            let room = self.b.ins().isub(len, n);
                            let within = self.b.ins().icmp(IntCC::SignedLessThanOrEqual, c, room);
                            let a = self.b.ins().band(fits, nonneg);
                            self.b.ins().band(a, within)
                        }
                    };
                    all = self.b.ins().band(all, ok);
                }
                let empty = self.b.ins().icmp_imm_s(IntCC::Equal, n, 0);
                let nonneg = self
                    .b
                    .ins()
                    .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, n, 0);
                let ok = self.b.ins().bor(empty, all);
                let ok = self.b.ins().band(ok, nonneg);
                // E-Limit too (Note [Native limits]): an array too large
                // is built as written, which stops there.
                let ok = self.and_fits(ok, n);
                let (cont, slow) = (self.b.create_block(), self.b.create_block());
                self.b.set_cold_block(slow);
                self.b.ins().brif(ok, cont, &[], slow, &[]);
                self.b.switch_to_block(slow);
                // Some element is ⊥ (Note [Fusion], exactness): the loop
                // stops there with E-Build's ⊥ and never reaches the jump.
                self.build(n_atom, index, body, &bind.ty, None)?;
                let (code, m1) = (self.iconst(abi::INDEX_OUT_OF_BOUNDS), self.iconst(-1));
                let fail = self.fail;
                self.b.ins().jump(fail, &args_of(&[code, m1, m1]));
                self.b.switch_to_block(cont);
                Live::Build {
                    n,
                    index: index.clone(),
                    body: Rc::new(body.clone()),
                }
            }
            _ => return Err(compile_error("a fused binding of the wrong kind")),
        };
        self.fused.insert(bind.name.clone(), live);
        Ok(())
    }

    /// `length a`, for a fused array or not.
    pub(super) fn length_of(&mut self, a: &Name) -> R<Value> {
        Ok(match self.fused.get(a).cloned() {
            Some(Live::Build { n, .. }) => n,
            Some(Live::Literal(items)) => self.iconst(items.len() as i64),
            Some(Live::Concat(_)) => return Err(compile_error("the length of a fused `concat`")),
            Some(Live::Unrolled(elems)) => self.iconst(elems.len() as i64),
            None => {
                let v = self
                    .env
                    .get(a)
                    .cloned()
                    .ok_or_else(|| compile_error(format!("`{a}` is not bound")))?;
                v[1]
            }
        })
    }

    /// `x[k]` of a fused `x`: E-Get-Bot's test against its length, then its
    /// element, computed here.
    pub(super) fn fused_get(&mut self, live: Live, k: &Atom) -> R<Vals> {
        match live {
            Live::Concat(_) => Err(compile_error("a read of a fused `concat`")),
            Live::Unrolled(elems) => {
                if let Atom::Lit(Lit::Int(k), _) = k
                    && let Some(v) = usize::try_from(*k).ok().and_then(|k| elems.get(k))
                {
                    return Ok(v.clone());
                }
                // E-Get / E-Get-Bot against the literal length, then the
                // element by a chain of selects.
                let j = self.scalar(k)?;
                let n = self.iconst(elems.len() as i64);
                if self.trusted == 0 {
                    let out = self.b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, j, n);
                    self.fail_if(out, abi::INDEX_OUT_OF_BOUNDS, j, n);
                }
                let mut v = elems[0].clone();
                for (e, el) in elems.iter().enumerate().skip(1) {
                    let is = self.b.ins().icmp_imm_s(IntCC::Equal, j, e as i64);
                    for (slot, x) in v.iter_mut().zip(el.iter()) {
                        *slot = self.b.ins().select(is, *x, *slot);
                    }
                }
                Ok(v)
            }
            Live::Literal(items) => {
                let Atom::Lit(Lit::Int(k), _) = k else {
                    return Err(compile_error("a fused literal read at a variable index"));
                };
                let item = usize::try_from(*k)
                    .ok()
                    .and_then(|k| items.get(k))
                    .ok_or_else(|| compile_error("a fused literal read out of bounds"))?;
                self.atom(item)
            }
            Live::Build { n, index, body } => {
                let j = self.scalar(k)?;
                if self.trusted == 0 {
                    let out = self.b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, j, n);
                    self.fail_if(out, abi::INDEX_OUT_OF_BOUNDS, j, n);
                }
                self.env.insert(index, vec![j]);
                self.trusted += 1;
                let r = self.block(&body);
                self.trusted -= 1;
                r
            }
        }
    }
}
