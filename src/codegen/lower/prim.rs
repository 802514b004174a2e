//! Lowering of primitive applications: arithmetic on Doubles and Indices
//! with the evaluator's ⊥ tests (E-Arith-Bot, E-Math-Bot), comparisons,
//! the math functions, pairs and projections, `get` (E-Get-Bot, left out
//! where a loop or a guard proved the read in bounds), `concat`, and
//! `addAt`, in place (Note [In-place updates] in
//! `codegen/passes/inplace.rs`) or into a copy.

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{InstBuilder, MemFlagsData, Value, types};

use super::{Lower, R, Vals, array_elem};
use crate::anf::Atom;
use crate::codegen::abi::{self, CTX_A, CTX_B, CTX_SCRATCH};
use crate::codegen::compile_error;
use crate::codegen::layout::{Leaf, SLOT, elem_bytes, leaves, slots};
use crate::ir::{Prim, Type};

impl Lower<'_, '_> {
    pub(super) fn prim(&mut self, op: Prim, args: &[Atom], ty: &Type) -> R<Vals> {
        if args.len() != op.arity() {
            return Err(compile_error(format!(
                "`{}` with {} arguments",
                op.name(),
                args.len()
            )));
        }
        let at = args[0].ty().clone();
        // A test the bounds guard covers (Note [Bounds guards]).
        let unchecked = std::mem::take(&mut self.unchecked);
        match op {
            Prim::Add | Prim::Sub | Prim::Mul | Prim::Div | Prim::Pow => {
                let (x, y) = (self.scalar(&args[0])?, self.scalar(&args[1])?);
                let r = match at {
                    Type::Double => self.arith_double(op, x, y)?,
                    // `i + c` where the guard proved `c + m ≤ length a`.
                    Type::Index if unchecked && op == Prim::Add => self.b.ins().iadd(x, y),
                    // `i + 1` of a loop index (Note [Known counts]).
                    Type::Index if op == Prim::Add && self.successor(args) => {
                        self.b.ins().iadd(x, y)
                    }
                    Type::Index => self.arith_index(op, x, y)?,
                    _ => return Err(compile_error(format!("`{}` on {at}", op.name()))),
                };
                Ok(vec![r])
            }
            Prim::Neg => {
                let x = self.scalar(&args[0])?;
                Ok(vec![self.neg(x, &at)])
            }
            Prim::Lt | Prim::Gt | Prim::Le | Prim::Ge | Prim::Eq | Prim::Ne => {
                let (x, y) = (self.scalar(&args[0])?, self.scalar(&args[1])?);
                Ok(vec![self.compare(op, x, y, &at)])
            }
            Prim::Not => {
                // E-Not
                let x = self.scalar(&args[0])?;
                Ok(vec![self.b.ins().icmp_imm_s(IntCC::Equal, x, 0)])
            }
            Prim::Sin | Prim::Cos | Prim::Tan | Prim::Log | Prim::Exp | Prim::Sqrt => {
                let x = self.scalar(&args[0])?;
                Ok(vec![self.math(op, x)?])
            }
            Prim::ToDouble => {
                // E-ToDouble: round to nearest, like Rust's `as`.
                let x = self.scalar(&args[0])?;
                Ok(vec![self.b.ins().fcvt_from_sint(types::F64, x)])
            }
            Prim::Pair => {
                // E-Pair: a pair is its components' slots side by side.
                let mut v = self.atom(&args[0])?;
                v.extend(self.atom(&args[1])?);
                Ok(v)
            }
            Prim::Fst | Prim::Snd => {
                // E-Fst, E-Snd
                let Type::Pair(a, _) = &at else {
                    return Err(compile_error("projection of a non-pair"));
                };
                let k = slots(a)?;
                let mut v = self.atom(&args[0])?;
                Ok(if op == Prim::Fst {
                    v.truncate(k);
                    v
                } else {
                    v.split_off(k)
                })
            }
            Prim::Length => {
                // E-Length
                if let Atom::Var(x, _) = &args[0]
                    && self.fused.contains_key(x)
                {
                    return Ok(vec![self.length_of(x)?]);
                }
                let v = self.atom(&args[0])?;
                Ok(vec![v[1]])
            }
            Prim::Get => {
                if let Atom::Var(x, _) = &args[0]
                    && let Some(live) = self.fused.get(x).cloned()
                {
                    return self.fused_get(live, &args[1]);
                }
                self.get(&args[0], &args[1], unchecked)
            }
            Prim::Concat => self.concat(&args[0], ty),
            Prim::Accum => self.accum(&args[0], &args[1], &args[2]),
            Prim::AddAt => {
                let in_place = self.in_place.take().unwrap_or(false);
                self.add_at(&args[0], &args[1], &args[2], in_place, unchecked)
            }
            Prim::Build | Prim::IFold | Prim::IScan | Prim::While => Err(compile_error(format!(
                "`{}` outside a loop of the normal form",
                op.name()
            ))),
        }
    }

    /// E-Arith / E-Arith-Bot on Doubles.
    fn arith_double(&mut self, op: Prim, x: Value, y: Value) -> R<Value> {
        Ok(match op {
            Prim::Add => self.b.ins().fadd(x, y),
            Prim::Sub => self.b.ins().fsub(x, y),
            Prim::Mul => self.b.ins().fmul(x, y),
            Prim::Div if self.nonzero_divisors => self.b.ins().fdiv(x, y),
            Prim::Div => {
                let zero = self.b.ins().f64const(0.0);
                let is_zero = self.b.ins().fcmp(FloatCC::Equal, y, zero);
                let z = self.iconst(0);
                self.fail_if(is_zero, abi::DIVISION_BY_ZERO, z, z);
                self.b.ins().fdiv(x, y)
            }
            Prim::Pow => {
                self.pow_domain(x, y);
                self.call1("fsmooth_pow", &[x, y])?
            }
            _ => return Err(compile_error("not an arithmetic operator")),
        })
    }

    /// E-Arith-Bot for Double `**`: defined when x > 0, or x = 0 and
    /// y ≥ 0, or x < 0 and y is an integer (y − trunc y = 0, false for ±∞).
    fn pow_domain(&mut self, x: Value, y: Value) {
        let zero = self.b.ins().f64const(0.0);
        let pos = self.b.ins().fcmp(FloatCC::GreaterThan, x, zero);
        let x0 = self.b.ins().fcmp(FloatCC::Equal, x, zero);
        let ynn = self.b.ins().fcmp(FloatCC::GreaterThanOrEqual, y, zero);
        let zero_case = self.b.ins().band(x0, ynn);
        let neg = self.b.ins().fcmp(FloatCC::LessThan, x, zero);
        let t = self.b.ins().trunc(y);
        let fract = self.b.ins().fsub(y, t);
        let int = self.b.ins().fcmp(FloatCC::Equal, fract, zero);
        let neg_case = self.b.ins().band(neg, int);
        let ok = self.b.ins().bor(pos, zero_case);
        let ok = self.b.ins().bor(ok, neg_case);
        let bad = self.b.ins().icmp_imm_s(IntCC::Equal, ok, 0);
        let xb = self.b.ins().bitcast(types::I64, MemFlagsData::new(), x);
        let yb = self.b.ins().bitcast(types::I64, MemFlagsData::new(), y);
        self.fail_if(bad, abi::DOMAIN_POW, xb, yb);
    }

    /// E-Arith / E-Arith-Bot on Indices: exact, or `integer-overflow`.
    fn arith_index(&mut self, op: Prim, x: Value, y: Value) -> R<Value> {
        let z = self.iconst(0);
        let checked = |l: &mut Self, (r, of): (Value, Value), k: i64| {
            let k = l.iconst(k);
            l.fail_if(of, abi::OVERFLOW, k, z);
            r
        };
        Ok(match op {
            Prim::Add => {
                let r = self.b.ins().sadd_overflow(x, y);
                checked(self, r, 0)
            }
            Prim::Sub => {
                let r = self.b.ins().ssub_overflow(x, y);
                checked(self, r, 1)
            }
            Prim::Mul => {
                let r = self.b.ins().smul_overflow(x, y);
                checked(self, r, 2)
            }
            Prim::Div => {
                // Division truncates toward zero (`sdiv`), which would trap
                // on these two cases: test them first.
                let y0 = self.b.ins().icmp_imm_s(IntCC::Equal, y, 0);
                self.fail_if(y0, abi::DIVISION_BY_ZERO, z, z);
                let xmin = self.b.ins().icmp_imm_s(IntCC::Equal, x, i64::MIN);
                let ym1 = self.b.ins().icmp_imm_s(IntCC::Equal, y, -1);
                let of = self.b.ins().band(xmin, ym1);
                let k = self.iconst(3);
                self.fail_if(of, abi::OVERFLOW, k, z);
                self.b.ins().sdiv(x, y)
            }
            Prim::Pow => {
                let status = self.call1("fsmooth_ipow", &[self.ctx, x, y])?;
                let flags = MemFlagsData::trusted();
                let a = self.b.ins().load(types::I64, flags, self.ctx, CTX_A);
                let b = self.b.ins().load(types::I64, flags, self.ctx, CTX_B);
                let bad = self.b.ins().icmp_imm_s(IntCC::NotEqual, status, 0);
                self.fail_if_dyn(bad, status, a, b);
                self.b.ins().load(types::I64, flags, self.ctx, CTX_SCRATCH)
            }
            _ => return Err(compile_error("not an arithmetic operator")),
        })
    }

    /// E-Neg: the sign bit of a Double; exact negation of an Index.
    fn neg(&mut self, x: Value, ty: &Type) -> Value {
        if *ty == Type::Double {
            return self.b.ins().fneg(x);
        }
        let min = self.b.ins().icmp_imm_s(IntCC::Equal, x, i64::MIN);
        let (k, z) = (self.iconst(1), self.iconst(0));
        self.fail_if(min, abi::OVERFLOW, k, z);
        self.b.ins().ineg(x)
    }

    /// E-Cmp: IEEE comparisons (false on NaN except `<>`), integer order.
    fn compare(&mut self, op: Prim, x: Value, y: Value, ty: &Type) -> Value {
        if *ty == Type::Double {
            let (cc, swap) = float_cc(op);
            let (x, y) = if swap { (y, x) } else { (x, y) };
            return self.b.ins().fcmp(cc, x, y);
        }
        let cc = match op {
            Prim::Lt => IntCC::SignedLessThan,
            Prim::Gt => IntCC::SignedGreaterThan,
            Prim::Le => IntCC::SignedLessThanOrEqual,
            Prim::Ge => IntCC::SignedGreaterThanOrEqual,
            Prim::Eq => IntCC::Equal,
            _ => IntCC::NotEqual,
        };
        self.b.ins().icmp(cc, x, y)
    }

    /// E-Math / E-Math-Bot, with the evaluator's domain tests.
    fn math(&mut self, op: Prim, x: Value) -> R<Value> {
        let zero = self.b.ins().f64const(0.0);
        let domain = |l: &mut Self, bad: Value, code: i64| {
            let xb = l.b.ins().bitcast(types::I64, MemFlagsData::new(), x);
            let z = l.iconst(0);
            l.fail_if(bad, code, xb, z);
        };
        Ok(match op {
            Prim::Sin => self.call1("fsmooth_sin", &[x])?,
            Prim::Cos => self.call1("fsmooth_cos", &[x])?,
            Prim::Exp => self.call1("fsmooth_exp", &[x])?,
            Prim::Tan => {
                // Dom(tan): x finite and cos x ≠ 0 (spec/semantics.md §4);
                // cos x is NaN exactly when x is not finite.
                let c = self.call1("fsmooth_cos", &[x])?;
                let bad = self.b.ins().fcmp(FloatCC::UnorderedOrEqual, c, zero);
                domain(self, bad, abi::DOMAIN_TAN);
                self.call1("fsmooth_tan", &[x])?
            }
            Prim::Log => {
                let bad = self
                    .b
                    .ins()
                    .fcmp(FloatCC::UnorderedOrLessThanOrEqual, x, zero);
                domain(self, bad, abi::DOMAIN_LOG);
                self.call1("fsmooth_log", &[x])?
            }
            Prim::Sqrt => {
                let bad = self.b.ins().fcmp(FloatCC::UnorderedOrLessThan, x, zero);
                domain(self, bad, abi::DOMAIN_SQRT);
                self.b.ins().sqrt(x)
            }
            _ => return Err(compile_error("not a math function")),
        })
    }

    /// E-Get / E-Get-Bot: one unsigned comparison covers i < 0 and i ≥ n
    /// (none when a bounds guard covers it, `unchecked`).
    pub(super) fn get(&mut self, arr: &Atom, i: &Atom, unchecked: bool) -> R<Vals> {
        let el = array_elem(arr.ty())?.clone();
        let known = match (arr, i) {
            (Atom::Var(a, _), Atom::Var(k, _)) => {
                self.in_bounds.iter().any(|(ki, ai)| ki == k && ai == a)
            }
            _ => false,
        };
        let a = self.atom(arr)?;
        let i = self.scalar(i)?;
        let (p, n) = (a[0], a[1]);
        if self.trusted == 0 && !known && !unchecked {
            let out = self.b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, i, n);
            self.fail_if(out, abi::INDEX_OUT_OF_BOUNDS, i, n);
        }
        let size = elem_bytes(&el)?;
        let at = self.element(p, i, size);
        self.load(&el, at, 0)
    }

    /// E-Concat: sum the lengths, then copy each part's buffer.
    pub(super) fn concat(&mut self, parts: &Atom, ty: &Type) -> R<Vals> {
        let size = elem_bytes(array_elem(ty)?)?;
        let a = self.atom(parts)?;
        let (pp, pn) = (a[0], a[1]);
        let desc = 2 * SLOT;
        let flags = MemFlagsData::trusted();
        let zero = self.iconst(0);
        let total = self.counted_loop(pn, &[zero], |l, k, st| {
            let d = l.element(pp, k, desc);
            let len = l.b.ins().load(types::I64, flags, d, SLOT as i32);
            Ok(vec![l.b.ins().iadd(st[0], len)])
        })?[0];
        self.within_limit(total, 0);
        let dst = self.alloc(total, size)?;
        self.counted_loop(pn, &[zero], |l, k, st| {
            let d = l.element(pp, k, desc);
            let src = l.b.ins().load(types::I64, flags, d, 0);
            let len = l.b.ins().load(types::I64, flags, d, SLOT as i32);
            let to = l.element(dst, st[0], size);
            l.copy(to, src, len, size)?;
            Ok(vec![l.b.ins().iadd(st[0], len)])
        })?;
        Ok(vec![dst, total])
    }

    /// E-AddAt / E-AddAt-Bot: slot `i` of `a` ⊕ `c`, in `a`'s own buffer
    /// when `in_place` (Note [In-place updates] in `codegen/passes/inplace.rs`:
    /// nothing can read the old array), else in a copy.
    /// The bounds test is left out when a bounds guard covers it
    /// (`unchecked`, Note [Bounds guards]).
    fn add_at(&mut self, a: &Atom, i: &Atom, c: &Atom, in_place: bool, unchecked: bool) -> R<Vals> {
        let el = array_elem(a.ty())?.clone();
        let size = elem_bytes(&el)?;
        let av = self.atom(a)?;
        let (p, n) = (av[0], av[1]);
        let i = self.scalar(i)?;
        let cv = self.atom(c)?;
        if !unchecked {
            let out = self.b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, i, n);
            self.fail_if(out, abi::INDEX_OUT_OF_BOUNDS, i, n);
        }
        let dst = if in_place {
            p
        } else {
            let d = self.alloc(n, size)?;
            self.copy(d, p, n, size)?;
            d
        };
        let at = self.element(dst, i, size);
        let old = self.load(&el, at, 0)?;
        let new = self.cotangent_add(&el, &old, &cv)?;
        self.store(&el, &new, at, 0)?;
        Ok(vec![dst, n])
    }

    /// `x ⊕ y` on the slots of two values of type `ty` (spec/semantics.md
    /// §3.7a): Doubles add, arrays concatenate into a new buffer, pairs
    /// componentwise, Index and Bool keep `x`'s.
    fn cotangent_add(&mut self, ty: &Type, x: &[Value], y: &[Value]) -> R<Vals> {
        let mut ls = Vec::new();
        leaves(ty, 0, &mut ls)?;
        let mut out = Vec::with_capacity(x.len());
        let mut k = 0;
        for leaf in ls {
            match leaf {
                Leaf::Double(_) => {
                    out.push(self.b.ins().fadd(x[k], y[k]));
                    k += 1;
                }
                Leaf::Index(_) | Leaf::Bool(_) => {
                    out.push(x[k]);
                    k += 1;
                }
                Leaf::Array(_, e) => {
                    let (xp, xn, yp, yn) = (x[k], x[k + 1], y[k], y[k + 1]);
                    let total = self.b.ins().iadd(xn, yn);
                    let d = self.alloc(total, e)?;
                    self.copy(d, xp, xn, e)?;
                    let tail = self.element(d, xn, e);
                    self.copy(tail, yp, yn, e)?;
                    out.extend([d, total]);
                    k += 2;
                }
            }
        }
        Ok(out)
    }
}

/// The Double comparison `op` as a Cranelift condition, and whether its
/// operands swap: `x > y` is `y < x` (the same IEEE test, false on NaN),
/// the form of Cranelift's `maxsd`/`maxpd` patterns (Note [Selects]).
pub(super) fn float_cc(op: Prim) -> (FloatCC, bool) {
    match op {
        Prim::Lt => (FloatCC::LessThan, false),
        Prim::Gt => (FloatCC::LessThan, true),
        Prim::Le => (FloatCC::LessThanOrEqual, false),
        Prim::Ge => (FloatCC::LessThanOrEqual, true),
        Prim::Eq => (FloatCC::Equal, false),
        _ => (FloatCC::NotEqual, false),
    }
}
